"""The grading engine: checks, their registry, fault isolation, time limits and scores.

A *check* is a function ``check(fn) -> None`` registered for one graded name with
``@check(name, title)``. It calls the student's function ``fn`` (through ``call``) and
raises ``Fail(fault, message)`` when a property of the contract does not hold. The runner
turns every outcome into a ``CheckResult``: a pass, a ``Fail`` with its fault id, or the
student's own exception (``not-implemented``, ``crash``) or a time-out (``timeout``).

A function's score is ``points * passed / total`` over its checks (partial credit), and
a bug in one function costs only that function's points: when a graded function calls
other graded functions (``scaled_dot_product_attention`` calls ``softmax``), the runner
re-binds those names to the reference implementations (``isolate``), but only the ones
the contract builds it from (``CALLEES``): any other graded name it reaches stays the
student's own. The function under test is known by the graded name it is graded as,
never by its ``__name__``, and the references standing in for the others call it back
where they use that name (``callees``): a function that hands its own work to another
graded function, or to itself under another name, is never answered by a reference.
"""

import contextlib
import copy
import functools
import io
import math
import signal
import sys
import textwrap
import threading
import time
import types
import warnings
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field

import numpy as np

from solutions import attention as reference

from .faults import FAULTS, trap_line

try:  # Hypothesis's own "the test is not reproducible" errors
    from hypothesis.errors import Flaky as _Flaky
    _FLAKY = (_Flaky,)
except ImportError:  # pragma: no cover
    _FLAKY = ()
from . import lookup
from .integrity import borrowed_reference, environment_problems, is_protected_module
from .lookup import nudgeable
from .rebind import rebound, rebound_many

# Points per graded name; they sum to 100 and are the nbgrader points of the hidden cells.
POINTS = {
    "softmax": 10,
    "causal_mask": 3,
    "padding_mask": 3,
    "combine_masks": 4,
    "scaled_dot_product_attention": 12,
    "split_heads": 5,
    "merge_heads": 5,
    "multi_head_attention": 10,
    "sinusoidal_positions": 5,
    "layer_norm_forward": 6,
    "layer_norm_backward": 10,
    "attention_forward": 7,
    "attention_backward": 10,
    "block_param_count": 3,
    "kv_cache_bytes": 2,
    "exercise_weight_ratio": 2,
    "exercise_decoder_budget": 3,
}

# Names whose implementations are swapped for the reference inside other graded functions.
SPEC_FUNCTIONS = reference.SPEC_FUNCTIONS

_ATTENTION_PARTS = ("softmax", "scaled_dot_product_attention", "split_heads", "merge_heads",
                    "causal_mask", "padding_mask", "combine_masks")
# The graded functions each graded function of `attention` is built from, in the contract's
# order of composition: while X is graded, these (and only these) are answered by the
# reference, so that a bug in one costs only its own points. Any other graded name X
# reaches stays the student's own: a function never gets its work done by the reference
# of a function built above it (an attention_forward, a backward) or beside it.
CALLEES = {
    "softmax": (),
    "causal_mask": (),
    "padding_mask": (),
    "combine_masks": ("causal_mask", "padding_mask"),
    "scaled_dot_product_attention": ("softmax",),
    "split_heads": (),
    "merge_heads": (),
    "multi_head_attention": _ATTENTION_PARTS,
    "sinusoidal_positions": (),
    "layer_norm_forward": (),
    "layer_norm_backward": (),
    "attention_forward": _ATTENTION_PARTS,
    "attention_backward": ("softmax", "split_heads", "merge_heads", "causal_mask"),
    "block_param_count": (),
    "kv_cache_bytes": (),
}


def allowed_callees(name: str) -> tuple[str, ...]:
    """The graded names answered by the reference while ``name`` is graded (``CALLEES``;
    for a graded name of another assignment, every function of `attention`, which that
    assignment builds on)."""
    if name in CALLEES:
        return tuple(CALLEES[name])
    return tuple(n for n in SPEC_FUNCTIONS if n != name)

