"""Reference solution of assignment `training`: a tiny decoder trained to copy and sort.

The model is the decoder of the `training` assignment (docs/contract.md, section 3): token
embedding plus a learned position table, ``n_layers`` Transformer blocks (pre-LN by
default, post-LN for an ablation), a final layer norm and an output projection, trained
with next-token cross-entropy counted on the answer positions only, with Adam (Kingma & Ba
2014, arXiv:1412.6980).

Shape letters (the glossary of ``solutions.attention``, plus three):

    B    batch size (sequences)          d     model width
    T    sequence length fed to the      h     heads, d_h = d // h
         model (inputs), 2L in training  d_ff  FFN hidden width (4d)
    L    length of the source sequence   V     vocabulary size (21)

Vectors are rows and weights multiply on the right (``x @ W + b``, ``W`` of shape
``(d_in, d_out)``). Token ids are integers, masks booleans with True = "counts" / "may
attend".

**Wiring.** Nothing here imports the attention functions it builds on. Every function
that needs another replaceable function takes an ``ops`` namespace (``make_ops``): the
attention-level functions of assignment `attention` (the student's own or the
reference's) and the pieces of this assignment (``make_batch``, ``masked_cross_entropy``,
``block_backward``, ``adam_step``, ``greedy_generate``, ``answer_accuracy``, the model's
forward and backward). The same code therefore trains on a student's functions in the
notebook and on the reference here, and a grader can swap one piece for the reference
(fault isolation).

**Notebook.** ``authoring/build_training_notebook.py`` copies the functions of this module
into ``source/training/training.ipynb``: each function with a ``### BEGIN SOLUTION`` /
``### END SOLUTION`` region becomes a stub for the students, the others are given code.

Everything is deterministic given a seed: the random draws come from NumPy Generators
passed in. ``train`` lays them out as the lesson does, so that a seed names the same run
there and here: one ``Generator(seed)`` draws the initial weights and then every batch,
and the test sequences come from ``Generator(EVAL_SEED)``, the same for every seed.
"""

import concurrent.futures
import io
import math
import multiprocessing
import os
import time
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

# ---------------------------------------------------------------------------------------
# The tasks. A sequence is [s1 .. sL, SEP, a1 .. aL]: L symbols of an alphabet of 20, a
# separator, and the answer (s itself for `copy`, s sorted for `sort`).

N_SYMBOLS = 20          # symbols 0 .. 19
SEP = 20                # the separator token
VOCAB_SIZE = 21         # 20 symbols + SEP
TASKS = ("copy", "sort")
EVAL_SEED = 999         # the generator of the test sequences, the same for every run (lesson)

# Names an ``ops`` namespace holds: the attention-level functions (assignment `attention`)
# the model is wired from, then the pieces of this assignment.
ATTENTION_OPS = ("softmax", "causal_mask", "split_heads", "merge_heads",
                 "scaled_dot_product_attention", "layer_norm_forward", "layer_norm_backward",
                 "attention_forward", "attention_backward")
TRAINING_OPS = ("make_batch", "masked_cross_entropy", "block_forward", "block_backward",
                "model_forward", "model_backward", "adam_step", "greedy_generate",
                "answer_accuracy")
OPS_NAMES = ATTENTION_OPS + TRAINING_OPS

# The parameters of one block, in the order they are created and flattened.
BLOCK_KEYS = ("ln1_gamma", "ln1_beta", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V",
              "b_O", "ln2_gamma", "ln2_beta", "W1", "b1", "W2", "b2")
ATTENTION_KEYS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")


@dataclass(frozen=True)
class ModelConfig:
    """Hyper-parameters of the decoder (defaults: the reference configuration, L = 6).

    Attributes:
        vocab_size: V, number of token ids (20 symbols + SEP).
        d: model width.
        n_heads: h; must divide ``d``.
        n_layers: number of blocks.
        d_ff: FFN hidden width.
        max_len: rows of the learned position table: ``2L + 1``, one per position of the
            full sequence (the model reads positions ``0 .. 2L-1``; the last row is never
            used but is part of the reference count of 27,253).
        pre_ln: True for pre-LN blocks, False for post-LN (``block_forward``).
        scale: divide attention scores by ``sqrt(d_h)``.
        positions: add the learned position table (False: the ablation without positions).
    """

    vocab_size: int = VOCAB_SIZE
    d: int = 32
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    max_len: int = 13
    pre_ln: bool = True
    scale: bool = True
    positions: bool = True


def make_ops(source, **overrides):
    """Collect the functions the model is wired from into one namespace.

    Args:
        source: a dict (a notebook's ``globals()``) or a module, or a list of them (later
            ones win), holding the names of ``OPS_NAMES``.
        **overrides: functions that replace single names (a grader swaps in the
            student's ``block_backward``, say).

    Returns:
        ``types.SimpleNamespace`` with one attribute per name of ``OPS_NAMES``. A name
        found nowhere (a notebook cell not run yet) gets a function that raises
        ``NameError`` saying so when it is called.

    Raises:
        Nothing itself; the placeholder of a name found nowhere raises ``NameError``
        when it is called.
    """
    sources = source if isinstance(source, (list, tuple)) else [source]
    found = {}
    for src in sources:
        table = src if isinstance(src, dict) else vars(src)
        found.update({n: table[n] for n in OPS_NAMES if callable(table.get(n))})
    found.update(overrides)

    def missing(name):
        def not_defined(*args, **kwargs):
            raise NameError(f"{name} is not defined yet: run the cell that defines it")
        return not_defined

    return SimpleNamespace(**{n: found.get(n) or missing(n) for n in OPS_NAMES})


# ---------------------------------------------------------------------------------------
# Batches.


def make_batch(task, L, batch_size, rng):
    """A fresh random batch of a task, laid out for next-token prediction.

    Each row is one sequence ``[s1 .. sL, SEP, a1 .. aL]`` of length ``2L + 1``: ``L``
    symbols drawn independently and uniformly from ``0 .. N_SYMBOLS-1`` (repeats allowed),
    the separator ``SEP``, then the answer: ``s`` for ``copy``, ``s`` sorted in increasing
    order for ``sort``. The model reads positions ``0 .. 2L-1`` and predicts, at every
    position, the token that follows it (positions ``1 .. 2L``); only the ``L`` predictions
    of the answer tokens count in the loss.

    Args:
        task: ``"copy"`` or ``"sort"``.
        L: int >= 1, number of symbols.
        batch_size: int >= 1, ``B``.
        rng: ``numpy.random.Generator``; the symbols are drawn with
            ``rng.integers(0, N_SYMBOLS, size=(B, L))``, one call per batch.

    Returns:
        ``(inputs, targets, loss_mask)``: ``inputs`` int64 ``(B, 2L)`` = sequence
        positions ``0 .. 2L-1``; ``targets`` int64 ``(B, 2L)`` = positions ``1 .. 2L``;
        ``loss_mask`` bool ``(B, 2L)``, True exactly at the ``L`` answer predictions
        (input positions ``L .. 2L-1``, whose targets are ``a1 .. aL``).

    Raises:
        ValueError: if ``task`` is not ``"copy"`` or ``"sort"``, or ``L`` or
            ``batch_size`` is below 1.
    """
    ### BEGIN SOLUTION
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}: expected 'copy' or 'sort'")
    if L < 1 or batch_size < 1:
        raise ValueError(f"L and batch_size must be at least 1, got {L} and {batch_size}")
    source = rng.integers(0, N_SYMBOLS, size=(batch_size, L))        # (B, L)
    answer = source if task == "copy" else np.sort(source, axis=1)    # (B, L)
    separator = np.full((batch_size, 1), SEP)
    sequence = np.concatenate([source, separator, answer], axis=1).astype(np.int64)  # (B, 2L+1)
    inputs, targets = sequence[:, :-1], sequence[:, 1:]               # (B, 2L) each
    loss_mask = np.zeros((batch_size, 2 * L), dtype=bool)
    loss_mask[:, L:] = True                                           # predictions of a1 .. aL
    return inputs, targets, loss_mask
    ### END SOLUTION


# ---------------------------------------------------------------------------------------
# Parameters.


def init_params(config, rng, dtype=np.float64):
    """Draw the initial parameters of the decoder (the lesson's reference configuration).

    Weights ``~ N(0, 1/fan_in)`` (fan_in = rows of the matrix), token embeddings and the
    position table ``~ 0.1 N(0, 1)``, biases and layer-norm shifts 0, layer-norm scales 1.
    Draws are made in float64 in the lesson's order: embedding, positions, then per block
    ``W_Q, W_K, W_V, W_O, W1, W2``, then ``W_out``; the result is cast to ``dtype``. The
    position table is drawn even when ``config.positions`` is False (and then left out),
    so that the other weights are the same draws with and without positions.

    Args:
        config: ``ModelConfig``.
        rng: ``numpy.random.Generator``.
        dtype: float dtype of the returned arrays.

    Returns:
        dict name -> array: ``"embedding"`` ``(V, d)``, ``"positions"`` ``(max_len, d)``
        (only if ``config.positions``), ``"block{i}.{key}"`` for ``key`` in ``BLOCK_KEYS``
        (``W_*`` ``(d, d)``, ``W1`` ``(d, d_ff)``, ``W2`` ``(d_ff, d)``, vectors ``(d,)``
        or ``(d_ff,)``), ``"ln_f_gamma"``, ``"ln_f_beta"`` ``(d,)``, ``"W_out"`` ``(d, V)``,
        ``"b_out"`` ``(V,)``.

    Raises:
        ValueError: if ``config.d`` is not divisible by ``config.n_heads``.
    """
    d, V, d_ff = config.d, config.vocab_size, config.d_ff
    if d % config.n_heads:
        raise ValueError(f"d = {d} is not divisible by n_heads = {config.n_heads}")

    def weight(rows, cols):
        return rng.standard_normal((rows, cols)) / math.sqrt(rows)

    params = {"embedding": 0.1 * rng.standard_normal((V, d))}
    positions = 0.1 * rng.standard_normal((config.max_len, d))
    if config.positions:
        params["positions"] = positions
    for i in range(config.n_layers):
        block = {"ln1_gamma": np.ones(d), "ln1_beta": np.zeros(d),
                 "ln2_gamma": np.ones(d), "ln2_beta": np.zeros(d)}
        for name in ("Q", "K", "V", "O"):
            block["W_" + name] = weight(d, d)
            block["b_" + name] = np.zeros(d)
        block["W1"], block["b1"] = weight(d, d_ff), np.zeros(d_ff)
        block["W2"], block["b2"] = weight(d_ff, d), np.zeros(d)
        params.update({f"block{i}.{key}": block[key] for key in BLOCK_KEYS})
    params["ln_f_gamma"], params["ln_f_beta"] = np.ones(d), np.zeros(d)
    params["W_out"], params["b_out"] = weight(d, V), np.zeros(V)
    return {name: value.astype(dtype) for name, value in params.items()}


def model_param_count(vocab_size, d, n_layers, max_len, d_ff=None):
    """Number of scalar parameters of the decoder of ``init_params`` (with positions).

    Token embedding ``V d``, position table ``max_len d``, ``n_layers`` pre-LN blocks of
    ``4(d^2 + d) + 2 d d_ff + d_ff + d + 4d`` each (``12 d^2 + 13 d`` when
    ``d_ff = 4d``), final layer norm ``2d``, output projection ``d V + V``. The reference
    configuration (``V = 21, d = 32``, 2 layers, ``max_len = 13``, ``d_ff = 128``) has
    27,253.

    Args:
        vocab_size: int, ``V``.
        d: int, model width.
        n_layers: int, number of blocks.
        max_len: int, rows of the position table.
        d_ff: int or None, FFN hidden width (default ``4 d``).

    Returns:
        int.
    """
    ### BEGIN SOLUTION
    if d_ff is None:
        d_ff = 4 * d
    block = 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d) + 2 * (2 * d)
    embeddings = vocab_size * d + max_len * d
    head = 2 * d + d * vocab_size + vocab_size
    return int(embeddings + n_layers * block + head)
    ### END SOLUTION


