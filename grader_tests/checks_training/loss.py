"""Checks of ``masked_cross_entropy``: the mean over the masked positions only, its
gradient ``(softmax - onehot) / N`` there and 0 elsewhere, stability, dtype, inputs."""

import numpy as np

from solutions import training as ref

from .. import gradcheck
from ..checks._util import (
    allclose,
    as_array,
    expect_shape,
    fmt,
    mutation_check,
    unpack,
    worst_difference,
)
from ..i18n import N_, _
from ..guard import call
from ..registry import PROPERTY, Fail, check

NAME = "masked_cross_entropy"


def _problem(seed, B=3, T=5, V=7, scale=2.0, dtype=np.float64):
    r = np.random.default_rng(seed)
    logits = (scale * r.standard_normal((B, T, V))).astype(dtype)
    targets = r.integers(0, V, size=(B, T))
    mask = r.random((B, T)) < 0.5
    mask[0, 0], mask[-1, -1] = True, False          # at least one of each
    return logits, targets, mask


def _log_softmax(z):
    z = np.asarray(z, dtype=np.float64)
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _result(fn, logits, targets, mask, what):
    loss, dlogits = unpack(call(fn, logits, targets, mask), 2, what)
    if isinstance(loss, np.ndarray) and loss.size == 1:
        loss = loss.reshape(())[()]
    if not isinstance(loss, (float, int, np.floating, np.integer)) or isinstance(loss, bool):
        raise Fail("wrong-shape", _("{what}: the loss should be one number (a Python float), got "
                                    "{kind}.").format(what=what, kind=type(loss).__name__))
    dlogits = as_array(dlogits, _("{what}: dlogits").format(what=what))
    expect_shape(dlogits, logits.shape, _("{what}: dlogits").format(what=what))
    return float(loss), dlogits


def _loss_variants(logits, targets, mask):
    """What a mistake in the loss would return on the same input."""
    picked = np.take_along_axis(_log_softmax(logits), targets[..., None], axis=-1)[..., 0]
    return [
        ("other", -picked.mean(),
         _("the loss averages over every position: only the answer positions count")),
        ("mask-inverted", -picked[~mask].mean() if (~mask).any() else None,
         _("the loss counts the positions where loss_mask is False: True means 'counts'")),
        ("other", -picked[mask].sum() / mask.size,
         _("the masked sum is divided by B * T; divide by the number of True entries of the mask")),
        ("other", -picked[mask].sum(),
         _("the loss is a sum; the contract asks for the mean over the masked positions")),
    ]


@check(NAME, N_("the loss is the mean of -log softmax(logits)[target] over the masked positions"))
def loss_value(fn):
    for seed, shape in ((200, (3, 5, 7)), (201, (2, 8, 21)), (202, (1, 1, 3))):
        logits, targets, mask = _problem(seed, *shape)
        if shape == (1, 1, 3):
            mask[:] = True
        what = _("{NAME}(logits of shape {shape}, mask with {sum} True)").format(NAME=NAME,
                   shape=shape, sum=int(mask.sum()))
        loss, _unused = _result(fn, logits, targets, mask, what)
        picked = np.take_along_axis(_log_softmax(logits), targets[..., None], axis=-1)[..., 0]
        expected = float(-picked[mask].mean())
        if not np.isclose(loss, expected, rtol=1e-7, atol=1e-10):
            fault, why = "other", ""
            for f, value, explanation in _loss_variants(logits, targets, mask):
                if value is not None and np.isfinite(value) and np.isclose(loss, value,
                                                                           rtol=1e-7):
                    fault, why = f, explanation
                    break
            raise Fail(fault, _("{what}: loss {loss:.6g}, expected {expected:.6g} = mean over "
                                "the masked positions of -log softmax(logits)[target].").format(
                                    what=what,
                                  loss=loss, expected=expected)
                              + (_(" Likely cause: {why}.").format(why=why) if why else ""))


@check(NAME, N_("dlogits = (softmax - onehot(target)) / N at masked positions, 0 elsewhere "
                "(central differences, float64)"))
