"""Isolated grading: the student's code runs in a child process, the checks run here.

``grade_isolated(path)`` starts a ``_worker.py`` process that loads the submission and
builds a namespace of ``RemoteFunction`` proxies; the usual checks (``core``) then run in
this process, which the student's code never ran in. Each call crosses the socket as
plain data (``wire``): the grader compares real NumPy arrays it decoded itself, so a
patched ``numpy.allclose``, a faked module or a lying ``__eq__`` in the submission's
process changes nothing here.

Per call: a time limit (the check's, enforced here; the worker is killed and restarted
with the submission reloaded), an address-space cap in the worker (``MemoryError`` there),
and any exit of the worker (``sys.exit``, ``os._exit``, a signal) is a ``crash`` of that
call, after which the worker is restarted.
"""

import os
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection

from solutions import attention as reference

from . import wire
from .core import (CHECK_TIME_LIMIT, POINTS, SPEC_FUNCTIONS, CheckResult, StudentTimeout,
                   grade_namespace)

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker.py")
EXERCISE_VARIABLES = ("weight_ratio_unscaled", "weight_ratio_scaled", "budget_block_params",
                      "budget_weight_bytes_fp16", "budget_kv_cache_bytes",
                      "budget_kv_to_weights", "budget_kv_cache_bytes_mqa")
SAFE_EXCEPTIONS = {k.__name__: k for k in (
    NotImplementedError, ValueError, TypeError, IndexError, KeyError, ZeroDivisionError,
    AttributeError, NameError, AssertionError, MemoryError, RecursionError, OverflowError,
    FloatingPointError, ArithmeticError, LookupError, RuntimeError, UnboundLocalError)}


class WorkerDied(Exception):
    """The sandbox process ended during a call (exit, kill, out of memory)."""


class RemoteError(Exception):
    """An exception raised by student code that has no safe builtin counterpart here."""

    def __init__(self, type_name, message):
        super().__init__(message)
        self.type_name = type_name


class Sandbox:
    """One worker process holding one submission.

    Args:
        path: str, the submission (notebook or ``.py``).
        memory_mb: int, address space the worker may add after start-up (0: no cap).
        load_time_limit: float, seconds the whole load may take; each cell gets a third.
    """

    def __init__(self, path, memory_mb=1024, load_time_limit=60.0):
        self.path, self.memory_mb, self.load_time_limit = path, memory_mb, load_time_limit
        self.proc = self.conn = None
        self.names, self.cell_errors, self.restarts = {}, [], 0

    # -- process management ---------------------------------------------------------------
    def start(self):
        """Start the worker and load the submission into it."""
        parent, child = socket.socketpair()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   MPLBACKEND="Agg")
        self.proc = subprocess.Popen(
            [sys.executable, "-I", WORKER, str(child.fileno()), str(self.memory_mb)],
            pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, cwd=os.path.dirname(os.path.abspath(self.path)), env=env)
        child.close()
        self.conn = Connection(parent.detach())
        reply = self._request({"op": "load", "path": os.path.abspath(self.path),
                               "spec_names": list(SPEC_FUNCTIONS),
                               "variables": list(EXERCISE_VARIABLES),
                               "cell_time_limit": self.load_time_limit / 3},
                              self.load_time_limit)
        self.names = reply["names"]
        self.cell_errors = reply["cell_errors"]

    def stop(self):
        """Kill the worker (idempotent)."""
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def restart(self):
        self.stop()
        self.restarts += 1
        self.start()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # -- the protocol ---------------------------------------------------------------------
    def _receive(self, deadline):
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise StudentTimeout()
            try:
                if self.conn.poll(0.05 if remaining is None else min(remaining, 0.05)):
                    return wire.loads(self.conn.recv_bytes())
            except (EOFError, OSError, ConnectionError):
                raise WorkerDied() from None
            if self.proc.poll() is not None:
                raise WorkerDied()

    def _request(self, message, time_limit=None):
        deadline = None if time_limit is None else time.monotonic() + time_limit
        try:
            self.conn.send_bytes(wire.dumps(message))
            while True:
                reply = self._receive(deadline)
                if reply.get("op") != "callback":
                    return reply
                self._answer_callback(reply)
        except (StudentTimeout, WorkerDied, OSError, ValueError, KeyError):
            self.stop()
            raise

    def _answer_callback(self, request):
        fn = getattr(reference, request["name"])
        try:
            value = fn(*request["args"], **request["kwargs"])
            self.conn.send_bytes(wire.dumps({"op": "callback-result", "value": value}))
        except Exception as exc:
            self.conn.send_bytes(wire.dumps({"op": "callback-error", "type": type(exc).__name__,
                                             "message": str(exc)}))

    def call(self, name, args, kwargs, time_limit=CHECK_TIME_LIMIT):
        """Call the submission's ``name``; return ``(result, args_after, kwargs_after)``.

        Raises:
            the student's exception (as its builtin class when it is a standard one,
            ``RemoteError`` otherwise), ``StudentTimeout``, or ``WorkerDied``; after the
            last two the worker has been restarted.
        """
        if self.conn is None:
            self.restart()
        try:
            reply = self._request({"op": "call", "name": name, "args": list(args),
                                   "kwargs": dict(kwargs)}, time_limit)
        except (StudentTimeout, WorkerDied):
            self.restart()
            raise
        if reply["op"] == "raised":
            types = reply["types"]
            message = reply["message"]
            for t in types:
                if t in SAFE_EXCEPTIONS:
                    raise SAFE_EXCEPTIONS[t](message)
            raise RemoteError(types[0], message)
        return reply["value"], reply["args"], reply["kwargs"]

    def problems(self):
        """Tampering the worker noticed in its own process (list of str)."""
        if self.conn is None:
            self.restart()
        return self._request({"op": "problems"}, 30.0)["problems"]