def block_params(params, i):
    """The parameters of block ``i`` as a dict keyed by ``BLOCK_KEYS`` (no copies).

    Raises:
        KeyError: if ``params`` has no block ``i`` (a ``block{i}.<key>`` lacks).
    """
    return {key: params[f"block{i}.{key}"] for key in BLOCK_KEYS}


def flatten(arrays, keys):
    """Concatenate ``arrays[k].ravel()`` for ``k`` in ``keys`` into one vector.

    Raises:
        KeyError: if a name of ``keys`` is not in ``arrays``.
        ValueError: if ``keys`` is empty (nothing to concatenate).
    """
    return np.concatenate([arrays[k].ravel() for k in keys])


def unflatten(vector, like, keys):
    """Views into ``vector`` shaped like ``like[k]`` for ``k`` in ``keys`` (no copies).

    Raises:
        KeyError: if a name of ``keys`` is not in ``like``.
        ValueError: if ``vector`` is shorter than the arrays of ``like`` together.
    """
    out, start = {}, 0
    for k in keys:
        size = like[k].size
        out[k] = vector[start:start + size].reshape(like[k].shape)
        start += size
    return out


# ---------------------------------------------------------------------------------------
# One block, forward and backward.


def block_forward(x, params, n_heads, ops, pre_ln=True, scale=True):
    """One causal Transformer block, pre-LN or post-LN.

    Pre-LN (Xiong et al. 2020, arXiv:2002.04745):
    ``x1 = x + MHA(LN1(x))``, ``y = x1 + FFN(LN2(x1))``.
    Post-LN (Vaswani et al. 2017, arXiv:1706.03762):
    ``x1 = LN1(x + MHA(x))``, ``y = LN2(x1 + FFN(x1))``.
    ``FFN(u) = ReLU(u W1 + b1) W2 + b2``; MHA is ``ops.attention_forward`` with the
    causal mask.

    Args:
        x: float ``(B, T, d)``.
        params: dict keyed by ``BLOCK_KEYS`` (``block_params``).
        n_heads: int ``h``.
        ops: namespace with ``layer_norm_forward`` and ``attention_forward``.
        pre_ln: bool, the placement of the layer norms.
        scale: bool, passed to ``attention_forward``.

    Returns:
        ``(y, cache)``: ``y`` float ``(B, T, d)``; ``cache`` a dict with
        ``"pre_ln"`` (bool), ``"ln1"``, ``"ln2"``, ``"attn"`` (the caches of
        ``ops.layer_norm_forward`` and ``ops.attention_forward``), ``"attn_in"`` (the
        attention's input), ``"ffn_in"`` ``(B, T, d)`` (the FFN's input ``u``),
        ``"ffn_pre"`` ``(B, T, d_ff)`` (``u W1 + b1``, before the ReLU),
        ``"ffn_hidden"`` ``(B, T, d_ff)`` (after the ReLU), ``"W1"``, ``"W2"``.

    Raises:
        KeyError: if ``params`` lacks one of ``BLOCK_KEYS``.
        ValueError: if the shapes do not fit (``x`` not ``(B, T, d)`` with ``d`` the
            parameters' width, ``d % n_heads != 0``), as ``ops`` raises it.
    """
    attn_params = {key: params[key] for key in ATTENTION_KEYS}
    cache = {"pre_ln": pre_ln, "W1": params["W1"], "W2": params["W2"]}
    if pre_ln:
        a, cache["ln1"] = ops.layer_norm_forward(x, params["ln1_gamma"], params["ln1_beta"])
        att, cache["attn"] = ops.attention_forward(a, attn_params, n_heads, causal=True,
                                                   scale=scale)
        x1 = x + att
        u, cache["ln2"] = ops.layer_norm_forward(x1, params["ln2_gamma"], params["ln2_beta"])
    else:
        a = x
        att, cache["attn"] = ops.attention_forward(x, attn_params, n_heads, causal=True,
                                                   scale=scale)
        x1, cache["ln1"] = ops.layer_norm_forward(x + att, params["ln1_gamma"],
                                                  params["ln1_beta"])
        u = x1
    pre = u @ params["W1"] + params["b1"]                  # (B, T, d) -> (B, T, d_ff)
    hidden = pre * (pre > 0)                               # ReLU
    f = hidden @ params["W2"] + params["b2"]               # (B, T, d_ff) -> (B, T, d)
    cache.update(attn_in=a, ffn_in=u, ffn_pre=pre, ffn_hidden=hidden)
    if pre_ln:
        y = x1 + f
    else:
        y, cache["ln2"] = ops.layer_norm_forward(x1 + f, params["ln2_gamma"],
                                                 params["ln2_beta"])
    return y, cache


def block_backward(dy, cache, ops):
    """Backward pass of ``block_forward``, for both placements of the layer norms.

    Walk the forward in reverse. A residual sum ``x1 + f`` passes its gradient unchanged
    to both terms, and a value used twice (``x1`` feeds the FFN and the residual) receives
    the sum of both gradients. The FFN: ``dW2 = hidden^T df``, ``db2 = sum df``,
    ``d pre = (df W2^T) * (pre > 0)`` (the ReLU passes the gradient where its input was
    positive), ``dW1 = u^T d pre``, ``db1 = sum d pre``, ``du = d pre W1^T``, with the
    sums over every token (all leading axes). Layer norms and attention go through
    ``ops.layer_norm_backward`` and ``ops.attention_backward`` with the caches in
    ``cache``.

    Args:
        dy: float ``(B, T, d)``, gradient of the loss with respect to the block's output.
        cache: what ``block_forward`` returned (not modified).
        ops: namespace with ``layer_norm_backward`` and ``attention_backward``.

    Returns:
        ``(dx, grads)``: ``dx`` float ``(B, T, d)``; ``grads`` a dict keyed by
        ``BLOCK_KEYS`` with the shapes of the block's parameters.

    Raises:
        KeyError: if ``cache`` is not what ``block_forward`` returned (an entry lacks).
        ValueError: if ``dy``'s shape is not that of the block's output.
    """
    ### BEGIN SOLUTION
    grads = {}

    def ffn_backward(df):
        u, pre, hidden = cache["ffn_in"], cache["ffn_pre"], cache["ffn_hidden"]
        d, d_ff = u.shape[-1], hidden.shape[-1]
        df2 = df.reshape(-1, d)                                        # (B*T, d)
        grads["W2"] = hidden.reshape(-1, d_ff).T @ df2                 # (d_ff, d)
        grads["b2"] = df2.sum(axis=0)
        dpre = (df2 @ cache["W2"].T) * (pre.reshape(-1, d_ff) > 0)     # (B*T, d_ff)
        grads["W1"] = u.reshape(-1, d).T @ dpre                        # (d, d_ff)
        grads["b1"] = dpre.sum(axis=0)
        return (dpre @ cache["W1"].T).reshape(df.shape)                # du: (B, T, d)

    if cache["pre_ln"]:
        dx1 = dy + 0                                                   # residual: y = x1 + f
        du = ffn_backward(dy)
        dln2, grads["ln2_gamma"], grads["ln2_beta"] = ops.layer_norm_backward(du, cache["ln2"])
        dx1 = dx1 + dln2                                               # x1 feeds LN2 and the residual
        da, attn_grads = ops.attention_backward(dx1, cache["attn"])
        dln1, grads["ln1_gamma"], grads["ln1_beta"] = ops.layer_norm_backward(da, cache["ln1"])
        dx = dx1 + dln1                                                # x feeds LN1 and the residual
    else:
        ds2, grads["ln2_gamma"], grads["ln2_beta"] = ops.layer_norm_backward(dy, cache["ln2"])
        dx1 = ds2 + ffn_backward(ds2)                                  # s2 = x1 + FFN(x1)
        ds1, grads["ln1_gamma"], grads["ln1_beta"] = ops.layer_norm_backward(dx1, cache["ln1"])
        dx_attn, attn_grads = ops.attention_backward(ds1, cache["attn"])
        dx = ds1 + dx_attn                                             # s1 = x + MHA(x)
    grads.update({key: attn_grads[key] for key in ATTENTION_KEYS})
    return dx, {key: grads[key] for key in BLOCK_KEYS}
    ### END SOLUTION


# ---------------------------------------------------------------------------------------
# The whole model.


def model_forward(params, inputs, config, ops):
    """Logits of the next token at every position.

    ``h0 = E[inputs] + P[:T]`` (token embedding plus the learned position table, or
    ``E[inputs]`` alone when ``config.positions`` is False), the blocks, the final layer
    norm, then ``logits = LN_f(h) W_out + b_out``.

    Args:
        params: dict of ``init_params``.
        inputs: ints ``(B, T)`` with ``T <= config.max_len``, values in ``0 .. V-1``.
        config: ``ModelConfig``.
        ops: namespace (``make_ops``) with ``block_forward`` and ``layer_norm_forward``
            and what ``block_forward`` uses.

    Returns:
        ``(logits, cache)``: ``logits`` float ``(B, T, V)`` in the dtype of the
        parameters; ``cache`` for ``model_backward``.

    Raises:
        ValueError: if ``T > config.max_len`` with positions.
    """
    inputs = np.asarray(inputs)
    T = inputs.shape[1]
    h = params["embedding"][inputs]                          # (B, T) -> (B, T, d)
    if config.positions:
        if T > params["positions"].shape[0]:
            raise ValueError(f"sequence of length {T} is longer than the position table "
                             f"({params['positions'].shape[0]} rows)")
        h = h + params["positions"][:T]                      # (T, d) broadcast over B
    block_caches = []
    for i in range(config.n_layers):
        h, c = ops.block_forward(h, block_params(params, i), config.n_heads, ops,
                                 pre_ln=config.pre_ln, scale=config.scale)
        block_caches.append(c)
    hf, ln_f = ops.layer_norm_forward(h, params["ln_f_gamma"], params["ln_f_beta"])
    logits = hf @ params["W_out"] + params["b_out"]         # (B, T, d) -> (B, T, V)
    cache = {"inputs": inputs, "blocks": block_caches, "ln_f": ln_f, "hf": hf,
             "config": config, "params": params}
    return logits, cache


def model_backward(dlogits, cache, ops):
    """Gradients of every parameter, given the gradient of the loss w.r.t. the logits.

    Args:
        dlogits: float ``(B, T, V)``.
        cache: what ``model_forward`` returned.
        ops: namespace with ``block_backward`` and ``layer_norm_backward``.

    Returns:
        dict with the keys and shapes of ``cache["params"]``.

    Raises:
        KeyError: if ``cache`` is not what ``model_forward`` returned (an entry lacks).
        ValueError: if ``dlogits``' shape is not that of the logits.
    """
    params, config = cache["params"], cache["config"]
    V, d = params["W_out"].shape[1], params["W_out"].shape[0]
    hf, inputs = cache["hf"], cache["inputs"]
    g2 = dlogits.reshape(-1, V)                              # (B*T, V)
    grads = {"W_out": hf.reshape(-1, d).T @ g2, "b_out": g2.sum(axis=0)}
    dh = dlogits @ params["W_out"].T                         # (B, T, V) -> (B, T, d)
    dh, grads["ln_f_gamma"], grads["ln_f_beta"] = ops.layer_norm_backward(dh, cache["ln_f"])
    for i in reversed(range(config.n_layers)):
        dh, block_grads = ops.block_backward(dh, cache["blocks"][i], ops)
        grads.update({f"block{i}.{key}": block_grads[key] for key in BLOCK_KEYS})
    # Embedding rows are gathered (E[inputs]), so their gradient is a scatter-add over the
    # tokens; written as a product with the one-hot matrix of the inputs, (V, B*T) x (B*T, d).
    one_hot = np.eye(V, dtype=dh.dtype)[inputs.reshape(-1)]           # (B*T, V)
    grads["embedding"] = one_hot.T @ dh.reshape(-1, d)                 # (V, d)
    if config.positions:
        positions = np.zeros(params["positions"].shape, dtype=dh.dtype)
        positions[:dh.shape[1]] = dh.sum(axis=0)             # (B, T, d) -> (T, d)
        grads["positions"] = positions
    return {name: grads[name] for name in params}


