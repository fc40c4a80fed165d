"""The scoring rule of docs/contract.md §2: a graded name's property checks (dtype, shape,
no change to the inputs, invariances a constant has) count only when one of its value
checks passes."""

import numpy as np

from grader_tests import core
from grader_tests.registry import CHECKS, KIND, PROPERTY, VALUE
from grader_tests.report import FunctionResult, format_result
from grader_tests.runner import unscored_properties
from tests.helpers import ATTENTION_SOURCE as REFERENCE


def _namespace(extra: str) -> dict:
    space = {"__name__": "submission"}
    exec(compile(REFERENCE + "\n" + extra, "submission.py", "exec"), space)
    return space


def test_the_rule():
    assert unscored_properties([VALUE, PROPERTY], [False, True])
    assert not unscored_properties([VALUE, PROPERTY], [True, True])
    assert not unscored_properties([VALUE, VALUE, PROPERTY], [False, True, True])
    assert not unscored_properties([VALUE, PROPERTY], [False, False])  # nothing to withhold
    assert not unscored_properties([PROPERTY, PROPERTY], [False, True])  # no value check


def test_every_graded_function_has_a_value_check():
    # a right function passes its value checks, so the rule never costs it a point
    core.grade_function("softmax", _namespace(""))  # registers the checks
    for name in core.POINTS:
        kinds = [KIND[fn] for _title, fn in CHECKS[name]]
        assert VALUE in kinds, name
        assert set(kinds) <= {VALUE, PROPERTY}, name
    properties = {name: sum(KIND[fn] == PROPERTY for _t, fn in CHECKS[name])
                  for name in core.POINTS}
    assert properties["attention_forward"] == 5
    assert properties["kv_cache_bytes"] == 0


def test_a_function_right_nowhere_scores_zero_and_says_why():
    result = core.grade_function("padding_mask", _namespace('''
def padding_mask(lengths, T):
    return np.arange(T)[None, :] <= np.asarray(lengths)[:, None]   # off by one
'''))
    passed = [c.name for c in result.checks if c.passed]
    assert passed == ["returns a boolean array of shape (B, T)", "does not modify lengths"]
    assert result.score == 0
    assert "every value check failed" in result.note
    text = format_result(result)
    assert "(2 of 3 checks passed)" in text
    assert "Note: the checks of its shape, dtype" in text
    assert text.count("  PASS  ") == 2
    again = FunctionResult.from_json(result.to_json(), "padding_mask")
    assert again.note == result.note and again.score == 0


def test_one_right_value_keeps_the_property_points():
    # softmax without the maximum subtracted: wrong only on large scores
    result = core.grade_function("softmax", _namespace('''
def softmax(scores, axis=-1):
    e = np.exp(scores)
    total = e.sum(axis=axis, keepdims=True)
    return np.where(total > 0, e / np.where(total > 0, total, 1), 0.0)
'''))
    passed = sum(c.passed for c in result.checks)
    assert 0 < passed < len(result.checks)
    assert result.note == ""
    assert np.isclose(result.score, result.max_score * passed / len(result.checks))


def test_a_constant_scores_zero():
    result = core.grade_function("causal_mask", _namespace('''
def causal_mask(T):
    return np.ones((T, T), bool)
'''))
    assert [c.passed for c in result.checks] == [False, True, True]
    assert result.score == 0 and result.note
