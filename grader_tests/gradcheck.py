"""Central finite differences and the relative error used by the gradient checks.

For a scalar loss ``L(theta) = sum(G * f(theta))`` with a fixed random upstream gradient
``G``, the numerical gradient of coordinate ``i`` is the central difference

    n_i = (L(theta + eps e_i) - L(theta - eps e_i)) / (2 eps),

computed in float64 with ``eps = 1e-6``. An analytic gradient ``a`` is compared with
``n`` by the coordinate-wise relative error

    rel_i = |a_i - n_i| / max(|a_i|, |n_i|)

over the coordinates where ``max(|a_i|, |n_i|) > FLOOR`` (``FLOOR = 1e-4``; below it the
difference quotient's rounding error, about ``1e-16 |L| / eps``, is no longer small
against the gradient), and the absolute error ``|a_i - n_i|`` over the others. For the
smooth functions graded here (layer norm, attention) the truncation error is of order
``eps^2`` and correct gradients give ``rel < 1e-6``; the graders fail a gradient at
``rel > REL_TOL = 1e-4`` or ``abs > FLOOR``. A missing term or a transposed matrix gives
errors of order 1.

A sampled finite-difference check is paired with a comparison against the exact gradient
of the reference backward on every coordinate (``agrees``). Its absolute floor is scaled
to the magnitudes involved: ``|a - e| <= EXACT_RTOL |e| + EXACT_ATOL * scale``, where
``scale`` is the largest magnitude of any gradient the same backward returns
(``gradient_scale``). A gradient that is exactly zero in exact arithmetic (the key bias
of attention: adding ``b_K`` shifts every score of a query's row by the same amount, and
the softmax is invariant to that) comes out of any implementation as rounding noise of
order ``1e-16 * scale``, of either sign, depending on the processor's BLAS kernels and
summation order; a floor scaled only to that gradient's own magnitude would judge noise
against noise and fail correct code on some machines.
"""

import numpy as np

EPS = 1e-6
FLOOR = 1e-4
REL_TOL = 1e-4
# The comparison with an exact gradient (``agrees``): relative part, and absolute floor as
# a fraction of the backward's gradient scale (float64 rounding is about 1e-16 of it).
EXACT_RTOL = 1e-6
EXACT_ATOL = 1e-7


def numerical_gradient(loss, value, eps=EPS):
    """Central-difference gradient of ``loss`` with respect to the array ``value``.

    Args:
        loss: callable ``loss(v) -> float`` taking an array shaped like ``value``.
        value: float64 array, the point; not modified.
        eps: float, the step.

    Returns:
        float64 array shaped like ``value``.
    """
    value = np.array(value, dtype=np.float64)
    grad = np.zeros_like(value)
    for index in np.ndindex(value.shape):
        plus = value.copy()
        plus[index] += eps
        minus = value.copy()
        minus[index] -= eps
        grad[index] = (loss(plus) - loss(minus)) / (2 * eps)
    return grad


def rel_error(analytic, numerical):
    """Worst coordinate-wise error of ``analytic`` against ``numerical`` (see module doc).

    Returns:
        ``(rel, abs_err, index)``: the largest relative error over coordinates above
        ``FLOOR``, the largest absolute error over the others, and the index of the
        worst coordinate (by relative error, or absolute where no coordinate is above the
        floor).
    """
    a = np.asarray(analytic, dtype=np.float64)
    n = np.asarray(numerical, dtype=np.float64)
    scale = np.maximum(np.abs(a), np.abs(n))
    diff = np.abs(a - n)
    big = scale > FLOOR
    rel = np.where(big, diff / np.where(big, scale, 1.0), 0.0)
    small = np.where(big, 0.0, diff)
    worst_rel, worst_abs = float(rel.max(initial=0.0)), float(small.max(initial=0.0))
    if not np.all(np.isfinite(a)):
        index = np.unravel_index(int(np.argmax(~np.isfinite(a))), a.shape) if a.size else ()
        return float("inf"), float("inf"), index
    if worst_rel > 0 or not a.size:
        index = np.unravel_index(int(np.argmax(rel)), a.shape) if a.size else ()
    else:
        index = np.unravel_index(int(np.argmax(small)), a.shape)
    return worst_rel, worst_abs, tuple(int(i) for i in index)


def gradient_ok(analytic, numerical):
    """True if ``analytic`` passes against ``numerical`` (``rel <= REL_TOL``, ``abs <= FLOOR``)."""
    rel, abs_err, _ = rel_error(analytic, numerical)
    return rel <= REL_TOL and abs_err <= FLOOR


def gradient_scale(*gradients: np.ndarray) -> float:
    """The magnitude against which rounding noise of a backward is judged.

    Args:
        gradients: every array one backward call returns (``dx`` and each parameter's
            gradient), of any shapes and float dtypes.

    Returns:
        The largest absolute value over all of them, as a float; 1.0 when every entry is
        zero (or there is none), so that the floor stays a positive absolute number.
    """
    largest = max((float(np.max(np.abs(g))) for g in gradients if np.size(g)), default=0.0)
    return largest if largest > 0 and np.isfinite(largest) else 1.0


def agrees(got: np.ndarray, expected: np.ndarray, scale: float) -> bool:
    """True if ``got`` equals the exact gradient ``expected`` to rounding, coordinate-wise.

    ``|got - expected| <= EXACT_RTOL * |expected| + EXACT_ATOL * scale`` everywhere, in
    float64 (see the module's docstring for why the floor uses ``scale``).

    Args:
        got: the submission's gradient, any shape.
        expected: the reference's exact gradient, the same shape as ``got``.
        scale: ``gradient_scale`` of every gradient of the same backward call.

    Returns:
        False if the shapes differ or any coordinate of ``got`` is not finite.
    """
    a = np.asarray(got, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    if a.shape != e.shape or not np.all(np.isfinite(a)):
        return False
    return bool(np.all(np.abs(a - e) <= EXACT_RTOL * np.abs(e) + EXACT_ATOL * scale))
