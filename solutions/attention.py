"""Reference solution of assignment `attention`.

Shape letters used throughout (one glossary for the whole kit):

    B    batch size                      h    number of heads (n_heads)
    T    sequence length                 d    model width (d_model)
    T_q  number of queries               d_h  head width, d // h
    T_k  number of keys (and values)     d_k, d_v  key / value width

Vectors are rows and weights multiply on the right: a projection is ``x @ W + b`` with
``W`` of shape ``(d_in, d_out)``. Masks are boolean and ``True`` means "may attend" /
"real token".

Every function returns NumPy's result type of its floating arguments (float32 in,
float32 out) and never modifies its arguments. Each function body holds one
``### BEGIN SOLUTION`` / ``### END SOLUTION`` region: the notebook builder copies the whole
function into the instructor notebook and nbgrader replaces that region by
``raise NotImplementedError()`` in the students' copy, keeping signature and docstring.
"""

import math

import numpy as np


def softmax(scores, axis=-1):
    """Numerically stable softmax along one axis.

    ``softmax(s)_j = exp(s_j - m) / sum_k exp(s_k - m)`` with ``m = max_k s_k``: subtracting
    the maximum changes nothing mathematically and keeps ``exp`` from overflowing
    (Vaswani et al. 2017, arXiv:1706.03762, eq. 1 uses the softmax over keys).

    Args:
        scores: float array of any shape ``(...)``; entries may be ``-inf`` (masked).
        axis: int, the axis to normalise over (default: the last one, the keys).

    Returns:
        float array, same shape as ``scores``; its dtype is that of ``scores`` when it is a
        floating dtype (float16, float32, float64 kept), float64 otherwise (integers and
        booleans become float64). Every slice along ``axis`` sums to 1, entries equal to
        ``-inf`` get weight exactly 0, and a slice that is all ``-inf`` gives all zeros
        (never NaN).

    Raises:
        numpy.exceptions.AxisError: if ``axis`` is out of range for ``scores``.
        ValueError: if ``scores`` has length 0 along ``axis`` (and other entries on the
            remaining axes), or holds values that are not numbers (strings).
    """
    ### BEGIN SOLUTION
    scores = np.asarray(scores)
    if not np.issubdtype(scores.dtype, np.floating):
        scores = scores.astype(np.float64)
    top = np.max(scores, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)  # an all -inf slice keeps exp(-inf) = 0
    exps = np.exp(scores - top)
    total = np.sum(exps, axis=axis, keepdims=True)
    return np.divide(exps, total, out=np.zeros_like(exps), where=total > 0)
    ### END SOLUTION


def causal_mask(T):
    """Causal (look-ahead) mask: position ``i`` may attend to positions ``j <= i``.

    Args:
        T: int, sequence length, ``T >= 0``.

    Returns:
        bool array ``(T, T)``, ``[i, j]`` True iff ``j <= i`` (query ``i``, key ``j``).

    Raises:
        ValueError: if ``T < 0``.
        TypeError: if ``T`` is not an integer.
    """
    ### BEGIN SOLUTION
    return np.tril(np.ones((T, T), dtype=bool))
    ### END SOLUTION


def padding_mask(lengths, T):
    """Padding mask from the true length of each sequence of a batch.

    Args:
        lengths: ints ``(B,)``, list or array, ``0 <= lengths[b] <= T``.
        T: int, padded sequence length.

    Returns:
        bool array ``(B, T)``, ``[b, t]`` True iff ``t < lengths[b]`` (a real token).

    Raises:
        TypeError: if ``lengths`` holds values that do not compare with integers (strings).
    """
    ### BEGIN SOLUTION
    lengths = np.asarray(lengths).reshape(-1)
    return np.arange(T)[None, :] < lengths[:, None]
    ### END SOLUTION


