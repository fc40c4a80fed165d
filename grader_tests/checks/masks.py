"""Checks of ``causal_mask``, ``padding_mask`` and ``combine_masks`` (docs/contract.md §2;
traps 4 and 5). True means "may attend" / "real token"."""

import numpy as np

from solutions import attention as ref

from ..guard import call
from ..i18n import N_, _
from ..registry import Fail, PROPERTY, check
from ._util import as_array, expect_shape, fmt, mutation_check, rng


def _bool_result(value, what):
    arr = as_array(value, what)
    if arr.dtype != bool:
        raise Fail("dtype-changed", _("{what} returned dtype {dtype}; a mask must be a boolean "
                                      "array (np.bool_), True = may attend.").format(what=what,
                                        dtype=arr.dtype))
    return arr


def _mask_fault(got, expected, transposed=None):
    """Name the mask mistake that turns ``expected`` into ``got``."""
    if got.shape == expected.shape and np.array_equal(got, ~expected):
        return "mask-inverted", _("True was read as 'blocked': in this kit True means 'may "
                                  "attend'")
    if transposed is not None and got.shape == transposed.shape and np.array_equal(got, transposed):
        return "mask-wrong-axis", _("the mask acts on the wrong axis (rows are queries, columns "
                                    "keys)")
    return "other", ""


# --- causal_mask --------------------------------------------------------------------------


@check("causal_mask", N_("[i, j] is True iff j <= i (a token sees itself and the past)"))
def causal_matches_definition(fn):
    for T in (1, 2, 5, 8):
        got = as_array(call(fn, T), _("causal_mask({T})").format(T=T))
        expected = ref.causal_mask(T)
        expect_shape(got, (T, T), _("causal_mask({T})").format(T=T))
        if not np.array_equal(got.astype(bool), expected):
            fault, why = _mask_fault(got.astype(bool), expected, expected.T)
            if fault == "other" and np.array_equal(got.astype(bool), np.tril(expected, -1)):
                why = _("the diagonal is False: a token must be allowed to attend to itself")
            raise Fail(fault, _("causal_mask({T}) returned\n{astype}\nexpected (1 = may "
                                "attend)\n{astype2}.").format(T=T, astype=fmt(got.astype(int)),
                                  astype2=fmt(expected.astype(int)))
                              + (_(" Likely cause: {why}.").format(why=_(why)) if why else ""))


@check("causal_mask", N_("returns a boolean array"), kind=PROPERTY)
def causal_is_bool(fn):
    _bool_result(call(fn, 4), "causal_mask(4)")


@check("causal_mask", N_("shape (T, T), including T = 1 and T = 0"), kind=PROPERTY)
def causal_shapes(fn):
    for T in (0, 1, 3):
        got = as_array(call(fn, T), _("causal_mask({T})").format(T=T))
        expect_shape(got, (T, T), _("causal_mask({T})").format(T=T))


# --- padding_mask -------------------------------------------------------------------------


def _padding_leak(got, expected, lengths, T):
    """``("padding-ignored", why)`` if ``got`` keeps every real token and marks some
    padded positions as real (``t <= lengths[b]``: the first pad token leaks in), else
    ``("other", "")``."""
    if got.shape != expected.shape or not np.all(got[expected]) or not np.any(got & ~expected):
        return "other", ""
    off_by_one = np.arange(T)[None, :] <= np.asarray(lengths).reshape(-1)[:, None]
    if np.array_equal(got, off_by_one):
        return "padding-ignored", (_("t <= lengths[b] marks the first padded position as a real "
                                     "token, so attention sees one pad token; real tokens are t "
                                     "< lengths[b]"))
    return "padding-ignored", _("padded positions are marked as real tokens")


@check("padding_mask", N_("[b, t] is True iff t < lengths[b] (lengths as a list or an array)"))
def padding_matches_definition(fn):
    cases = [([3, 1, 4], 4), (np.array([0, 2, 5]), 5), ([1], 1), (np.array([2, 2]), 3)]
    for lengths, T in cases:
        got = as_array(call(fn, lengths, T), _("padding_mask({lengths!r}, {T})").format(
            lengths=lengths,
                                                 T=T))
        expected = ref.padding_mask(lengths, T)
        expect_shape(got, expected.shape, _("padding_mask(lengths of {lengths}, T={T})").format(
            lengths=len(lengths),
                                              T=T))
        if not np.array_equal(got.astype(bool), expected):
            fault, why = _mask_fault(got.astype(bool), expected)
            if fault == "other":
                fault, why = _padding_leak(got.astype(bool), expected, lengths, T)
            shown = list(np.asarray(lengths).tolist())
            raise Fail(fault, _("padding_mask(lengths={shown}, T={T}) returned\n{astype}\nexpected "
                                "(1 = real token)\n{astype2}.").format(shown=shown, T=T,
                                  astype=fmt(got.astype(int)), astype2=fmt(expected.astype(int)))
                              + (_(" Likely cause: {why}.").format(why=_(why)) if why else
                                 _(" Positions t = 0 .. lengths[b]-1 are real tokens.")))


@check("padding_mask", N_("returns a boolean array of shape (B, T)"), kind=PROPERTY)
def padding_is_bool(fn):
    got = _bool_result(call(fn, [2, 3], 4), "padding_mask([2, 3], 4)")
    expect_shape(got, (2, 4), _("padding_mask([2, 3], 4)"))


