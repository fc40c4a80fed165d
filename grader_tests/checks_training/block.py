"""Checks of ``block_backward``: the backward pass of a pre-LN and a post-LN block, on its
own and inside the whole model, against central differences (docs/contract.md §3: float64,
eps = 1e-6, relative error |a - n| / max(|a|, |n|) as in ``grader_tests/gradcheck.py``).

The forward pass is the given ``block_forward``; the student's backward receives the
reference attention and layer-norm functions through ``ops`` (a bug in assignment
`attention` is not charged here). The seeds are fixed and the reference passes every
check with a worst relative error below 1e-5: at eps = 1e-6 no central difference of
these inputs crosses a ReLU kink (the caveat of docs/contract.md §3: with eps = 1e-4 some do,
and the check would get worse as eps grows).
"""

import numpy as np

from solutions import training as ref

from .. import gradcheck
from ..checks._util import as_array, call_watching_inputs, unpack, worst_difference
from ..guard import call
from ..registry import Fail, check
from ._fixtures import (
    largest,
    reference_ops,
    student_ops,
    sample_indices,
    sampled_gradient,
    tiny_problem,
)

NAME = "block_backward"
KEYS = ref.BLOCK_KEYS
FFN_KEYS = ("W1", "b1", "W2", "b2")
VECTOR_KEYS = ("ln1_gamma", "ln1_beta", "ln2_gamma", "ln2_beta", "b_Q", "b_K", "b_V", "b_O",
               "b1", "b2")
# Backward order of the parameters of each placement: the first wrong one is the clue.
ORDER = {
    True: ("b2", "W2", "b1", "W1", "ln2_gamma", "ln2_beta", "W_O", "b_O", "W_V", "b_V",
           "W_Q", "b_Q", "W_K", "b_K", "ln1_gamma", "ln1_beta"),
    False: ("ln2_gamma", "ln2_beta", "b2", "W2", "b1", "W1", "ln1_gamma", "ln1_beta", "W_O",
            "b_O", "W_V", "b_V", "W_Q", "b_Q", "W_K", "b_K"),
}


def _placement(pre_ln):
    return "pre-LN" if pre_ln else "post-LN"


def _student_grads(fn, dy, cache, what):
    """Call the student's backward; check the returned structure and shapes."""
    dx, grads = unpack(call(fn, dy, cache, student_ops()), 2, what)
    dx = as_array(dx, f"{what}: dx")
    if not isinstance(grads, dict):
        raise Fail("wrong-shape", f"{what}: grads should be a dict keyed like the block's "
                                  f"parameters, got {type(grads).__name__}.")
    missing = [k for k in KEYS if k not in grads]
    if missing:
        raise Fail("wrong-shape", f"{what}: grads has no entry for {', '.join(missing)}; return "
                                  f"one gradient per parameter of the block: "
                                  f"{', '.join(KEYS)}.")
    return dx, {k: as_array(grads[k], f"{what}: grads[{k!r}]") for k in KEYS}


def _shape_problem(what, key, got, expected):
    if got.shape == expected.shape:
        return
    if key in VECTOR_KEYS and got.ndim > 1 and got.shape[-1] == expected.shape[-1]:
        raise Fail("param-grad-axes", f"{what}: grads[{key!r}] has shape {got.shape}, expected "
                                      f"{expected.shape}: a bias or layer-norm parameter is "
                                      f"shared by every token, so its gradient is summed over "
                                      f"every leading axis (batch and positions).")
    if got.ndim == 2 and got.shape == expected.shape[::-1]:
        raise Fail("weight-grad-wrong", f"{what}: grads[{key!r}] has shape {got.shape}, the "
                                        f"transpose of {expected.shape}: for y = u @ W the "
                                        f"gradient is dW = u^T @ dy (inputs transposed on the "
                                        f"left).")
    raise Fail("wrong-shape", f"{what}: grads[{key!r}] has shape {got.shape}, expected "
                              f"{expected.shape}.")


def _hint(pre_ln, key):
    """One sentence on the likely cause when ``key`` is the first wrong gradient."""
    if key in ("W2", "b2"):
        return ("the FFN's output layer: dW2 = hidden^T @ df and db2 = sum of df, where df is "
                "the gradient reaching the FFN's output"
                + ("" if pre_ln else " (in post-LN, after LN2's backward)"))
    if key in ("W1", "b1"):
        return ("the ReLU: d pre = (df @ W2^T) * (pre > 0), then dW1 = u^T @ d pre; a wrong or "
                "missing ReLU mask, or the mask taken on the wrong array, shows up here first")
    if key.startswith("ln2"):
        return ("the gradient entering LN2's backward" + (
            ": du = d pre @ W1^T, the FFN's input gradient" if pre_ln else
            ": dy itself (LN2 is the block's last operation)"))
    if key.startswith(("W_", "b_")):
        return ("the gradient entering the attention's backward: "
                + ("x1 feeds both LN2 and the residual, so dx1 = dy + LN2-backward(du)"
                   if pre_ln else
                   "in post-LN, ds1 = LN1-backward(dx1) with dx1 = ds2 + du (x1 feeds both "
                   "the FFN and the residual)"))
    if key.startswith("ln1"):
        return ("the gradient entering LN1's backward" + (
            ": the attention's dx" if pre_ln else
            ": dx1 = ds2 + du, both branches of x1 (the FFN and the residual)"))
    return ("the residual: x feeds both the attention branch and the skip connection, so "
            "dx is the sum of the two gradients")


