"""The position-curve arms on a shipped model: is the curve an address the model matches?

At one layer of a shipped trained model, each prompt state's position curve (fitted on other
prompts of its length after removing each token's mean state) is shifted by +-k, rotated
inside its principal subspace, partly scattered, or pulled toward its mean, and a random
curve of the same norm profile is added as the control (`adjpos.interventions.curve_arms`),
every arm matched in change size to the full shift by k. The read-out position is kept, so
the change is the prompt's alone and decoding reuses a key-value cache. For each arm: its
parameter, its change size (on the fitting prompts, and measured while decoding the test
prompts), exact match with its paired difference from the random control (95% interval over
prompts and control draws), the share of wrong answer characters at offset j of the one asked
for, and its manipulation checks; then the rule's outcome (`curve_rule`). Public API only;
``--quick`` runs 40 prompts, one size and two draws.

    python examples/position_curve_arms.py [--quick] [--task reversal] [--seed 0]
        [--layer 1] [--n 200] [--n-fit N] [--offsets 1 2 3] [--draws 20]
"""

import argparse

import numpy as np

import adjpos
from adjpos.interventions import fit_prompt_states, held_out_prompts, position_curves
from adjpos.interventions.curve_arms import (
    CurveArm,
    apply_curve,
    change_size,
    changed_positions,
    dose_targets,
    match_arm,
)
from adjpos.interventions.curve_checks import (
    TASK_OFFSETS,
    curve_adjacency,
    curve_distance_change,
    error_offset_shares,
    passes_check,
    prompt_adjacency,
    varying_positions,
)
from adjpos.interventions.curve_rule import (
    CellNumbers,
    Interval,
    SizeNumbers,
    hypothesis_outcomes,
    paired_draw_difference,
)
from adjpos.training.decode import predict_cached


def header(span):
    """The table's header, with an error-offset column for each j in `span`."""
    return (
        f"{'arm':<18}{'param':>7}{'size':>7}{'decode':>8}{'exact':>7} {'- random [95%]':>22}"
        + "".join(f"{'off' + format(j, '+d'):>7}" for j in span)
        + f"{'adj':>6}{'curve':>6}{'dist':>6}{'check':>7}"
    )


def decode(model, task, prompts, layer, arm, parameter, curves, states):
    """Greedy answers with `arm` at `parameter` applied to the prompt pass at `layer`, and
    the mean relative change of the changed states the pass made."""
    new = {
        n: arm.new_curve(c, parameter, changed_positions(n), states[n][0])
        for n, c in curves.items()
    }
    record = []

    def hook(acts, hook):
        n = acts.shape[1]
        changed = changed_positions(n)
        after = apply_curve(acts, curves[n], new[n], changed)
        count = acts.shape[0] * int(changed.sum())
        record.append((float(change_size(acts, after, changed)) * count, count))
        return after

    def prompt_pass():
        return model.hooks(fwd_hooks=[(f"blocks.{layer}.hook_resid_pre", hook)])

    answers = predict_cached(model, task, prompts, prompt_pass=prompt_pass)
    return answers, sum(s for s, _ in record) / sum(c for _, c in record), new


def checks_of(arm, matched, curves, states, new):
    """The arm's manipulation-check numbers, pooled over lengths (weights: prompts)."""
    distance, adjacency, before, weight = 0.0, 0.0, 0.0, 0
    curve_after, curve_before = 0.0, 0.0
    for n, curve in curves.items():
        changed, fit = changed_positions(n), states[n][0].double()
        after = apply_curve(fit, curve, new[n], changed)
        w = fit.shape[0]
        distance += w * curve_distance_change(curve, new[n], changed)
        adjacency += w * float(prompt_adjacency(after, changed).nanmean())
        before += w * float(prompt_adjacency(fit, changed).nanmean())
        varying = changed & varying_positions(states[n][1])  # the format's tokens left out
        curve_after += w * curve_adjacency(new[n], varying)
        curve_before += w * curve_adjacency(curve, varying)
        weight += w
    return {
        "size": matched.size,
        "target": matched.target,
        "offset": arm.offset,
        "distance_change": distance / weight,
        "adjacency": adjacency / weight,
        "adjacency_before": before / weight,
        "curve_adjacency": curve_after / weight,
        "curve_adjacency_before": curve_before / weight,
    }