# Positions of a graded function's returned tuple that the contract leaves opaque: the
# cache a forward returns for its backward may be of any type (a dict, a tuple of arrays,
# a dataclass, a closure ...). The graders only hand it back to the student's backward,
# never compare it, so it is never judged as rigged (``integrity.rigged_object``).
OPAQUE_RESULTS = {"layer_norm_forward": (1,), "attention_forward": (1,)}

# Bounds of the walk that lists the data inside an argument (``contents``).
CONTENTS_MAX_DEPTH = 24
CONTENTS_MAX_OBJECTS = 20_000

# Seconds one call of a student function may run before it is stopped, and seconds of
# student code one graded function may use over all its checks. Only time spent inside
# student code counts: the graders' own work (Hypothesis shrinking, finite differences)
# never turns into a student's time-out, whatever the machine's load.
CALL_TIME_LIMIT = 4.0
FUNCTION_TIME_BUDGET = 30.0
CHECK_TIME_LIMIT = CALL_TIME_LIMIT  # the name the sandbox uses
# Calls of the graded function kept (the first ones with float arguments), of which
# ``lookup.probe`` repeats up to 3 on nudged inputs.
PROBED_CALLS = 12


def grade_id(name):
    """nbgrader grade id of the hidden cell grading ``name`` (``softmax_hidden_checks``)."""
    return f"{name}_hidden_checks"


class Fail(Exception):
    """Raised by a check when a property fails.

    Args:
        fault: str, a fault id of ``faults.FAULTS``.
        message: str, for the student: the property, the smallest input where it broke,
            received versus expected, and the likely cause.

    Raises:
        ValueError: if ``fault`` is not a known fault id.
    """

    def __init__(self, fault, message):
        if fault not in FAULTS:
            raise ValueError(f"unknown fault id {fault!r}")
        super().__init__(message)
        self.fault = fault
        self.message = message


class StubHit(BaseException):
    """Raised by ``call`` when the student's function is still the stub.

    A ``BaseException`` so that Hypothesis stops at once instead of shrinking an input
    that every call fails on.
    """


class StudentTimeout(BaseException):
    """Raised inside student code when a check's time limit runs out.

    A ``BaseException`` so that a student's ``except Exception`` cannot swallow it.
    """


@dataclass
class CheckResult:
    """Outcome of one check: ``fault`` is None exactly when ``passed``."""

    name: str
    passed: bool
    fault: str = None
    message: str = ""


@dataclass
class FunctionResult:
    """Outcome of every check of one graded name; ``score`` in points."""

    name: str
    score: float
    max_score: float
    checks: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def faults(self):
        """Distinct fault ids of the failed checks, in order of first appearance."""
        seen = []
        for c in self.checks:
            if not c.passed and c.fault not in seen:
                seen.append(c.fault)
        return seen

    def to_dict(self):
        """JSON-ready dict: name, score, max_score, checks (list of dicts), seconds."""
        return asdict(self)


CHECKS = {}

# Text printed after a graded name's report (the exercises' worked solutions): feedback only.
NOTES = {}


def check(name, title):
    """Register a check for graded name ``name``; ``title`` names the property."""

    def register(fn):
        CHECKS.setdefault(name, []).append((title, fn))
        return fn

    return register


# ---------------------------------------------------------------------------------------
# Calling student code: private copies, a time limit, silenced output and warnings.

_deadline = threading.local()


def _on_alarm(signum, frame):
    raise StudentTimeout()


@contextlib.contextmanager
def time_limit(seconds):
    """Stop the code inside after ``seconds`` (wall clock) by raising ``StudentTimeout``.

    Uses ``SIGALRM``, so it only acts in the main thread of a POSIX process; elsewhere it
    is a no-op and the caller relies on an outer limit (nbgrader's cell time-out or the
    sandbox's own per-call limit). The alarm repeats every 0.25 s until the block exits,
    so an exception swallowed where Python cannot raise it (a ``__del__``, a garbage
    collector callback) is raised again at the next one.
    """
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3), 0.25)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# Python frames a student's function may add to the stack when it runs in this process:
# endless recursion (a function that calls itself under another name) ends in a
# RecursionError long before it could overflow the C stack and kill the process.
STUDENT_RECURSION = 400


