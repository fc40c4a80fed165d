"""Checks of ``attention_forward`` and ``attention_backward``: multi-head self-attention with
biases and its hand-written backward (docs/contract.md §2; the softmax backward
``dS = P * (dP - rowsum(dP * P))``).

A backward earns its points only for being the gradient of the function the contract
defines (the rule is spelt out in ``layer_norm``'s docstring): each ``attention_backward``
check runs only on an input where the student's ``attention_forward`` returns the
reference's ``y`` (else it fails, naming the forward and its mistake), and compares the
gradients with central differences of the reference ``attention_forward``.
"""

import math

import numpy as np

from solutions import attention as ref

from .. import gradcheck
from ..guard import call
from ..i18n import N_, _
from ..registry import Fail, PROPERTY, check
from ._util import (allclose, as_array, backward_mutation_check, diagnose, dtype_check,
                    expect_shape, head_count_check, mutation_check, rng, unpack,
                    worst_difference)
from ._variants import mha_candidates, mha_variant
from .layer_norm import FORWARDS, student_cache

FWD, BWD = "attention_forward", "attention_backward"
WEIGHTS = ("W_Q", "W_K", "W_V", "W_O")
BIASES = ("b_Q", "b_K", "b_V", "b_O")


def _params(seed, d=8, dtype=np.float64):
    r = rng(seed)
    p = {k: (r.normal(size=(d, d)) * 1.5 / np.sqrt(d)).astype(dtype) for k in WEIGHTS}
    p.update({k: (0.2 * r.normal(size=d)).astype(dtype) for k in BIASES})
    return p


def _x(seed, B=2, T=4, d=8, dtype=np.float64):
    return rng(seed).normal(size=(B, T, d)).astype(dtype)


def _forward_mistake(y, x, params, h, causal=True, scale=True, what=FWD, rtol=1e-6,
                     atol=1e-9):
    """What is wrong with ``y`` as ``attention_forward(x, params, h, causal, scale)[0]``.

    Returns:
        None if ``y`` is right, else ``(fault or None, message)``: the fault id when a
        known mistake reproduces ``y`` (None when none does), and the student-facing
        sentence.

    Raises:
        Fail: ``wrong-shape`` if ``y`` is not an array of ``x``'s shape.
    """
    y = as_array(y, _("{what}: y").format(what=what))
    expect_shape(y, x.shape, _("{what}: y").format(what=what))
    expected, _unused = ref.attention_forward(x, params, h, causal=causal, scale=scale)
    if allclose(y, expected, rtol=rtol, atol=atol):
        return None
    T = x.shape[1]
    mask = ref.causal_mask(T) if causal else None
    Ws = tuple(params[k] for k in WEIGHTS)
    bs = tuple(params[k] for k in BIASES)
    candidates = mha_candidates(x, Ws, h, mask, biases=bs, scale=scale)
    if causal:
        alt, _unused = mha_variant(x, Ws, h, None, biases=bs, scale=scale)
        candidates.append(("mask-wrong-axis", alt, _("the causal mask was not applied although "
                                                     "causal=True")))
    fault, why = diagnose(y, candidates, None, rtol=rtol, atol=atol)
    return fault, (_("{what}: y differs from the definition ({worst_difference}); x has shape "
                     "{shape}, n_heads = {h}, causal={causal}, scale={scale}.").format(what=what,
                       worst_difference=worst_difference(y, expected), shape=x.shape, h=h,
                       causal=causal, scale=scale)
                   + (_(" Likely cause: {why}.").format(why=why) if why else
                      _(" Check Q = x W_Q + b_Q (and K, V), per head softmax(Q K^T / sqrt(d_h)) "
                        "with the causal mask as -inf before it, merge, then @ W_O + b_O.")))


def _expect_forward(fn, x, params, h, causal=True, scale=True, what=FWD):
    y, _unused = unpack(call(fn, x, params, h, causal=causal, scale=scale), 2, what)
    mistake = _forward_mistake(y, x, params, h, causal, scale, what)
    if mistake:
        fault, message = mistake
        raise Fail(fault or "other", message)
    return as_array(y, _("{what}: y").format(what=what))


def _mistake_of_call(y, args, kwargs, what, rtol, atol):
    x, params, h = args[:3]
    return _forward_mistake(y, x, params, h, kwargs.get("causal", True),
                            kwargs.get("scale", True), what, rtol=rtol, atol=atol)


