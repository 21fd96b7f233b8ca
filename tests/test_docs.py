"""Every code block in README.md and docs/ runs; an `output` block must match what it prints."""

import contextlib
import dataclasses
import io
import re
import runpy
import shlex
import shutil
from pathlib import Path

import pytest

from factories import TINY_REPRODUCE

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks(page: Path):
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text())]


def _reuse_the_tiny_run(monkeypatch, tiny_run):
    """Make ``adjpos.study.reproduce(NAME, cfg)``, for a folder NAME that does not exist yet
    and `cfg` the tests' `TINY_REPRODUCE`, give what the session's shared tiny run gave (it
    made that same call, from another folder: tests/conftest.py): its folder copied to NAME
    and its result with each path moved along (relative or absolute as `reproduce` gave it).
    Any other call runs for real."""
    import adjpos.study

    shared, result = tiny_run
    real = adjpos.study.reproduce

    def moved(path: Path, name: str) -> Path:
        if path.is_absolute():  # under the folder the shared run was called from
            return Path.cwd() / moved(path.relative_to(shared.parent), name)
        return Path(name, *path.parts[1:]) if path.parts[0] == shared.name else path

    def reproduce(out_dir, cfg=None, **kwargs):
        name = str(out_dir)
        if cfg != TINY_REPRODUCE or kwargs or len(Path(name).parts) != 1 or Path(name).exists():
            return real(out_dir, cfg or adjpos.study.ReproduceConfig(), **kwargs)
        shutil.copytree(shared, name)
        return dataclasses.replace(
            result,
            out_dir=moved(result.out_dir, name),
            report=moved(result.report, name),
            figures=tuple(moved(path, name) for path in result.figures),
        )

    monkeypatch.setattr(adjpos.study, "reproduce", reproduce)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
@pytest.mark.usefixtures("as_a_user")
def test_code_blocks_run_and_print_what_the_page_says(page, monkeypatch, tmp_path, request):
    monkeypatch.chdir(tmp_path)
    if page.name == "howto-reproduce.md":  # its example is the shared tiny run's call
        _reuse_the_tiny_run(monkeypatch, request.getfixturevalue("tiny_run"))
    namespace: dict = {}
    blocks = _blocks(page)
    for i, (lang, code) in enumerate(blocks):
        if lang != "python":
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{page.name} block {i}", "exec"), namespace)
        if i + 1 < len(blocks) and blocks[i + 1][0] == "output":
            assert out.getvalue().strip() == blocks[i + 1][1].strip()


def test_readme_has_a_python_example_with_output():
    langs = [lang for lang, _ in _blocks(ROOT / "README.md")]
    assert "python" in langs and "output" in langs


def test_api_page_is_generated_from_the_docstrings():
    render = runpy.run_path(str(ROOT / "docs" / "make_api.py"))["render"]
    assert (ROOT / "docs" / "api.md").read_text() == render(), "run: python docs/make_api.py"


def test_readme_commands_are_the_ci_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    setup = next(line for line in ci.splitlines() if line.startswith("python3 -m venv"))
    assert setup in readme
    test = next(line for line in ci.splitlines() if line.startswith(".venv/bin/python -m pytest"))
    assert test in readme


def _shell_commands(page: Path):
    """Each command line of the page's bash blocks (comments dropped, continuations joined)."""
    for lang, code in _blocks(page):
        if lang != "bash":
            continue
        for line in code.replace("\\\n", " ").splitlines():
            for command in line.split("#", 1)[0].split("&&"):
                if command.strip():
                    yield shlex.split(command)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_shell_commands_name_real_commands_and_options(page):
    from adjpos.cli import _parser

    for argv in _shell_commands(page):
        program = Path(argv[0]).name
        if program == "adjpos":
            try:
                _parser().parse_args(argv[1:])
            except SystemExit:
                pytest.fail(f"{page.name}: `{shlex.join(argv)}` does not parse")
        elif program.startswith("python") and len(argv) > 1 and argv[1].endswith(".py"):
            script = ROOT / argv[1]
            assert script.is_file(), f"{page.name}: {argv[1]} does not exist"
            text = script.read_text()
            for option in (a.split("=")[0] for a in argv[2:] if a.startswith("--")):
                assert f'"{option}"' in text, f"{page.name}: {argv[1]} has no option {option}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_images_and_relative_links_exist(page):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if "://" not in target:
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def test_make_outputs_rewrites_stale_output_blocks_and_nothing_else(tmp_path):
    rewrite = runpy.run_path(str(ROOT / "docs" / "make_outputs.py"))["rewrite"]
    page = tmp_path / "page.md"
    stale = (
        "Some prose, 0.5.\n\n```python\nx = 6 * 7\nprint(x)\n```\n\n```output\n41\n```\n\n"
        "```bash\necho hi\n```\n\n```python\nprint(x + 1)\n```\n\n```output\n43\n```\n"
    )
    page.write_text(stale)
    assert rewrite(page) == 1
    assert page.read_text() == stale.replace("```output\n41\n```", "```output\n42\n```")
    assert rewrite(page) == 0