@contextlib.contextmanager
def shallow_recursion(frames: int = STUDENT_RECURSION):
    """Lower the interpreter's recursion limit to the current depth plus ``frames`` for the
    code inside (restored after)."""
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(min(previous, depth + frames))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def _snapshot(value):
    """Deep copy of arrays, lists, tuples and dicts, used to detect in-place writes."""
    try:
        return copy.deepcopy(value)
    except Exception:  # an object that cannot be copied is compared by identity only
        return value


_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def _kit_object(obj):
    """True for the kit's own stand-ins for the submission's objects (``wire.Handle``, the
    sandbox's ``RemoteFunction`` and ``RemoteCallable``): compared by what they refer to."""
    kind = type(obj)
    module = sys.modules.get(getattr(kind, "__module__", ""), None)
    return (kind.__module__ in ("grader_tests.wire", "grader_tests.sandbox")
            and getattr(module, kind.__name__, None) is kind)


def contents(value: object) -> list[tuple[str, object]]:
    """The data held inside ``value``, found without calling any of its methods.

    Walks dicts, lists and tuples (their subclasses and namedtuples included), the
    elements of object arrays, the attributes of objects (``__dict__`` and ``__slots__``:
    dataclasses, attrs-like classes, ``types.SimpleNamespace``), the closure cells and
    default arguments of functions, the function, arguments and keywords of
    ``functools.partial`` objects, and the instance and function of bound methods, with
    cycle detection (an object already on the current path is not entered again) and
    bounds (``CONTENTS_MAX_DEPTH`` levels, ``CONTENTS_MAX_OBJECTS`` objects). What an
    object's own ``==`` says is never asked.

    Args:
        value: any object (an argument of a student's function, a cache).

    Returns:
        list of ``(path, leaf)`` in a fixed order (dict entries with str keys and
        attributes sorted by name). A leaf is a private copy of an ndarray (a base-class
        array of the same dtype and shape), a NumPy scalar, a Python scalar (``None``,
        bool, int, float, complex, str, bytes), or a tuple of str and int standing for a
        node (its kind, class and length) or for what the walk does not enter (a module, a
        class, the kit's stand-in for an object of the sandbox, a cycle, the bounds).
    """
    found = []
    budget = [CONTENTS_MAX_OBJECTS]

    def name_of(kind):
        return f"{kind.__module__}.{kind.__qualname__}"

    def enumerate_items(iterable):  # lazily: a long sequence stops at the bound
        return ((f"[{i}]", x) for i, x in enumerate(iterable))

    def attributes_of(obj, kind):
        try:
            attributes = dict(object.__getattribute__(obj, "__dict__"))
        except (AttributeError, TypeError):
            attributes = {}
        for klass in kind.__mro__:
            slots = vars(klass).get("__slots__", ())
            for slot in (slots,) if isinstance(slots, str) else slots:
                descriptor = vars(klass).get(slot)
                if not isinstance(descriptor, types.MemberDescriptorType):
                    continue
                try:
                    attributes.setdefault(slot, descriptor.__get__(obj, kind))
                except AttributeError:  # a slot never assigned
                    pass
        return sorted(attributes.items(), key=lambda kv: str(kv[0]))

    def walk(obj, path, depth, ancestors):
        budget[0] -= 1
        kind = type(obj)
        if kind in _SCALARS or issubclass(kind, np.generic):
            found.append((path, obj))
            return
        if issubclass(kind, np.ndarray) and not obj.dtype.hasobject:
            found.append((path, np.array(obj, copy=True, subok=False)))
            return
        if _kit_object(obj):
            ref = getattr(obj, "id", None)
            found.append((path, ("<object of the submission>", ref if type(ref) is int else -1)))
            return
        if issubclass(kind, (types.ModuleType, type)):
            found.append((path, ("<module or class>", str(getattr(obj, "__name__", "?")))))
            return
        if id(obj) in ancestors:
            found.append((path, ("<cycle>", name_of(kind))))
            return
        if depth >= CONTENTS_MAX_DEPTH:
            found.append((path, ("<depth>", name_of(kind))))
            return
        ancestors = ancestors | {id(obj)}
        if issubclass(kind, np.ndarray):  # object dtype: its elements
            children = enumerate_items(obj.flat)
            found.append((path, ("ndarray", "object", *obj.shape)))
        elif issubclass(kind, dict):
            entries = list(dict.items(obj))
            if all(type(k) is str for k, _ in entries):
                children = [(f"[{k!r}]", v) for k, v in sorted(entries, key=lambda kv: kv[0])]
            else:
                children = [(f"<key {i}>", x) for i, kv in enumerate(entries) for x in kv]
            found.append((path, ("dict", name_of(kind), len(entries))))
        elif issubclass(kind, (list, tuple)):
            items = list.__iter__(obj) if issubclass(kind, list) else tuple.__iter__(obj)
            children = enumerate_items(items)
            size = list.__len__(obj) if issubclass(kind, list) else tuple.__len__(obj)
            found.append((path, ("sequence", name_of(kind), size)))
        elif issubclass(kind, functools.partial):
            children = [(".func", obj.func), (".args", obj.args), (".keywords", obj.keywords)]
            found.append((path, ("partial",)))
        elif issubclass(kind, types.FunctionType):
            children = []
            for i, cell in enumerate(obj.__closure__ or ()):
                try:
                    children.append((f".<cell {i}>", cell.cell_contents))
                except ValueError:  # a cell not filled yet
                    children.append((f".<cell {i}>", "<empty cell>"))
            children += [(".__defaults__", obj.__defaults__),
                         (".__kwdefaults__", obj.__kwdefaults__)]
            found.append((path, ("function", obj.__qualname__)))
        elif issubclass(kind, types.MethodType):
            children = [(".__self__", obj.__self__), (".__func__", obj.__func__)]
            found.append((path, ("method",)))
        else:
            children = [(f".{k}", v) for k, v in attributes_of(obj, kind)]
            found.append((path, ("object", name_of(kind), len(children))))
        for label, child in children:
            if budget[0] <= 0:  # the bound: one marker, where the walk stopped
                found.append((path + label, ("<bound>", CONTENTS_MAX_OBJECTS)))
                break
            walk(child, path + label, depth + 1, ancestors)

    walk(value, "", 0, frozenset())
    return found


