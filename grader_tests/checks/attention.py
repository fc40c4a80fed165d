"""Checks of ``scaled_dot_product_attention`` and ``multi_head_attention`` (docs/contract.md §2;
traps 1-6). Both run with the reference ``softmax``, ``split_heads`` and
``merge_heads`` in place of the student's (fault isolation, ``core.isolate``)."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from solutions import attention as ref

from .. import strategies as S
from ..guard import call
from ..i18n import N_, _
from ..registry import Fail, PROPERTY, check
from ._util import (allclose, as_array, diagnose, dtype_check, expect_shape, fmt,
                    head_count_check, mutation_check, rng, unpack, worst_difference)
from ._variants import SDPA_FAULTS, mha_candidates, sdpa_variant

SDPA = "scaled_dot_product_attention"
MHA = "multi_head_attention"


def _call_sdpa(fn, Q, K, V, mask=None, scale=True, label=None):
    kwargs = {"scale": scale}
    if mask is not None:
        kwargs["mask"] = mask
    label = label or SDPA
    out, weights = unpack(call(fn, Q, K, V, **kwargs), 2, label)
    return as_array(out, _("{label}: out").format(label=label)), as_array(weights, _("{label}: weights").format(label=label))


def _sdpa_fail(out, weights, Q, K, V, mask, scale, what, default="other", rtol=1e-6):
    """Raise a Fail naming the mistake that reproduces the student's weights/output."""
    expected_out, expected_w = ref.scaled_dot_product_attention(Q, K, V, mask=mask, scale=scale)
    candidates = []
    for bug, fault, why in SDPA_FAULTS:
        alt_out, alt_w = sdpa_variant(Q, K, V, mask, scale, bug)
        if alt_w is not None and weights.shape == alt_w.shape and allclose(weights, alt_w, rtol):
            candidates.append((fault, weights, why))
            break
    if not candidates:
        c = _fitted_scale(weights, Q, K, mask)
        if c is not None and scale and not np.isclose(c, 1 / np.sqrt(Q.shape[-1]), rtol=1e-3):
            candidates.append(("missing-scale", weights,
                               _("the scores were multiplied by {c:.4g} instead of 1/sqrt(d_k) = "
                                 "{value:.4g} (d_k = {shape}, the width of the queries and keys)").format(c=c,
                                   value=1 / np.sqrt(Q.shape[-1]), shape=Q.shape[-1])))
    fault, why = diagnose(weights, candidates, default)
    wrong_w = not allclose(weights, expected_w, rtol=rtol, atol=1e-9)
    label, got, exp = (_("weights"), weights, expected_w) if wrong_w else ("out", out, expected_out)
    raise Fail(fault, _("{what}: the {label} differ from the definition ({worst_difference}). Q "
                        "has shape {shape}, K {shape2}, V {shape3}").format(what=what,
                          label=label, worst_difference=worst_difference(got, exp), shape=Q.shape,
                          shape2=K.shape, shape3=V.shape) + ("" if mask is None else _(", mask {shape}").format(shape=np.shape(mask)))
                      + _(", scale={scale}.").format(scale=scale)
                      + (_(" Likely cause: {why}.").format(why=_(why)) if why else
                         _(" Check S = Q K^T / sqrt(d_k), P = softmax(S) over the keys, out = P "
                           "V.")))


def _fitted_scale(weights, Q, K, mask):
    """The constant c for which ``weights == softmax(c Q K^T)`` (masked), or None.

    Within a row, ``log w_j - log w_k = c (s_j - s_k)``: c is the least-squares slope of
    the row-centred log-weights on the row-centred raw scores.
    """
    S = np.asarray(Q @ np.swapaxes(K, -1, -2), dtype=np.float64)
    W = np.asarray(weights, dtype=np.float64)
    if W.shape != S.shape or not np.all(np.isfinite(W)) or np.any(W < 0):
        return None
    allowed = np.broadcast_to(True if mask is None else np.asarray(mask, dtype=bool), S.shape)
    keep = allowed & (W > 1e-250)
    count = np.maximum(keep.sum(-1, keepdims=True), 1)
    with np.errstate(all="ignore"):
        logw = np.where(keep, np.log(np.where(keep, W, 1.0)), 0.0)
    lw = np.where(keep, logw - logw.sum(-1, keepdims=True) / count, 0.0)
    sc = np.where(keep, S - np.where(keep, S, 0.0).sum(-1, keepdims=True) / count, 0.0)
    denom = float((sc * sc).sum())
    if denom <= 1e-12:
        return None
    c = float((lw * sc).sum() / denom)
    P = ref.softmax(np.where(allowed, c * S, -np.inf))
    return c if allclose(P, W, rtol=1e-5, atol=1e-8) else None


