"""What the notebooks' own code tells a student: the visible tests and the Validate helpers,
run on the source notebooks' cells with one function made wrong (the rest the reference)."""
from __future__ import annotations

import contextlib
import io
import re

import nbformat
import numpy as np
import pytest

from authoring.i18n import KERNEL_KEYWORDS, KERNEL_SOURCES, extract
from grader_tests import assignments
from tests.helpers import ROOT

NOTEBOOKS = {name: ROOT / "source" / name / f"{name}.ipynb" for name in ("attention", "training")}
# What each graded function returns, by position, as the visible tests unpack it.
TUPLES = {"scaled_dot_product_attention": 2, "multi_head_attention": 2, "layer_norm_forward": 2,
          "layer_norm_backward": 3, "attention_forward": 2, "attention_backward": 2,
          "make_batch": 3, "masked_cross_entropy": 2, "block_backward": 2, "adam_step": 2,
          "greedy_generate": 2, "answer_accuracy": 2}


def cells(assignment: str) -> dict[str, str]:
    nb = nbformat.read(str(NOTEBOOKS[assignment]), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.cell_type == "code" and "nbgrader" in c.metadata}


ATTENTION = cells("attention")
GRADED = list(assignments.POINTS) + list(assignments.POINTS_TRAINING)


def attention_namespace() -> dict:
    """The setup cell and every reference solution of the attention notebook, run."""
    namespace: dict = {"__name__": "__main__"}
    exec(ATTENTION["setup"], namespace)
    for grade_id, source in ATTENTION.items():
        if grade_id.endswith("_solution"):
            exec(source, namespace)
    return namespace


def run_visible(namespace: dict, name: str) -> str | None:
    """Run the visible test of ``name``: None if it passed, else its exception's message."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(ATTENTION[f"{name}_visible_test"], namespace)
    except AssertionError as exc:
        return str(exc)
    return None


def run_before(namespace: dict, name: str) -> None:
    """Run, in the notebook's order, the visible tests of the functions before ``name``:
    they must pass."""
    for before in list(assignments.POINTS)[:list(assignments.POINTS).index(name)]:
        if not before.startswith("exercise_"):
            assert run_visible(namespace, before) is None, before


def test_the_reference_passes_every_visible_test_in_order():
    namespace = attention_namespace()
    namespace.update(weight_ratio_unscaled=1.0, weight_ratio_scaled=1.0)
    namespace.update({v: 1.0 for v in ("budget_block_params", "budget_weight_bytes_fp16",
                                      "budget_kv_cache_bytes", "budget_kv_to_weights",
                                      "budget_kv_cache_bytes_mqa")})
    for name in assignments.POINTS:
        assert run_visible(namespace, name) is None, name
    assert all(v is None for v in namespace["VISIBLE_CHECKS"].values())


# --- 1. A visible test that uses another student function -------------------------------------

def _calls(source: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){name}\(", source) is not None


@pytest.mark.parametrize("assignment", ["attention", "training"])
def test_every_visible_test_that_calls_another_graded_function_checks_it_first(assignment):
    """Any difference found through another student function is blamed on it only after its
    own visible checks passed (``uses_checked``), before the first call to it."""
    found = 0
    for grade_id, source in cells(assignment).items():
        if not grade_id.endswith("_visible_test"):
            continue
        own = grade_id[:-len("_visible_test")]
        for other in GRADED:
            if other == own or not _calls(source, other):
                continue
            found += 1
            check = source.find(f'uses_checked("{other}", "{own}")')
            assert check >= 0, f"{grade_id} calls {other} without uses_checked"
            first_call = re.search(rf"(?<![\w.\"]){other}\(", source).start()
            assert check < first_call, f"{grade_id} calls {other} before checking it"
    assert found >= (5 if assignment == "attention" else 1)


@pytest.mark.parametrize("user, used", [
    ("merge_heads", "split_heads"),
    ("multi_head_attention", "scaled_dot_product_attention"),
    ("attention_forward", "multi_head_attention"),
    ("layer_norm_backward", "layer_norm_forward"),
    ("attention_backward", "attention_forward"),
])
def test_a_visible_test_blames_the_other_function_when_its_checks_fail(user, used):
    namespace = attention_namespace()
    namespace["VISIBLE_CHECKS"][used] = "some check of it failed"
    said = run_visible(namespace, user)
    assert said == (f"these checks of {user} use your {used}, whose own visible checks fail: "
                    f"fix {used} first (its visible test says what is wrong), then run this "
                    "cell again.")
    del namespace["VISIBLE_CHECKS"][used]
    said = run_visible(namespace, user)
    assert said is not None and f"use your {used}, whose own visible checks have not run" in said
    run_before(namespace, user)
    assert namespace["VISIBLE_CHECKS"][used] is None and run_visible(namespace, user) is None


def test_multi_head_attention_is_not_blamed_for_a_wrong_scaled_dot_product_attention():
    """The notebook tells the student to build multi_head_attention on their own
    scaled_dot_product_attention: with the mask applied after the softmax there, the worked
    example of multi_head_attention (a causal mask) fails too, and its test must name the
    function to fix before it shows that example's message."""
    namespace = attention_namespace()
    right = namespace["scaled_dot_product_attention"]

    def mask_after_softmax(Q, K, V, mask=None, scale=True):
        _, weights = right(Q, K, V, mask=None, scale=scale)
        if mask is not None:
            weights = weights * mask
        return weights @ V, weights

    namespace["scaled_dot_product_attention"] = mask_after_softmax
    assert "zeroed after the softmax" in run_visible(namespace, "scaled_dot_product_attention")
    assert run_visible(namespace, "split_heads") is None
    assert run_visible(namespace, "merge_heads") is None
    assert run_visible(namespace, "multi_head_attention") == (
        "these checks of multi_head_attention use your scaled_dot_product_attention, whose own "
        "visible checks fail: fix scaled_dot_product_attention first (its visible test says what "
        "is wrong), then run this cell again.")
    namespace["scaled_dot_product_attention"] = right
    assert run_visible(namespace, "scaled_dot_product_attention") is None
    assert run_visible(namespace, "multi_head_attention") is None


