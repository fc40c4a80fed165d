"""Honest submissions of unusual but legitimate structure: each must get full marks with no
tampering fault and no flag, in process and through the isolated grader.

Where ``correct.py`` varies the mathematics, these vary the *shape of the code*: the cache
a forward hands its backward (a dataclass, a class with its own ``==``, a dict or list
subclass, a namedtuple, a ``SimpleNamespace``, a closure, an attrs-like slotted class, the
layer object itself), helper classes, graded names bound to ``functools.partial``
objects, aliases, lambdas and callable objects, NumPy's ufunc methods and ``einsum``, and
float32 kept float32 throughout. The contract says what each function takes and returns,
and that the cache is whatever the student's backward needs: none of this is tampering.

Every entry is a complete submission: ``BASE`` (all 15 functions and the two exercises'
variables, written for this catalogue, not copied from the reference) with some of its
blocks substituted (``Honest.blocks``) and helpers added before them
(``Honest.prelude``), in the order of ``BASE``; ``source(entry)`` is the whole file.
"""

from dataclasses import dataclass, field

HEADER = '''"""An attention assignment, filled in."""

import math

import numpy as np
'''

# The blocks of the base submission, in file order: name -> source. A graded name's block
# binds that name; the blocks whose name starts with "_" hold helpers.
BASE = {
    "softmax": '''
def softmax(scores, axis=-1):
    z = np.asarray(scores)
    if z.dtype.kind != "f":
        z = z.astype(np.float64)
    peak = np.max(z, axis=axis, keepdims=True)
    peak[~np.isfinite(peak)] = 0                  # an all -inf slice: exp(-inf) = 0 stays 0
    e = np.exp(z - peak)
    norm = np.sum(e, axis=axis, keepdims=True)
    out = np.zeros_like(e)
    np.divide(e, norm, out=out, where=norm > 0)
    return out
''',
    "causal_mask": '''
def causal_mask(T):
    return np.arange(T)[None, :] <= np.arange(T)[:, None]
''',
    "padding_mask": '''
def padding_mask(lengths, T):
    return np.arange(T)[None, :] < np.asarray(lengths).reshape(-1, 1)
''',
    "combine_masks": '''
def combine_masks(causal, padding):
    return np.logical_and(np.asarray(causal, dtype=bool)[None, :, :],
                          np.asarray(padding, dtype=bool)[:, None, :])
''',
    "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    scores = np.matmul(Q, np.swapaxes(K, -1, -2))
    if scale:
        scores = scores / math.sqrt(K.shape[-1])
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool), scores, -np.inf)
    weights = softmax(scores)
    return np.matmul(weights, V), weights
''',
    "split_heads": '''
