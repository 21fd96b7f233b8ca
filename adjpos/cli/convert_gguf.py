"""``adjpos convert-gguf``: a GGUF file (llama.cpp's format) written as a Hugging Face folder."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from adjpos.cli._inputs import check_gguf_file


def add_convert_gguf_parser(commands: Any) -> None:
    convert = commands.add_parser(
        "convert-gguf",
        help="write a GGUF model file as a normal Hugging Face folder (float weights)",
        description="Read a GGUF file (llama.cpp's format; quantised weights are dequantised "
        "to float32) and write its config, weights and tokenizer as a Hugging Face folder, "
        "which adjpos.load_hf, adjpos score --hf and transformers read. Needs the gguf extra: "
        'pip install -e ".[gguf]".',
    )
    convert.add_argument("file", type=Path, help="the .gguf file (or a folder holding one)")
    convert.add_argument("--out", type=Path, required=True, help="the folder to write")
    convert.set_defaults(run=_run_convert)


def _run_convert(args: argparse.Namespace) -> int:
    from adjpos.hf import convert_gguf
    from adjpos.models.gguf import find_gguf

    # Any file is read as GGUF (its name aside), so that a text file is told apart from a
    # GGUF file cut short, before transformers reads it.
    gguf = args.file if args.file.is_file() else find_gguf(args.file)
    if gguf is not None:
        check_gguf_file(gguf)
    folder = convert_gguf(args.file, args.out)
    print(f"wrote {folder} (config.json, model.safetensors, tokenizer)")
    return 0
