"""The sandbox worker: the only process where a student's code runs during isolated grading.

Started by ``sandbox.Sandbox`` inside the jail (``jail.py``) as
``python -I /opt/grader/grader_tests/_worker.py FD MEMORY_MB``, with only this file, the
package's ``__init__.py`` (which loads nothing of the engine) and the modules it imports
(``wire``, ``rebind``, ``submission``) bound in ``/opt/grader/grader_tests``: the graders
and the reference are not in the jail. The modules are imported once, as the package
``grader_tests`` (the folder above the package is put on the import path, never the
package's own folder), so each has one identity here as in the grader. It sends its standard output and error to ``/dev/null``,
caps its address space, loads the submission, and then answers requests on the socket
``FD``: call a function of the submission on given arguments (other graded names it
reaches are answered by the grader, through callbacks). Every message is ``wire`` JSON.
Nothing this process says about itself is believed: the grader judges the values it
receives, the calls it is asked for, and whether the process lives.
"""

import functools
import os
import sys
import types

if not __package__:  # run as a script (``python -I .../grader_tests/_worker.py``): the
    # package is found in the folder above this file's
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import resource  # noqa: E402
from multiprocessing.connection import Connection  # noqa: E402

import numpy as np  # noqa: E402

from grader_tests import rebind, submission, wire  # noqa: E402
from grader_tests.assignments import DEFAULT  # noqa: E402


class Callback:
    """Stands for a function of the grader's inside the student's process (a graded name
    the student's function reaches, or a field of an ``ops`` namespace the grader passed):
    calling it asks the grader, which may call back into this process meanwhile."""

    def __init__(self, conn, table, name):
        self.conn, self.table, self.name = conn, table, name

    def __call__(self, *args, **kwargs):
        send(self.conn, {"op": "callback", "name": self.name, "args": list(args),
                         "kwargs": kwargs}, self.table)
        while True:
            reply = receive(self.conn, self.table)
            if reply["op"] in ("call", "call-handle"):  # the grader calls us back meanwhile
                send(self.conn, serve(reply), self.table)
                continue
            if reply["op"] == "callback-error":
                raise _builtin_exception(reply["type"])(reply["message"])
            return reply["value"]


FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                  functools.partial, np.ufunc)


def callable_of(table):
    """The ``wire`` hook for functions leaving this process: the grader's own come back as
    its keys; the student's stay here as callable handles."""
    def ref(obj):
        if isinstance(obj, Callback):
            return {"__callable__": obj.name}
        if isinstance(obj, FUNCTION_TYPES):
            table[id(obj)] = obj
            return {"__handle__": id(obj), "callable": True,
                    "type": f"{type(obj).__module__}.{type(obj).__qualname__}"}
        return None
    return ref


def resolver(conn, table):
    """The ``wire`` hook for functions arriving from the grader."""
    def resolve(obj):
        if "__callable__" in obj:
            return Callback(conn, table, str(obj["__callable__"]))
        if "__student__" in obj:
            return STATE["prepare"](str(obj["__student__"]))
        return table[obj["__handle__"]]
    return resolve


STATE: dict = {}  # conn, table, prepare(name): what serve() needs


def send(conn, message, table):
    try:
        data = wire.dumps(message, table, None, callable_of(table))
    except Exception as exc:  # e.g. a value NumPy cannot turn into bytes
        data = wire.dumps({"op": "raised", "types": ["TypeError"],
                           "message": submission._("the result could not be sent: {error}"
                                                   ).format(error=exc)})
    conn.send_bytes(data)


def receive(conn, table):
    return wire.loads(conn.recv_bytes(), table, resolver(conn, table), lookalikes=True)


def _builtin_exception(name):
    kind = getattr(__builtins__, name, None) if not isinstance(__builtins__, dict) else \
        __builtins__.get(name)
    return kind if isinstance(kind, type) and issubclass(kind, Exception) else RuntimeError


def isolated(name, fn, allowed, conn, table):
    """The function graded as ``name`` with the graded names it may build on (``allowed``,
    the grader's ``guard.allowed_callees``) answered by the grader (the same re-binding as
    ``guard.isolate``, with callbacks in place of the reference). The graded name itself is
    never replaced, whatever ``fn.__name__`` is, and neither is any other: an alias of a
    function that calls ``name`` reaches the student's own code."""
    callees = {other: Callback(conn, table, other) for other in allowed if other != name}
    return rebind.rebound(fn, callees, name=name)