def split_heads(M, n_heads):
    B, T, d = M.shape
    if n_heads < 1 or d % n_heads:
        raise ValueError(f"{n_heads} heads do not divide d = {d}")
    return np.swapaxes(M.reshape(B, T, n_heads, d // n_heads), 1, 2)
''',
    "merge_heads": '''
def merge_heads(M):
    B, h, T, d_h = M.shape
    return np.swapaxes(M, 1, 2).reshape(B, T, h * d_h)
''',
    "multi_head_attention": '''
def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    heads = [split_heads(X @ W, n_heads) for W in (W_Q, W_K, W_V)]
    if mask is not None:
        mask = np.asarray(mask, dtype=bool)
        if mask.ndim == 3:
            mask = mask[:, np.newaxis]                  # one mask for every head
    out, weights = scaled_dot_product_attention(*heads, mask=mask)
    return merge_heads(out) @ W_O, weights
''',
    "sinusoidal_positions": '''
def sinusoidal_positions(T, d):
    columns = np.arange(d)
    angle = np.arange(T, dtype=np.float64)[:, None] / 10000.0 ** ((columns - columns % 2) / d)
    return np.where(columns % 2 == 0, np.sin(angle), np.cos(angle))
''',
    "_norm_math": '''
def _normalise(x, eps):
    centred = x - np.mean(x, axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(np.mean(np.square(centred), axis=-1, keepdims=True) + eps)
    return centred * rstd, rstd


def _normalise_backward(dy, xhat, rstd, gamma):
    d = dy.shape[-1]
    g = dy * gamma
    dx = rstd / d * (d * g - np.sum(g, axis=-1, keepdims=True)
                     - xhat * np.sum(g * xhat, axis=-1, keepdims=True))
    rows = dy.reshape(-1, d)
    return dx, np.sum(rows * xhat.reshape(-1, d), axis=0), np.sum(rows, axis=0)
''',
    "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    xhat, rstd = _normalise(x, eps)
    return xhat * gamma + beta, {"xhat": xhat, "rstd": rstd, "gamma": gamma}
''',
    "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    return _normalise_backward(dy, cache["xhat"], cache["rstd"], cache["gamma"])
''',
    "_attention_math": '''
SAVED = ("x", "params", "Q", "K", "V", "P", "O", "c", "h")   # what the backward needs


def _attend_forward(x, params, n_heads, causal, scale):
    """``(y, saved)``, ``saved`` the tuple of ``SAVED``."""
    B, T, d = x.shape
    Q, K, V = (split_heads(x @ params["W_" + k] + params["b_" + k], n_heads) for k in "QKV")
    c = 1.0 / math.sqrt(d // n_heads) if scale else 1.0
    S = np.matmul(Q, np.swapaxes(K, -1, -2)) * c
    if causal:
        S = np.where(causal_mask(T), S, -np.inf)
    P = softmax(S)
    O = merge_heads(np.matmul(P, V))
    return O @ params["W_O"] + params["b_O"], (x, params, Q, K, V, P, O, c, n_heads)


def _attend_backward(dy, x, params, Q, K, V, P, O, c, h):
    d = x.shape[-1]
    rows_x, rows_dy = x.reshape(-1, d), dy.reshape(-1, d)
    grads = {"W_O": O.reshape(-1, d).T @ rows_dy, "b_O": rows_dy.sum(axis=0)}
    dO = split_heads(dy @ params["W_O"].T, h)
    dP = dO @ np.swapaxes(V, -1, -2)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True)) * c
    parts = []
    for k, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q),
                  ("V", np.swapaxes(P, -1, -2) @ dO)):
        dZ = merge_heads(dH).reshape(-1, d)
        grads["W_" + k] = rows_x.T @ dZ
        grads["b_" + k] = dZ.sum(axis=0)
        parts.append((dZ @ params["W_" + k].T).reshape(x.shape))
    return parts[0] + parts[1] + parts[2], grads
''',
    "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    y, saved = _attend_forward(x, params, n_heads, causal, scale)
    return y, dict(zip(SAVED, saved))
''',
    "attention_backward": '''
def attention_backward(dy, cache):
    return _attend_backward(dy, *(cache[k] for k in SAVED))
''',
    "block_param_count": '''
def block_param_count(d, d_ff=None):
    hidden = 4 * d if d_ff is None else d_ff
    return 4 * d * (d + 1) + (2 * d * hidden + hidden + d) + 4 * d
''',
    "kv_cache_bytes": '''
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
    return int(2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_element)
''',
    "exercises": '''
weight_ratio_unscaled = math.exp(2 * math.sqrt(64))   # scores 2 standard deviations apart
weight_ratio_scaled = math.exp(2.0)
budget_block_params = 24 * block_param_count(512)
budget_weight_bytes_fp16 = 2 * budget_block_params
budget_kv_cache_bytes = kv_cache_bytes(24, 8, 64, 8192, 4, 2)
budget_kv_to_weights = budget_kv_cache_bytes / budget_weight_bytes_fp16
budget_kv_cache_bytes_mqa = kv_cache_bytes(24, 1, 64, 8192, 4, 2)
''',
}


@dataclass(frozen=True)
class Honest:
    """One honest submission of unusual structure.

    Attributes:
        id: str, unique.
        blocks: dict block name of ``BASE`` -> the source that replaces it.
        prelude: str, helpers (imports, classes) placed right after the imports.
        note: str, what is unusual about it.
        isolated_gap: str or None, why the isolated grader currently gets it wrong (the
            kit's fault, not the submission's); its isolated test is then an xfail.
    """

    id: str
    blocks: dict = field(default_factory=dict)
    prelude: str = ""
    note: str = ""
    isolated_gap: str = None