def _expect_sdpa(fn, Q, K, V, mask=None, scale=True, what=SDPA, rtol=1e-6):
    out, weights = _call_sdpa(fn, Q, K, V, mask, scale)
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    T_q, T_k, d_v = Q.shape[-2], K.shape[-2], V.shape[-1]
    expect_shape(out, batch + (T_q, d_v), _("{what}: out").format(what=what))
    expect_shape(weights, batch + (T_q, T_k), _("{what}: weights").format(what=what))
    expected_out, expected_w = ref.scaled_dot_product_attention(Q, K, V, mask=mask, scale=scale)
    if not (allclose(weights, expected_w, rtol=rtol, atol=1e-9)
            and allclose(out, expected_out, rtol=rtol, atol=1e-9)):
        _sdpa_fail(out, weights, Q, K, V, mask, scale, what, rtol=rtol)
    return out, weights


def _weights_follow_queries(fn, Q, K, V, mask, weights, what):
    """``Fail('other')`` when the weights stay the same for other queries: weights computed
    from the mask alone (uniform over the allowed keys, say) sum to 1, make ``out =
    weights @ V`` and ignore padded keys, yet compute no score ``Q K^T``."""
    other = rng(15).normal(size=Q.shape).astype(Q.dtype) * 2.0
    _unused, moved = _call_sdpa(fn, other, K, V, mask)
    if moved.shape == weights.shape and allclose(moved, weights, rtol=1e-9, atol=1e-12):
        raise Fail("other", _("{what}: other queries Q gave the same weights; the weights are "
                              "the softmax of the scores Q K^T / sqrt(d_k), so they change with "
                              "the queries.").format(what=what))


def empty_row_cause(row_w, unmasked):
    """Why the weights of a query that may attend to no key are not zeros, read from them.

    Args:
        row_w: float array ``(..., T_k)``, the student's weights of the fully masked rows.
        unmasked: float array of the same shape, the reference weights of those rows
            without a mask.

    Returns:
        str, the cause the weights show: NaN (a softmax of -inf only), the unmasked
        weights (a mask added to the scores: a row shifted by the same amount everywhere
        keeps its softmax), uniform weights (a large negative fill), else the three.
    """
    w = np.asarray(row_w, dtype=np.float64)
    if np.isnan(w).any():
        return _("a row of -inf only gives NaN in a softmax without the empty-row rule (max "
                 "of the row taken as 0, divide only where the sum is > 0)")
    if w.shape == np.shape(unmasked) and allclose(w, unmasked, rtol=1e-6, atol=1e-9):
        return _("these are the weights the row has without a mask: the mask was added to the "
                 "scores (-1e9 where blocked), which shifts a row blocked everywhere by the same "
                 "amount, and a softmax does not change when its whole row is shifted; set "
                 "blocked scores to -inf and give a row of -inf only zero weights")
    if w.size and allclose(w, np.broadcast_to(w.mean(axis=-1, keepdims=True), w.shape)):
        return _("a large negative fill (-1e9 where blocked) gives a row blocked everywhere "
                 "equal scores, so uniform weights; set blocked scores to -inf and give a row "
                 "of -inf only zero weights")
    return _("NaN comes from a softmax of -inf only, uniform weights from a large negative "
             "fill (-1e9), the unmasked weights from a mask added to the scores: a row "
             "blocked everywhere must get zero weights")


def _qkv(seed, batch, T_q, T_k, d_k, d_v, dtype=np.float64, spread=1.0):
    r = rng(seed)
    Q = (r.normal(size=batch + (T_q, d_k)) * spread).astype(dtype)
    K = (r.normal(size=batch + (T_k, d_k)) * spread).astype(dtype)
    V = r.normal(size=batch + (T_k, d_v)).astype(dtype)
    return Q, K, V


@check(SDPA, N_("matches softmax(Q K^T / sqrt(d_k)) V on random shapes (T_q != T_k, 0-2 batch "
                "axes)"))
