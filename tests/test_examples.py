"""Each example script runs in its smoke mode (``--quick``) as a user would run it."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_smoke_run(script, tmp_path):
    done = subprocess.run(
        [sys.executable, str(script), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,  # examples write their outputs into the working folder
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
