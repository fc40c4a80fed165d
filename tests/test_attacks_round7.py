"""Round 7 of attacks by a student: value checks an answer computed from the mask alone
passes.

* Attention that computes no score: ``scaled_dot_product_attention`` returning weights
  uniform over the keys the mask allows (``1 / n`` on each allowed key, 0 elsewhere) and
  ``out = weights @ V``, never reading Q or K. Its rows sum to 1, ``out`` is
  ``weights @ V``, padded keys change nothing and the real keys' values move the output:
  the two value checks "every row sums to 1 ... out = weights @ V" and "padding
  invariance" passed, so the property checks counted as well: 4.8 of 12 points, unflagged.
  Both checks now also ask that other queries give other weights (the weights are the
  softmax of the scores ``Q K^T``).
"""

from __future__ import annotations

import textwrap

import pytest

from grader_tests import jail

needs_jail = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")


# --- 1. attention weights from the mask alone ------------------------------------------------

UNIFORM_ATTENTION = textwrap.dedent('''
    import numpy as np


    def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
        Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
        shape = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2]) + (Q.shape[-2], K.shape[-2])
        allowed = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)
        count = np.maximum(allowed.sum(-1, keepdims=True), 1)
        dtype = np.result_type(Q, K, V)
        weights = np.where(allowed, 1.0 / count, 0.0).astype(dtype)
        return (weights @ V).astype(dtype), weights
''')


@pytest.mark.slow  # grades one function in the jail
@needs_jail
def test_attention_weights_that_ignore_the_queries_earn_nothing(tmp_path):
    from grader_tests.sandbox import grade_isolated

    path = tmp_path / "uniform.py"
    path.write_text(UNIFORM_ATTENTION, encoding="utf-8")
    name = "scaled_dot_product_attention"
    results, cell_errors, _flags = grade_isolated(str(path), names=[name])
    assert cell_errors == []
    result = results[name]
    # The attack: 4.8 / 12 (rows sum to 1, padding invariance, float32, no mutation).
    assert result.score == 0.0, [(c.name, c.passed) for c in result.checks]
    failed = {c.name: c for c in result.checks if not c.passed}
    rows = next(c for name_, c in failed.items() if name_.startswith("weights: every row"))
    assert "other queries Q gave the same weights" in rows.message
    assert any(name_.startswith("padding invariance") for name_ in failed)
    # the property checks still pass, and earn nothing beside no passing value check
    passed = {c.name for c in result.checks if c.passed}
    assert passed == {"float32 in, float32 out", "does not modify Q, K, V or the mask"}
