"""The CI workflows (``.github/workflows/``) pass zizmor with no finding, and keep what makes
them safe to run student code in: actions pinned to full commit SHAs, checkouts without
persisted credentials, a read-only token, bubblewrap installed before grading, no secret
or token in the environment of the steps that run student code."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests.helpers import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
ZIZMOR_PIN = "1.32.0"  # pyproject.toml, [project.optional-dependencies] lint


def _zizmor():
    """The zizmor next to this interpreter (the virtualenv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "zizmor"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("zizmor")


ZIZMOR = _zizmor()
needs_zizmor = pytest.mark.skipif(
    ZIZMOR is None, reason="the zizmor binary is absent: pip install -e '.[lint]' installs "
                           f"zizmor=={ZIZMOR_PIN} (the lint extra of pyproject.toml)")


def zizmor(*args):
    """``zizmor --offline --no-progress ARGS .github/workflows``, without any token in its
    environment (offline: no online audit, nothing fetched)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN", "ZIZMOR_CONFIG")}
    return subprocess.run([ZIZMOR, "--offline", "--no-progress", "--color=never", *args,
                           str(WORKFLOWS)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def _load(path):
    return yaml.safe_load(path.read_text())


def _steps(workflow):
    for job in workflow["jobs"].values():
        yield from job["steps"]


def test_there_are_the_two_workflows():
    assert [p.name for p in FILES] == ["autograde.yml", "classroom-visible-tests.yml"]


@needs_zizmor
def test_zizmor_is_the_pinned_version():
    out = subprocess.run([ZIZMOR, "--version"], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["zizmor", ZIZMOR_PIN], out.stdout
    assert f'"zizmor=={ZIZMOR_PIN}"' in (ROOT / "pyproject.toml").read_text()


@needs_zizmor
def test_zizmor_finds_nothing():
    proc = zizmor()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout, proc.stdout
    assert "suppressed" not in proc.stdout, proc.stdout


@needs_zizmor
def test_zizmor_finds_nothing_even_pedantic():
    proc = zizmor("--persona=pedantic", "--format=json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout) == []


@needs_zizmor
def test_zizmor_would_see_an_unpinned_action(tmp_path):
    """The audit really reads the files: an unpinned copy is a finding (exit non-zero)."""
    bad = tmp_path / "autograde.yml"
    text = (WORKFLOWS / "autograde.yml").read_text()
    bad.write_text(re.sub(r"actions/checkout@[0-9a-f]{40}", "actions/checkout@v4", text))
    proc = subprocess.run([ZIZMOR, "--offline", "--no-progress", "--color=never", str(bad)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "unpinned-uses" in proc.stdout, proc.stdout


# --- what zizmor checks, and what it cannot know, without zizmor --------------------------


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_full_sha_with_its_tag(path):
    uses = re.findall(r"^\s*(?:-\s*)?uses:\s*(\S+)(.*)$", path.read_text(), re.MULTILINE)
    assert uses
    for ref, comment in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), ref
        assert re.fullmatch(r"\s*#\s*v\d+(\.\d+)*\s*", comment), (ref, comment)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_checkout_keeps_no_credentials_and_the_token_only_reads(path):
    workflow = _load(path)
    assert workflow["permissions"] == {}
    for job in workflow["jobs"].values():
        assert job["permissions"] == {"contents": "read"}
    checkouts = [s for s in _steps(workflow) if str(s.get("uses", "")).startswith(
        "actions/checkout@")]
    assert checkouts and all(s["with"]["persist-credentials"] is False for s in checkouts)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_secret_or_token_reaches_a_step(path):
    text = path.read_text()
    assert "secrets." not in text and "github.token" not in text
    assert not re.search(r"\bGITHUB_TOKEN\b|\bGH_TOKEN\b", text)
    workflow = _load(path)
    for job in workflow["jobs"].values():
        for env in [job.get("env") or {}] + [s.get("env") or {} for s in job["steps"]]:
            assert all("${{" not in str(v) for v in env.values()), env


def test_autograde_installs_bubblewrap_before_grading():
    steps = list(_steps(_load(WORKFLOWS / "autograde.yml")))
    runs = [str(s.get("run", "")) for s in steps]
    jail = next(i for i, r in enumerate(runs)
                if "sudo apt-get update && sudo apt-get install -y bubblewrap" in r)
    grade = next(i for i, r in enumerate(runs) if "tools.ci_grade" in r)
    install = next(i for i, r in enumerate(runs) if "pip install" in r)
    assert jail < grade and install < grade
    assert "env" not in steps[grade], "the grading step runs student code: no env of its own"
