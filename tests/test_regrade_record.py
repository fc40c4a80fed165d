"""What the course records around a regrade: due dates read one way, and the batch's
comparison with nbgrader's in-kernel scores made only for the same file."""

from __future__ import annotations

import datetime
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader_tests.due_dates import DueDateError, parse_due_date
from tests.helpers import ROOT, kit_env

COURSE_ID = "attention-kit"
EXAMPLE = ROOT / "example" / "submitted"
CORRECT = EXAMPLE / "student_correct" / "attention" / "attention.ipynb"
HEADS_WRONG = EXAMPLE / "student_heads_merged_wrong" / "attention" / "attention.ipynb"
UTC_16 = datetime.datetime(2025, 3, 14, 16, 0)  # naive UTC, as nbgrader stores a due date


@pytest.mark.parametrize(("text", "timezone", "stored"), [
    ("2025-03-14T17:00:00+01:00", "UTC", UTC_16),
    ("2025-03-14 17:00:00+01:00", "UTC", UTC_16),
    ("2025-03-14T17:00:00+0100", "UTC", UTC_16),
    ("2025-03-14T11:00:00-05:00", "Europe/Rome", UTC_16),
    ("2025-03-14T16:00:00Z", "Europe/Rome", UTC_16),
    ("2025-03-14T16:00:00.250000Z", "UTC", UTC_16.replace(microsecond=250000)),
    ("2025-03-14T17:00 +0100", "UTC", UTC_16),  # formgrader's own form
    ("2025-03-14 16:00:00 UTC", "Europe/Rome", UTC_16),  # nbgrader's documented form
    ("2025-03-14 17:00:00 Europe/Rome", "UTC", UTC_16),
    ("2025-03-14 17:00:00", "Europe/Rome", UTC_16),  # no zone: the course's
    ("2025-03-14 16:00", "UTC", UTC_16),
    (" 2025-03-14T16:00:00Z\n", "UTC", UTC_16),
])
def test_a_due_date_in_a_form_read_one_way_is_stored_in_utc(text, timezone, stored):
    assert parse_due_date(text, timezone) == stored


@pytest.mark.parametrize(("text", "why"), [
    ("2025-03-14 17:00:00 +0100", "as seconds (+0100 would be 100 s"),  # nbgrader: 100 s
    ("2025-03-14 17:00:00 -05:00", "as seconds"),
    ("2025-03-14 17:00:00 CET", "not a date and time in a form"),  # an abbreviation
    ("14/03/2025 17:00", "not a date and time in a form"),
    ("March 14 2025 5pm", "not a date and time in a form"),
    ("2025-03-14", "not a date and time in a form"),  # no time of day
    ("", "not a date and time in a form"),
    ("2025-02-30 17:00:00 UTC", "day is out of range"),
    ("2025-03-14 17:00:00 Mars/Olympus", "no timezone named 'Mars/Olympus'"),
    ("2025-03-30 02:30:00 Europe/Rome", "happens twice or never"),  # clocks go forward
    ("2025-10-26 02:30:00 Europe/Rome", "happens twice or never"),  # ... and back
])
def test_a_due_date_in_any_other_form_is_refused_with_the_reason(text, why):
    with pytest.raises(DueDateError) as refused:
        parse_due_date(text, "UTC")
    message = str(refused.value)
    assert message.startswith(f"due date {text!r} refused: ") and why in message, message
    assert "2025-03-14T17:00:00+01:00" in message  # what to write instead


def nbgrader(course: Path, *args: str, check: bool = True, timeout: float = 900
             ) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course,
                          env=kit_env(LANG="C", LC_ALL="C"), capture_output=True, text=True,
                          timeout=timeout)
    if check:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def stored_due_date(course: Path):
    from grader_tests.gradebook import session

    with session(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gb:
        return gb.find_assignment("attention").duedate


def test_nbgrader_db_assignment_add_refuses_a_due_date_it_would_store_shifted(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    nbgrader(course, "db", "assignment", "add", "attention",
             "--duedate=2025-03-14T17:00:00+01:00")
    assert stored_due_date(course) == UTC_16
    done = nbgrader(course, "db", "assignment", "add", "attention",
                    "--duedate=2025-03-14 17:00:00 +0100", check=False)
    assert done.returncode != 0
    assert "due date '2025-03-14 17:00:00 +0100' refused: nbgrader reads an offset" \
        in done.stderr, done.stderr
    assert stored_due_date(course) == UTC_16  # not 16:58:20, nothing changed
    # formgrader's form (its date and time, a space, the course's offset) reads as meant
    nbgrader(course, "db", "assignment", "add", "attention", "--duedate=2025-03-14T18:00 +0100")
    assert stored_due_date(course) == UTC_16.replace(hour=17)


def test_the_batch_compares_with_nbgraders_in_kernel_scores_only_for_the_same_file(tmp_path):
    import nbformat

    from grader_tests.batch import in_kernel_scores

    autograded = tmp_path / "autograded" / "ada" / "attention"
    autograded.mkdir(parents=True)
    nb = nbformat.read(CORRECT, as_version=4)
    for cell in nb.cells:  # nbgrader's record of a hidden cell's run: an error, 0 points
        if cell.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_hidden_checks"):
            cell.outputs = [nbformat.v4.new_output("error", ename="E", evalue="", traceback=[])]
    nbformat.write(nb, autograded / "attention.ipynb")
    shutil.copy(CORRECT, tmp_path / "same.ipynb")
    shutil.copy(HEADS_WRONG, tmp_path / "other.ipynb")
    scores = in_kernel_scores(str(tmp_path), "ada", "attention", "same.ipynb")
    assert scores and set(scores.values()) == {0.0}
    assert in_kernel_scores(str(tmp_path), "ada", "attention", "other.ipynb") is None
