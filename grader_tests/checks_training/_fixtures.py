"""What the checks of assignment `training` share: the reference wiring, tiny models,
and finite differences on sampled coordinates.

Every model here is small enough that a check runs in well under a second: ``d = 16``,
4 heads, 2 layers, ``d_ff = 64``, 3 sequences of ``L = 4`` symbols (the contract's "tiny
2-layer model (d = 16, 3 sequences)"). Seeds are fixed, so a check sees the same inputs
in the notebook's hidden cell and on the command line.
"""

import numpy as np

from solutions import training as ref

from .. import gradcheck
from ..i18n import _
from ..checks._util import rng  # noqa: F401  (re-exported: the graders' generator)

TINY_L = 4


def tiny_config(pre_ln=True, positions=True, scale=True):
    """``ModelConfig`` of the gradient checks: d = 16, 4 heads, 2 layers, d_ff = 64."""
    return ref.ModelConfig(d=16, n_heads=4, n_layers=2, d_ff=64, max_len=2 * TINY_L + 1,
                           pre_ln=pre_ln, positions=positions, scale=scale)


# The graded names of `training` (not imported from the package, which imports the checks).
GRADED = ("make_batch", "masked_cross_entropy", "block_backward", "adam_step",
          "greedy_generate", "answer_accuracy", "model_param_count")


def _withheld(name):
    def withheld(*args, **kwargs):
        raise RuntimeError(_("ops.{name} is not available to a graded function: {name} is graded "
                             "itself; write it in your own code").format(name=name))
    withheld.__name__ = name
    return withheld


def reference_ops(**overrides):
    """The reference of both assignments as an ``ops`` namespace, with overrides (for the
    graders' own calls of the reference)."""
    return ref.reference_ops(**overrides)


def student_ops(**overrides):
    """The ``ops`` a check hands a student's function: the reference's building blocks,
    with the graded functions of `training` withheld (calling one raises RuntimeError)
    unless an override puts one in: never the reference of a function being graded."""
    withheld = {name: _withheld(name) for name in GRADED}
    withheld.update(overrides)
    return ref.reference_ops(**withheld)


def tiny_problem(seed, pre_ln=True, task="sort", batch_size=3, dtype=np.float64):
    """Parameters, a batch and its config for a tiny model.

    Weights are drawn as in training, then the layer-norm scales and every bias get a
    random perturbation, so that no gradient is trivially 0 or 1 (the checks must see
    every term of the backward pass).

    Returns:
        ``(config, params, inputs, targets, loss_mask)``.
    """
    config = tiny_config(pre_ln=pre_ln)
    r = np.random.default_rng(seed)
    params = ref.init_params(config, r, dtype=np.float64)
    for name, value in params.items():
        if value.ndim == 1:
            params[name] = value + 0.2 * r.standard_normal(value.shape)
    inputs, targets, loss_mask = ref.make_batch(task, TINY_L, batch_size, r)
    params = {k: v.astype(dtype) for k, v in params.items()}
    return config, params, inputs, targets, loss_mask


def sample_indices(shape, count, seed, must=()):
    """Up to ``count`` distinct coordinates of an array of ``shape`` (fixed seed), plus
    the coordinates in ``must``; every coordinate when the array is small."""
    size = int(np.prod(shape))
    if size <= count:
        return [tuple(int(i) for i in np.unravel_index(k, shape)) for k in range(size)]
    flat = set(np.random.default_rng(seed).choice(size, size=count, replace=False).tolist())
    flat.update(int(np.ravel_multi_index(m, shape)) for m in must)
    return [tuple(int(i) for i in np.unravel_index(k, shape)) for k in sorted(flat)]


def sampled_gradient(loss, value, indices, eps=gradcheck.EPS):
    """Central differences of ``loss`` at the coordinates ``indices`` of ``value``.

    ``(loss(value + eps e_i) - loss(value - eps e_i)) / (2 eps)`` in float64; ``value`` is
    not modified.

    Returns:
        float64 array ``(len(indices),)``.
    """
    value = np.array(value, dtype=np.float64)
    out = np.empty(len(indices))
    for n, index in enumerate(indices):
        plus, minus = value.copy(), value.copy()
        plus[index] += eps
        minus[index] -= eps
        out[n] = (loss(plus) - loss(minus)) / (2 * eps)
    return out


def largest(a, k=3):
    """The ``k`` coordinates of ``a`` with the largest magnitude (always checked)."""
    a = np.asarray(a)
    if a.size == 0:
        return []
    flat = np.argsort(-np.abs(a).ravel(), kind="stable")[:k]
    return [tuple(int(i) for i in np.unravel_index(f, a.shape)) for f in flat]
