"""Exact-match accuracy of each shipped model on fresh held-out prompts (default 2,000).

The prompts come from the test split (never trained on), drawn with a seed that training
did not use. Public API only; ``--quick`` checks 50 prompts per model.

    python examples/check_pretrained.py [--quick] [--n 2000] [--seed 2026]
"""

import argparse

import torch

import adjpos
from adjpos.pretrained import available_pretrained, load_pretrained, pretrained_info


def main(n: int, seed: int) -> None:
    print(f"{'task':<10}{'parameters':>11}{'steps':>7}{'train s':>9}{'accuracy':>10}  (n={n})")
    for name in available_pretrained():
        model, task = load_pretrained(name, device="cpu")
        prompts = task.draw_prompts(n, generator=torch.Generator().manual_seed(seed), split="test")
        accuracy, _ = adjpos.evaluate(model, task, prompts)
        info = pretrained_info(name)
        print(
            f"{name:<10}{info['parameters']:>11}{info['steps']:>7}{info['seconds']:>9.0f}"
            f"{accuracy:>10.4f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 prompts per model")
    parser.add_argument("--n", type=int, default=2000, help="prompts per model")
    parser.add_argument("--seed", type=int, default=2026, help="seed of the prompts")
    args = parser.parse_args()
    main(50 if args.quick else args.n, args.seed)
