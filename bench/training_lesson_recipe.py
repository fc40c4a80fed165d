"""The lesson's training recipe, written independently of ``solutions/training.py``.

A float64 baseline for ``bench/training_accuracy.py`` and ``bench/training_bench.py``: the
decoder of the `training` assignment (docs/contract.md, section 3) trained the way the
lesson trains it, in plain NumPy with one array operation per formula (no fused
projections, no flattened parameters), so that its CPU time is that of a straightforward
implementation and its accuracy that of the recipe:

* one ``numpy.random.Generator`` seeded with ``seed`` draws the initial weights (token
  embedding, position table, then per block ``W_Q, W_K, W_V, W_O, W1, W2``, then
  ``W_out``) and afterwards every training batch, ``integers(0, 20, size=(B, L))`` per
  step; the 500 test sequences come from a generator seeded with 999, the same for every
  seed;
* weights ``~ N(0, 1/fan_in)``, embeddings and positions ``~ 0.1 N(0, 1)``, biases 0,
  layer-norm scales 1; pre-LN blocks, layer norm with ``eps = 1e-5``;
* loss: mean next-token cross-entropy over the ``L`` answer positions;
* Adam (Kingma & Ba 2014, arXiv:1412.6980) with ``beta1 = 0.9``, ``beta2 = 0.999``,
  ``eps = 1e-8``, ``lr = 3e-3``, bias-corrected, one update per tensor, constant learning
  rate, no warm-up, no gradient clipping, 1500 steps of batch 32;
* evaluation: greedy generation of the ``L`` answer tokens, each step a full forward pass
  over the prefix (no cache), accuracy per token and per sequence.

Shapes: ``B`` batch, ``T`` positions read (``2L`` in training), ``d`` width, ``h`` heads of
width ``d_h = d / h``, ``F`` FFN width ``4d``, ``V = 21`` vocabulary.
"""

import numpy as np

N_SYMBOLS, SEP, VOCAB = 20, 20, 21
EVAL_SEED = 999


def init_weights(rng, L, d=32, n_layers=2, d_ff=128):
    """Initial parameters, drawn from ``rng`` in the recipe's order.

    Args:
        rng: ``numpy.random.Generator``.
        L: int, symbols per sequence; the position table has ``2L + 1`` rows.
        d, n_layers, d_ff: width, blocks, FFN width.

    Returns:
        dict name -> float64 array: ``"E"`` ``(V, d)``, ``"P"`` ``(2L+1, d)``, per block
        ``l`` ``"{l}.Wq" ... "{l}.Wo"`` ``(d, d)``, ``"{l}.bq" ... "{l}.bo"`` ``(d,)``,
        ``"{l}.g1", "{l}.c1", "{l}.g2", "{l}.c2"`` ``(d,)`` (layer-norm scales and
        shifts), ``"{l}.W1"`` ``(d, F)``, ``"{l}.b1"`` ``(F,)``, ``"{l}.W2"`` ``(F, d)``,
        ``"{l}.b2"`` ``(d,)``; ``"gf", "cf"`` ``(d,)``, ``"Wout"`` ``(d, V)``,
        ``"bout"`` ``(V,)``.
    """
    def matrix(rows, cols):
        return rng.standard_normal((rows, cols)) / np.sqrt(rows)

    w = {"E": 0.1 * rng.standard_normal((VOCAB, d)),
         "P": 0.1 * rng.standard_normal((2 * L + 1, d))}
    for l in range(n_layers):
        for name in "qkvo":
            w[f"{l}.W{name}"] = matrix(d, d)
            w[f"{l}.b{name}"] = np.zeros(d)
        for i in "12":
            w[f"{l}.g{i}"], w[f"{l}.c{i}"] = np.ones(d), np.zeros(d)
        w[f"{l}.W1"], w[f"{l}.b1"] = matrix(d, d_ff), np.zeros(d_ff)
        w[f"{l}.W2"], w[f"{l}.b2"] = matrix(d_ff, d), np.zeros(d)
    w["gf"], w["cf"] = np.ones(d), np.zeros(d)
    w["Wout"], w["bout"] = matrix(d, VOCAB), np.zeros(VOCAB)
    return w


def task_batch(rng, B, L, task):
    """``(inputs, targets, weight)``: ints ``(B, 2L)`` twice and float64 ``(B, 2L)``, 1 on
    the ``L`` answer predictions. One draw ``rng.integers(0, 20, size=(B, L))``."""
    s = rng.integers(0, N_SYMBOLS, size=(B, L))
    answer = np.sort(s, axis=1) if task == "sort" else s
    seq = np.concatenate([s, np.full((B, 1), SEP), answer], axis=1)   # (B, 2L+1)
    weight = np.zeros((B, 2 * L))
    weight[:, L:] = 1.0
    return seq[:, :-1], seq[:, 1:], weight


