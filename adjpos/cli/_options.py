"""What the commands share: one help style, one option per config field, one helper per shared
option with the resolvers behind it, small parsers and output-path checks: an option two
commands share has one name, one help text and one check."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from pathlib import Path
from typing import Any, no_type_check

from adjpos.models import ModelConfig
from adjpos.pretrained import TEXT_MODELS, load_pretrained, pretrained_folder
from adjpos.tasks import TASKS, VOCAB_SIZE, get_task
from adjpos.validation import DEVICES, UsageError, check_model, resolve_device

PRETRAINED = "pretrained:"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help in one style: each option's default shown once, as "(default: X)" at the end,
    unless its help text already states it or there is none to show (None, a flag)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        flag = action.nargs == 0 and not isinstance(action, argparse.BooleanOptionalAction)
        if "default" in text or flag or action.default in (None, argparse.SUPPRESS, []):
            return text
        return text + " (default: %(default)s)"


def add_config_args(
    parser: argparse.ArgumentParser,
    cls: Any = ModelConfig,
    *,
    title: str = "random model (ModelConfig fields; used with --model random only)",
    overrides: dict[str, Any] | None = None,
    rename: dict[str, str] | None = None,
    exclude: tuple[str, ...] = (),
) -> None:
    """One option per field of a config dataclass (default: `ModelConfig`), its help the
    field's own: `overrides` changes defaults (None: fitted to the task later), `rename` maps
    field -> option name, and fields in `exclude` get none (pass the same `rename` and
    `exclude` to `config_values`)."""
    overrides, rename = overrides or {}, rename or {}
    group = parser.add_argument_group(title)
    for field in dataclasses.fields(cls):
        if field.name in exclude or not field.metadata.get("cli", True):
            continue
        name = rename.get(field.name, field.name)
        default = overrides.get(field.name, field.default)
        help_text = field.metadata.get("help", "")
        if field.name in overrides:
            help_text += f" (default: fits the task, else {field.default})"
        flag = "--" + name.replace("_", "-")
        if field.type in (bool, "bool"):
            action: Any = argparse.BooleanOptionalAction
            group.add_argument(flag, action=action, default=default, help=help_text, dest=name)
        else:
            group.add_argument(
                flag, type=parse_for(field), default=default, help=help_text, dest=name
            )


def parse_for(field: dataclasses.Field) -> Any:
    kinds = {"int": int, "float": float, "str": str}
    names = str(field.type).replace(" ", "").split("|")
    base = next((kinds[n] for n in names if n in kinds), str)

    @no_type_check  # made at every call: kept out of the tests' type checker
    def parse(text: str) -> Any:
        if "None" in names and text.lower() == "none" and field.name != "positional":
            return None
        return base(text)

    parse.__name__ = base.__name__
    return parse


def config_values(
    args: argparse.Namespace,
    cls: Any = ModelConfig,
    rename: dict[str, str] | None = None,
    exclude: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The fields of `cls` parsed by `add_config_args` (with the same `rename` and `exclude`)."""
    rename = rename or {}
    return {
        f.name: getattr(args, rename.get(f.name, f.name))
        for f in dataclasses.fields(cls)
        if f.name not in exclude and f.metadata.get("cli", True)
    }


def add_model_arg(parser: argparse.ArgumentParser, extra: str = "") -> None:
    """``--model random|PATH|pretrained:TASK``: the same meaning in every command."""
    parser.add_argument(
        "--model",
        default="random",
        metavar="random|PATH|pretrained:TASK",
        help="'random' (default): a random-init model from the ModelConfig options below; "
        "PATH: a checkpoint folder (from adjpos train or adjpos.save_model); pretrained:TASK: "
        f"the trained model shipped for TASK, one of {', '.join(TASKS)}; "
        "pretrained:text-LAYOUT:SEED: a small language model trained on Shakespeare, LAYOUT one "
        f"of nope, rope, hybrid. {extra}".rstrip(),
    )


def add_task_args(parser: argparse.ArgumentParser, *, default: str = "") -> None:
    """``--task TASK`` and ``--task-param NAME=VALUE`` (`task_from_args` reads them); `default`
    says in the help what the command does without ``--task``."""
    note = f" (default: {default})" if default else ""
    parser.add_argument(
        "--task",
        choices=TASKS,
        help=f"the synthetic task; its parameters are set with --task-param{note}",
    )
    parser.add_argument(
        "--task-param",
        action="append",
        default=[],
        type=task_param,
        metavar="NAME=VALUE",
        help="a parameter of --task, e.g. max_digits=8 (repeatable)",
    )