def masked_cross_entropy(logits, targets, loss_mask):
    """Mean next-token cross-entropy over the positions where ``loss_mask`` is True.

    ``loss = -(1/N) sum_{(b,t): mask} log softmax(logits[b, t])[targets[b, t]]`` with
    ``N`` the number of True entries, computed stably as
    ``log softmax(z)_k = z_k - m - log sum_j exp(z_j - m)``, ``m = max_j z_j``. Its
    gradient is ``(softmax(logits) - onehot(targets)) / N`` at the masked positions and 0
    elsewhere (the softmax-cross-entropy gradient; Goodfellow, Bengio, Courville,
    *Deep Learning*, section 6.2.2.3).

    Args:
        logits: float ``(B, T, V)``.
        targets: ints ``(B, T)`` in ``0 .. V-1``.
        loss_mask: bool ``(B, T)`` with at least one True.

    Returns:
        ``(loss, dlogits)``: ``loss`` a Python float; ``dlogits`` float ``(B, T, V)``,
        same dtype as ``logits``.

    Raises:
        ValueError: if ``loss_mask`` has no True entry.
    """
    ### BEGIN SOLUTION
    loss_mask = np.asarray(loss_mask, dtype=bool)
    n = int(loss_mask.sum())
    if n == 0:
        raise ValueError("loss_mask selects no position")
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_total = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    log_probs = shifted - log_total                                     # (B, T, V)
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]  # (B, T)
    loss = -float(picked[loss_mask].sum()) / n
    dlogits = np.exp(log_probs)                                         # softmax
    np.put_along_axis(dlogits, targets[..., None],
                      np.take_along_axis(dlogits, targets[..., None], axis=-1) - 1, axis=-1)
    dlogits = dlogits * (loss_mask[..., None] / n).astype(logits.dtype)
    return loss, dlogits
    ### END SOLUTION


# ---------------------------------------------------------------------------------------
# Adam.


def adam_init(params):
    """Adam's state for ``params``: step 0 and zero moments.

    Returns:
        ``{"t": 0, "m": {name: zeros}, "v": {name: zeros}}``, moments shaped and typed
        like ``params``.

    Raises:
        AttributeError: if ``params`` is not a mapping (has no ``items``).
    """
    return {"t": 0, "m": {k: np.zeros_like(v) for k, v in params.items()},
            "v": {k: np.zeros_like(v) for k, v in params.items()}}


