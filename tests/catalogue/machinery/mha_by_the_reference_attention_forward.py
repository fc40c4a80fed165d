import numpy as np, math
def multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads, mask=None):
    d = X.shape[-1]
    if d % n_heads: raise ValueError("d % n_heads")
    z = np.zeros(d)
    p = {"W_Q": W_Q, "W_K": W_K, "W_V": W_V, "W_O": W_O, "b_Q": z, "b_K": z, "b_V": z, "b_O": z}
    causal = mask is not None
    y, cache = attention_forward(X, p, n_heads, causal=causal, scale=True)
    return y, cache["P"]
