"""Checks of ``layer_norm_forward`` and ``layer_norm_backward`` (Ba, Kiros, Hinton 2016,
arXiv:1607.06450; the closed-form backward of docs/contract.md §2).

How a backward is graded (here and in ``attention_block``): a backward earns its points
only for being the gradient of the function the contract defines. Each backward check
runs the student's own forward for the cache it hands the backward (``student_cache``),
and only on an input where that forward is right: its output ``y`` must match the
reference forward's at the forward checks' own tolerance (float32 inputs: ``1e-3``).
Where it does not, the backward check fails, saying that the backward could not be
checked because the forward is wrong on this input and pointing to the forward's own
report, with the forward's fault id when the forward's diagnosis names one, ``other``
otherwise. The gradients a backward is compared with are central differences of the
reference forward, never of the student's forward: a backward that is the exact
gradient of a wrong forward (an identity "layer norm" and a pass-through backward)
earns nothing.
"""

from typing import Any

import numpy as np
from hypothesis import given

from solutions import attention as ref

from .. import gradcheck
from .. import strategies as S
from ..guard import StubHit, StudentTimeout, call, crash_fault, peer
from ..i18n import N_, _
from ..registry import Fail, PROPERTY, check
from ._util import (allclose, as_array, backward_mutation_check, diagnose, dtype_check,
                    expect_shape, fmt, mutation_check, rng, unpack, worst_difference)

FWD, BWD = "layer_norm_forward", "layer_norm_backward"
EPS = 1e-5

# Float32 inputs: the tolerance of the forward's output at which a backward is checked
# (float32 rounding of an honest forward stays far below it, a wrong forward far above).
FLOAT32_FORWARD_TOLERANCE = {"rtol": 1e-3, "atol": 1e-3}

# Forward name -> (its backward's name, ``mistake(y, args, kwargs, what, rtol, atol)``
# returning None or ``(fault or None, message)`` as ``_forward_mistake``, and the forward
# checks' own ``rtol``, ``atol`` for float64). ``attention_block`` adds its forward.
FORWARDS = {}


def _inputs(seed, shape, dtype=np.float64, small_variance_token=True):
    r = rng(seed)
    x = r.normal(size=shape) * 2 + 0.5
    if small_variance_token and len(shape) >= 2:
        x[(0,) * (len(shape) - 1)] = 3.0 + r.normal(size=shape[-1]) * 1e-3  # var ~ 1e-6 < eps
    d = shape[-1]
    gamma = 1 + 0.5 * r.normal(size=d)
    beta = 0.3 * r.normal(size=d)
    return x.astype(dtype), gamma.astype(dtype), beta.astype(dtype)


def _forward_variants(x, gamma, beta):
    d = x.shape[-1]
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    out = []
    if d > 1:
        unbiased = x.var(-1, keepdims=True, ddof=1)
        out.append(("layer-norm-variance", gamma * (x - mu) / np.sqrt(unbiased + EPS) + beta,
                    _("the unbiased variance (divide by d - 1) was used; layer norm uses the "
                      "biased one (divide by d)")))
    out.append(("layer-norm-variance", gamma * (x - mu) / (np.sqrt(var) + EPS) + beta,
                _("eps was added outside the square root: sqrt(var + eps), not sqrt(var) + eps")))
    out.append(("layer-norm-variance", gamma * (x - mu) / np.sqrt((x * x).mean(-1, keepdims=True)
                                                                  + EPS) + beta,
                _("the variance was not centred: mean((x - mean)^2), not mean(x^2)")))
    out.append(("layer-norm-variance", gamma * (x - mu) / np.sqrt(var) + beta if np.all(var > 0)
                else None, _("eps is missing")))
    if x.dtype == np.float32:
        # Mathematically the biased variance; in float32 mean(x^2) and mean(x)^2 agree to
        # about 7 digits, so their difference keeps rounding error of the order of
        # 1e-7 * mean(x)^2 and a token whose variance is small against its mean^2 loses it.
        one_pass = np.maximum((x * x).mean(-1, keepdims=True) - mu * mu, 0)
        out.append(("layer-norm-variance", gamma * (x - mu) / np.sqrt(one_pass + EPS) + beta,
                    _("the variance was computed in one pass, mean(x^2) - mean(x)^2, in float32: "
                      "the two terms cancel and rounding error of the order of 1e-7 * mean^2 "
                      "replaces the small variance of a token")))
    return out


