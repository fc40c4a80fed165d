"""The wire format between the grader and the sandboxed student process: JSON, never pickle.

Only plain data crosses: ``None``, bools, ints, floats (NaN and infinities included),
strings, lists, tuples, dicts, and NumPy arrays and scalars of boolean, integer, float or
complex dtype (sent as raw bytes with their dtype and shape: a 0-d array stays a 0-d
array, a NumPy scalar a NumPy scalar, an empty or non-contiguous array keeps its shape,
all with their dtype and byte order); NumPy random generators (as their bit generator's
state); records (dataclass instances such as a model configuration, and
``types.SimpleNamespace`` objects such as an ``ops`` namespace: their fields by name).
Decoding is bounded before it costs the receiver: a message with more than
``MAX_STRUCTURE`` structural characters (brackets, braces, commas, colons: an upper bound
on the values it holds) is refused unread, one nested deeper than ``MAX_DEPTH`` is
refused, and a ``deadline`` given to ``loads`` covers the decoding too
(``DeadlinePassed``). Whatever the student's process sends (and everything in that
process, this module included, is the student's to use), the grader builds only values
of the kinds above and records of the classes it registered.
Functions travel as references the receiving side turns into something it can call (the
``callable_of`` and ``resolve`` hooks: a grader's function becomes a callback in the
student's process, a student's function a remote call from the grader's). Anything else
stays in the process that made it and travels as a ``Handle``: an opaque reference the
other side can send back (a student's cache object, say) but never look into. Decoding
therefore never runs code chosen by the student: a record is rebuilt from a class this
side registered (``RECORDS``, a fixed table: a name outside it is refused), and only the
worker, which receives records from the grader alone, may ask for look-alike frozen
dataclasses of the grader's record names (``lookalikes=True``, at most
``MAX_LOOKALIKES`` of them). An
exception raised by student code crosses as the names of its classes; ``exception_class``
turns them into one of a fixed table of classes (``EXCEPTIONS``) or None.

This module imports only the standard library and NumPy, so that the sandbox worker can
use it without importing the graders or the reference.
"""

import base64
import dataclasses
import json
import math
import time
import types

import numpy as np

PLAIN_KINDS = "biufc"

# Exception classes a student's exception may be re-raised as on the grader's side
# (``exception_class``): classes that carry a message and nothing else, that the graders'
# own code never uses as control flow, and that take a message as their only argument.
# Left out on purpose: ``Exception`` and ``BaseException`` (an unknown class stays unknown),
# ``StopIteration`` and ``StopAsyncIteration`` (raised in a grader's loop they would end it
# early), ``GeneratorExit``, ``KeyboardInterrupt``, ``SystemExit``, the ``OSError`` family
# (a dead socket to the sandbox is an ``OSError``: a student's must not pass for one) and
# the ``ImportError`` family.
_BUILTIN_EXCEPTIONS = (
    ArithmeticError, AssertionError, AttributeError, FloatingPointError, IndexError,
    KeyError, LookupError, MemoryError, NameError, NotImplementedError, OverflowError,
    RecursionError, RuntimeError, TypeError, UnboundLocalError, ValueError,
    ZeroDivisionError, Warning, UserWarning, RuntimeWarning, DeprecationWarning,
    FutureWarning,
)
_NUMPY_EXCEPTIONS = tuple(
    kind for kind in (
        getattr(np.exceptions, "AxisError", None),
        getattr(np.exceptions, "ComplexWarning", None),
        getattr(np.exceptions, "DTypePromotionError", None),
        getattr(np.exceptions, "TooHardError", None),
        getattr(np.exceptions, "RankWarning", None),
        getattr(np.exceptions, "VisibleDeprecationWarning", None),
        getattr(np.exceptions, "ModuleDeprecationWarning", None),
        np.linalg.LinAlgError,
    ) if isinstance(kind, type) and issubclass(kind, Exception))