class RemoteFunction:
    """A callable standing for the submission's function ``name`` in the sandbox."""

    enforces_time_limit = True  # core.call sets ``time_limit`` instead of arming SIGALRM

    def __init__(self, sandbox, name):
        self.sandbox, self.__name__ = sandbox, name
        self.last_args = None
        self.time_limit = CHECK_TIME_LIMIT

    def __call__(self, *args, **kwargs):
        result, args_after, kwargs_after = self.sandbox.call(self.__name__, args, kwargs,
                                                             self.time_limit)
        self.last_args = (args_after, kwargs_after)
        return result


def remote_namespace(sandbox):
    """The namespace the checks see: proxies for functions, decoded values otherwise."""
    ns = {"__sandbox__": sandbox}
    for name, info in sandbox.names.items():
        if info["kind"] == "function":
            ns[name] = RemoteFunction(sandbox, name)
        else:
            ns[name] = info["value"]
    return ns


def grade_isolated(path, names=None, memory_mb=1024):
    """Grade a submission file with its code in a sandbox process.

    A submission the sandbox saw tampering (patching NumPy or builtins, faking modules,
    importing or opening the kit's files) keeps the points of the functions that are right
    on their own merits; every function below full marks is set to 0 with a ``tampering``
    check naming what was seen, since its failure may be what the tampering tried to hide.

    Returns:
        ``(results, cell_errors, flags)``: ``results`` as ``core.grade_namespace``;
        ``cell_errors`` the cells that failed while loading; ``flags`` what the sandbox
        saw the submission try, then one line per function whose checks found it gamed
        (``tampering_flags``).

    Raises:
        submission.SubmissionError: never; an unreadable file shows in ``cell_errors``.
    """
    with Sandbox(path, memory_mb=memory_mb) as box:
        ns = remote_namespace(box)
        results = grade_namespace(ns, names)
        flags = box.problems()
        cell_errors = box.cell_errors
    if flags:
        message = "tampering seen in the submission's process: " + "; ".join(flags) + "."
        for r in results.values():
            if r.score < r.max_score:
                r.score = 0.0
                r.checks.append(CheckResult("the submission left the grading environment alone",
                                            False, "tampering", message))
    return results, cell_errors, flags + [f for f in tampering_flags(results) if f not in flags]


def tampering_flags(results):
    """One line per function a check found gamed (fault ``tampering``): a rigged result,
    answers looked up by input, reference code, an altered environment.

    Args:
        results: dict name -> FunctionResult.

    Returns:
        list of str, ``"<name>: <first tampering message>"``.
    """
    found = []
    for name, r in results.items():
        messages = [c.message for c in r.checks if c.fault == "tampering"]
        if messages:
            text = messages[0]
            found.append(text if text.startswith(name + ":") else f"{name}: {text}")
    return found
__all__ = ["POINTS", "RemoteFunction", "Sandbox", "grade_isolated"]
