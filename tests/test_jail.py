"""The jail's own promises: what a jailed process sees and may do, and the clear refusal
where no jail can be made (unless the instructor opts in)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grader_tests import __main__ as cli
from grader_tests import jail
from tests.catalogue import REFERENCE_SOURCE

needs_jail = pytest.mark.skipif(jail.problem() is not None, reason="no jail here")

PROBE = r'''
import json, os, socket
seen = {"uid": os.getuid(), "env": sorted(os.environ), "root": sorted(os.listdir("/")),
        "etc": sorted(os.listdir("/etc"))}
for name, path in (("home", os.path.expanduser("~")), ("cwd", os.getcwd())):
    seen[name] = path
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1)
    seen["net"] = "open"
except OSError as exc:
    seen["net"] = type(exc).__name__
try:
    open("/usr/x", "w")
    seen["usr"] = "writable"
except OSError as exc:
    seen["usr"] = type(exc).__name__
print(json.dumps(seen))
'''


@needs_jail
def test_a_jailed_process_is_nobody_with_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "secret")
    cmd = jail.command([sys.executable, "-I", "-c", PROBE], submission_dir=str(tmp_path))
    jail.chown_for_jail(str(tmp_path))
    done = subprocess.run(cmd.argv, preexec_fn=cmd.preexec, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["uid"] != 0
    assert "PGPASSWORD" not in seen["env"] and set(seen["env"]) - {"PWD"} <= set(jail.ENV_BASE) | set(
        jail.ENV_ALLOWED)
    assert "shadow" not in seen["etc"] and "passwd" in seen["etc"]
    assert seen["net"] in ("ConnectionRefusedError", "OSError", "TimeoutError")
    assert seen["usr"] in ("OSError", "PermissionError")
    assert "submission" in seen["root"] and "home" not in seen["root"]


def test_no_jail_refuses_with_one_line_unless_allowed(tmp_path, monkeypatch, capsys):
    path = tmp_path / "attention.py"
    path.write_text(REFERENCE_SOURCE)
    monkeypatch.setattr(jail, "bwrap_path", lambda: None)
    jail.problem.cache_clear()
    try:
        assert cli.main(["grade", str(path), "--only", "softmax", "--json"]) == 2
        out = json.loads(capsys.readouterr().out)
        assert "bubblewrap" in out["error"] and "apt-get install bubblewrap" in out["error"]
        assert "--unjailed" in out["error"]
        assert cli.main(["grade", str(path), "--only", "softmax", "--json", "--unjailed"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["functions"]["softmax"]["score"] == 10
    finally:
        jail.problem.cache_clear()


def test_unjailed_is_said_in_the_config_the_instructor_reads():
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "nbgrader_config.py")) as f:
        text = f.read()
    assert "c.AttentionKit.allow_unjailed = False" in text


@pytest.mark.slow  # the graders' command line, in a jail
@needs_jail
def test_a_console_that_cannot_show_a_character_gets_a_replacement_not_a_crash(tmp_path):
    path = tmp_path / "attention.py"
    path.write_text("def softmax(scores, axis=-1):\n    raise ValueError('√ d_k — ∑')\n")
    env = dict(os.environ, PYTHONIOENCODING="cp1252")
    done = subprocess.run([sys.executable, "-m", "grader_tests", "grade", str(path), "--only",
                           "softmax"], capture_output=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr.decode("cp1252", "replace")[-2000:]
    assert b"? d_k" in done.stdout and b"Total: 0.00 / 10" in done.stdout


def test_a_killed_graders_temporary_folders_are_swept_and_a_live_ones_kept(tmp_path):
    import subprocess
    import sys

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{jail.SCRATCH_PREFIX}submission-{dead.pid}-abc"
    stale.mkdir()
    (stale / "attention.ipynb").write_text("{}")
    live = tmp_path / f"{jail.SCRATCH_PREFIX}kernel-{os.getpid()}-def"
    live.mkdir()
    other = tmp_path / "attention-kit-notes"
    other.mkdir()
    removed = jail.sweep_stale_folders(str(tmp_path))
    assert removed == [str(stale)] and not stale.exists()
    assert live.exists() and other.exists()


def test_an_installed_kit_has_every_package_masked(monkeypatch):
    """Installed non-editable (inside the Python environment the jail binds), each package
    pyproject.toml installs is covered by an empty tmpfs: the graders, the reference
    solutions and the authoring package that reads them."""
    import tomllib

    from tests.helpers import ROOT

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    installed = {name.split(".")[0] for name in
                 pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert installed == {"grader_tests", "solutions", "authoring"}
    folders = jail.kit_packages()
    assert {os.path.basename(f) for f in folders} == installed
    assert all(os.path.isfile(os.path.join(f, "__init__.py")) for f in folders)
    # as if the kit sat inside the environment: every package folder is masked
    monkeypatch.setattr(jail, "python_roots", lambda: [str(ROOT)])
    args = jail.command(["python3", "-c", "pass"]).argv
    masked = {args[i + 1] for i, a in enumerate(args[:-1]) if a == "--tmpfs"}
    assert set(folders) <= masked
    # installed elsewhere (editable, as here): the checkout is not bound, nothing to mask
    monkeypatch.setattr(jail, "python_roots", lambda: ["/nonexistent-env"])
    args = jail.command(["python3", "-c", "pass"]).argv
    assert not set(folders) & {args[i + 1] for i, a in enumerate(args[:-1]) if a == "--tmpfs"}
