"""The draws of a random control: decoded one by one without a cache against stacked in one
batched pass with a key-value cache.

For one shipped model, layer and read-out variant (``kept``, the variant the study's verdicts
use), builds `--draws` draws of a random control that needs no fitting
(``norm_scale_control``) and of one that does (``subspace_swap_random``), and measures them
three ways on the same held-out prompts:
- ``reference``: one `measure_draws` per draw with ``kv_cache=False`` (greedy decoding
  re-runs the whole sequence under the hook for every new token), the way the causal stage
  ran before the cache;
- ``cached``: one `measure_draws` per draw (its prompt pass under the hook, then a
  key-value cache);
- ``stacked``: one `measure_draws` for all draws (`Stacked`: every draw in one batch).
Prints the wall times, the reference's time over each, and checks that all three give every
draw the same exact match on every prompt. ``--json PATH`` also writes the numbers to PATH,
atomically; ``--quick`` is a smoke run (few prompts and draws).

    python benchmarks/bench_draws.py [--task addition] [--draws 20] [--prompts 500]
        [--readout kept] [--json PATH]
"""

import argparse
import platform
import time

import torch

import adjpos
from adjpos.interventions import (
    SPECS,
    Fitted,
    fit_states,
    held_out_prompts,
    measure_draws,
)
from adjpos.runs import versions, write_json

LAYER = 1


def timed(work):
    start = time.perf_counter()
    result = work()
    return result, time.perf_counter() - start


def main(task_name: str, draws: int, prompts: int, readout: str, json_path: str | None) -> None:
    torch.set_num_threads(1)
    model, task = adjpos.load_pretrained(task_name)
    held = held_out_prompts(task, prompts, seed=0)
    states, positions = fit_states(model, held.fit, LAYER)
    print(
        f"{task_name}, layer {LAYER}, read-out {readout}, {len(held.test.prompts)} prompts, "
        "1 thread"
    )
    print(
        f"{'control':<22}{'draws':>6}{'reference s':>13}{'cached s':>10}{'stacked s':>11}"
        f"{'x cached':>10}{'x stacked':>11}{'same':>6}"
    )
    kwargs = {"layer": LAYER, "batch": held.test, "readout": readout}
    rows = []
    for name in ("norm_scale_control", "subspace_swap_random"):
        fitted = Fitted(model.cfg.d_model, states=states, positions=positions)
        built = [SPECS[name].build(fitted, draw=d) for d in range(draws)]
        old, reference = timed(
            lambda built=built: [
                measure_draws(model, task, [iv], **kwargs, kv_cache=False)[0] for iv in built
            ]
        )
        alone, cached = timed(
            lambda built=built: [measure_draws(model, task, [iv], **kwargs)[0] for iv in built]
        )
        together, stacked = timed(lambda built=built: measure_draws(model, task, built, **kwargs))
        runs = zip(old, alone, together, strict=True)
        same = all(r["hits"] == a["hits"] == b["hits"] for r, a, b in runs)
        print(
            f"{name:<22}{draws:>6}{reference:>13.1f}{cached:>10.1f}{stacked:>11.1f}"
            f"{reference / cached:>10.1f}{reference / stacked:>11.1f}{'yes' if same else 'NO':>6}"
        )
        rows.append({"control": name, "draws": draws, "reference_s": reference})
        rows[-1] |= {"cached_s": cached, "stacked_s": stacked, "same_hits": same}
        rows[-1] |= {"speedup_cached": reference / cached, "speedup_stacked": reference / stacked}
    if json_path is not None:
        machine = {"platform": platform.platform(), "versions": versions()}
        settings = {"task": task_name, "draws": draws, "prompts": prompts, "readout": readout}
        write_json(json_path, {"machine": machine, "settings": settings, "rows": rows})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="addition", choices=adjpos.TASKS)
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--prompts", type=int, default=500)
    parser.add_argument("--readout", default="kept", choices=["kept", "changed"])
    parser.add_argument("--quick", action="store_true", help="24 prompts, 3 draws")
    parser.add_argument("--json", metavar="PATH", help="also write the rows to PATH as JSON")
    args = parser.parse_args()
    if args.quick:
        args.prompts, args.draws = 24, 3
    main(args.task, args.draws, args.prompts, args.readout, args.json)