FORWARDS[FWD] = (BWD, _mistake_of_call, 1e-6, 1e-9)


@check(FWD, N_("matches the definition, causal, h = 2, B = 2"))
def forward_causal(fn):
    _expect_forward(fn, _x(50, T=5), _params(51), 2, what=f"{FWD}(n_heads=2, causal=True)")


@check(FWD, N_("matches the definition without the causal mask, h = 4"))
def forward_not_causal(fn):
    _expect_forward(fn, _x(52), _params(53), 4, causal=False,
                    what=f"{FWD}(n_heads=4, causal=False)")


@check(FWD, N_("scale=False drops the 1/sqrt(d_h) factor"))
def forward_unscaled(fn):
    _expect_forward(fn, _x(54), _params(55), 2, scale=False, what=f"{FWD}(scale=False)")


@check(FWD, N_("causal: the output at position t does not depend on later tokens"), kind=PROPERTY)
def forward_no_future_leak(fn):
    x, params = _x(56, T=6), _params(57)
    x2 = x.copy()
    x2[:, 3:] = rng(58).normal(size=x2[:, 3:].shape) * 3
    y1, _unused = unpack(call(fn, x, params, 2), 2, FWD)
    y2, _unused = unpack(call(fn, x2, params, 2), 2, FWD)
    y1, y2 = as_array(y1, _("{FWD}: y").format(FWD=FWD)), as_array(y2, _("{FWD}: y").format(FWD=FWD))
    expect_shape(y1, x.shape, _("{FWD}: y").format(FWD=FWD))
    if not allclose(y1[:, :3], y2[:, :3], rtol=1e-9, atol=1e-12):
        Ws = tuple(params[k] for k in WEIGHTS)
        bs = tuple(params[k] for k in BIASES)
        for fault, alt, why in mha_candidates(x, Ws, 2, ref.causal_mask(6), biases=bs):
            if fault != "padding-ignored" and allclose(y1, alt, atol=1e-9):
                raise Fail(fault, _("{FWD}(causal=True): changing tokens 3..5 changed the output "
                                    "at positions 0..2, so the future leaks into the past. "
                                    "Likely cause: {why}.").format(FWD=FWD, why=_(why)))
        raise Fail("mask-wrong-axis", _("{FWD}(causal=True): changing tokens 3..5 changed the "
                                        "output at positions 0..2 (max change {max:.3g}): the "
                                        "future leaks into the past. Likely cause: the causal "
                                        "mask is missing, transposed, or applied after the "
                                        "softmax.").format(FWD=FWD,
                                          max=np.abs(y1[:, :3] - y2[:, :3]).max()))


@check(FWD, N_("permutation equivariance without the causal mask"), kind=PROPERTY)
def forward_equivariance(fn):
    x, params = _x(59, T=5), _params(60)
    perm = np.array([2, 4, 0, 3, 1])
    y, _unused = unpack(call(fn, x, params, 2, causal=False), 2, FWD)
    yp, _unused = unpack(call(fn, x[:, perm], params, 2, causal=False), 2, FWD)
    y, yp = as_array(y, _("{FWD}: y").format(FWD=FWD)), as_array(yp, _("{FWD}: y").format(FWD=FWD))
    expect_shape(y, x.shape, _("{FWD}: y").format(FWD=FWD))
    expect_shape(yp, x.shape, _("{FWD}: y").format(FWD=FWD))
    if not allclose(yp, y[:, perm], rtol=1e-7, atol=1e-10):
        raise Fail("head-order", _("{FWD}(causal=False): reordering the tokens by {tolist} "
                                   "should reorder the output the same way, but max |f(Px) - P "
                                   "f(x)| = {max:.3g}. Likely cause: tokens mixed with each "
                                   "other, as with heads split or merged in the wrong order.").format(FWD=FWD,
                                     tolist=perm.tolist(), max=np.abs(yp - y[:, perm]).max()))


