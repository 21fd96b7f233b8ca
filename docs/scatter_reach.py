"""Where the scatter of a run's interior reaches the sizes of the shifts (docs/causal.md,
"Sizes"): per task, layer and prompt length of the shipped seed-0 models, the size of the full
interior shift by 1 and by 2 (the smaller of +m and -m, the doses' sizes) beside the scatter's
fullest change (fraction 1) in each of the study's draws, on the study's fitting prompts.

    python docs/scatter_reach.py [TASK ...] [--layers 1 2] [--draws 20] [--prompts 200]
"""

from __future__ import annotations

import argparse
import functools

import torch

from adjpos.interventions.curve.arms import TOLERANCE, CurveArm
from adjpos.interventions.curve.change import _layouts, dose_targets, length_size
from adjpos.interventions.curve.position import position_curves
from adjpos.interventions.prompts import fit_prompt_states, held_out_prompts
from adjpos.pretrained import load_pretrained
from adjpos.study.sizes import SIZES


def _runs(task, tokens):
    return task.runs(task.decode(tokens))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    tasks = ["reversal", "indexing", "addition", "ordering"]
    parser.add_argument("tasks", nargs="*", default=tasks)
    parser.add_argument("--layers", type=int, nargs="+", default=list(SIZES["full"].curve_layers))
    parser.add_argument("--draws", type=int, default=SIZES["full"].curve_draws)
    parser.add_argument("--prompts", type=int, default=SIZES["full"].curve_prompts)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print("task layer length prompts  shift1 shift2  scatter (least, most)  reaches")
    for name in args.tasks:
        model, task = load_pretrained(name, 0)
        held = held_out_prompts(task, args.prompts, seed=0)
        for layer in args.layers:
            prompts = fit_prompt_states(model, task, held, layer, seed=0)
            for n, curve in position_curves(prompts).items():
                layouts = _layouts(prompts[n], functools.partial(_runs, task))
                target = dose_targets(curve, layouts, offsets=[1, 2])
                full = [
                    length_size(CurveArm("scatter", draw=d), 1.0, curve, layouts)
                    for d in range(args.draws)
                ]
                reaches = [m for m in (1, 2) if min(full) >= target[m] * (1 - TOLERANCE)]
                print(
                    f"{name:<9}{layer:>5}{n:>7}{len(prompts[n][0]):>8}"
                    f"{target[1]:>8.3f}{target[2]:>7.3f}   {min(full):.3f}, {max(full):.3f}"
                    f"          {' '.join(f'shift{m}' for m in reaches) or '-'}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