def test_softmax_of_an_all_masked_row_names_both_ways_to_get_nan():
    """A softmax that puts 0 in place of a maximum of -inf (the first half of the rule) but
    divides by the row's sum everywhere still gives NaN, from 0 / 0: the message must not
    send the student back to the maximum alone."""
    namespace = attention_namespace()

    def half_rule(scores, axis=-1):
        scores = np.asarray(scores, dtype=float)
        top = np.max(scores, axis=axis, keepdims=True)
        exps = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
        return exps / exps.sum(axis=axis, keepdims=True)

    namespace["softmax"] = half_rule
    with np.errstate(invalid="ignore"):
        said = run_visible(namespace, "softmax")
    assert said == (
        "a row of scores that are all -inf (a query that may attend to nothing) must give "
        "weights 0, not NaN; got [[nan, nan, nan], [0.3333333333333333, 0.3333333333333333, "
        "0.3333333333333333]]. The maximum of that row is -inf, and -inf - (-inf) is nan; with 0 "
        "in its place, the row's sum is 0, and 0 / 0 is nan too: re-read the rule for a row with "
        "no allowed key above.")


def test_attention_forward_is_not_blamed_for_a_wrong_multi_head_attention():
    namespace = attention_namespace()
    right = namespace["multi_head_attention"]
    namespace["multi_head_attention"] = lambda X, *w, n_heads, mask=None: (
        2 * right(X, *w, n_heads=n_heads, mask=mask)[0], right(X, *w, n_heads=n_heads, mask=mask)[1])
    run_before(namespace, "multi_head_attention")  # the functions it builds on pass theirs
    assert "Y[0] is the running mean" in run_visible(namespace, "multi_head_attention")
    said = run_visible(namespace, "attention_forward")
    assert said.startswith("these checks of attention_forward use your multi_head_attention, "
                           "whose own visible checks fail: fix multi_head_attention first")
    assert "largest difference" not in said
    # and Validate says the same, once
    problem = namespace["before_grading"]("attention_forward", np.ones((1, 2, 4)), {}, 2)
    assert problem.startswith("the visible checks of attention_forward fail:\nthese checks of "
                              "attention_forward use your multi_head_attention"), problem


def test_attention_forward_is_blamed_when_multi_head_attention_passes():
    namespace = attention_namespace()
    right = namespace["attention_forward"]

    def biased(x, params, n_heads, causal=True, scale=True):
        y, cache = right(x, params, n_heads, causal=causal, scale=scale)
        return y + (0.0 if x.shape[1] == 3 else 1.0), cache

    namespace["attention_forward"] = biased
    run_before(namespace, "attention_forward")
    said = run_visible(namespace, "attention_forward")
    assert said.startswith("with zero biases attention_forward must agree with your "
                           "multi_head_attention, which passes its own visible checks, under a "
                           "causal mask (largest difference 1);"), said