# Each class under its bare name and under ``module.qualname`` (``numpy.exceptions.AxisError``,
# ``builtins.ValueError``, ``numpy.linalg.LinAlgError``).
EXCEPTIONS = {}
for _kind in _BUILTIN_EXCEPTIONS + _NUMPY_EXCEPTIONS:
    EXCEPTIONS[_kind.__name__] = _kind
    EXCEPTIONS[f"{_kind.__module__}.{_kind.__qualname__}"] = _kind
del _kind
# How many names of a student's list are looked at (an MRO is never this long).
_MAX_MRO_NAMES = 64


def exception_class(mro_names: list[str]) -> type[Exception] | None:
    """The class a student's exception is re-raised as on the grader's side, or None.

    The student's process sends the names of the classes of its exception's ``__mro__``,
    most specific first. The first of them this module knows (``EXCEPTIONS``: safe
    builtins, ``numpy.exceptions.AxisError`` and NumPy's other exception and warning
    classes, ``numpy.linalg.LinAlgError``) is returned: in an MRO a class comes before
    its bases, so that is the most specific known class. The names are only looked up,
    never imported or evaluated, so nothing outside the table can come back, whatever the
    student's process sends; a student class named like a known one (``class
    AxisError(Exception)``) maps to the known class, which the student could have raised
    anyway.

    Args:
        mro_names: list of str, bare class names (``"AxisError"``) or ``module.qualname``
            (``"numpy.exceptions.AxisError"``); entries that are not str are skipped, and
            only the first 64 entries are read.

    Returns:
        A subclass of ``Exception`` from ``EXCEPTIONS``, or None when no name is known
        (the caller then raises its own stand-in with the first name in its message).
    """
    if not isinstance(mro_names, (list, tuple)):
        return None
    for name in mro_names[:_MAX_MRO_NAMES]:
        if type(name) is str and name in EXCEPTIONS:
            return EXCEPTIONS[name]
    return None


# Record classes this side rebuilds by name (the grader registers its model configuration;
# the student's process registers none and gets look-alike frozen dataclasses).
RECORDS: dict[str, type] = {}
_LOOKALIKES: dict[tuple, type] = {}
# Bounds of one decoded message: structural characters (``[{,:``, an upper bound on the
# values it holds: 262144 values cost the receiver some 20 MiB at most), nesting depth
# (the kit's deepest honest message, a record in a dict in a list of arguments, is under
# 10), look-alike record classes the worker makes for the life of its process.
MAX_STRUCTURE = 2**18
MAX_DEPTH = 64
MAX_LOOKALIKES = 16
# Values decoded between two looks at the deadline.
_DEADLINE_EVERY = 4096


class Refused(ValueError):
    """A message past a bound of decoding (size of its structure, depth, an unknown record
    name): refused before it is built."""


class DeadlinePassed(Exception):
    """The deadline given to ``loads`` passed while the message was being decoded."""


def register_record(cls):
    """Decode records named ``cls.__name__`` as ``cls(**fields)`` on this side."""
    RECORDS[cls.__name__] = cls
    return cls


def _record(name, fields, lookalikes=False):
    if name == "SimpleNamespace":
        return types.SimpleNamespace(**fields)
    cls = RECORDS.get(name)
    if cls is None:
        key = (name, tuple(fields))
        if not lookalikes or (key not in _LOOKALIKES and len(_LOOKALIKES) >= MAX_LOOKALIKES):
            raise Refused("unknown record")
        if key not in _LOOKALIKES:
            _LOOKALIKES[key] = dataclasses.make_dataclass(name, list(fields), frozen=True)
        cls = _LOOKALIKES[key]
    return cls(**fields)


class Handle:
    """An object that stayed in the student's process.

    Attributes:
        id: int, its key in the worker's table.
        type_name: str, ``module.qualname`` of its class.
        rigged: str or None, why its comparisons cannot be trusted (set by the worker).
    """

    __slots__ = ("id", "type_name", "rigged")

    def __init__(self, id, type_name, rigged=None):
        self.id, self.type_name, self.rigged = id, type_name, rigged

    def __eq__(self, other):
        return isinstance(other, Handle) and other.id == self.id

    def __hash__(self):
        return hash(("handle", self.id))

    def __repr__(self):
        return f"<{self.type_name} object from the submission>"

    def __deepcopy__(self, memo):
        return self


