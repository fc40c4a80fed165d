"""A stopped batch leaves nothing running on the Dask path either (issue 17).

A local Dask cluster (``tests/services.py``: a scheduler and two single-threaded workers on
loopback) grades part of the example class for ``python -m grader_tests batch
--scheduler``. SIGINT, SIGTERM, SIGHUP or SIGKILL of that coordinator during grading ends
every grading process and jail it had the workers start (a cancelled task kills its
grading process: ``dask_batch.task_cancelled``), loses no grade and half-writes none; the
same command then grades the rest. A future cancelled with ``client.cancel`` ends its
grading process as promptly.

The grading processes are found by walking the workers' process trees while they grade
(and the jails' uids), then polled until the kernel has reaped them, with a deadline; how
long each took is printed (``pytest -s``).
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

psutil = pytest.importorskip("psutil")
pytest.importorskip("distributed")

from grader_tests import dask_batch, jail  # noqa: E402
from tests.helpers import ROOT, kit_env, still_running  # noqa: E402
from tests import services  # noqa: E402

ROOT_SUBMITTED = ROOT / "example" / "submitted"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(jail.problem() is not None, reason="no jail here")]

# Part of the example class, with different faults, and a correct student whose notebook
# takes 2 x SLOW_SECONDS to load (sorted first: its task starts at once, and it loads
# longer than another student takes to grade, on a busy machine too): the signal comes
# while it loads, so that its grading process ends only if the cancellation reaches it,
# not because its grading happened to finish.
EXAMPLES = ("student_all_stubs", "student_correct", "student_heads_merged_wrong",
            "student_mask_after_softmax")
SLOW = "a_student_slow_to_load"
SLOW_SECONDS = 12  # per cell, within the sandbox's limit per cell (20 s)
STUDENTS = (SLOW,) + EXAMPLES
# Seconds the grading processes may take to end after the coordinator is signalled (a
# cancelled task kills its grading process within dask_batch.POLL_SECONDS of hearing of it),
# well below what is left of the slow student's load then.
PROMPTLY = 5.0
END_DEADLINE = 15.0  # when the test stops waiting
RUN_LIMIT = 600  # seconds any one command may take


@pytest.fixture(scope="module")
def cluster():
    """A scheduler and 2 worker processes for this module, one Dask test module at a time
    on this machine (the lock of tests/test_batch_distributed.py)."""
    lock = os.path.join(tempfile.gettempdir(), "attention-kit-dask-tests.lock")
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        with services.dask_cluster(2) as c:
            c.pids = list(c.worker_pids().values())
            yield c


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    """A course with ``STUDENTS`` of the example class, the assignment released into its
    (sqlite) gradebook."""
    course = tmp_path_factory.mktemp("course")
    shutil.copytree(os.path.join(ROOT, "source", "attention"), course / "source" / "attention")
    for student in EXAMPLES:
        shutil.copytree(ROOT_SUBMITTED / student, course / "submitted" / student)
    (course / "submitted" / SLOW / "attention").mkdir(parents=True)
    (course / "submitted" / SLOW / "attention" / "attention.ipynb").write_bytes(_slow_notebook())
    shutil.copy(os.path.join(ROOT, "nbgrader_config.py"), course / "nbgrader_config.py")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "attention",
                           "--force"], cwd=course, env=kit_env(), capture_output=True, text=True,
                          timeout=RUN_LIMIT)
    assert done.returncode == 0, done.stderr[-2000:]
    return course


def _log_lines(course: Path) -> list[str]:
    path = course / "batch_log.jsonl"
    if not path.exists():
        return []
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def _log(course: Path) -> list[dict]:
    return [json.loads(line) for line in _log_lines(course)]


def _descendants(pids: list[int]) -> dict[int, psutil.Process]:
    found = {}
    for pid in pids:
        try:
            found.update({p.pid: p for p in psutil.Process(pid).children(recursive=True)})
        except psutil.NoSuchProcess:
            pass
    return found


def _name(process: psutil.Process) -> str | None:
    try:
        return process.name()
    except psutil.Error:
        return None


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def _uid(process: psutil.Process) -> int | None:
    try:
        return process.uids().real
    except psutil.Error:
        return None


def _all_ended(cluster, seen: dict[int, psutil.Process], uids: set[int],
               deadline: float) -> float:
    """Poll until every process of ``seen`` has ended (zombies count as ended), no worker
    has a child process, and no process runs as a jail's uid of ``uids``; the monotonic
    time at which that first held. Fails at ``deadline``."""
    while True:
        alive = still_running(seen) + still_running(_descendants(cluster.pids))
        jailed = {uid: jail.processes_of(uid) for uid in uids}
        jailed = {uid: pids for uid, pids in jailed.items() if pids}
        now = time.monotonic()
        if not alive and not jailed:
            return now
        if now > deadline:
            pytest.fail(f"still running: {[(p.pid, _name(p)) for p in alive]}, "
                        f"jail uids: {jailed}")
        time.sleep(0.02)


def _workers_hold_nothing(cluster, deadline: float) -> None:
    """Poll until no worker holds a task (a cancelled task's thread has ended)."""
    def _held_keys(dask_worker=None) -> list[str]:  # run on each worker
        return [str(k) for k in dask_worker.state.tasks]

    with cluster.client() as client:
        while True:
            held = {w: keys for w, keys in client.run(_held_keys).items() if keys}
            if not held:
                return
            assert time.monotonic() < deadline, f"workers still hold tasks: {held}"
            time.sleep(0.05)


def _grading_in_jail(process: psutil.Process) -> bool:
    """True for a running jail of a student's code (not the trial jail that checks the
    machine can make one)."""
    return _name(process) == "bwrap" and "_worker.py" in _cmdline(process) and \
        process.is_running()


def _under_way(cluster, until, deadline: float) -> dict[int, psutil.Process]:
    """The workers' descendants, walked until a student's code runs in a jail under a
    worker and ``until()`` holds; fails at ``deadline``."""
    seen: dict[int, psutil.Process] = {}
    while time.monotonic() < deadline:
        seen.update(_descendants(cluster.pids))
        if any(_grading_in_jail(p) for p in seen.values()) and until():
            seen.update(_descendants(cluster.pids))
            return seen
        time.sleep(0.05)
    pytest.fail("grading never got under way on the workers")


def _slow_notebook() -> bytes:
    """``student_correct``'s notebook with two first cells that sleep ``SLOW_SECONDS`` each."""
    nb = nbformat.read(os.path.join(ROOT_SUBMITTED, "student_correct", "attention",
                                    "attention.ipynb"), 4)
    for _ in range(2):
        nb.cells.insert(1, nbformat.v4.new_code_cell(f"import time\ntime.sleep({SLOW_SECONDS})"))
    return nbformat.writes(nb).encode()


def _executing(cluster, prefix: str) -> bool:
    """True if a worker executes a task whose key starts with ``prefix``."""
    def keys(dask_worker=None) -> list[str]:  # run on each worker
        return [str(ts.key) for ts in dask_worker.state.executing]

    with cluster.client() as client:
        return any(k.startswith(prefix) for ks in client.run(keys).values() for k in ks)


def test_a_cancelled_future_kills_its_grading_process_at_once(cluster):
    """``client.cancel`` of a task that grades (a notebook whose loading sleeps
    ``SLOW_SECONDS``): its grading process and jail end within a second or so, not at the
    end of the load, and the worker's thread is free again."""
    data = _slow_notebook()
    with cluster.client() as client:
        future = client.submit(dask_batch.grade_bytes, "student_slow", "attention.ipynb", data,
                               120.0, pure=False)
        seen = _under_way(cluster, lambda: True, time.monotonic() + 120)
        uids = {_uid(p) for p in seen.values()} - {os.getuid(), None}
        assert any("grader_tests.dask_batch" in _cmdline(p) for p in still_running(seen))
        started = time.monotonic()
        client.cancel(future)
        ended = _all_ended(cluster, seen, uids, started + END_DEADLINE)
    print(f"\ncancelled future: its {len(seen)} process(es) ended {ended - started:.2f} s "
          f"after client.cancel")
    assert ended - started < PROMPTLY, "the grading process ran on after its task was cancelled"
    _workers_hold_nothing(cluster, time.monotonic() + 10)
    # The killed process's copy of the submission went with the task's folder.
    assert glob.glob(os.path.join(cluster.folder, "attention-kit-*")) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                                    signal.SIGKILL], ids=lambda s: signal.Signals(s).name)
