"""Small helpers shared by the checks: array formatting, shape and value comparisons,
and the diagnosis of a wrong value by the alternative formulas a fault would produce."""

import numpy as np

from ..guard import StubHit, StudentTimeout, call, call_watching_inputs
from ..i18n import _
from ..registry import Fail


def fmt(a, precision=4):
    """Short text of an array or scalar for a student-facing message."""
    try:
        arr = np.asarray(a)
    except Exception:
        return repr(a)[:200]
    if arr.dtype == object:
        return repr(a)[:200]
    return np.array2string(arr, precision=precision, threshold=30, max_line_width=90,
                           suppress_small=True, separator=", ")


def as_array(value, what):
    """``value`` as an ndarray, or ``Fail('wrong-shape')`` if it is not array-like.

    Only real ``numpy.ndarray`` instances (and their base class view of subclasses) are
    accepted; lists and scalars are converted.
    """
    if isinstance(value, np.ndarray):
        return np.asarray(value).view(np.ndarray)
    if isinstance(value, (list, tuple, float, int, bool, np.generic)):
        try:
            return np.asarray(value)
        except Exception:
            pass
    kind = getattr(value, "type_name", type(value).__name__)
    raise Fail("wrong-shape", _("{what} should be a NumPy array, got {kind}.").format(what=what,
                                  kind=kind))


def unpack(value, n, what):
    """Check that ``value`` is a tuple/list of ``n`` items and return it as a tuple."""
    if not isinstance(value, (tuple, list)) or len(value) != n:
        kind = f"a {type(value).__name__}"
        if isinstance(value, (tuple, list)):
            kind += f" of {len(value)} items"
        raise Fail("wrong-shape", _("{what} should return a tuple of {n} items, got {kind}.").format(what=what,
                                      n=n, kind=kind))
    return tuple(value)


def expect_shape(arr, shape, what):
    """``Fail('wrong-shape')`` unless ``arr.shape == shape``."""
    if tuple(arr.shape) != tuple(shape):
        raise Fail("wrong-shape", _("{what} has shape {shape}, expected {shape2}.").format(
            what=what,
                                      shape=tuple(arr.shape), shape2=tuple(shape)))


def allclose(a, b, rtol=1e-6, atol=1e-9):
    """Shape-aware closeness with NaN never equal to anything."""
    a, b = np.asarray(a), np.asarray(b)
    if b.ndim == 0 and a.ndim > 0:  # comparing with one number: every entry
        b = np.broadcast_to(b, a.shape)
    if a.shape != b.shape:
        return False
    try:
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
    except (TypeError, ValueError):
        return False
    return bool(np.all(np.isfinite(a64) == np.isfinite(b64))
                and np.allclose(a64, b64, rtol=rtol, atol=atol, equal_nan=False))


