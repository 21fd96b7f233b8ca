"""``adjpos score``: the adjacency score per layer, with each layer's kind (NoPE, RoPE, ...), of
a random-init, saved or shipped adjpos model, or of a Hugging Face model (``--hf``) on text
(``--text``) or random token ids (``--random-tokens``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from adjpos.cli._inputs import check_hf_gguf
from adjpos.cli._options import (
    add_batch_size_arg,
    add_config_args,
    add_device_arg,
    add_model_arg,
    check_no_config_options,
    check_output_file,
    config_values,
    model_tokenizer,
    nope_layers_arg,
    positive_int,
    random_tokens,
    read_text_file,
    resolve_model,
    sequence_length,
)
from adjpos.validation import UsageError, resolve_device


def add_score_parser(commands: Any) -> None:
    from adjpos.capture import SITES
    from adjpos.metrics import DEFAULT_TIES
    from adjpos.metrics.checks import TIES
    from adjpos.models.config import DTYPES

    score = commands.add_parser(
        "score",
        help="adjacency score per layer of a random-init (default), saved, shipped or Hugging "
        "Face model",
        description="Score a model on uniformly random tokens of its vocabulary (or on text "
        "with --text: a Hugging Face model or a text model) and print the adjacency score and "
        "the kind of each layer. With no options: a 4-layer random-init NoPE model, 64 "
        "sequences of 32 tokens.",
    )
    add_model_arg(score)
    score.add_argument(
        "--hf",
        metavar="FOLDER|NAME",
        help="a Hugging Face causal LM instead of --model: a folder written by save_pretrained, "
        "or a hub name (needs the network); needs --text or --random-tokens",
    )
    score.add_argument(
        "--nope-layers",
        type=nope_layers_arg,
        metavar="all|none|released|every:K|I,J,...",
        help="with --hf: remove RoPE from these layers of the weights (adjpos.load_hf's "
        "nope_layers): all; none (RoPE kept, the NoPE variants' matched control); released "
        "(SmolLM3's layout); every:K (layer i when (i + 1) %% K == 0, so every:4 is layers 3, "
        "7, ...); or layer indices from 0, e.g. 0,5. For Llama (SmolLM2 too), Qwen2, Qwen3 and "
        "SmolLM3 models; the other layers keep the checkpoint's RoPE (default: the model as it "
        "is)",
    )
    source = score.add_mutually_exclusive_group()
    source.add_argument(
        "--text",
        type=Path,
        help="with --hf or a text model's --model (pretrained:text-LAYOUT:SEED or a folder "
        "holding tokenizer.json): a UTF-8 text file, tokenized once with the model's tokenizer "
        "(stored with it), without special tokens, and cut into consecutive sequences of --seq-len "
        "tokens (at most --n-sequences of them, from the start; the tail is dropped); see "
        "adjpos.hf.text_tokens",
    )
    source.add_argument(
        "--random-tokens",
        action="store_true",
        help="with --hf: uniformly random token ids (a model without a tokenizer)",
    )
    score.add_argument(
        "--n-sequences", type=positive_int, default=64, help="random sequences to score"
    )
    score.add_argument(
        "--seq-len",
        type=sequence_length,
        help="tokens per sequence (default: 32, or the model's n_ctx when that is shorter)",
    )
    score.add_argument(
        "--bos",
        action="store_true",
        help="with --text: start every sequence with the tokenizer's BOS token (then "
        "--seq-len - 1 text tokens); without it every token is text",
    )
    score.add_argument("--data-seed", type=int, default=0, help="seed of the random tokens")
    score.add_argument(
        "--ties",
        choices=TIES,
        default=DEFAULT_TIES,
        help="how a tied pair of cosines counts, with adjpos.adjacency_score's default: strict "
        "(the paper's rule: not ordered, so chance is below 0.5 where states tie, as repeated "
        "tokens' embeddings do) or half (one half ordered: chance 0.5 on any data)",
    )
    score.add_argument(
        "--center",
        action="store_true",
        help="subtract each sequence's mean state before the cosine (a direction every state "
        "shares leaves the similarities)",
    )
    score.add_argument(
        "--skip-first",
        type=int,
        default=0,
        metavar="K",
        help="leave the first K positions out of the measure (attention sinks: a BOS token, "
        "position 0 of a language model)",
    )
    score.add_argument(
        "--site",
        choices=SITES,
        default="resid_post",
        help="hook site to score: resid_post is the residual stream, n_layers + 1 values "
        "(0 = embeddings); the others give one value per block",
    )
    add_batch_size_arg(score)
    add_device_arg(score)
    score.add_argument("--csv", type=Path, help="also write the table to this CSV file")
    add_config_args(score, exclude=("dtype",))
    score.add_argument(
        "--dtype",
        choices=DTYPES,
        help="parameter dtype: of a random model (float32 unless given), or the dtype a Hugging "
        "Face model (--hf) is loaded in (its checkpoint's own unless given; float64 gives exact "
        "float64 states)",
    )
    score.set_defaults(run=_run_score)


def _run_score(args: argparse.Namespace) -> int:
    from adjpos import adjacency_score
    from adjpos.engines import small_work_threads
    from adjpos.hf import capture_kinds, load_hf, load_tokenizer, text_tokens
    from adjpos.tables import Table

    device = resolve_device(args.device)
    if args.csv is not None:
        check_output_file(args.csv, "--csv")
    if args.hf is None and args.random_tokens:
        raise UsageError("--random-tokens goes with --hf (a Hugging Face model)")
    if args.hf is None and args.nope_layers is not None:
        raise UsageError("--nope-layers goes with --hf (a Hugging Face model)")
    text = None if args.text is None else read_text_file(args.text, "--text")
    if args.hf is not None:
        if args.model != "random":
            raise UsageError("pass either --model or --hf, not both")
        if args.text is None and not args.random_tokens:
            raise UsageError(
                "--hf needs --text FILE (scored with the model's tokenizer) or --random-tokens"
            )
        check_no_config_options(_model_values(args, dtype=False), f"--hf {args.hf}")
        check_hf_gguf(args.hf)
        model = load_hf(args.hf, device=device, dtype=args.dtype, nope_layers=args.nope_layers)
        name = args.hf
        if args.nope_layers is not None:
            name += f" with nope_layers={args.nope_layers!r}"
        tokenizer = args.hf
    else:
        tokenizer = model_tokenizer(args.model) if args.text is not None else None
        if args.text is not None and tokenizer is None:
            raise UsageError(
                "--text needs a model with a tokenizer: --hf, or --model pretrained:text-LAYOUT "
                "or a folder holding tokenizer.json (a model trained with adjpos train --text)"
            )
        model, _ = resolve_model(args.model, device=device, config_values=_model_values(args))
        name = args.model
    seq_len = args.seq_len if args.seq_len is not None else min(32, model.cfg.n_ctx)
    if seq_len > model.cfg.n_ctx:
        raise UsageError(f"--seq-len {seq_len}: at most the model's n_ctx, {model.cfg.n_ctx}")
    if text is not None:
        tokens = text_tokens(
            load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer,
            text,
            seq_len,
            max_sequences=args.n_sequences,
            bos=args.bos,
        )
        bos = "with BOS" if args.bos else "no BOS"
        what = f"{len(tokens)} x {seq_len} tokens of {args.text}, {bos}"
    else:
        if args.bos:
            raise UsageError("--bos goes with --text (random tokens have no BOS token)")
        tokens = random_tokens(args, model)
        what = f"{args.n_sequences} x {seq_len} random tokens"
    options = {"ties": args.ties, "center": args.center, "skip_first": args.skip_first}
    run = {"site": args.site, "batch_size": args.batch_size}
    with small_work_threads(model):
        scores = adjacency_score(model, tokens, **run, **options).tolist()
    kinds = capture_kinds(model, args.site)
    settings = ", ".join(f"{key}={value}" for key, value in options.items())
    print(f"adjacency score per layer of {name} ({args.site}, {what}; {settings})")
    print(f"{'layer':>5}  {'kind':<12}  {'adjacency':>9}")
    rows = []
    for layer, (kind, value) in enumerate(zip(kinds, scores, strict=True)):
        print(f"{layer:>5}  {kind:<12}  {value:>9.4f}")
        rows.append({"layer": layer, "kind": kind, "adjacency": value})
    if args.csv is not None:
        Table(layer="int64", kind="string", adjacency="float64").write(args.csv, rows)
    return 0


def _model_values(args: argparse.Namespace, *, dtype: bool = True) -> dict[str, Any]:
    """The ModelConfig options given, ``--dtype`` among them when `dtype` and given (with
    --hf it is the dtype the model loads in, no option of a random model)."""
    values = config_values(args, exclude=("dtype",))
    if dtype and args.dtype is not None:
        values["dtype"] = args.dtype
    return values