def test_a_stopped_dask_batch_leaves_nothing_running_and_loses_nothing(signum, cluster,
                                                                      released, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(released, course)
    cmd = [sys.executable, "-m", "grader_tests", "batch", "submitted", "--scheduler",
           cluster.address]
    output = tmp_path / "output.txt"  # a file, not a pipe: the coordinator never waits on us
    with open(output, "w") as sink:
        proc = subprocess.Popen(cmd, cwd=course, env=kit_env(), stdout=sink,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        # Under way: a student logged, the slow one loading in its jail.
        def loading() -> bool:
            logged = set()
            for line in _log_lines(course):
                try:
                    logged.add(json.loads(line)["student"])
                except ValueError:  # a line being written
                    pass
            assert SLOW not in logged, "the slow student was graded before another one"
            return bool(logged) and _executing(cluster, f"grade-{SLOW}-")

        seen = _under_way(cluster, loading, time.monotonic() + 300)
        uids = {_uid(p) for p in seen.values()} - {os.getuid(), None}
        started = time.monotonic()
        proc.send_signal(signum)
        # Polled while the coordinator stops: the time measured is when the grading
        # processes ended, not when the coordinator exited.
        ended = _all_ended(cluster, seen, uids, started + END_DEADLINE)
        proc.wait(timeout=120)
        exited = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = output.read_text(encoding="utf-8", errors="replace")
    print(f"\n{signal.Signals(signum).name}: the {len(seen)} grading process(es) had all "
          f"ended {ended - started:.2f} s after the signal; the coordinator exited after "
          f"{exited - started:.2f} s")
    assert ended - started < PROMPTLY, "grading processes ran on after the batch stopped"
    _workers_hold_nothing(cluster, time.monotonic() + 10)
    assert still_running(_descendants(cluster.pids)) == []  # and none started since
    assert glob.glob(os.path.join(cluster.folder, "attention-kit-*")) == []  # no task's files
    if signum != signal.SIGKILL:
        assert proc.returncode == 130, out[-3000:]
        assert "no grading process is left running" in out and "Run the same command" in out
        assert "warning" not in out, out[-3000:]

    # Nothing half-written: every log line is a whole record, and a grading that was
    # stopped recorded nothing (no grading error either). A grade logged and not yet in
    # the gradebook (caught between the two) is written by the next run, from the log.
    records = [json.loads(line) for line in _log_lines(course)]
    graded = {r["student"]: r for r in records if r.get("report") is not None}
    assert graded, out[-3000:]
    assert not any(r.get("grading_error") for r in records), records

    # Resumed: nobody graded twice, everybody graded, every score as expected, in the
    # summary and in the gradebook.
    done = subprocess.run(cmd + ["--summary-json", "summary.json"], cwd=course, env=kit_env(),
                          capture_output=True, text=True, timeout=RUN_LIMIT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = _log(course)
    assert sorted({r["student"] for r in records}) == sorted(STUDENTS)
    assert all(sum(r["student"] == s for r in records) == 1 for s in graded)
    expected = json.loads((ROOT_SUBMITTED.parent / "EXPECTED.json").read_text())["students"]
    expected[SLOW] = expected["student_correct"]
    rows = {r["student"]: r for r in json.loads((course / "summary.json").read_text())["students"]}
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        for student in STUDENTS:
            assert rows[student]["score"] == pytest.approx(expected[student]["score"]), student
            assert gb.find_submission("attention", student).score == \
                pytest.approx(expected[student]["score"]), student
    _workers_hold_nothing(cluster, time.monotonic() + 10)