def _same_leaf(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, (np.ndarray, np.generic)):
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        if a_arr.shape != b_arr.shape or a_arr.dtype != b_arr.dtype:
            return False
        return bool(np.array_equal(a_arr, b_arr, equal_nan=a_arr.dtype.kind in "fc"))
    if type(a) in (float, complex):
        return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
    return a == b  # Python scalars, and tuples of str and int


def same_contents(a: list[tuple[str, object]], b: list[tuple[str, object]]) -> bool:
    """True if two results of ``contents`` list the same data at the same paths (arrays
    bit-for-bit with their dtype and shape, NaN equal to NaN)."""
    return len(a) == len(b) and all(pa == pb and _same_leaf(x, y)
                                    for (pa, x), (pb, y) in zip(a, b))


def same_value(a: object, b: object) -> bool:
    """True if ``a`` and ``b`` hold the same data (arrays bit-for-bit, NaN equal to NaN).

    The data is what ``contents`` finds inside each (containers, attributes, closure
    cells ...): an object's own ``==`` is never asked, so an honest cache whose ``==`` is
    identity (a plain class) or raises on arrays (a ``@dataclass`` of arrays) compares by
    its arrays, and a cache whose ``==`` says "equal" to anything does not hide a change.
    """
    return same_contents(contents(a), contents(b))


