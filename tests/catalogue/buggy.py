"""Buggy implementations, one bug each, as a student would write them.

Each ``Bug`` replaces one function of the reference (``function``) by ``source``, run in
the namespace of the reference module (``tests.catalogue.build_namespace``), so the buggy
function calls the other, correct, functions of that namespace. The graders must take
points from ``function`` and name ``fault`` (an id of docs/contract.md §5) among its failed
checks; every other contract function keeps full marks, except those listed in ``also`` (each
with the reason in a comment at the entry).

``gap``, when set, says why the graders currently get the entry wrong; the test file marks
such entries ``xfail``, strict (a fix shows up as an XPASS that fails the run) unless the
reason starts with "timing-dependent" (the verdict then varies with the machine's load).

The fault id ``tampering`` is covered by the tampering examples of the grading-engine
tests, not here.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Bug:
    """One buggy submission.

    Attributes:
        id: str, unique, ``<function>-<what is wrong>``.
        function: str, the contract function the bug lives in.
        fault: str, the fault id of docs/contract.md §5 the graders must report for it.
        source: str, Python source defining ``function`` (it may also delete a name).
        note: str, what the student did and why the contract rules it out.
        also: tuple of str, other contract functions that legitimately lose points.
        gap: str or None, why the graders currently miss or misname the bug.
        not_faults: tuple of str, fault ids the function's report must not contain (the
            bug does not do that), for entries where the graders have been seen to name one.
        not_faults_gap: str or None, why the graders currently report one of them.
        points: float or None, the score ``function`` must get (its checks are fixed,
            so a change of verdict on any of them shows), where the entry pins it.
        cause: str or None, words every failed check reporting ``fault`` must say (its
            "likely cause"), where the entry pins them: the id and its explanation agree.
    """

    id: str
    function: str
    fault: str
    source: str
    note: str
    also: tuple = ()
    gap: str = None
    not_faults: tuple = ()
    not_faults_gap: str = None
    points: float = None
    cause: str = None


# Forward functions whose cache a backward is graded with: the graders run the student's
# own forward to get the cache (docs/contract.md §2: the backward takes "what the forward returned"), and
# a backward check runs only on an input where that forward is right (a backward earns its
# points for being the gradient of the contract's function, never of a wrong forward:
# grader_tests/checks/layer_norm.py). So a forward bug that shows on a backward check's
# input also costs the backward that check, reported with the forward's fault id.
_LN_CACHE = ("layer_norm_backward",)
_ATTN_CACHE = ("attention_backward",)




BUGS = [
    # ------------------------------------------------------------------ missing-scale
    Bug("sdpa-no-scale", "scaled_dot_product_attention", "missing-scale", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            scores = Q @ np.swapaxes(K, -1, -2)          # forgot the / sqrt(d_k)
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores, axis=-1)
            return weights @ V, weights
        ''', "trap 1: the scores are never divided by sqrt(d_k)"),
    Bug("sdpa-divides-by-dk", "scaled_dot_product_attention", "missing-scale", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            d_k = Q.shape[-1]
            scores = np.matmul(Q, np.swapaxes(K, -1, -2))
            if scale:
                scores = scores / d_k                    # d_k, not sqrt(d_k)
            if mask is not None:
                scores = np.where(np.asarray(mask, bool), scores, -np.inf)
            weights = softmax(scores)
            return np.matmul(weights, V), weights
        ''', "divides by d_k instead of sqrt(d_k)",
        cause="d_k instead of sqrt(d_k)"),
    Bug("sdpa-ignores-scale-flag", "scaled_dot_product_attention", "missing-scale", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            scores = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])   # always scaled
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores, axis=-1)
            return weights @ V, weights
        ''', "scale=False must drop the factor; this scales anyway"),
    Bug("mha-scale-by-sqrt-d", "multi_head_attention", "missing-scale", '''
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
            d = X.shape[-1]
            Q = split_heads(X @ W_Q, n_heads)
            K = split_heads(X @ W_K, n_heads)
            V = split_heads(X @ W_V, n_heads)
            if mask is not None and np.ndim(mask) == 3:
                mask = np.asarray(mask)[:, None]
            # scale by the model width instead of the head width d_h = d / h
            out, weights = scaled_dot_product_attention(Q / math.sqrt(d), K, V, mask=mask,
                                                        scale=False)
            return merge_heads(out) @ W_O, weights
        ''', "1/sqrt(d) instead of 1/sqrt(d_h) with heads (the contract: scale by sqrt(d_h))"),
    Bug("attnfwd-scale-by-sqrt-d", "attention_forward", "missing-scale", '''
        def attention_forward(x, params, n_heads, causal=True, scale=True):
            B, T, d = x.shape
            Q = split_heads(x @ params["W_Q"] + params["b_Q"], n_heads)
            K = split_heads(x @ params["W_K"] + params["b_K"], n_heads)
            V = split_heads(x @ params["W_V"] + params["b_V"], n_heads)
            factor = 1.0 / math.sqrt(d) if scale else 1.0      # d, not d // n_heads
            scores = (Q @ np.swapaxes(K, -1, -2)) * factor
            if causal:
                scores = np.where(causal_mask(T), scores, -np.inf)
            P = softmax(scores, axis=-1)
            O = merge_heads(P @ V)
            y = O @ params["W_O"] + params["b_O"]
            cache = {"x": x, "Q": Q, "K": K, "V": V, "P": P, "O": O, "factor": factor,
                     "n_heads": n_heads, "params": params}
            return y, cache
        ''', "scores divided by sqrt(d) instead of sqrt(d_h)",
        # The forward is wrong on every backward check's input with scale=True (all but
        # the scale=False one): the backward cannot be checked there, although the cache
        # records the factor used and the reference backward is consistent with it.
        also=_ATTN_CACHE),
    Bug("sdpa-scale-by-dv", "scaled_dot_product_attention", "missing-scale", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            d = V.shape[-1]                     # the value width, not the key width d_k
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / math.sqrt(d)
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores, axis=-1)
            return weights @ V, weights
        ''', "subtle: scales by sqrt(d_v); only visible when d_k != d_v"),

    # ------------------------------------------------------------------ unstable-softmax
    Bug("mha-own-exp-normalise", "multi_head_attention", "unstable-softmax", '''
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
            heads = [split_heads(X @ W, n_heads) for W in (W_Q, W_K, W_V)]
            q, k, v = heads
            logits = np.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(q.shape[-1])
            if mask is not None:
                allowed = np.asarray(mask, dtype=bool)
                allowed = allowed[:, None] if allowed.ndim == 3 else allowed
                logits = np.where(allowed, logits, -np.inf)
            num = np.exp(logits)                         # normalised by hand, no shift
            den = num.sum(axis=-1, keepdims=True)
            att = np.divide(num, den, out=np.zeros_like(num), where=den != 0)
            return merge_heads(att @ v) @ W_O, att
        ''', "MHA normalises the scores itself with exp(S) / sum exp(S): overflows once "
             "the scores pass ~709", points=10 * 8 / 9),
    Bug("attnfwd-own-exp-normalise", "attention_forward", "unstable-softmax", '''
        def attention_forward(x, params, n_heads, causal=True, scale=True):
            B, T, d = x.shape
            proj = {n: split_heads(x @ params["W_" + n] + params["b_" + n], n_heads)
                    for n in "QKV"}
            Q, K, V = proj["Q"], proj["K"], proj["V"]
            factor = 1.0 / math.sqrt(d // n_heads) if scale else 1.0
            S = factor * (Q @ K.transpose(0, 1, 3, 2))
            w = np.exp(S)                                # no max subtracted
            if causal:
                w = w * causal_mask(T)                   # future weights zeroed before the sum
            P = w / w.sum(axis=-1, keepdims=True)
            O = merge_heads(P @ V)
            cache = {"x": x, "Q": Q, "K": K, "V": V, "P": P, "O": O, "factor": factor,
                     "n_heads": n_heads, "params": params}
            return O @ params["W_O"] + params["b_O"], cache
        ''', "attention_forward with an inline exp(S) / sum exp(S): inf / inf on large scores",
        points=7 * 8 / 9),
    Bug("softmax-no-max-subtraction", "softmax", "unstable-softmax", '''
        def softmax(scores, axis=-1):
            e = np.exp(scores)                           # overflows above ~709
            total = np.sum(e, axis=axis, keepdims=True)
            return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
        ''', "no max subtraction; an all -inf slice is handled, so only stability fails"),
    Bug("softmax-clips-at-700", "softmax", "unstable-softmax", '''
        def softmax(scores, axis=-1):
            scores = np.asarray(scores)
            e = np.exp(np.minimum(scores, 700.0))        # "exp(710) overflows, so clip"
            total = e.sum(axis=axis, keepdims=True)
            return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
        ''', "subtle: clips scores at 700 instead of subtracting the max; in float64 only "
             "scores above 700 go wrong (float32 overflows from 88)"),
    Bug("softmax-global-max", "softmax", "unstable-softmax", '''
        def softmax(scores, axis=-1):
            scores = np.asarray(scores)
            m = np.max(scores)                           # forgot axis=..., keepdims=True
            if not np.isfinite(m):
                m = 0.0
            e = np.exp(scores - m)
            total = e.sum(axis=axis, keepdims=True)
            return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
        ''', "subtracts the maximum of the whole array: a row far below it underflows to 0/0"),
    Bug("sdpa-inline-exp", "scaled_dot_product_attention", "unstable-softmax", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / math.sqrt(Q.shape[-1])
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            e = np.exp(scores)                           # own softmax, no max subtracted
            total = e.sum(axis=-1, keepdims=True)
            weights = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
            return weights @ V, weights
        ''', "SDPA with an inline softmax that does not subtract the row maximum"),

    # ------------------------------------------------------------------ softmax-wrong-axis
    Bug("softmax-sum-without-keepdims", "softmax", "softmax-wrong-axis", '''
        def softmax(scores, axis=-1):
            z = scores - np.max(scores, axis=axis, keepdims=True)
            z = np.where(np.isnan(z), -np.inf, z)
            ez = np.exp(z)
            return ez / np.sum(ez, axis=axis)            # keepdims forgotten
        ''', "the sum loses the reduced axis and broadcasts along another one: crashes on "
             "most shapes, divides by the wrong slice's sum on square ones",
        not_faults=("crash", "unstable-softmax", "wrong-shape", "other"), points=0.0),
    Bug("softmax-torch-dim1", "softmax", "softmax-wrong-axis", '''
        def softmax(scores, axis=-1):
            # translated from F.softmax(logits, dim=1), (batch, classes) logits
            top = scores.max(1, keepdims=True)
            ex = np.exp(scores - np.where(np.isneginf(top), 0.0, top))
            total = ex.sum(1, keepdims=True)
            return np.divide(ex, total, out=np.zeros_like(ex), where=total > 0)
        ''', "a PyTorch classifier's dim=1 kept: normalises axis 1 whatever is asked "
             "(right only for 2-D scores and the default axis; on 1-D scores the AxisError "
             "it raises is the same mistake)", not_faults=("other", "crash"), points=5.0),
    Bug("softmax-hard-coded-axis-2", "softmax", "softmax-wrong-axis", '''
        def softmax(scores, axis=-1):
            top = np.max(scores, axis=2, keepdims=True)  # (B, T_q, T_k) assumed: axis 2
            e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
            total = np.sum(e, axis=2, keepdims=True)
            return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
        ''', "right on 3-D scores and the default axis only; on 2-D scores the AxisError "
             "it raises is the hard-coded axis", not_faults=("other", "crash"), cause="`axis`"),
    Bug("softmax-ignores-axis", "softmax", "softmax-wrong-axis", '''
        def softmax(scores, axis=-1):
            scores = np.asarray(scores, dtype=float) if not np.issubdtype(
                np.asarray(scores).dtype, np.floating) else np.asarray(scores)
            top = scores.max(axis=-1, keepdims=True)     # `axis` never used
            top = np.where(np.isfinite(top), top, 0.0)
            e = np.exp(scores - top)
            total = e.sum(axis=-1, keepdims=True)
            return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
        ''', "the axis argument is ignored: always normalises the last axis"),
    Bug("softmax-default-axis-rows", "softmax", "softmax-wrong-axis", '''
        def softmax(scores, axis=-2):                    # "rows" taken as axis -2
            top = np.max(scores, axis=axis, keepdims=True)
            top = np.where(np.isfinite(top), top, 0.0)
            e = np.exp(scores - top)
            total = np.sum(e, axis=axis, keepdims=True)
            return np.divide(e, total, out=np.zeros_like(e), where=total > 0)
        ''', "default axis -2: by default normalises over the queries"),
    Bug("sdpa-softmax-over-queries", "scaled_dot_product_attention", "softmax-wrong-axis", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / math.sqrt(Q.shape[-1])
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores, axis=-2)           # trap 6: over the queries
            return weights @ V, weights
        ''', "trap 6: softmax over axis -2 (queries) inside SDPA"),
    Bug("attnfwd-softmax-over-queries", "attention_forward", "softmax-wrong-axis", '''
        def attention_forward(x, params, n_heads, causal=True, scale=True):
            B, T, d = x.shape
            Q = split_heads(x @ params["W_Q"] + params["b_Q"], n_heads)
            K = split_heads(x @ params["W_K"] + params["b_K"], n_heads)
            V = split_heads(x @ params["W_V"] + params["b_V"], n_heads)
            factor = 1.0 / math.sqrt(d // n_heads) if scale else 1.0
            scores = (Q @ np.swapaxes(K, -1, -2)) * factor
            if causal:
                scores = np.where(causal_mask(T), scores, -np.inf)
            P = softmax(scores, axis=2)                  # axis 2 of (B, h, T, T): queries
            O = merge_heads(P @ V)
            y = O @ params["W_O"] + params["b_O"]
            cache = {"x": x, "Q": Q, "K": K, "V": V, "P": P, "O": O, "factor": factor,
                     "n_heads": n_heads, "params": params}
            return y, cache
        ''', "softmax over axis 2 of (B, h, T, T), the queries",
        # The forward is wrong on every backward check's input: the backward cannot be
        # checked at all.
        also=_ATTN_CACHE),

    Bug("sdpa-softmax-axis-1", "scaled_dot_product_attention", "softmax-wrong-axis", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / math.sqrt(Q.shape[-1])
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores, axis=1)            # (B, T_q, T_k) assumed: axis 1
            return weights @ V, weights
        ''', "axis=1 hard-coded: the queries of 3-D scores, the heads or a batch axis of "
             "4-D ones; one mistake, one id on every shape (the padding check included)",
        not_faults=("other", "padding-ignored"), cause="the keys (axis -1)"),
    Bug("attnfwd-softmax-axis-1", "attention_forward", "softmax-wrong-axis", '''
        def attention_forward(x, params, n_heads, causal=True, scale=True):
            B, T, d = x.shape
            Q = split_heads(x @ params["W_Q"] + params["b_Q"], n_heads)
            K = split_heads(x @ params["W_K"] + params["b_K"], n_heads)
            V = split_heads(x @ params["W_V"] + params["b_V"], n_heads)
            factor = 1.0 / math.sqrt(d // n_heads) if scale else 1.0
            scores = (Q @ np.swapaxes(K, -1, -2)) * factor
            if causal:
                scores = np.where(causal_mask(T), scores, -np.inf)
            P = softmax(scores, axis=1)                  # axis 1 of (B, h, T, T): the heads
            O = merge_heads(P @ V)
            y = O @ params["W_O"] + params["b_O"]
            cache = {"x": x, "Q": Q, "K": K, "V": V, "P": P, "O": O, "factor": factor,
                     "n_heads": n_heads, "params": params}
            return y, cache
        ''', "softmax over axis 1 of (B, h, T, T), the heads",
        not_faults=("other",),
        # The forward is wrong on every backward check's input: the backward cannot be
        # checked at all.
        also=_ATTN_CACHE),

    # ------------------------------------------------------------------ mask-after-softmax
    Bug("sdpa-mask-after-softmax", "scaled_dot_product_attention", "mask-after-softmax", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            d_k = Q.shape[-1]
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / math.sqrt(d_k)
            weights = softmax(scores, axis=-1)
            if mask is not None:
                weights = weights * mask                 # trap 2: zeroed after the softmax
            return weights @ V, weights
        ''', "trap 2: weights multiplied by the mask after the softmax",
        not_faults=("nan-on-empty-row",)),
    Bug("attnfwd-mask-after-softmax", "attention_forward", "mask-after-softmax", '''
        def attention_forward(x, params, n_heads, causal=True, scale=True):
            B, T, d = x.shape
            Q = split_heads(x @ params["W_Q"] + params["b_Q"], n_heads)
            K = split_heads(x @ params["W_K"] + params["b_K"], n_heads)
            V = split_heads(x @ params["W_V"] + params["b_V"], n_heads)
            factor = 1.0 / math.sqrt(d // n_heads) if scale else 1.0
            P = softmax((Q @ np.swapaxes(K, -1, -2)) * factor, axis=-1)
            if causal:
                P = np.where(causal_mask(T), P, 0.0)     # zeroing the future afterwards
            O = merge_heads(P @ V)
            y = O @ params["W_O"] + params["b_O"]
            cache = {"x": x, "Q": Q, "K": K, "V": V, "P": P, "O": O, "factor": factor,
                     "n_heads": n_heads, "params": params}
            return y, cache
        ''', "causal mask applied by zeroing P after the softmax",
        # The forward is wrong on every causal backward check's input (all but the
        # causal=False one): the backward cannot be checked there.
        also=_ATTN_CACHE),
    Bug("sdpa-mask-after-renormalised-late", "scaled_dot_product_attention",
        "mask-after-softmax", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            scores = np.einsum("...qd,...kd->...qk", Q, K)
            if scale:
                scores = scores / math.sqrt(Q.shape[-1])
            weights = softmax(scores, axis=-1)
            out = weights @ V
            if mask is not None:
                # zero the masked weights (after computing the output from the unmasked ones)
                weights = np.where(mask, weights, 0.0)
                out = weights @ V
            return out, weights
        ''', "masks with np.where after the softmax, in another style",
        not_faults=("nan-on-empty-row",)),

    # ------------------------------------------------------------------ mask-inverted
    Bug("combine-with-or", "combine_masks", "mask-inverted", '''
        def combine_masks(causal, padding):
            # allowed if the causal mask OR the padding allows it
            return np.logical_or(causal[None, :, :], padding[:, None, :])
        ''', "OR is the rule for True = blocked masks; with True = may attend it lets "
             "padded keys and the future in", not_faults=("other",),
        # wrong on both value checks: its boolean (B, T, T) result and untouched inputs
        # (docs/contract.md section 2, property checks) earn nothing beside no right value
        points=0.0),
    Bug("sdpa-mask-inverted", "scaled_dot_product_attention", "mask-inverted", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / math.sqrt(Q.shape[-1])
            if mask is not None:
                scores = np.where(mask, -np.inf, scores)  # True read as "blocked"
            weights = softmax(scores, axis=-1)
            return weights @ V, weights
        ''', "the PyTorch key_padding_mask convention: True = blocked",
        # The padded keys are the only ones attended: the padding-invariance check has a
        # branch naming exactly this (mask-inverted), which the scalar comparison disables.
        not_faults=("padding-ignored",)),
    Bug("causal-mask-inverted", "causal_mask", "mask-inverted", '''
        def causal_mask(T):
            return np.triu(np.ones((T, T), dtype=bool), k=1)   # True marks the future
        ''', "marks the positions to block (j > i) instead of those allowed"),
    Bug("padding-mask-inverted", "padding_mask", "mask-inverted", '''
        def padding_mask(lengths, T):
            lengths = np.asarray(lengths)
            return np.arange(T)[None, :] >= lengths[:, None]   # True marks the padding
        ''', "True on padded positions instead of real tokens"),

    # ------------------------------------------------------------------ mask-wrong-axis
    Bug("causal-mask-transposed", "causal_mask", "mask-wrong-axis", '''
        def causal_mask(T):
            return np.triu(np.ones((T, T), dtype=bool))  # [i, j] True iff j >= i
        ''', "upper instead of lower triangle: the causal mask transposed"),
    Bug("combine-padding-on-queries", "combine_masks", "mask-wrong-axis", '''
        def combine_masks(causal, padding):
            return causal[None, :, :] & padding[:, :, None]    # padding on axis 1, queries
        ''', "trap 5: padding applied to the queries instead of the keys"),
    Bug("attnfwd-causal-transposed", "attention_forward", "mask-wrong-axis", '''
        def attention_forward(x, params, n_heads, causal=True, scale=True):
            B, T, d = x.shape
            Q = split_heads(x @ params["W_Q"] + params["b_Q"], n_heads)
            K = split_heads(x @ params["W_K"] + params["b_K"], n_heads)
            V = split_heads(x @ params["W_V"] + params["b_V"], n_heads)
            factor = 1.0 / math.sqrt(d // n_heads) if scale else 1.0
            scores = (Q @ np.swapaxes(K, -1, -2)) * factor
            if causal:
                scores = np.where(causal_mask(T).T, scores, -np.inf)   # looks ahead
            P = softmax(scores, axis=-1)
            O = merge_heads(P @ V)
            y = O @ params["W_O"] + params["b_O"]
            cache = {"x": x, "Q": Q, "K": K, "V": V, "P": P, "O": O, "factor": factor,
                     "n_heads": n_heads, "params": params}
            return y, cache
        ''', "causal mask transposed inside attention_forward (attends to the future)",
        # The forward is wrong on every causal backward check's input (all but the
        # causal=False one): the backward cannot be checked there.
        also=_ATTN_CACHE),

    # ------------------------------------------------------------------ padding-ignored
    Bug("padding-mask-off-by-one", "padding_mask", "padding-ignored", '''
        def padding_mask(lengths, T):
            positions = np.arange(T)
            return positions[np.newaxis, :] <= np.asarray(lengths)[:, np.newaxis]
        ''', "t <= lengths[b]: the first padded position counts as a real token",
        cause="t <= lengths[b]",
        # wrong on its one value check: its boolean (B, T) result and untouched lengths
        # (docs/contract.md section 2, property checks) earn nothing beside no right value
        not_faults=("other",), points=0.0),
    Bug("sdpa-ignores-mask", "scaled_dot_product_attention", "padding-ignored", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / math.sqrt(Q.shape[-1])
            weights = softmax(scores, axis=-1)           # mask accepted, never used
            return weights @ V, weights
        ''', "trap 4: the mask argument is never applied"),
    Bug("combine-ignores-padding", "combine_masks", "padding-ignored", '''
        def combine_masks(causal, padding):
            B = padding.shape[0]
            return np.repeat(causal[None, :, :], B, axis=0)    # padding left out
        ''', "returns the causal mask for every sequence, padding left out"),
    Bug("mha-forgets-mask", "multi_head_attention", "padding-ignored", '''
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
            Q = split_heads(X @ W_Q, n_heads)
            K = split_heads(X @ W_K, n_heads)
            V = split_heads(X @ W_V, n_heads)
            out, weights = scaled_dot_product_attention(Q, K, V)   # mask not passed on
            return merge_heads(out) @ W_O, weights
        ''', "the mask is not passed on to the attention"),

    # ------------------------------------------------------------------ nan-on-empty-row
    Bug("mha-minus-inf-textbook-softmax", "multi_head_attention", "nan-on-empty-row", '''
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
            Q, K, V = (split_heads(X @ W, n_heads) for W in (W_Q, W_K, W_V))
            S = Q @ K.swapaxes(-1, -2) / math.sqrt(Q.shape[-1])
            if mask is not None:
                m = np.asarray(mask, dtype=bool)
                S = np.where(m[:, None] if m.ndim == 3 else m, S, -np.inf)
            S = S - S.max(axis=-1, keepdims=True)        # all -inf row: -inf - -inf = nan
            P = np.exp(S)
            P = P / P.sum(axis=-1, keepdims=True)
            return merge_heads(P @ V) @ W_O, P
        ''', "MHA with its own stable softmax but no empty-row rule: a query with every key "
             "masked gets NaN", points=10 * 8 / 9),
    Bug("mha-fill-minus-1e9", "multi_head_attention", "nan-on-empty-row", '''
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
            Q = split_heads(X @ W_Q, n_heads)
            K = split_heads(X @ W_K, n_heads)
            V = split_heads(X @ W_V, n_heads)
            S = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
            if mask is not None:
                mask = np.asarray(mask, dtype=bool)
                if mask.ndim == 3:
                    mask = np.expand_dims(mask, 1)
                S = np.where(mask, S, -1e9)              # "big negative" instead of -inf
            P = softmax(S, axis=-1)
            return merge_heads(P @ V) @ W_O, P
        ''', "-1e9 fill inside MHA: a query with no key gets uniform weights, not zeros",
        points=10 * 8 / 9, cause="uniform weights"),
    Bug("sdpa-additive-mask-1e9", "scaled_dot_product_attention", "nan-on-empty-row", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / math.sqrt(Q.shape[-1])
            if mask is not None:
                scores = scores + np.where(mask, 0.0, -1e9)   # additive mask, as in PyTorch code
            weights = softmax(scores, axis=-1)
            return weights @ V, weights
        ''', "an additive -1e9 mask: a row blocked everywhere is shifted as a whole and keeps "
             "its unmasked weights", cause="the weights the row has without a mask"),
    Bug("combine-reopens-empty-rows", "combine_masks", "nan-on-empty-row", '''
        def combine_masks(causal, padding):
            m = np.logical_and(causal[np.newaxis], padding[:, np.newaxis])
            empty = ~m.any(axis=-1, keepdims=True)       # "a row with no key gives NaN"
            return m | empty                             # so let it attend everywhere
        ''', "combine_masks opens every key to a query that has none: the contract keeps "
             "the row all False (attention gives it zeros)", points=3.0),
    Bug("softmax-nan-on-empty-row", "softmax", "nan-on-empty-row", '''
        def softmax(scores, axis=-1):
            shifted = scores - np.max(scores, axis=axis, keepdims=True)  # -inf - -inf = nan
            e = np.exp(shifted)
            return e / np.sum(e, axis=axis, keepdims=True)
        ''', "the textbook stable softmax: an all -inf slice gives NaN"),
    Bug("sdpa-fill-minus-1e9", "scaled_dot_product_attention", "nan-on-empty-row", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / math.sqrt(Q.shape[-1])
            if mask is not None:
                scores = np.where(mask, scores, -1e9)    # large negative instead of -inf
            weights = softmax(scores, axis=-1)
            return weights @ V, weights
        ''', "-1e9 fill: a fully masked row gets uniform weights instead of zeros"),

    # ------------------------------------------------------------------ head-order
    Bug("split-reshape-straight", "split_heads", "head-order", '''
        def split_heads(M, n_heads):
            B, T, d = M.shape
            if d % n_heads:
                raise ValueError("d must be divisible by n_heads")
            return M.reshape(B, n_heads, T, d // n_heads)   # trap 3: no transpose
        ''', "trap 3: reshape straight to (B, h, T, d_h)"),
    Bug("merge-reshape-before-transpose", "merge_heads", "head-order", '''
        def merge_heads(M):
            B, h, T, d_h = M.shape
            return M.reshape(B, T, h * d_h)              # trap 3: heads never moved back
        ''', "trap 3: reshape without moving the head axis back"),
    Bug("split-strided-heads", "split_heads", "head-order", '''
        def split_heads(M, n_heads):
            B, T, d = M.shape
            if d % n_heads:
                raise ValueError("d must be divisible by n_heads")
            # (B, T, d_h, h): head k gets columns k, k + h, k + 2h, ... instead of a block
            return M.reshape(B, T, d // n_heads, n_heads).transpose(0, 3, 1, 2)
        ''', "subtle: heads take strided columns; only visible for h > 1 and d_h > 1"),
    Bug("merge-batch-head-reshape", "merge_heads", "head-order", '''
        def merge_heads(M):
            B, h, T, d_h = M.shape
            heads = M.reshape(h, B, T, d_h)              # "one (B, T, d_h) block per head"
            return np.concatenate(list(heads), axis=-1)
        ''', "subtle: swaps the batch and head axes by reshape; only wrong when h > 1 "
             "and B > 1"),
    Bug("split-stack-reshape", "split_heads", "head-order", '''
        def split_heads(M, n_heads):
            B, T, d = M.shape
            if d % n_heads:
                raise ValueError("d must be divisible by n_heads")
            parts = np.stack(np.split(M, n_heads, axis=-1))   # (h, B, T, d_h)
            return parts.reshape(B, n_heads, T, d // n_heads)  # reshape, not transpose
        ''', "subtle: (h, B, ...) reshaped to (B, h, ...); only wrong when h > 1 and B > 1"),
    # ------------------------------------------------------------------ head-count-unchecked
    Bug("split-no-head-count-test", "split_heads", "head-count-unchecked", '''
        def split_heads(M, n_heads):
            B, T, d = M.shape
            d_h = d // n_heads
            return M.reshape(B, T, -1, d_h).transpose(0, 2, 1, 3)   # never tests d % n_heads
        ''', "(2, 4, 10) with 4 heads reshapes silently to (2, 4, 5, 2): the contract asks "
        "for ValueError when n_heads does not divide d",
        cause="no test of d % n_heads"),
    Bug("mha-asserts-head-count", "multi_head_attention", "head-count-unchecked", '''
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
            B, T, d = X.shape
            assert d % n_heads == 0, "n_heads must divide d"   # AssertionError, not ValueError
            d_h = d // n_heads
            Q, K, V = ((X @ W).reshape(B, T, -1, d_h).transpose(0, 2, 1, 3)
                       for W in (W_Q, W_K, W_V))
            if mask is not None and np.ndim(mask) == 3:
                mask = np.asarray(mask)[:, None]
            out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
            return merge_heads(out) @ W_O, weights
        ''', "an assert is not the contract's ValueError (and python -O strips it)",
        cause="raised AssertionError"),
    Bug("attnfwd-no-head-count-test", "attention_forward", "head-count-unchecked", '''
        def attention_forward(x, params, n_heads, causal=True, scale=True):
            B, T, d = x.shape
            d_h = d // n_heads                              # never tests d % n_heads
            Q, K, V = ((x @ params["W_" + n] + params["b_" + n]).reshape(B, T, -1, d_h)
                       .transpose(0, 2, 1, 3) for n in "QKV")
            factor = 1.0 / math.sqrt(d_h) if scale else 1.0
            scores = (Q @ np.swapaxes(K, -1, -2)) * factor
            if causal:
                scores = np.where(causal_mask(T), scores, -np.inf)
            P = softmax(scores, axis=-1)
            O = merge_heads(P @ V)
            y = O @ params["W_O"] + params["b_O"]
            cache = {"x": x, "Q": Q, "K": K, "V": V, "P": P, "O": O, "factor": factor,
                     "n_heads": n_heads, "params": params}
            return y, cache
        ''', "with d = 10 and 4 heads the reshape makes 5 heads of width 2 and returns",
        cause="no test of d % n_heads"),
    Bug("mha-inline-split-reshape", "multi_head_attention", "head-order", '''
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
            B, T, d = X.shape
            d_h = d // n_heads
            Q = (X @ W_Q).reshape(B, n_heads, T, d_h)    # own split, no transpose
            K = (X @ W_K).reshape(B, n_heads, T, d_h)
            V = (X @ W_V).reshape(B, n_heads, T, d_h)
            if mask is not None and np.ndim(mask) == 3:
                mask = np.asarray(mask)[:, None]
            out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
            return merge_heads(out) @ W_O, weights
        ''', "MHA splits the heads itself by a plain reshape"),
    Bug("attnfwd-inline-merge-reshape", "attention_forward", "head-order", '''
        def attention_forward(x, params, n_heads, causal=True, scale=True):
            B, T, d = x.shape
            Q = split_heads(x @ params["W_Q"] + params["b_Q"], n_heads)
            K = split_heads(x @ params["W_K"] + params["b_K"], n_heads)
            V = split_heads(x @ params["W_V"] + params["b_V"], n_heads)
            factor = 1.0 / math.sqrt(d // n_heads) if scale else 1.0
            scores = (Q @ np.swapaxes(K, -1, -2)) * factor
            if causal:
                scores = np.where(causal_mask(T), scores, -np.inf)
            P = softmax(scores, axis=-1)
            O = (P @ V).reshape(B, T, d)                 # own merge, no transpose
            y = O @ params["W_O"] + params["b_O"]
            cache = {"x": x, "Q": Q, "K": K, "V": V, "P": P, "O": O, "factor": factor,
                     "n_heads": n_heads, "params": params}
            return y, cache
        ''', "attention_forward merges the heads itself by a plain reshape",
        # The forward is wrong on every backward check's input: the backward cannot be
        # checked at all.
        also=_ATTN_CACHE),

    # ------------------------------------------------------------------ input-mutated
    Bug("softmax-inplace-subtract", "softmax", "input-mutated", '''
        def softmax(scores, axis=-1):
            top = scores.max(axis=axis, keepdims=True)
            top[~np.isfinite(top)] = 0.0
            scores -= top                                # writes into the caller's array
            np.exp(scores, out=scores)
            total = scores.sum(axis=axis, keepdims=True)
            return np.divide(scores, total, out=np.zeros_like(scores), where=total > 0)
        ''', "scores -= max: modifies the argument in place"),
    Bug("sdpa-inplace-scale-q", "scaled_dot_product_attention", "input-mutated", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            if scale:
                Q /= math.sqrt(Q.shape[-1])              # scales the caller's Q
            scores = Q @ np.swapaxes(K, -1, -2)
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores, axis=-1)
            return weights @ V, weights
        ''', "Q /= sqrt(d_k) in place"),
    Bug("lnfwd-inplace-centre", "layer_norm_forward", "input-mutated", '''
        def layer_norm_forward(x, gamma, beta, eps=1e-5):
            x -= x.mean(axis=-1, keepdims=True)          # centres the caller's x
            var = (x * x).mean(axis=-1, keepdims=True)
            inv = 1.0 / np.sqrt(var + eps)
            xhat = x * inv
            return xhat * gamma + beta, {"xhat": xhat, "inv": inv, "gamma": gamma}
        ''', "x -= mean in place"),
    Bug("lnbwd-inplace-dy", "layer_norm_backward", "input-mutated", '''
        def layer_norm_backward(dy, cache):
            xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
            leading = tuple(range(dy.ndim - 1))
            dbeta = dy.sum(axis=leading)
            dgamma = (dy * xhat).sum(axis=leading)
            dy *= gamma                                  # dxhat, computed in dy's memory
            dx = inv * (dy - dy.mean(axis=-1, keepdims=True)
                        - xhat * (dy * xhat).mean(axis=-1, keepdims=True))
            return dx, dgamma, dbeta
        ''', "reuses dy's memory for dxhat"),
    Bug("lnbwd-inplace-cache", "layer_norm_backward", "input-mutated", '''
        def layer_norm_backward(dy, cache):
            xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
            dxhat = dy * gamma
            leading = tuple(range(dy.ndim - 1))
            dgamma = (dy * xhat).sum(axis=leading)
            dbeta = dy.sum(axis=leading)
            xhat *= (dxhat * xhat).mean(axis=-1, keepdims=True)   # overwrites cache["xhat"]
            dx = inv * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat)
            return dx, dgamma, dbeta
        ''', "overwrites the cached xhat while computing dx"),
    Bug("attnbwd-inplace-cache-p", "attention_backward", "input-mutated", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            P *= (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor   # dS in P's memory
            dS = P
            dQ = dS @ K
            dK = np.swapaxes(dS, -1, -2) @ Q
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dQ), ("K", dK), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "computes dS in the cached P's memory"),

    # ------------------------------------------------------------------ dtype-changed
    Bug("sdpa-np-sqrt-upcasts", "scaled_dot_product_attention", "dtype-changed", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            d_k = Q.shape[-1]
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / np.sqrt(d_k)           # np.float64 scalar: float32 -> float64
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores, axis=-1)
            return weights @ V, weights
        ''', "subtle, float32 only: under NumPy 2 (NEP 50) a float32 array divided by "
             "np.sqrt(int), a float64 scalar, is float64"),
    Bug("causal-mask-float", "causal_mask", "dtype-changed", '''
        def causal_mask(T):
            return np.tril(np.ones((T, T)))              # float 0/1, not bool
        ''', "a float 0/1 matrix instead of a boolean mask"),
    Bug("padding-mask-int", "padding_mask", "dtype-changed", '''
        def padding_mask(lengths, T):
            lengths = np.asarray(lengths)
            return (np.arange(T)[None, :] < lengths[:, None]).astype(int)
        ''', "returns 0/1 integers"),
    Bug("positions-float32", "sinusoidal_positions", "dtype-changed", '''
        def sinusoidal_positions(T, d):
            PE = np.zeros((T, d), dtype=np.float32)      # "float32 is enough"
            pos = np.arange(T)[:, None]
            angles = pos / np.power(10000.0, np.arange(0, d, 2) / d)
            PE[:, 0::2] = np.sin(angles)
            PE[:, 1::2] = np.cos(angles[:, : d // 2])
            return PE
        ''', "float32 table; the contract says float64"),
    Bug("attnbwd-zeros-float64", "attention_backward", "dtype-changed", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
            dQ = dS @ K
            dK = np.swapaxes(dS, -1, -2) @ Q
            dx = np.zeros(x.shape)                       # float64 accumulator
            for name, dH in (("Q", dQ), ("K", dK), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
                dx += dZ @ params["W_" + name].T
            return dx, grads
        ''', "subtle, float32 only: dx accumulated in a float64 np.zeros"),

    # ------------------------------------------------------------------ wrong-shape
    Bug("sdpa-returns-only-output", "scaled_dot_product_attention", "wrong-shape", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / math.sqrt(Q.shape[-1])
            if mask is not None:
                scores = np.where(mask, scores, -np.inf)
            return softmax(scores, axis=-1) @ V         # forgot to return the weights
        ''', "returns out only, not (out, weights)"),
    Bug("merge-forgets-reshape", "merge_heads", "wrong-shape", '''
        def merge_heads(M):
            return np.swapaxes(M, 1, 2)                  # (B, T, h, d_h): never reshaped
        ''', "stops at (B, T, h, d_h)"),
    Bug("padding-mask-transposed-shape", "padding_mask", "wrong-shape", '''
        def padding_mask(lengths, T):
            lengths = np.asarray(lengths)
            return np.arange(T)[:, None] < lengths[None, :]    # (T, B)
        ''', "returns (T, B) instead of (B, T)"),
    Bug("mha-averages-heads", "multi_head_attention", "wrong-shape", '''
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
            Q = split_heads(X @ W_Q, n_heads)
            K = split_heads(X @ W_K, n_heads)
            V = split_heads(X @ W_V, n_heads)
            if mask is not None and np.ndim(mask) == 3:
                mask = np.asarray(mask)[:, None]
            out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
            return merge_heads(out) @ W_O, weights.mean(axis=1)   # like torch's default
        ''', "weights averaged over heads, (B, T, T) instead of (B, h, T, T)"),
    Bug("attnbwd-no-bias-grads", "attention_backward", "wrong-shape", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)      # bias gradients left out
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "grads lacks the bias keys"),
    Bug("lnbwd-dgamma-keepdims", "layer_norm_backward", "wrong-shape", '''
        def layer_norm_backward(dy, cache):
            xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
            dxhat = dy * gamma
            dx = inv * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                        - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
            leading = tuple(range(dy.ndim - 1))
            dgamma = (dy * xhat).sum(axis=leading, keepdims=True)   # (1, 1, d), not (d,)
            dbeta = dy.sum(axis=leading, keepdims=True)
            return dx, dgamma, dbeta
        ''', "dgamma, dbeta summed over the right axes but kept as (1, ..., 1, d)"),

    # ------------------------------------------------------------------ layer-norm-variance
    Bug("lnfwd-unbiased-variance", "layer_norm_forward", "layer-norm-variance", '''
        def layer_norm_forward(x, gamma, beta, eps=1e-5):
            mean = x.mean(axis=-1, keepdims=True)
            var = x.var(axis=-1, keepdims=True, ddof=1)  # unbiased
            inv = 1.0 / np.sqrt(var + eps)
            xhat = (x - mean) * inv
            return xhat * gamma + beta, {"xhat": xhat, "inv": inv, "gamma": gamma}
        ''', "unbiased variance (ddof=1)",
        # The forward is wrong on every backward check's input: the backward cannot be
        # checked at all.
        also=_LN_CACHE),
    Bug("lnfwd-eps-outside-sqrt", "layer_norm_forward", "layer-norm-variance", '''
        def layer_norm_forward(x, gamma, beta, eps=1e-5):
            mean = np.mean(x, axis=-1, keepdims=True)
            std = np.sqrt(np.mean((x - mean) ** 2, axis=-1, keepdims=True))
            inv = 1.0 / (std + eps)                      # eps outside the square root
            xhat = (x - mean) * inv
            return xhat * gamma + beta, {"xhat": xhat, "inv": inv, "gamma": gamma}
        ''', "sqrt(var) + eps instead of sqrt(var + eps)",
        # y is off by more than the forward checks' tolerance on every backward check's
        # input: the backward cannot be checked at all.
        also=_LN_CACHE),
    Bug("lnfwd-variance-not-centred", "layer_norm_forward", "layer-norm-variance", '''
        def layer_norm_forward(x, gamma, beta, eps=1e-5):
            mean = x.mean(axis=-1, keepdims=True)
            var = (x ** 2).mean(axis=-1, keepdims=True)  # E[x^2], not E[(x - mean)^2]
            inv = 1.0 / np.sqrt(var + eps)
            xhat = (x - mean) * inv
            return xhat * gamma + beta, {"xhat": xhat, "inv": inv, "gamma": gamma}
        ''', "variance not centred",
        # As for the unbiased variance: wrong on every input, the backward is not checked.
        also=_LN_CACHE),
    Bug("lnfwd-one-pass-variance-float32", "layer_norm_forward", "layer-norm-variance", '''
        def layer_norm_forward(x, gamma, beta, eps=1e-5):
            mean = x.mean(axis=-1, keepdims=True)
            var = (x * x).mean(axis=-1, keepdims=True) - mean * mean   # one pass
            inv = 1.0 / np.sqrt(np.maximum(var, 0) + eps)
            xhat = (x - mean) * inv
            return xhat * gamma + beta, {"xhat": xhat, "inv": inv, "gamma": gamma}
        ''', "variance as mean(x^2) - mean(x)^2: exact in float64, but in float32 the "
             "cancellation loses a token whose variance is small against its mean^2",
        # Its backward is checked in float32 on a token of small variance, where this
        # forward is wrong.
        also=_LN_CACHE),

    # ------------------------------------------------------------------ layer-norm-backward-terms
    Bug("lnbwd-missing-mean-term", "layer_norm_backward", "layer-norm-backward-terms", '''
        def layer_norm_backward(dy, cache):
            xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
            dxhat = dy * gamma
            dx = inv * (dxhat - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
            leading = tuple(range(dy.ndim - 1))
            return dx, (dy * xhat).sum(axis=leading), dy.sum(axis=leading)
        ''', "the - mean(dxhat) term dropped"),
    Bug("lnbwd-missing-xhat-term", "layer_norm_backward", "layer-norm-backward-terms", '''
        def layer_norm_backward(dy, cache):
            xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
            dxhat = dy * gamma
            dx = inv * (dxhat - dxhat.mean(axis=-1, keepdims=True))   # variance path dropped
            leading = tuple(range(dy.ndim - 1))
            return dx, (dy * xhat).sum(axis=leading), dy.sum(axis=leading)
        ''', "the - xhat * mean(dxhat * xhat) term dropped"),
    Bug("lnbwd-forgets-gamma", "layer_norm_backward", "layer-norm-backward-terms", '''
        def layer_norm_backward(dy, cache):
            xhat, inv = cache["xhat"], cache["inv"]
            dxhat = dy                                   # gamma forgotten
            n = dy.shape[-1]
            dx = inv / n * (n * dxhat - dxhat.sum(axis=-1, keepdims=True)
                            - xhat * (dxhat * xhat).sum(axis=-1, keepdims=True))
            leading = tuple(range(dy.ndim - 1))
            return dx, (dy * xhat).sum(axis=leading), dy.sum(axis=leading)
        ''', "dxhat = dy instead of dy * gamma"),

    Bug("lnbwd-gamma-out-of-row-sums", "layer_norm_backward", "layer-norm-backward-terms", '''
        def layer_norm_backward(dy, cache):
            xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
            n = dy.shape[-1]
            dx = gamma * inv / n * (n * dy - dy.sum(axis=-1, keepdims=True)   # gamma pulled out
                                    - xhat * (dy * xhat).sum(axis=-1, keepdims=True))
            leading = tuple(range(dy.ndim - 1))
            return dx, (dy * xhat).sum(axis=leading), dy.sum(axis=leading)
        ''', "gamma multiplied outside the row sums, as if it were the same for every feature",
        cause="gamma was taken out of the row means"),

    # ------------------------------------------------------------------ param-grad-axes
    Bug("lnbwd-params-averaged", "layer_norm_backward", "param-grad-axes", '''
        def layer_norm_backward(dy, cache):
            xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
            g = dy * gamma
            dx = inv * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
            tokens = tuple(range(dy.ndim - 1))
            return dx, (dy * xhat).mean(axis=tokens), dy.mean(axis=tokens)   # mean, not sum
        ''', "dgamma and dbeta averaged over the tokens instead of summed",
        not_faults=("weight-grad-wrong",), points=6.0),
    Bug("attnbwd-bias-grads-averaged", "attention_backward", "param-grad-axes", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            flat_x, flat_dy = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ flat_dy, "b_O": flat_dy.mean(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
            parts = {"Q": dS @ K, "K": np.swapaxes(dS, -1, -2) @ Q,
                     "V": np.swapaxes(P, -1, -2) @ dO}
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in parts.items():
                dZ = merge_heads(dH).reshape(-1, d)
                grads["W_" + name] = flat_x.T @ dZ
                grads["b_" + name] = dZ.mean(axis=0)     # averaged over B * T tokens
                dx = dx + (dZ @ params["W_" + name].T).reshape(x.shape)
            return dx, grads
        ''', "every bias gradient averaged over the tokens instead of summed",
        not_faults=("weight-grad-wrong",), points=10 * 3 / 7),
    Bug("lnbwd-dgamma-axis0-for-4d", "layer_norm_backward", "param-grad-axes", '''
        def layer_norm_backward(dy, cache):
            xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
            dxhat = dy * gamma
            dx = inv * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                        - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
            axes = (0, 1) if dy.ndim == 3 else 0         # (B, T, d) or (T, d) handled
            return dx, (dy * xhat).sum(axis=axes), dy.sum(axis=axes)
        ''', "subtle: right for 1-, 2- and 3-D input, sums axis 0 only for 4-D"),
    Bug("lnbwd-dgamma-axis0", "layer_norm_backward", "param-grad-axes", '''
        def layer_norm_backward(dy, cache):
            xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
            dxhat = dy * gamma
            dx = inv * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                        - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
            dgamma = np.sum(dy * xhat, axis=0)           # right for (T, d) only
            dbeta = dy.reshape(-1, dy.shape[-1]).sum(axis=0)
            return dx, dgamma, dbeta
        ''', "dgamma summed over axis 0 only: right for 2-D input, wrong for 3-D (and 1-D)"),
    Bug("lnbwd-dbeta-axis0", "layer_norm_backward", "param-grad-axes", '''
        def layer_norm_backward(dy, cache):
            xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
            dxhat = dy * gamma
            dx = inv * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                        - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
            leading = tuple(range(dy.ndim - 1))
            return dx, (dy * xhat).sum(axis=leading), dy.sum(axis=0)   # dbeta: batch only
        ''', "dbeta summed over axis 0 only (dgamma right)"),
    Bug("attnbwd-dbv-axis0", "attention_backward", "param-grad-axes", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = (dZ.sum(axis=0) if name == "V"      # batch axis only
                                      else dZ.reshape(-1, d).sum(axis=0))
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "subtle, one gradient only: db_V summed over the batch axis only"),
    Bug("attnbwd-dbo-time-axis", "attention_backward", "param-grad-axes", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy.sum(axis=1)}   # (B, d)
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "db_O summed over the time axis only"),

    # ------------------------------------------------------------------ softmax-backward
    Bug("attnbwd-no-rowsum", "attention_backward", "softmax-backward", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * dP * factor                         # row-sum term missing
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "dS = P * dP: the row-sum term dropped"),
    Bug("attnbwd-softmax-grad-over-batch", "attention_backward", "softmax-backward", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            B, T, d = x.shape
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor / B   # a batch mean
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "the softmax's gradient divided by the batch size: with B = sqrt(d_h) it would "
             "look like the score scale applied twice", not_faults=("backward-missing-scale",),
        cause="through the softmax"),
    Bug("attnbwd-no-rowsum-einsum", "attention_backward", "softmax-backward", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            p, h, c = cache["params"], cache["n_heads"], cache["factor"]
            grads = {"W_O": np.einsum("btd,bte->de", O, dy), "b_O": dy.sum(axis=(0, 1))}
            dO = split_heads(np.einsum("bte,de->btd", dy, p["W_O"]), h)
            dP = np.einsum("bhqe,bhke->bhqk", dO, V)
            dV = np.einsum("bhqk,bhqe->bhke", P, dO)
            dS = c * np.einsum("bhqk,bhqk->bhqk", P, dP)           # diagonal term only
            dQ = np.einsum("bhqk,bhke->bhqe", dS, K)
            dK = np.einsum("bhqk,bhqe->bhke", dS, Q)
            dx = 0
            for name, dH in (("Q", dQ), ("K", dK), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = np.einsum("btd,bte->de", x, dZ)
                grads["b_" + name] = dZ.sum(axis=(0, 1))
                dx = dx + np.einsum("bte,de->btd", dZ, p["W_" + name])
            return dx, grads
        ''', "einsum style, same missing row-sum term"),
    Bug("attnbwd-diagonal-jacobian", "attention_backward", "softmax-backward", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (1 - P) * dP * factor               # "d softmax / dx = p (1 - p)"
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "only the diagonal of the softmax Jacobian, p (1 - p): the off-diagonal "
             "-p_i p_j terms, i.e. the row sum, are missing"),

    # ------------------------------------------------------------------ backward-missing-scale
    Bug("attnbwd-no-scale", "attention_backward", "backward-missing-scale", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h = cache["params"], cache["n_heads"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True))   # factor forgotten
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "the 1/sqrt(d_h) factor missing from dS"),
    Bug("attnbwd-always-scales", "attention_backward", "backward-missing-scale", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h = cache["params"], cache["n_heads"]
            d = x.shape[-1]
            factor = 1.0 / math.sqrt(d // h)             # recomputed; ignores scale=False
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "subtle: scales the backward even when the forward ran with scale=False"),
    Bug("attnbwd-double-scale", "attention_backward", "backward-missing-scale", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
            dQ = (dS @ K) * factor                       # scaled a second time
            dK = (np.swapaxes(dS, -1, -2) @ Q) * factor
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dQ), ("K", dK), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "the scale applied twice (to dS and again to dQ, dK)"),

    # ------------------------------------------------------------------ weight-grad-wrong
    Bug("attnbwd-dwo-transposed", "attention_backward", "weight-grad-wrong", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": dy2.T @ O.reshape(-1, d), "b_O": dy2.sum(axis=0)}   # transposed
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "subtle, one gradient only: dW_O = dy^T O, the transpose"),
    Bug("attnbwd-dwq-dwk-swapped", "attention_backward", "weight-grad-wrong", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
            dQ, dK = dS @ K, np.swapaxes(dS, -1, -2) @ Q
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dQ), ("K", dK), ("V", dV)):
                dZ = merge_heads(dH)
                dx = dx + dZ @ params["W_" + name].T
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
            grads["W_Q"] = x2.T @ merge_heads(dK).reshape(-1, d)   # Q and K mixed up
            grads["W_K"] = x2.T @ merge_heads(dQ).reshape(-1, d)
            grads["W_V"] = x2.T @ merge_heads(dV).reshape(-1, d)
            return dx, grads
        ''', "dW_Q and dW_K swapped (dx and the biases right)"),
    Bug("attnbwd-dwo-uses-values", "attention_backward", "weight-grad-wrong", '''
        def attention_backward(dy, cache):
            x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
            params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
            d = x.shape[-1]
            x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
            # W_O multiplies the attention output O, not the values V
            grads = {"W_O": merge_heads(V).reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
            dO = split_heads(dy @ params["W_O"].T, h)
            dP = dO @ np.swapaxes(V, -1, -2)
            dV = np.swapaxes(P, -1, -2) @ dO
            dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
            dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
            for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
                dZ = merge_heads(dH)
                grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
                grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
                dx = dx + dZ @ params["W_" + name].T
            return dx, grads
        ''', "dW_O computed from the wrong activation (V instead of O)"),
    Bug("lnbwd-dgamma-dbeta-swapped", "layer_norm_backward", "weight-grad-wrong", '''
        def layer_norm_backward(dy, cache):
            xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
            dxhat = dy * gamma
            dx = inv * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                        - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
            leading = tuple(range(dy.ndim - 1))
            dbeta = (dy * xhat).sum(axis=leading)
            dgamma = dy.sum(axis=leading)
            return dx, dgamma, dbeta
        ''', "dgamma and dbeta swapped"),

    # ------------------------------------------------------------------ param-count
    Bug("params-no-layer-norms", "block_param_count", "param-count", '''
        def block_param_count(d, d_ff=None):
            d_ff = 4 * d if d_ff is None else d_ff
            return 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d)   # LNs forgotten
        ''', "the two layer norms left out"),
    Bug("params-no-biases", "block_param_count", "param-count", '''
        def block_param_count(d, d_ff=None):
            if d_ff is None:
                d_ff = 4 * d
            return 4 * d * d + 2 * d * d_ff + 4 * d     # weights and layer norms, no biases
        ''', "biases left out"),
    Bug("params-ignores-dff", "block_param_count", "param-count", '''
        def block_param_count(d, d_ff=None):
            return 12 * d * d + 13 * d                   # the closed form for d_ff = 4d only
        ''', "subtle: the closed form 12d^2 + 13d whatever d_ff is"),
    Bug("params-one-layer-norm", "block_param_count", "param-count", '''
        def block_param_count(d, d_ff=None):
            d_ff = d_ff or 4 * d
            attention = 4 * d * d + 4 * d
            ffn = 2 * d * d_ff + d_ff + d
            layer_norm = 2 * d                           # one LN instead of two
            return attention + ffn + layer_norm
        ''', "one layer norm counted instead of two"),

    # ------------------------------------------------------------------ kv-cache-formula
    Bug("kv-no-factor-2", "kv_cache_bytes", "kv-cache-formula", '''
        def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
            return n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_element
        ''', "keys only: the factor 2 for the values missing"),
    Bug("kv-no-bytes", "kv_cache_bytes", "kv-cache-formula", '''
        def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
            elements = 2 * n_layers * n_kv_heads * d_head * seq_len * batch
            return elements                              # counts elements, not bytes
        ''', "returns the number of elements"),
    Bug("kv-heads-missing", "kv_cache_bytes", "kv-cache-formula", '''
        def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
            return 2 * n_layers * d_head * seq_len * batch * bytes_per_element
        ''', "the number of KV heads left out"),

    # ------------------------------------------------------------------ positions-wrong
    Bug("positions-sin-cos-swapped", "sinusoidal_positions", "positions-wrong", '''
        def sinusoidal_positions(T, d):
            p = np.arange(T)[:, None]
            angles = p / 10000.0 ** (np.arange(0, d, 2) / d)
            PE = np.empty((T, d))
            PE[:, 0::2] = np.cos(angles)                 # cos on the even columns
            PE[:, 1::2] = np.sin(angles[:, : d // 2])
            return PE
        ''', "cos on even columns, sin on odd ones"),
    Bug("positions-frequency-i-over-d", "sinusoidal_positions", "positions-wrong", '''
        def sinusoidal_positions(T, d):
            p = np.arange(T, dtype=float)[:, None]
            angles = p / np.power(10000.0, np.arange(d) / d)   # column index, not 2i
            PE = np.where(np.arange(d) % 2 == 0, np.sin(angles), np.cos(angles))
            return PE
        ''', "frequency 10000^(j/d) with j the column, not 2i for the pair"),
    Bug("positions-halves-not-interleaved", "sinusoidal_positions", "positions-wrong", '''
        def sinusoidal_positions(T, d):
            p = np.arange(T, dtype=np.float64)[:, None]
            angles = p / 10000.0 ** (np.arange(0, d, 2) / d)
            return np.concatenate([np.sin(angles), np.cos(angles[:, : d // 2])], axis=1)
        ''', "sines then cosines side by side instead of interleaved"),
    Bug("positions-odd-d-last-column-zero", "sinusoidal_positions", "positions-wrong", '''
        def sinusoidal_positions(T, d):
            PE = np.zeros((T, d))
            for pos in range(T):
                for i in range(d // 2):                  # the odd d's last sine never set
                    angle = pos / 10000 ** (2 * i / d)
                    PE[pos, 2 * i] = math.sin(angle)
                    PE[pos, 2 * i + 1] = math.cos(angle)
            return PE
        ''', "subtle: loops over pairs; for odd d the last column stays 0"),

    # ------------------------------------------------------------------ not-implemented
    Bug("softmax-renamed", "softmax", "not-implemented", '''
        def soft_max(scores, axis=-1):
            shifted = scores - np.max(scores, axis=axis, keepdims=True)
            e = np.exp(np.nan_to_num(shifted, nan=-np.inf))
            s = e.sum(axis=axis, keepdims=True)
            return np.divide(e, s, out=np.zeros_like(e), where=s > 0)

        del softmax                                      # the graded name is gone
        ''', "right code under another name: softmax is missing", points=0.0),
    Bug("softmax-stub", "softmax", "not-implemented", '''
        def softmax(scores, axis=-1):
            """Numerically stable softmax along one axis."""
            # YOUR CODE HERE
            raise NotImplementedError()
        ''', "the stub left as released"),
    Bug("attnbwd-stub", "attention_backward", "not-implemented", '''
        def attention_backward(dy, cache):
            raise NotImplementedError()
        ''', "the stub left as released"),
    Bug("kv-renamed", "kv_cache_bytes", "not-implemented", '''
        def kv_cache_size(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
            return 2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_element

        del kv_cache_bytes                               # renamed the stub
        ''', "right formula under another name: the graded name is missing"),

    # ------------------------------------------------------------------ timeout
    Bug("softmax-infinite-loop", "softmax", "timeout", '''
        def softmax(scores, axis=-1):
            while True:
                pass
        ''', "never returns"),
    Bug("merge-loop-no-increment", "merge_heads", "timeout", '''
        def merge_heads(M):
            B, h, T, d_h = M.shape
            out = np.empty((B, T, h * d_h), dtype=M.dtype)
            k = 0
            while k < h:
                out[:, :, k * d_h:(k + 1) * d_h] = M[:, k]
                # forgot k += 1
            return out
        ''', "a while loop whose counter never moves"),

    # ------------------------------------------------------------------ crash
    Bug("mha-batch-mask-without-head-axis", "multi_head_attention", "crash", '''
        def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
            Q = split_heads(X @ W_Q, n_heads)
            K = split_heads(X @ W_K, n_heads)
            V = split_heads(X @ W_V, n_heads)
            # a (B, T, T) mask is passed on as is: it does not broadcast against (B, h, T, T)
            out, weights = scaled_dot_product_attention(Q, K, V, mask=mask)
            return merge_heads(out) @ W_O, weights
        ''', "the head axis is not inserted into a (B, T, T) mask; fine for (T, T) masks"),
    Bug("combine-python-and", "combine_masks", "crash", '''
        def combine_masks(causal, padding):
            return causal[None, :, :] and padding[:, None, :]   # `and` on arrays raises
        ''', "Python `and` on arrays: ValueError, truth value ambiguous"),
    Bug("sdpa-mask-sliced-to-tq", "scaled_dot_product_attention", "crash", '''
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            T = Q.shape[-2]
            scores = Q @ np.swapaxes(K, -1, -2)
            if scale:
                scores = scores / math.sqrt(Q.shape[-1])
            if mask is not None:
                mask = np.asarray(mask)[..., :T, :T]     # nanoGPT's bias[:, :, :T, :T]
                scores = np.where(mask, scores, -np.inf)
            weights = softmax(scores, axis=-1)
            return weights @ V, weights
        ''', "subtle: assumes self-attention; only fails when T_q != T_k"),

    # ------------------------------------------------------------------ module-unavailable
    Bug("softmax-from-scipy", "softmax", "module-unavailable", '''
        def softmax(scores, axis=-1):
            from scipy.special import softmax as scipy_softmax   # fine in the student's Jupyter
            return scipy_softmax(scores, axis=axis)
        ''', "SciPy's softmax: right where SciPy is installed, a module the grading "
             "environment does not provide", not_faults=("crash",)),
    Bug("layer-norm-from-torch", "layer_norm_forward", "module-unavailable", '''
        def layer_norm_forward(x, gamma, beta, eps=1e-5):
            import torch
            t = torch.nn.functional.layer_norm(torch.from_numpy(x), x.shape[-1:],
                                               torch.from_numpy(gamma), torch.from_numpy(beta), eps)
            y = t.numpy()
            return y, (x, gamma, beta, eps)
        ''', "PyTorch's layer norm wrapped: a module the grading environment does not "
             "provide", also=_LN_CACHE, not_faults=("crash",)),
]