def sdpa_matches_definition(fn):
    @S.SETTINGS
    @given(shape=S.attention_shapes(), data=st.data())
    def prop(shape, data):
        batch, T_q, T_k, d_k, d_v = shape
        Q = data.draw(S.float_arrays(batch + (T_q, d_k), np.float64, 3.0), label="Q")
        K = data.draw(S.float_arrays(batch + (T_k, d_k), np.float64, 3.0), label="K")
        V = data.draw(S.float_arrays(batch + (T_k, d_v), np.float64, 3.0), label="V")
        _expect_sdpa(fn, Q, K, V)

    prop()


@check(SDPA, N_("weights: every row sums to 1 over the keys, out = weights @ V"))
def sdpa_rows_sum_to_one(fn):
    Q, K, V = _qkv(10, (2,), 3, 6, 4, 5, spread=2.0)  # T_q = 3 queries, T_k = 6 keys
    out, weights = _call_sdpa(fn, Q, K, V)
    expect_shape(weights, (2, 3, 6), _("{SDPA}: weights for Q (2, 3, 4), K (2, 6, 4)").format(
        SDPA=SDPA))
    sums = weights.sum(axis=-1)
    if not allclose(sums, np.ones_like(sums), atol=1e-9):
        fault = "softmax-wrong-axis" if allclose(weights.sum(axis=-2), np.ones((2, 6)),
                                                 atol=1e-9) else "other"
        raise Fail(fault, _("{SDPA}: the rows of the weights (one per query) sum "
                            "to\n{sums}\ninstead of 1 (Q (2, 3, 4), K (2, 6, 4)).").format(
                                SDPA=SDPA,
                              sums=fmt(sums))
                          + (_(" Likely cause: the softmax normalised over the queries (axis "
                               "-2); it must run over the keys (axis -1).") if fault != "other" else ""))
    expect_shape(out, (2, 3, 5), _("{SDPA}: out").format(SDPA=SDPA))
    if not allclose(out, weights @ V, atol=1e-9):
        raise Fail("other", _("{SDPA}: out is not weights @ V ({worst_difference}).").format(
            SDPA=SDPA,
                                worst_difference=worst_difference(out, weights @ V)))
    _weights_follow_queries(fn, Q, K, V, None, weights, SDPA)


@check(SDPA, N_("causal mask: masked weights are exactly 0 and rows still sum to 1"))
def sdpa_causal_mask(fn):
    Q, K, V = _qkv(11, (2,), 5, 5, 4, 3, spread=1.5)
    mask = ref.causal_mask(5)
    out, weights = _call_sdpa(fn, Q, K, V, mask)
    expect_shape(weights, (2, 5, 5), _("{SDPA}: weights").format(SDPA=SDPA))
    leak = np.abs(np.where(mask, 0.0, weights)).max()
    sums = weights.sum(axis=-1)
    if leak != 0 or not allclose(sums, np.ones_like(sums), atol=1e-9) or not allclose(
            out, ref.scaled_dot_product_attention(Q, K, V, mask)[0], atol=1e-9):
        try:
            _sdpa_fail(out, weights, Q, K, V, mask, True, _("{SDPA} with a causal (5, 5) mask").format(SDPA=SDPA))
        except Fail as failure:
            detail = (_("\nRow sums: {sums}; largest weight on a masked (future) key: {leak:.3g}.").format(sums=fmt(sums[0]),
                          leak=leak))
            raise Fail(failure.fault, failure.message + detail) from None


@check(SDPA, N_("padding mask broadcast over a batch: padded keys get weight 0"))
def sdpa_padding_mask(fn):
    Q, K, V = _qkv(12, (3, 2), 4, 6, 4, 3, spread=1.5)  # (B, h, T_q, d), keys T_k = 6
    mask = ref.padding_mask([6, 3, 1], 6)[:, None, None, :]  # (B, 1, 1, T_k)
    _expect_sdpa(fn, Q, K, V, mask, what=_("{SDPA} with a (3, 1, 1, 6) padding mask").format(
        SDPA=SDPA))


