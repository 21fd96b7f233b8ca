"""Checks of user input shared across adjpos: each raises an error naming the value and what is
allowed, before any work starts (checks that belong to one package live there). `UsageError`,
a `ValueError`, is adjpos's own error for input it refuses: the command line reports it (exit
code 2) and lets any other exception, a bug, show its traceback.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable
from typing import Any

DEVICES = ("auto", "cpu", "cuda")


class UsageError(ValueError):
    """Input that adjpos refuses: a bad argument, option, config value, file or folder. The
    message names the value and what is allowed.

    Example:
        >>> check_positive_int("n_sequences", 0)
        Traceback (most recent call last):
        ...
        adjpos.validation.UsageError: n_sequences must be a positive int, got 0
    """


def help_field(text: str, default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field whose ``help`` metadata doubles as the command line's ``--help``."""
    return dataclasses.field(default=default, metadata={"help": text})


def known_fields(cls: Any, data: dict[str, Any]) -> dict[str, Any]:
    """The items of `data` that are fields of dataclass `cls`; unknown keys (from newer or older
    files) are warned about, not fatal."""
    known = {f.name for f in dataclasses.fields(cls)}
    if unknown := sorted(set(data) - known):
        warnings.warn(f"ignoring unknown {cls.__name__} keys: {unknown}", stacklevel=3)
    return {k: v for k, v in data.items() if k in known}


def is_int(value: Any) -> bool:
    """True for an int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_positive_int(name: str, value: Any) -> int:
    """Return `value`, or raise `UsageError` unless it is an int >= 1."""
    if not is_int(value) or value < 1:
        raise UsageError(f"{name} must be a positive int, got {value!r}")
    return value


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> Any:
    """Return `value`, or raise `UsageError` listing `allowed` when it is not one of them."""
    allowed = list(allowed)
    if value not in allowed:
        raise UsageError(f"{name}={value!r} is not allowed; choose one of {allowed}")
    return value


def check_int_list(name: str, values: Any) -> list[int]:
    """A non-empty list of ints (such as seeds), or `UsageError`."""
    values = list(values) if isinstance(values, Iterable) and not isinstance(values, str) else None
    if not values or not all(is_int(v) for v in values):
        raise UsageError(f"{name} must be a non-empty list of ints, got {values!r}")
    return values


def check_generator(generator: Any) -> None:
    """Raise `TypeError` unless `generator` is a CPU `torch.Generator` (adjpos never uses the
    global RNG: randomness is always passed in)."""
    import torch

    if not isinstance(generator, torch.Generator) or generator.device.type != "cpu":
        raise TypeError(
            "generator must be a CPU torch.Generator (e.g. torch.Generator().manual_seed(0)), "
            f"got {generator!r}"
        )


def resolve_device(device: Any) -> Any:
    """The `torch.device` meant by `device`: None or "auto" is CUDA when present, else the CPU
    (a `UsageError` for an unknown name, or for CUDA asked for and absent)."""
    import torch

    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise UsageError(
            f"device={device!r} is not a device; choose one of {list(DEVICES)} "
            "(or a torch device such as 'cuda:1')"
        ) from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"device={device!r} was asked for but CUDA is not available; use 'cpu'")
    return resolved


def check_model(model: Any, name: str = "model", *, cache: bool = False) -> Any:
    """Return `model` once it is a TransformerLens model (a torch module with a ``cfg``) whose
    weights are all finite (`check_finite_weights`), else a `TypeError` naming the argument
    `name` (and, with `cache`, that an `ActivationCache` would do too)."""
    import torch

    if not isinstance(model, torch.nn.Module) or not hasattr(model, "cfg"):
        also = " or the ActivationCache of model.run_with_cache(tokens)" if cache else ""
        raise TypeError(
            f"{name} must be a TransformerLens model (adjpos.build_model, load_model, "
            f"load_pretrained or load_hf make one){also}, got {type(model).__name__}"
        )
    return check_finite_weights(model)


def check_finite_weights(model: Any) -> Any:
    """Return `model`, or raise `UsageError` naming its first parameter that holds NaN or
    infinite values: such a weight need not show in the activations (a NaN query weight can
    vanish in the attention mask) and would give finite, meaningless scores. One float32 sum
    per parameter (NaN and infinity survive any sum); only a tensor whose sum is not finite
    is counted value by value.

    Example:
        >>> import torch
        >>> layer = torch.nn.Linear(2, 2)
        >>> layer.cfg = None
        >>> with torch.no_grad():
        ...     layer.weight[0, 0] = float("nan")
        >>> check_finite_weights(layer)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        adjpos.validation.UsageError: the model's parameter weight holds 1 NaN or infinite value ...
    """
    import torch

    for name, param in model.named_parameters():
        weights = param.detach()
        if not weights.is_floating_point() or torch.sum(weights, dtype=torch.float32).isfinite():
            continue
        bad = int((~torch.isfinite(weights)).sum())
        if bad:
            values = "value" if bad == 1 else "values"
            raise UsageError(
                f"the model's parameter {name} holds {bad} NaN or infinite {values} of "
                f"{param.numel()}; every weight must be finite (a diverged training run or a "
                "damaged checkpoint?): scores of such a model mean nothing"
            )
    return model
