"""A backward differentiated numerically is flagged for review with its points kept, and no
backward derived by hand is (``grader_tests/derivation.py``, docs/contract.md §2).

Every numerical kind of ``tests/catalogue/numerical.py`` (central differences, the complex
step, a Jacobian built column by column, the graded forward called twice per entry) earns
full marks, in process and in the jail, and carries the flag; the reference, every honest
submission of ``tests/catalogue/honest.py`` and every correct variant of
``tests/catalogue/correct.py`` that writes a backward or a forward (Jacobians per row in
Python loops among them) carry none (their own tests assert no flag as well).
"""

import numpy as np
import pytest

from grader_tests import derivation
from grader_tests.core import grade_function
from grader_tests.report import GradeReport, tampering_flags
from grader_tests.sandbox import grade_isolated
from solutions import attention as reference
from tests.catalogue import build_namespace
from tests.catalogue.correct import CORRECT
from tests.catalogue.honest import HONEST, Honest, namespace, source
from tests.catalogue.numerical import NUMERICAL


def _numerical(entry):
    return build_namespace(list(entry.sources.values()), label=entry.id)


@pytest.mark.parametrize("entry", NUMERICAL, ids=lambda e: e.id)
def test_a_numerical_backward_keeps_its_points_and_is_flagged(entry):
    result = grade_function(entry.backward, _numerical(entry))
    assert [c.name for c in result.checks if not c.passed] == [], entry.note
    assert result.score == result.max_score
    assert result.review.startswith(entry.backward + ": on an input of ")
    assert "docs/contract.md §2 asks for the backward derived by hand" in result.review
    assert tampering_flags({entry.backward: result}) == [result.review]
    # the review crosses the batch's record and the hidden cell's result
    back = GradeReport.from_json(GradeReport("attention", {entry.backward: result}).to_json())
    assert back.functions[entry.backward].review == result.review


def _passes(ns, backward):
    forward = derivation.FORWARD_OF[backward]
    return derivation.forward_passes(backward, ns[backward], ns[forward],
                                     lambda f, a, k: f(*a, **k), derivation.cost_clock(ns),
                                     getattr(reference, forward))


@pytest.mark.parametrize("entry", NUMERICAL, ids=lambda e: e.id)
def test_a_numerical_backward_costs_about_a_forward_pass_per_input(entry):
    entries, passes = _passes(_numerical(entry), entry.backward)
    # one or two passes per entry (a private forward may be a little faster than the
    # contract's): four times the flag's threshold at least
    assert passes >= 4 * derivation.PER_INPUT * entries, (entries, passes)


def _hand_derived_list():
    yield pytest.param(build_namespace([], label="reference"), id="reference")
    for entry in HONEST:
        yield pytest.param(namespace(entry), id=f"honest:{entry.id}")
    for entry in CORRECT:
        if set(entry.sources) & (set(derivation.FORWARD_OF) | set(derivation.FORWARD_OF.values())):
            yield pytest.param(build_namespace(list(entry.sources.values()), label=entry.id),
                               id=f"correct:{entry.id}")


@pytest.mark.parametrize("ns", list(_hand_derived_list()))
def test_a_backward_derived_by_hand_costs_a_few_forward_passes(ns):
    for backward in derivation.FORWARD_OF:
        entries, passes = _passes(ns, backward)
        # Python loops over 64 rows, each row's Jacobian written out, included: at most
        # half the flag's threshold
        assert passes < 0.5 * derivation.PER_INPUT * entries, (backward, entries, passes)


def test_input_entries_count_the_float_entries_of_nested_arguments():
    args = [np.zeros((2, 3)), {"W": np.ones((3, 3)), "n": np.arange(4)}, 2]
    assert derivation.input_entries(args) == 6 + 9


def test_no_reading_of_the_clock_gives_no_verdict():
    ns = _numerical(NUMERICAL[0])
    assert derivation.numerically_differentiated(
        "layer_norm_backward", ns["layer_norm_backward"], ns["layer_norm_forward"],
        lambda f, a, k: f(*a, **k), lambda: None, reference.layer_norm_forward) is None


@pytest.mark.slow  # one jail per entry
@pytest.mark.parametrize("entry", [NUMERICAL[0], NUMERICAL[4], NUMERICAL[5]],
                         ids=lambda e: e.id)
def test_in_the_jail_a_numerical_backward_keeps_its_points_and_flags_the_submission(
        entry, tmp_path):
    path = tmp_path / "attention.py"
    path.write_text(source(Honest("base")) + "\n".join(entry.sources.values()))
    results, cell_errors, flags = grade_isolated(str(path))
    assert cell_errors == []
    assert all(r.score == r.max_score for r in results.values()), \
        {n: r.score for n, r in results.items() if r.score != r.max_score}
    assert [f for f in flags if f.startswith(entry.backward + ": on an input of ")] == \
        [results[entry.backward].review], flags
    assert len(flags) == 1, flags


@pytest.mark.slow  # a jail for the honest base submission
def test_in_the_jail_a_submission_derived_by_hand_is_not_flagged(tmp_path):
    path = tmp_path / "attention.py"
    path.write_text(source(Honest("base")))
    results, cell_errors, flags = grade_isolated(str(path))
    assert (cell_errors, flags) == ([], [])
    assert all(r.review == "" for r in results.values())
