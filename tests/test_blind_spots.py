"""Blind spots of issue 12 that the catalogue of buggy functions cannot hold: the
pen-and-paper exercises (graded on variables, not functions) left at their placeholder,
and the message of a graded function that is missing altogether."""

import pytest

from grader_tests.core import grade_function
from tests.catalogue import build_namespace


@pytest.mark.parametrize("placeholder", ["...", "None"])
def test_exercise_left_at_its_placeholder_is_not_implemented(placeholder: str) -> None:
    """``weight_ratio_unscaled = ...`` (the released cell) is no answer yet: every check
    of the exercise reports ``not-implemented`` naming the variable, never ``other``."""
    namespace = build_namespace([f"weight_ratio_unscaled = {placeholder}\n"
                                 f"weight_ratio_scaled = {placeholder}\n"], label="stub")
    result = grade_function("exercise_weight_ratio", namespace)
    assert result.score == 0
    assert [c.fault for c in result.checks] == ["not-implemented"] * 2
    assert "weight_ratio_unscaled" in result.checks[0].message


def test_missing_function_is_not_implemented_and_named() -> None:
    """A graded name deleted from the submission: ``not-implemented``, the message naming
    the function; its backward, which needs its cache, says the same."""
    namespace = build_namespace(["del attention_forward\n"], label="deleted")
    forward = grade_function("attention_forward", namespace)
    assert forward.score == 0 and forward.faults == ["not-implemented"]
    assert all("attention_forward" in c.message for c in forward.checks)
    backward = grade_function("attention_backward", namespace)
    assert backward.faults == ["not-implemented"]
    assert all("attention_forward" in c.message for c in backward.checks if not c.passed)
