"""A GGUF file (llama.cpp's format) as a normal Hugging Face folder (`convert_gguf`), which
loads faster than the file itself (dequantised on every load) and any Hugging Face tool reads.
"""

from __future__ import annotations

import os
from pathlib import Path

from adjpos.models.gguf import find_gguf, load_gguf
from adjpos.validation import UsageError


def convert_gguf(source: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write the GGUF model `source` (a .gguf file, or a folder holding one) as a Hugging Face
    folder `out`: ``config.json``, float32 ``model.safetensors`` (dequantised) and the
    tokenizer. ``adjpos.load_hf(out)`` then gives the same model as ``adjpos.load_hf(source)``.
    `out` must not hold a model already (a config.json).
    """
    import transformers

    gguf = find_gguf(source)
    if gguf is None:
        raise UsageError(f"{str(source)!r} is not a .gguf file or a folder holding one")
    folder = Path(out)
    if (folder / "config.json").exists():
        raise UsageError(f"{str(folder)!r} already holds a model (config.json): pick a new folder")
    hf = load_gguf(gguf)  # checks for the gguf package first
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    folder.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
