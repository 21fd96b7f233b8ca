"""``adjpos score``: the adjacency score per layer of a random-init or saved model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from adjpos.cli._options import (
    add_config_args,
    config_values,
    write_text,
)


def _run_score(args: argparse.Namespace) -> int:
    import torch

    from adjpos import adjacency_score, build_model, is_position_free, load_model
    from adjpos.models import ModelConfig

    if args.model is not None:
        model = load_model(args.model, device="cpu")
    else:
        model = build_model(ModelConfig(**config_values(args)), device="cpu")
    gen = torch.Generator().manual_seed(args.data_seed)
    tokens = torch.randint(0, model.cfg.d_vocab, (args.n_sequences, args.seq_len), generator=gen)
    scores = adjacency_score(model, tokens, site=args.site, batch_size=args.batch_size)
    kind = model.cfg.positional_embedding_type.replace("standard", "learned-position")
    kind = "NoPE" if is_position_free(model) else kind
    print(f"adjacency score per layer ({kind} model, {args.n_sequences} x {args.seq_len} tokens)")
    print(f"{'layer':>5}  {'adjacency':>9}")
    for layer, value in enumerate(scores.tolist()):
        print(f"{layer:>5}  {value:>9.4f}")
    if args.csv is not None:
        write_text(
            args.csv,
            "layer,adjacency\n"
            + "".join(f"{layer},{value!r}\n" for layer, value in enumerate(scores.tolist())),
        )
    return 0


def add_score_parser(commands: Any) -> None:
    score = commands.add_parser(
        "score",
        help="adjacency score per layer of a random-init (default) or saved model",
        description="Score a model on random tokens and print the adjacency score per layer. "
        "With no options: a 4-layer random-init NoPE model, 64 sequences of 32 tokens.",
    )
    add_config_args(score)
    score.add_argument("--model", type=Path, help="a checkpoint folder (overrides the config)")
    score.add_argument("--n-sequences", type=int, default=64, help="random sequences to score")
    score.add_argument("--seq-len", type=int, default=32, help="tokens per sequence")
    score.add_argument("--data-seed", type=int, default=0, help="seed of the random tokens")
    score.add_argument("--site", default="resid_post", help="hook site to score")
    score.add_argument("--batch-size", type=int, default=None, help="sequences per forward pass")
    score.add_argument("--csv", type=Path, help="also write the table to this CSV file")
    score.set_defaults(run=_run_score)