@check(SDPA, N_("padding invariance: padded keys with arbitrary content change nothing"))
def sdpa_padding_invariance(fn):
    Q, K, V = _qkv(13, (2,), 4, 3, 4, 3)
    r = rng(14)
    K_pad = np.concatenate([K, r.normal(size=(2, 2, 4)) * 50], axis=-2)  # 2 garbage keys
    V_pad = np.concatenate([V, r.normal(size=(2, 2, 3)) * 1e3], axis=-2)
    mask = np.array([True, True, True, False, False])
    base_out, base_w = _call_sdpa(fn, Q, K, V)
    pad_out, pad_w = _call_sdpa(fn, Q, K_pad, V_pad, mask)
    expect_shape(pad_out, base_out.shape, _("{SDPA}: out with padded keys").format(SDPA=SDPA))
    if not allclose(pad_out, base_out, rtol=1e-6, atol=1e-9):
        fault, why = "padding-ignored", _("the padded keys still receive weight")
        expect_shape(pad_w, (2, 4, 5), _("{SDPA}: weights with padded keys").format(SDPA=SDPA))
        if np.abs(pad_w[..., 3:]).max() == 0 and not allclose(pad_w.sum(-1), 1.0):
            fault, why = "mask-after-softmax", (_("the padded keys' weights were zeroed after "
                                                  "the softmax, so the real keys' weights no "
                                                  "longer sum to 1"))
        elif allclose(pad_w[..., :3], 0.0):
            fault, why = "mask-inverted", _("only the padded keys got weight: True means 'may "
                                            "attend'")
        raise Fail(fault, _("{SDPA}: appending 2 padded keys (mask [T, T, T, F, F]) with large "
                            "arbitrary K and V changed the outputs of the real positions "
                            "({worst_difference}). Likely cause: {why}.").format(SDPA=SDPA,
                              worst_difference=worst_difference(pad_out, base_out), why=_(why)))
    # and the real keys do change the outputs (an answer that ignores its input, zeros say,
    # would be "invariant" too): their values moved, the outputs move
    moved_out, _unused = _call_sdpa(fn, Q, K_pad, V_pad + np.where(mask[:, None], 1.0, 0.0), mask)
    if allclose(moved_out, pad_out, rtol=1e-9, atol=1e-12):
        raise Fail("other", _("{SDPA}: with the padding mask [T, T, T, F, F], adding 1 to every "
                              "value of the real keys (V) left the outputs as they were; the "
                              "outputs are the weights times V, so they must move by 1 (the "
                              "weights of a row sum to 1).").format(SDPA=SDPA))
    _weights_follow_queries(fn, Q, K_pad, V_pad, mask, pad_w, SDPA)


@check(SDPA, N_("a fully masked row gives zero weights and a zero output, never NaN"))
def sdpa_empty_row(fn):
    Q, K, V = _qkv(15, (), 3, 4, 2, 2)
    mask = np.array([[True, False, True, True], [False, False, False, False],
                     [True, True, True, True]])
    out, weights = _call_sdpa(fn, Q, K, V, mask)
    expected_out, expected_w = ref.scaled_dot_product_attention(Q, K, V, mask)
    expect_shape(weights, (3, 4), _("{SDPA}: weights").format(SDPA=SDPA))
    if not (allclose(weights, expected_w, atol=1e-12) and allclose(out, expected_out, atol=1e-12)):
        row_w, row_o = weights[1], as_array(out, "out")[1]
        if np.isnan(row_w).any() or np.isnan(row_o).any() or not allclose(row_w, 0.0) \
                or not allclose(row_o, 0.0):
            unmasked = ref.scaled_dot_product_attention(Q, K, V)[1][1]
            raise Fail("nan-on-empty-row",
                       _("{SDPA}: query 1 may attend to no key (its mask row is all False); its "
                         "weights are {row_w} and its output {row_o}, expected all "
                         "zeros.").format(SDPA=SDPA, row_w=fmt(row_w), row_o=fmt(row_o))
                       + " " + _("Likely cause: {why}.").format(
                           why=empty_row_cause(row_w, unmasked)))
        _sdpa_fail(out, weights, Q, K, V, mask, True, _("{SDPA} with one fully masked row").format(
            SDPA=SDPA))