def _encode(obj, table, rigged_of, callable_of=None):
    if callable_of is not None and callable(obj) and not isinstance(obj, type):
        ref = callable_of(obj)
        if ref is not None:
            return ref
    if obj is None or type(obj) in (bool, str):
        return obj
    if type(obj) is int:
        return obj
    if type(obj) is float:
        return obj if math.isfinite(obj) else {"__float__": repr(obj)}
    if isinstance(obj, np.ndarray) and type(obj).__module__.startswith("numpy") and \
            obj.dtype.kind in PLAIN_KINDS:  # NumPy's own subclasses travel as plain arrays
        # np.asarray(order="C") keeps a 0-d array 0-d (np.ascontiguousarray makes it 1-d)
        arr = np.asarray(obj.view(np.ndarray), order="C")
        return {"__nd__": arr.dtype.str, "shape": list(arr.shape),
                "data": base64.b64encode(arr.tobytes()).decode("ascii")}
    if isinstance(obj, np.generic) and type(obj).__module__ == "numpy" and \
            obj.dtype.kind in PLAIN_KINDS:
        return {"__np__": obj.dtype.str,
                "data": base64.b64encode(np.asarray(obj).tobytes()).decode("ascii")}
    if type(obj) is tuple:
        return {"__tuple__": [_encode(x, table, rigged_of, callable_of) for x in obj]}
    if type(obj) is list:
        return [_encode(x, table, rigged_of, callable_of) for x in obj]
    if type(obj) is dict and all(type(k) is str for k in obj):
        return {"__dict__": [[k, _encode(v, table, rigged_of, callable_of)]
                             for k, v in obj.items()]}
    if type(obj) is np.random.Generator:
        bits = obj.bit_generator
        if type(bits).__module__.startswith("numpy") and hasattr(np.random, type(bits).__name__):
            return {"__rng__": type(bits).__name__,
                    "state": _encode(bits.state, table, rigged_of, callable_of)}
    if type(obj) is types.SimpleNamespace:
        return {"__record__": "SimpleNamespace",
                "fields": _encode(dict(vars(obj)), table, rigged_of, callable_of)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and (
            type(obj).__name__ in RECORDS or type(obj) in _LOOKALIKES.values()):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return {"__record__": type(obj).__name__,
                "fields": _encode(fields, table, rigged_of, callable_of)}
    if isinstance(obj, Handle):
        return {"__handle__": obj.id}
    if table is None:
        raise TypeError(f"cannot send a {type(obj).__name__} object")
    key = id(obj)
    table[key] = obj
    kind = type(obj)
    return {"__handle__": key, "type": f"{kind.__module__}.{kind.__qualname__}",
            "rigged": rigged_of(obj) if rigged_of else None}


def dumps(obj, table=None, rigged_of=None, callable_of=None):
    """Encode ``obj`` to bytes.

    Args:
        table: dict or None. On the worker side, objects that are not plain data are
            stored here by id and sent as handles; without a table they raise TypeError.
        rigged_of: callable ``obj -> str or None`` describing a rigged object.
        callable_of: callable ``fn -> dict or None``: the JSON object a callable travels
            as (a key of the sender's, tagged ``__callable__`` or ``__student__``), or None
            to treat it like any other object.

    Raises:
        TypeError: an object that is not plain data and no table to keep it in.
    """
    return json.dumps(_encode(obj, table, rigged_of, callable_of),
                      allow_nan=False).encode("utf-8")


def _plain_dtype(spec):
    """The dtype named ``spec`` if it is one of ``PLAIN_KINDS``; ValueError otherwise."""
    try:
        dtype = np.dtype(spec) if isinstance(spec, str) else None
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in PLAIN_KINDS or dtype.fields or dtype.subdtype:
        raise ValueError("refused dtype")
    return dtype


class _Budget:
    """What one ``loads`` may still spend: the deadline, looked at every few values."""

    __slots__ = ("deadline", "count", "lookalikes")

    def __init__(self, deadline, lookalikes):
        self.deadline, self.count, self.lookalikes = deadline, 0, lookalikes

    def step(self, depth):
        if depth > MAX_DEPTH:
            raise Refused("nested too deep")
        self.count += 1
        if self.deadline is not None and self.count % _DEADLINE_EVERY == 0 and \
                time.monotonic() > self.deadline:
            raise DeadlinePassed()


def _decode(obj, table, resolve=None, budget=None, depth=0):
    if budget is None:
        budget = _Budget(None, False)
    budget.step(depth)
    depth += 1
    if isinstance(obj, list):
        return [_decode(x, table, resolve, budget, depth) for x in obj]
    if not isinstance(obj, dict):
        return obj
    if "__nd__" in obj:
        dtype = _plain_dtype(obj["__nd__"])
        shape = obj["shape"]
        if not (isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape)):
            raise ValueError("bad shape")
        data = base64.b64decode(obj["data"])
        return np.frombuffer(data, dtype=dtype).reshape(tuple(shape)).copy()
    if "__np__" in obj:
        dtype = _plain_dtype(obj["__np__"])
        data = base64.b64decode(obj["data"])
        if len(data) != dtype.itemsize:
            raise ValueError("bad scalar")
        return np.frombuffer(data, dtype=dtype)[0]
    if "__float__" in obj:
        return float(obj["__float__"])
    if "__tuple__" in obj:
        return tuple(_decode(x, table, resolve, budget, depth) for x in obj["__tuple__"])
    if "__dict__" in obj:
        return {str(k): _decode(v, table, resolve, budget, depth) for k, v in obj["__dict__"]}
    if "__rng__" in obj:
        bits = getattr(np.random, str(obj["__rng__"]), None)
        if not (isinstance(bits, type) and issubclass(bits, np.random.BitGenerator)):
            raise ValueError("unknown bit generator")
        generator = np.random.Generator(bits())
        generator.bit_generator.state = _decode(obj["state"], table, resolve, budget, depth)
        return generator
    if "__record__" in obj:
        fields = _decode(obj["fields"], table, resolve, budget, depth)
        if not isinstance(fields, dict) or not all(k.isidentifier() for k in fields):
            raise ValueError("bad record")
        return _record(str(obj["__record__"]), fields, budget.lookalikes)
    if "__callable__" in obj or "__student__" in obj or obj.get("callable"):
        if resolve is None:
            raise ValueError("a function arrived where none was expected")
        return resolve(obj)
    if "__handle__" in obj:
        if table is not None:
            return table[obj["__handle__"]]
        rigged = obj.get("rigged")
        return Handle(int(obj["__handle__"]), str(obj.get("type", "object"))[:200],
                      rigged[:500] if isinstance(rigged, str) else None)
    raise ValueError("unknown encoding")


