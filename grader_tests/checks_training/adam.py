"""Checks of ``adam_step`` against steps computed by hand from Algorithm 1 of Kingma & Ba
(2014, arXiv:1412.6980): moments, bias correction, hyper-parameters, the step counter,
dtypes, and inputs left untouched."""

import math

import numpy as np

from solutions import training as ref

from ..checks._util import allclose, as_array, fmt, mutation_check, unpack
from ..guard import call
from ..i18n import N_, _
from ..registry import PROPERTY, Fail, check

NAME = "adam_step"


def _state(params):
    return ref.adam_init(params)


def _result(fn, params, grads, state, what, **hyper):
    new_params, new_state = unpack(call(fn, params, grads, state, **hyper), 2, what)
    if not isinstance(new_params, dict) or set(new_params) != set(params):
        raise Fail("wrong-shape", _("{what}: the new parameters should be a dict with the keys "
                                    "{params}, got {kind}").format(what=what,
                                      params=sorted(params), kind=type(new_params).__name__)
                                  + (_(" with keys {new_params}").format(
                                      new_params=sorted(new_params)) if isinstance(new_params,
                                                                                      dict)
                                     else "") + ".")
    if not isinstance(new_state, dict) or not {"t", "m", "v"} <= set(new_state):
        raise Fail("wrong-shape", _("{what}: the new state should be a dict with keys 't', 'm' "
                                    "and 'v' (as adam_init makes it).").format(what=what))
    return ({k: as_array(v, _("{what}: new_params[{k!r}]").format(
        what=what, k=k)) for k, v in new_params.items()},
            new_state)


def _by_hand(p, g, m, v, t, lr, beta1, beta2, eps):
    """One step of Algorithm 1, written element by element in plain Python floats."""
    out_p, out_m, out_v = [], [], []
    for pi, gi, mi, vi in zip(p, g, m, v):
        mi = beta1 * mi + (1 - beta1) * gi
        vi = beta2 * vi + (1 - beta2) * gi * gi
        m_hat = mi / (1 - beta1 ** t)
        v_hat = vi / (1 - beta2 ** t)
        out_p.append(pi - lr * m_hat / (math.sqrt(v_hat) + eps))
        out_m.append(mi)
        out_v.append(vi)
    return out_p, out_m, out_v


def _no_correction(p, g, m, v, t, lr, beta1, beta2, eps):
    out = []
    for pi, gi, mi, vi in zip(p, g, m, v):
        mi = beta1 * mi + (1 - beta1) * gi
        vi = beta2 * vi + (1 - beta2) * gi * gi
        out.append(pi - lr * mi / (math.sqrt(vi) + eps))
    return out


@check(NAME, N_("first step by hand: m_hat = g, v_hat = g^2, so each parameter moves by about lr "
                "* sign(g)"))
def adam_first_step(fn):
    params = {"w": np.array([0.5, -1.0, 2.0]), "b": np.array([[0.1]])}
    grads = {"w": np.array([0.2, -0.4, 1e-3]), "b": np.array([[-3.0]])}
    what = _("{NAME}(params, grads, adam_init(params), lr=0.01) at step t = 1").format(NAME=NAME)
    new, state = _result(fn, params, grads, _state(params), what, lr=0.01)
    # m = 0.1 g, v = 0.001 g^2; m_hat = m / 0.1 = g, v_hat = v / 0.001 = g^2:
    # p - 0.01 * g / (|g| + 1e-8)
    expected = {"w": np.array([0.5 - 0.01 * 0.2 / (0.2 + 1e-8), -1.0 + 0.01 * 0.4 / (0.4 + 1e-8),
                               2.0 - 0.01 * 1e-3 / (1e-3 + 1e-8)]),
                "b": np.array([[0.1 + 0.01 * 3.0 / (3.0 + 1e-8)]])}
    for k, value in params.items():
        if new[k].shape != value.shape:
            raise Fail("wrong-shape", _("{what}: new_params[{k!r}] has shape {shape}, expected "
                                        "{shape2}.").format(what=what, k=k, shape=new[k].shape,
                                          shape2=params[k].shape))
        if not allclose(new[k], expected[k], rtol=1e-9, atol=1e-12):
            flat = _no_correction(params[k].ravel(), grads[k].ravel(), [0.0] * params[k].size,
                                  [0.0] * params[k].size, 1, 0.01, 0.9, 0.999, 1e-8)
            why = ""
            if allclose(new[k].ravel(), flat, rtol=1e-6):
                why = (_(" Likely cause: no bias correction. At t = 1, m = 0.1 g and v = 0.001 "
                         "g^2 are far too small; m_hat = m / (1 - beta1^t) and v_hat = v / (1 - "
                         "beta2^t) undo that, so the first step is lr * g / |g|."))
            elif allclose(new[k], params[k] + (expected[k] - params[k]) * -1, rtol=1e-9):
                why = _(" The step has the wrong sign: p = p - lr * m_hat / (sqrt(v_hat) + eps).")
            raise Fail("other", _("{what}: new_params[{k!r}] = {new}, expected {expected} "
                                  "(params {params}, grads {grads}).{why}").format(what=what, k=k,
                                    new=fmt(new[k], 10), expected=fmt(expected[k], 10),
                                    params=fmt(params[k]), grads=fmt(grads[k]), why=why))
    if state.get("t") != 1:
        raise Fail("other", _("{what}: the new state has t = {get!r}; after the first step t = 1 "
                              "(the bias correction uses beta^t with this t).").format(what=what,
                                get=state.get('t')))