def _norm(x, g, c, eps=1e-5):
    """Layer norm over the last axis; returns ``(y, (xhat, inv, g))``."""
    mu = x.mean(-1, keepdims=True)
    inv = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x - mu) * inv
    return xhat * g + c, (xhat, inv, g)


def _norm_back(dy, saved):
    """Closed-form layer-norm backward (docs/contract.md, section 2,
    ``layer_norm_backward``); returns ``(dx, dg, dc)``."""
    xhat, inv, g = saved
    dxh = dy * g
    dx = inv * (dxh - dxh.mean(-1, keepdims=True) - xhat * (dxh * xhat).mean(-1, keepdims=True))
    return dx, (dy * xhat).sum((0, 1)), dy.sum((0, 1))


def _heads(M, h):
    """``(B, T, d) -> (B, h, T, d_h)``."""
    B, T, d = M.shape
    return M.reshape(B, T, h, d // h).transpose(0, 2, 1, 3)


def _merge(M):
    """``(B, h, T, d_h) -> (B, T, d)``."""
    B, h, T, dh = M.shape
    return M.transpose(0, 2, 1, 3).reshape(B, T, h * dh)


def _attend(x, w, l, h):
    """Causal multi-head self-attention of block ``l``; returns ``(y, saved)``."""
    Q, K, V = (_heads(x @ w[f"{l}.W{n}"] + w[f"{l}.b{n}"], h) for n in "qkv")   # (B, h, T, d_h)
    T = x.shape[1]
    S = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(Q.shape[-1])                        # (B, h, T, T)
    S = np.where(np.tril(np.ones((T, T), dtype=bool)), S, -np.inf)
    S = np.exp(S - S.max(-1, keepdims=True))
    P = S / S.sum(-1, keepdims=True)
    C = _merge(P @ V)                                                            # (B, T, d)
    return C @ w[f"{l}.Wo"] + w[f"{l}.bo"], (x, Q, K, V, P, C)


def _attend_back(dy, saved, w, l, h, grad):
    """Backward of ``_attend``; adds the parameter gradients into ``grad``, returns ``dx``."""
    x, Q, K, V, P, C = saved
    d = x.shape[-1]
    grad[f"{l}.Wo"] = C.reshape(-1, d).T @ dy.reshape(-1, d)
    grad[f"{l}.bo"] = dy.sum((0, 1))
    dC = _heads(dy @ w[f"{l}.Wo"].T, h)
    dP = dC @ V.transpose(0, 1, 3, 2)
    dV = P.transpose(0, 1, 3, 2) @ dC
    dS = P * (dP - (dP * P).sum(-1, keepdims=True)) / np.sqrt(Q.shape[-1])
    dQ, dK = dS @ K, dS.transpose(0, 1, 3, 2) @ Q
    dx = np.zeros_like(x)
    for n, dM in (("q", dQ), ("k", dK), ("v", dV)):
        dM = _merge(dM)
        grad[f"{l}.W{n}"] = x.reshape(-1, d).T @ dM.reshape(-1, d)
        grad[f"{l}.b{n}"] = dM.sum((0, 1))
        dx += dM @ w[f"{l}.W{n}"].T
    return dx


def forward(w, tokens, n_layers=2, h=4):
    """Logits ``(B, T, V)`` of the pre-LN decoder on ``tokens`` ints ``(B, T)``, and what
    the backward pass needs."""
    T = tokens.shape[1]
    x = w["E"][tokens] + w["P"][:T]
    saved = []
    for l in range(n_layers):
        n1, s1 = _norm(x, w[f"{l}.g1"], w[f"{l}.c1"])
        a, sa = _attend(n1, w, l, h)
        x1 = x + a
        n2, s2 = _norm(x1, w[f"{l}.g2"], w[f"{l}.c2"])
        z = n2 @ w[f"{l}.W1"] + w[f"{l}.b1"]                                   # (B, T, F)
        x = x1 + (np.maximum(z, 0) @ w[f"{l}.W2"] + w[f"{l}.b2"])
        saved.append((s1, sa, n2, z, s2))
    xf, sf = _norm(x, w["gf"], w["cf"])
    return xf @ w["Wout"] + w["bout"], (tokens, saved, xf, sf)


def loss_and_grad(w, tokens, targets, weight, n_layers=2, h=4):
    """Weighted mean cross-entropy and the gradient of every parameter (a dict like ``w``)."""
    logits, (tokens, saved, xf, sf) = forward(w, tokens, n_layers, h)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    prob = e / e.sum(-1, keepdims=True)                                          # (B, T, V)
    picked = np.take_along_axis(prob, targets[..., None], -1)[..., 0]
    loss = -(weight * np.log(picked + 1e-12)).sum() / weight.sum()
    dz = prob.copy()
    np.put_along_axis(dz, targets[..., None], picked[..., None] - 1.0, -1)
    dz *= (weight / weight.sum())[..., None]
    d = xf.shape[-1]
    grad = {"Wout": xf.reshape(-1, d).T @ dz.reshape(-1, dz.shape[-1]), "bout": dz.sum((0, 1))}
    dx, grad["gf"], grad["cf"] = _norm_back(dz @ w["Wout"].T, sf)
    for l in reversed(range(n_layers)):
        s1, sa, n2, z, s2 = saved[l]
        grad[f"{l}.W2"] = np.maximum(z, 0).reshape(-1, z.shape[-1]).T @ dx.reshape(-1, d)
        grad[f"{l}.b2"] = dx.sum((0, 1))
        dzf = (dx @ w[f"{l}.W2"].T) * (z > 0)
        grad[f"{l}.W1"] = n2.reshape(-1, d).T @ dzf.reshape(-1, z.shape[-1])
        grad[f"{l}.b1"] = dzf.sum((0, 1))
        dn2, grad[f"{l}.g2"], grad[f"{l}.c2"] = _norm_back(dzf @ w[f"{l}.W1"].T, s2)
        dx1 = dx + dn2
        dn1, grad[f"{l}.g1"], grad[f"{l}.c1"] = _norm_back(_attend_back(dx1, sa, w, l, h, grad), s1)
        dx = dx1 + dn1
    grad["E"] = np.zeros_like(w["E"])
    np.add.at(grad["E"], tokens, dx)
    grad["P"] = np.zeros_like(w["P"])
    grad["P"][:tokens.shape[1]] = dx.sum(0)
    return loss, grad


def adam_update(w, grad, moments, t, lr=3e-3, b1=0.9, b2=0.999, eps=1e-8):
    """One bias-corrected Adam step at step ``t >= 1``, in place on ``w`` and ``moments``
    (dict name -> ``[m, v]``)."""
    for k, g in grad.items():
        m, v = moments[k]
        m *= b1
        m += (1 - b1) * g
        v *= b2
        v += (1 - b2) * g ** 2
        w[k] -= lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)


