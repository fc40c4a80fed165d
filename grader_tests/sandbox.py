"""Isolated grading: the student's code runs in a child process, the checks run here.

``grade_isolated(path)`` starts a ``_worker.py`` process that loads the submission and
builds a namespace of ``RemoteFunction`` proxies; the usual checks (``core``) then run in
this process, which the student's code never ran in. Each call crosses the socket as
plain data (``wire``): the grader compares real NumPy arrays it decoded itself, so a
patched ``numpy.allclose``, a faked module or a lying ``__eq__`` in the submission's
process changes nothing here.

Loading: the worker announces each cell of the submission before it runs it; a cell
that never finishes is stopped from here, named, and the submission loaded again without
it (``Sandbox.start``), so the other cells' functions are graded.

Per call: a time limit (the check's, enforced here; the worker is killed and restarted
with the submission reloaded), an address-space cap in the worker (``MemoryError`` there),
and any exit of the worker (``sys.exit``, ``os._exit``, a signal) is a ``crash`` of that
call, after which the worker is restarted.

Callbacks: the student's function may call the graded names it builds on
(``guard.CALLEES``), answered here by the reference, and the functions of ours a check
passed. What the worker may not do, it cannot have done here: a callback is refused before
it runs when its answer would be too big (``guard.check_callee_size``, from the arguments'
shapes) or, once computed, when its message would pass ``MAX_MESSAGE_BYTES``; it runs
within the deadline of the call that asked for it. A refusal reaches the student's code as
a ``MemoryError`` with the reason; the grader goes on.
"""

import contextlib
import os
import select
import signal
import shutil
import socket
import struct
import subprocess
import sys
import time
from multiprocessing.connection import Connection

import numpy as np

from solutions.training import ModelConfig

from . import assignments, config, evidence, i18n, jail, observed, submission, wire
from .assignments import EXERCISE_VARIABLES, POINTS, Assignment  # noqa: F401  (re-exported)
from .guard import (CHECK_TIME_LIMIT, SPEC_FUNCTIONS, StudentTimeout, WorkerDied,
                    allowed_callees, callees, check_callee_size, time_limit)
from .report import CheckResult, FunctionResult, tampering_flags
from .runner import grade_namespace

wire.register_record(ModelConfig)  # configurations cross as records, rebuilt here as this
HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_worker.py")
# Largest message the grader accepts from the student's process (bytes): a bigger one ends
# that process like any other misbehaviour, before it can fill the grader's memory.
MAX_MESSAGE_BYTES = 64 * 2**20
# Seconds a message may take when no call's deadline applies.
BACKSTOP_SECONDS = 600.0
# Seconds a submission's whole load may take (each of its cells a third): the one loading
# time-out (``Sandbox.load_time_limit``).
LOAD_TIME_LIMIT = 60.0
# Seconds past a cell's own limit (a third of ``Sandbox.load_time_limit``, which the
# worker's alarm enforces) after which the grader stops a worker whose cell still runs
# (the alarm caught, ignored, or held off by a call that never returns to Python), and
# loads the submission again without that cell.
CELL_GRACE_SECONDS = 2.0
# Cells the grader may skip so while loading one submission; past them nothing is graded.
MAX_SKIPPED_CELLS = 3
# The worker and the modules it imports, as the package grader_tests: the only code of the
# kit inside the jail (the package's __init__ and assignments load nothing else).
WORKER_FILES = ("__init__.py", "_worker.py", "assignments.py", "wire.py", "rebind.py",
                "submission.py")
PACKAGE = os.path.basename(HERE)