# --- 2. A function that returns one array instead of its tuple --------------------------------

@pytest.mark.parametrize("assignment", ["attention", "training"])
def test_every_tuple_a_visible_test_unpacks_is_checked_first(assignment):
    """A graded function's result is unpacked only through ``returned``, which says which
    tuple is expected (never "got (3, 4) and (3, 4)" from the rows of one array)."""
    checked = 0
    for grade_id, source in cells(assignment).items():
        if not grade_id.endswith("_visible_test"):
            continue
        for name, count in TUPLES.items():
            raw = re.findall(rf"(?m)^\s*\w+(?:\s*,\s*\w+)+\s*=\s*{name}\(", source)
            assert not raw, f"{grade_id} unpacks {name} unchecked: {raw}"
            for parts in re.findall(rf'returned\({name}\(.*?\),\s*"{name}", ((?:"\w+"(?:, )?)+)\)',
                                    source, re.S):
                assert len(re.findall(r'"\w+"', parts)) == count, (grade_id, name, parts)
                checked += 1
    assert checked >= (20 if assignment == "attention" else 10)


def test_multi_head_attention_returning_one_array_is_told_a_tuple_is_expected():
    namespace = attention_namespace()
    right = namespace["multi_head_attention"]
    namespace["multi_head_attention"] = lambda *args, **kwargs: right(*args, **kwargs)[0]
    run_before(namespace, "multi_head_attention")
    said = run_visible(namespace, "multi_head_attention")
    assert said == ("multi_head_attention must return a tuple of 2 items (Y, weights), got one "
                    "array of shape (2, 3, 4)")
    namespace["layer_norm_backward"] = lambda dy, cache: (dy, dy)
    assert run_visible(namespace, "layer_norm_forward") is None
    assert run_visible(namespace, "layer_norm_backward") == (
        "layer_norm_backward must return a tuple of 3 items (dx, dgamma, dbeta), got a tuple of "
        "2 items")
    returned = namespace["returned"]
    assert returned([1, 2], "f", "a", "b") == (1, 2)
    with pytest.raises(AssertionError, match=r"^f must return a tuple of 2 items \(a, b\), got "
                                             r"a value of type dict$"):
        returned({}, "f", "a", "b")


# --- 3. The summary: an exercise not answered is not a failure -------------------------------

def test_the_summary_lists_unanswered_exercises_apart_from_failures():
    namespace = attention_namespace()
    assert run_visible(namespace, "softmax") is None
    namespace["causal_mask"] = lambda T: np.ones((T, T), bool)
    assert run_visible(namespace, "causal_mask") is not None
    stub = namespace["padding_mask"]
    namespace["padding_mask"] = lambda *a: (_ for _ in ()).throw(NotImplementedError())
    with pytest.raises(NotImplementedError):
        exec(ATTENTION["padding_mask_visible_test"], namespace)
    namespace["padding_mask"] = stub
    for exercise in ("exercise_weight_ratio", "exercise_decoder_budget"):
        said = run_visible(namespace, exercise)
        assert said.startswith("assign your answer to the variable "), said
    namespace["weight_ratio_unscaled"] = -1.0  # answered, wrong: a failure
    namespace["weight_ratio_scaled"] = 1.0
    assert "is a ratio of two positive weights" in run_visible(namespace, "exercise_weight_ratio")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(ATTENTION["visible_checks_summary"], namespace)
    lines = printed.getvalue().splitlines()
    assert lines[:4] == ["passed (1): softmax",
                         "fail (2): causal_mask, exercise_weight_ratio",
                         "still stubs (1): padding_mask",
                         "not answered yet (1): exercise_decoder_budget"], lines
    assert lines[4].startswith("not run (") and "exercise" not in lines[4]


# --- 4. Validate reads the failure once ----------------------------------------------------------

def test_validate_says_a_visible_failure_once():
    namespace = attention_namespace()
    namespace["softmax"] = lambda scores, axis=-1: np.exp(scores) / np.exp(scores).sum(axis, keepdims=True)
    with np.errstate(all="ignore"):  # (the overflow is the fault the check finds)
        said = run_visible(namespace, "softmax")
    assert said is not None
    problem = namespace["before_grading"]("softmax", np.zeros((2, 3)))
    assert problem.startswith("the visible checks of softmax fail:\nsoftmax([1000, 1000 + ln 3])")
    assert "Error:" not in problem
    # an exception that is not a failed check keeps its name
    namespace["softmax"] = lambda scores, axis=-1: scores.nope
    with pytest.raises(AttributeError):
        exec(ATTENTION["softmax_visible_test"], namespace)
    problem = namespace["before_grading"]("softmax", np.zeros((2, 3)))
    assert problem.startswith("the visible checks of softmax fail:\nAttributeError: ")
    assert problem.count("Error") == 1


