"""The position-curve arms on a shipped model: which part of the curve does the model read?

At one layer of a shipped trained model, each prompt state's position curve (fitted on other
prompts of its length after removing each token's mean state) is changed on the prompt's runs
(`adjpos.tasks.Task.runs`, the digits): shifted by +-k inside each run, rotated inside its
principal subspace, its interior scattered, pulled toward its mean, or a random curve of the
same norm profile added as the control, every arm matched in change size, at every prompt
length, to the full interior shift by m at each size m of the dose; and each run's edges
moved to the points just outside it, beside a random curve on those positions of the same
size (`adjpos.interventions.curve`; the arms are entries of the intervention table, run by
`intervention_table`). The read-out position is kept, so the change is the prompt's alone and
decoding reuses a key-value cache. For each arm: its parameter, its change size (on the
fitting prompts, and over the prompt's states while decoding), exact match with its paired
difference from its random control (95% interval over prompts and control draws), the share
of wrong answer characters at offsets -1 and +1 of the one asked for, and its manipulation
check as the study judges it; then the rule's outcome (`adjpos.study.rules`, the study's
default criteria). Public API only; ``--quick`` runs 16 prompts, one size and two draws.

    python examples/position_curve_arms.py [--quick] [--task reversal] [--seed 0]
        [--layer 1] [--n 200] [--doses 1 2 3] [--draws 20]
"""

import argparse

import adjpos
from adjpos.interventions import SPECS, cell_numbers, intervention_table
from adjpos.study.claim import Criteria
from adjpos.study.rules import hypothesis_outcomes, row_passed

HEAD = f"{'arm':<13}{'param':>7}{'size':>7}{'decode':>8}{'exact':>7} {'- control [95%]':>22}"
HEAD += f"{'off-1':>7}{'off+1':>7}{'adj':>6}{'dist':>6}{'check':>7}"


def line(r):
    """One arm's row: its parameter, target and decoded sizes, exact match, difference from
    its random control, wrong answers at offsets -1 and +1, prompt adjacency, the change of
    the curve's distances, and its check."""
    versus = ""
    if r["difference"] == r["difference"]:  # not NaN: a tested arm
        versus = f"{r['difference']:+.3f} [{r['difference_low']:+.3f},{r['difference_high']:+.3f}]"
    return (
        f"{r['arm']:<13}{r['parameter']:>7.3f}{r['size_target']:>7.3f}{r['perturbation']:>8.3f}"
        f"{r['exact_match']:>7.3f} {versus:>22}{r['error_offset_share_-1']:>7.2f}"
        f"{r['error_offset_share_1']:>7.2f}{r['prompt_adjacency']:>6.2f}"
        f"{r['distance_change']:>6.2f}{'ok' if row_passed(r) else 'FAIL':>7}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--task", default="reversal")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layer", type=int, default=1)
    parser.add_argument("--n", type=int, default=200, help="test prompts")
    parser.add_argument("--doses", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--draws", type=int, default=20)
    args = parser.parse_args()
    if args.quick:
        args.n, args.doses, args.draws = 16, [1], 2
    model, task = adjpos.load_pretrained(args.task, args.seed, device="cpu")
    arms = ["none", *(name for name, spec in SPECS.items() if spec.dosed)]
    table, differences = intervention_table(
        model,
        task,
        layers=[args.layer],
        interventions=arms,
        n_prompts=args.n,
        control_draws=args.draws,
        doses=args.doses,
        readouts=["kept"],
        seed=args.seed,
        model_seed=args.seed,
        return_differences=True,
    )
    unchanged = table.loc[table["arm"].isna(), "exact_match"].iloc[0]
    print(
        f"{args.task} seed {args.seed} layer {args.layer}, read-out kept: "
        f"{table['n_prompts'].iloc[0]} test prompts, {args.draws} draws of each drawn arm, "
        f"exact match unchanged {unchanged:.3f}"
    )
    for dose, rows in table.dropna(subset=["arm"]).groupby("dose"):
        print(f"\nsize of the full shift by {dose}: {rows['size_target'].iloc[0]:.4f}")
        print(HEAD)
        for r in rows.to_dict("records"):
            print(line(r))
    (cell,) = cell_numbers(table, differences)
    result = hypothesis_outcomes([cell], Criteria())["cells"][cell.key]
    print(
        f"\naddress {result.address}, relational {result.relational}, "
        f"locality {result.locality}: {result.reading}"
    )
    if result.not_counted:
        print(f"not counted (check failed): {list(result.not_counted)}")


if __name__ == "__main__":
    main()