def run_size(model, task, held, layer, k, target, curves, states, draws, seed, baseline, span):
    """Every arm matched to `target`; returns the rule's numbers of this size and prints."""
    prompts, answers = list(held.test.prompts), list(held.test.answers)
    arms = {
        f"shift{k:+d}": [CurveArm("shift", k, seed=seed)],
        f"shift{-k:+d}": [CurveArm("shift", -k, seed=seed)],
        "rotate": [CurveArm("rotate", seed=seed)],
        "scatter": [CurveArm("scatter", draw=d, seed=seed) for d in range(draws)],
        "remove": [CurveArm("remove", seed=seed)],
        "random": [CurveArm("random", draw=d, seed=seed) for d in range(draws)],
    }
    hits, shares, checks, lines = {}, {}, {}, []
    for name, draws_of in arms.items():
        rows, said, sizes, params, passed, adjacency = [], [], [], [], [], []
        for arm in draws_of:
            matched = match_arm(arm, target, curves, states)
            got, size, new = decode(
                model, task, prompts, layer, arm, matched.parameter, curves, states
            )
            numbers = checks_of(arm, matched, curves, states, new)
            rows.append([g == a for g, a in zip(got, answers, strict=True)])
            said += got
            sizes.append(size)
            params.append(matched.parameter)
            passed.append(passes_check(arm.arm, numbers))
            adjacency.append(
                [numbers[c] for c in ("adjacency", "curve_adjacency", "distance_change")]
            )
        hits[name] = np.array(rows, dtype=float)
        shares[name] = error_offset_shares(
            said, answers * len(draws_of), prompts * len(draws_of), task.name, offsets=span
        )
        checks[name] = all(passed)
        lines.append((name, np.mean(params), target, np.mean(sizes), np.mean(adjacency, axis=0)))
    hits["unchanged"] = baseline[None]
    differences = {}
    pairs = [(a, "random") for a in arms if a != "random"] + [("rotate", "unchanged")]
    pairs += [("scatter", "rotate")] + [
        (a, s) for s in arms if s.startswith("shift") for a in ("rotate", "scatter")
    ]
    for a, b in pairs:
        differences[(a, b)] = paired_draw_difference(hits[a], hits[b], seed=seed)
    for name, param, size, decoded, adjacency in lines:
        d = differences.get((name, "random"))
        versus = f"{d.value:+.3f} [{d.low:+.3f},{d.high:+.3f}]" if d else ""
        offsets = "".join(f"{shares[name][f'error_offset_share_{j}']:>7.2f}" for j in span)
        print(
            f"{name:<18}{param:>7.3f}{size:>7.3f}{decoded:>8.3f}{hits[name].mean():>7.3f}"
            f" {versus:>22}{offsets}{''.join(f'{v:>6.2f}' for v in adjacency)}"
            f"{'ok' if checks[name] else 'FAIL':>7}"
        )
    offsets = {
        name: {
            j: Interval(
                shares[name][f"error_offset_share_{j}"],
                shares[name][f"error_offset_share_{j}_low"],
                shares[name][f"error_offset_share_{j}_high"],
            )
            for j in span
        }
        for name in arms
        if name.startswith("shift")
    }
    return SizeNumbers(target, differences, checks, offsets)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--task", default="reversal")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layer", type=int, default=1)
    parser.add_argument("--n", type=int, default=200, help="test prompts")
    parser.add_argument("--n-fit", type=int, default=None, help="fitting prompts (default --n)")
    parser.add_argument("--offsets", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--draws", type=int, default=20)
    args = parser.parse_args()
    if args.quick:
        args.n, args.offsets, args.draws = 40, [1], 2
    model, task = adjpos.load_pretrained(args.task, args.seed, device="cpu")
    held = held_out_prompts(task, args.n, n_fit=args.n_fit, seed=args.seed)
    states = fit_prompt_states(model, task, held, args.layer, seed=args.seed)
    need = {len(task.encode(p)) for p in held.test.prompts}
    curves = {n: c for n, c in position_curves(states).items() if n in need}
    base = predict_cached(model, task, list(held.test.prompts))
    baseline = np.array([a == b for a, b in zip(base, held.test.answers, strict=True)], float)
    print(
        f"{args.task} seed {args.seed} layer {args.layer}: {len(base)} test prompts, "
        f"{len(held.fit.prompts)} fitting prompts, "
        f"exact match unchanged {baseline.mean():.3f}"
    )
    sizes = []
    reach = max(2, *args.offsets)
    span = range(-reach, reach + 1)  # error offsets: -2..2, and +-k for every shift
    for k, target in dose_targets(curves, states, offsets=args.offsets).items():
        print(f"\nsize of the full shift by {k}: {target:.4f}")
        print(header(span))
        sizes.append(
            run_size(
                model,
                task,
                held,
                args.layer,
                k,
                target,
                curves,
                states,
                args.draws,
                args.seed,
                baseline,
                span,
            )
        )
    cell = CellNumbers((args.task, args.layer, args.seed), sizes, TASK_OFFSETS[args.task].direction)
    result = hypothesis_outcomes([cell])["cells"][cell.key]
    print(
        f"\naddress {result.address}, relational {result.relational}, "
        f"locality {result.locality}: {result.reading}"
    )
    if result.not_counted:
        print(f"not counted (check failed): {list(result.not_counted)}")


if __name__ == "__main__":
    main()
