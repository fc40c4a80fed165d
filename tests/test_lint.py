"""The kit's code passes its linter (ruff, configured in pyproject.toml) and its type
checker (mypy, on the modules pyproject.toml lists)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import ROOT



def _tool(name):
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} is not installed: make installs it with the 'lint' extra")
    return found


def test_ruff_finds_nothing():
    done = subprocess.run([_tool("ruff"), "check", "--no-cache", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_listed_modules():
    done = subprocess.run([_tool("mypy"), "--no-incremental"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout, done.stdout[-2000:]
