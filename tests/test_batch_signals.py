"""A stopped batch leaves nothing running: SIGINT, SIGTERM, SIGHUP or SIGKILL of the
coordinator during grading takes every grading process and every jail with it, loses no
grade and half-writes none; the same command then grades the rest.

The processes are found by walking the coordinator's process tree while it grades (and
the jails' uids), then polled until the kernel has reaped them, with a deadline.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")

from grader_tests import jail  # noqa: E402
from tests.helpers import ROOT, kit_env, still_running  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(jail.problem() is not None, reason="no jail here")]


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A course with the example class, the assignment released into its gradebook."""
    course = tmp_path_factory.mktemp("course")
    shutil.copytree(os.path.join(ROOT, "source", "attention"), course / "source" / "attention")
    shutil.copytree(os.path.join(ROOT, "example", "submitted"), course / "submitted")
    shutil.copy(os.path.join(ROOT, "nbgrader_config.py"), course / "nbgrader_config.py")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "attention",
                           "--force"], cwd=course, env=kit_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return course


def _log(course):
    path = course / "batch_log.jsonl"
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _descendants(pid):
    try:
        return {p.pid: p for p in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return {}


def _name(process):
    try:
        return process.name()
    except psutil.Error:
        return None


def _uid(process):
    try:
        return process.uids().real
    except psutil.Error:
        return None


def _gone(processes, deadline):
    """Wait until every process of ``processes`` has ended (zombies count as ended); the
    ones still alive at the deadline."""
    while True:
        alive = still_running(processes)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                                    signal.SIGKILL])
def test_a_stopped_batch_leaves_nothing_running_and_loses_nothing(signum, released, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(released, course)
    cmd = [sys.executable, "-m", "grader_tests", "batch", "submitted", "--workers", "2"]
    proc = subprocess.Popen(cmd, cwd=course, env=kit_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = {}
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # grading under way: a student done, jails running
        seen.update(_descendants(proc.pid))
        jails = [p for p in seen.values() if _name(p) == "bwrap"]
        if _log(course) and jails:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the batch never got under way")
    seen.update(_descendants(proc.pid))
    uids = {_uid(p) for p in seen.values()} - {os.getuid(), None}
    proc.send_signal(signum)
    out, _ = proc.communicate(timeout=120)
    alive = _gone(seen, time.monotonic() + 15)
    assert alive == [], [(p.pid, _name(p)) for p in alive]
    for uid in uids:
        assert jail.processes_of(uid) == [], uid
    if signum != signal.SIGKILL:
        assert proc.returncode == 130, out[-2000:]
        assert "no grading process is left running" in out and "Run the same command" in out
    graded = {r["student"] for r in _log(course) if r.get("report") is not None}
    assert graded, out[-2000:]

    # Resumed: nobody graded twice, everybody graded, every logged grade in the gradebook.
    done = subprocess.run(cmd + ["--summary-json", "summary.json"], cwd=course, env=kit_env(),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = _log(course)
    students = sorted(os.listdir(course / "submitted"))
    students = [s for s in students if (course / "submitted" / s).is_dir()]
    assert sorted({r["student"] for r in records}) == students
    assert all(sum(r["student"] == s for r in records) == 1 for s in graded)
    expected = json.loads(Path(ROOT, "example", "EXPECTED.json").read_text())["students"]
    rows = {r["student"]: r for r in json.loads((course / "summary.json").read_text())["students"]}
    for student, want in expected.items():
        assert rows[student]["score"] == pytest.approx(want["score"]), student
