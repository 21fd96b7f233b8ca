"""Time and peak memory of the per-layer measures against one plain forward pass of the batch.

Each layer is measured inside its hook during one forward pass (`adjpos.capture.reduce_
residuals`), so `adjpos.adjacency_score` (what ``adjpos score --hf`` runs) and
`adjpos.measure_layers` should cost about one forward pass of the same batch: targets at
most 1.3x its time and 1.5x its peak memory. Variants, each in a fresh process (model
built or loaded, warmed up on a tiny input, peak RSS reset, then the variant timed
``--repeats`` times):

- ``forward``: the reference, ``model(tokens)`` under `torch.inference_mode` (logits
  included, as any plain forward pass);
- ``score``: ``adjpos.adjacency_score(model, tokens)``;
- ``measure_layers``: ``adjpos.measure_layers(model, tokens)`` (1000 bootstrap resamples).

The variants run one after another (never side by side, so they do not share the cores),
for ``--rounds`` rounds; times and peaks are medians over the rounds. The model is a random
SmolLM3-style bridge (`adjpos.hf_config`) unless ``--hf SOURCE`` names a real one (anything
`adjpos.load_hf` reads: a folder, or a .gguf file once the ``gguf`` extra is installed).
``--json PATH`` also writes every number to PATH, atomically.

Usage:
    python benchmarks/bench_one_pass.py [--quick] [--json PATH]
    python benchmarks/bench_one_pass.py --hf SOURCE --batch 64 --pos 128 --rounds 1 --repeats 1
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import torch

import adjpos
from adjpos.runs import versions, write_json

TIME_TARGET, MEMORY_TARGET = 1.3, 1.5
VARIANTS = ("forward", "score", "measure_layers")
FULL = {
    "size": {"num_hidden_layers": 12, "hidden_size": 256, "intermediate_size": 512},
    "vocab": 8192,
    "batch": 32,
    "pos": 128,
    "rounds": 3,
    "repeats": 3,
}
QUICK = {
    "size": {"num_hidden_layers": 4, "hidden_size": 64, "intermediate_size": 128},
    "vocab": 256,
    "batch": 8,
    "pos": 32,
    "rounds": 1,
    "repeats": 3,
}

# The peak-RSS helpers and the fresh processes are bench_adjacency's: one way to read a peak.
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from bench_adjacency import _peak_mb, _reset_peak, in_fresh_processes  # noqa: E402


def build(spec: dict):
    """The model the spec names: a real one (``source``) or a random SmolLM3-style bridge."""
    if spec.get("source"):
        return adjpos.load_hf(spec["source"], dtype=torch.float32)
    size = {**spec["size"], "vocab_size": spec["vocab"], "max_position_embeddings": spec["pos"]}
    return adjpos.load_hf(adjpos.hf_config("smollm3", size))


def run_variant(variant: str, model, tokens: torch.Tensor) -> None:
    if variant == "forward":
        with torch.inference_mode():
            model(tokens)
    elif variant == "score":
        adjpos.adjacency_score(model, tokens, progress=False)
    else:
        adjpos.measure_layers(model, tokens, progress=False)


def child(variant: str, spec: dict) -> dict:
    """Run one variant in this (fresh) process `repeats` times: the median seconds and the
    peak memory above setup."""
    model = build(spec)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, model.cfg.d_vocab, (spec["batch"], spec["pos"]), generator=gen)
    run_variant(variant, model, tokens[:2, :8])  # lazy imports and the numba kernel load here
    _reset_peak()
    baseline = _peak_mb()
    times = []
    for _ in range(spec["repeats"]):
        start = time.perf_counter()
        run_variant(variant, model, tokens)
        times.append(time.perf_counter() - start)
    seconds, layers = statistics.median(times), model.cfg.n_layers
    return {"seconds": seconds, "peak_mb": _peak_mb() - baseline, "n_layers": layers}


def measure(spec: dict, rounds: int) -> dict:
    """Every variant in a fresh process of its own, one at a time, for `rounds` rounds;
    medians."""
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for variant in VARIANTS:
            runs[variant] += in_fresh_processes(child, [(variant, spec)])
    rows = []
    ref_s = statistics.median(r["seconds"] for r in runs["forward"])
    ref_mb = statistics.median(r["peak_mb"] for r in runs["forward"])
    for variant, found in runs.items():
        seconds = statistics.median(r["seconds"] for r in found)
        peak = statistics.median(r["peak_mb"] for r in found)
        rows.append(
            {
                "variant": variant,
                "seconds": seconds,
                "peak_mb": peak,
                "time_ratio": seconds / ref_s,
                "memory_ratio": peak / ref_mb if ref_mb > 0 else None,
            }
        )
    return {"n_layers": runs["forward"][0]["n_layers"], "rounds": rounds, "rows": rows}


def print_table(spec: dict, result: dict) -> None:
    what = spec.get("source") or f"random SmolLM3-style bridge {spec['size']}"
    print(
        f"per-layer measures against one plain forward pass: {what}, "
        f"{result['n_layers']} blocks, {spec['batch']} x {spec['pos']} tokens, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads "
        f"(medians of {result['rounds']} round(s) of {spec['repeats']} call(s), "
        "peak RSS above setup)"
    )
    print(f"{'variant':<15} {'seconds':>9} {'x forward':>10} {'peak MB':>9} {'x forward':>10}")
    for r in result["rows"]:
        print(
            f"{r['variant']:<15} {r['seconds']:>9.2f} {r['time_ratio']:>10.2f} "
            f"{r['peak_mb']:>9.1f} {r['memory_ratio'] or float('nan'):>10.2f}"
        )
    print(f"targets: score at most {TIME_TARGET}x the time and {MEMORY_TARGET}x the memory")


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the variants, print the table and optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny model (a smoke run)")
    parser.add_argument("--hf", metavar="SOURCE", help="a real model (folder or .gguf)")
    parser.add_argument("--batch", type=int, help="sequences in the batch")
    parser.add_argument("--pos", type=int, help="tokens per sequence")
    parser.add_argument("--rounds", type=int, help="rounds of the three variants")
    parser.add_argument("--repeats", type=int, help="timed calls per variant and round")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    args = parser.parse_args(argv)
    spec = dict(QUICK if args.quick else FULL)
    spec["source"] = args.hf
    for name in ("batch", "pos", "rounds", "repeats"):
        if getattr(args, name) is not None:
            spec[name] = getattr(args, name)
    result = measure(spec, spec["rounds"])
    print_table(spec, result)
    if args.json:
        machine = {"platform": platform.platform(), "threads": torch.get_num_threads()}
        machine |= {"quick": args.quick, "versions": versions()}
        write_json(args.json, {"machine": machine, "settings": spec, **result})


if __name__ == "__main__":
    main()
