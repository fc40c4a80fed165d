"""The guarded call: how the checks call a student's function, and what it is isolated from.

Every call of student code a check makes goes through ``call`` (or
``call_watching_inputs``): private deep copies of the arguments, a time limit (only time
spent inside student code counts, per call and per graded function), silenced output,
warnings and floating-point errors, a lowered recursion limit, and a refusal of rigged
results (``Fail('tampering')``). What the call needs to know about the function being
graded (its namespace, its time spent, the calls recorded for the input-lookup probe) is
held by a ``Session`` the runner opens for that function (``grading``); a check reaches it
through a context variable, so there is no module-global state and sessions never leak
into one another.

Fault isolation: when a graded function calls other graded functions
(``scaled_dot_product_attention`` calls ``softmax``), ``isolate`` re-binds those names to
the reference implementations, but only the ones the contract builds it from
(``CALLEES``, docs/contract.md): any other graded name it reaches stays the student's own.
The function under test is known by the graded name it is graded as, never by its
``__name__``, and the references standing in for the others call it back where they use
that name (``callees``): a function that hands its own work to another graded function,
or to itself under another name, is never answered by a reference.
"""

import contextlib
import contextvars
import copy
import functools
import io
import math
import operator
import signal
import sys
import threading
import time
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from solutions import attention as reference

from .i18n import _
from .integrity import rigged_object
from .lookup import nudgeable
from .rebind import rebound, rebound_many
from .registry import Fail

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

class StubHit(BaseException):
    """Raised by ``call`` when the student's function is still the stub.

    A ``BaseException`` so that Hypothesis stops at once instead of shrinking an input
    that every call fails on.
    """


class StudentTimeout(BaseException):
    """Raised inside student code when a check's time limit runs out.

    A ``BaseException`` so that a student's ``except Exception`` cannot swallow it.
    """



class WorkerDied(Exception):
    """The sandbox process running the student's code ended during a call (exit, kill, out
    of memory); raised by ``sandbox.Sandbox``, reported as a ``crash`` of that call.

    Attributes:
        memory_bytes: int or None, the jail's memory limit (bytes) when its cgroup says the
            limit was reached (the kernel's OOM killer ended the process), else None.
    """

    def __init__(self, memory_bytes: int | None = None) -> None:
        super().__init__()
        self.memory_bytes = memory_bytes


@dataclass
class Session:
    """What the guarded call knows about the graded function being checked.

    Attributes:
        namespace: dict of the student's definitions, or None outside a grading (``peer``
            finds nothing then).
        call_limit: float, seconds one call of student code may run.
        spent: float, seconds of student code used so far (against
            ``FUNCTION_TIME_BUDGET``).
        target: the function under test as the checks call it (calls of it with float
            arguments are recorded for ``lookup.probe``), or None.
        recorded: list of ``(args, kwargs)`` snapshots of calls of ``target``.
        roles: id(function as called) -> (that function, the graded name it stands for),
            for the graded function and the peers its checks call (``peer``): which of its
            results the contract leaves opaque (``OPAQUE_RESULTS``).
    """

    namespace: dict | None = None
    call_limit: float = CALL_TIME_LIMIT
    spent: float = 0.0
    target: Callable | None = None
    recorded: list[tuple[list, dict]] = field(default_factory=list)
    roles: dict[int, tuple[Callable, str]] = field(default_factory=dict)


_SESSION: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "grader_tests.guard.session", default=None)


def current_session() -> Session:
    """The session opened by ``grading`` around the running code, or a new, empty one
    (default limits, no namespace) outside any grading."""
    found = _SESSION.get()
    return found if found is not None else Session(call_limit=CALL_TIME_LIMIT)


@contextlib.contextmanager
def grading(session: Session) -> Iterator[Session]:
    """Make ``session`` the current one for the code inside (restored after, also on error).

    Args:
        session: the ``Session`` of the graded function being checked.

    Yields:
        the same session.
    """
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)


