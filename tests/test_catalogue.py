"""Proof that the hidden graders catch every fault kind, name it, and accept correct work.

Three families of tests over the example submissions of ``tests/catalogue``:

(a) every buggy entry loses points in the function that carries the bug, with the
    entry's fault id among that function's failed checks; every other contract function of the
    same submission keeps full marks, except the ones the entry lists in ``also`` (which
    must then really lose points, so the list cannot go stale);
    for the few entries with ``not_faults``, ids the bug has nothing to do with are not
    reported either;
(b) every correct entry, written differently from the reference, gets full marks on every
    contract function (the exercises are not functions and are left out);
(c) the catalogue covers every fault id of docs/contract.md §5 (read from
    ``grader_tests.faults.FAULTS``) at least twice with entries the graders get right,
    except ``tampering`` (covered by the grading-engine tests) and ``other``.

Each submission is graded once, with the graders' own time limits, and the result shared
by the tests of that entry through ``graded``. Only the contract functions that can run the
entry's code are graded (``affected``): the graders grade a function with every other contract
name it calls bound to the reference (``grader_tests.core.isolate``), and a backward with
the cache of the submission's own forward (``PEERS``). So the entry's functions, every
function that calls them in the reference (where isolation is put to the test) and the
backward of a replaced forward are graded; every other contract function of the submission is
the reference's code reaching only reference code, exactly as in the reference
submission, which ``test_reference_submission_gets_full_marks`` grades in full, and
``test_*_entry_replaces_its_function*`` checks that an entry changes nothing but its own
names. Run in parallel with ``pytest -n 2 --dist loadgroup tests/test_catalogue.py``:
every test of one entry carries the same ``xdist_group``, so each submission is graded
by one worker only.

An entry with ``gap`` set is one the graders currently get wrong; its test is marked
``xfail`` with the reason, strict where the graders' verdict is deterministic (a fix then
shows up as an XPASS that fails the run, and the marker must go).
"""

import functools
import types

import pytest

from grader_tests.core import grade_function
from grader_tests.faults import FAULTS, explain
from tests.catalogue import (SPEC_FUNCTIONS, affected, build_namespace, entry_sources,
                             reference_namespace)
from tests.catalogue.buggy import BUGS
from tests.catalogue.correct import CORRECT

# Fault ids the catalogue does not have to cover, and why.
NOT_COVERED_HERE = {
    "tampering": "covered by the tampering submissions of tests/test_grader_engine.py",
    "other": "not a fault kind: what the graders say when they cannot name one",
}

BUGS_BY_ID = {b.id: b for b in BUGS}
CORRECT_BY_ID = {c.id: c for c in CORRECT}

# Gaps whose outcome depends on the machine's speed (a Hypothesis check shrinking a
# failure inside the student's time limit): their xfail cannot be strict.
TIMING_DEPENDENT = "timing-dependent"


@functools.lru_cache(maxsize=None)
def graded(kind, entry_id):
    """Grade the affected contract functions of one catalogue submission, once per process.

    Args:
        kind: ``"bug"``, ``"correct"`` or ``"reference"`` (every contract function).
        entry_id: the entry's id (ignored for the reference).

    Returns:
        dict contract name -> ``grader_tests.core.FunctionResult``.
    """
    if kind == "reference":
        sources, names = [], list(SPEC_FUNCTIONS)
    else:
        sources, replaced = entry_sources(kind, entry_id)
        names = affected(replaced)
    namespace = build_namespace(sources, label=entry_id)
    return {name: grade_function(name, namespace) for name in names}


def failed_checks(result):
    """Text of every failed check of a FunctionResult, one per line."""
    return "\n".join(f"    {result.name} / {c.name} [{c.fault}]: {c.message}"
                     for c in result.checks if not c.passed) or "    (no failed check)"


def _params(entries, kind, gap_applies):
    params = []
    for e in entries:
        marks = [pytest.mark.xdist_group(f"{kind}:{e.id}")]
        if e.gap and gap_applies:
            strict = not e.gap.startswith(TIMING_DEPENDENT)
            marks.append(pytest.mark.xfail(strict=strict, reason=f"grader gap: {e.gap}"))
        params.append(pytest.param(e, id=e.id, marks=marks))
    return params


# ---------------------------------------------------------------------------------------
# The catalogue itself.


def test_entry_ids_are_unique_and_functions_are_spec_functions():
    ids = [b.id for b in BUGS] + [c.id for c in CORRECT]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert duplicates == [], f"duplicate entry ids: {duplicates}"
    for b in BUGS:
        assert b.function in SPEC_FUNCTIONS, f"{b.id}: {b.function} is not a SPEC function"
        assert b.fault in FAULTS, f"{b.id}: unknown fault id {b.fault!r}"
        assert b.fault not in NOT_COVERED_HERE, f"{b.id}: fault {b.fault!r} is not covered here"
        assert set(b.also) <= set(SPEC_FUNCTIONS) - {b.function}, f"{b.id}: bad also {b.also}"
    for c in CORRECT:
        assert c.sources and set(c.sources) <= set(SPEC_FUNCTIONS), f"{c.id}: {set(c.sources)}"