def loads(data, table=None, resolve=None, *, deadline=None, lookalikes=False):
    """Decode bytes made by ``dumps``, within the bounds of decoding.

    Args:
        data: bytes, one message.
        table: on the worker side, the table that resolves handles back to objects; on
            the grader side None, and handles decode to ``Handle`` instances.
        resolve: callable ``dict -> callable`` turning a function reference (a JSON
            object with ``__callable__``, ``__student__`` or ``"callable": true``) into
            something this side can call.
        deadline: float or None, a ``time.monotonic()`` time decoding must end by.
        lookalikes: bool, build a frozen dataclass for a record name this side did not
            register (the worker only, for the grader's records); False refuses it.

    Raises:
        Refused: more than ``MAX_STRUCTURE`` structural characters, nesting past
            ``MAX_DEPTH``, an unknown record name (a ``ValueError``).
        DeadlinePassed: ``deadline`` passed while decoding.
        ValueError: an unknown encoding, a refused dtype or bit generator, a function
            reference without ``resolve``.
    """
    structure = sum(data.count(c) for c in (b"[", b"{", b",", b":"))
    if structure > MAX_STRUCTURE:
        raise Refused("too many values")
    try:
        decoded = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise Refused("nested too deep") from None
    if deadline is not None and time.monotonic() > deadline:
        raise DeadlinePassed()
    return _decode(decoded, table, resolve, _Budget(deadline, lookalikes))
