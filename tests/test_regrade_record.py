"""What the course records around a regrade: due dates read one way, the late penalty
and submission time of the file graded on both paths, and feedback that shows the
gradebook's score.

The regrade test runs what an instructor runs: ``nbgrader db assignment add``,
``nbgrader autograde``, the kit's ``batch``, the README's feedback commands and a
student's ``nbgrader fetch_feedback``, each as its own command in a course folder.
"""

from __future__ import annotations

import datetime
import json
import re
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


@pytest.mark.slow  # two nbgrader commands (about 10 s each on a loaded machine)
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
    assert "Traceback" not in done.stderr  # one error line
    assert stored_due_date(course) == UTC_16  # not 16:58:20, nothing changed


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


def submission_record(course: Path) -> tuple:
    """(timestamp, raw score, late penalty, total) of student ``late``'s attention."""
    from grader_tests.gradebook import session

    with session(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gb:
        sub = gb.find_submission("attention", "late")
        penalty = float(sub.late_submission_penalty or 0.0)
        return (sub.timestamp, round(float(sub.score), 6), round(penalty, 6),
                round(float(sub.score) - penalty, 6))


def batch(course: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                           "--workers", "1", "--summary-json", "summary.json"], cwd=course,
                          env=kit_env(LANG="C", LC_ALL="C"), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (row,) = json.loads((course / "summary.json").read_text())["students"]
    return row


def page_grade(page: Path) -> tuple[float, float]:
    """The (score after the late penalty, the penalty) a feedback page shows (its heading's record of them)."""
    found = re.search(r'data-attention-kit-grade="([^"]*)"', page.read_text(encoding="utf-8"))
    score, penalty = (float(v) for v in found[1].split())
    return score, penalty


def hand_in(course: Path, notebook: Path, when: str) -> None:
    """What ``nbgrader collect`` leaves in ``submitted/late/attention``."""
    folder = course / "submitted" / "late" / "attention"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(notebook, folder / "attention.ipynb")
    (folder / "timestamp.txt").write_text(when)


@pytest.mark.slow  # three nbgrader autogrades, two batches, the feedback commands
def test_a_late_students_regrade_is_the_same_on_both_paths_and_so_is_the_feedback(tmp_path):
    from grader_tests.gradebook import session
    from tests.helpers import release_course

    course = release_course(tmp_path / "course")
    nbgrader(course, "db", "assignment", "add", "attention", "--duedate=2025-03-14T17:00:00Z")
    hand_in(course, HEADS_WRONG, "2025-03-14 20:00:00.000000 UTC")  # 3 hours late: 10 %
    folder = course / "submitted" / "late" / "attention"
    (folder / "submission_secret.txt").write_text("s3cret")  # as nbgrader submit writes it
    nbgrader(course, "autograde", "attention", "--create")
    first = submission_record(course)
    assert first[1:] == (98.0, 9.8, 88.2), first

    # The README's feedback commands, then the student's fetch.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.search(r"^nbgrader generate_feedback attention(.*) && nbgrader "
                         r"release_feedback attention$", readme, re.M)
    assert commands, "the README's exchange sequence has its feedback line"
    generate = ["generate_feedback", "attention", *commands[1].split()]
    nbgrader(course, *generate)
    (course / "exchange").mkdir()  # (release_assignment makes it in a course's cycle)
    nbgrader(course, "release_feedback", "attention")
    from nbgrader.utils import notebook_hash

    released = course / "exchange" / COURSE_ID / "feedback" / \
        f"{notebook_hash(secret='s3cret', notebook_id='attention')}.html"
    assert page_grade(released) == (88.2, 9.8)  # after the penalty, and the penalty

    # The fix, handed in a day later (27 hours late: 20 %), regraded by the batch: the
    # penalty and the time are the new file's, not the 9.80 autograde left.
    hand_in(course, CORRECT, "2025-03-15 20:00:00.000000 UTC")
    row = batch(course)
    assert row["score"] == 100.0 and row["disagreements"] == [], row  # autograded/: old file
    by_batch = submission_record(course)
    assert by_batch == (datetime.datetime(2025, 3, 15, 20), 100.0, 20.0, 80.0), by_batch

    # The page from before the regrade is never released: without --force nbgrader keeps
    # it, and the release refuses it, naming the student.
    nbgrader(course, "generate_feedback", "attention")
    done = nbgrader(course, "release_feedback", "attention")
    assert "Feedback not released to 'late'" in done.stderr and "88.20" in done.stderr, \
        done.stderr
    assert page_grade(released) == (88.2, 9.8)  # the old release stays as it was
    # Made again, the page has the gradebook's score but is still of the earlier file (the
    # batch leaves autograded/ as it was): refused too.
    nbgrader(course, *generate)
    done = nbgrader(course, "release_feedback", "attention")
    assert "Feedback not released to 'late'" in done.stderr and "handed in at 2025-03-14 " \
        "20:00:00.000000 UTC, submitted/ holds the one handed in at 2025-03-15" in done.stderr, \
        done.stderr
    assert page_grade(released) == (88.2, 9.8)

    nbgrader(course, "autograde", "attention", "--force")
    assert submission_record(course) == by_batch  # the same record on nbgrader's path
    # The README's commands replace the page: the student fetches the gradebook's score.
    nbgrader(course, *generate)
    done = nbgrader(course, "release_feedback", "attention")
    assert "Feedback not released" not in done.stderr, done.stderr
    home = tmp_path / "home"
    cache = home / "cache" / COURSE_ID / "late+attention+2025-03-15 20:00:00.000000 UTC"
    cache.mkdir(parents=True)
    shutil.copy(CORRECT, cache / "attention.ipynb")
    (cache / "submission_secret.txt").write_text("s3cret")
    nbgrader(home, "fetch_feedback", "attention", f"--course={COURSE_ID}", "--student=late",
             f"--Exchange.root={course / 'exchange'}", f"--Exchange.cache={home / 'cache'}")
    (fetched,) = home.glob("**/feedback/*/attention.html")
    assert page_grade(fetched) == (80.0, 20.0) == (by_batch[3], by_batch[2])
    assert "(Score: 80.0 / 100.0)" in fetched.read_text(encoding="utf-8")

    # An extension of two days: the same file is on time on both paths.
    with session(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gb:
        gb.grant_extension("attention", "late", days=2)
    row = batch(course)  # the same file: not graded again, its penalty recomputed
    assert row["score"] == 100.0 and row["disagreements"] == [], row
    by_batch = submission_record(course)
    assert by_batch == (datetime.datetime(2025, 3, 15, 20), 100.0, 0.0, 100.0), by_batch
    nbgrader(course, "autograde", "attention", "--force")
    assert submission_record(course) == by_batch


def small_course(root: Path, config_extra: str = "") -> str:
    """A course folder with the kit's configuration (plus ``config_extra``), a gradebook
    holding assignment ``attention`` due 2025-03-14 17:00 UTC with its hidden-check cells,
    and ``submitted/ada/attention/timestamp.txt`` 3 hours after it. Returns the URL."""
    from grader_tests.assignments import DEFAULT, grade_id
    from grader_tests.gradebook import alembic_on_path, session

    root.mkdir()
    (root / "nbgrader_config.py").write_text(
        (ROOT / "nbgrader_config.py").read_text(encoding="utf-8") + config_extra,
        encoding="utf-8")
    folder = root / "submitted" / "ada" / "attention"
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text("2025-03-14 20:00:00.000000 UTC")
    alembic_on_path()
    url = f"sqlite:///{root / 'gradebook.db'}"
    with session(url, COURSE_ID) as gb:
        gb.add_assignment("attention", duedate=datetime.datetime(2025, 3, 14, 17))
        gb.add_notebook("attention", "attention")
        for name, points in DEFAULT.points.items():
            gb.add_grade_cell(grade_id(name), "attention", "attention", max_score=points,
                              cell_type="code")
    return url


def test_the_batch_records_the_penalty_by_the_courses_plugin_and_a_failure_stops_nothing(
        tmp_path, capsys):
    from grader_tests.assignments import DEFAULT
    from grader_tests.batch import Recorder
    from grader_tests.batch_log import Log
    from grader_tests.gradebook import gradebook_has, open_gradebook
    from tests.helpers import new_gradebooks_quickly

    full = {"name": DEFAULT.name, "functions": {
        name: {"score": float(points)} for name, points in DEFAULT.points.items()}}
    for course, extra, penalty in [
            ("kit", "", 10.0),  # the kit's policy: 3 hours late, 10 % of 100
            ("half", "\nc.LatePenaltyPerDay.fraction_per_day = 0.5\n", 50.0),  # its setting
            ("broken", "\nclass Broken(LatePenaltyPerDay):\n"
                       "    def late_submission_penalty(self, *args):\n"
                       "        raise RuntimeError('plugin broke')\n\n"
                       "c.AssignLatePenalties.plugin_class = Broken\n", 7.0)]:  # the earlier one
        root = tmp_path / course
        with new_gradebooks_quickly():
            url = small_course(root, extra)
        with new_gradebooks_quickly(), open_gradebook(url, COURSE_ID) as gb:
            if course == "broken":  # an earlier autograde's penalty
                gb.add_student("ada")
                gb.add_submission("attention", "ada")
                gb.find_submission_notebook("attention", "attention", "ada") \
                    .late_submission_penalty = 7.0
                gb.db.commit()
            recorder = Recorder(Log(str(root / "log.jsonl")), gb, DEFAULT, str(root), COURSE_ID)
            recorder.folders["ada"] = str(root / "submitted" / "ada" / "attention")
            recorder.write({"student": "ada", "report": full, "flags": []})
            assert gradebook_has(gb, "attention", "ada", COURSE_ID)  # the grade is written
            submission = gb.find_submission("attention", "ada")
            assert submission.timestamp == datetime.datetime(2025, 3, 14, 20)
            assert submission.late_submission_penalty == penalty, course
        said = capsys.readouterr().err
        if course == "broken":
            assert "ada: the late penalty could not be recorded (RuntimeError: plugin " \
                "broke); the gradebook keeps its earlier one" in said, said
        else:
            assert "could not be recorded" not in said