_SMALL_VARIANCE_NOTE = N_(" one token has variance about 1e-6 (below eps = 1e-5).")


def _forward_mistake(y, x, gamma, beta, what, rtol=1e-6, atol=1e-8, note=_SMALL_VARIANCE_NOTE):
    """What is wrong with ``y`` as the layer norm of ``x``, or None if it is right.

    ``note`` ends the sentence about ``x`` (what is special about the input).

    Returns:
        None, or ``(fault or None, message)``: the fault id when a known mistake
        reproduces ``y`` (None when none does), and the student-facing sentence.

    Raises:
        Fail: ``wrong-shape`` if ``y`` is not an array of ``x``'s shape.
    """
    y = as_array(y, _("{what}: y").format(what=what))
    expect_shape(y, x.shape, _("{what}: y").format(what=what))
    expected, _unused = ref.layer_norm_forward(x, gamma, beta)
    if allclose(y, expected, rtol=rtol, atol=atol):
        return None
    fault, why = diagnose(y, _forward_variants(x, gamma, beta), None, rtol=rtol, atol=atol)
    return fault, (_("{what}: y differs from gamma * (x - mean) / sqrt(var + eps) + beta "
                     "({worst_difference}); x has shape {shape},{note}").format(what=what,
                       worst_difference=worst_difference(y, expected), shape=x.shape, note=_(note))
                   + (_(" Likely cause: {why}.").format(why=why) if why else
                      _(" Mean and biased variance go over the last axis of each token.")))


def _expect_forward(fn, x, gamma, beta, what):
    y, cache = unpack(call(fn, x, gamma, beta), 2, what)
    mistake = _forward_mistake(y, x, gamma, beta, what)
    if mistake:
        fault, message = mistake
        raise Fail(fault or "layer-norm-variance", message)
    return as_array(y, _("{what}: y").format(what=what))


def _mistake_of_call(y, args, kwargs, what, rtol, atol):
    x, gamma, beta = args[:3]
    return _forward_mistake(y, x, gamma, beta, what, rtol=rtol, atol=atol, note=_(" the input of "
                                                                                  "this backward "
                                                                                  "check."))


FORWARDS[FWD] = (BWD, _mistake_of_call, 1e-6, 1e-8)


@check(FWD, N_("matches gamma * (x - mean) / sqrt(var + eps) + beta (biased variance, last axis)"))
def forward_matches_definition(fn):
    for seed, shape in ((30, (2, 3, 6)), (31, (4, 5)), (32, (2, 2, 3, 4))):
        x, gamma, beta = _inputs(seed, shape)
        _expect_forward(fn, x, gamma, beta, _("{FWD}(x of shape {shape})").format(FWD=FWD,
                                                shape=shape))


@check(FWD, N_("with gamma = 1, beta = 0 every token has mean 0 and variance var / (var + eps)"))
def forward_normalises(fn):
    @S.SETTINGS
    @given(x=S.float_arrays(S.array_shapes(1, 3, 1, 5), np.float64, bound=50.0))
    def prop(x):
        d = x.shape[-1]
        _expect_forward(fn, x, np.ones(d), np.zeros(d), _("{FWD}(x of shape {shape}, gamma = 1, "
                                                          "beta = 0) with x =\n{x}").format(FWD=FWD,
                                                            shape=x.shape, x=fmt(x)))

    prop()


@check(FWD, N_("float32 in, float32 out"), kind=PROPERTY)
def forward_keeps_float32(fn):
    dtype_check(fn, lambda dt: (_inputs(33, (2, 3, 4), dt), {}),
                lambda res: [("y", unpack(res, 2, FWD)[0])], FWD)


@check(FWD, N_("float32: matches the definition to float32 rounding, a token of small variance "
               "included"))
