"""The sandbox worker: the only process where a student's code runs during isolated grading.

Started by ``sandbox.Sandbox`` as ``python -I .../grader_tests/_worker.py FD MEMORY_MB``.
It imports neither the graders nor the reference (imports of ``grader_tests`` and
``solutions`` are refused and recorded), sends its standard output and error to
``/dev/null``, caps its address space, loads the submission, and then answers requests
on the socket ``FD``: call a function of the submission on given arguments (other graded
names it reaches are answered by the grader, through callbacks, with the reference), or
report what it noticed. Every message is ``wire`` JSON.
"""

import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import resource  # noqa: E402
from multiprocessing.connection import Connection  # noqa: E402

import numpy as np  # noqa: E402

import integrity  # noqa: E402
import submission  # noqa: E402
import wire  # noqa: E402

ATTEMPTS = []  # tampering attempts seen in this process (imports, file reads)
PROTECTED = ("solutions", "grader_tests")
PROTECTED_DIRS = tuple(os.path.join(os.path.dirname(HERE), d) for d in PROTECTED)


class _RefuseKitImports:
    """Meta-path finder refusing the reference and the graders inside the sandbox."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in PROTECTED:
            ATTEMPTS.append(f"the submission tried to import {fullname}")
            raise ImportError(f"{fullname} is not available to submissions")
        return None


def _audit(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        try:
            path = os.path.abspath(os.fsdecode(args[0]))
        except Exception:
            return
        if any(path.startswith(d + os.sep) for d in PROTECTED_DIRS):
            ATTEMPTS.append(f"the submission opened {os.path.relpath(path, os.path.dirname(HERE))}")


class Callback:
    """Stands for a graded name inside a student function: the grader answers the call."""

    def __init__(self, conn, table, name):
        self.conn, self.table, self.name = conn, table, name

    def __call__(self, *args, **kwargs):
        self.conn.send_bytes(wire.dumps({"op": "callback", "name": self.name, "args": list(args),
                                         "kwargs": kwargs}, self.table, integrity.rigged_object))
        reply = wire.loads(self.conn.recv_bytes(), self.table)
        if reply["op"] == "callback-error":
            raise _builtin_exception(reply["type"])(reply["message"])
        return reply["value"]


def _builtin_exception(name):
    kind = getattr(__builtins__, name, None) if not isinstance(__builtins__, dict) else \
        __builtins__.get(name)
    return kind if isinstance(kind, type) and issubclass(kind, Exception) else RuntimeError


def isolated(fn, namespace, spec_names, conn, table):
    """``fn`` with every other graded name it reaches answered by the grader (see
    ``core.isolate`` for the in-process version)."""
    if not isinstance(fn, types.FunctionType):
        return fn
    home = fn.__globals__
    patched = dict(home)
    for name in spec_names:
        if name != fn.__name__:
            patched[name] = Callback(conn, table, name)

    def rebind(f):
        g = types.FunctionType(f.__code__, patched, f.__name__, f.__defaults__, f.__closure__)
        g.__kwdefaults__ = f.__kwdefaults__
        return g

    for key, value in list(home.items()):
        if isinstance(value, types.FunctionType) and value.__globals__ is home \
                and key not in spec_names and not key.startswith("__"):
            patched[key] = rebind(value)
    out = rebind(fn)
    patched[fn.__name__] = out
    return out


def describe(value):
    """How a namespace entry is announced to the grader."""
    if callable(value) and not isinstance(value, type):
        return {"kind": "function"}
    return {"kind": "value", "value": value}


def main():
    fd, memory_mb = int(sys.argv[1]), int(sys.argv[2])
    conn = Connection(fd)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    sys.meta_path.insert(0, _RefuseKitImports())
    sys.addaudithook(_audit)
    os.environ["MPLBACKEND"] = "Agg"
    np.ones((8, 8)) @ np.ones((8, 8))  # load BLAS before the address-space cap
    if memory_mb > 0:
        with open("/proc/self/statm") as f:
            current = int(f.read().split()[0]) * resource.getpagesize()
        cap = current + memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    table = {}
    prepared = {}  # graded name -> its isolated function
    namespace = {}
    spec_names = ()
    while True:
        try:
            request = wire.loads(conn.recv_bytes(), table)
        except (EOFError, OSError):
            return
        op = request["op"]
        if op == "load":
            spec_names = tuple(request["spec_names"])
            prepared.clear()
            try:
                loaded = submission.load(request["path"], request.get("cell_time_limit"))
                namespace = loaded.namespace
                errors = loaded.cell_errors
            except submission.SubmissionError as exc:
                namespace, errors = {}, [str(exc)]
            names = {}
            for key in list(spec_names) + list(request.get("variables", ())):
                if key in namespace:
                    names[key] = describe(namespace[key])
            reply = {"op": "loaded", "names": names, "cell_errors": errors}
        elif op == "call":
            name = request["name"]
            if name not in prepared:
                prepared[name] = isolated(namespace[name], namespace, spec_names, conn, table)
            fn = prepared[name]
            args, kwargs = request["args"], request["kwargs"]
            try:
                result = fn(*args, **kwargs)
                reply = {"op": "result", "value": result, "args": list(args), "kwargs": kwargs}
            except BaseException as exc:  # everything the student's code raises goes back
                mro = [k.__name__ for k in type(exc).__mro__]
                reply = {"op": "raised", "types": mro, "message": str(exc)[:2000]}
        elif op == "problems":
            reply = {"op": "problems", "problems": integrity.environment_problems() + ATTEMPTS}
        else:
            reply = {"op": "error", "message": f"unknown op {op}"}
        try:
            data = wire.dumps(reply, table, integrity.rigged_object)
        except Exception as exc:  # e.g. a value NumPy cannot turn into bytes
            data = wire.dumps({"op": "raised", "types": ["TypeError"],
                               "message": f"the result could not be sent: {exc}"})
        conn.send_bytes(data)


if __name__ == "__main__":
    main()