def combine_masks(causal, padding):
    """Combine a causal mask and a padding mask by AND; padding acts on the keys.

    Args:
        causal: bool ``(T, T)``, ``[i, j]`` for query ``i`` and key ``j``.
        padding: bool ``(B, T)``, ``[b, t]`` True for a real token.

    Returns:
        bool array ``(B, T, T)``: ``[b, i, j] = causal[i, j] and padding[b, j]``.

    Raises:
        IndexError: if ``causal`` or ``padding`` has fewer than two axes.
        ValueError: if the two masks' ``T`` differ (their shapes do not broadcast).
    """
    ### BEGIN SOLUTION
    causal = np.asarray(causal, dtype=bool)
    padding = np.asarray(padding, dtype=bool)
    return causal[None, :, :] & padding[:, None, :]
    ### END SOLUTION


def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    """Scaled dot-product attention (Vaswani et al. 2017, arXiv:1706.03762, eq. 1).

    ``S = Q K^T / sqrt(d_k)``, ``P = softmax(S)`` over the keys (last axis), ``out = P V``.
    Where ``mask`` is False the score is set to ``-inf`` *before* the softmax.

    Args:
        Q: float ``(..., T_q, d_k)`` queries.
        K: float ``(..., T_k, d_k)`` keys.
        V: float ``(..., T_k, d_v)`` values.
        mask: optional bool, broadcastable to ``(..., T_q, T_k)``; True = may attend.
        scale: bool; False drops the ``1/sqrt(d_k)`` factor.

    Returns:
        ``(out, weights)``: ``out`` float ``(..., T_q, d_v)``, ``weights`` float
        ``(..., T_q, T_k)`` whose rows sum to 1 (rows that are fully masked are all 0).

    Raises:
        ValueError: if the shapes do not fit (``K``'s ``d_k`` differs from ``Q``'s, ``V``'s
            ``T_k`` from ``K``'s, leading axes that do not broadcast) or ``mask`` does not
            broadcast to ``(..., T_q, T_k)``.
    """
    ### BEGIN SOLUTION
    d_k = Q.shape[-1]
    scores = Q @ np.swapaxes(K, -1, -2)  # (..., T_q, d_k) x (..., d_k, T_k) -> (..., T_q, T_k)
    if scale:
        scores = scores * (1.0 / math.sqrt(d_k))
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool), scores, -np.inf)
    weights = softmax(scores, axis=-1)
    out = weights @ V  # (..., T_q, T_k) x (..., T_k, d_v) -> (..., T_q, d_v)
    return out, weights
    ### END SOLUTION


def split_heads(M, n_heads):
    """Split the last axis into heads.

    Reshape ``(B, T, d) -> (B, T, h, d_h)``, then swap axes 1 and 2 -> ``(B, h, T, d_h)``.

    Args:
        M: float ``(B, T, d)``.
        n_heads: int ``h``, must divide ``d``.

    Returns:
        float ``(B, h, T, d_h)`` with ``d_h = d // h``; head ``k`` holds columns
        ``k*d_h .. (k+1)*d_h - 1`` of ``M``.

    Raises:
        ValueError: if ``M`` is not 3-D, or ``n_heads <= 0``, or ``d % n_heads != 0``.
    """
    ### BEGIN SOLUTION
    B, T, d = M.shape
    if n_heads <= 0 or d % n_heads:
        raise ValueError(f"d = {d} is not divisible by n_heads = {n_heads}")
    d_h = d // n_heads
    return M.reshape(B, T, n_heads, d_h).transpose(0, 2, 1, 3)  # (B, T, h, d_h) -> (B, h, T, d_h)
    ### END SOLUTION


def merge_heads(M):
    """Exact inverse of ``split_heads``: ``(B, h, T, d_h) -> (B, T, h * d_h)``.

    Swap axes 1 and 2 back to ``(B, T, h, d_h)`` first, then reshape.

    Args:
        M: float ``(B, h, T, d_h)``.

    Returns:
        float ``(B, T, h * d_h)``, the dtype of ``M``.

    Raises:
        ValueError: if ``M`` is not 4-D.
    """
    ### BEGIN SOLUTION
    B, h, T, d_h = M.shape
    return M.transpose(0, 2, 1, 3).reshape(B, T, h * d_h)  # (B, T, h, d_h) -> (B, T, d)
    ### END SOLUTION


