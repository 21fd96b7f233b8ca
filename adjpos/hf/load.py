"""Tokenize text for a Hugging Face model (`load_tokenizer`, `text_tokens`); the bridged model
itself is loaded, saved and recognised in `adjpos.models.bridge`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

from adjpos.models.bridge import hub_offline
from adjpos.models.gguf import check_gguf_reader, find_gguf
from adjpos.validation import UsageError, check_positive_int

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def load_tokenizer(source: str | os.PathLike, *, offline: bool | None = None) -> Any:
    """The tokenizer stored beside a model (a folder, a GGUF file, which holds its tokenizer,
    or a hub name with the network); a `ValueError` when there is none."""
    import transformers

    if (gguf := find_gguf(source)) is not None:
        check_gguf_reader()
        return transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
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


def text_tokens(
    tokenizer: Any,
    text: str,
    seq_len: int,
    *,
    max_sequences: int | None = None,
    bos: bool = False,
) -> Int[Tensor, "batch pos"]:
    """Text as a batch of token ids [n, seq_len]: the one way adjpos turns text into model
    input. The whole text is tokenized once without special tokens and cut into consecutive
    sequences (at most `max_sequences`, from the start; the incomplete tail is dropped). With
    `bos` every sequence starts with the tokenizer's BOS token, followed by the next
    ``seq_len - 1`` text tokens. `tokenizer` is a `transformers` tokenizer or where one is
    stored (read with `load_tokenizer`). Too short a text, a `bos` tokenizer without a BOS
    token, or bad counts raise `ValueError`.

    Example:
        >>> from transformers import PreTrainedTokenizerFast
        >>> from tokenizers import Tokenizer, models, pre_tokenizers
        >>> words = {w: i for i, w in enumerate(["<s>", "a", "b", "c", "d", "<unk>"])}
        >>> raw = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
        >>> raw.pre_tokenizer = pre_tokenizers.Whitespace()
        >>> tok = PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<s>")
        >>> text_tokens(tok, "a b c d a b c", 3)
        tensor([[1, 2, 3],
                [4, 1, 2]])
        >>> text_tokens(tok, "a b c d a b c", 3, bos=True)
        tensor([[0, 1, 2],
                [0, 3, 4],
                [0, 1, 2]])
    """
    check_positive_int("seq_len", seq_len)
    if max_sequences is not None:
        check_positive_int("max_sequences", max_sequences)
    if isinstance(tokenizer, str | os.PathLike):
        tokenizer = load_tokenizer(tokenizer)
    if bos and getattr(tokenizer, "bos_token_id", None) is None:
        raise UsageError(
            "this tokenizer has no BOS token (bos_token_id is None): score without a BOS "
            "token (bos=False, the default; no --bos on the command line)"
        )
    if bos and seq_len < 2:
        raise UsageError(f"seq_len={seq_len} leaves no room for text after the BOS token")
    prefix = [int(tokenizer.bos_token_id)] if bos else []
    step = seq_len - len(prefix)
    ids = torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=torch.long)
    n = len(ids) // step
    if max_sequences is not None:
        n = min(n, max_sequences)
    if n == 0:
        raise UsageError(
            f"the text has {len(ids)} tokens, fewer than one sequence of {step} text tokens: "
            "pass more text or a shorter --seq-len"
        )
    body = ids[: n * step].view(n, step)
    return torch.cat([torch.tensor(prefix, dtype=torch.long).expand(n, -1), body], dim=1)