@check(NAME, N_("three steps by hand with changing gradients and non-default beta1, beta2, eps"))
def adam_three_steps(fn):
    hyper = {"lr": 0.05, "beta1": 0.8, "beta2": 0.9, "eps": 1e-3}
    p = [1.0, -2.0, 0.25, 0.0]
    params = {"theta": np.array(p)}
    state = _state(params)
    m, v = [0.0] * 4, [0.0] * 4
    gradients = ([0.5, -1.0, 2.0, 0.0], [-0.25, -1.0, 0.5, 1e-4], [0.1, 3.0, -2.0, -1e-4])
    for t, g in enumerate(gradients, start=1):
        what = (_("{NAME}(..., lr=0.05, beta1=0.8, beta2=0.9, eps=1e-3) at step t = {t}, "
                  "gradient {g}").format(NAME=NAME, t=t, g=g))
        new, state = _result(fn, params, {"theta": np.array(g)}, state, what, **hyper)
        p, m, v = _by_hand(p, g, m, v, t, **hyper)
        if not allclose(new["theta"], p, rtol=1e-9, atol=1e-12):
            raise Fail("other", _("{what}: parameters {new}, expected {array} from Algorithm 1: "
                                  "m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, p -= lr (m / "
                                  "(1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps). Are lr, beta1, "
                                  "beta2 and eps taken from the arguments?").format(what=what,
                                    new=fmt(new['theta'], 10), array=fmt(np.array(p), 10)))
        for label, mine in (("m", m), ("v", v)):
            got = state.get(label)
            got = got.get("theta") if isinstance(got, dict) else None
            if got is None or not allclose(as_array(got, _("state[{label!r}]").format(
                label=label)), mine, rtol=1e-9,
                                           atol=1e-15):
                raise Fail("other", _("{what}: the new state's {label}['theta'] is {got}, "
                                      "expected {array}: the state keeps the raw moments (before "
                                      "bias correction), as adam_init lays them out.").format(
                                          what=what,
                                        label=label, got=fmt(got, 10),
                                        array=fmt(np.array(mine), 10)))
        if state.get("t") != t:
            raise Fail("other", _("{what}: the new state has t = {get!r}, expected {t}.").format(
                what=what,
                                    get=state.get('t'), t=t))
        params = new


@check(NAME, N_("float32 parameters stay float32"), kind=PROPERTY)
def adam_float32(fn):
    params = {"W": np.ones((3, 2), np.float32), "b": np.zeros(2, np.float32)}
    grads = {"W": np.full((3, 2), 0.5, np.float32), "b": np.ones(2, np.float32)}
    new, _unused = _result(fn, params, grads, _state(params), _("{NAME} on float32 parameters").format(NAME=NAME))
    wrong = [k for k, v in new.items() if v.dtype != np.float32]
    if wrong:
        raise Fail("dtype-changed", _("{NAME} on float32 parameters returned {wrong} as {dtype}; "
                                      "keep the parameters' dtype (training runs in float32).").format(NAME=NAME,
                                        wrong=wrong[0], dtype=new[wrong[0]].dtype))


@check(NAME, N_("does not modify params, grads or state"), kind=PROPERTY)
def adam_no_mutation(fn):
    params = {"W": np.arange(6.0).reshape(3, 2), "b": np.ones(2)}
    grads = {"W": np.full((3, 2), 0.5), "b": np.array([1.0, -1.0])}
    state = ref.adam_step(params, grads, _state(params))[1]
    mutation_check(fn, (params, grads, state), {}, NAME, ["params", "grads", "state"])