def forward_float32_values(fn):
    """The float32 forward is right to the tolerance at which its backward is checked.

    A backward is checked on float32 inputs only where the student's own float32 forward
    matches the reference to ``FLOAT32_FORWARD_TOLERANCE``; this check holds the forward
    itself to that tolerance, on an input with one token of variance about 1e-6, so that a
    float32 forward that loses such a token to rounding costs the forward its points and
    not only the backward's.
    """
    for seed, shape in ((35, (2, 3, 8)), (36, (3, 16))):
        x, gamma, beta = _inputs(seed, shape, np.float32)
        what = _("{FWD}(float32 x of shape {shape})").format(FWD=FWD, shape=shape)
        y, _unused = unpack(call(fn, x, gamma, beta), 2, what)
        mistake = _forward_mistake(y, x, gamma, beta, what, note=_SMALL_VARIANCE_NOTE,
                                   **FLOAT32_FORWARD_TOLERANCE)
        if mistake:
            fault, message = mistake
            raise Fail(fault or "layer-norm-variance", message)


@check(FWD, N_("does not modify x, gamma or beta"), kind=PROPERTY)
def forward_no_mutation(fn):
    mutation_check(fn, _inputs(34, (2, 3, 4)), {}, FWD, ["x", "gamma", "beta"])


# --- backward -----------------------------------------------------------------------------