@check(SDPA, N_("no overflow or NaN when the scores reach 1e4"))
def sdpa_large_scores(fn):
    Q = np.array([[[100.0, 0.0], [-80.0, 60.0]]])
    K = np.array([[[100.0, 10.0], [-100.0, 0.0], [50.0, 50.0]]])
    V = rng(16).normal(size=(1, 3, 2))
    out, weights = _call_sdpa(fn, Q, K, V)
    expected_out, expected_w = ref.scaled_dot_product_attention(Q, K, V)
    if not (np.all(np.isfinite(weights)) and np.all(np.isfinite(out))):
        raise Fail("unstable-softmax", _("{SDPA}: with scores of order 1e4 (Q =\n{Q}, K =\n{K}) "
                                         "the weights are\n{weights}: exp overflowed. Likely "
                                         "cause: a softmax inside the function that does not "
                                         "subtract the row maximum.").format(SDPA=SDPA,
                                           Q=fmt(Q[0]), K=fmt(K[0]), weights=fmt(weights)))
    if not (allclose(weights, expected_w, atol=1e-9) and allclose(out, expected_out, atol=1e-9)):
        _sdpa_fail(out, weights, Q, K, V, None, True, _("{SDPA} with scores of order 1e4").format(
            SDPA=SDPA))


@check(SDPA, N_("scale=False drops the 1/sqrt(d_k) factor"))
def sdpa_scale_flag(fn):
    Q, K, V = _qkv(17, (2,), 3, 4, 8, 2)
    _expect_sdpa(fn, Q, K, V, scale=False, what=f"{SDPA}(..., scale=False)")


@check(SDPA, N_("float32 in, float32 out"), kind=PROPERTY)
def sdpa_keeps_float32(fn):
    dtype_check(fn, lambda dt: (_qkv(18, (2,), 3, 4, 4, 2, dt), {"mask": ref.causal_mask(4)[:3]}),
                lambda res: list(zip(("out", "weights"), unpack(res, 2, SDPA))), SDPA)


@check(SDPA, N_("does not modify Q, K, V or the mask"), kind=PROPERTY)
def sdpa_no_mutation(fn):
    Q, K, V = _qkv(19, (2,), 4, 4, 3, 2)
    mutation_check(fn, (Q, K, V), {"mask": ref.causal_mask(4)}, SDPA, ["Q", "K", "V"])


# --- multi_head_attention ---------------------------------------------------------------


def _mha_inputs(seed, B=2, T=4, d=8, dtype=np.float64):
    r = rng(seed)
    X = r.normal(size=(B, T, d)).astype(dtype)
    Ws = [(r.normal(size=(d, d)) / np.sqrt(d) * 1.5).astype(dtype) for _unused in range(4)]
    return X, Ws


def _expect_mha(fn, X, Ws, h, mask=None, what=MHA):
    kwargs = {} if mask is None else {"mask": mask}
    Y, weights = unpack(call(fn, X, *Ws, h, **kwargs), 2, what)
    Y, weights = as_array(Y, _("{what}: Y").format(what=what)), as_array(weights, _("{what}: weights").format(what=what))
    B, T, d = X.shape
    expect_shape(Y, (B, T, d), _("{what}: Y").format(what=what))
    expect_shape(weights, (B, h, T, T), _("{what}: weights").format(what=what))
    exp_Y, exp_w = ref.multi_head_attention(X, *Ws, h, mask=mask)
    if allclose(Y, exp_Y, atol=1e-9) and allclose(weights, exp_w, atol=1e-9):
        return Y, weights
    fault, why = diagnose(Y, mha_candidates(X, Ws, h, mask), "other")
    if fault == "other" and not allclose(weights, exp_w, atol=1e-9):
        sums = weights.sum(axis=-1)
        if not allclose(sums[(sums > 0)], 1.0):
            fault, why = "mask-after-softmax" if mask is not None else "other", (
                _("the rows of the weights do not sum to 1"))
    label, got, exp = ("Y", Y, exp_Y) if not allclose(Y, exp_Y, atol=1e-9) else (
        _("weights"), weights, exp_w)
    raise Fail(fault, _("{what}: {label} differs from the definition ({worst_difference}); X has "
                        "shape {shape}, n_heads = {h}").format(what=what, label=label,
                          worst_difference=worst_difference(got, exp), shape=X.shape, h=h)
                      + ("" if mask is None else _(", mask of shape {shape}").format(
                          shape=np.shape(mask))) + "."
                      + (_(" Likely cause: {why}.").format(why=_(why)) if why else
                         _(" Check Q = X W_Q, split into heads, softmax(Q K^T / sqrt(d_h)) V per "
                           "head, merge, then @ W_O.")))