# --- 5. The Italian documents quote what the Italian notebooks print ----------------------------

def _quoted_spans(text: str) -> list[str]:
    """The phrases between backquotes or asterisks of the comment lines of ``text``."""
    comments = "\n".join(re.sub(r"^\s*[*-] ", "", line[2:])  # (a list's bullet is no quote)
                         for line in text.splitlines() if line.startswith("# "))
    return [s for pair in re.findall(r"`([^`\n]+)`|\*([^*\n]+)\*", comments) for s in pair if s]


def test_the_italian_documents_quote_no_english_output():
    """A phrase the Italian documents quote (between backquotes or asterisks) as output is
    never the English text of a message that the notebooks print in Italian."""
    from babel.messages.pofile import read_po

    po = ROOT / "grader_tests" / "locale" / "it" / "LC_MESSAGES" / "attention_kit.po"
    with open(po, "rb") as f:
        catalogue = read_po(f)
    english = [m.id for m in extract([ROOT / rel for rel in KERNEL_SOURCES], KERNEL_KEYWORDS)
               if m.id]
    italian = [catalogue.get(m).string for m in english]
    assert all(italian)
    wrong = []
    for document in ("attention", "training"):
        text = (ROOT / "notebooks" / "it" / f"{document}.py").read_text(encoding="utf-8")
        for span in _quoted_spans(text):
            words = re.sub(r"<[^<>]*>|\.\.\.", " ", span).strip(" :;,.")
            if len(words.split()) >= 2 and any(words in m for m in english) \
                    and not any(words in m for m in italian):
                wrong.append((document, span))
    assert not wrong
    for document in ("attention", "training"):
        text = (ROOT / "notebooks" / "it" / f"{document}.py").read_text(encoding="utf-8")
        assert "`... controlli visibili superati`" in text
    assert "`<name>: controlli visibili superati`" in \
        (ROOT / "notebooks" / "it" / "attention.py").read_text(encoding="utf-8")


def test_a_test_that_waits_for_a_stub_counts_as_a_stub_not_a_failure():
    """layer_norm_backward's checks need layer_norm_forward's cache: while the forward is
    still the stub, the backward's checks stop as a stub would (the summary lists it among
    the stubs), with a message naming the function to write first."""
    namespace = attention_namespace()

    def stub(*args, **kwargs):
        raise NotImplementedError()

    namespace["layer_norm_forward"] = stub
    with pytest.raises(NotImplementedError):
        exec(ATTENTION["layer_norm_forward_visible_test"], namespace)
    with pytest.raises(NotImplementedError, match="^these checks of layer_norm_backward use "
                                                   "your layer_norm_forward, which is still the "
                                                   "stub: write layer_norm_forward first"):
        exec(ATTENTION["layer_norm_backward_visible_test"], namespace)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        namespace["visible_checks_summary"]()
    assert "still stubs (2): layer_norm_forward, layer_norm_backward\n" in printed.getvalue()
    assert "fail (0): -\n" in printed.getvalue()


def test_a_matrix_in_a_visible_check_keeps_its_rows_in_the_validate_message():
    """nbgrader's Validate dialog shows a hidden cell's error in a ``<pre>``: the message
    ``before_grading`` gives keeps each row of a printed matrix on a line of its own (its
    long lines alone are wrapped)."""
    namespace = attention_namespace()
    run_before(namespace, "causal_mask")
    namespace["causal_mask"] = lambda T: np.triu(np.ones((T, T), dtype=bool))  # transposed
    said = run_visible(namespace, "causal_mask")
    problem = namespace["before_grading"]("causal_mask", 3)
    lines = problem.splitlines()
    assert lines[0] == "the visible checks of causal_mask fail:"
    for row in ("[[ True False False]", " [ True  True False]", " [ True  True  True]]",
                "[[ True  True  True]", " [False  True  True]", " [False False  True]]"):
        assert row in lines, (row, problem)
    assert all(len(line) <= 80 for line in lines), problem
    assert said.splitlines()[-1] in lines[-1]  # the hint, wrapped at most