@check("padding_mask", N_("does not modify lengths"), kind=PROPERTY)
def padding_no_mutation(fn):
    mutation_check(fn, (np.array([3, 1, 2]), 4), {}, "padding_mask", ["lengths", "T"])


# --- combine_masks ------------------------------------------------------------------------


def _random_padding(B, T, seed):
    lengths = rng(seed).integers(1, T + 1, size=B)
    lengths[0] = T - 1 if T > 1 else T  # at least one sequence with real padding
    return ref.padding_mask(lengths, T)


def _combine_fault(g, causal, padding):
    """Name the mistake that turns ``causal[None] & padding[:, None, :]`` into ``g``.

    Returns:
        ``(fault, why)``; ``("other", "")`` when no known mistake reproduces ``g``.
    """
    expected = causal[None, :, :] & padding[:, None, :]
    on_queries = causal[None, :, :] & padding[:, :, None]
    both = on_queries & padding[:, None, :]
    if np.array_equal(g, on_queries) or np.array_equal(g, both):
        return "mask-wrong-axis", (_("padding was applied to the queries (axis 1) instead of the "
                                     "keys (last axis)"))
    if np.array_equal(g, ~expected) or np.array_equal(g, ~causal[None] & ~padding[:, None, :]):
        return "mask-inverted", _("True was read as 'blocked'")
    if np.array_equal(g, causal[None] | padding[:, None, :]):
        # OR is how masks combine when True means "blocked" (blocked if either blocks):
        # causal | padding = ~(~causal & ~padding), the AND of the inverted masks
        return "mask-inverted", (_("the masks were combined with OR, the rule for masks where "
                                   "True means 'blocked' (blocked if either blocks); with True = "
                                   "'may attend' a key is allowed only if both allow it: AND"))
    if np.array_equal(g, np.broadcast_to(causal, g.shape)):
        return "padding-ignored", _("the padding mask was left out")
    return "other", ""


@check("combine_masks", N_("[b, i, j] = causal[i, j] AND padding[b, j] (padding on the keys)"))
def combine_matches_definition(fn):
    for B, T, seed in ((3, 5, 0), (2, 4, 1), (1, 1, 2)):
        causal = ref.causal_mask(T)
        padding = _random_padding(B, T, seed)
        got = as_array(call(fn, causal, padding), _("combine_masks(causal, padding)"))
        expected = ref.combine_masks(causal, padding)
        expect_shape(got, (B, T, T), _("combine_masks(causal ({T}, {T}), padding ({B}, {T}))").format(T=T,
                                         B=B))
        g = got.astype(bool)
        if not np.array_equal(g, expected):
            fault, why = _combine_fault(g, causal, padding)
            b = int(np.argwhere((g != expected).any(axis=(1, 2)))[0][0])
            raise Fail(fault, _("combine_masks with causal ({T}x{T}) and padding "
                                "=\n{astype}\nreturned for sequence b = "
                                "{b}\n{astype2}\nexpected\n{astype3}.").format(T=T,
                                  astype=fmt(padding.astype(int)), b=b,
                                  astype2=fmt(g[b].astype(int)),
                                  astype3=fmt(expected[b].astype(int)))
                              + (_(" Likely cause: {why}.").format(why=_(why)) if why else ""))


@check("combine_masks", N_("returns a boolean array of shape (B, T, T)"), kind=PROPERTY)
def combine_is_bool(fn):
    got = _bool_result(call(fn, ref.causal_mask(4), _random_padding(2, 4, 3)),
                       "combine_masks(causal, padding)")
    expect_shape(got, (2, 4, 4), _("combine_masks(causal (4, 4), padding (2, 4))"))


@check("combine_masks", N_("does not modify its arguments"), kind=PROPERTY)
def combine_no_mutation(fn):
    mutation_check(fn, (ref.causal_mask(4), _random_padding(2, 4, 4)), {}, "combine_masks",
                   ["causal", "padding"])


@check("combine_masks", N_("a sequence of length 0: every row of its mask is all False"))
def combine_empty_sequence(fn):
    T = 4
    causal, padding = ref.causal_mask(T), ref.padding_mask([0, 2, 4], T)
    got = as_array(call(fn, causal, padding), _("combine_masks(causal, padding)"))
    expected = ref.combine_masks(causal, padding)
    expect_shape(got, (3, T, T), _("combine_masks(causal ({T}, {T}), padding (3, {T}))").format(
        T=T))
    g = got.astype(bool)
    if np.array_equal(g, expected):
        return
    fault, why = _combine_fault(g, causal, padding)
    if fault == "other" and g[0].any() and np.array_equal(g[1:], expected[1:]):
        fault, why = "nan-on-empty-row", (_("keys were let in for a sequence with no real token "
                                            "(to avoid NaN later?); its queries have nothing to "
                                            "attend to, and attention gives them zero weights"))
    b = int(np.argwhere((g != expected).any(axis=(1, 2)))[0][0])
    raise Fail(fault, _("combine_masks with causal ({T}x{T}) and padding =\n{astype}\n(sequence 0 "
                        "has length 0) returned for sequence b = "
                        "{b}\n{astype2}\nexpected\n{astype3}.").format(T=T,
                          astype=fmt(padding.astype(int)), b=b, astype2=fmt(g[b].astype(int)),
                          astype3=fmt(expected[b].astype(int)))
                      + (_(" Likely cause: {why}.").format(why=_(why)) if why else ""))