@check(MHA, N_("matches the definition without a mask (h = 2 and h = 4, B = 2)"))
def mha_matches_definition(fn):
    for h, seed in ((2, 20), (4, 21)):
        X, Ws = _mha_inputs(seed)
        _expect_mha(fn, X, Ws, h, what=f"{MHA}(n_heads={h})")


@check(MHA, N_("a (T, T) causal mask applies to every head"))
def mha_causal_mask(fn):
    X, Ws = _mha_inputs(22, B=2, T=5)
    _expect_mha(fn, X, Ws, 2, ref.causal_mask(5), what=_("{MHA} with a (5, 5) causal mask").format(
        MHA=MHA))


@check(MHA, N_("a (B, T, T) causal-and-padding mask applies to every head"))
def mha_batch_mask(fn):
    X, Ws = _mha_inputs(23, B=3, T=5)
    mask = ref.combine_masks(ref.causal_mask(5), ref.padding_mask([5, 3, 2], 5))
    _expect_mha(fn, X, Ws, 4, mask, what=_("{MHA} with a (3, 5, 5) mask").format(MHA=MHA))


@check(MHA, N_("permutation equivariance: attn(PX) = P attn(X) without a mask"), kind=PROPERTY)
def mha_permutation_equivariance(fn):
    X, Ws = _mha_inputs(24, B=2, T=5)
    perm = np.array([3, 0, 4, 1, 2])
    Y, _unused = unpack(call(fn, X, *Ws, 2), 2, MHA)
    Y_perm, _unused = unpack(call(fn, X[:, perm], *Ws, 2), 2, MHA)
    Y, Y_perm = as_array(Y, _("{MHA}: Y").format(MHA=MHA)), as_array(Y_perm, _("{MHA}: Y").format(MHA=MHA))
    expect_shape(Y, X.shape, _("{MHA}: Y").format(MHA=MHA))
    expect_shape(Y_perm, X.shape, _("{MHA}: Y").format(MHA=MHA))
    if not allclose(Y_perm, Y[:, perm], rtol=1e-7, atol=1e-10):
        raise Fail("head-order", _("{MHA}: reordering the tokens of X by {tolist} should reorder "
                                   "the output rows the same way (no positions, no mask), but "
                                   "max |attn(PX) - P attn(X)| = {max:.3g}. Likely cause: tokens "
                                   "are mixed with one another, as when heads are split or "
                                   "merged with reshape and transpose in the wrong order.").format(
                                       MHA=MHA,
                                     tolist=perm.tolist(), max=np.abs(Y_perm - Y[:, perm]).max()))


@check(MHA, N_("raises ValueError when d is not divisible by n_heads"), kind=PROPERTY)
def mha_rejects_bad_heads(fn):
    head_count_check(fn, lambda B, T, d, h: (lambda X, Ws: (X, *Ws, h))(*_mha_inputs(27, B, T, d)),
                     MHA)


@check(MHA, N_("float32 in, float32 out"), kind=PROPERTY)
def mha_keeps_float32(fn):
    dtype_check(fn, lambda dt: ((*((lambda X, Ws: (X, *Ws))(*_mha_inputs(25, dtype=dt))), 2), {}),
                lambda res: list(zip(("Y", "weights"), unpack(res, 2, MHA))), MHA)


@check(MHA, N_("does not modify X, the weights or the mask"), kind=PROPERTY)
def mha_no_mutation(fn):
    X, Ws = _mha_inputs(26)
    mutation_check(fn, (X, *Ws, 2), {"mask": ref.causal_mask(4)}, MHA,
                   ["X", "W_Q", "W_K", "W_V", "W_O", "n_heads"])


# Scores in the thousands overflow exp (float64 overflows above about 709) unless the softmax
# subtracts the row maximum; scaling W_Q and W_K by 30 multiplies every score by 900 and
# leaves the values (and so the output's size) as they were. attention_forward's check
# (attention_block) uses the same factor.
LARGE_SCORE_FACTOR = 30.0


def _finite_where_expected(got, expected):
    """True if ``got`` has no NaN or infinity where ``expected`` is finite."""
    got = np.asarray(got, dtype=np.float64)
    return got.shape == np.shape(expected) and bool(np.all(np.isfinite(got)
                                                           | ~np.isfinite(expected)))


