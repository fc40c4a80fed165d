"""Checks of ``softmax(scores, axis=-1)`` (docs/contract.md §2; traps 6 and the stability rule)."""

import contextlib
import re

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from solutions import attention as ref

from .. import strategies as S
from ..guard import StubHit, StudentTimeout, call
from ..i18n import N_, _
from ..registry import Fail, PROPERTY, check
from ._util import (allclose, as_array, diagnose, dtype_check, expect_shape, fmt,
                    mutation_check, rng, worst_difference)

NAME = "softmax"


def _other_axes(x, axis):
    """Softmax of ``x`` over every other axis: what a wrong-axis softmax would return."""
    return [ref.softmax(x, axis=a) for a in range(x.ndim) if a != axis % x.ndim]


def unkept_variants(x: np.ndarray, axis: int) -> list[np.ndarray]:
    """What a softmax returns when its sum over ``axis`` drops that axis (no ``keepdims``).

    ``sum(e, axis)`` has the shape of ``x`` without ``axis``; NumPy broadcasting lines it
    up with the *trailing* axes of ``e``, so each entry is divided by the sum of another
    slice: on square scores ``e[i, j] / sum_k e[j, k]``, a normalisation along the wrong
    axis (PyTorch's ``sum(dim)`` translated without ``keepdim``). The shift by the maximum
    is taken with ``keepdims``, without it (misaligned the same way), or left out.
    Computed from the formula, with NumPy's broadcasting rule.

    Args:
        x: float array ``(...)`` with ``x.ndim >= 1``.
        axis: int, the axis the sums run over.

    Returns:
        list of float arrays (of the broadcast shape, which may differ from ``x.shape``),
        one per way of shifting for which the shapes broadcast.
    """
    out = []
    with np.errstate(all="ignore"):
        for shift in ("kept", "unkept", "none"):
            try:
                top: float | np.ndarray
                if shift == "none":
                    top = 0.0
                else:
                    top = np.max(x, axis=axis, keepdims=shift == "kept")
                    top = np.where(np.isfinite(top), top, 0.0)
                e = np.exp(x - top)
                out.append(e / np.sum(e, axis=axis))
            except (ValueError, np.exceptions.AxisError):  # shapes that do not broadcast
                continue
    return out


def wrong_axis_variants(x: np.ndarray, axis: int) -> list[tuple[np.ndarray, str]]:
    """What a softmax normalising along the wrong axis returns on ``x``.

    Args:
        x: float array ``(...)`` with ``x.ndim >= 1``.
        axis: int, the axis the softmax was asked to normalise over.

    Returns:
        list of ``(value, explanation)``: the softmax over every other axis, then the
        sums without ``keepdims`` over any axis (``unkept_variants``), which broadcast
        along a wrong one.
    """
    out = [(alt, _("it normalised over another axis than the one asked for (is the `axis` "
                   "argument used?)")) for alt in _other_axes(x, axis)]
    for a in range(x.ndim):
        out += [(alt, _UNKEPT_WHY) for alt in unkept_variants(x, a)]
    return out