class _CellHung(Exception):
    """Cell ``index`` of the submission ran past its time while it loaded: still running
    ``seconds`` after it started (None: its time plus ``CELL_GRACE_SECONDS``, when the
    grader stopped the worker), or stopped by the worker's own alarm at its time."""

    def __init__(self, index, seconds=None):
        super().__init__(index)
        self.index, self.seconds = index, seconds


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
        load_time_limit: float, seconds the whole load may take (default
            ``LOAD_TIME_LIMIT``); each cell gets a third
            (the worker's alarm), and a cell still running ``CELL_GRACE_SECONDS`` later is
            stopped by the grader and skipped (``skipped``), the submission loaded again
            without it (at most ``MAX_SKIPPED_CELLS`` cells).
        allowed_modules: tuple of str, the third-party modules the submission may import
            (default: ``config.allowed_modules()``, the course's list).
        limits: ``jail.Limits`` of the worker's jail (default ``jail.Limits()``: its
            whole memory, CPU weight, processes).
    """

    def __init__(self, path, memory_mb=1024, load_time_limit=None, assignment="attention",
                 jailed=True, allowed_modules=None, limits=None):
        self.path, self.memory_mb = path, memory_mb
        self.load_time_limit = LOAD_TIME_LIMIT if load_time_limit is None else load_time_limit
        self.limits = limits or jail.Limits()
        self.assignment, self.jailed = assignments.get(assignment), jailed
        # third-party modules the submission may import (the course's list by default)
        self.allowed_modules = tuple(config.allowed_modules() if allowed_modules is None
                                     else allowed_modules)
        self.proc = self.conn = None
        self.scratch = self.inside = None  # the private copy of the submission
        self.uid = None  # the jail's uid (when the grader is root)
        self.group = None  # the jail's control group (jail.Command.group)
        self.observed: dict[str, int] = {}  # the kernel's counts in it (cgroup.Group)
        self.memory_reached, self.memory_limit, self.pids_limit = False, 0, 0
        self.names, self.cell_errors = {}, []
        self.skipped: dict[int, str] = {}  # cell index -> why the grader skipped it
        self.kit_cells: set[int] | None = None  # ``evidence.kit_cells``, not run either
        self.callables = {}   # key -> a function of ours the worker may call back
        self.callees = {}     # graded name -> what answers it for the function being graded
        self.refused = []     # callbacks the worker asked for and was never offered
        self.refused_calls = []  # system calls the jail refused (``observed``)
        self._observed = None
        self.deadline = None  # of the call in progress: nested calls share it

    # -- process management ---------------------------------------------------------------
    def start(self):
        """Start the worker in the jail (or, opted in, unjailed) and load the submission;
        a cell that never finishes is skipped (``skipped``, named in ``cell_errors``) and
        the submission loaded again without it.

        Raises:
            jail.JailUnavailable: no jail can be made here and unjailed grading was not
                allowed.
            StudentTimeout, WorkerDied: loading did not finish (``grade_isolated`` turns
                these into a grade).
        """
        while True:
            try:
                return self._start()
            except _CellHung as hung:
                if len(self.skipped) >= MAX_SKIPPED_CELLS:
                    raise StudentTimeout() from None
                self.skipped[hung.index] = self._skip_message(hung.index, hung.seconds)

    def undefined(self):
        """Why the submission does not define what it meant to, read by the grader from
        the file: name -> the message of the cell that would have defined it, a cell that
        does not parse (``submission.undefined_by_syntax``) or one the grader skipped
        (``skipped``; its names read as ``submission.cell_definitions`` reads them)."""
        why = submission.undefined_by_syntax(self.path, self.assignment)
        if self.skipped and not self.path.endswith(".py"):
            try:
                cells = submission.read_cells(self.path)
                chunks = submission.code_of_notebook(self.path,
                                                     given=self.assignment.given_cells)
            except submission.SubmissionError:
                return why
            for index, source in chunks:
                if index in self.skipped:
                    for name in submission.cell_definitions(cells[index], source):
                        why.setdefault(name, self.skipped[index])
        elif self.skipped:  # a .py file: the one chunk, 0
            with open(self.path, encoding="utf-8", errors="replace") as f:
                for name in submission.cell_definitions(None, f.read()):
                    why.setdefault(name, self.skipped[0])
        return why

    def _skip_message(self, index, seconds=None):
        """What ``cell_errors`` says of cell ``index``, skipped: the cell named as
        ``submission.cell_name`` names it, read by the grader from the file."""
        try:
            cells = [] if self.path.endswith(".py") else submission.read_cells(self.path)
        except submission.SubmissionError:
            cells = []
        where = submission.cell_name(cells, index) if 0 <= index < len(cells) else \
            i18n._("the file")
        return i18n._("{cell}: still running after {seconds:g} s while the submission "
                      "loaded (a loop that never ends at the top level of a cell?): skipped, "
                      "and the rest of the submission graded without it").format(
                          cell=where, seconds=self.load_time_limit / 3 + CELL_GRACE_SECONDS
                          if seconds is None else seconds)

    def _start(self):
        parent, child = socket.socketpair()
        if child.fileno() <= jail.SECCOMP_FD:  # the jail's launcher opens its filter there
            import fcntl

            moved = fcntl.fcntl(child.fileno(), fcntl.F_DUPFD_CLOEXEC, jail.SECCOMP_FD + 1)
            child.close()
            child = socket.socket(fileno=moved)
        if self.scratch is None:
            self.scratch = jail.scratch_folder("submission")
            jail.chown_for_jail(self.scratch)
            self.inside = os.path.join(self.scratch, os.path.basename(self.path))
            shutil.copyfile(self.path, self.inside)
            jail.chown_for_jail(self.inside)
        fd = str(child.fileno())
        if self.jailed:
            jail.require()
            code = [(os.path.join(HERE, f), f"{jail.CODE_DIR}/{PACKAGE}/{f}")
                    for f in WORKER_FILES]
            code.append((jail.seccomp_file(), observed.LOGGED_FILTER))
            command = jail.command(
                [sys.executable, "-I", f"{jail.CODE_DIR}/{PACKAGE}/_worker.py", fd,
                 str(self.memory_mb), observed.LOGGED_FILTER],
                readonly=code, submission_dir=self.scratch, keep_fds=(child.fileno(),),
                limits=self.limits)
            argv, preexec, cwd, env = command.argv, command.preexec, None, None
            self.uid, self.group = command.uid, command.group
            path = f"{jail.SUBMISSION_DIR}/{os.path.basename(self.path)}"
        else:
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
            env.update(jail.ENV_BASE)
            argv, preexec, cwd = [sys.executable, "-I", WORKER, fd, str(self.memory_mb)], \
                os.setsid, self.scratch
            path = self.inside
        # the kernel's log of this jail's refused calls, from before it starts
        self._observed = observed.RefusedCalls(self.uid if self.jailed else None)
        self.proc = subprocess.Popen(argv, pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     cwd=cwd, env=env, preexec_fn=preexec)
        child.close()
        self.conn = Connection(parent.detach())
        if self.kit_cells is None:  # the kit's own cells that lost their metadata
            self.kit_cells = evidence.kit_cells(self.path)
        reply = self._load({"op": "load", "path": path,
                            "skip": sorted(set(self.skipped) | self.kit_cells),
                            "spec_names": list(SPEC_FUNCTIONS),
                            "names": list(self.assignment.points),
                            "callees": {n: list(allowed_callees(n))
                                        for n in self.assignment.points},
                            "assignment": self.assignment.name,
                            "variables": list(self.assignment.variables),
                            "cell_time_limit": self.load_time_limit / 3,
                            "allowed_modules": list(self.allowed_modules),
                            # the loading's messages in the grading's language
                            "messages": submission.message_table(i18n._)})
        if reply.get("op") != "loaded" or not isinstance(reply.get("names"), dict):
            self.stop()
            raise WorkerDied()
        stopped = [i for i in reply.get("timed_out") or () if type(i) is int
                   and i not in self.skipped]
        if stopped:
            # A cell the worker's own alarm stopped is skipped as one the grader stopped is,
            # and the submission loaded again without it: what the cell left behind (memory
            # it holds, a namespace half made) would otherwise count against every function
            # graded after it. (Only the student's own grade depends on this report.)
            self.stop()
            raise _CellHung(stopped[0], self.load_time_limit / 3)
        self.names = {str(k): v for k, v in reply["names"].items() if isinstance(v, dict)}
        self.cell_errors = (list(self.skipped.values()) +
                            [str(e) for e in reply.get("cell_errors", [])])[:200]

    def _load(self, message):
        """Send the load request and wait for its reply, cell by cell: the worker
        announces each cell before it runs (``{"op": "cell", "index": i}``, indices rising);
        the whole load has ``load_time_limit``, each cell its third plus
        ``CELL_GRACE_SECONDS``.

        Raises:
            _CellHung: a cell ran past its time (the worker is stopped).
            StudentTimeout, WorkerDied: the load ran past ``load_time_limit``, the worker
                ended, or it sent what no worker sends (stopped too).
        """
        started = time.monotonic()
        end = started + self.load_time_limit
        cell, cell_end = None, end
        self.deadline = end
        try:
            self._send(message)
            while True:
                try:
                    reply = self._receive(min(end, cell_end))
                except StudentTimeout:
                    if cell is not None and cell_end < end:
                        self.stop()
                        raise _CellHung(cell) from None
                    raise
                if reply.get("op") == "callback":
                    self._answer_callback(reply)
                    continue
                if reply.get("op") != "cell":
                    return reply
                index = reply.get("index")
                if type(index) is not int or (cell is not None and index <= cell):
                    raise WorkerDied()
                cell = index
                cell_end = time.monotonic() + self.load_time_limit / 3 + CELL_GRACE_SECONDS
        except (StudentTimeout, WorkerDied, OSError, ValueError, KeyError):
            self.stop()
            raise
        finally:
            self.deadline = None

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
            if self.group is not None:
                self._observe()
            jail.reap(self.uid, group=self.group)  # the jail gone before anything else starts
            self.group = None
        if self._observed is not None:
            self.refused_calls += [n for n in self._observed.names()
                                   if n not in self.refused_calls]
            self._observed = None

    def _observe(self):
        """Add the kernel's counts in the jail's group (``cgroup.Group.observations``) to
        ``observed``; ``memory_reached`` says whether this group's memory limit was met."""
        counts = self.group.observations()
        self.memory_reached = bool(counts["memory_limit_hits"] or counts["oom_kills"])
        if self.memory_reached:
            self.memory_limit = self.group.memory_bytes
        if counts["pids_limit_hits"]:
            self.pids_limit = self.group.pids
        for key, value in counts.items():
            self.observed[key] = self.observed.get(key, 0) + value

    def observation_flags(self):
        """What the jail observed, as flags for the report: the whole jail's memory limit
        reached (the kernel's OOM killer ended a process, or usage met it), new processes
        refused at its process limit (its cgroup's counts), and the system calls its
        seccomp filter refused (the kernel's audit records)."""
        flags = []
        if self.observed.get("memory_limit_hits") or self.observed.get("oom_kills"):
            flags.append(i18n._("the submission's processes reached the jail's memory limit "
                                "({mib} MiB for all of them and /tmp together; processes "
                                "ended by the kernel: {kills})").format(
                                    mib=self.memory_limit // 2**20,
                                    kills=self.observed.get("oom_kills", 0)))
        if self.observed.get("pids_limit_hits"):
            flags.append(i18n._("the submission's processes reached the jail's process limit "
                                "({pids}): new processes were refused {count} times").format(
                                    pids=self.pids_limit,
                                    count=self.observed["pids_limit_hits"]))
        if self.refused_calls:  # seen by the machine's kernel, after the jail ended
            flags.append(i18n._("the jail refused system calls the submission's processes "
                                "made: {calls}").format(calls=", ".join(self.refused_calls)))
        return flags

    def close(self):
        """Kill the worker and delete the submission's scratch copy."""
        self.stop()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def restart(self):
        self.stop()
        self.start()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the protocol ---------------------------------------------------------------------
    def _callable_of(self, obj):
        """How a function of ours travels to the worker (``wire``'s ``callable_of``)."""
        if isinstance(obj, RemoteFunction):
            return {"__student__": obj.__name__}
        if isinstance(obj, RemoteCallable):
            return {"__handle__": obj.id, "callable": True}
        key = f"f{id(obj)}"
        self.callables[key] = obj
        return {"__callable__": key}

    def _resolve(self, obj):
        """What a function reference from the worker becomes here (``wire``'s ``resolve``)."""
        if "__callable__" in obj:
            return self.callables[str(obj["__callable__"])]
        if "__student__" in obj:
            return RemoteFunction(self, str(obj["__student__"]))
        return RemoteCallable(self, int(obj["__handle__"]), str(obj.get("type", "function")))

    def _dumps(self, message):
        return wire.dumps(message, callable_of=self._callable_of)

    def _wait(self, deadline, write=False):
        """Wait until the socket can be read (or written); ``StudentTimeout`` past
        ``deadline`` (``BACKSTOP_SECONDS`` from now when None), ``WorkerDied`` if the
        process ended."""
        fd = self.conn.fileno()
        end = deadline if deadline is not None else time.monotonic() + BACKSTOP_SECONDS
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise StudentTimeout()
            ready = select.select([] if write else [fd], [fd] if write else [], [],
                                  min(remaining, 0.05))
            if ready[0] or ready[1]:
                return fd
            if self.proc.poll() is not None:
                raise WorkerDied()

    def _read(self, size, deadline):
        """Exactly ``size`` bytes from the worker, within ``deadline``: a message announced
        and never finished is a time-out of the call, never a grader that waits forever."""
        chunks, got = [], 0
        while got < size:
            fd = self._wait(deadline)
            try:
                data = os.read(fd, min(size - got, 1 << 20))
            except OSError:
                raise WorkerDied() from None
            if not data:
                raise WorkerDied()
            chunks.append(data)
            got += len(data)
        return b"".join(chunks)

    def _receive(self, deadline):
        """One message from the worker (``multiprocessing.connection``'s framing: a 4-byte
        big-endian length, or -1 and an 8-byte one), at most ``MAX_MESSAGE_BYTES``;
        anything else ends the worker (``WorkerDied``)."""
        (size,) = struct.unpack("!i", self._read(4, deadline))
        if size == -1:
            (size,) = struct.unpack("!Q", self._read(8, deadline))
        if not 0 <= size <= MAX_MESSAGE_BYTES:
            raise WorkerDied()
        body = self._read(size, deadline)
        try:  # bounded: size of its structure, depth, the call's deadline (``wire``)
            return wire.loads(body, resolve=self._resolve, deadline=deadline)
        except wire.DeadlinePassed:
            failed: type[Exception] = StudentTimeout
        except (ValueError, KeyError, TypeError, RecursionError, UnicodeDecodeError):
            failed = WorkerDied  # garbage on the wire
        del body  # a traceback kept by a check's result must not keep the message
        raise failed() from None

    def _send(self, message):
        """Send ``message`` to the worker within the current call's deadline (a worker
        that stops reading cannot hold the grader)."""
        self._send_bytes(self._dumps(message))

    def _send_bytes(self, data):
        """Send one encoded message (``_send``), framed as ``multiprocessing.connection``
        frames it), at most ``MAX_MESSAGE_BYTES`` as every message received.

        Raises:
            MemoryError: ``data`` is longer than ``MAX_MESSAGE_BYTES`` (nothing is sent).
        """
        if len(data) > MAX_MESSAGE_BYTES:
            raise MemoryError(i18n._("a message of {size} bytes, more than the {limit} the "
                                     "socket carries").format(size=len(data),
                                                              limit=MAX_MESSAGE_BYTES))
        header = struct.pack("!i", len(data)) if len(data) < 0x7FFFFFFF else \
            struct.pack("!i", -1) + struct.pack("!Q", len(data))
        view = memoryview(header + data)
        while view:
            fd = self._wait(self.deadline, write=True)
            try:
                sent = os.write(fd, view)
            except BlockingIOError:
                continue
            except OSError:
                raise WorkerDied() from None
            view = view[sent:]

    def _request(self, message, time_limit=None):
        """Send ``message``, answer the worker's callbacks until its reply comes; a request
        made while answering a callback (a nested call) keeps the outer call's deadline."""
        outer = self.deadline
        deadline = outer if time_limit is None or outer is not None else \
            time.monotonic() + time_limit
        self.deadline = deadline
        try:
            self._send(message)
            while True:
                reply = self._receive(deadline)
                if reply.get("op") != "callback":
                    return reply
                self._answer_callback(reply)
        except (StudentTimeout, WorkerDied, OSError, ValueError, KeyError) as exc:
            limit = self.group.memory_bytes if self.group is not None else None
            self.stop()
            if isinstance(exc, WorkerDied) and limit and self.memory_reached:
                raise WorkerDied(limit) from None
            raise
        finally:
            self.deadline = outer

    def _answer_callback(self, request):
        """Answer a callback only with what the grader offered: a function of ours it sent
        (``callables``) or a graded name the function being graded may reach
        (``callees``). Anything else is refused and remembered as evidence."""
        name = str(request.get("name"))
        fn = self.callables.get(name) or self.callees.get(name)
        args, kwargs = request.get("args", []), request.get("kwargs", {})
        if fn is None or not isinstance(args, list) or not isinstance(kwargs, dict):
            if len(self.refused) < 20:
                self.refused.append(name[:80])
            self._send({"op": "callback-error", "type": "RuntimeError",
                        "message": "not available"})
            return
        try:
            check_callee_size(self._callee_name(name, fn), args, kwargs)
            remaining = (self.deadline - time.monotonic() if self.deadline is not None
                         else BACKSTOP_SECONDS)
            if remaining <= 0:
                raise StudentTimeout()
            # the call's own deadline, not a fresh one (an alarm already armed around
            # this call, e.g. ``core.call``'s, is left to stop it)
            armed = hasattr(signal, "getitimer") and signal.getitimer(signal.ITIMER_REAL)[0] > 0
            with contextlib.nullcontext() if armed else time_limit(remaining):
                value = fn(*args, **kwargs)
            data = self._dumps({"op": "callback-result", "value": value})
            if len(data) > MAX_MESSAGE_BYTES:
                raise MemoryError(i18n._(
                    "the answer of {name} would be {size} bytes on the wire, more than the "
                    "{limit} a message may hold").format(name=self._callee_name(name, fn),
                                                         size=len(data),
                                                         limit=MAX_MESSAGE_BYTES))
            self._send_bytes(data)
        except (StudentTimeout, WorkerDied):
            raise
        except Exception as exc:  # sent as its nearest builtin class (a refused size:
            kind = next(k for k in type(exc).__mro__ if k.__module__ == "builtins")
            self._send({"op": "callback-error", "type": kind.__name__,  # MemoryError)
                        "message": str(exc)[:2000]})

    def _callee_name(self, key, fn):
        """The graded name a callback answers for: the callee's name, or for a function of
        ours the grader passed, its own ``__name__``."""
        if key in self.callees:
            return key
        return str(getattr(fn, "__name__", key))

    def call(self, name, args, kwargs, time_limit=CHECK_TIME_LIMIT):
        """Call the submission's ``name``; return ``(result, args_after, kwargs_after)``.

        Raises:
            the student's exception (as its builtin class when it is a standard one,
            ``RemoteError`` otherwise), ``StudentTimeout``, or ``WorkerDied``; after the
            last two the worker has been restarted.
        """
        return self._call({"op": "call", "name": name, "args": list(args),
                           "kwargs": dict(kwargs)}, time_limit)

    def call_handle(self, handle_id, args, kwargs, time_limit=CHECK_TIME_LIMIT):
        """Call a function the submission returned (``RemoteCallable``); as ``call``."""
        return self._call({"op": "call-handle", "id": handle_id, "args": list(args),
                           "kwargs": dict(kwargs)}, time_limit)

    def _call(self, message, time_limit):
        if self.conn is None:
            self.restart()
        outermost = self.deadline is None
        try:
            reply = self._request(message, time_limit)
        except (StudentTimeout, WorkerDied):
            if outermost:  # the outermost call restarts; nested ones re-raise
                self.restart()
            raise
        finally:
            if outermost:  # what the grader offered was for this call only: a function
                self.callables.clear()  # kept by the student answers nothing later
        if reply["op"] == "raised":
            types = reply["types"]
            message = reply["message"]
            kind = wire.exception_class([str(t) for t in types]) if isinstance(types, list) \
                else None
            if kind is not None:
                raise kind(message)
            raise RemoteError(str(types[0]) if types else "Exception", message)
        return reply["value"], reply["args"], reply["kwargs"]

class RemoteFunction:
    """A callable standing for the submission's function ``name`` in the sandbox."""

    enforces_time_limit = True  # core.call sets ``time_limit`` instead of arming SIGALRM

    def __init__(self, sandbox, name):
        self.sandbox, self.__name__ = sandbox, name
        self.last_args = None
        self.time_limit = CHECK_TIME_LIMIT

    def __call__(self, *args, **kwargs):
        box = self.sandbox
        outer = box.callees
        box.callees = callees_for(self.__name__, self)
        try:
            result, args_after, kwargs_after = box.call(self.__name__, args, kwargs,
                                                        self.time_limit)
        finally:
            box.callees = outer
        self.last_args = (args_after, kwargs_after)
        _advance_generators(args, kwargs, args_after, kwargs_after)
        return result


class RemoteCallable:
    """A function the submission returned or passed (it stayed in the sandbox)."""

    def __init__(self, sandbox, id, type_name="function"):
        self.sandbox, self.id, self.type_name = sandbox, id, type_name
        self.__name__ = f"<{type_name} from the submission>"

    def __call__(self, *args, **kwargs):
        result, args_after, kwargs_after = self.sandbox.call_handle(self.id, args, kwargs)
        _advance_generators(args, kwargs, args_after, kwargs_after)
        return result


def _advance_generators(args, kwargs, args_after, kwargs_after):
    """A NumPy generator the student's code drew from crossed as a copy of its state: give
    the grader's generator the state the copy ended in, as if it had been drawn from."""
    pairs = list(zip(args, args_after)) + [(v, kwargs_after.get(k)) for k, v in kwargs.items()]
    for before, after in pairs:
        if isinstance(before, np.random.Generator) and isinstance(after, np.random.Generator):
            before.bit_generator.state = after.bit_generator.state


def remote_namespace(sandbox):
    """The namespace the checks see: proxies for functions, decoded values otherwise."""
    ns = {"__sandbox__": sandbox}
    for name, info in sandbox.names.items():
        if info["kind"] == "function":
            ns[name] = RemoteFunction(sandbox, name)
        else:
            ns[name] = info["value"]
    return ns


def graded_points(assignment: "str | Assignment") -> dict[str, int]:
    """Points table of ``assignment`` (an ``assignments.Assignment`` or its name).

    Raises:
        ValueError: not a known assignment.
    """
    return dict(assignments.get(assignment).points)


def callees_for(name, target):
    """What answers, in the grader, each other graded name the function graded as ``name``
    reaches: ``guard.callees`` (the reference, whose own uses of ``name`` call ``target``,
    the proxy of the student's function); nothing for a name outside the contract."""
    return callees(name, target)


def grade_isolated(path, names=None, memory_mb=1024, assignment="attention", jailed=True,
                   language=None, allowed_modules=None, limits=None):
    """Grade a submission file with its code in a jailed process.

    Nothing the student's process says about itself counts: the grade comes from the
    values the checks receive, and the flags (``flags``) from what the grader observes
    from outside: a check that found a value gamed (``tampering_flags``), a callback the
    process asked for and was never offered, the submission's own source naming the kit's
    files or modules or reaching for the grading machinery (``evidence``), a load that
    never finished, a system call the jail's filter refused, as the machine's kernel
    reported it for the jail's uid (``observed``). A flag withholds the grade for review; it does not change the points.

    Args:
        path: str, a notebook or ``.py`` file.
        names: graded names to grade (default: all of the assignment).
        memory_mb: int, address space the worker may add after start-up.
        assignment: an ``assignments.Assignment`` or its name.
        jailed: bool, run the worker in the jail (``jail.py``); False only where the
            instructor allowed unjailed grading.

        language: the language of the checks' messages (``i18n.LANGUAGES``), given by the
            caller from the course's configuration (default: the current one,
            ``i18n.current_language()``); the student's process is never asked.
        allowed_modules: tuple of str, the third-party modules the submission may import,
            given by the caller from the course's configuration (default:
            ``config.allowed_modules()``, the course in the current folder).
        limits: ``jail.Limits`` of the worker's jail (default ``jail.Limits()``).

    Returns:
        ``(results, cell_errors, flags)``: ``results`` as ``core.grade_namespace``;
        ``cell_errors`` the cells that failed while loading; ``flags`` list of str.

    Raises:
        jail.JailUnavailable: ``jailed`` and no jail can be made here.
    """
    with i18n.use_language(language or i18n.current_language()):
        return _grade_isolated(path, names, memory_mb, assignment, jailed, allowed_modules,
                               limits)


def _grade_isolated(path, names, memory_mb, assignment, jailed, allowed_modules, limits):
    if jailed:
        jail.require()
    flags = [i18n._("the submission {finding}").format(finding=e)
             for e in evidence.kit_references(path)]
    box = Sandbox(path, memory_mb=memory_mb, assignment=assignment, jailed=jailed,
                  allowed_modules=allowed_modules, limits=limits)
    try:
        results, cell_errors, flags = _grade_in(box, names, assignment, flags)
    finally:
        box.close()
    flags += [f for f in box.observation_flags() if f not in flags]
    return results, cell_errors, flags


def _grade_in(box, names, assignment, flags):
    """``grade_isolated``'s results, cell errors and flags, from the started ``box``
    (closed by the caller, whose observations it adds)."""
    points = graded_points(assignment)
    try:
        box.start()
    except (StudentTimeout, WorkerDied) as exc:
        what = (i18n._("the submission did not finish loading within {seconds:g} s").format(
            seconds=box.load_time_limit) if isinstance(exc, StudentTimeout) else
            i18n._("the submission's processes reached the jail's memory limit ({mib} MiB "
                   "for all of them and /tmp together) while loading, and the kernel "
                   "ended them").format(mib=exc.memory_bytes // 2**20)
            if exc.memory_bytes else
            i18n._("the submission ended its process while loading (exit, signal or memory "
                   "exhausted)"))
        results = {n: FunctionResult(n, 0.0, float(points[n]), [CheckResult(
            i18n.N_("the submission loads"), False,
            "timeout" if isinstance(exc, StudentTimeout) else "crash",
            i18n._("{what}: nothing could be graded.").format(what=what))])
            for n in (names or points)}
        return results, [what], flags
    ns = remote_namespace(box)
    results = grade_namespace(ns, names, assignment=assignment,
                              undefined=box.undefined())
    cell_errors = box.cell_errors
    flags += [i18n._("the submission's process asked the grader for {name!r}, which it "
                     "was never offered").format(name=name)
              for name in dict.fromkeys(box.refused)]
    return results, cell_errors, flags + [f for f in tampering_flags(results) if f not in flags]


__all__ = ["POINTS", "RemoteCallable", "RemoteFunction", "Sandbox", "grade_isolated"]
