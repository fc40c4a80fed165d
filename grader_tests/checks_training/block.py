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
from ..i18n import N_, _
from ..guard import call
from ..registry import PROPERTY, Fail, check
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
    dx = as_array(dx, _("{what}: dx").format(what=what))
    if not isinstance(grads, dict):
        raise Fail("wrong-shape", _("{what}: grads should be a dict keyed like the block's "
                                    "parameters, got {kind}.").format(what=what,
                                      kind=type(grads).__name__))
    missing = [k for k in KEYS if k not in grads]
    if missing:
        raise Fail("wrong-shape", _("{what}: grads has no entry for {items}; return one gradient "
                                    "per parameter of the block: {items2}.").format(what=what,
                                      items=', '.join(missing), items2=', '.join(KEYS)))
    return dx, {k: as_array(grads[k], _("{what}: grads[{k!r}]").format(
        what=what, k=k)) for k in KEYS}


def _shape_problem(what, key, got, expected):
    if got.shape == expected.shape:
        return
    if key in VECTOR_KEYS and got.ndim > 1 and got.shape[-1] == expected.shape[-1]:
        raise Fail("param-grad-axes", _("{what}: grads[{key!r}] has shape {shape}, expected "
                                        "{shape2}: a bias or layer-norm parameter is shared by "
                                        "every token, so its gradient is summed over every "
                                        "leading axis (batch and positions).").format(what=what,
                                          key=key, shape=got.shape, shape2=expected.shape))
    if got.ndim == 2 and got.shape == expected.shape[::-1]:
        raise Fail("weight-grad-wrong", _("{what}: grads[{key!r}] has shape {shape}, the "
                                          "transpose of {shape2}: for y = u @ W the gradient is "
                                          "dW = u^T @ dy (inputs transposed on the left).").format(
                                              what=what,
                                            key=key, shape=got.shape, shape2=expected.shape))
    raise Fail("wrong-shape", _("{what}: grads[{key!r}] has shape {shape}, expected {shape2}.").format(what=what,
                                  key=key, shape=got.shape, shape2=expected.shape))


def _hint(pre_ln, key):
    """One sentence on the likely cause when ``key`` is the first wrong gradient."""
    if key in ("W2", "b2"):
        return (_("the FFN's output layer: dW2 = hidden^T @ df and db2 = sum of df, where df is "
                  "the gradient reaching the FFN's output")
                + ("" if pre_ln else _(" (in post-LN, after LN2's backward)")))
    if key in ("W1", "b1"):
        return (_("the ReLU: d pre = (df @ W2^T) * (pre > 0), then dW1 = u^T @ d pre; a wrong or "
                  "missing ReLU mask, or the mask taken on the wrong array, shows up here first"))
    if key.startswith("ln2"):
        return (_("the gradient entering LN2's backward") + (
            _(": du = d pre @ W1^T, the FFN's input gradient") if pre_ln else
            _(": dy itself (LN2 is the block's last operation)")))
    if key.startswith(("W_", "b_")):
        return (_("the gradient entering the attention's backward: ")
                + (_("x1 feeds both LN2 and the residual, so dx1 = dy + LN2-backward(du)")
                   if pre_ln else
                   _("in post-LN, ds1 = LN1-backward(dx1) with dx1 = ds2 + du (x1 feeds both the "
                     "FFN and the residual)")))
    if key.startswith("ln1"):
        return (_("the gradient entering LN1's backward") + (
            _(": the attention's dx") if pre_ln else
            _(": dx1 = ds2 + du, both branches of x1 (the FFN and the residual)")))
    return (_("the residual: x feeds both the attention branch and the skip connection, so dx is "
              "the sum of the two gradients"))