def _same_values(a, b, rtol=1e-6, atol=1e-12):
    """Same shape, NaN and infinities at the same places, the finite entries close."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    fa, fb = np.isfinite(a), np.isfinite(b)
    if not np.array_equal(fa, fb) or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    if not np.array_equal(a[np.isinf(a)], b[np.isinf(b)]):
        return False
    return bool(np.allclose(a[fa], b[fb], rtol=rtol, atol=atol))


_UNKEPT_WHY = (N_("a sum (or max) over an axis was taken without keepdims=True, so NumPy "
                  "broadcast it along the wrong axis: each entry was divided by the sum of "
                  "another slice (on square scores entry (i, j) by the sum of row j)"))


def _wrong_axis_fail(got, x, axis, what):
    """``Fail('softmax-wrong-axis')`` if ``got`` is what a wrong-axis softmax returns on
    ``x`` (``wrong_axis_variants``); else nothing."""
    for alt, why in wrong_axis_variants(x, axis):
        if _same_values(got, alt):
            raise Fail("softmax-wrong-axis",
                       _("{what} with scores of shape {shape} returned\n{got}\n(shape {shape2}), "
                         "not normalised along axis {axis}; expected\n{softmax}\nLikely cause: "
                         "{why}.").format(what=what, shape=x.shape, got=fmt(got),
                           shape2=np.shape(got), axis=axis,
                           softmax=fmt(ref.softmax(x, axis=axis)), why=_(why)))


_OUT_OF_BOUNDS = re.compile(r"axis (-?\d+) is out of bounds")


def _hard_coded_axis(fn, x, axis, exc):
    """After ``fn`` raised an ``AxisError`` naming axis ``k`` on ``x``: the hypothesis
    "the code normalises over axis ``k`` whatever it is asked", tested on scores with
    enough axes (of distinct lengths) that ``k`` is neither missing nor the last one.
    ``Fail('softmax-wrong-axis')`` when the answer there is the softmax over ``k``;
    otherwise nothing (the crash is reported as it is)."""
    kind = getattr(exc, "type_name", type(exc).__name__)
    found = _OUT_OF_BOUNDS.search(str(exc))
    if not kind.endswith("AxisError") or found is None:
        return
    k = int(found.group(1))
    ndim = k + 2 if k >= 0 else 1 - k  # axis k exists and is not the last one
    if ndim > 6:
        return
    probe = rng(98).normal(size=tuple(range(2, 2 + ndim))) * 2
    try:
        got = np.asarray(call(fn, probe) if axis is None else call(fn, probe, axis=-1))
    except (StudentTimeout, StubHit):
        raise
    except Exception:
        return
    if _same_values(got, ref.softmax(probe, axis=k)):
        raise Fail("softmax-wrong-axis",
                   _("softmax raised {kind} on scores of shape {shape} ({exc}); on scores of "
                     "shape {shape2}, asked for the last axis, it normalises over axis {k}. "
                     "Likely cause: the axis is hard-coded (axis={k}) instead of the `axis` "
                     "argument.").format(kind=kind.rsplit(".", 1)[-1], shape=x.shape,
                                         exc=str(exc)[:120], shape2=probe.shape, k=k)
                   ) from None


def _square_probe(fn, x, axis, exc):
    """After ``fn`` raised ``exc`` on ``x``: if it is an ``AxisError`` of an axis used
    whatever is asked, name it (``_hard_coded_axis``); else call it on square scores
    (every axis of one length, where a reduction without keepdims still broadcasts) and
    name the mistake if its answer there is what a wrong-axis softmax gives; else
    re-raise ``exc``."""
    _hard_coded_axis(fn, x, axis, exc)
    n = max(3, *x.shape) if x.ndim else 3
    square = rng(99).normal(size=(n,) * max(x.ndim, 1)) * 2
    axis_used = -1 if axis is None else axis
    try:
        got = np.asarray(call(fn, square) if axis is None else call(fn, square, axis=axis))
    except (StudentTimeout, StubHit):
        raise
    except Exception:
        raise exc from None
    for alt, why in wrong_axis_variants(square, axis_used):
        if _same_values(got, alt):
            raise Fail("softmax-wrong-axis",
                       _("softmax raised {kind} on scores of shape {shape} ({exc}); on square "
                         "scores of shape {shape2} it runs but does not normalise along axis "
                         "{axis_used}. Likely cause: {why}.").format(kind=type(exc).__name__,
                           shape=x.shape, exc=str(exc)[:120], shape2=square.shape,
                           axis_used=axis_used, why=_(why))) from None
    raise exc


@contextlib.contextmanager
def _probing_crashes(fn, x, axis=None):
    """Inside: an exception of the student's code on ``x`` goes through ``_square_probe``."""
    try:
        yield
    except (StudentTimeout, StubHit, Fail):
        raise
    except Exception as exc:
        _square_probe(fn, x, axis, exc)
        raise


def _softmax(fn, x, axis=None, what="softmax(scores)", values=True):
    """The student's ``softmax(x)`` (or ``softmax(x, axis=axis)``) as an array.

    A result that is what a softmax along a wrong axis gives (another axis, or a sum
    without keepdims broadcast along one: ``wrong_axis_variants``), or a crash whose
    cause that is (``_square_probe``), fails with ``softmax-wrong-axis`` here, so
    that no check reports it as a shape, stability or crash problem. With ``values``
    False (a check of shapes only) a result of ``x``'s shape is returned as it is.
    """
    try:
        got = call(fn, x, axis=axis) if axis is not None else call(fn, x)
    except (StudentTimeout, StubHit, Fail):
        raise
    except Exception as exc:
        _square_probe(fn, x, axis, exc)
        raise
    got = as_array(got, what)
    if got.shape != x.shape or values and not _same_values(
            got, ref.softmax(x, axis=-1 if axis is None else axis)):
        _wrong_axis_fail(got, x, -1 if axis is None else axis, what)
    return got