def adam_step(params, grads, state, lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    """One step of Adam with bias correction (Kingma & Ba 2014, arXiv:1412.6980, Alg. 1).

    With ``t = state["t"] + 1``, for every parameter ``p`` with gradient ``g``:
    ``m = beta1 m + (1 - beta1) g``, ``v = beta2 v + (1 - beta2) g^2``,
    ``m_hat = m / (1 - beta1^t)``, ``v_hat = v / (1 - beta2^t)``,
    ``p = p - lr m_hat / (sqrt(v_hat) + eps)``.

    Args:
        params: dict name -> float array.
        grads: dict with the same keys and shapes.
        state: ``{"t": int, "m": dict, "v": dict}`` (``adam_init`` or a previous step);
            not modified.
        lr, beta1, beta2, eps: floats.

    Returns:
        ``(new_params, new_state)``: new dicts of new arrays (the inputs are left
        untouched), dtypes as in ``params``; ``new_state["t"] = state["t"] + 1``.

    Raises:
        KeyError: if ``grads``, ``state["m"]`` or ``state["v"]`` lacks a name of ``params``,
            or ``state`` lacks ``"t"``, ``"m"`` or ``"v"``.
        ValueError: if a gradient's shape does not broadcast with its parameter's.
    """
    ### BEGIN SOLUTION
    t = state["t"] + 1
    correction1 = 1.0 - beta1 ** t
    correction2 = 1.0 - beta2 ** t
    new_params, m_new, v_new = {}, {}, {}
    for name, p in params.items():
        g = grads[name]
        m = beta1 * state["m"][name] + (1 - beta1) * g
        v = beta2 * state["v"][name] + (1 - beta2) * (g * g)
        step = lr * (m / correction1) / (np.sqrt(v / correction2) + eps)
        new_params[name] = (p - step).astype(p.dtype, copy=False)
        m_new[name] = m.astype(p.dtype, copy=False)
        v_new[name] = v.astype(p.dtype, copy=False)
    return new_params, {"t": t, "m": m_new, "v": v_new}
    ### END SOLUTION


# ---------------------------------------------------------------------------------------
# Generation and evaluation.


def greedy_generate(params, prompts, n_new, config, ops):
    """Greedy decoding without a cache: ``n_new`` tokens, one full forward pass each.

    At every step run ``ops.model_forward`` on the whole sequence so far (prompt plus the
    tokens generated so far), take the logits of the **last** position, append their
    argmax (ties: the lowest id, as ``np.argmax``), and go on from the extended sequence:
    the model reads its own predictions, never the true answer.

    Args:
        params: dict of ``init_params``.
        prompts: ints ``(B, T0)`` (for the tasks, ``[s1 .. sL, SEP]``, ``T0 = L + 1``);
            not modified.
        n_new: int >= 1, tokens to generate; ``T0 + n_new - 1 <= config.max_len``.
        config: ``ModelConfig``.
        ops: namespace with ``model_forward``.

    Returns:
        ``(tokens, logits)``: ``tokens`` int64 ``(B, n_new)``, the generated tokens;
        ``logits`` float ``(B, n_new, V)``, the logits each token was chosen from.

    Raises:
        ValueError: if ``n_new < 1`` (no token to stack), or the sequence grows past
            ``config.max_len`` with positions (``ops.model_forward`` refuses it).
    """
    ### BEGIN SOLUTION
    sequence = np.array(prompts, dtype=np.int64)                   # (B, T0), a copy
    start = sequence.shape[1]
    chosen_logits = []
    for _ in range(n_new):
        logits, _ = ops.model_forward(params, sequence, config, ops)  # (B, T, V)
        last = logits[:, -1, :]                                      # (B, V)
        chosen_logits.append(last)
        next_token = np.argmax(last, axis=-1).astype(np.int64)       # (B,)
        sequence = np.concatenate([sequence, next_token[:, None]], axis=1)
    return sequence[:, start:], np.stack(chosen_logits, axis=1)
    ### END SOLUTION


def generate_with_cache(params, prompts, n_new, config, ops):
    """Greedy decoding with a KV cache; the same tokens and logits as ``greedy_generate``.

    Keys and values of past positions never change (the causal mask: position ``j``
    depends on tokens ``0 .. j`` only), so each layer keeps them in a cache, preallocated
    for the whole generation (``(B, h, T0 + n_new, d_h)`` per layer, filled left to right).
    The prompt is run once (prefill, causal attention over ``T0`` positions); then every
    new token costs one query row per layer: ``q`` ``(B, h, 1, d_h)`` against the cached
    keys and values ``(B, h, t, d_h)`` with ``ops.scaled_dot_product_attention`` (no mask:
    every cached position is in the past). The three projections of a layer are one
    product with ``[W_Q | W_K | W_V]`` ``(d, 3d)``, concatenated once. Built from
    ``ops.split_heads``, ``ops.merge_heads``, ``ops.scaled_dot_product_attention``,
    ``ops.causal_mask`` and ``ops.layer_norm_forward``; the arithmetic of a block is that
    of ``block_forward``.

    Args:
        params, prompts, n_new, config: as for ``greedy_generate``.
        ops: namespace (``make_ops``).

    Returns:
        ``(tokens, logits)`` as ``greedy_generate``.

    Raises:
        ValueError: if ``n_new < 1`` (no token to stack), or the sequence grows past
            ``config.max_len`` with positions (the position rows do not broadcast);
            whatever a function of ``ops`` raises.
    """
    h, d = config.n_heads, config.d
    sequence = np.array(prompts, dtype=np.int64)
    B, T0 = sequence.shape
    dtype = params["embedding"].dtype
    blocks = [block_params(params, i) for i in range(config.n_layers)]
    fused = [(np.concatenate([p["W_Q"], p["W_K"], p["W_V"]], axis=1),       # (d, 3d)
              np.concatenate([p["b_Q"], p["b_K"], p["b_V"]])) for p in blocks]
    shape = (B, h, T0 + n_new, d // h)
    keys = [np.zeros(shape, dtype=dtype) for _ in blocks]
    values = [np.zeros(shape, dtype=dtype) for _ in blocks]

    def attend(i, a, first):
        """Attention of layer ``i`` for the new rows ``a`` (B, n, d) at positions
        ``first .. first+n-1``, writing their keys and values into the cache."""
        W, b = fused[i]
        qkv = a @ W + b                                                # (B, n, 3d)
        q = ops.split_heads(qkv[..., :d], h)                           # (B, h, n, d_h)
        n = a.shape[1]
        keys[i][:, :, first:first + n] = ops.split_heads(qkv[..., d:2 * d], h)
        values[i][:, :, first:first + n] = ops.split_heads(qkv[..., 2 * d:], h)
        t = first + n                                                  # positions cached
        mask = ops.causal_mask(t)[first:t] if n > 1 else None          # (n, t) rows
        out, _ = ops.scaled_dot_product_attention(q, keys[i][:, :, :t], values[i][:, :, :t],
                                                  mask=mask, scale=config.scale)
        return ops.merge_heads(out) @ blocks[i]["W_O"] + blocks[i]["b_O"]   # (B, n, d)

    def step(tokens, first):
        """Logits of the last of ``tokens`` (B, n), which sit at positions first.."""
        x = params["embedding"][tokens]
        if config.positions:
            x = x + params["positions"][first:first + tokens.shape[1]]
        for i, p in enumerate(blocks):
            if config.pre_ln:
                a, _ = ops.layer_norm_forward(x, p["ln1_gamma"], p["ln1_beta"])
                x1 = x + attend(i, a, first)
                u, _ = ops.layer_norm_forward(x1, p["ln2_gamma"], p["ln2_beta"])
            else:
                x1, _ = ops.layer_norm_forward(x + attend(i, x, first), p["ln1_gamma"],
                                               p["ln1_beta"])
                u = x1
            f = np.maximum(u @ p["W1"] + p["b1"], 0) @ p["W2"] + p["b2"]
            if config.pre_ln:
                x = x1 + f
            else:
                x, _ = ops.layer_norm_forward(x1 + f, p["ln2_gamma"], p["ln2_beta"])
        hf, _ = ops.layer_norm_forward(x[:, -1:], params["ln_f_gamma"], params["ln_f_beta"])
        return (hf @ params["W_out"] + params["b_out"])[:, 0]             # (B, V)

    chosen_logits, generated = [], []
    last = step(sequence, 0)                                              # prefill
    for n in range(n_new):
        chosen_logits.append(last)
        next_token = np.argmax(last, axis=-1).astype(np.int64)
        generated.append(next_token)
        if n + 1 < n_new:
            last = step(next_token[:, None], T0 + n)
    return np.stack(generated, axis=1), np.stack(chosen_logits, axis=1)


def answer_accuracy(generated, expected):
    """Per-token and per-sequence accuracy of generated answers.

    Args:
        generated: ints ``(B, L)``, the model's answers.
        expected: ints ``(B, L)``, the true answers.

    Returns:
        ``(token_accuracy, sequence_accuracy)``: Python floats in ``[0, 1]``; the share
        of answer tokens equal to the expected ones, and the share of sequences whose
        ``L`` tokens are all right.

    Raises:
        ValueError: if the shapes differ.
    """
    ### BEGIN SOLUTION
    generated, expected = np.asarray(generated), np.asarray(expected)
    if generated.shape != expected.shape:
        raise ValueError(f"shapes differ: {generated.shape} and {expected.shape}")
    right = generated == expected                                      # (B, L)
    return float(right.mean()), float(right.all(axis=1).mean())
    ### END SOLUTION


def evaluate(params, config, task, L, n_sequences, rng, ops):
    """Real greedy generation of the ``L`` answer tokens of ``n_sequences`` test sequences.

    The test sequences come from ``ops.make_batch(task, L, n_sequences, rng)``; the
    prompt is ``[s1 .. sL, SEP]`` (input positions ``0 .. L``), the expected answer the
    targets of positions ``L .. 2L-1``.

    Returns:
        dict: ``token_acc``, ``seq_acc`` (floats), ``source`` ints ``(n, L)``,
        ``expected`` and ``generated`` ints ``(n, L)``, ``correct`` bool ``(n,)``.

    Raises:
        ValueError: from ``ops.make_batch`` (unknown ``task``, ``L`` or ``n_sequences``
            below 1) or ``ops.greedy_generate``; whatever a function of ``ops`` raises.
    """
    inputs, targets, _ = ops.make_batch(task, L, n_sequences, rng)
    prompts, expected = inputs[:, :L + 1], targets[:, L:]
    generated, _ = ops.greedy_generate(params, prompts, L, config, ops)
    token_acc, seq_acc = ops.answer_accuracy(generated, expected)
    return {"token_acc": token_acc, "seq_acc": seq_acc, "source": inputs[:, :L],
            "expected": expected, "generated": generated,
            "correct": np.all(generated == expected, axis=1)}


# ---------------------------------------------------------------------------------------
# Training.


def train(task, L, seed, ops, steps=1500, batch_size=32, lr=3e-3, d=32, n_heads=4,
          n_layers=2, d_ff=128, pre_ln=True, scale=True, positions=True, eval_size=500,
          dtype=np.float32, progress=None):
    """Train the decoder on ``task`` with sequences of ``L`` symbols; evaluate it.

    The random numbers are laid out as in the lesson, so that a seed names the same run
    there and here: ``np.random.default_rng(seed)`` draws the initial weights
    (``init_params``) and then the training batches (a fresh batch every step, one draw
    each), and the ``eval_size`` test sequences come from
    ``np.random.default_rng(EVAL_SEED)``, the same for every seed. Adam is elementwise,
    so one call of ``ops.adam_step`` on the concatenation of every parameter is the same
    step as one call per tensor; the loop keeps the parameters in one flat vector
    (``flatten``/``unflatten``) and saves a few hundred small NumPy calls per step. When
    ``ops`` has ``adam_in_place`` (``fast_ops``, whose ``adam_step`` is ``fast_adam_step``)
    that step is taken in place on the vector (the same numbers, no new vectors, the
    parameters views into it).
    It first calls ``keep_freed_memory``, so that the temporaries freed at each step are
    reused rather than page-faulted in again (glibc; elsewhere nothing changes).

    Args:
        task: ``"copy"`` or ``"sort"``.
        L: int, symbols per sequence (the model sees ``2L`` positions).
        seed: int.
        ops: namespace (``make_ops``) of every function the model is wired from. If it
            has an attribute ``loss_and_grads`` (``fast_ops``), each step calls
            ``ops.loss_and_grads(params, inputs, targets, loss_mask, config, ops)`` ->
            ``(loss, grads)`` in place of ``model_forward``, ``masked_cross_entropy`` and
            ``model_backward``. If it has ``adam_in_place`` (``fast_ops``), each Adam step
            is ``ops.adam_in_place(theta, gradient, m, v, t, work, lr=lr)`` -> ``t`` on
            the flat vectors, in place of ``ops.adam_step``.
        steps, batch_size, lr: training length, sequences per batch, Adam's step size.
        d, n_heads, n_layers, d_ff, pre_ln, scale, positions: the model
            (``ModelConfig``; ``max_len = 2L + 1``).
        eval_size: int, test sequences.
        dtype: float dtype of the parameters and of the arithmetic. float32 is faster;
            over 20 seeds its accuracy cannot be told from float64's
            (``bench/training_accuracy.py``), though a given seed ends elsewhere: training
            is chaotic, and rounding differences change its course after some hundred
            steps, in float64 too.
        progress: None or a callable ``progress(steps_done)`` called every 50 steps and
            at the end.

    Returns:
        dict: ``losses`` float64 ``(steps,)`` (the batch loss of every step),
        ``final_loss`` (mean of the last 50 batch losses), ``token_acc``, ``seq_acc``,
        ``evaluation`` (``evaluate``'s dict), ``params`` (the trained parameters),
        ``config``, ``seconds`` (wall time of training and evaluation), ``task``, ``L``,
        ``seed``, ``lr``.

    Raises:
        ValueError: if ``task`` is unknown or ``L``/``batch_size`` below 1
            (``ops.make_batch``), or ``d`` is not divisible by ``n_heads``
            (``init_params``); whatever a function of ``ops`` raises (``NameError`` for a
            notebook cell not run, ``NotImplementedError`` for a stub).
    """
    started = time.perf_counter()
    keep_freed_memory()                                  # no page faults at every step
    config = ModelConfig(d=d, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff,
                         max_len=2 * L + 1, pre_ln=pre_ln, scale=scale, positions=positions)
    rng = np.random.default_rng(seed)                    # weights first, then the batches
    params = init_params(config, rng, dtype=dtype)
    keys = list(params)
    theta = flatten(params, keys)                        # every parameter, one vector
    state = adam_init({"theta": theta})
    adam_in_place = getattr(ops, "adam_in_place", None)  # the same step, in place
    in_place = adam_in_place is not None
    if in_place:
        params = unflatten(theta, params, keys)          # views, updated with theta
        gradient, work = np.empty_like(theta), np.empty_like(theta)
        gradient_views = unflatten(gradient, params, keys)
    losses = np.empty(steps)
    loss_and_grads = getattr(ops, "loss_and_grads", None)   # a faster path of the 3 calls
    for step in range(steps):
        inputs, targets, loss_mask = ops.make_batch(task, L, batch_size, rng)
        if loss_and_grads is None:
            logits, cache = ops.model_forward(params, inputs, config, ops)
            loss, dlogits = ops.masked_cross_entropy(logits, targets, loss_mask)
            grads = ops.model_backward(dlogits, cache, ops)
        else:
            loss, grads = loss_and_grads(params, inputs, targets, loss_mask, config, ops)
        if in_place:
            for k in keys:                                   # flatten(grads, keys), no copies
                gradient_views[k][...] = grads[k]
            state["t"] = adam_in_place(theta, gradient, state["m"]["theta"],
                                       state["v"]["theta"], state["t"], work, lr=lr)
        else:
            new, state = ops.adam_step({"theta": theta}, {"theta": flatten(grads, keys)},
                                       state, lr=lr)
            theta = new["theta"]
            params = unflatten(theta, params, keys)
        losses[step] = loss
        if progress is not None and ((step + 1) % 50 == 0 or step + 1 == steps):
            progress(step + 1)
    evaluation = evaluate(params, config, task, L, eval_size, np.random.default_rng(EVAL_SEED),
                          ops)
    return {"task": task, "L": L, "seed": seed, "lr": lr, "config": config,
            "losses": losses, "final_loss": float(losses[-50:].mean()),
            "token_acc": evaluation["token_acc"], "seq_acc": evaluation["seq_acc"],
            "evaluation": evaluation, "params": params,
            "seconds": time.perf_counter() - started}


# ---------------------------------------------------------------------------------------
# Looking inside: attention maps, the cost of attention.


def attention_maps(params, inputs, config, ops):
    """The attention weights of every layer of the model on ``inputs``.

    Recomputed from each block's attention input (``cache["attn_in"]`` of
    ``block_forward``) with ``ops.split_heads`` and ``ops.scaled_dot_product_attention``
    (causal mask, the model's scaling), so that it does not depend on what a student's
    ``attention_forward`` keeps in its cache.

    Args:
        params, config, ops: the model.
        inputs: ints ``(B, T)``.

    Returns:
        list over layers of float ``(B, h, T, T)`` arrays; ``[l][b, k, i, j]`` is the
        weight query ``i`` of head ``k`` of layer ``l + 1`` gives to key ``j``.

    Raises:
        ValueError: if ``T > config.max_len`` with positions (``ops.model_forward``);
            whatever a function of ``ops`` raises.
    """
    _, cache = ops.model_forward(params, inputs, config, ops)
    maps = []
    for i, block_cache in enumerate(cache["blocks"]):
        p, a = block_params(params, i), block_cache["attn_in"]
        q = ops.split_heads(a @ p["W_Q"] + p["b_Q"], config.n_heads)     # (B, h, T, d_h)
        k = ops.split_heads(a @ p["W_K"] + p["b_K"], config.n_heads)
        v = ops.split_heads(a @ p["W_V"] + p["b_V"], config.n_heads)
        mask = ops.causal_mask(inputs.shape[1])
        _, weights = ops.scaled_dot_product_attention(q, k, v, mask=mask, scale=config.scale)
        maps.append(weights)
    return maps


def attention_cost(sdpa, causal_mask, T_values=(128, 512, 2048), d_k=64, repeats=5, seed=0):
    """Time and peak memory of causal self-attention as the sequence grows.

    For each ``T``: ``Q, K, V`` of shape ``(T, d_k)`` in float64, one call of
    ``sdpa(Q, K, V, mask=causal_mask(T))``; the time is the best of ``repeats`` calls
    (``time.perf_counter``), the memory the peak NumPy allocation during one call
    (``tracemalloc``, which NumPy reports to). The slopes are least-squares fits of
    ``log(time)`` and ``log(memory)`` against ``log(T)``: 2 means quadratic growth.

    Returns:
        dict: ``T`` (list), ``seconds`` (list), ``peak_bytes`` (list),
        ``matrix_bytes`` (the T x T float64 matrix), ``qkv_bytes`` (Q, K, V together),
        ``time_slope``, ``memory_slope`` (floats).

    Raises:
        Whatever ``sdpa`` or ``causal_mask`` raise; nothing of its own.
    """
    import tracemalloc

    rng = np.random.default_rng(seed)
    seconds, peaks = [], []
    for T in T_values:
        Q, K, V = (rng.standard_normal((T, d_k)) for _ in range(3))
        mask = causal_mask(T)
        best = math.inf
        for _ in range(repeats):
            started = time.perf_counter()
            sdpa(Q, K, V, mask=mask)
            best = min(best, time.perf_counter() - started)
        tracemalloc.start()
        sdpa(Q, K, V, mask=mask)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        seconds.append(best)
    logT = np.log(np.asarray(T_values, dtype=np.float64))
    return {"T": list(T_values), "seconds": seconds, "peak_bytes": peaks,
            "matrix_bytes": [T * T * 8 for T in T_values],
            "qkv_bytes": [3 * T * d_k * 8 for T in T_values],
            "time_slope": float(np.polyfit(logT, np.log(seconds), 1)[0]),
            "memory_slope": float(np.polyfit(logT, np.log(peaks), 1)[0])}


# ---------------------------------------------------------------------------------------
# Running many trainings: one process per run, a progress bar.


class ProgressBar:
    """A rich progress bar that also works inside a Jupyter notebook.

    In a terminal it is rich's own live bar (on stderr). In a notebook kernel it is
    rendered by rich to text and HTML and shown with one IPython display that is updated
    in place, so it needs no widget library and the saved notebook keeps its final state.

    Args:
        total: int, units of work (training steps).
        description: str, shown left of the bar.
    """

    def __init__(self, total, description):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                         TextColumn("steps"), TimeElapsedColumn(), TextColumn("left"),
                         TimeRemainingColumn())
        self._handle = None
        self._last = 0.0
        try:
            from IPython import get_ipython

            in_kernel = get_ipython() is not None and hasattr(get_ipython(), "kernel")
        except ImportError:
            in_kernel = False
        if in_kernel:
            from IPython.display import display

            self._progress = Progress(*self._columns, auto_refresh=False,
                                      console=Console(file=io.StringIO(), width=110,
                                                      force_jupyter=False))
            self._task = self._progress.add_task(description, total=total)
            self._handle = display(self._bundle(), raw=True, display_id=True)
        else:
            self._progress = Progress(*self._columns, console=Console(stderr=True))
            self._task = self._progress.add_task(description, total=total)
            self._progress.start()

    def _bundle(self):
        from rich.console import Console

        console = Console(record=True, file=io.StringIO(), width=110, force_terminal=True,
                          force_jupyter=False, color_system="truecolor")
        console.print(self._progress.get_renderable())
        text = console.export_text(clear=False)
        html = console.export_html(inline_styles=True, code_format="<pre style=\"margin:0; "
                                   "font-family:monospace\">{code}</pre>")
        return {"text/plain": text.rstrip(), "text/html": html}

    def update(self, completed, force=False):
        """Set the number of units done; the display is redrawn at most 4 times a second.

        Raises:
            Nothing of its own; an error of the display (``rich``, IPython) propagates.
        """
        self._progress.update(self._task, completed=completed)
        now = time.monotonic()
        if self._handle is not None and (force or now - self._last > 0.25):
            self._handle.update(self._bundle(), raw=True)
            self._last = now

    def close(self):
        """Draw the final state and stop.

        Raises:
            Nothing of its own; an error of the display (``rich``, IPython) propagates.
        """
        if self._handle is not None:
            self.update(self._progress.tasks[0].completed, force=True)
        else:
            self._progress.stop()


def limit_blas_threads(n=1):
    """Ask the OpenBLAS that NumPy loaded to use ``n`` threads from now on.

    The matrices of this model are far too small to gain from several BLAS threads, and
    when every core is busy (one training process per core, or other work on the machine)
    OpenBLAS's threads wait for each other and a training runs many times slower. Setting
    ``OPENBLAS_NUM_THREADS=1`` before NumPy is imported does the same; this function is
    for processes where NumPy is already loaded. It looks for the library among the
    process's mapped files (Linux) and calls its ``*set_num_threads*`` entry point: NumPy's
    wheels bundle OpenBLAS as ``libscipy_openblas64_`` with the symbol
    ``scipy_openblas_set_num_threads64_``.

    Returns:
        bool, True if a library took the setting.

    Raises:
        Nothing: without ``/proc/self/maps`` or a loadable library it returns False.
    """
    import ctypes

    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower()})
    except OSError:
        return False
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                       "openblas_set_num_threads64_", "openblas_set_num_threads"):
            setter = getattr(library, symbol, None)
            if setter is not None:
                setter(ctypes.c_int(n))
                return True
    return False