def _invoke(fn, args, kwargs):
    """``fn(*args, **kwargs)`` with output, warnings and FP errors silenced, under the call
    time limit and the function's remaining budget; a stub raises ``StubHit``; a rigged
    result raises ``Fail('tampering')``."""
    limit = _current["call_limit"]
    remaining = FUNCTION_TIME_BUDGET - _current["spent"]
    if remaining <= 0:
        raise StudentTimeout()
    recorded = _current["recorded"]
    if (fn is _current["target"] and len(recorded) < PROBED_CALLS
            and (nudgeable(args) or nudgeable(kwargs))):
        recorded.append((_snapshot(args), _snapshot(kwargs)))  # before the call can alter them
    sink = io.StringIO()
    started = time.perf_counter()
    seconds = min(limit, remaining)
    if getattr(type(fn), "enforces_time_limit", False) and \
            type(fn).__module__ == "grader_tests.sandbox":  # the grader's proxy times itself
        fn.time_limit = seconds
        limiter = contextlib.nullcontext()
    else:
        limiter = contextlib.ExitStack()
        limiter.enter_context(time_limit(seconds))
        limiter.enter_context(shallow_recursion())
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                warnings.catch_warnings(), np.errstate(all="ignore"), limiter:
            warnings.simplefilter("ignore")
            try:
                result = fn(*args, **kwargs)
            except NotImplementedError:
                raise StubHit() from None
    finally:
        _current["spent"] += time.perf_counter() - started
    role = _current["roles"].get(id(fn))
    name = role[1] if role is not None and role[0] is fn else None
    _refuse_rigged(result, OPAQUE_RESULTS.get(name, ()))
    return result


def call(fn, *args, **kwargs):
    """Call student function ``fn`` on private deep copies of its arguments.

    The student's stdout and stderr are captured and dropped (nbgrader scores a cell
    that writes to stderr as 0, and a flood must not reach the report); warnings and
    floating-point errors are silenced, since checks look at the values.

    Returns:
        whatever ``fn`` returns.

    Raises:
        whatever ``fn`` raises (``StubHit`` for ``NotImplementedError``), ``Fail`` with
        ``tampering`` for a rigged result, and ``StudentTimeout`` when time runs out.
    """
    return _invoke(fn, [_snapshot(a) for a in args], {k: _snapshot(v) for k, v in kwargs.items()})


def _refuse_rigged(result, opaque=()):
    """``Fail('tampering')`` if a compared part of ``result`` is rigged (``opaque``: the
    positions of a returned tuple that the contract leaves opaque, never judged)."""
    from .integrity import rigged_object

    rigged = rigged_object(result, opaque)
    if rigged:
        raise Fail("tampering", f"{rigged}: results are compared as plain NumPy arrays.")


def call_watching_inputs(fn, *args, **kwargs):
    """Call ``fn`` like ``call`` and report which arguments it modified.

    An argument counts as modified when the data ``contents`` finds inside it (arrays and
    scalars in containers, attributes, closure cells) changed during the call; its own
    ``==`` is never asked.

    Returns:
        ``(result, modified)``: ``modified`` is a list of argument names (``"argument 1"``
        for positional ones, the keyword otherwise) whose value changed.
    """
    args = [_snapshot(a) for a in args]
    kwargs = {k: _snapshot(v) for k, v in kwargs.items()}
    before_args = [contents(a) for a in args]
    before_kwargs = {k: contents(v) for k, v in kwargs.items()}
    result = _invoke(fn, args, kwargs)
    if getattr(fn, "last_args", None) is not None:  # a sandboxed function: its arguments
        args, kwargs = fn.last_args                   # as they were after the call, there
        args = list(args)
    modified = [f"argument {i + 1}" for i, (a, b) in enumerate(zip(args, before_args))
                if not same_contents(contents(a), b)]
    modified += [k for k in before_kwargs
                 if k not in kwargs or not same_contents(contents(kwargs[k]), before_kwargs[k])]
    return result, modified


# ---------------------------------------------------------------------------------------
# Fault isolation.


def callees(name: str, target: Callable) -> dict[str, Callable]:
    """What every other graded name resolves to while ``name`` is graded.

    Each graded name ``B`` that ``name`` may build on (``allowed_callees``) is replaced by
    the reference ``B``, re-bound so that the reference's own uses of ``name`` (directly or
    through other reference functions: the reference ``multi_head_attention`` reaches
    ``softmax`` through ``scaled_dot_product_attention``) call ``target``. Honest code
    that calls another graded function keeps working (the reference callee calls the
    student's correct function back), while code that hands its own work to another
    graded function which hands it back (``softmax`` through a crafted
    ``scaled_dot_product_attention``) recurses into itself and fails: the function under
    test is never answered by its own reference.

    Args:
        name: the graded name under test (a key of ``POINTS``, or a graded name of
            another assignment: then no reference uses it and the replacements are the
            plain references).
        target: the function under test as the checks call it: the student's function
            isolated by ``isolate``, or any callable standing for it (the sandbox's proxy
            of the student's remote function).

    Returns:
        dict graded name -> callable, one entry per name of ``allowed_callees(name)``; each takes the arguments and returns the values (arrays of the
        reference's shapes and dtypes) of the reference function of that name.
    """
    return rebound_many({other: getattr(reference, other) for other in allowed_callees(name)},
                        {name: target}, vars(reference))