@check(NAME, N_("matches exp(s - max) / sum over the requested axis (random shapes and axes)"))
def matches_definition(fn):
    @S.SETTINGS
    @given(x=S.float_arrays(S.array_shapes(1, 3), np.float64, bound=30.0), data=st.data())
    def prop(x, data):
        axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
        got = _softmax(fn, x, axis, "softmax(scores, axis)")
        expected = ref.softmax(x, axis=axis)
        expect_shape(got, x.shape, _("softmax(scores of shape {shape}, axis={axis})").format(
            shape=x.shape,
                                       axis=axis))
        if not allclose(got, expected, rtol=1e-6, atol=1e-12):
            candidates = [("softmax-wrong-axis", alt, _("it normalised over another axis than "
                                                        "the one asked for (is the `axis` "
                                                        "argument used?)"))
                          for alt in _other_axes(x, axis)]
            fault, why = diagnose(got, candidates, "other")
            raise Fail(fault, _("softmax(scores, axis={axis}) with scores "
                                "=\n{x}\nreturned\n{got}\nexpected\n{expected}\n({worst_difference}). ").format(axis=axis,
                                  x=fmt(x), got=fmt(got), expected=fmt(expected),
                                  worst_difference=worst_difference(got, expected))
                              + (_("Likely cause: {why}.").format(why=_(why)) if why else
                                 _("Compare with exp(s - max) / sum(exp(s - max)) along `axis`.")))

    prop()


@check(NAME, N_("by default every row sums to 1 over the last axis (the keys)"), kind=PROPERTY)
def default_axis_is_last(fn):
    x = rng(1).normal(size=(2, 3, 4)) * 3  # T_q = 3 queries, T_k = 4 keys
    got = _softmax(fn, x)
    expect_shape(got, x.shape, _("softmax(scores) of shape (2, 3, 4)"))
    sums = got.sum(axis=-1)
    if not allclose(sums, np.ones_like(sums), rtol=1e-9, atol=1e-9):
        fault, why = "other", ""
        if allclose(got.sum(axis=-2), np.ones((2, 4)), atol=1e-9):
            fault, why = "softmax-wrong-axis", (_("the columns sum to 1: the default axis "
                                                  "normalises over the queries (axis=-2), not "
                                                  "the keys (axis=-1)"))
        raise Fail(fault, _("softmax(scores) on scores of shape (2, 3, 4) gave rows (last axis) "
                            "summing to\n{sums}\ninstead of 1. ").format(sums=fmt(sums))
                          + (_("Likely cause: {why}.").format(why=_(why)) if why else ""))


@check(NAME, N_("no overflow or NaN for scores up to +-1e4 (float32 and float64)"))
def stable_at_large_scores(fn):
    cases = [
        np.array([[1e4, 0.0, -1e4], [710.0, 709.0, 0.0], [-1e4, -1e4 + 1, -1e4 + 2]]),
        np.array([[100.0, 99.0, 98.0], [1e4, 1e4, -50.0]], dtype=np.float32),
    ]
    for x in cases:
        got = _softmax(fn, x)
        expected = ref.softmax(x)
        # An exact softmax of inputs each rounded to the dtype's precision may differ by
        # about max|s| * eps: a log-sum-exp softmax in float32 is right within that.
        atol = max(1e-6, 8 * float(np.abs(x).max()) * float(np.finfo(x.dtype).eps))
        if got.shape != x.shape or not np.all(np.isfinite(got)) or not allclose(
                got, expected, rtol=1e-5, atol=atol):
            if got.shape == x.shape and np.all(np.isfinite(got)):
                for alt in _other_axes(x, -1):
                    if allclose(got, alt, rtol=1e-5, atol=atol):
                        raise Fail("softmax-wrong-axis",
                                   _("softmax(scores) with scores ({dtype}) "
                                     "=\n{x}\nreturned\n{got}\nexpected\n{expected}: the default axis "
                                     "must be the last one (the keys).").format(dtype=x.dtype,
                                       x=fmt(x), got=fmt(got), expected=fmt(expected)))
            raise Fail("unstable-softmax",
                       _("softmax(scores) with scores ({dtype}) "
                         "=\n{x}\nreturned\n{got}\nexpected\n{expected}. exp(1e4) overflows (float64 "
                         "overflows above about 709, float32 above about 88). Likely cause: the "
                         "maximum of each row is not subtracted before exp.").format(dtype=x.dtype,
                           x=fmt(x), got=fmt(got), expected=fmt(expected)))