def _compare(pre_ln, what, analytic, reference, numeric):
    """Fail on the first gradient (in backward order) that is wrong.

    Args:
        analytic: dict name -> the student's gradient (``"dx"`` included).
        reference: dict name -> the exact gradient of the reference backward.
        numeric: dict name -> (indices, central differences at those indices).
    """
    for key in ORDER[pre_ln] + ("dx",):
        got, expected = analytic[key], reference[key]
        _shape_problem(what, key, got, expected)
        indices, values = numeric[key]
        sampled = np.array([got[i] for i in indices], dtype=np.float64)
        rel, abs_err, worst = gradcheck.rel_error(sampled, values)
        fd_ok = rel <= gradcheck.REL_TOL and abs_err <= gradcheck.FLOOR
        scale = float(np.max(np.abs(expected))) or 1.0
        exact_ok = bool(np.all(np.abs(got - expected) <= 1e-6 * np.abs(expected) + 1e-7 * scale))
        if fd_ok and exact_ok:
            continue
        fault = "weight-grad-wrong" if key in FFN_KEYS else "other"
        if fd_ok:  # the sampled coordinates pass, others do not
            detail = f"({worst_difference(got, expected)} of the exact gradient)"
        else:
            index = indices[worst[0]] if worst else ()
            detail = (f"relative error {rel:.3g} at index {index}: got {got[index]:.6g}, "
                      f"central difference {values[worst[0]]:.6g}")
        name = "dx" if key == "dx" else f"grads[{key!r}]"
        raise Fail(fault, f"{what}: {name} disagrees with central differences (eps = "
                          f"{gradcheck.EPS:g}, float64): {detail}; threshold "
                          f"{gradcheck.REL_TOL:g}. The gradients checked before it in "
                          f"backward order are right. Likely cause: {_hint(pre_ln, key)}.")


def _block_check(fn, pre_ln, seed):
    config, params, _, _, _ = tiny_problem(seed, pre_ln=pre_ln)
    block = ref.block_params(params, 0)
    r = np.random.default_rng(seed + 1)
    x = r.standard_normal((3, 8, config.d))
    G = r.standard_normal(x.shape)                       # the upstream gradient dy
    ops = reference_ops()
    _, cache = ref.block_forward(x, block, config.n_heads, ops, pre_ln=pre_ln)
    what = (f"{NAME} of a {_placement(pre_ln)} block (x of shape {x.shape}, d = {config.d}, "
            f"{config.n_heads} heads, d_ff = {config.d_ff}, random dy)")
    dx, grads = _student_grads(fn, G, cache, what)
    ref_dx, ref_grads = ref.block_backward(G, cache, ops)
    analytic, reference = dict(grads, dx=dx), dict(ref_grads, dx=ref_dx)

    def loss_in(key):
        def loss(value):
            if key == "dx":
                y, _ = ref.block_forward(value, block, config.n_heads, ops, pre_ln=pre_ln)
            else:
                y, _ = ref.block_forward(x, dict(block, **{key: value}), config.n_heads, ops,
                                         pre_ln=pre_ln)
            return float(np.sum(G * y))
        return loss

    numeric = {}
    for n, key in enumerate(KEYS + ("dx",)):
        value = x if key == "dx" else block[key]
        indices = sample_indices(value.shape, 12, seed + n, must=largest(reference[key]))
        numeric[key] = (indices, sampled_gradient(loss_in(key), value, indices))
    _compare(pre_ln, what, analytic, reference, numeric)