def _compare(pre_ln, what, analytic, reference, numeric):
    """Fail on the first gradient (in backward order) that is wrong.

    Args:
        analytic: dict name -> the student's gradient (``"dx"`` included).
        reference: dict name -> the exact gradient of the reference backward.
        numeric: dict name -> (indices, central differences at those indices).
    """
    scale = gradcheck.gradient_scale(*reference.values())
    for key in ORDER[pre_ln] + ("dx",):
        got, expected = analytic[key], reference[key]
        _shape_problem(what, key, got, expected)
        indices, values = numeric[key]
        sampled = np.array([got[i] for i in indices], dtype=np.float64)
        rel, abs_err, worst = gradcheck.rel_error(sampled, values)
        fd_ok = rel <= gradcheck.REL_TOL and abs_err <= gradcheck.FLOOR
        exact_ok = gradcheck.agrees(got, expected, scale)
        if fd_ok and exact_ok:
            continue
        fault = "weight-grad-wrong" if key in FFN_KEYS else "other"
        if fd_ok:  # the sampled coordinates pass, others do not
            detail = _("({worst_difference} of the exact gradient)").format(
                worst_difference=worst_difference(got, expected))
        else:
            index = indices[worst[0]] if worst else ()
            detail = (_("relative error {rel:.3g} at index {index}: got {got:.6g}, central "
                        "difference {values:.6g}").format(rel=rel, index=index, got=got[index],
                          values=values[worst[0]]))
        name = "dx" if key == "dx" else f"grads[{key!r}]"
        raise Fail(fault, _("{what}: {name} disagrees with central differences (eps = {EPS:g}, "
                            "float64): {detail}; threshold {REL_TOL:g}. The gradients checked "
                            "before it in backward order are right. Likely cause: {value}.").format(
                                what=what,
                              name=name, EPS=gradcheck.EPS, detail=detail,
                              REL_TOL=gradcheck.REL_TOL, value=_hint(pre_ln, key)))