def worst_difference(received, expected):
    """Text naming the entry where ``received`` and ``expected`` differ most."""
    r = np.asarray(received, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if r.shape != e.shape:
        return _("shape {shape} instead of {shape2}").format(shape=r.shape, shape2=e.shape)
    if r.size == 0:
        return _("empty arrays")
    bad = ~np.isfinite(r) & np.isfinite(e)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
    else:
        index = tuple(int(i) for i in np.unravel_index(int(np.nanargmax(np.abs(r - e))), r.shape))
    return _("at index {index}: got {r:.6g}, expected {e:.6g}").format(index=index, r=r[index],
               e=e[index])


def diagnose(received, candidates, default_fault, rtol=1e-6, atol=1e-9):
    """Pick the fault whose alternative formula reproduces ``received``.

    Args:
        received: the student's (wrong) value.
        candidates: list of ``(fault, value, explanation)``: what a given mistake would
            return on the same input, computed from the mathematics.
        default_fault: fault id when no candidate matches.

    Returns:
        ``(fault, explanation or "")``, the explanation in the current language.
    """
    for fault, value, explanation in candidates:
        if value is not None and allclose(received, value, rtol=rtol, atol=atol):
            return fault, _(explanation)
    return default_fault, ""


def dtype_check(fn, make_args, outputs, what):
    """The float32-in, float32-out check shared by the array functions.

    Args:
        fn: the student's function.
        make_args: callable ``dtype -> (args, kwargs)`` building float32 inputs.
        outputs: callable ``result -> list of (label, array)`` selecting the outputs.
        what: the function's name.
    """
    args, kwargs = make_args(np.float32)
    result = call(fn, *args, **kwargs)
    for label, value in outputs(result):
        arr = as_array(value, _("{what}: {label}").format(what=what, label=label))
        if arr.dtype != np.float32:
            raise Fail("dtype-changed", _("{what} with float32 inputs returned {label} of dtype "
                                          "{dtype}; it must stay float32 (NumPy's result type of "
                                          "the inputs). Likely cause: a float64 constant such as "
                                          "np.sqrt(d) or np.float64(...) or an explicit astype.").format(what=what,
                                            label=label, dtype=arr.dtype))


def mutation_check(fn, args, kwargs, what, names):
    """Fail with ``input-mutated`` if ``fn`` modifies any of its arguments.

    Args:
        names: list of the positional arguments' names, for the message.
    """
    _result, modified = call_watching_inputs(fn, *args, **kwargs)
    if modified:
        labels = []
        for m in modified:
            if m.startswith("argument "):
                i = int(m.split()[1]) - 1
                labels.append(names[i] if i < len(names) else m)
            else:
                labels.append(m)
        raise Fail("input-mutated", _("{what} modified its argument(s) {items} in place. Work on "
                                      "new arrays (x = x - m, not x -= m) so the caller's data "
                                      "stays intact.").format(what=what, items=', '.join(labels)))


def rng(seed):
    """The graders' random generator: fixed seeds, independent of the student's."""
    return np.random.default_rng(seed)


def backward_mutation_check(fn, dy, cache, what):
    """Fail with ``input-mutated`` if a backward modifies ``dy`` or the forward's cache."""
    _result, modified = call_watching_inputs(fn, dy, cache)
    if modified:
        names = ["dy" if m == "argument 1" else _("the cache") for m in modified]
        raise Fail("input-mutated", _("{what} modified {items} in place. A backward may be "
                                      "called twice on one cache (gradient checks do): work on "
                                      "new arrays (P * (dP - s), not dP -= s).").format(what=what,
                                        items=' and '.join(names)))


# Shapes ``(B, T, d, n_heads)`` whose ``d`` is not divisible by ``n_heads`` but on which a
# reshape with ``d_h = d // n_heads`` still succeeds: ``reshape(B, T, -1, d_h)`` gives
# (2, 3, 6, 1) and (2, 4, 5, 2), so only an explicit test of ``d % n_heads`` refuses them.
BAD_HEAD_COUNTS = ((2, 3, 6, 4), (2, 4, 10, 4))


def head_count_check(fn, make_args, what):
    """The contract's ``ValueError`` for a head count that does not divide ``d``
    (docs/contract.md §2, entries 6, 8 and 12), shared by the functions that split heads.

    Args:
        fn: the student's function.
        make_args: callable ``(B, T, d, n_heads) -> args`` building the positional
            arguments of one call (inputs of shape ``(B, T, d)``).
        what: the function's name.

    Raises:
        Fail: ``head-count-unchecked`` when a call on ``BAD_HEAD_COUNTS`` returns (a
            result of any shape) or raises another exception than ``ValueError``.
    """
    for B, T, d, h in BAD_HEAD_COUNTS:
        where = _("{what} with inputs of shape {shape} and n_heads={h}").format(
            what=what, shape=(B, T, d), h=h)
        try:
            got = call(fn, *make_args(B, T, d, h))
        except (StudentTimeout, StubHit, Fail):
            raise
        except ValueError:
            continue
        except Exception as exc:
            kind = getattr(exc, "type_name", type(exc).__name__)
            raise Fail("head-count-unchecked", _(
                "{where} raised {kind} ({exc}) instead of ValueError: {d} is not divisible by "
                "{h}. Likely cause: the head count is tested with assert (or not at all, and "
                "the error comes from later code); the contract asks for raise "
                "ValueError(...) when d % n_heads != 0.").format(
                    where=where, kind=kind, exc=str(exc)[:120], d=d, h=h)) from None
        shapes = [getattr(part, "shape", type(part).__name__)
                  for part in (got if isinstance(got, tuple) else (got,))]
        raise Fail("head-count-unchecked", _(
            "{where} returned {shapes} instead of raising ValueError: {d} is not divisible "
            "by {h}. Likely cause: no test of d % n_heads before the reshape; with d_h = d "
            "// n_heads a reshape to (B, T, -1, d_h) still succeeds and mixes or drops "
            "columns.").format(where=where, shapes=", ".join(str(s) for s in shapes), d=d,
                               h=h))
