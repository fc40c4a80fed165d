"""The fast training against the lesson's recipe: the key bias's gradient.

``b_K`` adds ``q_i . b_K`` to every score of query row ``i``, the same constant for every
key, and a softmax row does not change when a constant is added to it: the key bias has no
effect on the model and its gradient is 0. The fast kernels return it as exact zeros; a
gradient computed as a sum is rounding noise, which Adam scales up to steps of up to ``lr``
in float32 (``solutions/training.py``, the notes above the fast kernels).
"""

import numpy as np

from solutions import training as tr

tr.limit_blas_threads(1)


def _trained_a_little(dtype, ops, steps=40):
    return tr.train("sort", 3, 5, ops, steps=steps, eval_size=4, dtype=dtype)


def test_the_key_bias_does_not_change_the_logits():
    """The invariance the exact zero rests on, in float64 on a partly trained model."""
    result = _trained_a_little(np.float64, tr.reference_ops())
    params, config = result["params"], result["config"]
    inputs, _, _ = tr.make_batch("sort", 3, 6, np.random.default_rng(1))
    ops = tr.reference_ops()
    logits, _ = ops.model_forward(params, inputs, config, ops)
    shifted = dict(params)
    rng = np.random.default_rng(2)
    for i in range(config.n_layers):
        shifted[f"block{i}.b_K"] = params[f"block{i}.b_K"] + rng.standard_normal(config.d)
    moved, _ = ops.model_forward(shifted, inputs, config, ops)
    assert np.abs(moved - logits).max() < 1e-12
    # a query bias of the same size does change them: the check can see a bias
    shifted["block0.b_Q"] = params["block0.b_Q"] + rng.standard_normal(config.d)
    changed, _ = ops.model_forward(shifted, inputs, config, ops)
    assert np.abs(changed - logits).max() > 1e-3


def test_fast_backward_gives_exact_zeros_for_the_key_bias_and_the_reference_elsewhere():
    result = _trained_a_little(np.float64, tr.reference_ops())
    params, config = result["params"], result["config"]
    inputs, targets, mask = tr.make_batch("sort", 3, 8, np.random.default_rng(3))
    grads = {}
    for name, ops in (("ref", tr.reference_ops()), ("fast", tr.fast_ops())):
        logits, cache = ops.model_forward(params, inputs, config, ops)
        _, dlogits = ops.masked_cross_entropy(logits, targets, mask)
        grads[name] = ops.model_backward(dlogits, cache, ops)
    for key, reference in grads["ref"].items():
        fast = grads["fast"][key]
        if key.endswith(".b_K"):
            assert np.all(fast == 0.0)
            assert np.abs(reference).max() < 1e-13          # the reference's sum: noise
        else:
            scale = max(np.abs(reference).max(), 1e-12)
            assert np.abs(fast - reference).max() <= 1e-9 * scale, key


def test_float32_training_keeps_the_key_bias_at_zero_with_the_fast_kernels():
    """In float32 the reference's key-bias gradient is rounding noise of about 1e-9, not
    far below Adam's eps, and its b_K leaves 0; the fast kernels' stays exactly at 0."""
    fast = _trained_a_little(np.float32, tr.fast_ops())["params"]
    plain = _trained_a_little(np.float32, tr.reference_ops())["params"]
    for i in range(2):
        assert np.all(fast[f"block{i}.b_K"] == 0.0)
        assert np.abs(plain[f"block{i}.b_K"]).max() > 1e-6
        assert np.abs(fast[f"block{i}.b_Q"]).max() > 1e-3   # the other biases do train