def _changes(namespace, label):
    """What an entry's sources did to the reference submission.

    Returns:
        ``(changed, foreign)``: the contract names that are gone or no longer the reference's
        code, and the other new or changed global names whose value is not a function
        compiled from the entry (a helper of the entry's own is fine).
    """
    reference = reference_namespace()
    changed = {name for name in SPEC_FUNCTIONS
               if getattr(getattr(namespace.get(name), "__code__", None), "co_filename", None)
               != reference[name].__code__.co_filename}
    foreign = set()
    for key, value in namespace.items():
        if key in SPEC_FUNCTIONS or key == "__builtins__":
            continue
        if key in reference and not isinstance(value, types.FunctionType) and (
                value is reference[key] or value == reference[key]):
            continue  # a module, the docstring, SPEC_FUNCTIONS: as in the reference
        filename = getattr(getattr(value, "__code__", None), "co_filename", "")
        if not (isinstance(value, types.FunctionType) and filename.startswith(f"<{label}:")):
            foreign.add(key)
    return changed, foreign


@pytest.mark.parametrize("bug", _params(BUGS, "bug", gap_applies=False))
def test_bug_entry_replaces_its_function(bug):
    """The entry's source really defines (or removes) the graded name, so the graders see
    the bug and not the reference, and it changes no other contract name."""
    namespace = build_namespace([bug.source], label=bug.id)
    fn = namespace.get(bug.function)
    if fn is None:
        assert bug.fault == "not-implemented", f"{bug.id}: {bug.function} removed"
    else:
        assert fn.__code__.co_filename == f"<{bug.id}:0>", (
            f"{bug.id}: {bug.function} still comes from {fn.__code__.co_filename}")
    changed, foreign = _changes(namespace, bug.id)
    assert changed == {bug.function}, f"{bug.id} changes the contract names {sorted(changed)}"
    assert foreign == set(), f"{bug.id} changes the global names {sorted(foreign)}"


@pytest.mark.parametrize("entry", _params(CORRECT, "correct", gap_applies=False))
def test_correct_entry_replaces_its_functions(entry):
    """A misspelt name in a correct entry would silently grade the reference instead."""
    namespace = build_namespace(list(entry.sources.values()), label=entry.id)
    for i, name in enumerate(entry.sources):
        filename = namespace[name].__code__.co_filename
        assert filename == f"<{entry.id}:{i}>", (
            f"{entry.id}: {name} comes from {filename}, not from the entry's source {i}")
    changed, foreign = _changes(namespace, entry.id)
    assert changed == set(entry.sources), f"{entry.id} changes the contract names {sorted(changed)}"
    assert foreign == set(), f"{entry.id} changes the global names {sorted(foreign)}"


def test_reference_submission_gets_full_marks():
    """The baseline: the reference run as a submission, every contract function graded."""
    results = graded("reference", "reference")
    assert list(results) == list(SPEC_FUNCTIONS)
    refused = {name: r for name, r in results.items() if r.score != r.max_score}
    assert not refused, "\n".join(failed_checks(r) for r in refused.values())


def test_affected_follows_the_reference_call_graph():
    """Who is graded for which replaced function (a wrong graph would skip isolation checks)."""
    assert affected({"softmax"}) == ["softmax", "scaled_dot_product_attention",
                                     "multi_head_attention", "attention_forward",
                                     "attention_backward"]
    assert affected({"split_heads"}) == ["split_heads", "multi_head_attention",
                                         "attention_forward", "attention_backward"]
    assert affected({"layer_norm_forward"}) == ["layer_norm_forward", "layer_norm_backward"]
    assert affected({"kv_cache_bytes"}) == ["kv_cache_bytes"]


# ---------------------------------------------------------------------------------------
# (a) Every bug is caught by its function, with its fault id, and costs only that function.


@pytest.mark.parametrize("bug", _params(BUGS, "bug", gap_applies=True))
def test_bug_is_caught_with_its_fault(bug):
    result = graded("bug", bug.id)[bug.function]
    assert result.score < result.max_score, (
        f"{bug.id}: {bug.function} kept full marks ({result.score:g} / {result.max_score:g}) "
        f"although it carries the bug: {bug.note}")
    assert bug.fault in result.faults, (
        f"{bug.id}: {bug.function} lost points ({result.score:g} / {result.max_score:g}) but "
        f"its failed checks name {result.faults}, not {bug.fault!r} ({bug.note}).\n"
        f"{failed_checks(result)}")
    if bug.points is not None:
        assert abs(result.score - bug.points) < 1e-9, (
            f"{bug.id}: {bug.function} scored {result.score:g}, the entry expects "
            f"{bug.points:g}.\n{failed_checks(result)}")
    if bug.fault == "not-implemented" and bug.function not in build_namespace(
            [bug.source], label=bug.id):
        missing = [c for c in result.checks if bug.function not in c.message]
        assert not missing, f"{bug.id}: messages that do not name {bug.function}: {missing}"