def student_cache(forward_name: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    """Run the student's forward for the cache a backward check hands the backward.

    The backward is checked only where this forward is right (see the module's
    docstring): its ``y`` must match the reference's on these arguments.

    Args:
        forward_name: ``"layer_norm_forward"`` or ``"attention_forward"`` (a key of
            ``FORWARDS``).
        *args, **kwargs: the forward's arguments (float64 or float32 arrays).

    Returns:
        ``(y, cache)`` as the student's forward returned them.

    Raises:
        Fail: the backward cannot be checked on these arguments: the forward is missing,
            a stub, crashed, or is wrong on them (the forward's fault id where known,
            else ``other``); ``StudentTimeout`` if the forward ran out of time.
    """
    backward_name, mistake_of, rtol, atol = FORWARDS[forward_name]
    forward = peer(forward_name)
    try:
        y, cache = unpack(call(forward, *args, **kwargs), 2, forward_name)
    except StudentTimeout:
        raise
    except Fail as failure:
        raise _unchecked(backward_name, forward_name, failure.fault, failure.message) from None
    except (NotImplementedError, StubHit):
        raise Fail("not-implemented", _("the backward is checked with the cache of your "
                                        "{forward_name}, which still raises NotImplementedError.").format(forward_name=forward_name))
    except Exception as exc:
        raise Fail(crash_fault(exc), _("the backward is checked with the cache of your "
                                       "{forward_name}, which raised {getattr}: {exc}").format(
                                           forward_name=forward_name,
                                         getattr=getattr(exc, "type_name", type(exc).__name__),
                                         exc=exc)) \
            from None
    floats = [np.asarray(a).dtype for a in args if isinstance(a, np.ndarray)]
    if floats and floats[0] == np.float32:
        rtol, atol = FLOAT32_FORWARD_TOLERANCE["rtol"], FLOAT32_FORWARD_TOLERANCE["atol"]
    try:
        mistake = mistake_of(y, args, kwargs, forward_name, rtol, atol)
    except Fail as failure:  # y is not an array of the right shape
        raise _unchecked(backward_name, forward_name, failure.fault, failure.message) from None
    if mistake:
        fault, message = mistake
        raise _unchecked(backward_name, forward_name, fault, message)
    return y, cache


def _unchecked(backward_name, forward_name, fault, message):
    """The ``Fail`` of a backward check that could not run because the forward is wrong."""
    return Fail(fault or "other",
                _("{backward_name} could not be checked on this input because your "
                  "{forward_name} is wrong on it: {message} A backward is checked against the "
                  "gradient of the forward the contract defines, with the cache of your "
                  "{forward_name}, so only on inputs where your {forward_name} is right: see the "
                  "report of {forward_name}, fix it there, and this check will run.").format(
                      backward_name=backward_name,
                    forward_name=forward_name, message=message))


def _backward_result(fn, dy, cache, what):
    dx, dgamma, dbeta = unpack(call(fn, dy, cache), 3, what)
    return (as_array(dx, _("{what}: dx").format(what=what)), as_array(dgamma, _("{what}: dgamma").format(what=what)),
            as_array(dbeta, _("{what}: dbeta").format(what=what)))


def _forward_gradients(forward, x, gamma, beta, G):
    """Central differences of ``sum(G * forward(x, gamma, beta)[0])`` in x, gamma, beta."""
    def loss(which):
        def f(v):
            args = [x, gamma, beta]
            args[which] = v
            return float((np.asarray(forward(*args)[0], dtype=np.float64) * G).sum())
        return f

    return {"dx": gradcheck.numerical_gradient(loss(0), x),
            "dgamma": gradcheck.numerical_gradient(loss(1), gamma),
            "dbeta": gradcheck.numerical_gradient(loss(2), beta)}


def _backward_candidates(x, gamma, G):
    """dx under each dropped term of the closed form."""
    mu = x.mean(-1, keepdims=True)
    inv = 1 / np.sqrt(x.var(-1, keepdims=True) + EPS)
    xhat = (x - mu) * inv
    g = G * gamma
    m1, m2 = g.mean(-1, keepdims=True), (g * xhat).mean(-1, keepdims=True)
    return [
        ("layer-norm-backward-terms", inv * (g - xhat * m2), _("the - mean(dxhat) term is missing")),
        ("layer-norm-backward-terms", inv * (g - m1), _("the - xhat * mean(dxhat * xhat) term is "
                                                        "missing")),
        ("layer-norm-backward-terms", inv * g, _("both mean terms are missing")),
        ("layer-norm-backward-terms", g - m1 - xhat * m2, _("the factor inv = 1 / sqrt(var + "
                                                            "eps) is missing")),
        ("layer-norm-backward-terms", inv * (G - G.mean(-1, keepdims=True)
                                             - xhat * (G * xhat).mean(-1, keepdims=True)),
         _("gamma is missing from the path from y back to xhat")),
        ("layer-norm-backward-terms", gamma * inv * (G - G.mean(-1, keepdims=True)
                                                     - xhat * (G * xhat).mean(-1, keepdims=True)),
         _("gamma was taken out of the row means: mean(dy * gamma) is not gamma * mean(dy), "
           "gamma differing from one feature to the next; the means run over dxhat = dy * "
           "gamma")),
    ]


def _grad_fail(fault, what, name, got, expected, why=""):
    rel, abs_err, index = gradcheck.rel_error(got, expected)
    raise Fail(fault, _("{what}: {name} disagrees with central differences of the forward (eps = "
                        "{EPS:g}, float64, random upstream gradient dy): relative error "
                        "{rel:.3g} at index {index} ({worst_difference}); the threshold is "
                        "{REL_TOL:g}.").format(what=what, name=name, EPS=gradcheck.EPS, rel=rel,
                          index=index, worst_difference=worst_difference(got, expected),
                          REL_TOL=gradcheck.REL_TOL)
                      + (_(" Likely cause: {why}.").format(why=_(why)) if why else ""))


def _check_backward(fn, shape, seed, parts=("dx", "dgamma", "dbeta")):
    x, gamma, beta = _inputs(seed, shape, small_variance_token=False)
    G = rng(seed + 100).normal(size=shape)
    what = _("{BWD} for x of shape {shape}").format(BWD=BWD, shape=shape)
    _unused, cache = student_cache(FWD, x, gamma, beta)
    dx, dgamma, dbeta = _backward_result(fn, G, cache, what)
    numeric = _forward_gradients(ref.layer_norm_forward, x, gamma, beta, G)

    def ok(name, got):
        return gradcheck.gradient_ok(got, numeric[name])

    d = shape[-1]
    if "dx" in parts:
        expect_shape(dx, shape, _("{what}: dx").format(what=what))
        if not ok("dx", dx):
            fault, why = diagnose(dx, _backward_candidates(x, gamma, G),
                                  "layer-norm-backward-terms", rtol=1e-5, atol=1e-8)
            _grad_fail(fault, what, "dx", dx, numeric["dx"],
                       why or _("dx matches none of the usual mistakes; re-derive it term by "
                                "term from the forward (x reaches y through the mean, the "
                                "variance and x itself)"))
    lead = tuple(range(len(shape) - 1))
    xhat = ref.layer_norm_forward(x, np.ones(d), np.zeros(d))[0]
    for name, got, partial in (("dgamma", dgamma, G * xhat), ("dbeta", dbeta, G)):
        if name not in parts:
            continue
        if got.shape != (d,):
            if got.size == d and ok(name, got.reshape(d)):
                raise Fail("wrong-shape", _("{what}: {name} has the right values but shape "
                                            "{shape}; it must be ({d},) (no keepdims).").format(
                                                what=what,
                                              name=name, shape=got.shape, d=d))
            partial_shapes = {partial.sum(axis=a).shape for a in lead} | {partial.shape}
            fault = "param-grad-axes" if got.shape in partial_shapes or got.size != d else \
                "weight-grad-wrong"
            raise Fail(fault, _("{what}: {name} has shape {shape}, expected ({d},): sum over "
                                "every leading axis ({items}), not just one.").format(what=what,
                                  name=name, shape=got.shape, d=d,
                                  items=', '.join(map(str, lead))))
        if not ok(name, got):
            candidates = [("param-grad-axes", partial.sum(axis=a)[(0,) * (len(shape) - 2)]
                           if len(shape) > 2 else None, _("summed over one leading axis only"))
                          for a in lead]
            candidates.append(("param-grad-axes", partial.mean(axis=lead), _("averaged over the "
                                                                             "leading axes "
                                                                             "instead of summed: "
                                                                             "the loss sums over "
                                                                             "every token, and "
                                                                             "so does the "
                                                                             "gradient of a "
                                                                             "shared parameter")))
            other = (G * x).sum(axis=lead) if name == "dgamma" else None
            candidates.append(("weight-grad-wrong", other, _("dgamma was computed from x, not "
                                                             "from the normalised input")))
            swapped = G.sum(axis=lead) if name == "dgamma" else (G * xhat).sum(axis=lead)
            candidates.append(("weight-grad-wrong", swapped, _("dgamma and dbeta are swapped")))
            fault, why = diagnose(got, candidates, "weight-grad-wrong", rtol=1e-6, atol=1e-9)
            _grad_fail(fault, what, name, got, numeric[name],
                       why or (_("gamma multiplies the normalised input") if name == "dgamma"
                               else _("beta is added")) + _(" at every token of every sequence"))


@check(BWD, N_("dx matches central differences (B = 2, T = 3, d = 5)"))
def backward_dx(fn):
    _check_backward(fn, (2, 3, 5), 40, parts=("dx",))


@check(BWD, N_("dgamma and dbeta match central differences, summed over every leading axis"))
def backward_params(fn):
    _check_backward(fn, (2, 3, 5), 41, parts=("dgamma", "dbeta"))


@check(BWD, N_("any number of leading axes: (d,), (T, d), (2, 2, 3, d)"))
def backward_any_rank(fn):
    for seed, shape in ((42, (6,)), (43, (4, 3)), (44, (2, 2, 3, 4))):
        _check_backward(fn, shape, seed)


@check(BWD, N_("float32 in, float32 out (dx, dgamma, dbeta)"), kind=PROPERTY)
def backward_keeps_float32(fn):
    x, gamma, beta = _inputs(45, (2, 3, 4), np.float32)
    _unused, cache = student_cache(FWD, x, gamma, beta)
    G = rng(46).normal(size=(2, 3, 4)).astype(np.float32)
    dtype_check(fn, lambda dt: ((G, cache), {}),
                lambda res: list(zip(("dx", "dgamma", "dbeta"), unpack(res, 3, BWD))), BWD)


@check(BWD, N_("does not modify dy or the cache"), kind=PROPERTY)
def backward_no_mutation(fn):
    x, gamma, beta = _inputs(47, (2, 3, 4))
    _unused, cache = student_cache(FWD, x, gamma, beta)
    G = rng(48).normal(size=(2, 3, 4))
    backward_mutation_check(fn, G, cache, BWD)
