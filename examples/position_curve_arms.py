"""The position-curve arms on a shipped model: is the curve an address the model matches?

At one layer of a shipped trained model, each prompt state's position curve (fitted on other
prompts of its length after removing each token's mean state) is shifted by +-k, rotated
inside its principal subspace, partly scattered, or pulled toward its mean, and a random
curve of the same norm profile is added as the control, every arm matched in change size to
the full shift by m at each size m of the dose (`adjpos.interventions.curve_change`; the
arms are entries of the intervention table, run by `intervention_table`). The read-out
position is kept, so the change is the prompt's alone and decoding reuses a key-value cache.
For each arm: its parameter, its change size (on the fitting prompts, and measured while
decoding), exact match with its paired difference from the random control (95% interval over
prompts and control draws), the share of wrong answer characters at offsets -1 and +1 of the
one asked for, and its manipulation check; then the rule's outcome
(`adjpos.interventions.curve_rule`). Public API only; ``--quick`` runs 40 prompts, one size
and two draws.

    python examples/position_curve_arms.py [--quick] [--task reversal] [--seed 0]
        [--layer 1] [--n 200] [--doses 1 2 3] [--draws 20] [--readout kept]
"""

import argparse

import adjpos
from adjpos.interventions import SPECS, cell_numbers, intervention_table
from adjpos.interventions.curve_rule import hypothesis_outcomes

COLUMNS = ["arm", "parameter", "size_target", "perturbation", "exact_match", "difference"]
COLUMNS += ["difference_low", "difference_high", "error_offset_share_-1"]
COLUMNS += ["error_offset_share_1", "prompt_adjacency", "distance_change", "check_passed"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--task", default="reversal")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layer", type=int, default=1)
    parser.add_argument("--n", type=int, default=200, help="test prompts")
    parser.add_argument("--doses", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--readout", default="kept", choices=["kept", "changed"])
    args = parser.parse_args()
    if args.quick:
        args.n, args.doses, args.draws = 40, [1], 2
    model, task = adjpos.load_pretrained(args.task, args.seed, device="cpu")
    arms = [name for name, spec in SPECS.items() if spec.dosed]
    table, differences = intervention_table(
        model,
        task,
        layers=[args.layer],
        interventions=arms,
        n_prompts=args.n,
        control_draws=args.draws,
        doses=args.doses,
        readouts=[args.readout],
        seed=args.seed,
        model_seed=args.seed,
        return_differences=True,
    )
    print(f"{args.task} seed {args.seed} layer {args.layer}, read-out {args.readout}: ")
    print(f"{table['n_prompts'].iloc[0]} test prompts, {args.draws} draws of each drawn arm")
    for dose, rows in table.groupby("dose"):
        print(f"\nsize of the full shift by {dose}: {rows['size_target'].iloc[0]:.4f}")
        print(rows[COLUMNS].round(3).to_string(index=False))
    (cell,) = cell_numbers(table, differences, readout=args.readout)
    result = hypothesis_outcomes([cell])["cells"][cell.key]
    print(
        f"\naddress {result.address}, relational {result.relational}, "
        f"locality {result.locality}: {result.reading}"
    )
    if result.not_counted:
        print(f"not counted (check failed): {list(result.not_counted)}")


if __name__ == "__main__":
    main()
