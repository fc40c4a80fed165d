"""The batch grader's Dask executor: each submission graded on a Dask distributed worker.

    python -m grader_tests batch SUBMITTED --scheduler tcp://HOST:PORT [--task-time-limit S]

Imported by ``batch.run`` only when ``--scheduler`` is given, so the local process pool
needs no Dask. The two sides:

* **Coordinator** (``grade_on_cluster``, in the ``batch`` process): reads each
  submission's bytes, sends them with the file name as a task (no shared file system: a
  worker never sees the coordinator's paths), and yields every returned record to the
  batch, which alone appends to the log and writes the gradebook (no worker needs the
  database). At most ``2 x`` the cluster's threads (at least 4) tasks are in flight, so a
  class of thousands does not sit in the scheduler's memory at once.
* **Worker** (``grade_bytes``, run by Dask on a worker): writes the bytes to a temporary
  folder and grades the file with ``job.grade_job`` (``sandbox.grade_isolated``, the
  local pool's own job, so both executors give the same record) in a grading process of
  its own (a fresh one per task). Past ``time_limit`` seconds that process (and the
  sandbox under it) is killed and the task raises ``GradingTimeLimit``. The process kills
  itself and its sandbox if the Dask worker dies (the kernel's parent-death signal; the
  jail goes with it through bubblewrap's ``--die-with-parent``).

A batch that stops, however it stops, leaves no grading process running. Dask cannot stop
a task's thread, so the task waits on its grading process's pipe in short polls and, at
each, asks the worker whether the scheduler still wants the task: once the task is
cancelled (``client.cancel``, or the coordinator's connection closed, which releases its
tasks: SIGKILL included), the task kills its grading process, jail and all, within about
``POLL_SECONDS``, and ends with ``GradingCancelled``. On Ctrl-C, SIGTERM or SIGHUP the
coordinator also cancels its tasks itself and waits until no worker holds one before it
exits; a student whose record is not in the log is graded by the next run.

A task that fails for a reason other than the submission (its worker died, the time limit
ran out, the grading process crashed, the worker could not run the task) is tried once
more, on another worker when the cluster has one; if that fails too, the student gets a
*grading error* record (``"grading_error": true``, ``"report": null``, the reasons in
``"attempts"``): logged, never written to the gradebook as a grade, and graded again when
the same command is run again. The scheduler itself reruns a task whose worker died
``distributed.scheduler.allowed-failures`` times before the coordinator hears of it; the
coordinator counts those runs (``KilledWorker.allowed_failures + 1``) towards the two, so
start the scheduler with ``DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0`` to let the
coordinator choose the worker of the second try (with Dask's default of 3, a worker death
is retried by the scheduler, three times, and then recorded).
"""

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from collections.abc import Generator
from multiprocessing.connection import Connection

from .assignments import DEFAULT
from .i18n import _
from .job import grading_error_record

DEFAULT_ASSIGNMENT = DEFAULT.name

# A submission is tried at most this many times before it is recorded as a grading error.
ATTEMPTS = 2
# Default seconds one task may grade before its grading process is killed. A submission
# takes a few seconds (the sandbox limits each call of student code to seconds); this is
# the outer bound for a grader stuck for any other reason.
TASK_TIME_LIMIT = 600.0
# Seconds the coordinator waits for the first worker to join the scheduler.
WORKER_WAIT = 120.0
# Seconds between two looks of a task at its grading process's pipe and at whether the
# task was cancelled: how late a cancelled task's grading process is killed, at most.
POLL_SECONDS = 0.1
# Seconds a stopping coordinator waits for the workers to drop its cancelled tasks.
STOP_WAIT = 15.0

KIT_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class GradingTimeLimit(Exception):
    """A task graded for longer than its time limit (raised on the worker)."""

    def __init__(self, seconds, worker):
        super().__init__(seconds, worker)
        self.seconds, self.worker = seconds, worker

    def __str__(self):
        return _("grading took longer than the time limit of {seconds:g} s on {worker}").format(
            seconds=self.seconds, worker=self.worker)


class GradingCancelled(Exception):
    """The task was cancelled while it graded; its grading process has been killed (raised
    on the worker, for a result nobody reads)."""

    def __init__(self, worker: str):
        super().__init__(worker)
        self.worker = worker

    def __str__(self) -> str:
        return _("the task was cancelled on {worker}; its grading process was killed").format(
            worker=self.worker)


class GradingProcessDied(Exception):
    """The grading process of a worker ended during a task (raised on the worker)."""

    def __init__(self, detail, worker):
        super().__init__(detail, worker)
        self.detail, self.worker = detail, worker

    def __str__(self):
        return _("the grading process on {worker} died: {detail}").format(
            worker=self.worker, detail=self.detail)


# ---------------------------------------------------------------------------------------
# Worker side