def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    """Multi-head self-attention without biases (Vaswani et al. 2017, section 3.2.2).

    ``Q = X W_Q``, ``K = X W_K``, ``V = X W_V``, split into ``h`` heads of width
    ``d_h = d / h``, scaled dot-product attention per head with scale ``1/sqrt(d_h)``,
    heads merged, then ``Y = merge(...) W_O``.

    Args:
        X: float ``(B, T, d)``.
        W_Q, W_K, W_V, W_O: float ``(d, d)``.
        n_heads: int ``h``, must divide ``d``.
        mask: optional bool ``(T, T)`` or ``(B, T, T)``; True = may attend; applied to
            every head.

    Returns:
        ``(Y, weights)``: ``Y`` float ``(B, T, d)``, ``weights`` float ``(B, h, T, T)``.

    Raises:
        ValueError: if ``d % n_heads != 0``, or the weights' or the mask's shapes do not
            fit ``X``.
    """
    ### BEGIN SOLUTION
    Q = split_heads(X @ W_Q, n_heads)  # (B, T, d) -> (B, h, T, d_h)
    K = split_heads(X @ W_K, n_heads)
    V = split_heads(X @ W_V, n_heads)
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.ndim == 3:
            mask = mask[:, None, :, :]  # (B, T, T) -> (B, 1, T, T): same mask for every head
    out, weights = scaled_dot_product_attention(Q, K, V, mask=mask, scale=True)
    Y = merge_heads(out) @ W_O  # (B, h, T, d_h) -> (B, T, d) -> (B, T, d)
    return Y, weights
    ### END SOLUTION


def sinusoidal_positions(T, d):
    """Sinusoidal position encodings (Vaswani et al. 2017, section 3.5).

    ``PE[p, 2i] = sin(p / 10000^(2i/d))`` and ``PE[p, 2i+1] = cos(p / 10000^(2i/d))``;
    for odd ``d`` the last column is a sine.

    Args:
        T: int, number of positions ``p = 0 .. T-1``.
        d: int, width.

    Returns:
        float64 array ``(T, d)`` (angles in radians; values in ``[-1, 1]``).

    Raises:
        ValueError: if ``T < 0`` or ``d < 0``.
    """
    ### BEGIN SOLUTION
    positions = np.arange(T, dtype=np.float64)[:, None]  # (T, 1)
    even = np.arange(0, d, 2, dtype=np.float64)  # the exponents 2i, (ceil(d/2),)
    angles = positions / np.power(10000.0, even / d)  # (T, ceil(d/2))
    PE = np.zeros((T, d), dtype=np.float64)
    PE[:, 0::2] = np.sin(angles)
    PE[:, 1::2] = np.cos(angles[:, : d // 2])
    return PE
    ### END SOLUTION


def layer_norm_forward(x, gamma, beta, eps=1e-5):
    """Layer normalisation over the last axis (Ba, Kiros, Hinton 2016, arXiv:1607.06450).

    ``y = gamma * (x - mean) / sqrt(var + eps) + beta`` with the mean and the *biased*
    variance (divide by ``d``) taken over the last axis of each token.

    Args:
        x: float ``(..., d)``.
        gamma, beta: float ``(d,)``.
        eps: float, added to the variance inside the square root.

    Returns:
        ``(y, cache)``: ``y`` float ``(..., d)``; ``cache`` whatever
        ``layer_norm_backward`` needs.

    Raises:
        ValueError: if ``gamma`` or ``beta`` does not broadcast with ``x`` (its length is
            not ``d``).
    """
    ### BEGIN SOLUTION
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)  # (..., 1)
    xhat = centred * inv
    y = xhat * gamma + beta
    cache = {"xhat": xhat, "inv": inv, "gamma": gamma}
    return y, cache
    ### END SOLUTION


def layer_norm_backward(dy, cache):
    """Backward pass of ``layer_norm_forward`` in closed form.

    ``dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))`` with
    ``dxhat = dy * gamma`` and ``inv = 1 / sqrt(var + eps)``, means over the last axis.

    Args:
        dy: float ``(..., d)``, gradient of the loss with respect to ``y``.
        cache: what ``layer_norm_forward`` returned (not modified).

    Returns:
        ``(dx, dgamma, dbeta)``: ``dx`` float ``(..., d)``; ``dgamma`` and ``dbeta`` float
        ``(d,)``, summed over every leading axis.

    Raises:
        KeyError: if ``cache`` is not what ``layer_norm_forward`` returned (an entry lacks).
        ValueError: if ``dy``'s shape is not that of the forward's ``y``.
    """
    ### BEGIN SOLUTION
    xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
    dxhat = dy * gamma
    dx = inv * (
        dxhat
        - dxhat.mean(axis=-1, keepdims=True)
        - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)
    )
    leading = tuple(range(dy.ndim - 1))
    dgamma = (dy * xhat).sum(axis=leading)
    dbeta = dy.sum(axis=leading)
    return dx, dgamma, dbeta
    ### END SOLUTION


