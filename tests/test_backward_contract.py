"""A backward earns its points only for being the gradient of the function the contract
defines (issue 18; the rule is in ``grader_tests/checks/layer_norm.py``'s docstring).

Each backward check runs only on an input where the student's forward returns the
reference's ``y``, and compares the backward with central differences of the reference
forward: an identity "forward" with a pass-through "backward" (each the exact derivative
of the other) earns no backward points, while the reference pair keeps full marks.
"""

import pytest

from grader_tests.core import POINTS, grade_namespace
from tests.catalogue import build_namespace

BACKWARDS = {"layer_norm_backward": "layer_norm_forward",
             "attention_backward": "attention_forward"}

# y = x, and the gradient of y = x: dx = dy, no parameter gradient. Consistent with each
# other, and nothing of layer norm or attention.
IDENTITY_PAIRS = """
    def layer_norm_forward(x, gamma, beta, eps=1e-5):
        return x.copy(), {"gamma": gamma}

    def layer_norm_backward(dy, cache):
        d = dy.shape[-1]
        return dy.copy(), np.zeros(d, dtype=dy.dtype), np.zeros(d, dtype=dy.dtype)

    def attention_forward(x, params, n_heads, causal=True, scale=True):
        return x.copy(), {"params": params}

    def attention_backward(dy, cache):
        return dy.copy(), {k: np.zeros_like(v) for k, v in cache["params"].items()}
"""


def test_identity_forward_with_pass_through_backward_earns_no_backward_points():
    results = grade_namespace(build_namespace([IDENTITY_PAIRS], label="identity"),
                              list(BACKWARDS) + list(BACKWARDS.values()))
    for backward, forward in BACKWARDS.items():
        r = results[backward]
        assert r.score == 0, (backward, r.faults)
        assert results[forward].score < results[forward].max_score
        for c in r.checks:
            assert not c.passed
            assert c.fault == "other", (backward, c.name, c.fault)
            assert f"{backward} could not be checked on this input because your {forward} " \
                   f"is wrong on it" in c.message, c.message
            assert f"see the report of {forward}" in c.message


def test_the_reference_pairs_keep_full_marks():
    results = grade_namespace(build_namespace([], label="reference-pairs"),
                              list(BACKWARDS) + list(BACKWARDS.values()))
    assert {n: r.score for n, r in results.items()} == {n: float(POINTS[n]) for n in results}


@pytest.mark.parametrize("backward", sorted(BACKWARDS))
def test_a_correct_backward_is_checked_only_where_the_forward_is_right(backward):
    """With a forward that is wrong only when ``scale=True`` (attention) or only for rows
    of width 5 (layer norm), the backward's checks on the other inputs still run and pass,
    and the ones on the wrong inputs carry the forward's own fault id."""
    if backward == "attention_backward":
        source = """
            _reference_forward = attention_forward
            def attention_forward(x, params, n_heads, causal=True, scale=True):
                if not scale:
                    return _reference_forward(x, params, n_heads, causal=causal, scale=False)
                factor = 1.0 / math.sqrt(x.shape[-1])    # sqrt(d), not sqrt(d_h)
                p = dict(params, W_Q=params["W_Q"] * factor, b_Q=params["b_Q"] * factor)
                return _reference_forward(x, p, n_heads, causal=causal, scale=False)
        """
        expected_fault, passing = "missing-scale", {"every gradient matches for scale=False, "
                                                    "causal=False, h = 4, B = 3"}
    else:
        source = """
            _reference_forward = layer_norm_forward
            def layer_norm_forward(x, gamma, beta, eps=1e-5):
                if x.shape[-1] == 5:  # unbiased variance for rows of 5 only
                    y, cache = _reference_forward(x, gamma, beta, eps)
                    mean = x.mean(-1, keepdims=True)
                    var = x.var(-1, keepdims=True, ddof=1)
                    return gamma * (x - mean) / np.sqrt(var + eps) + beta, cache
                return _reference_forward(x, gamma, beta, eps)
        """
        expected_fault, passing = "layer-norm-variance", {
            "any number of leading axes: (d,), (T, d), (2, 2, 3, d)",
            "float32 in, float32 out (dx, dgamma, dbeta)", "does not modify dy or the cache"}
    r = grade_namespace(build_namespace([source], label=f"partly-{backward}"),
                        [backward])[backward]
    assert {c.name for c in r.checks if c.passed} == passing, r.faults
    assert r.faults == [expected_fault]
    assert all("could not be checked on this input" in c.message
               for c in r.checks if not c.passed)
