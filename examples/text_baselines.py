"""What the text models can and cannot do: their next-token loss in domain (the corpus's held-out
test split) and out of domain (docstrings of the running Python's standard library,
`adjpos.text.corpus.stdlib_docstrings`), beside a unigram and a bigram fitted on the train split
(`adjpos.text.baselines`) and a unigram fitted on the scored text itself.

    python examples/text_baselines.py [--models text-nope:0 text-rope:1 ...] [--max-chunks 64]

reads the shipped models named (``text-LAYOUT:SEED``, optionally as ``pretrained:...``; every
shipped seed of every layout by default) and the corpus's splits (fetched once, see
`adjpos.text.corpus`), and prints the table as markdown. Every row is scored as
`adjpos.text.evaluate` scores the models at their training context (docs/text-models.md's
"test, 128"): `--max-chunks` chunks of 512 tokens spread evenly over each text, each read in
windows of 128 tokens, every token but a window's first scored. ``--quick`` runs tiny random
models on a generated text and one module's docstrings (no corpus, no shipped model): the smoke
test.
"""

import argparse
import platform
import sys
from functools import partial

import torch

import adjpos
from adjpos.text import encode_text, read_split, train_tokenizer
from adjpos.text.baselines import BigramModel, UnigramModel
from adjpos.text.corpus import DOCSTRING_MODULES, stdlib_docstrings
from adjpos.text.evaluate import FACTORS, held_out_chunks, token_losses
from adjpos.text.recipe import LAYOUTS, RECIPE_DATA, layout_config

TEXTS = ("test", "docstrings")
COLUMNS = {
    "test": "test split (in domain)",
    "docstrings": "stdlib docstrings (out of domain)",
    "seen": "docstrings, tokens that occur in the train split",
}
QUICK = {"context": 8, "max_chunks": 6, "modules": ("textwrap",)}


def quick_inputs() -> tuple[dict, object, dict[str, str]]:
    """Tiny random models of each layout, and a generated text cut into splits by line."""
    from train_text import generated_text

    lines = generated_text(3000).splitlines(keepends=True)
    texts = {"train": lines[:2000], "validation": lines[2000:2500], "test": lines[2500:]}
    texts = {name: "".join(part) for name, part in texts.items()}
    tiny = {"n_layers": 4, "d_model": 16, "n_heads": 2, "d_vocab": 300, "n_ctx": QUICK["context"]}
    models = {f"tiny-{x}": adjpos.build_model(layout_config(x, **tiny)).eval() for x in LAYOUTS}
    texts["docstrings"] = stdlib_docstrings(QUICK["modules"])
    return models, train_tokenizer(texts["train"], 300), texts


def shipped_inputs(names: list[str] | None) -> tuple[dict, object, dict[str, str]]:
    """The shipped text models `names` (default: every shipped seed), their one tokenizer, and
    the corpus's splits with the standard library's docstrings."""
    from adjpos.pretrained import pretrained_seeds

    names = names or [f"text-{x}:{s}" for x in LAYOUTS for s in pretrained_seeds(f"text-{x}")]
    models, tokenizers = {}, {}
    for name in names:
        model_name, _, seed = name.removeprefix("pretrained:").partition(":")
        try:
            model, tokenizer = adjpos.load_pretrained(model_name, int(seed or 0), device="cpu")
        except ValueError as err:
            sys.exit(f"{name}: {err}")
        models[name] = model.eval()
        tokenizers[tokenizer.backend_tokenizer.to_str()] = tokenizer.backend_tokenizer
    if len(tokenizers) != 1:
        sys.exit("give models that share one tokenizer (the shipped text models all do)")
    texts = {split: read_split(split) for split in ("train", "validation", "test")}
    return models, tokenizers.popitem()[1], texts | {"docstrings": stdlib_docstrings()}


def measure(models: dict, ids: dict, context: int, max_chunks: int, d_vocab: int) -> tuple:
    """Each row's mean loss in each of `COLUMNS` (the baselines', the models'), the bigram,
    and the share of the docstrings' scored tokens that the train split never holds."""
    bigram = BigramModel(d_vocab).fit(ids["train"], ids["validation"])
    table, chunks = {}, {}
    for text in TEXTS:
        chunks[text] = held_out_chunks(ids[text], max(FACTORS) * context, max_chunks)
        own = UnigramModel(d_vocab, strength=0.0).fit(ids[text])  # the floor of a unigram
        rows = {
            "unigram, train split": bigram.unigram_.token_losses,
            "bigram, train split": bigram.token_losses,
            "unigram of the scored text itself": own.token_losses,
        }
        rows |= {
            name: partial(token_losses, model, context=context) for name, model in models.items()
        }
        # The tokens adjpos.text.evaluate scores ("all"): every one but a window's first.
        scored = (torch.arange(chunks[text].shape[1]) % context != 0).expand_as(chunks[text])
        masks = {text: scored}
        if text == "docstrings":
            masks["seen"] = scored & (bigram.unigram_.counts_[0, chunks[text]] > 0)
            unseen = 1 - masks["seen"].sum().item() / scored.sum().item()
        for name, score in rows.items():
            losses = score(chunks[text])
            table.setdefault(name, {}).update(
                {c: float(losses[m].mean()) for c, m in masks.items()}
            )
    return table, bigram, chunks, unseen


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", metavar="text-LAYOUT:SEED")
    parser.add_argument("--max-chunks", type=int, default=64, help="chunks per text")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.quick:
        models, tokenizer, texts = quick_inputs()
        context, max_chunks, modules = QUICK["context"], QUICK["max_chunks"], QUICK["modules"]
    else:
        models, tokenizer, texts = shipped_inputs(args.models)
        context, max_chunks, modules = RECIPE_DATA["context"], args.max_chunks, DOCSTRING_MODULES
    ids = {name: torch.tensor(encode_text(tokenizer, text)) for name, text in texts.items()}
    d_vocab = tokenizer.get_vocab_size()
    table, bigram, chunks, unseen = measure(models, ids, context, max_chunks, d_vocab)
    python = f"{platform.python_implementation()} {platform.python_version()}"
    sizes = {t: f"{len(texts[t]):,} characters, {len(ids[t]):,} tokens" for t in TEXTS}
    print(
        f"Next-token loss (nats per token) on {len(chunks['test'])} and "
        f"{len(chunks['docstrings'])} chunks of {max(FACTORS) * context} tokens spread evenly "
        f"over the two texts, read in windows of {context}, every token but a window's first "
        f"scored.\nTest split: {sizes['test']}. Docstrings of {python}'s standard library "
        f"({', '.join(modules)}): {sizes['docstrings']}; {unseen:.1%} of the scored tokens "
        f"never occur in the train split.\nSmoothing strengths chosen on the validation split: "
        f"unigram {bigram.unigram_.strength_:g}, bigram {bigram.strength_:g}.\n"
    )
    print("| model | " + " | ".join(COLUMNS.values()) + " |")
    print("|---|" + "---|" * len(COLUMNS))
    for name, losses in table.items():
        print(f"| {name} | " + " | ".join(f"{losses[c]:.3f}" for c in COLUMNS) + " |")


if __name__ == "__main__":
    main()