def task_param(text: str) -> tuple[str, int | str]:
    """``NAME=VALUE`` -> ``(NAME, VALUE)``, VALUE an int when it reads as one."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, int(value) if value.lstrip("-").isdigit() else value


def task_from_args(args: argparse.Namespace) -> Any:
    """The task that ``--task`` and ``--task-param`` name, or None without ``--task``."""
    if args.task is None:
        if args.task_param:
            raise UsageError("--task-param sets a parameter of --task; give --task too")
        return None
    return for_option(
        "--task-param", lambda params: get_task(args.task, **params), dict(args.task_param)
    )


def add_out_arg(parser: argparse.ArgumentParser, *, default: Path | None = None) -> None:
    """``--out DIR``: the folder a command writes (required unless it has a `default`);
    `check_output_folder` checks it for every command before the command runs."""
    parser.add_argument(
        "--out",
        type=Path,
        required=default is None,
        default=default,
        metavar="DIR",
        help="output folder, created if needed",
    )


def open_run_folder(args: argparse.Namespace, kind: str, spec: dict, **provenance: Any) -> Any:
    """``--out`` as a `kind` run folder (`adjpos.runs.RunFolder.open`), the command line and
    `provenance` (seed, device) recorded with it."""
    from adjpos.runs import RunFolder

    command = "adjpos " + shlex.join(args.argv)
    return RunFolder.open(args.out, kind=kind, spec=spec, command=command, **provenance)


def check_output_folder(path: Path, option: str = "--out") -> Path:
    """Raise naming `option` unless `path` is a folder or one can be made there (no file in
    the way), before any work."""
    for place in (path, *path.parents):
        if place.exists():
            if not place.is_dir():
                what = "is a file" if place == path else f"{place} is a file"
                raise UsageError(
                    f"{option} {path}: {what}; {option} must be a folder (created if needed)"
                )
            break
    return path


def add_batch_size_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch-size", type=positive_int, help="sequences per forward pass (default: all at once)"
    )


def random_tokens(args: argparse.Namespace, model: Any) -> Any:
    """``--n-sequences`` x ``--seq-len`` uniformly random token ids of `model`'s vocabulary,
    drawn with ``--data-seed``; ``--seq-len`` defaults to 32, or n_ctx when that is shorter."""
    import torch

    seq_len = args.seq_len if args.seq_len is not None else min(32, model.cfg.n_ctx)
    gen = torch.Generator().manual_seed(args.data_seed)
    return torch.randint(0, model.cfg.d_vocab, (args.n_sequences, seq_len), generator=gen)


def add_workers_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="worker processes, or CPUs of a local Ray (default: the CPU cores; 0 runs in-process)",
    )


def non_negative_int(text: str) -> int:
    return _int_at_least(text, 0)


def positive_int(text: str) -> int:
    """A count (sequences, tokens, folds, ...): argparse names the option in its error."""
    return _int_at_least(text, 1)


def sequence_length(text: str) -> int:
    """Tokens per sequence: the adjacency score compares two earlier positions with a third."""
    return _int_at_least(text, 3)


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise argparse.ArgumentTypeError(f"expected an int >= {low}, got {text!r}")
    return value


def read_text_file(path: Path, option: str) -> str:
    """The UTF-8 text of file `path`, given with `option`, or an error naming both."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise OSError(f"{option} {path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{option} {path}: not a UTF-8 text file (byte {err.object[err.start]:#04x} at "
            f"offset {err.start}); give a UTF-8 text file"
        ) from None


def add_engine_args(parser: argparse.ArgumentParser) -> None:
    """``--engine process|ray`` and ``--address``: where the units of a long job run."""
    from adjpos.engines import ENGINES, RAY_EXTRA

    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="process",
        help="where the units of work run: a local process pool, or Ray tasks (a local Ray, "
        f"or the cluster at --address; needs the ray extra: {RAY_EXTRA})",
    )
    parser.add_argument(
        "--address",
        help="an existing Ray cluster to run on (with --engine ray), e.g. auto or "
        "ray://HOST:10001 (default: start a local Ray)",
    )


def add_device_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device", choices=DEVICES, default="auto", help="where to run; auto = cuda when available"
    )


def resolve_model(
    spec: str,
    *,
    device: Any,
    config_values: dict[str, Any] | None = None,
    task: Any = None,
) -> tuple[Any, Any]:
    """``(model, task)``: the model that ``--model SPEC`` names, on `device`, and `task` (the
    caller's, or None for random tokens; a pretrained model brings its own when none is given).

    SPEC ``"random"`` builds a fresh model from `config_values` (ModelConfig fields; d_vocab
    or n_ctx None fit `task`, else take ModelConfig's defaults), ``"pretrained:TASK"`` loads
    the model shipped for TASK, anything else a checkpoint folder. A `UsageError` says what
    is wrong (the device, the name, the folder, the config or the weights).
    """
    device = resolve_device(device)
    if spec != "random":
        if spec.startswith(PRETRAINED):
            model, task = _pretrained(spec.removeprefix(PRETRAINED), device, task)
        else:
            model = _checkpoint(spec, device)
        check_no_config_options(config_values, f"--model {spec}")
        return check_model(model), task
    from adjpos.models import build_model

    values = dict(config_values or {})
    if values.get("d_vocab") is None:
        values["d_vocab"] = VOCAB_SIZE if task is not None else ModelConfig.d_vocab
    if values.get("n_ctx") is None:
        values["n_ctx"] = task.max_len if task is not None else ModelConfig.n_ctx
    return build_model(ModelConfig(**values), device=device), task