def attention_forward(x, params, n_heads, causal=True, scale=True):
    """Multi-head self-attention with biases, forward pass with a cache.

    ``Q = x W_Q + b_Q``, ``K = x W_K + b_K``, ``V = x W_V + b_V``; per head
    ``P = softmax(Q_h K_h^T / sqrt(d_h))`` (causal mask first when ``causal``);
    ``y = merge(P V_h) W_O + b_O``.

    Args:
        x: float ``(B, T, d)``.
        params: dict with ``W_Q, W_K, W_V, W_O`` float ``(d, d)`` and
            ``b_Q, b_K, b_V, b_O`` float ``(d,)``.
        n_heads: int ``h``, must divide ``d``.
        causal: bool, apply the causal mask.
        scale: bool, divide the scores by ``sqrt(d_h)``.

    Returns:
        ``(y, cache)``: ``y`` float ``(B, T, d)``; ``cache`` whatever
        ``attention_backward`` needs.

    Raises:
        ValueError: if ``x`` is not 3-D, or ``d % n_heads != 0``, or a parameter's shape does
            not fit ``d``.
        KeyError: if ``params`` lacks one of the eight parameters.
    """
    ### BEGIN SOLUTION
    B, T, d = x.shape
    Q = split_heads(x @ params["W_Q"] + params["b_Q"], n_heads)  # (B, h, T, d_h)
    K = split_heads(x @ params["W_K"] + params["b_K"], n_heads)
    V = split_heads(x @ params["W_V"] + params["b_V"], n_heads)
    factor = 1.0 / math.sqrt(d // n_heads) if scale else 1.0
    scores = (Q @ np.swapaxes(K, -1, -2)) * factor  # (B, h, T, T)
    if causal:
        scores = np.where(causal_mask(T), scores, -np.inf)
    P = softmax(scores, axis=-1)
    O = merge_heads(P @ V)  # (B, h, T, T) x (B, h, T, d_h) -> (B, h, T, d_h) -> (B, T, d)
    y = O @ params["W_O"] + params["b_O"]
    cache = {"x": x, "Q": Q, "K": K, "V": V, "P": P, "O": O, "factor": factor,
             "n_heads": n_heads, "params": params}
    return y, cache
    ### END SOLUTION


def attention_backward(dy, cache):
    """Backward pass of ``attention_forward``.

    Softmax backward ``dS = P * (dP - rowsum(dP * P))``; masked positions (``P = 0``)
    get zero gradient; the score scale multiplies ``dS`` as it multiplied ``S``.

    Args:
        dy: float ``(B, T, d)``, gradient of the loss with respect to ``y``.
        cache: what ``attention_forward`` returned (not modified).

    Returns:
        ``(dx, grads)``: ``dx`` float ``(B, T, d)``; ``grads`` a dict with the same keys and
        shapes as ``params``: ``W_Q, W_K, W_V, W_O`` ``(d, d)``, ``b_Q, b_K, b_V, b_O``
        ``(d,)``.

    Raises:
        KeyError: if ``cache`` is not what ``attention_forward`` returned (an entry lacks).
        ValueError: if ``dy``'s shape is not that of the forward's ``y``.
    """
    ### BEGIN SOLUTION
    x, Q, K, V, P, O = (cache[k] for k in ("x", "Q", "K", "V", "P", "O"))
    params, h, factor = cache["params"], cache["n_heads"], cache["factor"]
    d = x.shape[-1]
    x2, dy2 = x.reshape(-1, d), dy.reshape(-1, d)  # (B*T, d)
    grads = {"W_O": O.reshape(-1, d).T @ dy2, "b_O": dy2.sum(axis=0)}
    dO = split_heads(dy @ params["W_O"].T, h)  # (B, h, T, d_h)
    dP = dO @ np.swapaxes(V, -1, -2)  # (B, h, T, T)
    dV = np.swapaxes(P, -1, -2) @ dO  # (B, h, T, d_h)
    dS = P * (dP - (dP * P).sum(axis=-1, keepdims=True)) * factor
    dQ = dS @ K  # (B, h, T, d_h)
    dK = np.swapaxes(dS, -1, -2) @ Q
    dx = np.zeros(x.shape, dtype=np.result_type(dy, x))
    for name, dH in (("Q", dQ), ("K", dK), ("V", dV)):
        dZ = merge_heads(dH)  # (B, T, d)
        grads["W_" + name] = x2.T @ dZ.reshape(-1, d)
        grads["b_" + name] = dZ.reshape(-1, d).sum(axis=0)
        dx = dx + dZ @ params["W_" + name].T
    return dx, grads
    ### END SOLUTION


def block_param_count(d, d_ff=None):
    """Number of parameters of one pre-LN Transformer block with biases.

    Attention projections ``4 (d^2 + d)``, FFN ``d d_ff + d_ff + d_ff d + d``, two layer
    norms ``2 * 2d``. With ``d_ff = 4d`` this is ``12 d^2 + 13 d``.

    Args:
        d: int, model width.
        d_ff: int or None, FFN hidden width (default ``4 * d``).

    Returns:
        int, number of scalar parameters.

    Raises:
        TypeError: if ``d`` (or ``d_ff``, when given) is not a number.
    """
    ### BEGIN SOLUTION
    if d_ff is None:
        d_ff = 4 * d
    attention = 4 * (d * d + d)
    ffn = d * d_ff + d_ff + d_ff * d + d
    layer_norms = 2 * (2 * d)
    return int(attention + ffn + layer_norms)
    ### END SOLUTION


def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
    """Memory of a KV cache (Shazeer 2019, arXiv:1911.02150, for the multi-query case).

    ``2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_element``: keys and
    values (the 2) for every layer, head, position and sequence.

    Args:
        n_layers, n_kv_heads, d_head, seq_len, batch: ints.
        bytes_per_element: int, e.g. 2 for float16, 4 for float32.

    Returns:
        int, bytes.

    Raises:
        TypeError: if an argument is not a number (``None``).
    """
    ### BEGIN SOLUTION
    return int(2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_element)
    ### END SOLUTION


SPEC_FUNCTIONS = (
    "softmax",
    "causal_mask",
    "padding_mask",
    "combine_masks",
    "scaled_dot_product_attention",
    "split_heads",
    "merge_heads",
    "multi_head_attention",
    "sinusoidal_positions",
    "layer_norm_forward",
    "layer_norm_backward",
    "attention_forward",
    "attention_backward",
    "block_param_count",
    "kv_cache_bytes",
)