@check(NAME, N_("entries of -inf get weight exactly 0"))
def minus_inf_gets_zero(fn):
    x = np.array([[0.5, -np.inf, 2.0, -np.inf], [-np.inf, 1.0, 1.0, 3.0]])
    got = _softmax(fn, x)
    expected = ref.softmax(x)
    expect_shape(got, x.shape, _("softmax(scores) of shape (2, 4)"))
    if not allclose(got, expected, rtol=1e-9, atol=0):
        fault = "nan-on-empty-row" if np.isnan(got).any() else "other"
        raise Fail(fault, _("softmax(scores) with scores "
                            "=\n{x}\nreturned\n{got}\nexpected\n{expected}: exp(-inf) = 0, so a -inf "
                            "score must get weight exactly 0 and the other weights of the row "
                            "still sum to 1.").format(x=fmt(x), got=fmt(got),
                              expected=fmt(expected)))


@check(NAME, N_("a slice that is all -inf gives all zeros, never NaN"))
def empty_row_gives_zeros(fn):
    for x, axis in ((np.array([[-np.inf, -np.inf, -np.inf], [0.0, 1.0, 2.0]]), -1),
                    (np.full((2, 3), -np.inf, dtype=np.float32), -1),
                    (np.array([[-np.inf, 1.0], [-np.inf, 2.0]]), 0)):
        got = _softmax(fn, x, axis, "softmax(scores, axis)")
        expected = ref.softmax(x, axis=axis)
        if got.shape != x.shape or not allclose(got, expected, rtol=1e-9, atol=0):
            empty = np.all(np.isneginf(x), axis=axis)  # the slices with nothing to attend to
            got_empty = np.moveaxis(got, axis, -1)[empty] if got.shape == x.shape else None
            if got_empty is not None and np.all(got_empty == 0):
                raise Fail("softmax-wrong-axis" if any(
                    allclose(got, alt, rtol=1e-9, atol=0) for alt in _other_axes(x, axis))
                    else "other",
                           _("softmax(scores, axis={axis}) with scores "
                             "=\n{x}\nreturned\n{got}\nexpected\n{expected}: the all -inf slices are "
                             "zeros as they should be, but the others are not normalised along "
                             "axis {axis}.").format(axis=axis, x=fmt(x), got=fmt(got),
                               expected=fmt(expected)))
            raise Fail("nan-on-empty-row",
                       _("softmax(scores, axis={axis}) with scores "
                         "=\n{x}\nreturned\n{got}\nexpected\n{expected}. A fully masked slice has "
                         "nothing to attend to: its weights must be 0, not NaN (-inf - (-inf) is "
                         "NaN) and not uniform. Likely cause: the max of an all -inf slice is "
                         "-inf; replace it by 0 there, and divide only where the sum is > 0.").format(axis=axis,
                           x=fmt(x), got=fmt(got), expected=fmt(expected)))


@check(NAME, N_("float32 in, float32 out"), kind=PROPERTY)
def keeps_float32(fn):
    x = rng(2).normal(size=(3, 4))
    with _probing_crashes(fn, x):
        dtype_check(fn, lambda dt: ((x.astype(dt),), {}), lambda out: [(_("the weights"), out)],
                    NAME)


@check(NAME, N_("does not modify its argument"), kind=PROPERTY)
def no_mutation(fn):
    x = rng(3).normal(size=(3, 5)) * 5
    with _probing_crashes(fn, x):
        mutation_check(fn, (x,), {}, NAME, ["scores"])


@check(NAME, N_("output has the input's shape for any number of axes"), kind=PROPERTY)
def shape_any_rank(fn):
    for shape in ((5,), (1, 1), (2, 3, 4), (2, 1, 3, 2)):
        x = rng(4).normal(size=shape)
        got = _softmax(fn, x, values=False)
        expect_shape(got, shape, _("softmax(scores of shape {shape})").format(shape=shape))