def evaluate(w, task, L, n=500, seed=EVAL_SEED, n_layers=2, h=4):
    """Greedy generation of the answers of ``n`` test sequences drawn with ``seed``;
    returns ``(token accuracy, sequence accuracy)`` as floats."""
    rng = np.random.default_rng(seed)
    s = rng.integers(0, N_SYMBOLS, size=(n, L))
    expected = np.sort(s, axis=1) if task == "sort" else s
    seq = np.concatenate([s, np.full((n, 1), SEP)], axis=1)
    for _ in range(L):
        logits, _ = forward(w, seq, n_layers, h)
        seq = np.concatenate([seq, logits[:, -1].argmax(-1)[:, None]], axis=1)
    right = seq[:, L + 1:] == expected
    return float(right.mean()), float(right.all(axis=1).mean())


def train(task, L, seed, steps=1500, batch_size=32, lr=3e-3, eval_size=500):
    """Train and evaluate the recipe's decoder.

    Args:
        task: ``"copy"`` or ``"sort"``.
        L: int, symbols per sequence.
        seed: int, seeds the generator of the weights and the batches.
        steps, batch_size, lr: the recipe's 1500, 32, 3e-3 by default.
        eval_size: test sequences.

    Returns:
        dict: ``token_acc``, ``seq_acc`` (floats), ``final_loss`` (mean of the last 50
        batch losses), ``losses`` float64 ``(steps,)``, ``params``.
    """
    rng = np.random.default_rng(seed)
    w = init_weights(rng, L)
    moments = {k: [np.zeros_like(v), np.zeros_like(v)] for k, v in w.items()}
    losses = np.empty(steps)
    for t in range(1, steps + 1):
        tokens, targets, weight = task_batch(rng, batch_size, L, task)
        losses[t - 1], grad = loss_and_grad(w, tokens, targets, weight)
        adam_update(w, grad, moments, t, lr)
    token_acc, seq_acc = evaluate(w, task, L, eval_size)
    return {"token_acc": token_acc, "seq_acc": seq_acc, "final_loss": float(losses[-50:].mean()),
            "losses": losses, "params": w}
