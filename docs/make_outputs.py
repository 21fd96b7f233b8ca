"""Rerun the Python blocks of doc pages and write what each prints into the ``output`` block that
follows it (after the shipped models or a default change). The prose around the blocks is not
touched: restate any number it quotes by hand. ``tests/test_docs.py`` checks the result.

    python docs/make_outputs.py docs/pretrained.md [more pages]
"""

import contextlib
import io
import os
import re
import sys
import tempfile
from pathlib import Path

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def rewrite(page: Path) -> int:
    """Run `page`'s Python blocks in one namespace, in a scratch folder, as the docs test
    does; replace each following ``output`` block by what was printed. Returns how many
    output blocks changed."""
    text = page.read_text()
    blocks = list(FENCE.finditer(text))
    namespace: dict = {}
    replacements = []
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)
        try:
            for i, match in enumerate(blocks):
                if match.group(1) != "python":
                    continue
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    exec(compile(match.group(2), f"{page.name} block {i}", "exec"), namespace)
                if i + 1 < len(blocks) and blocks[i + 1].group(1) == "output":
                    new = out.getvalue().strip() + "\n"
                    if new.strip() != blocks[i + 1].group(2).strip():
                        replacements.append((blocks[i + 1].span(2), new))
        finally:
            os.chdir(here)
    for (start, end), new in reversed(replacements):
        text = text[:start] + new + text[end:]
    page.write_text(text)
    return len(replacements)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(f"{name}: {rewrite(Path(name))} output blocks changed")
