"""Train an all-NoPE SmolLM3-style model on a task and compare it with the GPT-2-style model.

The modern architecture (RMSNorm, SwiGLU MLP, grouped-query attention, every layer NoPE:
`adjpos.hf.task_config`) at the width of the shipped fast recipe (4 layers, d_model 64, 4
heads of which 2 key-value heads, MLP width 256), trained by `adjpos.train` through the
bridge with the fast recipe's optimiser settings (`adjpos.pretrained.FAST_TRAIN`), resumable
in ``OUT/TASK/smollm3_seedS``, checked on 2,000 fresh held-out prompts (`heldout_check`).

Then both architectures are measured the same way (`adjpos.measure_layers` on held-out
sequences of one length): the trained SmolLM3 and its initial weights (snapshot 0), beside the
shipped HookedTransformer of the same task, width and recipe (seed 1) and its initial weights.
With ``--install`` a passing model is copied into the package
(``load_pretrained(task, seed, family="smollm3")``). ``--quick``: a tiny model a few steps.

    python examples/train_hf.py [--task reversal] [--seed 0] [--out runs/hf] [--install]
"""

import argparse
import json
import shutil
from pathlib import Path

import pandas as pd
import torch

import adjpos
from adjpos.hf import load_hf, measure_layers, task_config
from adjpos.pretrained import FAST_TRAIN, HERE, RECIPE_STEPS, heldout_check
from adjpos.probes import sequences_of_length
from adjpos.runs import write_json, write_text

FAMILY = "smollm3"
SIZE = {
    "num_hidden_layers": 4,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 256,
}
QUICK_SIZE = {"num_hidden_layers": 1, "hidden_size": 16, "num_attention_heads": 2,
              "num_key_value_heads": 1, "intermediate_size": 32}  # fmt: skip
COMPARE_SEED = 1  # the shipped fast-recipe seed with snapshots (its initial weights)


def train(task_name: str, seed: int, out: Path, quick: bool) -> tuple[Path, dict]:
    folder = out / task_name / f"{FAMILY}_seed{seed}"
    task = adjpos.get_task(task_name)
    settings = {**FAST_TRAIN, "steps": RECIPE_STEPS[task_name], "seed": seed}
    settings |= {"device": "cpu"}
    if quick:
        settings |= {"steps": 20, "eval_every": 10, "eval_size": 8}
    if not (folder / "metrics.json").is_file() or not json.loads(
        (folder / "metrics.json").read_text()
    ).get("stopped_early"):
        model = load_hf(task_config(FAMILY, task_name, QUICK_SIZE if quick else SIZE), seed=seed)
        result = adjpos.train(
            model,
            task,
            adjpos.TrainConfig(**settings),
            out_dir=folder,
            resume=(folder / "run.json").is_file(),
        )
        info = {
            "family": FAMILY,
            "architecture": {**SIZE, "nope": "all"},
            "train": settings,
            "steps": result.steps,
            "seconds": round(result.seconds, 1),
            "accuracy": result.accuracy,
            "stopped_early": result.stopped_early,
            "position_free": result.position_free,
        }
        write_json(folder / "train.json", info)
    check = heldout_check(adjpos.load_model(folder), task, 20 if quick else 2000)
    write_json(folder / "heldout.json", check)
    return folder, check


def compare(task_name: str, folder: Path, quick: bool) -> pd.DataFrame:
    task = adjpos.get_task(task_name)
    gen = torch.Generator().manual_seed(7)
    tokens = sequences_of_length(task, 8 if quick else 128, generator=gen)
    models = {
        ("smollm3", "trained"): adjpos.load_model(folder),
        ("smollm3", "initial"): adjpos.load_model(folder, step=0),
        ("gpt2-style", "trained"): adjpos.load_pretrained(task_name, COMPARE_SEED)[0],
        ("gpt2-style", "initial"): adjpos.load_pretrained(task_name, COMPARE_SEED, step=0)[0],
    }
    tables = []
    for (arch, state), model in models.items():
        table = measure_layers(
            model, tokens, ties="half", probe_features=("variance",), progress=False
        )
        tables.append(table.assign(architecture=arch, weights=state))
    return pd.concat(tables, ignore_index=True)


def install(folder: Path, task_name: str, seed: int) -> Path:
    target = HERE / task_name / f"{FAMILY}_seed{seed}"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name in ("model.safetensors", "config.json", "metrics.json", "train.json", "heldout.json"):
        shutil.copy2(folder / name, target / name)
    return target


def main(task_name: str, seed: int, out: Path, do_install: bool, quick: bool) -> None:
    folder, check = train(task_name, seed, out, quick)
    print(f"{FAMILY} {task_name} seed {seed}: {check['accuracy']:.4f} on held-out prompts")
    table = compare(task_name, folder, quick)
    write_text(out / task_name / f"compare_{FAMILY}_seed{seed}.csv", table.to_csv(index=False))
    wide = table.pivot_table(
        index=["architecture", "weights"], columns="layer", values="adjacency", sort=False
    )
    print("adjacency by layer (ties half):")
    print(wide.round(3).to_string())
    print("variance ratio by layer:")
    ratio = table.pivot_table(
        index=["architecture", "weights"], columns="layer", values="ratio", sort=False
    )
    print(ratio.round(3).to_string())
    if do_install and check["passes"]:
        print("installed", install(folder, task_name, seed))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="reversal", choices=adjpos.TASKS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/hf"))
    parser.add_argument("--install", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a tiny model, 20 steps")
    args = parser.parse_args()
    main(args.task, args.seed, args.out, args.install and not args.quick, args.quick)
