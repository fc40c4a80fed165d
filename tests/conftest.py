"""Session-wide checks of the kit's test suite, and the fixtures its modules share (the
helpers they share are in ``tests/helpers.py``).

No test may leave a process behind: at the end of the session (in the controlling process
under pytest-xdist), every process this session started (it carries the session's mark in
its environment, inherited from the test that started it) whose command line is the kit's
(graders, batches, jails, kernels, nbgrader, Dask, PostgreSQL, Chromium) must have ended;
the ones still alive after a grace period are listed, killed, and fail the session.
Another test session on the same machine is left alone.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from tests.helpers import new_gradebooks_quickly, release_course

# Command-line fragments of the processes the kit's tests start.
KIT_PROCESSES = ("grader_tests", "nbgrader", "bwrap", "ipykernel", "dask", "postgres",
                 "chromium", "jupyter", "tools.demo", "unlock_training", "_worker.py",
                 "multiprocessing")
GRACE_SECONDS = 20.0


# The environment variable that marks the processes of this test session.
MARK = "ATTENTION_KIT_TEST_SESSION"


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config._kit_started = time.time()  # type: ignore[attr-defined]
    if not hasattr(session.config, "workerinput"):  # xdist workers inherit the controller's
        os.environ.setdefault(MARK, uuid.uuid4().hex)


def _left_behind(started: float) -> list:
    import psutil

    me = os.getpid()
    ancestors = {p.pid for p in psutil.Process(me).parents()} | {me}
    left = []
    for p in psutil.process_iter(["pid", "create_time", "cmdline", "status"]):
        info = p.info
        if info["pid"] in ancestors or (info["create_time"] or 0) < started:
            continue
        if info["status"] == psutil.STATUS_ZOMBIE:
            continue
        line = " ".join(info["cmdline"] or [])
        if "pytest" in line or "execnet" in line or "xdist" in line:
            continue
        try:
            if p.environ().get(MARK) != os.environ.get(MARK):
                continue  # another session's, or nobody's
        except psutil.Error:
            continue
        if any(fragment in line for fragment in KIT_PROCESSES):
            left.append(p)
    return left


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller checks
        return
    try:
        import psutil
    except ImportError:  # the test extras are not installed: nothing to walk with
        return
    started = getattr(session.config, "_kit_started", time.time())
    deadline = time.monotonic() + GRACE_SECONDS
    left = _left_behind(started)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _left_behind(started)
    if not left:
        return
    lines = []
    for p in left:
        try:
            lines.append(f"  pid {p.pid}: {' '.join(p.cmdline())[:200]}")
            p.kill()
        except psutil.Error:
            continue
    if lines:
        print("\nprocesses left behind by the test session (now killed):\n" + "\n".join(lines))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# --- fixtures shared by the test modules --------------------------------------------------


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A course folder with `attention` released into its own gradebook (the kit's
    ``source/attention/`` and ``nbgrader_config.py``, then ``nbgrader generate_assignment``),
    one per test module that asks for it; a module may define its own ``course``."""
    return release_course(tmp_path_factory.mktemp("course"))


@pytest.fixture
def new_gradebooks() -> Iterator[None]:
    """nbgrader's ``Gradebook()`` on a new database stamps the schema's head revision from
    the ``alembic heads`` command (a subprocess, seconds on a loaded machine); while this
    fixture is active it reads the same revision from nbgrader's migration scripts."""
    with new_gradebooks_quickly():
        yield


@pytest.fixture
def gradebooks(new_gradebooks: None) -> object:
    """``open_gradebook`` of tests/helpers.py, with new gradebooks made quickly."""
    from tests.helpers import open_gradebook

    return open_gradebook