@check(FWD, N_("no overflow or NaN when the scores reach the thousands (W_Q, W_K scaled by 30)"))
def forward_large_scores(fn):
    x, params = _x(65, T=5), _params(66)
    params["W_Q"] = params["W_Q"] * 30.0  # every score times 900: of order 1e3
    params["W_K"] = params["W_K"] * 30.0
    for causal in (True, False):
        what = _("{FWD}(causal={causal}) with scores in the thousands (W_Q and W_K scaled by 30)").format(FWD=FWD,
                   causal=causal)
        y, _unused = unpack(call(fn, x, params, 2, causal=causal), 2, what)
        y = as_array(y, _("{what}: y").format(what=what))
        expect_shape(y, x.shape, _("{what}: y").format(what=what))
        expected, cache = ref.attention_forward(x, params, 2, causal=causal)
        if not np.all(np.isfinite(y)):
            scores = cache["Q"] @ np.swapaxes(cache["K"], -1, -2) * cache["factor"]
            raise Fail("unstable-softmax",
                       _("{what}: the scores reach {max:.3g} and y holds NaN or inf "
                         "({worst_difference}); the definition is finite there. Likely cause: a "
                         "softmax written inside the function that does not subtract the row "
                         "maximum before exp (exp overflows above about 709 in float64).").format(
                             what=what,
                           max=np.abs(scores).max(),
                           worst_difference=worst_difference(y, expected)))
        _expect_forward(fn, x, params, 2, causal=causal, what=what)


@check(FWD, N_("raises ValueError when d is not divisible by n_heads"), kind=PROPERTY)
def forward_rejects_bad_heads(fn):
    head_count_check(fn, lambda B, T, d, h: (_x(65, B, T, d), _params(66, d), h), FWD)


@check(FWD, N_("float32 in, float32 out"), kind=PROPERTY)
def forward_keeps_float32(fn):
    dtype_check(fn, lambda dt: ((_x(61, dtype=dt), _params(62, dtype=dt), 2), {}),
                lambda res: [("y", unpack(res, 2, FWD)[0])], FWD)


@check(FWD, N_("does not modify x or params"), kind=PROPERTY)
def forward_no_mutation(fn):
    mutation_check(fn, (_x(63), _params(64), 2), {}, FWD, ["x", "params", "n_heads"])


# --- backward -----------------------------------------------------------------------------


def _numeric(forward, x, params, h, causal, scale, G):
    """Central differences of ``sum(G * forward(x, params)[0])`` for x and every parameter."""
    def loss_x(v):
        return float((np.asarray(forward(v, params, h, causal=causal, scale=scale)[0]) * G).sum())

    out = {"dx": gradcheck.numerical_gradient(loss_x, x)}
    for key in WEIGHTS + BIASES:
        def loss_p(v, key=key):
            p = dict(params)
            p[key] = v
            return float((np.asarray(forward(x, p, h, causal=causal, scale=scale)[0]) * G).sum())
        out[key] = gradcheck.numerical_gradient(loss_p, params[key])
    return out


