"""Correct implementations written differently from the reference.

Each ``Correct`` replaces one or more functions of the reference (``sources``: name ->
source, run in that order in the reference's namespace, see
``tests.catalogue.build_namespace``). Every one must get full marks on every contract
function: the graders check the contract, not the reference's way of meeting it.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Correct:
    """One correct submission written another way.

    Attributes:
        id: str, unique.
        sources: dict name -> source; each source defines the function ``name``.
        note: str, what is different from the reference.
        gap: str or None, why the graders currently refuse it.
    """

    id: str
    sources: dict = field(default_factory=dict)
    note: str = ""
    gap: str = None


# An einsum-based multi-head forward/backward with heads kept on axis 2, (B, T, h, d_h),
# and a cache of its own layout (the reference caches (B, h, T, d_h) arrays).
_EINSUM_FORWARD = '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    B, T, d = x.shape
    if n_heads <= 0 or d % n_heads:
        raise ValueError("n_heads must divide d")
    d_h = d // n_heads

    def project(name):                                   # (B, T, d) -> (B, T, h, d_h)
        z = np.einsum("btd,de->bte", x, params["W_" + name]) + params["b_" + name]
        return z.reshape(B, T, n_heads, d_h)

    Q, K, V = project("Q"), project("K"), project("V")
    c = 1.0 / math.sqrt(d_h) if scale else 1.0
    S = np.einsum("bqhe,bkhe->bhqk", Q, K) * c           # (B, h, T, T)
    if causal:
        S = np.where(np.arange(T)[:, None] >= np.arange(T)[None, :], S, -np.inf)
    S = S - S.max(axis=-1, keepdims=True)                # the diagonal is never masked
    E = np.exp(S)
    P = E / E.sum(axis=-1, keepdims=True)
    O = np.einsum("bhqk,bkhe->bqhe", P, V).reshape(B, T, d)
    y = np.einsum("btd,de->bte", O, params["W_O"]) + params["b_O"]
    return y, {"x": x, "p": params, "Q": Q, "K": K, "V": V, "P": P, "O": O, "c": c,
               "h": n_heads}
'''

_EINSUM_BACKWARD = '''
def attention_backward(dy, cache):
    x, p, Q, K, V, P, O = (cache[k] for k in ("x", "p", "Q", "K", "V", "P", "O"))
    c, h = cache["c"], cache["h"]
    B, T, d = x.shape
    grads = {"W_O": np.einsum("btd,bte->de", O, dy), "b_O": dy.sum(axis=(0, 1))}
    dO = np.einsum("bte,de->btd", dy, p["W_O"]).reshape(B, T, h, d // h)
    dP = np.einsum("bqhe,bkhe->bhqk", dO, V)
    dV = np.einsum("bhqk,bqhe->bkhe", P, dO)
    dS = P * (dP - np.einsum("bhqk,bhqk->bhq", dP, P)[..., None]) * c
    dQ = np.einsum("bhqk,bkhe->bqhe", dS, K)
    dK = np.einsum("bhqk,bqhe->bkhe", dS, Q)
    dx = 0
    for name, dZ in (("Q", dQ), ("K", dK), ("V", dV)):
        dZ = dZ.reshape(B, T, d)
        grads["W_" + name] = np.einsum("btd,bte->de", x, dZ)
        grads["b_" + name] = dZ.sum(axis=(0, 1))
        dx = dx + np.einsum("bte,de->btd", dZ, p["W_" + name])
    return dx, grads
'''


CORRECT = [
    Correct("jacobians-per-row", {
        "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
    d = xhat.shape[-1]
    rows_xhat, rows_inv = xhat.reshape(-1, d), inv.reshape(-1)
    rows_g = (dy * gamma).reshape(-1, d)
    dx = np.empty_like(rows_g)
    for r in range(rows_g.shape[0]):                # the row's Jacobian, written out
        J = rows_inv[r] * (np.eye(d) - 1.0 / d - np.outer(rows_xhat[r], rows_xhat[r]) / d)
        dx[r] = J.T @ rows_g[r]
    leading = tuple(range(dy.ndim - 1))
    return dx.reshape(dy.shape), (dy * xhat).sum(axis=leading), dy.sum(axis=leading)
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
    params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
    B, T, d = x.shape
    grads = {"W_O": O.reshape(-1, d).T @ dy.reshape(-1, d), "b_O": dy.reshape(-1, d).sum(axis=0)}
    dO = split_heads(dy @ params["W_O"].T, h)
    dP = dO @ np.swapaxes(V, -1, -2)
    dV = np.swapaxes(P, -1, -2) @ dO
    dS = np.zeros_like(dP)
    for b in range(B):
        for k in range(h):
            for i in range(T):                      # the softmax Jacobian of row i
                p = P[b, k, i]
                dS[b, k, i] = (np.diag(p) - np.outer(p, p)) @ dP[b, k, i] * factor
    dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
    for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
        dZ = merge_heads(dH).reshape(-1, d)
        grads["W_" + name] = x.reshape(-1, d).T @ dZ
        grads["b_" + name] = dZ.sum(axis=0)
        dx = dx + (dZ @ params["W_" + name].T).reshape(x.shape)
    return dx, grads
'''}, "each row's Jacobian built by hand and applied in Python loops (layer norm per "
         "row; the softmax per batch, head and query): analytic, however many loops"),

    Correct("einsum", {
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    S = np.einsum("...qd,...kd->...qk", Q, K)
    if scale:
        S = S / math.sqrt(Q.shape[-1])
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    P = softmax(S)
    return np.einsum("...qk,...kv->...qv", P, V), P
''',
        "multi_head_attention": '''
def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    B, T, d = X.shape
    if d % n_heads:
        raise ValueError("n_heads must divide d")
    Q, K, V = (np.einsum("btd,de->bte", X, W).reshape(B, T, n_heads, d // n_heads)
               for W in (W_Q, W_K, W_V))                 # (B, T, h, d_h)
    S = np.einsum("bqhe,bkhe->bhqk", Q, K) / math.sqrt(d // n_heads)
    if mask is not None:
        m = np.asarray(mask, dtype=bool)
        S = np.where(m[:, None] if m.ndim == 3 else m, S, -np.inf)
    P = softmax(S)
    out = np.einsum("bhqk,bkhe->bqhe", P, V).reshape(B, T, d)
    return np.einsum("btd,de->bte", out, W_O), P
''',
        "attention_forward": _EINSUM_FORWARD,
        "attention_backward": _EINSUM_BACKWARD,
    }, "einsum everywhere; heads kept as (B, T, h, d_h) inside, own cache layout"),

    Correct("moveaxis-heads", {
        "split_heads": '''
def split_heads(M, n_heads):
    B, T, d = M.shape
    if n_heads < 1 or d % n_heads != 0:
        raise ValueError(f"cannot split d = {d} into {n_heads} heads")
    return np.moveaxis(M.reshape(B, T, n_heads, d // n_heads), 2, 1)
''',
        "merge_heads": '''
def merge_heads(M):
    B, h, T, d_h = M.shape
    return np.moveaxis(M, 1, 2).reshape(B, T, h * d_h)
''',
        "multi_head_attention": '''
def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    heads = [split_heads(np.matmul(X, W), n_heads) for W in (W_Q, W_K, W_V)]
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        mask = np.expand_dims(mask, 1) if mask.ndim == 3 else mask
    out, weights = scaled_dot_product_attention(*heads, mask=mask)
    return np.matmul(merge_heads(out), W_O), weights
''',
    }, "np.moveaxis for split/merge, np.expand_dims for the head axis of the mask"),

    Correct("transpose-copies", {
        "split_heads": '''
def split_heads(M, n_heads):
    B, T, d = M.shape
    d_h, rest = divmod(d, n_heads)
    if rest:
        raise ValueError("d % n_heads != 0")
    return np.ascontiguousarray(np.transpose(np.reshape(M, (B, T, n_heads, d_h)), (0, 2, 1, 3)))
''',
        "merge_heads": '''
def merge_heads(M):
    B, h, T, d_h = M.shape
    return np.ascontiguousarray(M.swapaxes(1, 2)).reshape(B, T, -1)
''',
    }, "np.transpose with explicit axes, contiguous copies, swapaxes"),

    Correct("split-merge-by-concatenation", {
        "split_heads": '''
def split_heads(M, n_heads):
    if M.shape[-1] % n_heads:
        raise ValueError("d is not divisible by n_heads")
    return np.stack(np.split(M, n_heads, axis=-1), axis=1)   # h blocks of columns
''',
        "merge_heads": '''
def merge_heads(M):
    return np.concatenate([M[:, k] for k in range(M.shape[1])], axis=-1)
''',
    }, "heads as column blocks: np.split/np.stack and a concatenation"),

    Correct("logsumexp-softmax", {
        "softmax": '''
def softmax(scores, axis=-1):
    x = np.asarray(scores)
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0, m)                   # an all -inf slice
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
        p = np.exp(x - lse)
    return np.where(np.isneginf(lse), 0, p)              # -inf - (-inf) is NaN: zero it
''',
    }, "np.exp(x - logsumexp(x)), the all -inf slice handled"),

    Correct("log-domain-softmax", {
        "softmax": '''
def softmax(scores, axis=-1):
    x = np.asarray(scores)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(float)
    shifted = x - np.max(x, axis=axis, keepdims=True, initial=-np.inf,
                         where=~np.isneginf(x)) if x.size else x
    shifted = np.where(np.isneginf(x), -np.inf, shifted)
    with np.errstate(divide="ignore"):
        log_p = shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    return np.where(np.isfinite(log_p), np.exp(log_p), 0)
''',
    }, "log-softmax (x - m) - log(sum exp(x - m)) then exp; max over finite entries only"),

    Correct("softmax-moves-axis-to-end", {
        "softmax": '''
def softmax(scores, axis=-1):
    x = np.moveaxis(np.asarray(scores, dtype=np.result_type(scores, np.float16)), axis, -1)
    top = x.max(axis=-1, keepdims=True)
    top[np.isneginf(top)] = 0
    e = np.exp(x - top)
    s = e.sum(axis=-1, keepdims=True)
    out = np.zeros_like(e)
    np.divide(e, s, out=out, where=s != 0)
    return np.moveaxis(out, -1, axis)
''',
    }, "the axis moved to the end and back"),

    Correct("finite-negative-fill", {
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    S = Q @ np.swapaxes(K, -1, -2)
    if scale:
        S = S / math.sqrt(Q.shape[-1])
    if mask is None:
        P = softmax(S)
        return P @ V, P
    mask = np.broadcast_to(np.asarray(mask, dtype=bool), S.shape)
    S = np.where(mask, S, np.finfo(S.dtype).min)         # finite instead of -inf
    P = softmax(S)
    P = np.where(mask.any(axis=-1, keepdims=True), P, 0)  # fully masked rows: zeros
    return P @ V, P
''',
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    B, T, d = x.shape
    Q, K, V = (split_heads(x @ params["W_" + k] + params["b_" + k], n_heads) for k in "QKV")
    factor = 1.0 / math.sqrt(d // n_heads) if scale else 1.0
    S = (Q @ np.swapaxes(K, -1, -2)) * factor
    if causal:
        S = np.where(causal_mask(T), S, -1e30)           # exp(-1e30 - max) is exactly 0
    P = softmax(S)
    O = merge_heads(P @ V)
    y = O @ params["W_O"] + params["b_O"]
    cache = {"x": x, "Q": Q, "K": K, "V": V, "P": P, "O": O, "factor": factor,
             "n_heads": n_heads, "params": params}
    return y, cache
''',
    }, "np.finfo(dtype).min / -1e30 instead of -inf, fully masked rows zeroed explicitly"),

    Correct("mask-by-multiplication", {
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    S = np.matmul(Q, np.swapaxes(K, -1, -2))
    if scale:
        S = S * (1.0 / np.sqrt(Q.shape[-1])).item()
    if mask is None:
        mask = np.ones(S.shape, dtype=bool)
    keep = np.broadcast_to(np.asarray(mask, dtype=bool), S.shape)
    top = np.max(S, axis=-1, keepdims=True, where=keep, initial=-np.inf)
    top = np.where(np.isfinite(top), top, 0)
    # S - top <= 0 where kept; the clip only stops a large masked score overflowing exp
    E = np.exp(np.minimum(S - top, 0)) * keep            # zero the masked entries ...
    Z = E.sum(axis=-1, keepdims=True)
    P = np.divide(E, Z, out=np.zeros_like(E), where=Z > 0)   # ... then renormalise
    return P @ V, P
''',
    }, "masked entries zeroed after exp and the rows renormalised (equal to -inf before "
       "the softmax); empty rows stay zero"),

    Correct("loops-over-batch-and-heads", {
        "multi_head_attention": '''
def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    B, T, d = X.shape
    if d % n_heads:
        raise ValueError("n_heads must divide d")
    d_h = d // n_heads
    Y = np.zeros((B, T, d), dtype=np.result_type(X, W_Q, W_K, W_V, W_O))
    weights = np.zeros((B, n_heads, T, T), dtype=Y.dtype)
    merged = np.zeros((B, T, d), dtype=Y.dtype)
    for b in range(B):
        m = None
        if mask is not None:
            m = np.asarray(mask, dtype=bool)
            m = m[b] if m.ndim == 3 else m
        for k in range(n_heads):
            cols = slice(k * d_h, (k + 1) * d_h)
            q = X[b] @ W_Q[:, cols]
            kk = X[b] @ W_K[:, cols]
            v = X[b] @ W_V[:, cols]
            out, w = scaled_dot_product_attention(q, kk, v, mask=m)
            merged[b, :, cols] = out
            weights[b, k] = w
        Y[b] = merged[b] @ W_O
    return Y, weights
''',
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    B, T, d = x.shape
    if d % n_heads:
        raise ValueError("n_heads must divide d")
    d_h = d // n_heads
    factor = 1.0 / math.sqrt(d_h) if scale else 1.0
    dt = np.result_type(x, *params.values())
    Q, K, V = (np.zeros((B, n_heads, T, d_h), dtype=dt) for _ in range(3))
    P = np.zeros((B, n_heads, T, T), dtype=dt)
    heads_out = np.zeros((B, n_heads, T, d_h), dtype=dt)
    allowed = causal_mask(T) if causal else np.ones((T, T), dtype=bool)
    for b in range(B):
        for k in range(n_heads):
            cols = slice(k * d_h, (k + 1) * d_h)
            Q[b, k] = x[b] @ params["W_Q"][:, cols] + params["b_Q"][cols]
            K[b, k] = x[b] @ params["W_K"][:, cols] + params["b_K"][cols]
            V[b, k] = x[b] @ params["W_V"][:, cols] + params["b_V"][cols]
            s = np.where(allowed, (Q[b, k] @ K[b, k].T) * factor, -np.inf)
            P[b, k] = softmax(s)
            heads_out[b, k] = P[b, k] @ V[b, k]
    O = merge_heads(heads_out)
    y = O @ params["W_O"] + params["b_O"]
    cache = {"x": x, "Q": Q, "K": K, "V": V, "P": P, "O": O, "factor": factor,
             "n_heads": n_heads, "params": params}
    return y, cache
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
    params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
    B, T, d = x.shape
    d_h = d // h
    dt = np.result_type(dy, x)
    grads = {k: np.zeros(v.shape, dtype=dt) for k, v in params.items()}
    dx = np.zeros((B, T, d), dtype=dt)
    for b in range(B):
        grads["W_O"] += O[b].T @ dy[b]
        grads["b_O"] += dy[b].sum(axis=0)
        dO = dy[b] @ params["W_O"].T                     # (T, d)
        for k in range(h):
            cols = slice(k * d_h, (k + 1) * d_h)
            p = P[b, k]
            dP = dO[:, cols] @ V[b, k].T
            dV = p.T @ dO[:, cols]
            dS = p * (dP - (dP * p).sum(axis=1, keepdims=True)) * factor
            for name, dZ in (("Q", dS @ K[b, k]), ("K", dS.T @ Q[b, k]), ("V", dV)):
                grads["W_" + name][:, cols] += x[b].T @ dZ
                grads["b_" + name][cols] += dZ.sum(axis=0)
                dx[b] += dZ @ params["W_" + name][:, cols].T
    return dx, grads
''',
    }, "Python loops over the batch and the heads, per-head column slices"),

    Correct("float32-kept-float32", {
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    dt = np.result_type(Q, K, V)
    S = Q @ np.swapaxes(K, -1, -2)
    if scale:
        S = S * dt.type(1.0 / math.sqrt(Q.shape[-1]))    # constant in the inputs' dtype
    if mask is not None:
        S = np.where(mask, S, dt.type(-np.inf))
    P = softmax(S)
    return (P @ V).astype(dt, copy=False), P.astype(dt, copy=False)
''',
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    dt = np.result_type(x, gamma, beta)
    one, eps_t = dt.type(1), dt.type(eps)
    mu = x.mean(axis=-1, keepdims=True, dtype=dt)
    xc = x - mu
    inv = one / np.sqrt((xc * xc).mean(axis=-1, keepdims=True, dtype=dt) + eps_t)
    xhat = xc * inv
    return gamma * xhat + beta, {"xhat": xhat, "inv": inv, "gamma": gamma}
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
    params, h = cache["params"], cache["n_heads"]
    dt = np.result_type(dy, x)
    factor = dt.type(cache["factor"])
    d = x.shape[-1]
    x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)
    grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0, dtype=dt)}
    dO = split_heads(dy @ params["W_O"].T, h)
    dP = dO @ np.swapaxes(V, -1, -2)
    dV = np.swapaxes(P, -1, -2) @ dO
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
    dx = np.zeros_like(x, dtype=dt)
    for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
        dZ = merge_heads(dH).reshape(-1, d)
        grads["W_" + name] = x2.T @ dZ
        grads["b_" + name] = dZ.sum(axis=0, dtype=dt)
        dx = dx + (dZ @ params["W_" + name].T).reshape(x.shape)
    return dx, grads
''',
    }, "constants cast to the inputs' dtype (dt.type(...)), accumulators in that dtype"),

    Correct("masks-written-differently", {
        "causal_mask": '''
def causal_mask(T):
    return np.arange(T)[:, None] >= np.arange(T)
''',
        "padding_mask": '''
def padding_mask(lengths, T):
    rows = [[t < int(n) for t in range(T)] for n in list(lengths)]
    return np.array(rows, dtype=bool).reshape(len(rows), T)
''',
        "combine_masks": '''
def combine_masks(causal, padding):
    causal = np.asarray(causal, dtype=bool)
    padding = np.asarray(padding, dtype=bool)
    return np.logical_and(np.expand_dims(causal, 0), np.expand_dims(padding, 1))
''',
    }, "causal by comparing aranges, padding by a list comprehension, np.logical_and"),

    Correct("layer-norm-np-var-sum-form", {
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)              # biased (ddof=0) by default
    std = np.sqrt(var + eps)
    xhat = (x - mu) / std
    return gamma * xhat + beta, (xhat, std, gamma)
''',
        "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    xhat, std, gamma = cache
    n = dy.shape[-1]
    g = dy * gamma
    dx = (n * g - g.sum(axis=-1, keepdims=True)
          - xhat * (g * xhat).sum(axis=-1, keepdims=True)) / (n * std)
    flat = dy.reshape(-1, n)
    return dx, (flat * xhat.reshape(-1, n)).sum(axis=0), flat.sum(axis=0)
''',
    }, "np.var, a tuple cache, the backward in its sum form, reshape(-1, d) for the "
       "parameter gradients"),

    Correct("layer-norm-staged-chain-rule", {
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    xmu = x - mu
    var = (xmu ** 2).mean(axis=-1, keepdims=True)
    sqrtvar = np.sqrt(var + eps)
    ivar = 1 / sqrtvar
    xhat = xmu * ivar
    out = gamma * xhat + beta
    return out, {"xmu": xmu, "ivar": ivar, "sqrtvar": sqrtvar, "var": var, "xhat": xhat,
                 "gamma": gamma, "eps": eps}
''',
        "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    xmu, ivar, sqrtvar, xhat, gamma = (cache[k] for k in
                                       ("xmu", "ivar", "sqrtvar", "xhat", "gamma"))
    n = dy.shape[-1]
    lead = tuple(range(dy.ndim - 1))
    dbeta = np.sum(dy, axis=lead)
    dgamma = np.sum(dy * xhat, axis=lead)
    dxhat = dy * gamma
    divar = np.sum(dxhat * xmu, axis=-1, keepdims=True)
    dxmu1 = dxhat * ivar
    dsqrtvar = -divar / sqrtvar ** 2
    dvar = 0.5 * dsqrtvar / sqrtvar
    dsq = dvar * np.ones_like(dy) / n
    dxmu2 = 2 * xmu * dsq
    dx1 = dxmu1 + dxmu2
    dmu = -np.sum(dx1, axis=-1, keepdims=True)
    dx2 = dmu * np.ones_like(dy) / n
    return dx1 + dx2, dgamma, dbeta
''',
    }, "the staged computational-graph backward (CS231n style), one node at a time"),

    Correct("counts-by-tensor-shapes", {
        "block_param_count": '''
def block_param_count(d, d_ff=None):
    d_ff = 4 * d if d_ff is None else d_ff
    shapes = {"W_Q": (d, d), "W_K": (d, d), "W_V": (d, d), "W_O": (d, d),
              "b_Q": (d,), "b_K": (d,), "b_V": (d,), "b_O": (d,),
              "W1": (d, d_ff), "b1": (d_ff,), "W2": (d_ff, d), "b2": (d,),
              "ln1.gamma": (d,), "ln1.beta": (d,), "ln2.gamma": (d,), "ln2.beta": (d,)}
    return sum(math.prod(s) for s in shapes.values())
''',
        "kv_cache_bytes": '''
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
    per_token = n_kv_heads * d_head * bytes_per_element * 2      # K and V
    return math.prod((batch, seq_len, n_layers, per_token))
''',
    }, "parameters summed over a dict of shapes; the KV product in another order"),

    Correct("positions-exp-log-stacked", {
        "sinusoidal_positions": '''
def sinusoidal_positions(T, d):
    half = (d + 1) // 2
    inv_freq = np.exp(-math.log(10000.0) * (2 * np.arange(half)) / d)
    angles = np.outer(np.arange(T), inv_freq)                    # (T, ceil(d/2))
    pairs = np.stack([np.sin(angles), np.cos(angles)], axis=-1)  # (T, ceil(d/2), 2)
    return pairs.reshape(T, 2 * half)[:, :d].astype(np.float64)
''',
    }, "frequencies as exp(-ln(10000) 2i/d), sin/cos stacked then interleaved by reshape"),

    Correct("positions-loops", {
        "sinusoidal_positions": '''
def sinusoidal_positions(T, d):
    PE = np.zeros((T, d))
    for p in range(T):
        for j in range(d):
            angle = p / 10000 ** ((j - j % 2) / d)
            PE[p, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
    return PE
''',
    }, "two Python loops, one entry at a time"),

    Correct("recompute-in-backward", {
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    B, T, d = x.shape
    Q = split_heads(x @ params["W_Q"] + params["b_Q"], n_heads)
    K = split_heads(x @ params["W_K"] + params["b_K"], n_heads)
    V = split_heads(x @ params["W_V"] + params["b_V"], n_heads)
    mask = causal_mask(T) if causal else None
    out, _ = scaled_dot_product_attention(Q, K, V, mask=mask, scale=scale)
    y = merge_heads(out) @ params["W_O"] + params["b_O"]
    return y, (x, params, n_heads, causal, scale)       # only the inputs
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    x, params, h, causal, scale = cache
    B, T, d = x.shape
    Q = split_heads(x @ params["W_Q"] + params["b_Q"], h)
    K = split_heads(x @ params["W_K"] + params["b_K"], h)
    V = split_heads(x @ params["W_V"] + params["b_V"], h)
    out, P = scaled_dot_product_attention(Q, K, V, mask=causal_mask(T) if causal else None,
                                          scale=scale)
    c = 1 / math.sqrt(d // h) if scale else 1
    flat = lambda a: a.reshape(B * T, d)
    grads = {"W_O": flat(merge_heads(out)).T @ flat(dy), "b_O": flat(dy).sum(axis=0)}
    dout = split_heads(dy @ params["W_O"].T, h)
    dP = dout @ V.swapaxes(-1, -2)
    dS = c * P * (dP - np.sum(P * dP, axis=-1, keepdims=True))
    dH = {"Q": dS @ K, "K": dS.swapaxes(-1, -2) @ Q, "V": P.swapaxes(-1, -2) @ dout}
    dx = sum(merge_heads(dH[k]) @ params["W_" + k].T for k in "QKV")
    for k in "QKV":
        grads["W_" + k] = flat(x).T @ flat(merge_heads(dH[k]))
        grads["b_" + k] = flat(merge_heads(dH[k])).sum(axis=0)
    return dx, grads
''',
    }, "the forward caches only its inputs; the backward recomputes Q, K, V and P"),
]
