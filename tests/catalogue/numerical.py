"""Backwards differentiated numerically instead of derived by hand (docs/contract.md §2,
items 11 and 13): each is right to within the checks' tolerance, so it earns its points,
and the grader must flag it for review (``grader_tests/derivation.py``) without taking
them.

Each ``Numerical`` replaces a forward and its backward in the reference's namespace (as
``tests.catalogue.correct`` entries do): the forward is right and keeps its inputs in the
cache, the backward recovers the gradient from evaluations of a forward.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Numerical:
    """One numerically differentiated backward.

    Attributes:
        id: str, unique.
        backward: the graded name of the backward it replaces.
        sources: dict name -> source, run in that order in the reference's namespace.
        note: str, how it differentiates.
    """

    id: str
    backward: str
    sources: dict = field(default_factory=dict)
    note: str = ""


_LN_FORWARD = '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = gamma * (x - mu) / np.sqrt(var + eps) + beta
    return y, {"x": x, "gamma": gamma, "beta": beta, "eps": eps}
'''

_LN_PRIVATE = '''
def _ln(x, gamma, beta, eps):                 # my own copy of the forward (complex-safe)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta
'''

_LN_CENTRAL = _LN_PRIVATE + '''
def layer_norm_backward(dy, cache):
    x, gamma, beta, eps = (np.asarray(cache[k], np.float64) if k != "eps" else cache[k]
                           for k in ("x", "gamma", "beta", "eps"))
    g = np.asarray(dy, np.float64)
    arrays = [x.copy(), gamma.copy(), beta.copy()]
    grads = []
    h = 1e-6
    for a in arrays:
        d = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            old = a[i]
            a[i] = old + h
            up = np.sum(g * _ln(*arrays, eps))
            a[i] = old - h
            down = np.sum(g * _ln(*arrays, eps))
            a[i] = old
            d[i] = (up - down) / (2 * h)
        grads.append(d.astype(dy.dtype))
    return tuple(grads)
'''

_LN_COMPLEX = _LN_PRIVATE + '''
def layer_norm_backward(dy, cache):
    x = np.asarray(cache["x"], np.float64)
    gamma = np.asarray(cache["gamma"], np.float64)
    beta = np.asarray(cache["beta"], np.float64)
    g = np.asarray(dy, np.float64)
    out = []
    for which in range(3):
        base = [x.astype(complex), gamma.astype(complex), beta.astype(complex)]
        d = np.zeros(base[which].shape)
        for i in np.ndindex(d.shape):
            probe = [b.copy() for b in base]
            probe[which][i] += 1e-30j           # the complex step: no cancellation at all
            d[i] = np.sum(g * _ln(*probe, cache["eps"])).imag / 1e-30
        out.append(d.astype(dy.dtype))
    return out[0], out[1], out[2]
'''

_LN_JACOBIAN = _LN_PRIVATE + '''
def _jacobian(f, a, h=1e-6):
    """d f(a) / d a, by central differences, one column per entry of a."""
    flat = a.reshape(-1).copy()
    columns = []
    for k in range(flat.size):
        e = np.zeros_like(flat)
        e[k] = h
        columns.append((f((flat + e).reshape(a.shape)) - f((flat - e).reshape(a.shape))).reshape(-1) / (2 * h))
    return np.stack(columns, axis=1)


def layer_norm_backward(dy, cache):
    x = np.asarray(cache["x"], np.float64)
    gamma = np.asarray(cache["gamma"], np.float64)
    beta = np.asarray(cache["beta"], np.float64)
    eps = cache["eps"]
    g = np.asarray(dy, np.float64).reshape(-1)
    J_x = _jacobian(lambda v: _ln(v, gamma, beta, eps), x)
    J_g = _jacobian(lambda v: _ln(x, v, beta, eps), gamma)
    J_b = _jacobian(lambda v: _ln(x, gamma, v, eps), beta)
    return ((J_x.T @ g).reshape(x.shape).astype(dy.dtype), (J_g.T @ g).astype(dy.dtype),
            (J_b.T @ g).astype(dy.dtype))
'''

_ATTN_FORWARD = '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    B, T, d = x.shape
    if n_heads <= 0 or d % n_heads:
        raise ValueError("n_heads must divide d")
    y = _attention(x, params, n_heads, causal, scale)
    return y, {"x": x, "params": params, "n_heads": n_heads, "causal": causal, "scale": scale}
'''

_ATTN_PRIVATE = '''
def _attention(x, params, n_heads, causal, scale):     # complex-safe copy of the forward
    B, T, d = x.shape
    h, dh = n_heads, d // n_heads

    def heads(M):
        return M.reshape(B, T, h, dh).transpose(0, 2, 1, 3)

    Q, K, V = (heads(x @ params["W_" + n] + params["b_" + n]) for n in "QKV")
    S = Q @ K.swapaxes(-1, -2) * (1 / math.sqrt(dh) if scale else 1.0)
    allowed = np.tril(np.ones((T, T), bool)) if causal else np.ones((T, T), bool)
    S = np.where(allowed, S, 0)
    S = S - np.where(allowed, S.real, -np.inf).max(axis=-1, keepdims=True)
    E = np.where(allowed, np.exp(S), 0)
    P = E / E.sum(axis=-1, keepdims=True)
    O = (P @ V).transpose(0, 2, 1, 3).reshape(B, T, d)
    return O @ params["W_O"] + params["b_O"]
'''

_ATTN_CENTRAL = _ATTN_PRIVATE + '''
def attention_backward(dy, cache):
    x = np.asarray(cache["x"], np.float64)
    params = {k: np.asarray(v, np.float64).copy() for k, v in cache["params"].items()}
    g = np.asarray(dy, np.float64)
    rest = (cache["n_heads"], cache["causal"], cache["scale"])

    def loss(x_):
        return np.sum(g * _attention(x_, params, *rest))

    def derivative(a):
        d = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            old = a[i]
            a[i] = old + 1e-6
            up = loss(x)
            a[i] = old - 1e-6
            down = loss(x)
            a[i] = old
            d[i] = (up - down) / 2e-6
        return d

    dx = derivative(x)
    grads = {k: derivative(v).astype(dy.dtype) for k, v in params.items()}
    return dx.astype(dy.dtype), grads
'''

_ATTN_COMPLEX = _ATTN_PRIVATE + '''
def attention_backward(dy, cache):
    x = np.asarray(cache["x"], np.float64).astype(complex)
    params = {k: np.asarray(v, np.float64).astype(complex) for k, v in cache["params"].items()}
    g = np.asarray(dy, np.float64)
    rest = (cache["n_heads"], cache["causal"], cache["scale"])

    def derivative(a):
        d = np.zeros(a.shape)
        for i in np.ndindex(a.shape):
            a[i] += 1e-30j
            d[i] = np.sum(g * _attention(x, params, *rest)).imag / 1e-30
            a[i] -= 1e-30j
        return d

    dx = derivative(x)
    grads = {k: derivative(v).astype(dy.dtype) for k, v in params.items()}
    return dx.astype(dy.dtype), grads
'''

# The backward calls the graded forward itself (the student's own attention_forward).
_ATTN_BY_THE_FORWARD = '''
def attention_backward(dy, cache):
    x = np.array(cache["x"], np.float64)
    params = {k: np.array(v, np.float64) for k, v in cache["params"].items()}
    g = np.asarray(dy, np.float64)

    def loss():
        y, _ = attention_forward(x, params, cache["n_heads"], cache["causal"], cache["scale"])
        return float(np.sum(g * y))

    def derivative(a):
        d = np.zeros_like(a)
        flat, out = a.reshape(-1), d.reshape(-1)
        for k in range(flat.size):
            old = flat[k]
            flat[k] = old + 1e-6
            up = loss()
            flat[k] = old - 1e-6
            down = loss()
            flat[k] = old
            out[k] = (up - down) / 2e-6
        return d

    dx = derivative(x)
    return dx.astype(dy.dtype), {k: derivative(v).astype(dy.dtype) for k, v in params.items()}
'''

NUMERICAL = [
    Numerical("ln-central-differences", "layer_norm_backward",
              {"layer_norm_forward": _LN_FORWARD, "layer_norm_backward": _LN_CENTRAL},
              "central differences of a private copy of the forward, entry by entry"),
    Numerical("ln-complex-step", "layer_norm_backward",
              {"layer_norm_forward": _LN_FORWARD, "layer_norm_backward": _LN_COMPLEX},
              "the complex step (exact to rounding) on a private copy of the forward"),
    Numerical("ln-jacobian-by-loops", "layer_norm_backward",
              {"layer_norm_forward": _LN_FORWARD, "layer_norm_backward": _LN_JACOBIAN},
              "the full Jacobian built column by column, then dx = J^T dy"),
    Numerical("attn-central-differences", "attention_backward",
              {"attention_forward": _ATTN_PRIVATE + _ATTN_FORWARD,
               "attention_backward": _ATTN_CENTRAL},
              "central differences of a private copy of the forward"),
    Numerical("attn-complex-step", "attention_backward",
              {"attention_forward": _ATTN_PRIVATE + _ATTN_FORWARD,
               "attention_backward": _ATTN_COMPLEX},
              "the complex step on a private copy of the forward"),
    Numerical("attn-calls-the-forward", "attention_backward",
              {"attention_forward": _ATTN_PRIVATE + _ATTN_FORWARD,
               "attention_backward": _ATTN_BY_THE_FORWARD},
              "central differences calling the graded attention_forward twice per entry"),
]
