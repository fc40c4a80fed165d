"""Checks of ``softmax(scores, axis=-1)`` (SPEC section 1; traps 6 and the stability rule)."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from solutions import attention as ref

from .. import strategies as S
from ..core import Fail, call, check
from ._util import (allclose, as_array, diagnose, dtype_check, expect_shape, fmt,
                    mutation_check, rng, worst_difference)

NAME = "softmax"


def _other_axes(x, axis):
    """Softmax of ``x`` over every other axis: what a wrong-axis softmax would return."""
    return [ref.softmax(x, axis=a) for a in range(x.ndim) if a != axis % x.ndim]


@check(NAME, "matches exp(s - max) / sum over the requested axis (random shapes and axes)")
def matches_definition(fn):
    @S.SETTINGS
    @given(x=S.float_arrays(S.array_shapes(1, 3), np.float64, bound=30.0), data=st.data())
    def prop(x, data):
        axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
        got = as_array(call(fn, x, axis=axis), "softmax(scores, axis)")
        expected = ref.softmax(x, axis=axis)
        expect_shape(got, x.shape, f"softmax(scores of shape {x.shape}, axis={axis})")
        if not allclose(got, expected, rtol=1e-6, atol=1e-12):
            candidates = [("softmax-wrong-axis", alt, "it normalised over another axis than "
                           "the one asked for (is the `axis` argument used?)")
                          for alt in _other_axes(x, axis)]
            fault, why = diagnose(got, candidates, "other")
            raise Fail(fault, f"softmax(scores, axis={axis}) with scores =\n{fmt(x)}\n"
                              f"returned\n{fmt(got)}\nexpected\n{fmt(expected)}\n"
                              f"({worst_difference(got, expected)}). "
                              + (f"Likely cause: {why}." if why else
                                 "Compare with exp(s - max) / sum(exp(s - max)) along `axis`."))

    prop()


@check(NAME, "by default every row sums to 1 over the last axis (the keys)")
def default_axis_is_last(fn):
    x = rng(1).normal(size=(2, 3, 4)) * 3  # T_q = 3 queries, T_k = 4 keys
    got = as_array(call(fn, x), "softmax(scores)")
    expect_shape(got, x.shape, "softmax(scores) of shape (2, 3, 4)")
    sums = got.sum(axis=-1)
    if not allclose(sums, np.ones_like(sums), rtol=1e-9, atol=1e-9):
        fault, why = "other", ""
        if allclose(got.sum(axis=-2), np.ones((2, 4)), atol=1e-9):
            fault, why = "softmax-wrong-axis", ("the columns sum to 1: the default axis "
                                                "normalises over the queries (axis=-2), not the "
                                                "keys (axis=-1)")
        raise Fail(fault, f"softmax(scores) on scores of shape (2, 3, 4) gave rows (last "
                          f"axis) summing to\n{fmt(sums)}\ninstead of 1. "
                          + (f"Likely cause: {why}." if why else ""))


@check(NAME, "no overflow or NaN for scores up to +-1e4 (float32 and float64)")
def stable_at_large_scores(fn):
    cases = [
        np.array([[1e4, 0.0, -1e4], [710.0, 709.0, 0.0], [-1e4, -1e4 + 1, -1e4 + 2]]),
        np.array([[100.0, 99.0, 98.0], [1e4, 1e4, -50.0]], dtype=np.float32),
    ]
    for x in cases:
        got = as_array(call(fn, x), "softmax(scores)")
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
                                   f"softmax(scores) with scores ({x.dtype}) =\n{fmt(x)}\n"
                                   f"returned\n{fmt(got)}\nexpected\n{fmt(expected)}: the "
                                   f"default axis must be the last one (the keys).")
            raise Fail("unstable-softmax",
                       f"softmax(scores) with scores ({x.dtype}) =\n{fmt(x)}\nreturned\n"
                       f"{fmt(got)}\nexpected\n{fmt(expected)}. exp(1e4) overflows (float64 "
                       f"overflows above about 709, float32 above about 88). Likely cause: "
                       f"the maximum of each row is not subtracted before exp.")


@check(NAME, "entries of -inf get weight exactly 0")
def minus_inf_gets_zero(fn):
    x = np.array([[0.5, -np.inf, 2.0, -np.inf], [-np.inf, 1.0, 1.0, 3.0]])
    got = as_array(call(fn, x), "softmax(scores)")
    expected = ref.softmax(x)
    expect_shape(got, x.shape, "softmax(scores) of shape (2, 4)")
    if not allclose(got, expected, rtol=1e-9, atol=0):
        fault = "nan-on-empty-row" if np.isnan(got).any() else "other"
        raise Fail(fault, f"softmax(scores) with scores =\n{fmt(x)}\nreturned\n{fmt(got)}\n"
                          f"expected\n{fmt(expected)}: exp(-inf) = 0, so a -inf score must get "
                          f"weight exactly 0 and the other weights of the row still sum to 1.")


@check(NAME, "a slice that is all -inf gives all zeros, never NaN")
def empty_row_gives_zeros(fn):
    for x, axis in ((np.array([[-np.inf, -np.inf, -np.inf], [0.0, 1.0, 2.0]]), -1),
                    (np.full((2, 3), -np.inf, dtype=np.float32), -1),
                    (np.array([[-np.inf, 1.0], [-np.inf, 2.0]]), 0)):
        got = as_array(call(fn, x, axis=axis), "softmax(scores, axis)")
        expected = ref.softmax(x, axis=axis)
        if got.shape != x.shape or not allclose(got, expected, rtol=1e-9, atol=0):
            empty = np.all(np.isneginf(x), axis=axis)  # the slices with nothing to attend to
            got_empty = np.moveaxis(got, axis, -1)[empty] if got.shape == x.shape else None
            if got_empty is not None and np.all(got_empty == 0):
                raise Fail("softmax-wrong-axis" if any(
                    allclose(got, alt, rtol=1e-9, atol=0) for alt in _other_axes(x, axis))
                    else "other",
                           f"softmax(scores, axis={axis}) with scores =\n{fmt(x)}\nreturned\n"
                           f"{fmt(got)}\nexpected\n{fmt(expected)}: the all -inf slices are "
                           f"zeros as they should be, but the others are not normalised along "
                           f"axis {axis}.")
            raise Fail("nan-on-empty-row",
                       f"softmax(scores, axis={axis}) with scores =\n{fmt(x)}\nreturned\n"
                       f"{fmt(got)}\nexpected\n{fmt(expected)}. A fully masked slice has "
                       f"nothing to attend to: its weights must be 0, not NaN (-inf - (-inf) "
                       f"is NaN) and not uniform. Likely cause: the max of an all -inf slice "
                       f"is -inf; replace it by 0 there, and divide only where the sum is > 0.")


@check(NAME, "float32 in, float32 out")
def keeps_float32(fn):
    dtype_check(fn, lambda dt: ((rng(2).normal(size=(3, 4)).astype(dt),), {}),
                lambda out: [("the weights", out)], NAME)


@check(NAME, "does not modify its argument")
def no_mutation(fn):
    mutation_check(fn, (rng(3).normal(size=(3, 5)) * 5,), {}, NAME, ["scores"])


@check(NAME, "output has the input's shape for any number of axes")
def shape_any_rank(fn):
    for shape in ((5,), (1, 1), (2, 3, 4), (2, 1, 3, 2)):
        x = rng(4).normal(size=shape)
        got = as_array(call(fn, x), "softmax(scores)")
        expect_shape(got, shape, f"softmax(scores of shape {shape})")
