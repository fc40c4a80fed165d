"""Local PostgreSQL and Dask clusters on loopback, for the tests and the benchmark.

Both are context managers that start real server processes and stop them on exit, what
ever happened inside, within a bounded time:

* ``postgres()``: Debian's PostgreSQL (``initdb`` + ``pg_ctl``) with its data directory
  in a new temporary folder, listening on 127.0.0.1 only, on a free port, with trust
  authentication for the user ``kit``. Yields a ``PostgresServer``, whose
  ``create_database(name)`` returns the SQLAlchemy URL of a new, empty database. As root,
  the server runs as the ``postgres`` user (PostgreSQL refuses root).
* ``dask_cluster(n_workers)``: ``dask scheduler`` and ``dask worker --nworkers N
  --nthreads 1`` as subprocesses on 127.0.0.1, the kit on their ``PYTHONPATH``. Yields the
  scheduler's address; ``cluster.worker_pids()`` gives the pid of each worker process.

``postgres_bin()`` finds the server binaries on ``PATH`` or under
``/usr/lib/postgresql/*/bin`` (where Debian puts them); ``tools/ci_services.sh`` installs
them when they are missing.
"""

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from tests.helpers import kit_env

# Seconds a server may take to start, and to stop before it is killed.
START_TIMEOUT = 90
STOP_TIMEOUT = 20


def free_port():
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bin():
    """The folder holding ``initdb`` and ``pg_ctl``, or None if PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return os.path.dirname(os.path.realpath(found))
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if all(os.access(os.path.join(folder, b), os.X_OK) for b in ("initdb", "pg_ctl")):
            return folder
    return None


def _as_server_user():
    """``subprocess`` keyword arguments that run a command as a user PostgreSQL accepts."""
    if os.geteuid() != 0:
        return {}
    user = pwd.getpwnam("postgres")  # created by Debian's postgresql package
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


class PostgresServer:
    """A running server: ``port``, and ``create_database``."""

    def __init__(self, port):
        self.port = port

    def create_database(self, name):
        """Create the database ``name``; return its SQLAlchemy URL
        (``postgresql+psycopg://kit@127.0.0.1:PORT/NAME``, psycopg 3)."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="kit", dbname="postgres",
                             autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://kit@127.0.0.1:{self.port}/{name}"


@contextlib.contextmanager
def postgres():
    """Run a PostgreSQL server on 127.0.0.1 in a temporary data directory.

    Yields:
        ``PostgresServer``.

    Raises:
        RuntimeError: the binaries are missing or the server did not start.
    """
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL's initdb/pg_ctl not found (tools/ci_services.sh "
                           "installs them)")
    who = _as_server_user()
    folder = tempfile.mkdtemp(prefix="attention-kit-pg-")
    data, log = os.path.join(folder, "data"), os.path.join(folder, "server.log")
    if who:
        os.chown(folder, who["user"], who["group"])
    port = free_port()
    pg_ctl = [os.path.join(bin_dir, "pg_ctl"), "-D", data]
    started = False
    try:
        try:
            subprocess.run([os.path.join(bin_dir, "initdb"), "-D", data, "-U", "kit",
                            "--auth=trust", "-E", "UTF8", "--no-sync"], check=True, cwd=folder,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=START_TIMEOUT, **who)
            options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off "
                       f"-c synchronous_commit=off -c full_page_writes=off")
            subprocess.run([*pg_ctl, "-l", log, "-o", options, "-w", "-t", str(START_TIMEOUT),
                            "start"], check=True, cwd=folder, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=START_TIMEOUT + 10, **who)
        except subprocess.CalledProcessError as exc:
            tail = ""
            if os.path.exists(log):
                with open(log, encoding="utf-8", errors="replace") as f:
                    tail = f.read()[-2000:]
            raise RuntimeError(f"PostgreSQL did not start: {exc.stderr!r} {tail}") from exc
        started = True
        yield PostgresServer(port)
    finally:
        if started:
            subprocess.run([*pg_ctl, "-m", "immediate", "-w", "-t", str(STOP_TIMEOUT), "stop"],
                           cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=STOP_TIMEOUT + 10, check=False, **who)
        shutil.rmtree(folder, ignore_errors=True)


def _stop(proc):
    """SIGTERM the process group of ``proc``, SIGKILL it after ``STOP_TIMEOUT`` s."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group is left
    proc.wait()


class DaskCluster:
    """A scheduler and ``n_workers`` single-threaded worker processes on 127.0.0.1."""

    def __init__(self, n_workers, folder):
        self.n_workers, self.folder = n_workers, folder
        self.address = f"tcp://127.0.0.1:{free_port()}"
        self.procs = []

    def _spawn(self, name, args, env):
        with open(os.path.join(self.folder, f"{name}.log"), "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "dask", *args], env=env,
                                    cwd=self.folder, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self):
        port = self.address.rsplit(":", 1)[1]
        # A task whose worker dies comes back to the batch at once, which retries it once
        # elsewhere (see grader_tests/dask_batch.py).
        env = kit_env(DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES="0")
        self._spawn("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", port,
                                  "--no-dashboard"], env)
        # The workers' temporary files (a task's submission, left behind by a worker that
        # is killed) go into this cluster's folder, removed with it.
        self._spawn("worker", ["worker", self.address, "--nworkers", str(self.n_workers),
                               "--nthreads", "1", "--host", "127.0.0.1", "--no-dashboard",
                               "--death-timeout", "60", "--local-directory", self.folder],
                    dict(env, TMPDIR=self.folder))
        self.wait_for_workers(self.n_workers)

    def client(self):
        from distributed import Client

        return Client(self.address, timeout="30s")

    def wait_for_workers(self, n, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while True:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a Dask process exited ({proc.args}); see "
                                       f"{self.folder}/*.log")
            try:
                with self.client() as client:
                    client.wait_for_workers(n, timeout=max(1, deadline - time.monotonic()))
                return
            except (OSError, TimeoutError):
                if time.monotonic() > deadline:
                    raise

    def worker_pids(self):
        """``{worker address: pid}`` of the worker processes (not their nannies)."""
        with self.client() as client:
            return client.run(os.getpid)

    def stop(self):
        for proc in reversed(self.procs):  # the workers, then the scheduler
            _stop(proc)


@contextlib.contextmanager
def dask_cluster(n_workers=2):
    """Run ``dask scheduler`` and ``dask worker`` on 127.0.0.1; yield the ``DaskCluster``."""
    folder = tempfile.mkdtemp(prefix="attention-kit-dask-")
    cluster = DaskCluster(n_workers, folder)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