def keep_freed_memory(limit=32 * 2**20):
    """Ask the C library's allocator (glibc's ``malloc``) to keep freed memory, up to
    ``limit`` bytes, for the next allocations instead of giving it back to the kernel.

    A training step allocates and frees the same temporaries at every step. By default
    glibc maps a block above a moving threshold (128 KiB at first) on its own and unmaps it
    when it is freed, and trims the top of its heap whenever more than twice that threshold
    is free there; each time the memory comes back it is page-faulted in and zeroed by the
    kernel again. In the kit's training (``fast_ops``, float32, copy, L = 6) that was about
    36 page faults per step and roughly a tenth of its CPU time; with these settings it is
    none. It sets ``M_TRIM_THRESHOLD`` and ``M_MMAP_THRESHOLD`` with ``mallopt(3)``: blocks
    up to ``limit`` come from the heap, and the heap keeps up to ``limit`` free bytes. The
    process keeps at most that much memory it does not use; blocks larger than ``limit``
    are still mapped and unmapped on their own.

    Args:
        limit: int, bytes. glibc refuses an mmap threshold above its maximum (32 MiB on
            64-bit in its documentation): then nothing is set.

    Returns:
        bool, True if the allocator took both settings (glibc); False elsewhere (another C
        library, or Windows), where nothing changes.

    Raises:
        Nothing.
    """
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    m_trim_threshold, m_mmap_threshold = -1, -3                       # <malloc.h>
    return bool(mallopt(m_mmap_threshold, limit)) and bool(mallopt(m_trim_threshold, limit))


_QUEUE = None


def _experiment_worker_init(queue):
    global _QUEUE
    _QUEUE = queue
    limit_blas_threads(1)  # one process per core: one BLAS thread per process


def _experiment_run(index, job, ops_factory):
    def report(steps_done):
        _QUEUE.put((index, steps_done))

    return train(ops=ops_factory(), progress=report, **job)


def run_experiments(jobs, ops_factory, workers=None, description="training", progress=True):
    """Run ``train(**job, ops=ops_factory())`` for every job, one process per run.

    The processes are forked (``multiprocessing`` context ``"fork"``), so every function
    the runs need, a notebook's included, is inherited rather than pickled; each uses one
    BLAS thread (``limit_blas_threads``) and reports its steps through a queue to one
    progress bar. Where processes cannot be forked (Windows), or with ``workers=1``, the
    runs go one after the other in this process, with the same results.

    Args:
        jobs: list of dicts of keyword arguments of ``train`` (without ``ops``).
        ops_factory: callable returning the ``ops`` namespace, called in each process.
        workers: int, processes at a time (default: the number of CPU cores).
        description: str, the progress bar's label.
        progress: bool, show a progress bar.

    Returns:
        list of ``train``'s results, in the order of ``jobs``.

    Raises:
        Whatever ``train`` raises in a run (from a worker process, re-raised here by
        ``Future.result``); ``concurrent.futures.process.BrokenProcessPool`` if a worker
        process dies.
    """
    workers = workers or os.cpu_count() or 1
    total = sum(job.get("steps", 1500) for job in jobs)
    done = [0] * len(jobs)
    bar = ProgressBar(total, description) if progress else None
    if workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        results = []
        for i, job in enumerate(jobs):
            def report(steps_done, i=i):
                done[i] = steps_done
                if bar is not None:
                    bar.update(sum(done))
            results.append(train(ops=ops_factory(), progress=report, **job))
        if bar is not None:
            bar.close()
        return results
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context,
                                                initializer=_experiment_worker_init,
                                                initargs=(queue,)) as pool:
        futures = [pool.submit(_experiment_run, i, job, ops_factory)
                   for i, job in enumerate(jobs)]
        pending = set(futures)
        while pending:
            _, pending = concurrent.futures.wait(pending, timeout=0.2)
            while not queue.empty():
                index, steps_done = queue.get()
                done[index] = steps_done
            if bar is not None:
                bar.update(sum(done))
        results = [f.result() for f in futures]
    if bar is not None:
        bar.update(total, force=True)
        bar.close()
    return results


# ---------------------------------------------------------------------------------------
# Fast kernels: the functions the training loop calls, with the same contracts, written for
# speed on this tiny model (``fast_ops``; the bench and ``train``'s callers on the
# instructor's side use them; the notebook runs the students' own functions instead). At
# these sizes (B = 32, T = 12, d = 32) the time goes to the number of NumPy calls and to
# the temporaries they allocate rather than to arithmetic, so what differs from the plain
# reference is written to make fewer, larger calls:
#
# * one fused (d, 3d) projection for Q, K and V instead of three, with the score scaling
#   folded into the query columns of that projection (``(c q) k^T = c (q k^T)``);
# * every product on 2-D ``(B*T, .)`` arrays (a 3-D array times a matrix is a loop of
#   small products in NumPy), and the attention output written by ``matmul`` straight into
#   the merged-heads layout;
# * sums and means over a short axis written as products with a vector of ones (NumPy's
#   reductions over a short axis cost several times a BLAS call);
# * the causal mask added as a cached (T, T) matrix of 0 and -inf; the softmax without the
#   guards for fully masked rows (a causal row always sees its own position), in place;
# * arithmetic in place on arrays the function owns; the loss computed on the masked rows
#   only; greedy evaluation with the KV cache (``generate_with_cache``);
# * the backward of the head, the final layer norm and the last block run on the answer
#   rows only: the gradient of the logits is 0 elsewhere, and in a pre-LN block only the
#   attention mixes positions (``_block_backward_suffix``);
# * the gradient of the key bias ``b_K`` returned as exact zeros. It is 0 in exact
#   arithmetic: ``b_K`` adds ``q_i . b_K`` to every score of query row ``i``, the same for
#   every key, and the softmax of a row does not change when a constant is added to it
#   (equivalently, ``db_K = sum_i q_i sum_j dS_ij`` and every row of ``dS`` sums to 0).
#   Computed as a sum, it is rounding noise: about 1e-17 in float64, far below Adam's
#   ``eps = 1e-8``, so ``b_K`` stays at 0; but about 1e-9 to 1e-8 in float32, where Adam
#   divides it by its own root mean square and turns it into steps of up to ``lr``, and
#   ``b_K`` drifts (to a norm of about 0.05-0.07 over 1500 steps) on noise alone.
#
# The arithmetic is otherwise the same, so float64 results agree with the reference to
# rounding (tests/test_training_reference.py), and float32 stays float32 throughout (no float64
# temporaries: the scalars are Python floats).

_CAUSAL_ADD = {}
_CONSTANTS = {}


def _causal_additive(T, dtype):
    """(T, T) matrix with 0 where key j <= query i and -inf above the diagonal (cached)."""
    key = (T, np.dtype(dtype).str)
    if key not in _CAUSAL_ADD:
        _CAUSAL_ADD[key] = np.where(np.tril(np.ones((T, T), dtype=bool)), 0.0,
                                    -np.inf).astype(dtype)
    return _CAUSAL_ADD[key]


def _constant(kind, n, dtype):
    """Small constant arrays of ``dtype``, built once (read-only): ``"ones"`` ``(n,)``,
    ``"ones_column"`` ``(n, 1)``, ``"ones_square"`` ``(n, n)``, ``"mean_column"``
    ``(n, 1)`` filled with ``1/n``,
    ``"eye"`` ``(n, n)``."""
    key = (kind, n, dtype)
    array = _CONSTANTS.get(key)
    if array is None:
        array = {"ones": lambda: np.ones(n),
                 "ones_column": lambda: np.ones((n, 1)),
                 "ones_square": lambda: np.ones((n, n)),
                 "mean_column": lambda: np.full((n, 1), 1.0 / n),
                 "eye": lambda: np.eye(n)}[kind]().astype(dtype)
        array.flags.writeable = False
        _CONSTANTS[key] = array
    return array


def _row_sum(a):
    """``a.sum(axis=-1, keepdims=True)`` as one 2-D product with a column of ones: NumPy's
    reductions over a short last axis cost several times more than this BLAS call (and a
    product of a stacked array would be a loop of small ones, hence the reshape)."""
    n = a.shape[-1]
    return (a.reshape(-1, n) @ _constant("ones_column", n, a.dtype)).reshape(a.shape[:-1] + (1,))


def _row_sum_spread(a):
    """Every row's sum over the last axis written at each of its places, shape ``a.shape``
    (``a.sum(axis=-1, keepdims=True)`` broadcast): one 2-D product with an ``(n, n)``
    matrix of ones. Dividing or subtracting it is then an elementwise operation of equal
    shapes, which NumPy runs several times faster than one broadcasting a column over a
    short last axis."""
    n = a.shape[-1]
    return (a.reshape(-1, n) @ _constant("ones_square", n, a.dtype)).reshape(a.shape)


def _column_sum(a):
    """``a.sum(axis=0)`` of a 2-D array as a product with a row of ones (BLAS)."""
    return _constant("ones", a.shape[0], a.dtype) @ a


def _softmax_rows(scores):
    """Softmax over the last axis, **in place** (``scores`` is overwritten and returned).
    ``exp`` is taken without subtracting the row maximum, which is safe while every row's
    sum is finite and positive (scores between about -87 and 88 in float32); otherwise the
    stable form with the maximum is used."""
    exps = np.exp(scores)
    total = _row_sum_spread(exps)                                  # each row's sum, spread
    first = total.reshape(-1, total.shape[-1])[:, 0]               # one per row (a view)
    if not (0.0 < first.min() and first.max() < math.inf):       # False for NaN too
        exps = np.exp(scores - scores.max(axis=-1, keepdims=True))
        total = _row_sum_spread(exps)
    np.divide(exps, total, out=scores)
    return scores