# ---------------------------------------------------------------------------------------
# Calling student code: private copies, a time limit, silenced output and warnings.

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
    depth = 0
    frame: types.FrameType | None = sys._getframe()
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
            if all(type(k) is str for k, _v in entries):
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
    session = current_session()
    limit = session.call_limit
    remaining = FUNCTION_TIME_BUDGET - session.spent
    if remaining <= 0:
        raise StudentTimeout()
    recorded = session.recorded
    if (fn is session.target and len(recorded) < PROBED_CALLS
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
        session.spent += time.perf_counter() - started
    role = session.roles.get(id(fn))
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
    rigged = rigged_object(result, opaque)
    if rigged:
        raise Fail("tampering", _("{rigged}: results are compared as plain NumPy arrays.").format(
            rigged=rigged))


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


# Most elements any one array the reference may make when it answers, in the grader's
# process, a callback of the student's process (a graded name the function under test
# builds on, ``callees``): 2**22, 32 MiB as float64. The graders' own inputs are far below
# it; a bigger request is refused before the reference runs (``callee_elements``).
CALLBACK_MAX_ELEMENTS = 2**22


class CalleeTooLarge(MemoryError):
    """A callback the grader refuses to compute: what it would allocate is past
    ``CALLBACK_MAX_ELEMENTS`` (a ``MemoryError``, as the worker's own cap raises)."""


def _shape(value: object) -> tuple[int, ...]:
    """``np.shape(value)``, or ``()`` for a value that is no array (ragged, an object)."""
    try:
        return tuple(int(n) for n in np.shape(value))  # type: ignore[call-overload]
    except Exception:
        return ()


def _count(value: object) -> int:
    """A non-negative int for an integer argument (a length, a number of heads), else 0."""
    try:
        return max(int(operator.index(value)), 0)  # type: ignore[arg-type]
    except Exception:
        return 0


def _broadcast_size(*shapes: tuple[int, ...]) -> int:
    """Elements of the broadcast of ``shapes``; 0 when they do not broadcast (the
    reference then raises before it allocates it)."""
    try:
        return math.prod(np.broadcast_shapes(*shapes))
    except Exception:
        return 0


def callee_elements(name: str, args: list | tuple, kwargs: dict) -> int:
    """Upper estimate of the elements of the largest array the reference ``name`` makes on
    ``(args, kwargs)``, read from the arguments' shapes and integers only (nothing is
    computed): the inputs' total size, or the output the contract gives the function
    (docs/contract.md) when it is bigger than its inputs: ``causal_mask(T)`` (T, T),
    ``padding_mask(lengths, T)`` (B, T), ``combine_masks`` (B, T, T),
    ``scaled_dot_product_attention`` the scores (..., T_q, T_k), ``sinusoidal_positions``
    (T, d), ``multi_head_attention`` and ``attention_forward`` (B, h, T, T).

    Args:
        name: the graded name the reference answers for.
        args, kwargs: the arguments as received from the student's process.

    Returns:
        int, number of elements (not bytes).
    """
    values = list(args) + list(kwargs.values())
    total = sum(math.prod(_shape(v)) for v in values)

    def arg(position: int, key: str) -> object:
        return args[position] if len(args) > position else kwargs.get(key)

    made = 0
    if name == "causal_mask":
        made = _count(arg(0, "T")) ** 2
    elif name == "padding_mask":
        made = max(math.prod(_shape(arg(0, "lengths"))), 1) * _count(arg(1, "T"))
    elif name == "sinusoidal_positions":
        made = _count(arg(0, "T")) * _count(arg(1, "d"))
    elif name == "combine_masks":
        causal, padding = _shape(arg(0, "causal")), _shape(arg(1, "padding"))
        if padding:
            made = _broadcast_size((1,) + causal, padding[:1] + (1,) + padding[1:])
    elif name == "scaled_dot_product_attention":
        q, k = _shape(arg(0, "Q")), _shape(arg(1, "K"))
        if len(q) >= 2 and len(k) >= 2:
            try:
                scores = tuple(np.broadcast_shapes(q[:-2], k[:-2])) + (q[-2], k[-2])
            except ValueError:
                scores = ()  # the reference raises before it makes the scores
            if scores:
                made = _broadcast_size(scores, _shape(arg(3, "mask")))
    elif name in ("multi_head_attention", "attention_forward"):
        x = _shape(arg(0, "X" if name == "multi_head_attention" else "x"))
        heads = _count(arg(5, "n_heads") if name == "multi_head_attention"
                       else arg(2, "n_heads"))
        if len(x) >= 2:
            made = math.prod(x[:-2]) * max(heads, 1) * x[-2] ** 2
    return max(total, made)


def check_callee_size(name: str, args: list | tuple, kwargs: dict) -> None:
    """Refuse a callback whose reference answer would be too big to compute here.

    Raises:
        CalleeTooLarge: ``callee_elements`` is past ``CALLBACK_MAX_ELEMENTS``; the message
            names the callee and the sizes, for the student.
    """
    elements = callee_elements(name, args, kwargs)
    if elements > CALLBACK_MAX_ELEMENTS:
        raise CalleeTooLarge(_(
            "{name} was called with arguments that would make an array of {elements} "
            "elements; a graded function called from another one while it is graded may "
            "make at most {limit}").format(name=name, elements=elements,
                                           limit=CALLBACK_MAX_ELEMENTS))


def isolate(fn: Callable, namespace: dict, name: str) -> Callable:
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

    Returns:
        A callable taking ``fn``'s arguments.
    """
    isolated: list[Callable] = []

    def under_test(*args, **kwargs):
        return isolated[0](*args, **kwargs)

    copy = rebound(fn, callees(name, under_test), name=name, home=namespace)
    isolated.append(copy)
    return copy


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
    session = current_session()
    namespace = session.namespace or {}
    fn = namespace.get(name)
    if not callable(fn):
        raise Fail("not-implemented", _("{name} is missing, and this check needs the cache it "
                                        "returns.").format(name=name))
    isolated = isolate(fn, namespace, name)
    session.roles[id(isolated)] = (isolated, name)
    return isolated


def crash_fault(exc):
    """The fault id of an exception a student's function raised: ``module-unavailable`` for
    an import the grading environment cannot satisfy (``ImportError`` in process, or its
    name from the jailed process), else ``crash``."""
    kind = getattr(exc, "type_name", type(exc).__name__)
    if isinstance(exc, ImportError) or kind in ("ImportError", "ModuleNotFoundError"):
        return "module-unavailable"
    return "crash"