def _worker_address():
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):  # not inside a Dask worker (tests call it directly)
        return f"pid {os.getpid()}"


def task_cancelled() -> Callable[[], bool]:
    """A test of whether the Dask task running in this thread is still wanted.

    Dask cannot interrupt a task's thread: when the task is cancelled (``client.cancel``,
    or its client gone, which releases the client's tasks), the worker only marks it
    ``cancelled`` and lets the thread run on. The test returned reads that mark (the
    worker's own ``WorkerState``) so that the task can stop its work itself.

    Returns:
        a callable without arguments, True once the task is cancelled or forgotten by its
        worker; outside a Dask task (tests, a direct call), one that is always False.
    """
    try:
        from distributed import get_worker
        from distributed.worker import thread_state

        worker = get_worker()
        key = thread_state.key
    except (ImportError, ValueError, AttributeError):  # not inside a Dask task
        return lambda: False

    def cancelled() -> bool:
        task = worker.state.tasks.get(key)  # a dict lookup: safe from this thread
        return task is None or task.state in ("cancelled", "released", "forgotten")

    return cancelled


class GradingProcess:
    """A ``python -m grader_tests.dask_batch FD`` that runs ``job.grade_job`` for one
    submission.

    Started in a session of its own, so that killing its process group also kills the
    sandbox process it starts; the jail under that dies with it (bubblewrap's
    ``--die-with-parent``), and the process itself dies with the thread that started it
    (``PR_SET_PDEATHSIG``, set in ``_serve``).
    """

    def __init__(self, tmpdir: str | None = None):
        """Start the process.

        Args:
            tmpdir: the folder for its temporary files (``TMPDIR``: the sandbox's copy of
                the submission), or None for the worker's own; a task passes its own
                folder, so that what a killed process leaves goes with the task's folder.
        """
        parent, child = socket.socketpair()
        env = dict(os.environ)
        if tmpdir is not None:
            env["TMPDIR"] = tmpdir
        env["PYTHONPATH"] = os.pathsep.join(p for p in (KIT_PARENT, env.get("PYTHONPATH")) if p)
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(name, "1")  # one core per task: the worker runs one task a thread
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "grader_tests.dask_batch", str(child.fileno())],
            pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True,
            env=env)
        child.close()
        self.conn = Connection(parent.detach())

    def alive(self):
        return self.proc.poll() is None

    def grade(self, student: str, path: str, time_limit: float,
              assignment: str = DEFAULT_ASSIGNMENT,
              cancelled: Callable[[], bool] | None = None, language: str = "en",
              allowed_modules: tuple[str, ...] | None = None) -> dict:
        """``job.grade_job(student, path, assignment)`` in the grading process, within
        ``time_limit`` s.

        Args:
            cancelled: asked every ``POLL_SECONDS`` while the process grades (e.g.
                ``task_cancelled()``); once it returns True the process is killed.
            language: the language of the report's messages (``i18n.LANGUAGES``).
            allowed_modules: the third-party modules the submission may import (the
                coordinator's course setting; default: the grading process's folder's).

        Returns:
            dict, the record of ``job.grade_job``.

        Raises:
            GradingTimeLimit: the time ran out; the process has been killed.
            GradingCancelled: ``cancelled()`` said so; the process has been killed.
            GradingProcessDied: the process ended before it answered.
        """
        deadline = time.monotonic() + time_limit
        try:
            self.conn.send_bytes(json.dumps({"student": student, "path": path,
                                             "assignment": assignment,
                                             "language": language,
                                             "allowed_modules": allowed_modules}).encode())
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    raise GradingTimeLimit(time_limit, _worker_address())
                if cancelled is not None and cancelled():
                    self.kill()
                    raise GradingCancelled(_worker_address())
                if self.conn.poll(min(remaining, POLL_SECONDS)):
                    return json.loads(self.conn.recv_bytes())
                if not self.alive():
                    raise EOFError
        except (EOFError, OSError) as exc:
            code = self.proc.poll()
            self.kill()
            detail = f"exit status {code}" if code is not None else type(exc).__name__
            raise GradingProcessDied(detail, _worker_address()) from None

    def kill(self):
        """Kill the process and everything it started (idempotent)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        try:
            self.conn.close()
        except OSError:
            pass


def grade_bytes(student: str, filename: str, data: bytes, time_limit: float = TASK_TIME_LIMIT,
                assignment: str = DEFAULT_ASSIGNMENT, language: str = "en",
                allowed_modules: tuple[str, ...] | None = None) -> dict:
    """The Dask task: grade one submission sent as bytes; return the batch record.

    Args:
        student: str, the student id (for the record only).
        filename: str, the submission's file name (``attention.ipynb``, ``attention.py``,
            ``attention (1).ipynb``): its suffix decides how it is read.
        data: bytes, the file's content.
        time_limit: float, seconds the grading may take.
        assignment: str, the assignment's name (``assignments.ASSIGNMENTS``).
        language: the language of the report's messages (``i18n.LANGUAGES``), the
            coordinator's course setting: a worker reads no course configuration.
        allowed_modules: the third-party modules the submission may import, the
            coordinator's course setting (``config.allowed_modules``), for the same reason;
            None: the default list.

    Returns:
        dict, the record of ``job.grade_job`` plus ``worker`` (the worker's address).

    Raises:
        GradingTimeLimit, GradingProcessDied: the coordinator retries, then records an error.
        GradingCancelled: the task was cancelled; its grading process has been killed.
    """
    name = os.path.basename(filename) or "submission.ipynb"
    with tempfile.TemporaryDirectory(prefix="attention-kit-task-") as folder:
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(data)
        # A fresh grading process per submission: nothing one student's grading did
        # survives into the next one's.
        process = GradingProcess(tmpdir=folder)
        try:
            record = process.grade(student, path, time_limit, assignment,
                                   cancelled=task_cancelled(), language=language,
                                   allowed_modules=allowed_modules)
        finally:
            process.kill()
    record["worker"] = _worker_address()
    return record


def _serve(fd):
    """Main of the grading process: answer requests on socket ``fd`` until it closes."""
    from grader_tests.config import DEFAULT_ALLOWED_MODULES
    from grader_tests.job import die_with_parent, grade_job

    die_with_parent()  # the Dask worker gone, this process and its jail go too (the kernel's
    # parent-death signal, not a thread that watches)
    conn = Connection(fd)
    while True:
        try:
            request = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return 0
        record = grade_job(request["student"], request["path"],
                           request.get("assignment", DEFAULT_ASSIGNMENT),
                           language=request.get("language") or "en",
                           allowed_modules=request.get("allowed_modules") or DEFAULT_ALLOWED_MODULES)
        conn.send_bytes(json.dumps(record).encode())


# ---------------------------------------------------------------------------------------
# Coordinator side


def _failure(exc):
    """``(reason, attempts it used, worker to avoid)`` of a failed task."""
    from distributed.scheduler import KilledWorker

    if isinstance(exc, KilledWorker):
        runs = exc.allowed_failures + 1
        worker = getattr(exc.last_worker, "address", None)
        return (_("the worker grading it ({worker}) died").format(worker=worker) +
                (_(" ({runs} workers in a row)").format(runs=runs) if runs > 1 else ""),
                runs, worker)
    if isinstance(exc, (GradingTimeLimit, GradingProcessDied)):
        return str(exc), 1, exc.worker
    text = " ".join(str(exc).split())  # Dask's messages run over several lines
    text = text if len(text) <= 300 else text[:297] + "..."
    return _("the task failed on the cluster: {error}").format(
        error=f"{type(exc).__name__}: {text}"), 1, None


def _held_tasks(keys: list[str], dask_worker=None) -> list[str]:
    """Run on a worker (``client.run``): the ``keys`` this worker still holds (queued,
    running, or cancelled and not yet ended)."""
    return [k for k in keys if k in dask_worker.state.tasks]


def stop_tasks(client, futures: list, timeout: float = STOP_WAIT) -> dict[str, list[str]]:
    """Cancel ``futures`` and wait until no worker holds their tasks any more.

    A cancelled task kills its grading process and ends (``GradingProcess.grade``), after
    which its worker forgets it: no worker holding one means no grading process of theirs
    is left.

    Args:
        client: the ``distributed.Client`` that submitted ``futures``.
        futures: the ``distributed.Future`` objects still in flight.
        timeout: float, seconds to wait.

    Returns:
        ``{worker address: [keys]}`` of the tasks still held after ``timeout`` s (empty
        when all ended; a worker that does not answer is left out).
    """
    keys = [f.key for f in futures]
    if not keys:
        return {}
    deadline = time.monotonic() + timeout
    held = {}
    try:
        client.cancel(futures)
        while True:
            held = {w: k for w, k in client.run(_held_tasks, keys, on_error="ignore").items()
                    if k}
            if not held or time.monotonic() > deadline:
                return held
            time.sleep(POLL_SECONDS)
    except Exception:  # the cluster is gone: the workers' own cancellation has to do
        return held


def grade_on_cluster(scheduler: str, jobs: list[tuple[str, str]],
                     time_limit: float = TASK_TIME_LIMIT,
                     progress: Callable[[str], None] | None = None,
                     worker_wait: float = WORKER_WAIT,
                     assignment: str = DEFAULT_ASSIGNMENT,
                     held_on_stop: dict | None = None,
                     language: str = "en", allowed_modules: tuple[str, ...] | None = None,
                     ) -> Generator[tuple[str, dict], None, None]:
    """Grade ``jobs`` on the Dask cluster of ``scheduler``; yield each student's record.

    Args:
        scheduler: str, the scheduler's address (``tcp://HOST:PORT``).
        jobs: list of ``(student, path)``; ``path`` is read here.
        time_limit: float, seconds one task may grade on a worker.
        progress: callable ``progress(text)`` for one-line notes (retries), or None.
        worker_wait: float, seconds to wait for a first worker.
        assignment: str, the assignment's name: which graders the workers run.
        held_on_stop: a dict the generator fills, when it is stopped, with the tasks
            still held after ``STOP_WAIT`` (``stop_tasks``'s answer), or None.
        language: the language of the reports' messages (the course's setting).
        allowed_modules: the third-party modules submissions may import (the course's
            setting, ``config.allowed_modules`` read by the coordinator; a worker reads
            no course configuration). None: the default list.

    Yields:
        ``(student, record)`` once per student, in the order results arrive: the
        ``job.grade_job`` record plus ``sha256`` (of the bytes sent) and ``worker``, or a
        grading error record (``"grading_error": True``, ``"report": None``, ``"error"``,
        ``"attempts"``). Closed or interrupted, the generator cancels the tasks in flight
        and waits for the workers to drop them (``stop_tasks``); the tasks still held after
        ``STOP_WAIT`` are named on stderr, put in ``held_on_stop`` and set as
        ``tasks_still_held`` on the exception that stopped it.

    Raises:
        TimeoutError: no worker joined the scheduler within ``worker_wait`` seconds.
    """
    if not jobs:  # everyone is in the log already: no cluster needed
        return
    from distributed import Client, as_completed

    note = progress or (lambda text: None)
    with Client(scheduler, timeout="30s") as client:
        client.wait_for_workers(1, timeout=worker_wait)
        queue = list(reversed(jobs))  # pop() takes the first job
        history: dict[str, list[str]] = {}  # student -> [reasons of failed attempts]
        runs: dict[str, int] = {}  # student -> attempts used
        meta = {}  # future -> (student, path, sha256 of the bytes sent)
        running = as_completed()

        def submit(student, path, avoid=None):
            with open(path, "rb") as f:
                data = f.read()
            placement = {}
            others = [w for w in client.nthreads() if w != avoid] if avoid else []
            if others:  # a retry goes to another worker, or anywhere if those leave
                placement = {"workers": others, "allow_other_workers": True}
            future = client.submit(grade_bytes, student, os.path.basename(path), data,
                                   time_limit, assignment, language, allowed_modules,
                                   key=f"grade-{student}-{uuid.uuid4().hex}",
                                   pure=False, **placement)
            meta[future] = (student, path, hashlib.sha256(data).hexdigest())
            running.add(future)

        def window():
            return max(4, 2 * sum(client.nthreads().values()))

        try:
            while queue and running.count() < window():
                student, path = queue.pop()
                submit(student, path)
            for future in running:
                student, path, digest = meta.pop(future)
                try:
                    record = future.result()
                except Exception as exc:  # the task failed, not the submission: retry, record
                    reason, used, worker = _failure(exc)
                    history.setdefault(student, []).append(reason)
                    runs[student] = runs.get(student, 0) + used
                    if runs[student] < ATTEMPTS:
                        note(_("{student}: {reason}; trying once more elsewhere").format(
                            student=student, reason=reason))
                        submit(student, path, avoid=worker)
                        continue
                    record = grading_error_record(
                        student, _("grading error, no grade written ({attempts} attempt(s)): "
                                   "{reasons}").format(attempts=runs[student],
                                                       reasons="; ".join(history[student])),
                        attempts=history[student])
                else:
                    if student in history:
                        record["attempts"] = history[student]
                finally:
                    future.release()
                record["sha256"] = digest
                yield student, record
                while queue and running.count() < window():
                    student, path = queue.pop()
                    submit(student, path)
        except BaseException as exc:
            # Stopped (Ctrl-C, SIGTERM, SIGHUP, or a failure here): the tasks in flight are
            # cancelled, which makes each kill its grading process; wait until no worker
            # holds one. What finished is in the log and the gradebook.
            held = stop_tasks(client, list(meta))
            if held:
                exc.tasks_still_held = held  # type: ignore[attr-defined]  # for the batch's last words
                if held_on_stop is not None:
                    held_on_stop.update(held)
                print(_("warning: after {seconds:g} s, workers still hold cancelled tasks: "
                        "{tasks}").format(seconds=STOP_WAIT, tasks="; ".join(
                            f"{w}: {len(k)}" for w, k in sorted(held.items()))),
                      file=sys.stderr)
            raise


if __name__ == "__main__":
    sys.exit(_serve(int(sys.argv[1])))
