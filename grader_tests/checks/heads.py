"""Checks of ``split_heads`` and ``merge_heads`` (docs/contract.md §2; trap 3). Every value check
uses h > 1 and B > 1: with h = 1 both reshape/transpose orders agree."""

import numpy as np
from hypothesis import given

from solutions import attention as ref

from .. import strategies as S
from ..guard import call
from ..i18n import N_, _
from ..registry import Fail, PROPERTY, check
from ._util import (as_array, dtype_check, expect_shape, fmt, head_count_check,
                    mutation_check)

SPLIT, MERGE = "split_heads", "merge_heads"


def _labelled(B, T, d, dtype=np.float64):
    """``M[b, t, c] = 100 b + 10 t + c``: every entry tells where it came from."""
    b, t, c = np.meshgrid(np.arange(B), np.arange(T), np.arange(d), indexing="ij")
    return (100 * b + 10 * t + c).astype(dtype)


@check(SPLIT, N_("head k holds columns k*d_h .. (k+1)*d_h - 1 of every token (h > 1, B > 1)"))
def split_matches_definition(fn):
    for B, T, d, h in ((2, 3, 6, 2), (2, 4, 8, 4), (3, 2, 6, 3)):
        M = _labelled(B, T, d)
        got = as_array(call(fn, M, h), _("{SPLIT}(M, {h})").format(SPLIT=SPLIT, h=h))
        expected = ref.split_heads(M, h)
        expect_shape(got, (B, h, T, d // h), _("{SPLIT}(M of shape {value}, n_heads={h})").format(
            SPLIT=SPLIT,
                                                 value=(B, T, d), h=h))
        if not np.array_equal(got, expected):
            index = tuple(int(i) for i in np.argwhere(got != expected)[0])
            raise Fail("head-order", _("{SPLIT}(M of shape {value}, n_heads={h}) with M[b, t, c] "
                                       "= 100 b + 10 t + c: entry {index} (b, head, t, j) is "
                                       "{got:g}, expected {expected:g}. Likely cause: reshape "
                                       "straight to (B, h, T, d_h) mixes tokens and heads; "
                                       "reshape to (B, T, h, d_h) first, then swap axes 1 and 2.").format(SPLIT=SPLIT,
                                         value=(B, T, d), h=h, index=index, got=got[index],
                                         expected=expected[index]))


@check(SPLIT, N_("raises ValueError when d is not divisible by n_heads"), kind=PROPERTY)
def split_rejects_bad_heads(fn):
    head_count_check(fn, lambda B, T, d, h: (_labelled(B, T, d), h), SPLIT)


@check(SPLIT, N_("edge shapes: B = 1, T = 1, h = d"))
def split_edge_shapes(fn):
    for B, T, d, h in ((1, 1, 4, 4), (1, 3, 4, 1), (2, 1, 6, 3)):
        M = _labelled(B, T, d)
        got = as_array(call(fn, M, h), _("{SPLIT}(M, {h})").format(SPLIT=SPLIT, h=h))
        expect_shape(got, (B, h, T, d // h), _("{SPLIT}(M of shape {value}, n_heads={h})").format(
            SPLIT=SPLIT,
                                                 value=(B, T, d), h=h))
        if not np.array_equal(got, ref.split_heads(M, h)):
            raise Fail("head-order", _("{SPLIT}(M of shape {value}, n_heads={h}) puts entries in "
                                       "the wrong place.").format(SPLIT=SPLIT, value=(B, T, d),
                                         h=h))


@check(SPLIT, N_("float32 in, float32 out"), kind=PROPERTY)
def split_keeps_float32(fn):
    dtype_check(fn, lambda dt: ((_labelled(2, 3, 4, dt), 2), {}), lambda out: [("M", out)], SPLIT)


@check(SPLIT, N_("does not modify M"), kind=PROPERTY)
def split_no_mutation(fn):
    mutation_check(fn, (_labelled(2, 3, 4), 2), {}, SPLIT, ["M", "n_heads"])