@check(MHA, N_("no overflow or NaN when the scores reach the thousands (W_Q, W_K scaled by 30)"))
def mha_large_scores(fn):
    X, Ws = _mha_inputs(27, B=2, T=5)
    Ws = [Ws[0] * LARGE_SCORE_FACTOR, Ws[1] * LARGE_SCORE_FACTOR, Ws[2], Ws[3]]
    what = _("{MHA} with scores in the thousands (W_Q and W_K scaled by {LARGE_SCORE_FACTOR:g})").format(MHA=MHA,
               LARGE_SCORE_FACTOR=LARGE_SCORE_FACTOR)
    for mask in (None, ref.causal_mask(5)):
        kwargs = {} if mask is None else {"mask": mask}
        Y, weights = unpack(call(fn, X, *Ws, 2, **kwargs), 2, what)
        Y, weights = as_array(Y, _("{what}: Y").format(what=what)), as_array(weights, _("{what}: weights").format(what=what))
        exp_Y, exp_w = ref.multi_head_attention(X, *Ws, 2, mask=mask)
        if not (_finite_where_expected(Y, exp_Y) and _finite_where_expected(weights, exp_w)):
            S = ref.split_heads(X @ Ws[0], 2) @ np.swapaxes(ref.split_heads(X @ Ws[1], 2),
                                                             -1, -2) / np.sqrt(X.shape[-1] // 2)
            raise Fail("unstable-softmax",
                       what + ("" if mask is None else _(", causal mask"))
                       + _(": the scores reach {max:.3g} and the output holds NaN or inf "
                           "({worst_difference}); the definition is finite there. Likely cause: "
                           "a softmax written inside the function that does not subtract the row "
                           "maximum before exp (exp overflows above about 709 in float64).").format(
                               max=np.abs(S).max(),
                             worst_difference=worst_difference(Y, exp_Y)))
        _expect_mha(fn, X, Ws, 2, mask, what=what)


@check(MHA, N_("a query whose keys are all masked gets zero weights and output in every head, "
               "never NaN ((T, T) and (B, T, T) masks)"))
def mha_empty_row(fn):
    X, Ws = _mha_inputs(28, B=3, T=4)
    square = ref.causal_mask(4)
    square[2] = False  # query 2 may attend to no key
    batch = ref.combine_masks(ref.causal_mask(4), ref.padding_mask([4, 0, 2], 4))  # b = 1: none
    for mask, empty in ((square, (slice(None), 2)), (batch, (1, slice(None)))):
        what = _("{MHA} with a {shape} mask that leaves a query no key").format(MHA=MHA,
                   shape=mask.shape)
        Y, weights = unpack(call(fn, X, *Ws, 2, mask=mask), 2, what)
        Y, weights = as_array(Y, _("{what}: Y").format(what=what)), as_array(weights, _("{what}: weights").format(what=what))
        expect_shape(Y, X.shape, _("{what}: Y").format(what=what))
        expect_shape(weights, (3, 2, 4, 4), _("{what}: weights").format(what=what))
        b, t = empty
        row_w = weights[b, :, t] if isinstance(b, int) else weights[:, :, t]
        row_Y = Y[b, t] if isinstance(b, int) else Y[:, t]
        if np.isnan(row_w).any() or np.isnan(row_Y).any() or not allclose(row_w, 0.0) \
                or not allclose(row_Y, 0.0, atol=1e-12):
            where = (_("query {t} of every sequence").format(t=t) if not isinstance(b, int) else
                     _("every query of sequence {b} (length 0)").format(b=b))
            unmasked = ref.multi_head_attention(X, *Ws, 2)[1]
            unmasked = unmasked[b, :, t] if isinstance(b, int) else unmasked[:, :, t]
            raise Fail("nan-on-empty-row",
                       _("{what}: {where} may attend to no key; its weights are {row_w} and its "
                         "output {row_Y}, expected all zeros (in every head, and Y = 0 @ W_O = "
                         "0).").format(what=what, where=where, row_w=fmt(row_w),
                                       row_Y=fmt(row_Y))
                       + " " + _("Likely cause: {why}.").format(
                           why=empty_row_cause(row_w, unmasked)))
        _expect_mha(fn, X, Ws, 2, mask, what=what)
