"""The committed example class, ``example/submitted/``, is what ``tools/make_submissions.py``
writes from the committed release, and each submission differs from the correct one only
where its description says; every student but the late one handed in before the due date.
Nothing here reads the instructor's own ``submitted/`` at the repository root."""

import datetime
import inspect
import subprocess
import sys

import nbformat
import pytest

from grader_tests.core import POINTS, grade_id
from grader_tests.regions import BEGIN, END
from solutions import attention as reference
from tests.helpers import EXAMPLE, EXPECTED, ROOT, example_notebook, kit_env, trap_functions

# The example class's due date (``nbgrader db assignment add attention --duedate``), which
# ``tools/demo.py`` records in the example gradebook, and its one late student.
DUE_DATE = "2025-03-14 17:00:00 UTC"
LATE = {"student_heads_merged_wrong": datetime.timedelta(hours=3)}


@pytest.fixture(scope="module")
def built():
    """The committed notebooks, ``{student: notebook}`` (what ``tools/make_submissions.py``
    writes: the first test)."""
    return {s: nbformat.reads(example_notebook(s), as_version=4) for s in EXPECTED}


def reference_function(name):
    """The source of reference function ``name`` with its two marker lines removed."""
    lines = inspect.getsource(getattr(reference, name)).splitlines()
    return "\n".join(line for line in lines if line.strip() not in (BEGIN, END)) + "\n"


def test_committed_submissions_are_what_make_submissions_writes():
    done = subprocess.run([sys.executable, "-m", "tools.make_submissions", "--check"], cwd=ROOT,
                          env=kit_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:] + \
        "\nrun: python -m tools.make_submissions"


def test_no_other_student_folder_is_committed():
    folders = sorted(p.name for p in (EXAMPLE / "submitted").iterdir() if p.is_dir())
    assert folders == sorted(EXPECTED)


def test_expected_scores_cover_every_student_and_graded_name():
    expected = EXPECTED
    assert sorted(expected) == sorted(p.parent.parent.name for p in
                                      (EXAMPLE / "submitted").glob("*/attention/attention.ipynb"))
    for student, entry in expected.items():
        assert sorted(entry["functions"]) == sorted(POINTS), student
        total = sum(entry["functions"].values())
        assert abs(entry["score"] - total) < 1e-6, f"{student}: score is not the sum of its parts"


def sources(nb):
    """``{grade id: source}`` of a notebook's cells (cells without one are keyed by index)."""
    return {c.get("metadata", {}).get("nbgrader", {}).get("grade_id", f"#{i}"): c.source
            for i, c in enumerate(nb.cells)}


def test_a_filled_function_is_the_reference_function_without_its_markers(built):
    correct = sources(built["student_correct"])
    for name in reference.SPEC_FUNCTIONS:
        cell = next(src for src in correct.values() if src.startswith(f"def {name}("))
        assert cell.rstrip("\n") == reference_function(name).rstrip("\n"), name


def test_each_trap_student_differs_from_the_correct_one_in_one_solution_cell(built):
    correct = sources(built["student_correct"])
    for student, function in trap_functions().items():
        theirs = sources(built[student])
        assert theirs.keys() == correct.keys(), student
        differing = [gid for gid in correct if theirs[gid] != correct[gid]]
        assert len(differing) == 1, f"{student}: cells differ: {differing}"
        assert theirs[differing[0]].startswith(f"def {function}("), (student, differing)


def test_all_stubs_is_the_release_unchanged(built):
    release = nbformat.read(str(ROOT / "release" / "attention" / "attention.ipynb"), as_version=4)
    assert built["student_all_stubs"] == release


def test_deleted_hidden_cell_student_lacks_exactly_that_cell(built):
    correct = sources(built["student_correct"])
    theirs = sources(built["student_deleted_hidden_cell"])
    assert set(correct) - set(theirs) == {grade_id("softmax")}
    assert all(theirs[gid] == correct[gid] for gid in theirs)


def test_timestamps_put_one_student_after_the_due_date_and_the_others_before():
    """Each submission's ``timestamp.txt``, read as nbgrader reads it, is before the due date
    but for ``LATE``'s student, late by exactly ``LATE[student]``."""
    from nbgrader.utils import parse_utc

    due = parse_utc(DUE_DATE)
    for student in EXPECTED:
        stamp = (EXAMPLE / "submitted" / student / "attention" / "timestamp.txt").read_text(
            encoding="utf-8")
        assert stamp.endswith(" UTC\n"), stamp
        late = parse_utc(stamp.strip()) - due
        if student in LATE:
            assert late == LATE[student], student
        else:
            assert late.total_seconds() < 0, student
    assert {s for s, e in EXPECTED.items() if e.get("late_penalty")} == set(LATE)