def fast_layer_norm_forward(x, gamma, beta, eps=1e-5):
    """``layer_norm_forward`` (same contract; the cache holds ``xhat`` ``(..., d)``, ``inv``
    ``(..., 1)`` and ``gamma``, as the reference's). The means are 2-D products with a column
    of ``1/d``.

    Raises:
        ValueError: if ``gamma`` or ``beta`` does not broadcast with ``x``'s last axis.
    """
    shape, d = x.shape, x.shape[-1]
    x2 = x.reshape(-1, d)
    to_mean = _constant("mean_column", d, x.dtype)
    xhat = x2 - x2 @ to_mean                                        # centred, (N, d)
    inv = (xhat * xhat) @ to_mean                                   # variance, (N, 1)
    inv += eps
    np.sqrt(inv, out=inv)
    np.divide(1.0, inv, out=inv)                                    # 1 / sqrt(var + eps)
    xhat *= inv
    y = xhat * gamma
    y += beta
    return y.reshape(shape), {"xhat": xhat.reshape(shape), "inv": inv.reshape(shape[:-1] + (1,)),
                              "gamma": gamma}


def fast_layer_norm_backward(dy, cache):
    """``layer_norm_backward``: ``dx = inv (g - mean(g) - xhat mean(g xhat))``, ``g = dy gamma``
    (same contract; the means are products with a column of ``1/d``, the sums over the
    tokens products with a row of ones).

    Raises:
        KeyError: if ``cache`` is not what ``fast_layer_norm_forward`` returned.
        ValueError: if ``dy``'s shape is not that of the cached ``xhat``.
    """
    xhat, inv, gamma = cache["xhat"], cache["inv"], cache["gamma"]
    shape, d = dy.shape, dy.shape[-1]
    dy2, xhat2 = dy.reshape(-1, d), xhat.reshape(-1, d)
    to_mean = _constant("mean_column", d, dy.dtype)
    g = dy2 * gamma                                                 # (N, d)
    dx = g - g @ to_mean
    g *= xhat2
    np.multiply(xhat2, g @ to_mean, out=g)                          # xhat mean(g xhat)
    dx -= g
    dx *= inv.reshape(-1, 1)
    np.multiply(dy2, xhat2, out=g)
    ones = _constant("ones", g.shape[0], g.dtype)
    return dx.reshape(shape), ones @ g, ones @ dy2


def fast_attention_forward(x, params, n_heads, causal=True, scale=True, *, start=0):
    """``attention_forward`` with one fused (d, 3d) projection for Q, K and V (same
    contract). The scaling ``1/sqrt(d_h)`` is folded into the query columns of the
    projection, so the cached ``q`` is the scaled query; ``O`` is cached as ``(B*T, d)``,
    the heads merged.

    ``start`` (training only, see ``fast_loss_and_grads``): with ``0 < start < T`` only
    the query positions ``start .. T-1`` are attended from (every key and value is still
    computed), and the output is ``(B, T - start, d)``, the rows ``start ..`` of the full
    output; ``P`` and ``O`` are cached for those rows only (``cache["start"]``).

    Raises:
        ValueError: if ``d`` is not divisible by ``n_heads``, or the shapes do not fit.
    """
    B, T, d = x.shape
    h = n_heads
    if d % h:
        raise ValueError(f"d = {d} is not divisible by n_heads = {h}")
    d_h = d // h
    Ta = T - start
    factor = 1.0 / math.sqrt(d_h) if scale else 1.0
    W_Q, b_Q = params["W_Q"], params["b_Q"]
    if factor != 1.0:
        W_Q, b_Q = W_Q * factor, b_Q * factor                         # (c q) k^T = c q k^T
    W = np.concatenate([W_Q, params["W_K"], params["W_V"]], axis=1)   # (d, 3d)
    b = np.concatenate([b_Q, params["b_K"], params["b_V"]])           # (3d,)
    qkv = x.reshape(B * T, d) @ W
    qkv += b
    q, k, v = qkv.reshape(B, T, 3, h, d_h).transpose(2, 0, 3, 1, 4)  # views, (B, h, T, d_h)
    scores = (q[:, :, start:] if start else q) @ k.swapaxes(-1, -2)  # (B, h, Ta, T)
    if causal:
        scores += _causal_additive(T, scores.dtype)[start:]
    P = _softmax_rows(scores)
    O = np.empty((B * Ta, d), dtype=P.dtype)                       # heads merged
    np.matmul(P, v, out=O.reshape(B, Ta, h, d_h).transpose(0, 2, 1, 3))
    y = O @ params["W_O"]
    y += params["b_O"]
    cache = {"x": x, "q": q, "k": k, "v": v, "P": P, "O": O, "W": W, "factor": factor,
             "n_heads": h, "params": params, "start": start}
    return y.reshape(B, Ta, d), cache


def fast_attention_backward(dy, cache):
    """``attention_backward`` of ``fast_attention_forward`` (same contract; the gradients
    of the fused projection are split back into ``W_Q, W_K, W_V``, the query's scaled back
    by the factor folded into it).

    Raises:
        KeyError: if ``cache`` is not what ``fast_attention_forward`` returned.
        ValueError: if ``dy``'s shape is not that of the attention's output.
    """
    if cache.get("start", 0):
        raise ValueError("the cache of fast_attention_forward(start > 0) is run backwards "
                         "by _attention_backward_suffix")
    x, q, k, v, P, O = (cache[name] for name in ("x", "q", "k", "v", "P", "O"))
    B, T, d = x.shape
    h = cache["n_heads"]
    d_h = d // h
    dy2 = dy.reshape(B * T, d)
    grads = {"W_O": O.T @ dy2, "b_O": _column_sum(dy2)}
    dO = (dy2 @ cache["params"]["W_O"].T).reshape(B, T, h, d_h).transpose(0, 2, 1, 3)
    dqkv = np.empty((B * T, 3 * d), dtype=np.result_type(dy, x))
    dq, dk, dv = dqkv.reshape(B, T, 3, h, d_h).transpose(2, 0, 3, 1, 4)  # views (B, h, T, d_h)
    np.matmul(P.swapaxes(-1, -2), dO, out=dv)
    dS = dO @ v.swapaxes(-1, -2)                                   # dP, (B, h, T, T)
    dS -= _row_sum_spread(dS * P)
    dS *= P                                                        # d scores (scaled)
    np.matmul(dS, k, out=dq)                                       # d (scaled q)
    np.matmul(dS.swapaxes(-1, -2), q, out=dk)
    dW = x.reshape(B * T, d).T @ dqkv                              # (d, 3d)
    db = _column_sum(dqkv)
    db[d:2 * d] = 0.0                                              # b_K: exactly 0 (see above)
    factor = cache["factor"]
    if factor != 1.0:                                              # q = factor (x W_Q + b_Q)
        dW[:, :d] *= factor
        db[:d] *= factor
    for i, name in enumerate("QKV"):
        grads["W_" + name] = dW[:, i * d:(i + 1) * d]
        grads["b_" + name] = db[i * d:(i + 1) * d]
    dx = (dqkv @ cache["W"].T).reshape(B, T, d)                    # W holds the scaled W_Q
    return dx, grads


def fast_block_forward(x, params, n_heads, ops, pre_ln=True, scale=True, *, start=0):
    """``block_forward`` with 2-D products and in-place sums (same contract and cache).

    ``start`` (training only, see ``fast_loss_and_grads``; pre-LN with the fast layer norm
    and attention): with ``0 < start < T`` the output is ``(B, T - start, d)``, the rows
    ``start ..`` of the full output. The first layer norm, the keys and the values are
    computed at every position; the queries' attention, the residuals, the second layer
    norm and the FFN at the positions ``start ..`` only, which is all a position there
    depends on (the FFN and the layer norms act on each position alone, the attention is
    causal). The cache holds those rows (``cache["start"]``) for ``fast_block_backward``.

    Raises:
        KeyError: if ``params`` lacks one of ``BLOCK_KEYS``.
        ValueError: if the shapes do not fit, as ``block_forward``; if ``start > 0`` and the
            block is post-LN or ``ops`` lacks the fast layer norm and attention.
    """
    attn_params = {key: params[key] for key in ATTENTION_KEYS}
    cache = {"pre_ln": pre_ln, "W1": params["W1"], "W2": params["W2"], "start": start}
    B, T, d = x.shape
    if start and not (pre_ln and ops.attention_forward is fast_attention_forward
                      and ops.layer_norm_forward is fast_layer_norm_forward):
        raise ValueError("start > 0 needs a pre-LN block with the fast layer norm and attention")
    if start:
        a, cache["ln1"] = fast_layer_norm_forward(x, params["ln1_gamma"], params["ln1_beta"])
        x1, cache["attn"] = fast_attention_forward(a, attn_params, n_heads, causal=True,
                                                   scale=scale, start=start)
        x1 += x[:, start:]                                 # the rows start.. of x + MHA(LN1(x))
        T = T - start
        u, cache["ln2"] = fast_layer_norm_forward(x1, params["ln2_gamma"], params["ln2_beta"])
    elif pre_ln:
        a, cache["ln1"] = ops.layer_norm_forward(x, params["ln1_gamma"], params["ln1_beta"])
        x1, cache["attn"] = ops.attention_forward(a, attn_params, n_heads, causal=True,
                                                  scale=scale)
        x1 += x                                            # x1 = x + MHA(LN1(x))
        u, cache["ln2"] = ops.layer_norm_forward(x1, params["ln2_gamma"], params["ln2_beta"])
    else:
        a = x
        s1, cache["attn"] = ops.attention_forward(x, attn_params, n_heads, causal=True,
                                                  scale=scale)
        s1 += x
        x1, cache["ln1"] = ops.layer_norm_forward(s1, params["ln1_gamma"], params["ln1_beta"])
        u = x1
    pre = u.reshape(B * T, d) @ params["W1"]
    pre += params["b1"]
    hidden = np.abs(pre)                                   # ReLU: (|pre| + pre) / 2, exact
    hidden += pre
    hidden *= 0.5
    f = hidden @ params["W2"]
    f += params["b2"]
    f = f.reshape(B, T, d)
    cache.update(attn_in=a, ffn_in=u, ffn_pre=pre.reshape(B, T, -1),
                 ffn_hidden=hidden.reshape(B, T, -1))
    f += x1
    if pre_ln:
        return f, cache
    y, cache["ln2"] = ops.layer_norm_forward(f, params["ln2_gamma"], params["ln2_beta"])
    return y, cache


def _zero_prefix(dy):
    """Number ``s`` of leading positions at which ``dy`` ``(B, T, d)`` is exactly 0 in every
    sequence (``dy[:, :s]`` is all zeros; ``s = 0`` when the first position has a non-zero
    entry, ``T`` when ``dy`` is all zeros)."""
    if dy[:, 0].any():                                              # the usual case, cheap
        return 0
    B, T = dy.shape[:2]
    nonzero = (dy.reshape(B, -1) != 0).any(axis=0)                   # (T * d,), fast axis-0 pass
    active = np.flatnonzero(nonzero.reshape(T, -1).any(axis=1))      # (T,) -> positions
    return int(active[0]) if active.size else T