def _model_check(fn, pre_ln, seed):
    config, params, inputs, targets, mask = tiny_problem(seed, pre_ln=pre_ln)
    n_answers = int(mask.sum())
    ops = reference_ops()
    what = (f"the whole model ({_placement(pre_ln)}, d = {config.d}, {config.n_layers} layers, "
            f"{inputs.shape[0]} sequences of the sort task with L = {inputs.shape[1] // 2}) "
            f"with your {NAME}")

    def student_backward(dy, cache, _ops):
        return _student_grads(fn, dy, cache, what)

    wired_ops = reference_ops(block_backward=student_backward)

    def loss(p):  # the sum over the answer positions: gradients of order 1
        logits, _ = ref.model_forward(p, inputs, config, ops)
        return n_answers * ref.masked_cross_entropy(logits, targets, mask)[0]

    logits, cache = ref.model_forward(params, inputs, config, ops)
    _, dlogits = ref.masked_cross_entropy(logits, targets, mask)
    grads = wired_ops.model_backward(n_answers * dlogits, cache, wired_ops)
    expected = ref.model_backward(n_answers * dlogits, cache, ops)
    names = list(params)
    for n, name in reversed(list(enumerate(names))):   # backward order: output first
        got = as_array(grads[name], f"{what}: gradient of {name}")
        if got.shape != expected[name].shape:
            raise Fail("wrong-shape", f"{what}: the gradient of {name} has shape {got.shape}, "
                                      f"expected {expected[name].shape}.")
        indices = sample_indices(params[name].shape, 8, seed + 50 + n,
                                 must=largest(expected[name], 2))

        def loss_of(value, name=name):
            return loss(dict(params, **{name: value}))

        numeric = sampled_gradient(loss_of, params[name], indices)
        sampled = np.array([got[i] for i in indices], dtype=np.float64)
        rel, abs_err, worst = gradcheck.rel_error(sampled, numeric)
        if rel > gradcheck.REL_TOL or abs_err > gradcheck.FLOOR:
            index = indices[worst[0]]
            layer = name.split(".")[0]
            where = (f"{name} (block {layer[5:]})" if name.startswith("block") else name)
            raise Fail("other", f"{what}: the gradient of {where} at index {index} is "
                                f"{got[index]:.6g}, central differences give "
                                f"{numeric[worst[0]]:.6g} (relative error {rel:.3g}, threshold "
                                f"{gradcheck.REL_TOL:g}; loss = sum of the cross-entropy over "
                                f"the answer positions, eps = {gradcheck.EPS:g}, float64). "
                                f"Gradients flow from the last block to the first: the first "
                                f"wrong one, in that order, is in the block whose backward "
                                f"(or whose dx) is wrong. Run the block-level checks of "
                                f"{NAME} for a precise diagnosis.")


@check(NAME, "pre-LN block: dx and every parameter gradient match central differences")
def block_pre_ln(fn):
    _block_check(fn, True, 300)


@check(NAME, "post-LN block: dx and every parameter gradient match central differences")
def block_post_ln(fn):
    _block_check(fn, False, 310)


@check(NAME, "whole model, pre-LN, d = 16, 2 layers: every parameter's gradient matches "
             "central differences of the loss")
def model_pre_ln(fn):
    _model_check(fn, True, 320)


@check(NAME, "whole model, post-LN, d = 16, 2 layers: every parameter's gradient matches "
             "central differences of the loss")
def model_post_ln(fn):
    _model_check(fn, False, 330)


@check(NAME, "float32 cache and dy give float32 gradients")
def block_float32(fn):
    config, params, _, _, _ = tiny_problem(340, dtype=np.float32)
    block = ref.block_params(params, 1)
    x = np.random.default_rng(341).standard_normal((2, 5, config.d)).astype(np.float32)
    _, cache = ref.block_forward(x, block, config.n_heads, reference_ops())
    what = f"{NAME} with a float32 block"
    dx, grads = _student_grads(fn, np.ones_like(x), cache, what)
    wrong = [k for k, v in dict(grads, dx=dx).items() if v.dtype != np.float32]
    if wrong:
        raise Fail("dtype-changed", f"{what}: {', '.join(wrong)} came back as "
                                    f"{dict(grads, dx=dx)[wrong[0]].dtype}; keep float32 "
                                    f"(training runs in float32). Likely cause: an array "
                                    f"created with np.zeros(shape) (float64) or a float64 "
                                    f"constant.")


@check(NAME, "does not modify dy or the cache")
def block_no_mutation(fn):
    config, params, _, _, _ = tiny_problem(350, pre_ln=False)
    block = ref.block_params(params, 0)
    x = np.random.default_rng(351).standard_normal((2, 4, config.d))
    _, cache = ref.block_forward(x, block, config.n_heads, reference_ops(), pre_ln=False)
    dy = np.random.default_rng(352).standard_normal(x.shape)
    _, modified = call_watching_inputs(fn, dy, cache, student_ops())
    modified = [m for m in modified if m != "argument 3"]   # ops: a namespace of functions
    if modified:
        names = {"argument 1": "dy", "argument 2": "the cache"}
        raise Fail("input-mutated", f"{NAME} modified {', '.join(names.get(m, m) for m in modified)} "
                                    f"in place (for instance dy += ...). The cache is read again "
                                    f"if the backward is called twice; work on new arrays.")