def isolate(fn: Callable, namespace: dict, name: str, keep: Collection[str] = ()) -> Callable:
    """``fn``, graded as ``name``, with every other graded name it reaches bound to
    ``callees(name, <the isolated fn>)``.

    The function under test is identified by ``name``, the graded name it is stored
    under, never by ``fn.__name__``: inside the copy, ``name`` resolves to the copy
    itself, so an alias, a lambda, a ``functools.partial`` or a callable object whose
    code calls ``name`` reaches the student's own code, not the reference. The graded
    names are replaced wherever ``fn`` reaches them in the student's namespace: through
    its globals, the student's helpers, closures, default arguments, partials, bound
    methods and the attributes of objects of classes the student defined (``rebind``).
    A callable with no code of the namespace in it (a builtin, the sandbox's proxy) is
    returned as is. The student's namespace and functions are left untouched.

    Args:
        fn: the student's callable graded as ``name`` (usually ``namespace[name]``).
        namespace: dict, the globals the student's code ran in.
        name: str, the graded name ``fn`` is graded as.
        keep: other graded names that stay the student's own.

    Returns:
        A callable taking ``fn``'s arguments.
    """
    isolated: list[Callable] = []

    def under_test(*args, **kwargs):
        return isolated[0](*args, **kwargs)

    copy = rebound(fn, callees(name, under_test), name=name, keep=keep, home=namespace)
    isolated.append(copy)
    return copy


# ---------------------------------------------------------------------------------------
# Running the checks.

_current = {"namespace": None, "call_limit": CALL_TIME_LIMIT, "spent": 0.0, "target": None,
            "recorded": [], "roles": {}}
# ``roles``: id(function as called) -> (that function, the graded name it stands for), for
# the graded function and the peers its checks call (``peer``): which of its results the
# contract leaves opaque (``OPAQUE_RESULTS``).


def peer(name: str) -> Callable:
    """The student's ``name`` from the namespace being graded, isolated as ``name``.

    Used by a backward's checks, which need the cache of the student's own forward. It is
    isolated with its own graded name (``callees(name, ...)``), exactly as it is when it
    is graded itself, whatever function is under test.

    Args:
        name: a graded name of the namespace being graded (``layer_norm_forward``).

    Returns:
        the isolated callable.

    Raises:
        Fail: ``not-implemented`` if the namespace has no such function.
    """
    namespace = _current["namespace"] or {}
    fn = namespace.get(name)
    if not callable(fn):
        raise Fail("not-implemented", f"{name} is missing, and this check needs the cache it "
                                      f"returns.")
    isolated = isolate(fn, namespace, name)
    _current["roles"][id(isolated)] = (isolated, name)
    return isolated


def crash_fault(exc):
    """The fault id of an exception a student's function raised: ``module-unavailable`` for
    an import the grading environment cannot satisfy (``ImportError`` in process, or its
    name from the jailed process), else ``crash``."""
    kind = getattr(exc, "type_name", type(exc).__name__)
    if isinstance(exc, ImportError) or kind in ("ImportError", "ModuleNotFoundError"):
        return "module-unavailable"
    return "crash"


def _student_error_message(name, exc):
    if type(exc).__name__ == "WorkerDied":
        return (f"the process running {name} ended during the call (sys.exit, os._exit, a "
                f"signal, or memory exhausted)")
    kind = getattr(exc, "type_name", type(exc).__name__)
    text = f"{kind}: {exc}".strip()
    if len(text) > 300:
        text = text[:300] + "..."
    return f"calling {name} raised {text}"