def _attention_backward_suffix(dy, cache, s):
    """``fast_attention_backward`` for a ``dy`` ``(B, T, d)`` that is 0 at the positions
    before ``s`` (given as ``dy[:, s:]``, ``(B, T - s, d)``); the same gradients. The cache
    is that of ``fast_attention_forward`` with ``start`` 0 or ``s``.

    The rows before ``s`` carry no gradient into the attention output, the scores of their
    queries or the queries themselves, so only the ``T - s`` last query rows are computed
    (``dO``, ``dS = dP * P`` and ``dq`` restricted to them, ``dq = 0`` before ``s``); every
    key and value still receives the gradient of the later queries that read it
    (``dk = dS^T q[s:]``, ``dv = P[s:]^T dO``), so ``dx`` is ``(B, T, d)`` in full.

    Returns:
        ``(dx, grads)`` as ``fast_attention_backward``: ``dx`` ``(B, T, d)``, grads keyed
        by ``ATTENTION_KEYS``.
    """
    x, q, k, v, P, O = (cache[name] for name in ("x", "q", "k", "v", "P", "O"))
    B, T, d = x.shape
    h = cache["n_heads"]
    d_h = d // h
    Ta = T - s
    dy2 = dy.reshape(B * Ta, d)                                    # a copy if dy is a slice
    skip = s - cache.get("start", 0)                               # cached rows before s
    O_late = O.reshape(B, -1, d)[:, skip:].reshape(B * Ta, d) if skip else O
    grads = {"W_O": O_late.T @ dy2, "b_O": _column_sum(dy2)}
    dO = (dy2 @ cache["params"]["W_O"].T).reshape(B, Ta, h, d_h).transpose(0, 2, 1, 3)
    P_late = P[:, :, skip:] if skip else P                         # (B, h, Ta, T)
    dqkv = np.empty((B * T, 3 * d), dtype=np.result_type(dy, x))
    dq, dk, dv = dqkv.reshape(B, T, 3, h, d_h).transpose(2, 0, 3, 1, 4)  # views (B, h, T, d_h)
    dq[:, :, :s] = 0.0                                             # dk, dv: written in full
    np.matmul(P_late.swapaxes(-1, -2), dO, out=dv)
    dS = dO @ v.swapaxes(-1, -2)                                   # dP, (B, h, Ta, T)
    dS -= _row_sum_spread(dS * P_late)
    dS *= P_late
    np.matmul(dS, k, out=dq[:, :, s:])
    np.matmul(dS.swapaxes(-1, -2), q[:, :, s:], out=dk)
    dW = x.reshape(B * T, d).T @ dqkv                              # (d, 3d)
    db = _column_sum(dqkv)
    db[d:2 * d] = 0.0                                              # b_K: exactly 0
    factor = cache["factor"]
    if factor != 1.0:
        dW[:, :d] *= factor
        db[:d] *= factor
    for i, name in enumerate("QKV"):
        grads["W_" + name] = dW[:, i * d:(i + 1) * d]
        grads["b_" + name] = db[i * d:(i + 1) * d]
    return (dqkv @ cache["W"].T).reshape(B, T, d), grads


def _block_backward_suffix(dy, cache, s):
    """``fast_block_backward`` of a pre-LN block built from the fast layer norm and
    attention, for a ``dy`` that is 0 at the positions before ``s`` (``0 < s < T``).

    In a pre-LN block the FFN, the second layer norm and the residuals act on each position
    alone, so a position whose output gradient is 0 passes 0 to them: they are run
    backwards on the positions ``s .. T-1`` only, and the attention on those query rows
    (``_attention_backward_suffix``). The last block of a training step is in this case:
    the loss reads only the answer positions, the second half of the sequence. The
    gradients are those of the full computation (the rows left out add exact zeros to
    every sum).
    """
    ln2 = cache["ln2"]
    late = {"ffn_hidden": cache["ffn_hidden"][:, s:], "ffn_pre": cache["ffn_pre"][:, s:],
            "ffn_in": cache["ffn_in"][:, s:], "W1": cache["W1"], "W2": cache["W2"],
            "ln2": {"xhat": ln2["xhat"][:, s:], "inv": ln2["inv"][:, s:], "gamma": ln2["gamma"]},
            "ln1": cache["ln1"], "attn": cache["attn"]}
    return _block_backward_late(dy[:, s:], late, s)


def _block_backward_late(dy_late, cache, s):
    """``_block_backward_suffix`` given ``dy_late = dy[:, s:]`` ``(B, T - s, d)`` and a
    cache whose FFN and second layer norm entries hold the rows ``s ..`` only (the cache of
    ``fast_block_forward(start=s)``, or views of a full one); ``cache["attn"]`` is that of
    ``fast_attention_forward`` with ``start`` 0 or ``s``.

    Returns:
        ``(dx, grads)``: ``dx`` ``(B, T, d)``, grads keyed by ``BLOCK_KEYS``.
    """
    grads = {}
    B, Ta, d = dy_late.shape
    s_check = cache["ln1"]["xhat"].shape[1] - Ta
    if s_check != s:
        raise ValueError(f"dy_late has {Ta} positions, the block {Ta + s_check}, s = {s}")
    d_ff = cache["ffn_hidden"].shape[-1]
    Na = B * Ta
    dy2 = dy_late.reshape(Na, d)                                   # a copy if a slice
    hidden = cache["ffn_hidden"].reshape(Na, d_ff)
    grads["W2"] = hidden.T @ dy2
    grads["b2"] = _column_sum(dy2)
    dpre = dy2 @ cache["W2"].T                                     # (Na, d_ff)
    dpre *= cache["ffn_pre"].reshape(Na, d_ff) > 0                 # the ReLU's gradient
    grads["W1"] = cache["ffn_in"].reshape(Na, d).T @ dpre
    grads["b1"] = _column_sum(dpre)
    dx1, grads["ln2_gamma"], grads["ln2_beta"] = fast_layer_norm_backward(
        (dpre @ cache["W1"].T).reshape(B, Ta, d), cache["ln2"])
    dx1 += dy2.reshape(B, Ta, d)                                   # x1 feeds LN2 and the residual
    da, attn_grads = _attention_backward_suffix(dx1, cache["attn"], s)
    dx, grads["ln1_gamma"], grads["ln1_beta"] = fast_layer_norm_backward(da, cache["ln1"])
    dx[:, s:] += dx1                                               # dx1 = 0 before s
    grads.update({key: attn_grads[key] for key in ATTENTION_KEYS})
    return dx, {key: grads[key] for key in BLOCK_KEYS}


def fast_block_backward(dy, cache, ops):
    """``block_backward`` with BLAS column sums and in-place arithmetic (same results).

    When the block is pre-LN, built from the fast layer norm and attention, and ``dy`` is
    0 at its first positions in every sequence (the last block of a training step: only
    the answer positions reach the loss), only the later positions are run backwards
    (``_block_backward_suffix``).

    Raises:
        KeyError: if ``cache`` is not what ``fast_block_forward`` returned.
        ValueError: if ``dy``'s shape is not that of the block's output.
    """
    start = cache.get("start", 0)
    if start:                                      # fast_block_forward(start=...): dy_late
        return _block_backward_late(dy, cache, start)
    if (cache["pre_ln"] and ops.layer_norm_backward is fast_layer_norm_backward
            and ops.attention_backward is fast_attention_backward):
        s = _zero_prefix(dy)
        if 0 < s < dy.shape[1]:
            return _block_backward_suffix(dy, cache, s)
    grads = {}
    u, pre, hidden = cache["ffn_in"], cache["ffn_pre"], cache["ffn_hidden"]
    B, T, d = u.shape
    d_ff = hidden.shape[-1]

    def ffn_backward(df):
        df2 = df.reshape(B * T, d)
        grads["W2"] = hidden.reshape(B * T, d_ff).T @ df2
        grads["b2"] = _column_sum(df2)
        dpre = df2 @ cache["W2"].T
        dpre *= pre.reshape(B * T, d_ff) > 0                         # the ReLU's gradient
        grads["W1"] = u.reshape(B * T, d).T @ dpre
        grads["b1"] = _column_sum(dpre)
        return (dpre @ cache["W1"].T).reshape(B, T, d)

    if cache["pre_ln"]:
        dx1, grads["ln2_gamma"], grads["ln2_beta"] = ops.layer_norm_backward(ffn_backward(dy),
                                                                             cache["ln2"])
        dx1 += dy
        da, attn_grads = ops.attention_backward(dx1, cache["attn"])
        dx, grads["ln1_gamma"], grads["ln1_beta"] = ops.layer_norm_backward(da, cache["ln1"])
        dx += dx1
    else:
        ds2, grads["ln2_gamma"], grads["ln2_beta"] = ops.layer_norm_backward(dy, cache["ln2"])
        dx1 = ffn_backward(ds2)
        dx1 += ds2
        ds1, grads["ln1_gamma"], grads["ln1_beta"] = ops.layer_norm_backward(dx1, cache["ln1"])
        dx, attn_grads = ops.attention_backward(ds1, cache["attn"])
        dx += ds1
    grads.update({key: attn_grads[key] for key in ATTENTION_KEYS})
    return dx, {key: grads[key] for key in BLOCK_KEYS}


def fast_model_forward(params, inputs, config, ops, *, start=0):
    """``model_forward`` (same contract and cache keys) with the embedding gathered by
    ``np.take``, the positions added in place and the output projection as a 2-D product.

    ``start`` (training only, see ``fast_loss_and_grads``): with ``0 < start < T`` the
    logits of the positions ``start .. T-1`` only, ``(B, T - start, V)``, equal to the rows
    ``start ..`` of the full logits: the last block (``fast_block_forward(start=...)``),
    the final layer norm and the head run on those positions only. ``fast_model_backward``
    takes the gradient of those logits. Needs pre-LN blocks (at least one) built from the
    fast block, layer norm and attention.

    Raises:
        ValueError: if ``T > config.max_len`` with positions; if ``start > 0`` and the
            model is not as said above, or ``start`` is not below ``T``.
    """
    inputs = np.asarray(inputs)
    B, T = inputs.shape
    h = np.take(params["embedding"], inputs, axis=0)        # (B, T) -> (B, T, d), new
    if config.positions:
        if T > params["positions"].shape[0]:
            raise ValueError(f"sequence of length {T} is longer than the position table "
                             f"({params['positions'].shape[0]} rows)")
        h += params["positions"][:T]                         # (T, d) broadcast over B
    if start and not (0 < start < T and config.n_layers >= 1 and config.pre_ln
                      and ops.block_forward is fast_block_forward
                      and ops.layer_norm_forward is fast_layer_norm_forward
                      and ops.attention_forward is fast_attention_forward):
        raise ValueError(f"start = {start} needs 0 < start < T = {T} and pre-LN fast blocks")
    block_caches = []
    for i in range(config.n_layers):
        last = start if i == config.n_layers - 1 else 0
        if last:
            h, c = fast_block_forward(h, block_params(params, i), config.n_heads, ops,
                                      scale=config.scale, start=last)
        else:
            h, c = ops.block_forward(h, block_params(params, i), config.n_heads, ops,
                                     pre_ln=config.pre_ln, scale=config.scale)
        block_caches.append(c)
    hf, ln_f = (fast_layer_norm_forward if start else ops.layer_norm_forward)(
        h, params["ln_f_gamma"], params["ln_f_beta"])
    W_out = params["W_out"]
    logits = hf.reshape(-1, W_out.shape[0]) @ W_out          # (B*Ta, d) -> (B*Ta, V)
    logits += params["b_out"]
    cache = {"inputs": inputs, "blocks": block_caches, "ln_f": ln_f, "hf": hf,
             "config": config, "params": params, "start": start}
    return logits.reshape(B, T - start, -1), cache