def _checkpoint(spec: str, device: Any) -> Any:
    """The adjpos checkpoint folder ``--model SPEC``; an error says what --model accepts."""
    from adjpos.models import load_model

    forms = (
        f"--model takes random, a checkpoint folder (from adjpos train or adjpos.save_model) or "
        f"{PRETRAINED}TASK[:SEED] (TASK one of {', '.join((*TASKS, *TEXT_MODELS))})"
    )
    if not Path(spec).exists():
        raise UsageError(f"--model {spec}: no such checkpoint folder; {forms}")
    try:
        return load_model(spec, device=device)
    except UsageError as err:
        if not (Path(spec) / "config.json").is_file():
            raise UsageError(f"--model {spec}: {err}; {forms}") from None
        raise UsageError(f"--model {spec}: {err}") from None


def check_no_config_options(values: dict[str, Any] | None, source: str) -> None:
    """Refuse ModelConfig options (any value but the default) given with a model that brings
    its own architecture: `source` (``--model PATH``, ``--hf NAME``) would silently ignore them.
    """
    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    given = [
        "--" + name.replace("_", "-") + f" {value}"
        for name, value in (values or {}).items()
        if value is not None and value != defaults.get(name)
    ]
    if given:
        raise UsageError(
            f"{', '.join(given)}: the ModelConfig options build a random model (--model "
            f"random); {source} brings its own architecture, so leave them out"
        )


def _pretrained(spec: str, device: Any, task: Any) -> tuple[Any, Any]:
    """``TASK`` (seed 0) or ``TASK:SEED``."""
    name, seed = _pretrained_name(spec)
    try:
        model, trained_on = load_pretrained(name, seed, device=str(device))
    except UsageError as err:
        raise UsageError(f"--model {PRETRAINED}{spec}: {err}") from None
    if name in TEXT_MODELS:  # trained on text: no task of its own (its tokenizer instead)
        return model, task
    return model, task if task is not None else trained_on


def _pretrained_name(spec: str) -> tuple[str, int]:
    """``NAME`` (seed 0) or ``NAME:SEED`` -> (name, seed), NAME a task or a text model."""
    name, _, seed = spec.partition(":")
    if name not in (*TASKS, *TEXT_MODELS) or (seed and not seed.isdigit()):
        raise UsageError(
            f"--model {PRETRAINED}{spec}: unknown task or seed; choose one of "
            f"{[PRETRAINED + t for t in (*TASKS, *TEXT_MODELS)]}, optionally with a seed "
            f"({PRETRAINED}TASK:1)"
        )
    return name, int(seed or 0)


def model_tokenizer(spec: str) -> Any:
    """The tokenizer that comes with the adjpos model ``--model SPEC`` names (a text model:
    ``pretrained:text-LAYOUT[:SEED]`` or a folder holding ``tokenizer.json``), or None."""
    from adjpos.text.tokenizer import TOKENIZER_FILE, load_tokenizer

    if spec == "random":
        return None
    if spec.startswith(PRETRAINED):
        folder = pretrained_folder(*_pretrained_name(spec.removeprefix(PRETRAINED)))
    else:
        folder = Path(spec)
    return load_tokenizer(folder) if (folder / TOKENIZER_FILE).is_file() else None


def check_output_file(path: Path, option: str) -> Path:
    """Raise naming `option` and `path` unless a file can be written there (before any work)."""
    from adjpos.runs import check_writable

    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give the path of a file")
    try:
        check_writable(path.parent)
    except OSError as err:
        raise OSError(f"{option} {path}: {err}") from None
    return path


def for_option(option: str, check: Any, value: Any) -> Any:
    """``check(value)``, its `UsageError` prefixed with the option it came from."""
    try:
        return check(value)
    except UsageError as err:
        raise UsageError(f"{option}: {err}") from None


def nope_layers_arg(text: str) -> str | int | list[int]:
    """``--nope-layers`` -> `adjpos.load_hf`'s `nope_layers`: ``all``, ``none`` and
    ``released`` as they are, ``every:K`` -> K, comma-separated indices -> a list of ints."""
    from adjpos.models.nope_layers import NAMED_LAYOUTS

    text = text.strip()
    if text in NAMED_LAYOUTS:
        return text
    every = text.removeprefix("every:")
    if every != text and every.isdigit() and int(every) >= 1:
        return int(every)
    items = comma_list(text)
    if items and all(item.isdigit() for item in items):
        return [int(item) for item in items]
    raise argparse.ArgumentTypeError(
        f"expected all, none, released, every:K (K >= 1) or comma-separated layer indices, "
        f"got {text!r}"
    )


def comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def comma_doses(text: str) -> list[int | float]:
    """Comma-separated doses: each an int, or a fraction below 1 (``0.5,1,2``)."""
    try:
        return [int(item) if item.strip().isdigit() else float(item) for item in comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None


def comma_ints(text: str) -> list[int]:
    try:
        return [int(item) for item in comma_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None
