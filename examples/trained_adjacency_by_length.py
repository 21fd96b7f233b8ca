"""Adjacency score and exact-match accuracy of the shipped models on prompts up to twice the
longest training prompt (ordering: up to ten distinct digits).

NoPE models have no weight tied to the context length, so each model is loaded with a longer
context and given prompts with more digits than it was trained on. Public API only;
``--quick`` is the test suite's smoke run.

    python examples/trained_adjacency_by_length.py [--quick]
"""

import argparse

import torch

import adjpos
from adjpos.pretrained import available_pretrained

WIDEST = {"ordering": 10}  # distinct digits: at most ten


def widened(name: str, digits: int):
    """The task with exactly `digits` digits per operand."""
    params = {"min_digits": digits, "max_digits": digits}
    if name == "addition":
        params["max_prompt_len"] = 2 * digits + 2
    return adjpos.get_task(name, **params)


def digit_counts(name: str, trained, quick: bool) -> list[int]:
    """From half the training digits up to prompts twice the longest training prompt."""
    top, widest = trained.max_digits, trained.max_digits
    while (
        widest + 1 <= WIDEST.get(name, 10**6)
        and widened(name, widest + 1).max_prompt_len <= 2 * trained.max_prompt_len
    ):
        widest += 1
    counts = sorted({max(1, top // 2), top, (top + widest) // 2, widest})
    return counts[-2:] if quick else counts


def main(quick: bool) -> None:
    n = 8 if quick else 64
    print(
        f"{'task':<9}{'digits':>7}{'tokens':>7}{'accuracy':>10}  adjacency by layer ({n} prompts)"
    )
    for name in available_pretrained():
        _, trained = adjpos.load_pretrained(name, device="cpu")
        for digits in digit_counts(name, trained, quick):
            task = widened(name, digits)
            model, _ = adjpos.load_pretrained(name, device="cpu", n_ctx=task.max_len)
            prompts = task.draw_prompts(n, generator=torch.Generator().manual_seed(0), split="test")
            accuracy, _ = adjpos.evaluate(model, task, prompts)
            tokens = torch.stack([task.encode(p) for p in prompts])
            scores = adjpos.adjacency_score(model, tokens)
            row = " ".join(f"{s:.3f}" for s in scores.tolist())
            print(f"{name:<9}{digits:>7}{tokens.shape[1]:>7}{accuracy:>10.3f}  {row}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny smoke run")
    main(parser.parse_args().quick)
