"""``adjpos score``: the adjacency score per layer of a random-init, saved or shipped model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from adjpos.cli._options import (
    add_config_args,
    add_device_arg,
    add_model_arg,
    check_output_file,
    config_values,
    resolve_model,
)


def add_score_parser(commands: Any) -> None:
    from adjpos.capture import SITES

    score = commands.add_parser(
        "score",
        help="adjacency score per layer of a random-init (default), saved or shipped model",
        description="Score a model on uniformly random tokens of its vocabulary and print the "
        "adjacency score per layer. With no options: a 4-layer random-init NoPE model, 64 "
        "sequences of 32 tokens.",
    )
    add_model_arg(score)
    score.add_argument("--n-sequences", type=int, default=64, help="random sequences to score")
    score.add_argument(
        "--seq-len",
        type=int,
        help="tokens per sequence (default: 32, or the model's n_ctx when that is shorter)",
    )
    score.add_argument("--data-seed", type=int, default=0, help="seed of the random tokens")
    score.add_argument(
        "--site",
        choices=SITES,
        default="resid_post",
        help="hook site to score: resid_post is the residual stream, n_layers + 1 values "
        "(0 = embeddings); the others give one value per block",
    )
    score.add_argument(
        "--batch-size", type=int, help="sequences per forward pass (default: all at once)"
    )
    add_device_arg(score)
    score.add_argument("--csv", type=Path, help="also write the table to this CSV file")
    add_config_args(score, title="random model (ModelConfig fields; used with --model random only)")
    score.set_defaults(run=_run_score)


def _run_score(args: argparse.Namespace) -> int:
    import torch

    from adjpos import adjacency_score, is_position_free
    from adjpos.tables import Table
    from adjpos.validation import resolve_device

    device = resolve_device(args.device)
    if args.csv is not None:
        check_output_file(args.csv, "--csv")
    model, _ = resolve_model(args.model, device=device, config_values=config_values(args))
    seq_len = args.seq_len if args.seq_len is not None else min(32, model.cfg.n_ctx)
    gen = torch.Generator().manual_seed(args.data_seed)
    tokens = torch.randint(0, model.cfg.d_vocab, (args.n_sequences, seq_len), generator=gen)
    scores = adjacency_score(model, tokens, site=args.site, batch_size=args.batch_size).tolist()
    kind = model.cfg.positional_embedding_type.replace("standard", "learned-position")
    kind = "NoPE" if is_position_free(model) else kind
    print(
        f"adjacency score per layer of {args.model} ({kind} model, {args.site}, "
        f"{args.n_sequences} x {seq_len} random tokens)"
    )
    print(f"{'layer':>5}  {'adjacency':>9}")
    for layer, value in enumerate(scores):
        print(f"{layer:>5}  {value:>9.4f}")
    if args.csv is not None:
        rows = [{"layer": layer, "adjacency": value} for layer, value in enumerate(scores)]
        Table(layer="int64", adjacency="float64").write(args.csv, rows)
    return 0