@check(MERGE, N_("merge_heads(split_heads(M, h)) == M for h > 1, B > 1 (any shape)"))
def merge_inverts_split(fn):
    @S.SETTINGS
    @given(shape=S.head_shapes())
    def prop(shape):
        B, T, h, d_h = shape
        M = _labelled(B, T, h * d_h)
        got = as_array(call(fn, ref.split_heads(M, h)), _("{MERGE}(split_heads(M, {h}))").format(
            MERGE=MERGE,
                                                            h=h))
        expect_shape(got, (B, T, h * d_h), _("{MERGE}(M of shape {value})").format(MERGE=MERGE,
                                               value=(B, h, T, d_h)))
        if not np.array_equal(got, M):
            index = tuple(int(i) for i in np.argwhere(got != M)[0])
            raise Fail("head-order", _("{MERGE}(split_heads(M, {h})) with M of shape {value} and "
                                       "M[b, t, c] = 100 b + 10 t + c gave {got:g} at {index}, "
                                       "expected {M:g}.\ngot (b = 0):\n{got2}\nLikely cause: "
                                       "reshaping before moving the head axis back; swap axes 1 "
                                       "and 2 first to (B, T, h, d_h), then reshape.").format(
                                           MERGE=MERGE,
                                         h=h, value=(B, T, h * d_h), got=got[index], index=index,
                                         M=M[index], got2=fmt(got[0])))

    prop()


@check(MERGE, N_("matches the definition on arbitrary (B, h, T, d_h) input"))
def merge_matches_definition(fn):
    for B, h, T, d_h in ((2, 2, 3, 2), (2, 4, 2, 1), (3, 3, 4, 2)):
        M = np.arange(B * h * T * d_h, dtype=np.float64).reshape(B, h, T, d_h)
        got = as_array(call(fn, M), _("{MERGE}(M)").format(MERGE=MERGE))
        expected = ref.merge_heads(M)
        expect_shape(got, (B, T, h * d_h), _("{MERGE}(M of shape {value})").format(MERGE=MERGE,
                                               value=(B, h, T, d_h)))
        if not np.array_equal(got, expected):
            raise Fail("head-order", _("{MERGE}(M of shape {value}, M = arange) returned for b = "
                                       "0\n{got}\nexpected\n{expected}. Likely cause: reshape and "
                                       "transpose in the wrong order.").format(MERGE=MERGE,
                                         value=(B, h, T, d_h), got=fmt(got[0]),
                                         expected=fmt(expected[0])))


@check(MERGE, N_("edge shapes: h = 1, T = 1, B = 1"))
def merge_edge_shapes(fn):
    for shape in ((1, 1, 1, 4), (2, 1, 3, 2), (1, 4, 1, 1)):
        M = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
        got = as_array(call(fn, M), _("{MERGE}(M)").format(MERGE=MERGE))
        expect_shape(got, (shape[0], shape[2], shape[1] * shape[3]), _("{MERGE}(M of shape "
                                                                       "{shape})").format(
                                                                           MERGE=MERGE,
                                                                         shape=shape))
        if not np.array_equal(got, ref.merge_heads(M)):
            raise Fail("head-order", _("{MERGE}(M of shape {shape}) puts entries in the wrong "
                                       "place.").format(MERGE=MERGE, shape=shape))


@check(MERGE, N_("float32 in, float32 out"), kind=PROPERTY)
def merge_keeps_float32(fn):
    dtype_check(fn, lambda dt: ((np.ones((2, 2, 3, 2), dtype=dt),), {}), lambda out: [("M", out)],
                MERGE)


@check(MERGE, N_("does not modify M"), kind=PROPERTY)
def merge_no_mutation(fn):
    mutation_check(fn, (np.arange(24.0).reshape(2, 2, 3, 2),), {}, MERGE, ["M"])