def grade_function(name, namespace, time_limit_s=CALL_TIME_LIMIT, points=None):
    """Run every check registered for ``name`` against ``namespace[name]``.

    Args:
        name: str, a key of ``points``.
        namespace: dict of the student's definitions (a notebook's globals or a module's
            ``vars``).
        time_limit_s: float, seconds one call of the student's function may run; after
            one time-out (or once ``FUNCTION_TIME_BUDGET`` is spent) the remaining
            checks are not run and fail with ``timeout``.
        points: dict graded name -> points of the assignment (default ``POINTS``, the
            `attention` assignment; ``checks_training.POINTS_TRAINING`` for `training`).

    Returns:
        FunctionResult, score in points.

    Raises:
        KeyError: if ``name`` is not a graded name of ``points``.
    """
    from . import checks  # noqa: F401  (registers every check)

    max_score = float((POINTS if points is None else points)[name])
    registered = CHECKS[name]
    started = time.perf_counter()
    results = []
    if name.startswith("exercise_"):
        target = namespace  # exercises are graded on the variables the student assigned
    else:
        target = namespace.get(name)
        if not callable(target):
            results = [CheckResult(title, False, "not-implemented",
                                   f"{name} is not defined in the submission: define a "
                                   f"function named {name} (names are case-sensitive).")
                       for title, _ in registered]
            return FunctionResult(name, 0.0, max_score, results, time.perf_counter() - started)
        borrowed = _borrowed(target, namespace)
        if borrowed:
            return _all_failed(name, registered, "tampering", f"{name}: {borrowed}.",
                               max_score, started)
        target = isolate(target, namespace, name)
    problems = environment_problems()
    if problems:
        return _all_failed(name, registered, "tampering",
                           f"the grading environment was altered before {name} was graded: "
                           f"{'; '.join(problems)}.", max_score, started)
    timed_out = False
    _current.update(namespace=namespace, call_limit=time_limit_s, spent=0.0, target=target,
                    recorded=[], roles={id(target): (target, name)})
    for title, fn in registered:
        if timed_out:
            results.append(CheckResult(title, False, "timeout",
                                       f"not run: {name} already exceeded its time limit of "
                                       f"{time_limit_s:g} s in an earlier check."))
            continue
        sink = io.StringIO()
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn(target)
        except Fail as failure:
            results.append(CheckResult(title, False, failure.fault, failure.message))
        except StudentTimeout:
            timed_out = True
            results.append(CheckResult(title, False, "timeout",
                                       f"{name} did not return within {time_limit_s:g} s: "
                                       f"look for a loop that never ends."))
        except (NotImplementedError, StubHit):
            results.append(CheckResult(title, False, "not-implemented",
                                       f"{name} still raises NotImplementedError: replace "
                                       f"the `raise NotImplementedError()` line with your code."))
        except _FLAKY as exc:
            results.append(CheckResult(title, False, "other",
                                       f"{name} gave different results for the same input "
                                       f"when it was called again ({type(exc).__name__}); does "
                                       f"it depend on global state, randomness or time?"))
        except (Exception, SystemExit) as exc:  # the student's own error, reported as a crash
            results.append(CheckResult(title, False, crash_fault(exc),
                                       _student_error_message(name, exc)))
        else:
            results.append(CheckResult(title, True, None, ""))
    recorded = _current["recorded"]
    _current.update(namespace=None, target=None, recorded=[])
    problems = environment_problems()
    if problems:
        return _all_failed(name, registered, "tampering",
                           f"grading {name} altered the grading environment: "
                           f"{'; '.join(problems)}.", max_score, started)
    looked_up = None
    if recorded and not timed_out and any(r.passed for r in results):
        try:
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                looked_up = lookup.probe(target, recorded, _invoke)
        except (StudentTimeout, StubHit, Fail):  # out of time, or nothing to compare
            looked_up = None
    if looked_up:
        return _all_failed(name, registered, "tampering", f"{name}: {looked_up}.",
                           max_score, started)
    if recorded and not timed_out and any(r.passed for r in results) and \
            name in SPEC_FUNCTIONS and not all(r.passed for r in results):
        try:
            with contextlib.redirect_stdout(io.StringIO()), \
                    contextlib.redirect_stderr(io.StringIO()):
                constant = lookup.ignores_its_input(target, recorded, _invoke,
                                                    getattr(reference, name))
        except (StudentTimeout, StubHit, Fail):
            constant = None
        if constant:
            return _all_failed(name, registered, "not-implemented", f"{name}: {constant}.",
                               max_score, started)
    passed = sum(r.passed for r in results)
    score = max_score * passed / len(results) if results else 0.0
    return FunctionResult(name, score, max_score, results, time.perf_counter() - started)


