import numpy as np
# No mathematics anywhere: every function returns zeros (or ones / uniform) of a plausible shape.
def softmax(scores, axis=-1):
    s = np.asarray(scores)
    return np.zeros_like(s, dtype=np.result_type(s, np.float32) if s.dtype == np.float32 else np.float64)
def causal_mask(T):
    return np.zeros((T, T), bool)
def padding_mask(lengths, T):
    return np.zeros((len(lengths), T), bool)
def combine_masks(causal, padding):
    return np.zeros((padding.shape[0],) + causal.shape, bool)
def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
    w = np.zeros(Q.shape[:-1] + (K.shape[-2],), Q.dtype)
    return np.zeros(Q.shape[:-1] + (V.shape[-1],), V.dtype), w
def split_heads(M, n_heads):
    B, T, d = M.shape
    if d % n_heads: raise ValueError
    return np.zeros((B, n_heads, T, d // n_heads), M.dtype)
def merge_heads(M):
    B, h, T, dh = M.shape
    return np.zeros((B, T, h * dh), M.dtype)
def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    B, T, d = X.shape
    return np.zeros_like(X), np.zeros((B, n_heads, T, T), X.dtype)
def sinusoidal_positions(T, d):
    return np.zeros((T, d))
def layer_norm_forward(x, gamma, beta, eps=1e-5):
    return np.zeros_like(x), {}
def layer_norm_backward(dy, cache):
    d = dy.shape[-1]
    return np.zeros_like(dy), np.zeros(d, dy.dtype), np.zeros(d, dy.dtype)
def attention_forward(x, params, n_heads, causal=True, scale=True):
    return np.zeros_like(x), {}
def attention_backward(dy, cache):
    d = dy.shape[-1]
    z = {k: np.zeros((d, d), dy.dtype) for k in ("W_Q", "W_K", "W_V", "W_O")}
    z.update({k: np.zeros(d, dy.dtype) for k in ("b_Q", "b_K", "b_V", "b_O")})
    return np.zeros_like(dy), z
def block_param_count(d, d_ff=None):
    return 0
def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
    return 0