def _backward_variant(x, params, h, causal, scale, G, bug):
    """Gradients under one backward mistake: ``"no-rowsum"``, ``"no-scale"``,
    ``"double-scale"``, ``"always-scale"``."""
    _unused, c = ref.attention_forward(x, params, h, causal=causal, scale=scale)
    d = x.shape[-1]
    P, Q, K, V, O = c["P"], c["Q"], c["K"], c["V"], c["O"]
    factor = c["factor"]
    if bug == "no-scale":
        factor = 1.0
    elif bug == "double-scale":
        factor = factor * factor
    elif bug == "always-scale":
        if scale:
            return None
        factor = 1.0 / math.sqrt(d // h)
    dO = ref.split_heads(G @ params["W_O"].T, h)
    dP = dO @ np.swapaxes(V, -1, -2)
    dV = np.swapaxes(P, -1, -2) @ dO
    rowsum = 0.0 if bug == "no-rowsum" else (dP * P).sum(-1, keepdims=True)
    dS = P * (dP - rowsum) * factor
    if bug == "diagonal":  # only the diagonal of the softmax Jacobian, P (1 - P)
        dS = P * (1 - P) * dP * factor
    grads = {"W_O": O.reshape(-1, d).T @ G.reshape(-1, d), "b_O": G.reshape(-1, d).sum(0)}
    dx = np.zeros_like(x)
    for name, dH in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
        dZ = ref.merge_heads(dH)
        grads["W_" + name] = x.reshape(-1, d).T @ dZ.reshape(-1, d)
        grads["b_" + name] = dZ.reshape(-1, d).sum(0)
        dx = dx + dZ @ params["W_" + name].T
    grads["dx"] = dx
    return grads


BACKWARD_FAULTS = [
    ("diagonal", "softmax-backward", N_("only the diagonal of the softmax Jacobian was used (P * "
                                        "(1 - P) * dP): the row-sum term couples every weight of "
                                        "a row")),
    ("no-rowsum", "softmax-backward", N_("the softmax backward misses the row-sum term: each "
                                         "weight of a row depends on every score of it")),
    ("no-scale", "backward-missing-scale", N_("the forward divides the scores by sqrt(d_h) but "
                                              "the backward does not multiply dS by the same "
                                              "factor")),
    ("double-scale", "backward-missing-scale", N_("the scale factor was applied twice in the "
                                                  "backward")),
    ("always-scale", "backward-missing-scale", N_("the backward scales dS although the forward "
                                                  "ran with scale=False")),
]


class _Setup:
    """One gradient-check configuration with its numerical gradients, computed once."""

    _cache: dict[tuple, np.ndarray] = {}

    def __init__(self, seed, causal=True, scale=True, B=2, T=4, d=8, h=2):
        key = (seed, causal, scale, B, T, d, h)
        self.x, self.params, self.h = _x(seed, B, T, d), _params(seed + 1, d), h
        self.causal, self.scale = causal, scale
        self.G = rng(seed + 2).normal(size=(B, T, d))
        if key not in _Setup._cache:
            _Setup._cache[key] = _numeric(ref.attention_forward, self.x, self.params, h, causal,
                                          scale, self.G)
        self.numeric = _Setup._cache[key]
        self.what = (_("{BWD} (x of shape {value}, n_heads = {h}, causal={causal}, scale={scale})").format(BWD=BWD,
                         value=(B, T, d), h=h, causal=causal, scale=scale))

    def run(self, fn):
        _unused, cache = student_cache(FWD, self.x, self.params, self.h, causal=self.causal,
                                 scale=self.scale)
        dx, grads = unpack(call(fn, self.G, cache), 2, BWD)
        if not isinstance(grads, dict):
            raise Fail("wrong-shape", _("{what}: grads must be a dict with the keys of params, "
                                        "got {kind}.").format(what=self.what,
                                          kind=type(grads).__name__))
        missing = [k for k in WEIGHTS + BIASES if k not in grads]
        if missing:
            raise Fail("wrong-shape", _("{what}: grads lacks the key(s) {items}; it must have "
                                        "the same keys as params.").format(what=self.what,
                                          items=', '.join(missing)))
        return as_array(dx, _("{what}: dx").format(what=self.what)), {k: as_array(grads[k], _("{what}: grads['{k}']").format(what=self.what,
                                                                            k=k)) for k in grads}

    def verify(self, got, names):
        """Fail on the first of ``names`` (``dx`` or a params key) whose gradient is wrong."""
        for name in names:
            value = got[name]
            expected = self.numeric[name]
            label = "dx" if name == "dx" else f"grads['{name}']"
            if value.shape != expected.shape:
                fault = "weight-grad-wrong" if name in WEIGHTS else (
                    "param-grad-axes" if name in BIASES else "wrong-shape")
                raise Fail(fault, _("{what}: {label} has shape {shape}, expected {shape2}").format(
                    what=self.what,
                                      label=label, shape=value.shape, shape2=expected.shape)
                                  + (_(" (sum the bias gradient over the batch and the time "
                                       "axes).") if name in BIASES else "."))
            if gradcheck.gradient_ok(value, expected):
                continue
            candidates = []
            for bug, fault, why in BACKWARD_FAULTS:
                alt = _backward_variant(self.x, self.params, self.h, self.causal, self.scale,
                                        self.G, bug)
                candidates.append((fault, None if alt is None else alt[name], why))
            partner = {"W_Q": "W_K", "W_K": "W_Q", "b_Q": "b_K", "b_K": "b_Q"}.get(name)
            if partner:
                candidates.append(("weight-grad-wrong", self.numeric[partner],
                                   _("{label} holds the gradient of {partner}: the query and key "
                                     "gradients are swapped").format(label=label, partner=partner)))
            if name in WEIGHTS + BIASES:
                tokens = self.x.shape[0] * self.x.shape[1]
                candidates.append(("param-grad-axes", expected / tokens, _("{label} was averaged "
                                                                           "over the B * T = "
                                                                           "{tokens} tokens "
                                                                           "instead of summed: "
                                                                           "the loss sums over "
                                                                           "every token, and so "
                                                                           "does the gradient of "
                                                                           "a shared parameter").format(label=label,
                                                                             tokens=tokens)))
            if name in WEIGHTS:
                candidates.append(("weight-grad-wrong", expected.T, _("{label} is transposed: "
                                                                      "for Z = x @ W, dW = x^T @ "
                                                                      "dZ has the shape (d_in, "
                                                                      "d_out) of W").format(
                                                                          label=label)))
            default = "weight-grad-wrong" if name in WEIGHTS + BIASES else "other"
            if name in ("dx", "W_Q", "W_K", "b_Q", "b_K") and all(
                    k in got and got[k].shape == self.numeric[k].shape
                    and gradcheck.gradient_ok(got[k], self.numeric[k])
                    for k in ("W_V", "b_V", "W_O", "b_O")):
                # the paths that bypass the softmax are right: the error is in its backward
                default = "softmax-backward"
            fault, why = diagnose(value, candidates, default, rtol=1e-4, atol=1e-7)
            if fault == "softmax-backward" and not why:
                why = (_("the gradients through the values and the output projection are right, "
                         "those through the softmax and the score scale are not"))
            rel, _unused, index = gradcheck.rel_error(value, expected)
            raise Fail(fault, _("{what}: {label} disagrees with central differences of the "
                                "forward (eps = {EPS:g}, float64, random upstream gradient): "
                                "relative error {rel:.3g} at index {index} ({worst_difference}); "
                                "threshold {REL_TOL:g}.").format(what=self.what, label=label,
                                  EPS=gradcheck.EPS, rel=rel, index=index,
                                  worst_difference=worst_difference(value, expected),
                                  REL_TOL=gradcheck.REL_TOL) + (_(" Likely cause: {why}.").format(
                                      why=_(why)) if why else ""))


def _grad_check(fn, names, **setup):
    s = _Setup(**setup)
    dx, grads = s.run(fn)
    got = dict(grads)
    got["dx"] = dx
    s.verify(got, names)


# The shapes of the gradient checks keep apart the factors that mistakes multiply a
# gradient by: the batch size B, the tokens B * T, the score scale 1/sqrt(d_h) and its
# square. With B = 3, d_h = 4 (scale 1/2) a gradient divided by the batch size is not the
# scale applied twice (as it would be with B = 2 = sqrt(d_h)); the unscaled check has
# B = 3, d_h = 2 (a scale of 1/sqrt(2) applied although scale=False).
MAIN = {"seed": 70, "B": 3}


@check(BWD, N_("dx matches central differences (B = 3, T = 4, d = 8, h = 2, causal)"))
def backward_dx(fn):
    _grad_check(fn, ["dx"], **MAIN)


@check(BWD, N_("W_O and b_O gradients match central differences"))
def backward_output_projection(fn):
    _grad_check(fn, ["W_O", "b_O"], **MAIN)


@check(BWD, N_("W_V and b_V gradients match central differences"))
def backward_values(fn):
    _grad_check(fn, ["W_V", "b_V"], **MAIN)


@check(BWD, N_("W_Q, W_K, b_Q, b_K gradients match central differences (through the softmax)"))
def backward_queries_keys(fn):
    _grad_check(fn, ["W_Q", "W_K", "b_Q", "b_K"], **MAIN)


@check(BWD, N_("every gradient matches for scale=False, causal=False, h = 4, B = 3"))
def backward_unscaled(fn):
    _grad_check(fn, ["dx", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"], seed=80,
                causal=False, scale=False, B=3, T=3, h=4)


@check(BWD, N_("float32 in, float32 out (dx and every gradient)"), kind=PROPERTY)
def backward_keeps_float32(fn):
    x, params = _x(90, dtype=np.float32), _params(91, dtype=np.float32)
    _unused, cache = student_cache(FWD, x, params, 2)
    G = rng(92).normal(size=x.shape).astype(np.float32)

    def outputs(res):
        dx, grads = unpack(res, 2, BWD)
        if not isinstance(grads, dict):
            raise Fail("wrong-shape", _("{BWD}: grads must be a dict, got {kind}.").format(BWD=BWD,
                                          kind=type(grads).__name__))
        return [("dx", dx)] + [(f"grads['{k}']", v) for k, v in sorted(grads.items())]

    dtype_check(fn, lambda dt: ((G, cache), {}), outputs, BWD)


@check(BWD, N_("does not modify dy or the cache"), kind=PROPERTY)
def backward_no_mutation(fn):
    x, params = _x(93), _params(94)
    _unused, cache = student_cache(FWD, x, params, 2)
    G = rng(95).normal(size=x.shape)
    backward_mutation_check(fn, G, cache, BWD)
