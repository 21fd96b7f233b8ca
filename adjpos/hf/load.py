"""Tokenize text for a Hugging Face model (`load_tokenizer`, `text_tokens`).

Loading, saving and recognising the bridged model itself live in `adjpos.models.bridge`, which
this package builds on; its names are re-exported here (``adjpos.hf.load.load_hf``, ...).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from adjpos.models.bridge import (
    WEIGHT_FILES,
    bridge_of,
    hf_state_dict,
    hub_offline,
    is_bridge,
    is_hf_folder,
    load_hf,
    save_hf,
    supported_architectures,
)
from adjpos.validation import UsageError, check_positive_int

__all__ = [
    "TOKENIZER_FILES",
    "WEIGHT_FILES",
    "bridge_of",
    "hf_state_dict",
    "is_bridge",
    "is_hf_folder",
    "load_hf",
    "load_tokenizer",
    "save_hf",
    "supported_architectures",
    "text_tokens",
]

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def load_tokenizer(source: str | os.PathLike, *, offline: bool | None = None) -> Any:
    """The tokenizer stored beside a model (a folder, or a hub name with the network).

    Raises:
        ValueError: no tokenizer files there (or the hub is out of reach); score random
            token ids instead (``adjpos score --random-tokens``).
    """
    import transformers

    offline = hub_offline() if offline is None else bool(offline)
    folder = Path(source)
    if folder.is_dir() and not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise UsageError(
            f"the folder {str(source)!r} has no tokenizer (none of {list(TOKENIZER_FILES)}); "
            "save one there with tokenizer.save_pretrained, or score random token ids "
            "(--random-tokens)"
        )
    try:
        return transformers.AutoTokenizer.from_pretrained(str(source), local_files_only=offline)
    except (OSError, ValueError, TypeError) as err:
        where = "folder" if Path(source).is_dir() else "hub name (offline?)"
        raise UsageError(
            f"no tokenizer could be loaded from the {where} {str(source)!r} ({err}); save one "
            "there with tokenizer.save_pretrained, or score random token ids "
            "(--random-tokens)"
        ) from None


def text_tokens(tokenizer: Any, text: str, seq_len: int, *, max_sequences: int | None = None):
    """Token ids of `text` cut into consecutive sequences of `seq_len` tokens [n, seq_len]
    (the incomplete tail is dropped).

    Raises:
        ValueError: `text` has fewer than `seq_len` tokens.
    """
    check_positive_int("seq_len", seq_len)
    ids = torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=torch.long)
    n = len(ids) // seq_len
    if max_sequences is not None:
        n = min(n, max_sequences)
    if n == 0:
        raise UsageError(
            f"the text has {len(ids)} tokens, fewer than one sequence of {seq_len}: pass more "
            "text or a shorter --seq-len"
        )
    return ids[: n * seq_len].view(n, seq_len)