def loss_gradient(fn):
    logits, targets, mask = _problem(203)
    what = _("{NAME}(logits of shape {shape})").format(NAME=NAME, shape=logits.shape)
    _unused, dlogits = _result(fn, logits, targets, mask, what)
    if np.any(dlogits[~mask] != 0):
        b, t = (int(i) for i in np.argwhere(np.any(dlogits != 0, axis=-1) & ~mask)[0])
        raise Fail("other", _("{what}: dlogits[{b}, {t}] = {dlogits} but position ({b}, {t}) is "
                              "masked out (loss_mask False): a position that does not count in "
                              "the loss gets gradient exactly 0.").format(what=what, b=b, t=t,
                                dlogits=fmt(dlogits[b, t])))

    def loss_of(z):
        return float(-np.take_along_axis(_log_softmax(z), targets[..., None],
                                         axis=-1)[..., 0][mask].mean())

    numeric = gradcheck.numerical_gradient(loss_of, logits)
    if not gradcheck.gradient_ok(dlogits, numeric):
        p = np.exp(_log_softmax(logits))
        onehot = np.eye(logits.shape[-1])[targets]
        n = mask.sum()
        candidates = [
            ((p - onehot) * mask[..., None],
             _("dlogits is not divided by N, the number of masked positions")),
            ((onehot - p) * mask[..., None] / n,
             _("the sign is flipped: the gradient of -log p_target is p - onehot")),
            (p * mask[..., None] / n, _("the - onehot(target) term is missing")),
            ((p - onehot) * mask[..., None] / mask.size, _("dlogits is divided by B * T instead "
                                                           "of N")),
        ]
        why = next((w for value, w in candidates if allclose(dlogits, value, rtol=1e-6)), "")
        rel, _unused, index = gradcheck.rel_error(dlogits, numeric)
        raise Fail("other", _("{what}: dlogits disagrees with central differences of the loss "
                              "(eps = {EPS:g}): relative error {rel:.3g} at index {index} "
                              "({worst_difference}); threshold {REL_TOL:g}.").format(what=what,
                                EPS=gradcheck.EPS, rel=rel, index=index,
                                worst_difference=worst_difference(dlogits, numeric),
                                REL_TOL=gradcheck.REL_TOL) + (_(" Likely cause: {why}.").format(
                                    why=why) if why else ""))


@check(NAME, N_("stable for logits of magnitude 1e4 (no overflow, no NaN)"))
def loss_stable(fn):
    logits, targets, mask = _problem(204, scale=1e4)
    what = _("{NAME}(logits of magnitude up to about 3e4)").format(NAME=NAME)
    loss, dlogits = _result(fn, logits, targets, mask, what)
    if not np.isfinite(loss) or not np.all(np.isfinite(dlogits)):
        raise Fail("unstable-softmax", _("{what}: got loss {loss} and {sum} non-finite entries "
                                         "in dlogits. Subtract each row's maximum before np.exp: "
                                         "log softmax(z)_k = z_k - m - log sum_j exp(z_j - m).").format(what=what,
                                           loss=loss, sum=int(np.sum(~np.isfinite(dlogits)))))
    picked = np.take_along_axis(_log_softmax(logits), targets[..., None], axis=-1)[..., 0]
    expected = float(-picked[mask].mean())
    if not np.isclose(loss, expected, rtol=1e-7):
        raise Fail("unstable-softmax", _("{what}: loss {loss:.6g}, expected {expected:.6g}; with "
                                         "large logits the target's probability rounds to 0 and "
                                         "its log to -inf: re-read how the loss stays finite for "
                                         "large logits.").format(what=what, loss=loss,
                                           expected=expected))


@check(NAME, N_("float32 logits give float32 dlogits"))
def loss_float32(fn):
    logits, targets, mask = _problem(205, dtype=np.float32)
    _unused, dlogits = _result(fn, logits, targets, mask, f"{NAME}(float32 logits)")
    if dlogits.dtype != np.float32:
        raise Fail("dtype-changed", _("{NAME} with float32 logits returned dlogits of dtype "
                                      "{dtype}; keep the dtype of the logits (training runs in "
                                      "float32).").format(NAME=NAME, dtype=dlogits.dtype))
    reference_grad = ref.masked_cross_entropy(logits.astype(np.float64), targets, mask)[1]
    if not allclose(dlogits, reference_grad, rtol=1e-3, atol=1e-6):
        raise Fail("other", _("{NAME} with float32 logits: dlogits is wrong ({worst_difference}).").format(NAME=NAME,
                                worst_difference=worst_difference(dlogits, reference_grad)))


@check(NAME, N_("does not modify logits, targets or loss_mask"), kind=PROPERTY)
def loss_no_mutation(fn):
    logits, targets, mask = _problem(206)
    mutation_check(fn, (logits, targets, mask), {}, NAME, ["logits", "targets", "loss_mask"])