@pytest.mark.parametrize("bug", [pytest.param(b, id=b.id, marks=pytest.mark.xdist_group(
    f"bug:{b.id}")) for b in BUGS if b.cause])
def test_bug_message_names_its_cause(bug):
    """Every failed check reporting the entry's fault says the entry's cause: the id and
    the "likely cause" line under it name the same mistake."""
    result = graded("bug", bug.id)[bug.function]
    reporting = [c for c in result.checks if not c.passed and c.fault == bug.fault]
    assert reporting, f"{bug.id}: no failed check reports {bug.fault!r}.\n{failed_checks(result)}"
    silent = [c.name for c in reporting if bug.cause not in c.message]
    assert not silent, (f"{bug.id}: the checks {silent} report {bug.fault!r} without naming the "
                        f"cause {bug.cause!r}.\n{failed_checks(result)}")


def test_fault_explanations_name_the_causes_their_checks_name():
    """An id and the "likely cause" line under it say the same thing: scores divided by
    d_k (``sdpa-divides-by-dk``) are a missing scale as the id's explanation says, an
    off-by-one padding mask (``padding-mask-off-by-one``) padding that reaches the softmax."""
    assert "divided by d_k" in explain("missing-scale")
    assert "off by one" in explain("padding-ignored")
    assert "ValueError" in explain("head-count-unchecked")


MISNAMING_CANDIDATES = [
    pytest.param(b, id=b.id, marks=[pytest.mark.xdist_group(f"bug:{b.id}")] + (
        [pytest.mark.xfail(strict=True, reason=f"grader gap: {b.not_faults_gap}")]
        if b.not_faults_gap else []))
    for b in BUGS if b.not_faults]


@pytest.mark.parametrize("bug", MISNAMING_CANDIDATES)
def test_bug_is_not_misnamed(bug):
    """Fault ids the bug has nothing to do with must not reach the student."""
    result = graded("bug", bug.id)[bug.function]
    wrong = [f for f in result.faults if f in bug.not_faults]
    assert not wrong, (
        f"{bug.id}: {bug.function} reports {wrong}, which this bug does not do "
        f"({bug.note}).\n{failed_checks(result)}")


@pytest.mark.parametrize("bug", _params(BUGS, "bug", gap_applies=False))
def test_bug_costs_only_its_function(bug):
    results = graded("bug", bug.id)  # the bug's function and every function that can reach it
    lost = {name: r for name, r in results.items()
            if name != bug.function and r.score != r.max_score}
    unexpected = {name: r for name, r in lost.items() if name not in bug.also}
    assert not unexpected, (
        f"{bug.id}: the bug lives in {bug.function} but also cost "
        + ", ".join(f"{n} ({r.score:g} / {r.max_score:g})" for n, r in unexpected.items())
        + "\n" + "\n".join(failed_checks(r) for r in unexpected.values()))
    stale = [name for name in bug.also if name not in lost]
    assert not stale, (f"{bug.id}: listed in also={bug.also}, but {stale} kept full marks: "
                       f"remove them from the entry's `also`")


# ---------------------------------------------------------------------------------------
# (b) Every correct variant gets full marks everywhere.


@pytest.mark.parametrize("entry", _params(CORRECT, "correct", gap_applies=True))
def test_correct_variant_gets_full_marks(entry):
    results = graded("correct", entry.id)
    refused = {name: r for name, r in results.items() if r.score != r.max_score}
    assert not refused, (
        f"{entry.id} ({entry.note}) is correct but lost points in "
        + ", ".join(f"{n} ({r.score:g} / {r.max_score:g})" for n, r in refused.items())
        + ":\n" + "\n".join(failed_checks(r) for r in refused.values()))
    # a correct backward is derived by hand: never held for review as a numerical one
    assert {n: r.review for n, r in results.items() if r.review} == {}


# ---------------------------------------------------------------------------------------
# (c) Coverage of the fault ids.


def test_every_fault_id_is_covered_twice():
    by_fault = {}
    for b in BUGS:
        if not b.gap:  # only entries the graders get right count
            by_fault.setdefault(b.fault, []).append(b.id)
    short = {fault: by_fault.get(fault, []) for fault in FAULTS
             if fault not in NOT_COVERED_HERE and len(by_fault.get(fault, [])) < 2}
    assert short == {}, (
        "fault ids covered by fewer than 2 catalogue entries the graders get right "
        "(fault: entry ids): " + "; ".join(f"{f}: {ids}" for f, ids in short.items()))


def test_there_are_at_least_12_correct_variants():
    ok = [c.id for c in CORRECT if not c.gap]
    assert len(ok) >= 12, f"only {len(ok)} correct variants the graders accept: {ok}"