def describe(value):
    """How a namespace entry is announced to the grader."""
    if callable(value) and not isinstance(value, type):
        return {"kind": "function"}
    return {"kind": "value", "value": value}


def serve(request):
    """The reply to one request of the grader (``call``, ``call-handle``;
    ``load`` is handled by ``main``)."""
    op = request["op"]
    if op in ("call", "call-handle"):
        try:
            fn = STATE["prepare"](request["name"]) if op == "call" else \
                STATE["table"][request["id"]]
            args, kwargs = request["args"], request["kwargs"]
            result = fn(*args, **kwargs)
            return {"op": "result", "value": result, "args": list(args), "kwargs": kwargs}
        except BaseException as exc:  # everything the student's code raises goes back
            mro = [k.__qualname__ if k.__module__ == "builtins" else
                   f"{k.__module__}.{k.__qualname__}" for k in type(exc).__mro__]
            return {"op": "raised", "types": mro, "message": str(exc)[:2000]}
    return {"op": "error", "message": f"unknown op {op}"}


# ``seccomp`` system call numbers, and its operation and flag (linux/seccomp.h).
SECCOMP_SYSCALL = {"x86_64": 317, "aarch64": 277}
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_LOG = 1, 2


def log_refusals(path):
    """Install the jail's seccomp filter (the BPF program in file ``path``, the one
    bubblewrap installed) once more, with the kernel's log flag, so that the machine's
    kernel logs every call it refuses (``grader_tests.observed`` reads them). Does nothing
    where the file or the call is missing: the first filter refuses all the same."""
    import ctypes
    import platform

    try:
        with open(path, "rb") as f:
            program = f.read()
    except OSError:
        return
    number = SECCOMP_SYSCALL.get(platform.machine())
    if number is None or not program or len(program) % 8:
        return

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    code = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(code, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall(ctypes.c_long(number), ctypes.c_long(SECCOMP_SET_MODE_FILTER),
                 ctypes.c_long(SECCOMP_FILTER_FLAG_LOG), ctypes.byref(fprog))


def main():
    fd, memory_mb = int(sys.argv[1]), int(sys.argv[2])
    if len(sys.argv) > 3:
        log_refusals(sys.argv[3])  # before anything of the student's is loaded
    conn = Connection(fd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.environ["MPLBACKEND"] = "Agg"
    np.ones((8, 8)) @ np.ones((8, 8))  # load BLAS before the address-space cap
    if memory_mb > 0:
        with open("/proc/self/statm") as f:
            current = int(f.read().split()[0]) * resource.getpagesize()
        cap = current + memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    table = {}
    prepared = {}  # graded name -> its isolated function
    loaded_state = {"namespace": {}, "spec_names": (), "callees": {}}

    def prepare(name):
        if name not in prepared:
            allowed = loaded_state["callees"].get(name, ())
            prepared[name] = isolated(name, loaded_state["namespace"][name], allowed, conn,
                                      table)
        return prepared[name]

    STATE.update(conn=conn, table=table, prepare=prepare)
    while True:
        try:
            request = receive(conn, table)
        except (EOFError, OSError):
            return
        if request["op"] == "load":
            spec_names = tuple(request["spec_names"])
            prepared.clear()
            messages = request.get("messages")
            submission.use_messages(messages if isinstance(messages, dict) else None)
            try:
                allowed = request.get("allowed_modules")
                loaded = submission.load(
                    request["path"], request.get("cell_time_limit"),
                    request.get("assignment", DEFAULT.name),
                    None if allowed is None else tuple(str(m) for m in allowed),
                    # each cell announced before it runs: the grader stops one that never
                    # finishes and loads again without it
                    on_cell=lambda index: send(conn, {"op": "cell", "index": index}, table),
                    skip=frozenset(int(i) for i in request.get("skip", ())))
                namespace = loaded.namespace
                errors, timed_out = loaded.cell_errors, loaded.timed_out
            except submission.SubmissionError as exc:
                namespace, errors, timed_out = {}, [str(exc)], []
            callees = request.get("callees") or {}
            loaded_state.update(namespace=namespace, spec_names=spec_names,
                                callees={str(k): tuple(v) for k, v in callees.items()})
            names = {}
            for key in list(request.get("names", spec_names)) + list(request.get("variables", ())):
                if key in namespace:
                    names[key] = describe(namespace[key])
            reply = {"op": "loaded", "names": names, "cell_errors": errors,
                     "timed_out": timed_out}
        else:
            reply = serve(request)
        send(conn, reply, table)


if __name__ == "__main__":
    main()
