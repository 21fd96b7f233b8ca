"""GGUF checkpoints (llama.cpp's single-file format) read through transformers, dequantised
to ordinary float models; reading needs the ``gguf`` extra: ``pip install -e ".[gguf]"``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from adjpos.validation import UsageError

GGUF_INSTALL = 'pip install -e ".[gguf]" (or pip install gguf)'


def find_gguf(source: str | os.PathLike) -> Path | None:
    """The .gguf file `source` names: itself, or the one .gguf in a folder that has no
    ``config.json`` (a folder with a config is a Hugging Face folder). None otherwise; a
    missing .gguf path or a folder of several raise `ValueError`."""
    path = Path(source)
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise UsageError(f"no such GGUF file: {str(path)!r}")
        return path
    if not path.is_dir() or (path / "config.json").is_file():
        return None
    found = sorted(path.glob("*.gguf"))
    if len(found) > 1:
        names = [f.name for f in found]
        raise UsageError(f"{str(path)!r} holds {len(found)} GGUF files {names}: pass one of them")
    return found[0] if found else None


def check_gguf_reader() -> None:
    """Raise, naming the extra, unless the ``gguf`` package transformers reads GGUF with is
    installed."""
    from transformers.utils import is_gguf_available

    if not is_gguf_available():
        raise UsageError(f"reading a .gguf file needs the gguf package: {GGUF_INSTALL}")


def gguf_config(path: Path) -> Any:
    """The `transformers` config stored in the GGUF file's metadata."""
    import transformers

    check_gguf_reader()
    try:
        return transformers.AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    except (OSError, ValueError, KeyError) as err:
        raise UsageError(f"cannot read {str(path)!r} as a GGUF model: {err}") from None


def load_gguf(path: Path, *, dtype: torch.dtype | None = None) -> Any:
    """The causal LM of the GGUF file `path`, its weights dequantised to `dtype` (default
    float32) and its quantizer dropped (so ``save_pretrained`` writes a plain folder)."""
    import transformers

    check_gguf_reader()
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=dtype or torch.float32
    )
    # The weights are plain floats already, but transformers refuses to save a model that
    # still carries the GGUF quantizer.
    hf.hf_quantizer = None
    hf.is_quantized = False
    if hasattr(hf.config, "quantization_config"):
        del hf.config.quantization_config
    return hf
