"""What attention computes under each mistake that docs/contract.md §5 names.

Pass or fail is always decided against the contract; these variants only *name* a failure:
when a student's output equals what, say, a mask applied after the softmax would give on
the same input, the failure is reported as ``mask-after-softmax``. Each variant is a
one-line change of the mathematics, built from the reference pieces.
"""

import math

import numpy as np

from solutions import attention as ref

from ..i18n import N_


def sdpa_variant(Q, K, V, mask=None, scale=True, bug=None):
    """Scaled dot-product attention with one named mistake.

    Args:
        bug: None (correct), ``"no-scale"``, ``"scale-by-d"`` (``1/d_k``),
            ``"axis"`` (softmax over the queries), ``"axis-0"``, ``"axis-1"`` (over the
            leading axis 0 or 1, a batch or head axis: a hard-coded ``axis=0`` or ``axis=1``
            on scores of 3 or more axes), ``"mask-after"`` (zero after the
            softmax), ``"mask-inverted"``, ``"mask-transposed"``, ``"mask-ignored"``,
            ``"scale-ignored"`` (scaled even when ``scale=False``).

    Returns:
        ``(out, weights)``, or ``(None, None)`` when the variant does not apply.
    """
    d_k = Q.shape[-1]
    S = Q @ np.swapaxes(K, -1, -2)
    if (scale and bug not in ("no-scale", "scale-by-d")) or bug == "scale-ignored":
        S = S / math.sqrt(d_k)
    elif scale and bug == "scale-by-d":
        S = S / d_k
    m = None if mask is None else np.asarray(mask, dtype=bool)
    if m is not None and bug == "mask-inverted":
        m = ~m
    if m is not None and bug == "mask-transposed":
        if m.shape[-1] != m.shape[-2]:
            return None, None
        m = np.swapaxes(m, -1, -2)
    if m is not None and bug not in ("mask-after", "mask-ignored"):
        S = np.where(m, S, -np.inf)
    if bug in ("axis-0", "axis-1"):
        leading = int(bug[-1])
        if leading >= S.ndim - 2:  # axis 0 or 1 is then the queries' or the keys' axis
            return None, None
        P = ref.softmax(S, axis=leading)
    else:
        P = ref.softmax(S, axis=-2 if bug == "axis" else -1)
    if m is not None and bug == "mask-after":
        P = np.where(m, P, 0.0)
    return P @ V, P


SDPA_FAULTS = [
    ("no-scale", "missing-scale", N_("the scores were not divided by sqrt(d_k)")),
    ("scale-by-d", "missing-scale", N_("the scores were divided by d_k instead of sqrt(d_k)")),
    ("axis", "softmax-wrong-axis", N_("the softmax normalised over the queries (axis -2) instead "
                                      "of the keys (axis -1)")),
    ("axis-0", "softmax-wrong-axis", N_("the softmax normalised over axis 0, a batch axis, "
                                        "instead of the keys (axis -1), as a hard-coded "
                                        "axis=0 does")),
    ("axis-1", "softmax-wrong-axis", N_("the softmax normalised over axis 1, a batch or head "
                                        "axis, instead of the keys (axis -1), as a hard-coded "
                                        "axis=1 does")),
    ("mask-after", "mask-after-softmax", N_("the weights were zeroed after the softmax, so the "
                                            "rows of weights no longer sum to 1")),
    ("mask-inverted", "mask-inverted", N_("True was read as 'blocked'; True means 'may attend'")),
    ("mask-transposed", "mask-wrong-axis", N_("the mask was applied transposed (rows are "
                                              "queries, columns keys)")),
    ("mask-ignored", "padding-ignored", N_("the mask was not applied at all")),
    ("scale-ignored", "missing-scale", N_("the scale flag was ignored: scale=False gave the same "
                                          "weights as scale=True")),
]


def _wrong_split(M, h):
    B, T, d = M.shape
    return M.reshape(B, h, T, d // h)  # reshape straight to (B, h, T, d_h): heads mixed


def _wrong_merge(M):
    B, h, T, d_h = M.shape
    return M.reshape(B, T, h * d_h)  # reshape before moving the head axis back


def mha_variant(X, Ws, n_heads, mask=None, biases=None, scale=True, bug=None):
    """Multi-head self-attention (optionally with biases) with one named mistake.

    Args:
        X: ``(B, T, d)``; Ws: ``(W_Q, W_K, W_V, W_O)``; biases: None or
            ``(b_Q, b_K, b_V, b_O)``; mask: None, ``(T, T)`` or ``(B, T, T)``.
        bug: None, one of ``sdpa_variant``'s bugs, or ``"scale-by-sqrt-d"``,
            ``"wrong-split"``, ``"wrong-merge"``, ``"wrong-split-merge"``.

    Returns:
        ``(Y, weights)`` or ``(None, None)``.
    """
    W_Q, W_K, W_V, W_O = Ws
    b = biases if biases is not None else (0.0, 0.0, 0.0, 0.0)
    split = _wrong_split if bug in ("wrong-split", "wrong-split-merge") else ref.split_heads
    merge = _wrong_merge if bug in ("wrong-merge", "wrong-split-merge") else ref.merge_heads
    Q, K, V = (split(X @ W + bb, n_heads) for W, bb in ((W_Q, b[0]), (W_K, b[1]), (W_V, b[2])))
    m = None
    if mask is not None:
        m = np.asarray(mask, dtype=bool)
        if m.ndim == 3:
            m = m[:, None]
    sdpa_bug = bug if bug not in ("scale-by-sqrt-d", "wrong-split", "wrong-merge",
                                  "wrong-split-merge") else None
    if bug == "scale-by-sqrt-d":
        Q = Q * math.sqrt(Q.shape[-1]) / math.sqrt(X.shape[-1])
    out, P = sdpa_variant(Q, K, V, m, scale=scale, bug=sdpa_bug)
    if out is None:
        return None, None
    return merge(out) @ W_O + b[3], P


MHA_FAULTS = SDPA_FAULTS + [
    ("scale-by-sqrt-d", "missing-scale", N_("the scores were divided by sqrt(d) instead of "
                                            "sqrt(d_h), the width of one head")),
    ("wrong-split", "head-order", N_("split_heads reshaped straight to (B, h, T, d_h) instead of "
                                     "(B, T, h, d_h) then transposing")),
    ("wrong-merge", "head-order", N_("the heads were merged by reshaping before moving the head "
                                     "axis back")),
    ("wrong-split-merge", "head-order", N_("reshape and transpose were done in the wrong order "
                                           "in both split and merge")),
]


def mha_candidates(X, Ws, n_heads, mask=None, biases=None, scale=True):
    """What each mistake of ``MHA_FAULTS`` would output on these inputs.

    Args: as ``mha_variant``.

    Returns:
        list of ``(fault, Y, explanation)`` for ``diagnose``, in ``MHA_FAULTS`` order; a
        mistake that does not apply to these inputs (``mha_variant`` returned None) is
        left out.
    """
    out = []
    for bug, fault, why in MHA_FAULTS:
        alt, _cache = mha_variant(X, Ws, n_heads, mask, biases=biases, scale=scale, bug=bug)
        if alt is not None:
            out.append((fault, alt, why))
    return out