def _block_check(fn, pre_ln, seed):
    config, params, _unused, _unused, _unused = tiny_problem(seed, pre_ln=pre_ln)
    block = ref.block_params(params, 0)
    r = np.random.default_rng(seed + 1)
    x = r.standard_normal((3, 8, config.d))
    G = r.standard_normal(x.shape)                       # the upstream gradient dy
    ops = reference_ops()
    _unused, cache = ref.block_forward(x, block, config.n_heads, ops, pre_ln=pre_ln)
    what = (_("{NAME} of a {value} block (x of shape {shape}, d = {d}, {n_heads} heads, d_ff = "
              "{d_ff}, random dy)").format(NAME=NAME, value=_placement(pre_ln), shape=x.shape,
                d=config.d, n_heads=config.n_heads, d_ff=config.d_ff))
    dx, grads = _student_grads(fn, G, cache, what)
    ref_dx, ref_grads = ref.block_backward(G, cache, ops)
    analytic, reference = dict(grads, dx=dx), dict(ref_grads, dx=ref_dx)

    def loss_in(key):
        def loss(value):
            if key == "dx":
                y, _unused = ref.block_forward(value, block, config.n_heads, ops, pre_ln=pre_ln)
            else:
                y, _unused = ref.block_forward(x, dict(block, **{key: value}), config.n_heads, ops,
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
    what = (_("the whole model ({value}, d = {d}, {n_layers} layers, {shape} sequences of the "
              "sort task with L = {value2}) with your {NAME}").format(value=_placement(pre_ln),
                d=config.d, n_layers=config.n_layers, shape=inputs.shape[0],
                value2=inputs.shape[1] // 2, NAME=NAME))

    def student_backward(dy, cache, _ops):
        return _student_grads(fn, dy, cache, what)

    wired_ops = reference_ops(block_backward=student_backward)

    def loss(p):  # the sum over the answer positions: gradients of order 1
        logits, _unused = ref.model_forward(p, inputs, config, ops)
        return n_answers * ref.masked_cross_entropy(logits, targets, mask)[0]

    logits, cache = ref.model_forward(params, inputs, config, ops)
    _unused, dlogits = ref.masked_cross_entropy(logits, targets, mask)
    grads = wired_ops.model_backward(n_answers * dlogits, cache, wired_ops)
    expected = ref.model_backward(n_answers * dlogits, cache, ops)
    names = list(params)
    for n, name in reversed(list(enumerate(names))):   # backward order: output first
        got = as_array(grads[name], _("{what}: gradient of {name}").format(what=what, name=name))
        if got.shape != expected[name].shape:
            raise Fail("wrong-shape", _("{what}: the gradient of {name} has shape {shape}, "
                                        "expected {shape2}.").format(what=what, name=name,
                                          shape=got.shape, shape2=expected[name].shape))
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
            raise Fail("other", _("{what}: the gradient of {where} at index {index} is "
                                  "{got:.6g}, central differences give {numeric:.6g} (relative "
                                  "error {rel:.3g}, threshold {REL_TOL:g}; loss = sum of the "
                                  "cross-entropy over the answer positions, eps = {EPS:g}, "
                                  "float64). Gradients flow from the last block to the first: "
                                  "the first wrong one, in that order, is in the block whose "
                                  "backward (or whose dx) is wrong. Run the block-level checks "
                                  "of {NAME} for a precise diagnosis.").format(what=what,
                                    where=where, index=index, got=got[index],
                                    numeric=numeric[worst[0]], rel=rel, REL_TOL=gradcheck.REL_TOL,
                                    EPS=gradcheck.EPS, NAME=NAME))


@check(NAME, N_("pre-LN block: dx and every parameter gradient match central differences"))
def block_pre_ln(fn):
    _block_check(fn, True, 300)


@check(NAME, N_("post-LN block: dx and every parameter gradient match central differences"))
def block_post_ln(fn):
    _block_check(fn, False, 310)


@check(NAME, N_("whole model, pre-LN, d = 16, 2 layers: every parameter's gradient matches "
                "central differences of the loss"))
def model_pre_ln(fn):
    _model_check(fn, True, 320)


@check(NAME, N_("whole model, post-LN, d = 16, 2 layers: every parameter's gradient matches "
                "central differences of the loss"))
def model_post_ln(fn):
    _model_check(fn, False, 330)


@check(NAME, N_("float32 cache and dy give float32 gradients"), kind=PROPERTY)
def block_float32(fn):
    config, params, _unused, _unused, _unused = tiny_problem(340, dtype=np.float32)
    block = ref.block_params(params, 1)
    x = np.random.default_rng(341).standard_normal((2, 5, config.d)).astype(np.float32)
    _unused, cache = ref.block_forward(x, block, config.n_heads, reference_ops())
    what = _("{NAME} with a float32 block").format(NAME=NAME)
    dx, grads = _student_grads(fn, np.ones_like(x), cache, what)
    wrong = [k for k, v in dict(grads, dx=dx).items() if v.dtype != np.float32]
    if wrong:
        raise Fail("dtype-changed", _("{what}: {items} came back as {dtype}; keep float32 "
                                      "(training runs in float32). Likely cause: an array "
                                      "created with np.zeros(shape) (float64) or a float64 "
                                      "constant.").format(what=what, items=', '.join(wrong),
                                        dtype=dict(grads, dx=dx)[wrong[0]].dtype))


@check(NAME, N_("does not modify dy or the cache"), kind=PROPERTY)
def block_no_mutation(fn):
    config, params, _unused, _unused, _unused = tiny_problem(350, pre_ln=False)
    block = ref.block_params(params, 0)
    x = np.random.default_rng(351).standard_normal((2, 4, config.d))
    _unused, cache = ref.block_forward(x, block, config.n_heads, reference_ops(), pre_ln=False)
    dy = np.random.default_rng(352).standard_normal(x.shape)
    _unused, modified = call_watching_inputs(fn, dy, cache, student_ops())
    modified = [m for m in modified if m != "argument 3"]   # ops: a namespace of functions
    if modified:
        names = {"argument 1": "dy", "argument 2": _("the cache")}
        raise Fail("input-mutated", _("{NAME} modified {items} in place (for instance dy += "
                                      "...). The cache is read again if the backward is called "
                                      "twice; work on new arrays.").format(NAME=NAME,
                                        items=', '.join(names.get(m, m) for m in modified)))