def source(entry: Honest) -> str:
    """The whole submission file of ``entry``: imports, prelude, every block of ``BASE`` in
    order (the entry's where it replaces one).

    Raises:
        KeyError: if the entry names a block ``BASE`` does not have.
    """
    unknown = set(entry.blocks) - set(BASE)
    if unknown:
        raise KeyError(f"{entry.id}: no block {sorted(unknown)} in BASE")
    parts = [HEADER, entry.prelude.strip("\n") + "\n" if entry.prelude else ""]
    parts += [entry.blocks.get(name, text).strip("\n") + "\n" for name, text in BASE.items()]
    return "\n\n".join(p for p in parts if p)


def namespace(entry: Honest) -> dict:
    """``entry`` run as a module would be, under a file name of its own.

    Returns:
        dict, the submission's globals.
    """
    space = {"__name__": "__submission__"}
    exec(compile(source(entry), f"honest_{entry.id}.py", "exec"), space)
    return space


HONEST = [
    Honest("dataclass-cache", prelude='''
from dataclasses import dataclass, field


@dataclass
class NormCache:
    xhat: np.ndarray
    rstd: np.ndarray
    gamma: np.ndarray


@dataclass
class AttentionCache:
    x: np.ndarray
    params: dict
    Q: np.ndarray
    K: np.ndarray
    V: np.ndarray
    P: np.ndarray
    O: np.ndarray
    c: float
    h: int
    notes: list = field(default_factory=list)
''', blocks={
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    xhat, rstd = _normalise(x, eps)
    return xhat * gamma + beta, NormCache(xhat, rstd, gamma)
''',
        "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    return _normalise_backward(dy, cache.xhat, cache.rstd, cache.gamma)
''',
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    y, saved = _attend_forward(x, params, n_heads, causal, scale)
    return y, AttentionCache(*saved, notes=["causal" if causal else "full"])
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    return _attend_backward(dy, cache.x, cache.params, cache.Q, cache.K, cache.V, cache.P,
                            cache.O, cache.c, cache.h)
''',
    }, note="caches are @dataclass instances: their generated == compares arrays (and "
            "raises on them)"),

    Honest("class-with-own-eq-cache", prelude='''
def _same(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return np.array_equal(a, b)


class Saved:
    """The tensors a backward needs, compared by value."""

    def __init__(self, **tensors):
        self._tensors = tensors

    def __getitem__(self, key):
        return self._tensors[key]

    def __eq__(self, other):
        if not isinstance(other, Saved):
            return NotImplemented
        return _same(self._tensors, other._tensors)

    __hash__ = None

    def __repr__(self):
        return f"Saved({', '.join(self._tensors)})"
''', blocks={
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    xhat, rstd = _normalise(x, eps)
    return xhat * gamma + beta, Saved(xhat=xhat, rstd=rstd, gamma=gamma)
''',
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    y, saved = _attend_forward(x, params, n_heads, causal, scale)
    return y, Saved(**dict(zip(SAVED, saved)))
''',
    }, note="the cache is a class with its own == (by value) and item access; the base "
            "backwards read it with [] unchanged"),

    Honest("dict-subclass-cache", prelude='''
class Tape(dict):
    """A dict whose entries can be read as attributes too."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None
''', blocks={
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    xhat, rstd = _normalise(x, eps)
    return xhat * gamma + beta, Tape(xhat=xhat, rstd=rstd, gamma=gamma)
''',
        "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    return _normalise_backward(dy, cache.xhat, cache.rstd, cache.gamma)
''',
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    y, saved = _attend_forward(x, params, n_heads, causal, scale)
    return y, Tape(zip(SAVED, saved))
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    return _attend_backward(dy, cache.x, cache.params, cache.Q, cache.K, cache.V, cache.P,
                            cache.O, cache.c, cache.h)
''',
    }, note="caches are instances of a dict subclass read through attributes"),

    Honest("list-subclass-cache", prelude='''
class Stack(list):
    """Saved tensors, in the order the forward made them."""

    def push(self, *tensors):
        self.extend(tensors)
        return self
''', blocks={
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    xhat, rstd = _normalise(x, eps)
    return xhat * gamma + beta, Stack().push(xhat, rstd, gamma)
''',
        "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    xhat, rstd, gamma = cache
    return _normalise_backward(dy, xhat, rstd, gamma)
''',
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    y, saved = _attend_forward(x, params, n_heads, causal, scale)
    return y, Stack().push(*saved)
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    return _attend_backward(dy, *cache)
''',
    }, note="caches are instances of a list subclass"),

    Honest("namedtuple-cache", prelude='''
from collections import namedtuple

NormCache = namedtuple("NormCache", "xhat rstd gamma")
AttentionCache = namedtuple("AttentionCache", "x params Q K V P O c h")
''', blocks={
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    xhat, rstd = _normalise(x, eps)
    return xhat * gamma + beta, NormCache(xhat=xhat, rstd=rstd, gamma=gamma)
''',
        "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    return _normalise_backward(dy, cache.xhat, cache.rstd, cache.gamma)
''',
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    y, saved = _attend_forward(x, params, n_heads, causal, scale)
    return y, AttentionCache._make(saved)
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    return _attend_backward(dy, *cache._asdict().values())
''',
    }, note="caches are namedtuples read by field name"),

    Honest("simplenamespace-cache", prelude='''
from types import SimpleNamespace
''', blocks={
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    xhat, rstd = _normalise(x, eps)
    return xhat * gamma + beta, SimpleNamespace(xhat=xhat, rstd=rstd, gamma=gamma, eps=eps)
''',
        "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    return _normalise_backward(dy, cache.xhat, cache.rstd, cache.gamma)
''',
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    y, saved = _attend_forward(x, params, n_heads, causal, scale)
    return y, SimpleNamespace(**dict(zip(SAVED, saved)))
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    return _attend_backward(dy, **vars(cache))
''',
    }, note="caches are types.SimpleNamespace objects"),

    Honest("closure-cache", blocks={
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    xhat, rstd = _normalise(x, eps)

    def backward(dy):                     # the cache is the backward, closed over xhat
        return _normalise_backward(dy, xhat, rstd, gamma)

    return xhat * gamma + beta, backward
''',
        "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    return cache(dy)
''',
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    y, saved = _attend_forward(x, params, n_heads, causal, scale)
    return y, lambda dy: _attend_backward(dy, *saved)
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    return cache(dy)
''',
    }, note="each cache is a closure that computes the backward; the backward calls it"),

    Honest("attrs-like-slots-cache", prelude='''
class Frozen:
    """attrs-style: slots, an __init__ from the field list, == by the tuple of fields."""

    __slots__ = ()

    def __init__(self, *values):
        for name, value in zip(self.__slots__, values):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is frozen")

    def _fields(self):
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other):                # what attrs generates: == of the field tuples
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self):
        return hash(tuple(id(v) for v in self._fields()))


class NormCache(Frozen):
    __slots__ = ("xhat", "rstd", "gamma")


class AttentionCache(Frozen):
    __slots__ = ("x", "params", "Q", "K", "V", "P", "O", "c", "h")
''', blocks={
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    xhat, rstd = _normalise(x, eps)
    return xhat * gamma + beta, NormCache(xhat, rstd, gamma)
''',
        "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    return _normalise_backward(dy, *cache._fields())
''',
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    y, saved = _attend_forward(x, params, n_heads, causal, scale)
    return y, AttentionCache(*saved)
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    return _attend_backward(dy, *cache._fields())
''',
    }, note="caches of slotted, frozen classes whose == compares field tuples (which "
            "raises on arrays), as attrs generates"),

    Honest("layer-objects", prelude='''
class LayerNorm:
    """A layer-norm layer: forward keeps what backward needs on the layer itself."""

    def __init__(self, gamma, beta, eps=1e-5):
        self.gamma, self.beta, self.eps = gamma, beta, eps

    def forward(self, x):
        self.xhat, self.rstd = _normalise(x, self.eps)
        return self.xhat * self.gamma + self.beta

    def backward(self, dy):
        return _normalise_backward(dy, self.xhat, self.rstd, self.gamma)


class HeadLayout:
    """Splits the width into heads and back."""

    def __init__(self, n_heads):
        self.n_heads = n_heads

    def split(self, M):
        B, T, d = M.shape
        if self.n_heads < 1 or d % self.n_heads:
            raise ValueError(f"{self.n_heads} heads do not divide d = {d}")
        return M.reshape(B, T, self.n_heads, d // self.n_heads).transpose(0, 2, 1, 3)

    @staticmethod
    def merge(M):
        B, h, T, d_h = M.shape
        return M.transpose(0, 2, 1, 3).reshape(B, T, h * d_h)


class SelfAttention:
    """Multi-head self-attention with biases; the instance is its own cache."""

    def __init__(self, params, n_heads, causal=True, scale=True):
        self.params, self.n_heads, self.causal, self.scale = params, n_heads, causal, scale

    def forward(self, x):
        self.y, self.saved = _attend_forward(x, self.params, self.n_heads, self.causal,
                                             self.scale)
        return self.y

    def backward(self, dy):
        return _attend_backward(dy, *self.saved)
''', blocks={
        "split_heads": '''
def split_heads(M, n_heads):
    return HeadLayout(n_heads).split(M)
''',
        "merge_heads": '''
def merge_heads(M):
    return HeadLayout.merge(M)
''',
        "layer_norm_forward": '''
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    layer = LayerNorm(gamma, beta, eps)
    return layer.forward(x), layer
''',
        "layer_norm_backward": '''
def layer_norm_backward(dy, cache):
    return cache.backward(dy)
''',
        "attention_forward": '''
def attention_forward(x, params, n_heads, causal=True, scale=True):
    layer = SelfAttention(params, n_heads, causal, scale)
    return layer.forward(x), layer
''',
        "attention_backward": '''
def attention_backward(dy, cache):
    return cache.backward(dy)
''',
    }, note="helper classes; the cache is the layer object (plain class: == is identity)"),

    Honest("partial-bound-names", prelude='''
import functools
''', blocks={
        "softmax": '''
def _tempered_softmax(scores, axis=-1, temperature=1.0):
    z = np.asarray(scores)
    if z.dtype.kind != "f":
        z = z.astype(np.float64)
    z = z / temperature
    peak = np.max(z, axis=axis, keepdims=True)
    e = np.exp(z - np.where(np.isfinite(peak), peak, 0))
    norm = e.sum(axis=axis, keepdims=True)
    return np.divide(e, norm, out=np.zeros_like(e), where=norm > 0)


softmax = functools.partial(_tempered_softmax, temperature=1.0)
''',
        "causal_mask": '''
def _band(T, past=None, future=0):
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    keep = j - i <= future
    if past is not None:
        keep &= i - j <= past
    return keep


causal_mask = functools.partial(_band, past=None, future=0)
''',
        "split_heads": '''
def _regroup(M, n_heads=None, to_heads=True):
    if to_heads:
        B, T, d = M.shape
        if n_heads < 1 or d % n_heads:
            raise ValueError(f"{n_heads} heads do not divide d = {d}")
        return M.reshape(B, T, n_heads, -1).transpose(0, 2, 1, 3)
    B, h, T, d_h = M.shape
    return M.transpose(0, 2, 1, 3).reshape(B, T, h * d_h)


split_heads = functools.partial(_regroup, to_heads=True)
''',
        "merge_heads": '''
merge_heads = functools.partial(_regroup, to_heads=False)
''',
        "kv_cache_bytes": '''
def _product(*factors):
    return int(math.prod(factors))


kv_cache_bytes = functools.partial(_product, 2)        # keys and values: the factor 2
''',
    }, note="softmax, causal_mask, split_heads, merge_heads and kv_cache_bytes are "
            "functools.partial objects over general helpers"),

    Honest("aliases", blocks={
        "softmax": '''
def _softmax_impl(scores, axis=-1):
    z = np.asarray(scores, dtype=np.result_type(scores, np.float16))
    top = np.max(z, axis=axis, keepdims=True)
    shifted = z - np.where(np.isneginf(top), 0, top)
    e = np.exp(shifted)
    total = np.sum(e, axis=axis, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1), 0).astype(e.dtype)


softmax = _softmax_impl
''',
        "scaled_dot_product_attention": '''
def _attention_impl(Q, K, V, mask=None, scale=True):
    S = Q @ np.swapaxes(K, -1, -2)
    if scale:
        S = S * (1 / math.sqrt(Q.shape[-1]))
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    P = softmax(S, axis=-1)                             # the graded name, by its alias
    return P @ V, P


scaled_dot_product_attention = _attention_impl
''',
        "merge_heads": '''
def _merge_impl(M):
    return np.concatenate(list(np.moveaxis(M, 1, 0)), axis=-1)   # heads side by side


merge_heads = _merge_impl
''',
        "layer_norm_forward": '''
def _ln_forward_impl(x, gamma, beta, eps=1e-5):
    xhat, rstd = _normalise(x, eps)
    return gamma * xhat + beta, {"xhat": xhat, "rstd": rstd, "gamma": gamma}


layer_norm_forward = _ln_forward_impl
''',
    }, note="graded names bound to real implementations under other names "
            "(softmax = _softmax_impl ...)"),

    Honest("lambdas", blocks={
        "causal_mask": '''
causal_mask = lambda T: np.tril(np.ones((T, T), dtype=np.bool_))
''',
        "padding_mask": '''
padding_mask = lambda lengths, T: np.arange(T) < np.reshape(np.asarray(lengths), (-1, 1))
''',
        "combine_masks": '''
combine_masks = lambda causal, padding: (np.asarray(causal, dtype=bool)[np.newaxis]
                                         & np.asarray(padding, dtype=bool)[:, np.newaxis])
''',
        "merge_heads": '''
merge_heads = lambda M: M.transpose(0, 2, 1, 3).reshape(M.shape[0], M.shape[2], -1)
''',
        "layer_norm_backward": '''
layer_norm_backward = lambda dy, cache: _normalise_backward(
    dy, cache["xhat"], cache["rstd"], cache["gamma"])
''',
        "block_param_count": '''
block_param_count = lambda d, d_ff=None: 12 * d * d + 13 * d if d_ff is None else (
    4 * (d * d + d) + 2 * d * d_ff + d_ff + d + 4 * d)
''',
        "kv_cache_bytes": '''
kv_cache_bytes = lambda n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element: (
    2 * n_layers * n_kv_heads * d_head * seq_len * batch * bytes_per_element)
''',
    }, note="masks, merge_heads, layer_norm_backward and the counts are lambdas"),

    Honest("callable-objects", prelude='''
class Softmax:
    """softmax as an object: the axis it normalises over by default is an attribute."""

    def __init__(self, default_axis=-1):
        self.default_axis = default_axis

    def __call__(self, scores, axis=None):
        axis = self.default_axis if axis is None else axis
        z = np.asarray(scores)
        if not np.issubdtype(z.dtype, np.floating):
            z = z.astype(np.float64)
        peak = np.max(z, axis=axis, keepdims=True)
        e = np.exp(z - np.where(np.isfinite(peak), peak, 0))
        norm = e.sum(axis=axis, keepdims=True)
        return np.divide(e, norm, out=np.zeros_like(e), where=norm > 0)


class Attention:
    """Scaled dot-product attention with a softmax of its own choosing."""

    def __init__(self, normalise):
        self.normalise = normalise

    def __call__(self, Q, K, V, mask=None, scale=True):
        S = np.matmul(Q, np.swapaxes(K, -1, -2))
        if scale:
            S = S / math.sqrt(Q.shape[-1])
        if mask is not None:
            S = np.where(np.asarray(mask, dtype=bool), S, -np.inf)
        P = self.normalise(S)
        return np.matmul(P, V), P


class LayerNormForward:
    def __call__(self, x, gamma, beta, eps=1e-5):
        xhat, rstd = _normalise(x, eps)
        return xhat * gamma + beta, {"xhat": xhat, "rstd": rstd, "gamma": gamma}


class Counter:
    """Parameter count of a block as a callable with its coefficients."""

    def __init__(self, layer_norms=2):
        self.layer_norms = layer_norms

    def __call__(self, d, d_ff=None):
        d_ff = 4 * d if d_ff is None else d_ff
        return 4 * (d * d + d) + (d * d_ff + d_ff + d_ff * d + d) + self.layer_norms * 2 * d
''', blocks={
        "softmax": '''
softmax = Softmax()
''',
        "scaled_dot_product_attention": '''
scaled_dot_product_attention = Attention(softmax)
''',
        "layer_norm_forward": '''
layer_norm_forward = LayerNormForward()
''',
        "block_param_count": '''
block_param_count = Counter()
''',
    }, note="softmax, scaled_dot_product_attention, layer_norm_forward and "
            "block_param_count are instances of classes with __call__"),

    Honest("ufunc-methods-and-einsum", blocks={
        "softmax": '''
def softmax(scores, axis=-1):
    z = np.asarray(scores)
    if z.dtype.kind != "f":
        z = z.astype(np.float64)
    peak = np.maximum.reduce(z, axis=axis, keepdims=True)
    np.copyto(peak, 0, where=~np.isfinite(peak))
    e = np.exp(np.subtract(z, peak))
    total = np.add.reduce(e, axis=axis, keepdims=True)
    return np.true_divide(e, total, out=np.zeros_like(e), where=np.greater(total, 0))
''',
        "causal_mask": '''
def causal_mask(T):
    return np.greater_equal.outer(np.arange(T), np.arange(T))
''',
        "padding_mask": '''
def padding_mask(lengths, T):
    return np.greater.outer(np.ravel(lengths), np.arange(T))
''',
        "combine_masks": '''
def combine_masks(causal, padding):
    return np.einsum("ij,bj->bij", np.asarray(causal, dtype=bool),
                     np.asarray(padding, dtype=bool))
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    S = np.einsum("...qd,...kd->...qk", Q, K)
    if scale:
        S = np.multiply(S, 1.0 / math.sqrt(Q.shape[-1]))
    if mask is not None:
        S = np.where(mask, S, -np.inf)
    P = softmax(S)
    return np.einsum("...qk,...kv->...qv", P, V), P
''',
        "sinusoidal_positions": '''
def sinusoidal_positions(T, d):
    j = np.arange(d)
    angle = np.multiply.outer(np.arange(T, dtype=np.float64),
                              np.power(10000.0, -np.subtract(j, np.remainder(j, 2)) / d))
    return np.where(np.equal(np.remainder(j, 2), 0), np.sin(angle), np.cos(angle))
''',
        "_norm_math": '''
def _normalise(x, eps):
    d = x.shape[-1]
    centred = np.subtract(x, np.add.reduce(x, axis=-1, keepdims=True) / d)
    var = np.einsum("...i,...i->...", centred, centred)[..., None] / d
    rstd = np.reciprocal(np.sqrt(var + eps))
    return np.multiply(centred, rstd), rstd


def _normalise_backward(dy, xhat, rstd, gamma):
    d = dy.shape[-1]
    g = np.multiply(dy, gamma)
    dx = rstd / d * (d * g - np.add.reduce(g, axis=-1, keepdims=True)
                     - xhat * np.einsum("...i,...i->...", g, xhat)[..., None])
    lead = tuple(range(dy.ndim - 1))
    return dx, np.add.reduce(dy * xhat, axis=lead), np.add.reduce(dy, axis=lead)
''',
        "block_param_count": '''
def block_param_count(d, d_ff=None):
    d_ff = 4 * d if d_ff is None else d_ff
    sizes = np.array([d * d, d, d * d_ff, d_ff, d_ff * d, d, d], dtype=np.int64)
    times = np.array([4, 4, 1, 1, 1, 1, 4], dtype=np.int64)
    return int(np.dot(sizes, times))
''',
        "kv_cache_bytes": '''
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
    factors = np.array([2, n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element],
                       dtype=np.int64)
    return int(np.multiply.reduce(factors))
''',
    }, note="ufunc methods (reduce, outer), np.einsum, out= and where= arguments"),

    Honest("float32-throughout", blocks={
        "softmax": '''
def softmax(scores, axis=-1):
    z = np.asarray(scores)
    dt = z.dtype if z.dtype.kind == "f" else np.dtype(np.float64)
    z = z.astype(dt, copy=False)
    zero = dt.type(0)
    peak = np.max(z, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, zero)
    e = np.exp(z - peak, dtype=dt)
    norm = np.sum(e, axis=axis, keepdims=True, dtype=dt)
    return np.divide(e, norm, out=np.zeros_like(e), where=norm > zero)
''',
        "scaled_dot_product_attention": '''
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    dt = np.result_type(Q, K, V)
    scores = np.matmul(Q, np.swapaxes(K, -1, -2), dtype=dt)
    if scale:
        scores = scores * dt.type(1.0 / math.sqrt(K.shape[-1]))
    if mask is not None:
        scores = np.where(np.asarray(mask, dtype=bool), scores, dt.type(-np.inf))
    weights = softmax(scores)
    return np.matmul(weights, V, dtype=dt), weights
''',
        "_norm_math": '''
def _normalise(x, eps):
    dt = x.dtype
    centred = x - np.mean(x, axis=-1, keepdims=True, dtype=dt)
    var = np.mean(centred * centred, axis=-1, keepdims=True, dtype=dt)
    rstd = dt.type(1) / np.sqrt(var + dt.type(eps))
    return centred * rstd, rstd


def _normalise_backward(dy, xhat, rstd, gamma):
    dt = np.result_type(dy, xhat, gamma)
    n = dt.type(dy.shape[-1])
    g = (dy * gamma).astype(dt, copy=False)
    dx = rstd / n * (n * g - np.sum(g, axis=-1, keepdims=True, dtype=dt)
                     - xhat * np.sum(g * xhat, axis=-1, keepdims=True, dtype=dt))
    rows = dy.reshape(-1, dy.shape[-1])
    return (dx.astype(dt, copy=False),
            np.sum(rows * xhat.reshape(rows.shape), axis=0, dtype=dt),
            np.sum(rows, axis=0, dtype=dt))
''',
        "_attention_math": '''
SAVED = ("x", "params", "Q", "K", "V", "P", "O", "c", "h")


def _attend_forward(x, params, n_heads, causal, scale):
    dt = np.result_type(x, *params.values())
    B, T, d = x.shape
    Q, K, V = (split_heads(np.matmul(x, params["W_" + k], dtype=dt) + params["b_" + k], n_heads)
               for k in "QKV")
    c = dt.type(1.0 / math.sqrt(d // n_heads) if scale else 1.0)
    S = np.matmul(Q, np.swapaxes(K, -1, -2), dtype=dt) * c
    if causal:
        S = np.where(causal_mask(T), S, dt.type(-np.inf))
    P = softmax(S)
    O = merge_heads(np.matmul(P, V, dtype=dt))
    return np.matmul(O, params["W_O"], dtype=dt) + params["b_O"], (x, params, Q, K, V, P, O,
                                                                   c, n_heads)


def _attend_backward(dy, x, params, Q, K, V, P, O, c, h):
    dt = np.result_type(dy, x)
    d = x.shape[-1]
    rows_x, rows_dy = x.reshape(-1, d), dy.reshape(-1, d)
    grads = {"W_O": np.matmul(O.reshape(-1, d).T, rows_dy, dtype=dt),
             "b_O": np.sum(rows_dy, axis=0, dtype=dt)}
    dO = split_heads(np.matmul(dy, params["W_O"].T, dtype=dt), h)
    dP = np.matmul(dO, np.swapaxes(V, -1, -2), dtype=dt)
    dS = P * (dP - np.sum(dP * P, axis=-1, keepdims=True, dtype=dt)) * dt.type(c)
    dx = np.zeros(x.shape, dtype=dt)
    for k, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q),
                  ("V", np.swapaxes(P, -1, -2) @ dO)):
        dZ = merge_heads(dH).reshape(-1, d)
        grads["W_" + k] = np.matmul(rows_x.T, dZ, dtype=dt)
        grads["b_" + k] = np.sum(dZ, axis=0, dtype=dt)
        dx += np.matmul(dZ, params["W_" + k].T, dtype=dt).reshape(x.shape)
    return dx, grads
''',
    }, note="every constant and accumulator in the inputs' dtype (dt.type(...), dtype=): "
            "float32 in stays float32 throughout; positions stay float64 as the contract "
            "says"),
]