def _all_failed(name, registered, fault, message, max_score, started):
    results = [CheckResult(title, False, fault, message) for title, _ in registered]
    return FunctionResult(name, 0.0, max_score, results, time.perf_counter() - started)


def _borrowed(fn, namespace):
    """Why ``fn`` is the kit's own code rather than the student's, or None.

    Looks at ``fn`` itself and at every global name its code (and nested code) reads:
    a module or function of ``solutions`` / ``grader_tests`` reached that way is flagged.
    The graded names of docs/contract.md §2 are left out: ``isolate`` binds them to the
    reference for the checks anyway, and they legitimately are the reference where the
    reference stands in for them (the training notebook on the instructor's side).
    """
    found = borrowed_reference(fn)
    if found:
        return found
    code = getattr(fn, "__code__", None)
    names, stack = set(), [code] if code is not None else []
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    home = getattr(fn, "__globals__", namespace)
    for n in sorted(names - set(SPEC_FUNCTIONS)):
        value = home.get(n)
        module = value if isinstance(value, types.ModuleType) else None
        if module is not None:
            if is_protected_module(module):
                return f"it uses the module {module.__name__}, the kit's reference or graders"
        elif value is not None and callable(value):
            found = borrowed_reference(value)
            if found:
                return f"it calls {n}, whose {found.split(', ', 1)[0][4:]}"
    return None


def grade_namespace(namespace, names=None, time_limit_s=CALL_TIME_LIMIT):
    """Grade every name of ``POINTS`` (or ``names``) in ``namespace``.

    Returns:
        dict name -> FunctionResult, in ``POINTS`` order.
    """
    names = list(POINTS) if names is None else list(names)
    return {n: grade_function(n, namespace, time_limit_s) for n in names}


def report_dict(results):
    """JSON-ready report of ``grade_namespace`` results, in the shape of the ``--json`` CLI.

    Returns:
        ``{"score": float, "max_score": float, "functions": {name: {"score", "max_score",
        "checks": [{"name", "passed", "fault", "message"}]}}}``.
    """
    functions = {}
    for name, r in results.items():
        functions[name] = {
            "score": round(r.score, 6),
            "max_score": r.max_score,
            "checks": [{"name": c.name, "passed": c.passed, "fault": c.fault,
                        "message": c.message} for c in r.checks],
        }
    return {
        "score": round(sum(f["score"] for f in functions.values()), 6),
        "max_score": float(sum(f["max_score"] for f in functions.values())),
        "functions": functions,
    }


# Characters of a report's message line before it is wrapped (after an 8-space indent).
REPORT_WIDTH = 88


def format_result(r):
    """Plain-ASCII, student-facing text of one FunctionResult."""
    passed = sum(c.passed for c in r.checks)
    lines = [f"{r.name}: {r.score:.2f} / {r.max_score:g} points "
             f"({passed} of {len(r.checks)} checks passed)"]
    for c in r.checks:
        if c.passed:
            lines.append(f"  PASS  {c.name}")
        else:
            lines.append(f"  FAIL  {c.name}  [{c.fault}]")
            trap = trap_line(c.fault)
            parts = c.message.splitlines() + ([trap] if trap and trap not in c.message else [])
            for part in parts:
                # long lines wrapped: a report line never runs past a page's or a
                # terminal's right edge (short lines, such as printed arrays, kept as they are)
                wrapped = [part] if len(part) <= REPORT_WIDTH else textwrap.wrap(
                    part, REPORT_WIDTH, break_long_words=False, break_on_hyphens=False)
                lines.extend(f"        {w}" for w in wrapped)
    if r.name in NOTES:
        lines.append(NOTES[r.name])
    return "\n".join(lines)


def isclose_score(a, b):
    """True if two scores agree to 1e-9 points."""
    return math.isclose(a, b, abs_tol=1e-9)