def fast_model_backward(dlogits, cache, ops):
    """``model_backward`` (same contract) with 2-D products and BLAS sums; when
    ``dlogits`` is 0 at the first positions of every sequence (a training step: the loss
    reads the answers only), the output projection and the final layer norm are run
    backwards on the later positions only (the same gradients). After
    ``fast_model_forward(start=s)``, ``dlogits`` is ``(B, T - s, V)``, the gradient of
    the logits it returned.

    Raises:
        KeyError: if ``cache`` is not what ``fast_model_forward`` returned.
        ValueError: if ``dlogits``' shape is not that of the logits.
    """
    params, config = cache["params"], cache["config"]
    d, V = params["W_out"].shape
    hf, inputs = cache["hf"], cache["inputs"]
    B, T = inputs.shape
    start = cache.get("start", 0)
    s = 0
    if not start and ops.layer_norm_backward is fast_layer_norm_backward:
        s = _zero_prefix(dlogits)
    if start:
        # fast_model_forward(start=...): dlogits (B, T - start, V) and the cache of the
        # head, the final layer norm and the last block hold those positions only
        Ta = T - start
        if dlogits.shape != (B, Ta, V):
            raise ValueError(f"dlogits has shape {dlogits.shape}, expected {(B, Ta, V)}")
        g2 = dlogits.reshape(B * Ta, V)
        grads = {"W_out": hf.reshape(B * Ta, d).T @ g2, "b_out": _column_sum(g2)}
        dh, grads["ln_f_gamma"], grads["ln_f_beta"] = fast_layer_norm_backward(
            (g2 @ params["W_out"].T).reshape(B, Ta, d), cache["ln_f"])
    elif 0 < s < T:
        # the loss reads only the positions s.. (the answers): the head and the final layer
        # norm act on each position alone, so they are run backwards on those rows only
        g2 = dlogits[:, s:].reshape(B * (T - s), V)                # a copy
        grads = {"W_out": hf[:, s:].reshape(-1, d).T @ g2, "b_out": _column_sum(g2)}
        ln_f = cache["ln_f"]
        late = {"xhat": ln_f["xhat"][:, s:], "inv": ln_f["inv"][:, s:], "gamma": ln_f["gamma"]}
        dh_late, grads["ln_f_gamma"], grads["ln_f_beta"] = fast_layer_norm_backward(
            (g2 @ params["W_out"].T).reshape(B, T - s, d), late)
        dh = np.zeros((B, T, d), dtype=dh_late.dtype)
        dh[:, s:] = dh_late
    else:
        g2 = dlogits.reshape(B * T, V)
        grads = {"W_out": hf.reshape(B * T, d).T @ g2, "b_out": _column_sum(g2)}
        dh = (g2 @ params["W_out"].T).reshape(B, T, d)
        dh, grads["ln_f_gamma"], grads["ln_f_beta"] = ops.layer_norm_backward(dh, cache["ln_f"])
    for i in reversed(range(config.n_layers)):
        if cache["blocks"][i].get("start", 0):            # the last block of a start > 0
            dh, block_grads = fast_block_backward(dh, cache["blocks"][i], ops)
        else:
            dh, block_grads = ops.block_backward(dh, cache["blocks"][i], ops)
        grads.update({f"block{i}.{key}": block_grads[key] for key in BLOCK_KEYS})
    # the embedding's gradient, a scatter-add over the tokens: one-hot (V, B*T) x (B*T, d)
    dh2 = dh.reshape(B * T, d)
    one_hot = np.take(_constant("eye", V, dh.dtype), inputs.reshape(-1), axis=0)  # (B*T, V)
    grads["embedding"] = one_hot.T @ dh2
    if config.positions:
        positions = np.zeros(params["positions"].shape, dtype=dh.dtype)
        positions[:T] = (_constant("ones", B, dh.dtype) @ dh.reshape(B, T * d)).reshape(T, d)
        grads["positions"] = positions
    return {name: grads[name] for name in params}


def fast_make_batch(task, L, batch_size, rng):
    """``make_batch`` (same contract, the same single draw ``rng.integers(0, N_SYMBOLS,
    size=(B, L))``, so the same batches), the sequence written into one array.

    Raises:
        ValueError: if ``task`` is not ``"copy"`` or ``"sort"``, or ``L`` or
            ``batch_size`` is below 1.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}: expected 'copy' or 'sort'")
    if L < 1 or batch_size < 1:
        raise ValueError(f"L and batch_size must be at least 1, got {L} and {batch_size}")
    source = rng.integers(0, N_SYMBOLS, size=(batch_size, L))        # (B, L)
    sequence = np.empty((batch_size, 2 * L + 1), dtype=np.int64)      # (B, 2L+1)
    sequence[:, :L] = source
    sequence[:, L] = SEP
    sequence[:, L + 1:] = source if task == "copy" else np.sort(source, axis=1)
    loss_mask = np.zeros((batch_size, 2 * L), dtype=bool)
    loss_mask[:, L:] = True                                           # predictions of a1 .. aL
    return sequence[:, :-1], sequence[:, 1:], loss_mask


def fast_masked_cross_entropy(logits, targets, loss_mask):
    """``masked_cross_entropy`` computed on the masked rows only (same contract).

    Raises:
        ValueError: if ``loss_mask`` has no True entry.
    """
    V = logits.shape[-1]
    loss_mask = np.asarray(loss_mask, dtype=bool)
    if loss_mask.all() and loss_mask.size * V == logits.size:         # every row counts
        index, n = None, loss_mask.size                               # (the answer rows)
        rows = logits.reshape(n, V).copy()
        picked = np.arange(n), np.asarray(targets).reshape(n)
    else:
        index = np.flatnonzero(loss_mask)                             # masked (b, t), flat
        n = index.size
        if n == 0:
            raise ValueError("loss_mask selects no position")
        rows = np.take(logits.reshape(-1, V), index, axis=0)          # (N, V)
        picked = np.arange(n), np.take(targets, index)
    rows -= rows.max(axis=1, keepdims=True)
    exps = np.exp(rows)
    total = _row_sum(exps)                                            # (N, 1)
    loss = -float(rows[picked].sum() - np.log(total).sum()) / n
    exps /= total                                                     # softmax of each row
    exps[picked] -= 1
    exps *= 1.0 / n
    if index is None:
        return loss, exps.reshape(logits.shape)
    dlogits = np.zeros_like(logits)
    dlogits.reshape(-1, V)[index] = exps
    return loss, dlogits


def fast_adam_step(params, grads, state, lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    """``adam_step`` with fewer temporaries (same contract: new arrays, inputs untouched).
    The bias corrections are folded into two scalars:
    ``lr m_hat / (sqrt(v_hat) + eps) = (lr c2 / c1) m / (sqrt(v) + eps c2)``,
    ``c1 = 1 - beta1^t``, ``c2 = sqrt(1 - beta2^t)``.

    Raises:
        KeyError: if ``grads``, ``state["m"]`` or ``state["v"]`` lacks a name of ``params``,
            or ``state`` lacks ``"t"``, ``"m"`` or ``"v"``.
        ValueError: if a gradient's shape does not broadcast with its parameter's.
    """
    t = state["t"] + 1
    root_correction = math.sqrt(1.0 - beta2 ** t)
    step_size = lr / (1.0 - beta1 ** t) * root_correction
    eps_scaled = eps * root_correction
    new_params, m_new, v_new = {}, {}, {}
    for name, p in params.items():
        g = grads[name]
        work = g * (1 - beta1)
        m = state["m"][name] * beta1
        m += work
        np.multiply(g, g, out=work)
        work *= 1 - beta2
        v = state["v"][name] * beta2
        v += work
        np.sqrt(v, out=work)
        work += eps_scaled                                            # c2 (sqrt(v_hat) + eps)
        np.divide(m, work, out=work)
        work *= step_size
        new_params[name] = p - work
        m_new[name], v_new[name] = m, v
    return new_params, {"t": t, "m": m_new, "v": v_new}


def _adam_in_place(theta, g, m, v, t, work, lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    """``fast_adam_step`` on one flat vector, **in place**: the same operations in the same
    order (so the same numbers to the last bit), with ``theta``, ``m`` and ``v`` overwritten
    and ``work`` as scratch instead of new arrays. ``train`` uses it when ``ops.adam_step``
    is ``fast_adam_step``: the parameters stay views into ``theta`` and no new vector is
    allocated or cut into views at every step.

    Args:
        theta, g, m, v, work: float vectors ``(n,)`` of one dtype (parameters, gradient,
            moments, scratch); ``g`` is only read.
        t: int, the steps taken so far (``state["t"]``).
        lr, beta1, beta2, eps: floats, as ``adam_step``.

    Returns:
        int: ``t + 1``, the new step count.

    Raises:
        ValueError: if the vectors' shapes differ.
    """
    t += 1
    root_correction = math.sqrt(1.0 - beta2 ** t)
    step_size = lr / (1.0 - beta1 ** t) * root_correction
    np.multiply(g, 1 - beta1, out=work)
    m *= beta1
    m += work
    np.multiply(g, g, out=work)
    work *= 1 - beta2
    v *= beta2
    v += work
    np.sqrt(v, out=work)
    work += eps * root_correction                                     # c2 (sqrt(v_hat) + eps)
    np.divide(m, work, out=work)
    work *= step_size
    theta -= work
    return t


def _loss_start(loss_mask):
    """First position ``s`` at which ``loss_mask`` ``(B, T)`` is True in some sequence (no
    sequence counts a position before ``s``); ``T`` if it is all False."""
    counted = np.flatnonzero(loss_mask.any(axis=0))
    return int(counted[0]) if counted.size else loss_mask.shape[1]


def fast_loss_and_grads(params, inputs, targets, loss_mask, config, ops):
    """One training step's loss and gradients: ``ops.model_forward``, then
    ``ops.masked_cross_entropy``, then ``ops.model_backward``, as ``train`` runs them, with
    the same results (to rounding) and less work.

    The loss reads only the positions where ``loss_mask`` is True, from ``s`` on (the
    answers: ``s = L``), so the logits before ``s`` are not needed: when ``ops`` holds the
    fast model, block, layer norm, attention and loss of this module and the blocks are
    pre-LN, the model runs with ``fast_model_forward(start=s)`` (the last block's
    attention from the queries ``s ..``, its FFN, the final layer norm and the head on the
    positions ``s ..`` only) and ``fast_model_backward`` on those rows; otherwise (a
    function of ``ops`` replaced, post-LN, ``s = 0``) the three calls as they are.
    ``fast_ops`` puts it into its namespace as ``loss_and_grads``, which ``train`` uses.

    Args:
        params: dict of ``init_params``.
        inputs, targets: ints ``(B, T)``.
        loss_mask: bool ``(B, T)`` with at least one True.
        config: ``ModelConfig``.
        ops: namespace (``fast_ops``).

    Returns:
        ``(loss, grads)``: the loss, a Python float; the gradients, a dict keyed and shaped
        as ``params``.

    Raises:
        ValueError: if ``loss_mask`` selects no position; what the functions of ``ops``
            raise.
    """
    loss_mask = np.asarray(loss_mask, dtype=bool)
    s = _loss_start(loss_mask)
    T = loss_mask.shape[1]
    if (0 < s < T and config.pre_ln and config.n_layers >= 1
            and ops.model_forward is fast_model_forward
            and ops.model_backward is fast_model_backward
            and ops.block_forward is fast_block_forward
            and ops.block_backward is fast_block_backward
            and ops.masked_cross_entropy is fast_masked_cross_entropy
            and ops.layer_norm_forward is fast_layer_norm_forward
            and ops.layer_norm_backward is fast_layer_norm_backward
            and ops.attention_forward is fast_attention_forward
            and ops.attention_backward is fast_attention_backward):
        logits, cache = fast_model_forward(params, inputs, config, ops, start=s)
        loss, dlogits = fast_masked_cross_entropy(logits, np.asarray(targets)[:, s:],
                                                  loss_mask[:, s:])
        return loss, fast_model_backward(dlogits, cache, ops)
    logits, cache = ops.model_forward(params, inputs, config, ops)
    loss, dlogits = ops.masked_cross_entropy(logits, targets, loss_mask)
    return loss, ops.model_backward(dlogits, cache, ops)


def fast_ops(**overrides):
    """``reference_ops`` with the fast kernels above in place of the reference's batch,
    layer norm, attention, block, model, loss and Adam functions, and
    ``generate_with_cache`` as ``greedy_generate`` (the same contracts).

    Raises:
        Nothing of its own (see ``reference_ops``).
    """
    kernels = {"make_batch": fast_make_batch,
               "layer_norm_forward": fast_layer_norm_forward,
               "layer_norm_backward": fast_layer_norm_backward,
               "attention_forward": fast_attention_forward,
               "attention_backward": fast_attention_backward,
               "block_forward": fast_block_forward, "block_backward": fast_block_backward,
               "model_forward": fast_model_forward, "model_backward": fast_model_backward,
               "masked_cross_entropy": fast_masked_cross_entropy,
               "adam_step": fast_adam_step, "greedy_generate": generate_with_cache}
    kernels.update(overrides)
    ops = reference_ops(**kernels)
    ops.loss_and_grads = fast_loss_and_grads     # train's hook (checks the kernels above)
    if ops.adam_step is fast_adam_step:          # train's hook: the same step, in place
        ops.adam_in_place = _adam_in_place
    return ops


# ---------------------------------------------------------------------------------------
# The reference wiring (instructor side; the notebook builds its own from its globals).


def reference_ops(**overrides):
    """``make_ops`` over the reference of both assignments (``solutions.attention`` and
    this module), with ``overrides`` replacing single names.

    Raises:
        Nothing: a name found nowhere gets ``make_ops``'s placeholder.
    """
    from solutions import attention

    return make_ops([attention, globals()], **overrides)
