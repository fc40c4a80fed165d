"""Round 5 of attacks by a student: the training unlock, the exchange and zip_collect, the
feedback pages and the batch summary.

Each test asserts the secure behaviour; at the time of writing each one FAILS, showing
the attack works.

* A student id that names the unlock ledger's temporary file (``unlocked.json.tmp``, a
  name ``c.FileNameCollectorPlugin.named_regexp`` accepts, as does a folder of
  ``submitted/`` or a user name on the exchange): once that student is eligible,
  ``grader_tests/unlock.py`` makes ``unlocked/unlocked.json.tmp/`` a folder, and every
  later ``save_ledger`` fails with ``IsADirectoryError``. The command crashes on that
  student and on every later run: no student after them in sort order, and no student
  graded later, is ever unlocked; a student released before the crash gets the training
  folder (and the exchange release) without a ledger record, so each later run deletes
  their folder and releases it again.
* The late penalty is not part of the unlock's score: ``decide`` reads nbgrader's
  ``SubmittedAssignment.score``, the raw points, while ``nbgrader export``, formgrader and
  the demo's table report the score after the penalty. A notebook handed in 10 days late
  (every point taken off: 0 in ``grades.csv``) opens the gate at "full marks".
* A symbolic link in the exchange's inbound (students can write there): ``nbgrader
  collect`` follows it with the instructor's rights, so a link to the instructor's
  ``source/attention/attention.ipynb`` is handed in as the student's notebook: 100 / 100,
  not flagged, the reference solutions in the feedback, the training gate open. The
  kit's own ``grader_tests/unlock.py --collect`` follows such a link the same way.
* The kit's own ``attention`` setup cell, one character of a docstring off the current
  release, is read as the student's code and flagged "rewrites sys.modules" on the
  ``grade`` / ``batch`` paths: an honest student's grade withheld and gate closed.
* zip_collect: one student's ``attention.ipynb`` and ``attention-1.ipynb`` (the kit's
  pattern maps both to ``attention.ipynb``, without a timestamp) stop nbgrader's
  zip_collect for the whole archive.
* zip_collect extracts a student's own archive inside the platform's download, and the
  kit's pattern reads the student id from each extracted file's name: a student's
  ``work.zip`` hands in notebooks as other students, or as ``..`` (written to
  ``<course>/attention/``, outside ``submitted/``), or as ``unlocked.json.tmp``.
* zip_collect drops Canvas's ``LATE_`` mark (no timestamp): a notebook the platform calls
  late is collected as never late, and the kit's late penalty is never applied.
* A student's markdown image with a remote source is kept in the feedback page and in
  formgrader (no Content-Security-Policy there): the page the README says "fetches
  nothing" fetches the student's URL whenever it is opened.
* A submitted file's name is markdown in the kit's own grading note: newlines, ``#`` and
  ``[..](https:host)`` in a file name put headings, links and remote images into the
  ``[grading]`` line of the feedback page and formgrader.
* The batch summary prints that file name raw: ``\r`` and terminal escapes in it erase the
  student's own ``FLAG: ...`` line in the instructor's terminal and write a clean row.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings

import pytest

from grader_tests import jail
from grader_tests import unlock as unlock_tool
from tests.helpers import ROOT, kit_env, release_folder, set_scores

needs_jail = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")


def _collector_regexp() -> str:
    text = (ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    found = re.search(r"named_regexp = \(\s*(r\".*?\")\s*(r\".*?\")\s*\)", text, re.S)
    assert found, "the zip_collect pattern moved"
    return eval(found.group(1)) + eval(found.group(2))  # two raw string literals


def test_a_student_id_naming_the_ledgers_temporary_file_does_not_lock_out_the_class(
        tmp_path, gradebooks):
    # zip_collect takes this id from a Canvas-style file name
    assert re.match(_collector_regexp(),
                    "/x/unlocked.json.tmp_48213_1190044_attention.ipynb")
    unlock = unlock_tool
    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    full = unlock.parse_threshold("full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40), "unlocked.json.tmp": (60, 40), "zoe": (60, 40)})
        outcome = []
        try:
            newly, _, _ = unlock.unlock(gb, release, unlocked, full)
            outcome = [v["student"] for v in newly]
        except OSError as exc:  # IsADirectoryError: the ledger cannot be written any more
            outcome = [f"crashed: {exc!r}"]
        set_scores(gb, {"bo": (60, 40)})  # an honest student graded later
        try:
            newly, _, _ = unlock.unlock(gb, release, unlocked, full)
            outcome += [v["student"] for v in newly]
        except OSError as exc:
            outcome += [f"crashed again: {exc!r}"]
        gb.close()
    assert not any(str(o).startswith("crashed") for o in outcome), outcome
    ledger = json.loads((unlocked / "unlocked.json").read_text())
    assert {"zoe", "bo"} <= set(ledger["students"]), ledger


def test_the_unlock_judges_the_score_after_the_late_penalty(tmp_path, gradebooks):
    unlock = unlock_tool
    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40), "late": (60, 40)})
        # 10 days late: the kit's LatePenaltyPerDay takes every point (grades.csv: 0)
        notebook = gb.find_submission_notebook("attention", "attention", "late")
        notebook.late_submission_penalty = 100.0
        gb.db.commit()
        submission = gb.find_submission("attention", "late")
        assert submission.score - submission.late_submission_penalty == 0.0
        newly, _, locked = unlock.unlock(gb, release, unlocked, unlock.parse_threshold("full"))
        gb.close()
    assert [v["student"] for v in newly] == ["ada"], (newly, locked)
    assert not (unlocked / "late").exists()


# --- the exchange: a symbolic link in the inbound, dereferenced by collect ------------------
#
# Students reach the exchange's inbound with write access (nbgrader's design: they create
# their own ``<student>+<assignment>+<timestamp>+<random>`` folder there), and a student on
# the course's machine knows where the course is: the exchange is ``exchange/`` in the
# course folder (nbgrader_config.py), the path every student configures. A submission folder
# whose notebook is a symbolic link to the instructor's source notebook is copied by
# ``nbgrader collect`` (``shutil.copytree``, which follows links) with the instructor's
# rights: ``submitted/<student>/attention/attention.ipynb`` becomes a regular file holding
# the instructor's notebook, solutions and all. The kit's link check (the pre-convert hook
# sets links aside) only sees ``submitted/``, where there is no link left; autograde grades
# the instructor's notebook as the student's: 100 / 100, not flagged, and the training gate
# opens. The same link to another student's ``submitted/`` folder hands in their work.

@pytest.mark.slow  # runs nbgrader generate_assignment, release_assignment, collect, autograde
def test_a_link_in_the_inbound_does_not_hand_in_the_instructors_notebook(tmp_path):
    from tests.test_exchange import COURSE_ID, make_course, nbgrader

    course = make_course(tmp_path)
    exchange = course / "exchange"
    nbgrader(["generate_assignment", "attention", "--force"], course)
    nbgrader(["release_assignment", "attention"], course)
    # mallory, with the write access to the inbound every student has, and no nbgrader
    inbound = exchange / COURSE_ID / "inbound"
    folder = inbound / "mallory+attention+2026-12-01 23:00:00.000000 UTC+abcdefgh"
    folder.mkdir()
    source = course / "source" / "attention" / "attention.ipynb"
    (folder / "attention.ipynb").symlink_to(source)

    nbgrader(["collect", "attention"], course)
    handed_in = course / "submitted" / "mallory" / "attention" / "attention.ipynb"
    copied_source = handed_in.is_file() and handed_in.read_bytes() == source.read_bytes()

    from nbgrader.api import Gradebook

    score, flagged = None, None
    if handed_in.exists():
        nbgrader(["autograde", "attention", "--create", "--student", "mallory"], course,
                 check=False)
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gradebook:
            try:
                submission = gradebook.find_submission("attention", "mallory")
                score = submission.score
                flagged = any(nb.flagged for nb in submission.notebooks)
            except Exception:  # noqa: BLE001 (not graded: the secure outcome)
                pass
    outcome = {"instructor's notebook copied as mallory's": copied_source,
               "mallory's score": score, "flagged": flagged}
    assert not copied_source and not (score == 100.0 and not flagged), outcome


# --- an honest student accused: a locked given cell read as the student's code --------------
#
# ``evidence.kit_references`` skips a cell only when its text is exactly a cell of the
# kit's current ``release/``; any other text is read as the student's. The setup cell the
# kit hands out reads ``sys.modules`` (``unavailable_modules``), which the evidence reports
# as "rewrites sys.modules". So a student whose setup cell differs by one character of a
# docstring (the release fetched before the instructor rebuilt it, an editor's change) is
# flagged on the ``grade`` and ``batch`` paths: the grade withheld for review and the
# training gate closed, for the kit's own code, in a locked cell that nbgrader's autograde
# puts back before the kit reads it (so the autograde path should not flag it; not run here).

@pytest.mark.slow  # grades a whole notebook in the jail
@needs_jail
def test_the_kits_own_setup_cell_is_no_evidence_against_the_student(tmp_path):
    nb = json.loads((ROOT / "example" / "submitted" / "student_correct" / "attention" /
                     "attention.ipynb").read_text(encoding="utf-8"))
    setup = next(c for c in nb["cells"]
                 if (c.get("metadata", {}).get("nbgrader") or {}).get("grade_id") == "setup")
    text = "".join(setup["source"])
    assert "Run this cell first." in text
    setup["source"] = text.replace("Run this cell first.", "Run this cell first!")
    path = tmp_path / "attention.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "grader_tests", "grade", str(path), "--json"],
                          cwd=ROOT, env=kit_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["score"] == 100.0
    assert result["flags"] == [], result["flags"]


# --- zip_collect: a resubmission's "-1" stops the collection of the whole class -------------
#
# The kit's ``named_regexp`` files ``<student>_..._attention-1.ipynb`` (Canvas's name for a
# second file of the same name in one submission) as that student's ``attention.ipynb``,
# with no timestamp group. When the archive holds both ``attention.ipynb`` and
# ``attention-1.ipynb`` of one student, nbgrader's zip_collect has two files for one
# notebook and nothing to compare them by: it stops with "Duplicate submission file. No
# timestamps for comparison", and no student of the archive is collected.

@pytest.mark.slow  # runs nbgrader zip_collect
def test_one_students_two_files_do_not_stop_the_collection_of_the_class(tmp_path):
    import zipfile

    from tests.test_exchange import make_course, nbgrader

    course = make_course(tmp_path)
    archive = course / "downloaded" / "attention" / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "submissions.zip", "w") as zf:
        zf.writestr("doejane_48213_1190044_attention.ipynb", b'{"who": "doejane"}')
        zf.writestr("mallory_48299_1190060_attention.ipynb", b'{"who": "mallory, first"}')
        zf.writestr("mallory_48299_1190061_attention-1.ipynb", b'{"who": "mallory, again"}')
    done = nbgrader(["zip_collect", "attention"], course, check=False)
    honest = course / "submitted" / "doejane" / "attention" / "attention.ipynb"
    assert honest.is_file(), done.stdout[-2000:] + done.stderr[-2000:]


# The kit's own collection of `training` (``grader_tests/unlock.py``, ``--collect``, nbgrader's
# ExchangeCollect on each unlocked student's course) follows the same links: a link in
# the student's own training course's inbound brings any file the instructor can read
# (here the reference ``solutions/training.py``; ``source/training/training.ipynb`` the
# same way) into ``submitted/<student>/training/``, where autograde and batch take it as
# handed in.

@pytest.mark.slow  # releases and collects through nbgrader's exchange
def test_the_unlocks_collect_does_not_follow_a_link_in_the_students_inbound(tmp_path):
    course = tmp_path / "course"
    (course / "unlocked").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(
        'c = get_config()\nc.CourseDirectory.course_id = "attention-kit"\n', encoding="utf-8")
    student_course = "attention-kit-training-mallory"
    handed = (course / "exchange" / student_course / "inbound" /
              "mallory+training+2026-12-01 23:00:00.000000 UTC+abcdefgh")
    handed.mkdir(parents=True)
    reference = ROOT / "solutions" / "training.py"
    (handed / "training.ipynb").symlink_to(reference)
    (course / "unlocked" / "unlocked.json").write_text(json.dumps(
        {"assignment": "training",
         "students": {"mallory": {"exchange_course": student_course}}}), encoding="utf-8")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "unlock_training.py"),
                           "--collect", "--db", f"sqlite:///{course / 'gradebook.db'}",
                           "--root", str(course), "--exchange", str(course / "exchange")],
                          cwd=course, env=kit_env(), capture_output=True, text=True,
                          check=False, timeout=300)
    collected = course / "submitted" / "mallory" / "training" / "training.ipynb"
    assert not (collected.is_file() and collected.read_bytes() == reference.read_bytes()), \
        "the reference solutions were collected as mallory's training notebook:\n" + \
        done.stdout[-1500:] + done.stderr[-1500:]


# --- the feedback page and formgrader fetch what a student's markdown points at -------------
#
# The README: the feedback page "loads no script ... and fetches nothing", wherever it is
# opened. A student's markdown image with a remote source (``![x](https://...)``, an
# ``<img src=//host/...>``) is kept by the kit's markdown filter, in the feedback page and
# in formgrader, and the page has no Content-Security-Policy: opening it fetches the
# student's URL, telling the student's server when, from where and how often the
# instructor (or another reader of the page) opened it.

def test_a_students_markdown_cannot_make_the_feedback_page_fetch_from_the_network():
    from grader_tests.feedback import markdown_to_html

    student_cell = {"cell": {"cell_type": "markdown", "metadata": {}}}
    for source in ("![seen](https://tracker.example/pixel.png)",
                   '<img src="https://tracker.example/pixel.png">',
                   '<img src="//tracker.example/pixel.png">'):
        html = markdown_to_html(student_cell, source)
        assert not re.search(r"""src\s*=\s*["']?(https?:)?//""", html), (source, html)


# --- zip_collect: a student's own archive names other students ------------------------------
#
# A learning platform's download holds each student's files under the platform's name
# (``<student>_<user id>_<attachment id>_<file name>``), but a student may hand in an
# archive: nbgrader's zip_collect extracts archives inside the download too (its extractor
# unpacks nested ``.zip`` / ``.gz`` files, ``tree=True``), and the kit's ``named_regexp``
# reads the student id from the last path component of every extracted file, wherever it
# sits. So ``mallory_48299_1190060_work.zip`` holding ``smithjohn_1_2_attention.ipynb``
# hands in a notebook as smithjohn (who has not submitted yet; had he, the duplicate would
# stop the whole collection), and one holding ``.._1_2_attention.ipynb`` writes
# ``<course>/attention/attention.ipynb``, outside ``submitted/``.

@pytest.mark.slow  # runs nbgrader zip_collect
def test_files_inside_a_students_archive_are_not_filed_under_other_students(tmp_path):
    import io
    import zipfile

    from tests.test_exchange import make_course, nbgrader

    course = make_course(tmp_path)
    archive = course / "downloaded" / "attention" / "archive"
    archive.mkdir(parents=True)
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        zf.writestr("smithjohn_1_2_attention.ipynb", b'{"who": "mallory, as smithjohn"}')
        zf.writestr(".._1_2_attention.ipynb", b'{"who": "mallory, outside submitted"}')
    with zipfile.ZipFile(archive / "submissions.zip", "w") as zf:
        zf.writestr("doejane_48213_1190044_attention.ipynb", b'{"who": "doejane"}')
        zf.writestr("mallory_48299_1190060_work.zip", inner.getvalue())
    done = nbgrader(["zip_collect", "attention"], course, check=False)
    said = done.stdout[-2000:] + done.stderr[-2000:]
    assert (course / "submitted" / "doejane" / "attention" / "attention.ipynb").is_file(), said
    assert not (course / "submitted" / "smithjohn").exists(), said
    assert not (course / "attention").exists(), said


# --- zip_collect: a late submission from the platform is never late -------------------------
#
# The kit's pattern recognises Canvas's ``LATE_`` mark and throws it away: no timestamp group,
# so zip_collect writes no ``timestamp.txt``, and "a submission without timestamp.txt ... is
# never late" (README). With a due date in the gradebook, a notebook the platform itself
# calls late loses nothing: the kit's 10 % per day is never applied on this path.

@pytest.mark.slow  # runs nbgrader zip_collect
def test_a_submission_the_platform_marks_late_is_not_collected_as_on_time(tmp_path):
    import zipfile

    from tests.test_exchange import make_course, nbgrader

    course = make_course(tmp_path)
    archive = course / "downloaded" / "attention" / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "submissions.zip", "w") as zf:
        zf.writestr("smithjohn_LATE_48214_1190051_attention.ipynb", b'{"who": "smithjohn"}')
    done = nbgrader(["zip_collect", "attention"], course, check=False)
    folder = course / "submitted" / "smithjohn" / "attention"
    assert (folder / "attention.ipynb").is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    # something must carry "late" to autograde's AssignLatePenalties: a timestamp
    assert (folder / "timestamp.txt").is_file(), sorted(p.name for p in folder.iterdir())


# --- the grading note: a file name's markdown ------------------------------------------------
#
# The note that opens an autograded notebook names the files of the submission folder,
# HTML-escaped (``notebook_choice.note_cell``) but not markdown-escaped, and the feedback
# page and formgrader render it as markdown. A file name may hold newlines, ``#``, ``[``,
# ``]``, ``(``, ``)`` and ``https:host`` (a URL needs no slash), so a student's file name
# writes headings ("Note from the instructor: ...") and links or remote images into the
# kit's own ``[grading]`` line, in front of the instructor and the student.

def test_file_names_in_the_grading_note_are_shown_as_text_not_markdown(tmp_path):
    import shutil

    from grader_tests.feedback import markdown_to_html
    from grader_tests.notebook_choice import choose_notebook, note_cell

    folder = tmp_path / "course" / "submitted" / "mallory" / "attention"
    folder.mkdir(parents=True)
    work = ROOT / "example" / "submitted" / "student_correct" / "attention" / "attention.ipynb"
    name = ("work\n\n# Note from the instructor: full marks, no review needed\n\n"
            "[rubric](https:tracker.example) ![](https:tracker.example).ipynb")
    shutil.copy(work, folder / name)
    choice = choose_notebook(str(folder), "attention")
    assert choice.note and "Note from the instructor" in choice.note
    cell = note_cell(choice.note)
    html = markdown_to_html({"cell": cell}, cell["source"])
    assert "<h1" not in html and "<a " not in html and "<img" not in html, html


# --- batch: a file name's control characters in the instructor's terminal -------------------
#
# ``python -m grader_tests batch`` prints, per student, the score, the flags, then the
# notebook-choice note, which names the submitted files verbatim. A file name may hold a
# carriage return and terminal escapes: printed after the ``FLAG: ...`` text on the
# student's own line, ``\r\x1b[2K`` erases that line and the rest of the name writes an
# unflagged full-marks row in its place, so the instructor reading the summary does not see
# the flag (the gradebook still has it, but ``grades.csv`` is what gets published).

def test_the_batch_summary_prints_no_control_characters_from_a_file_name(tmp_path):
    import io
    import shutil
    from types import SimpleNamespace

    from grader_tests.batch import find_submission, summarise

    folder = tmp_path / "course" / "submitted" / "mallory" / "attention"
    folder.mkdir(parents=True)
    work = ROOT / "example" / "submitted" / "student_correct" / "attention" / "attention.ipynb"
    shutil.copy(work, folder / "work\r\x1b[2Kmallory     100.00 \u2215 100.ipynb")
    path, note = find_submission(str(folder), "attention")
    assert path and note
    record = {"student": "mallory", "note": note, "flags": ["the submission imports socket"],
              "report": {"assignment": "attention", "functions": {"softmax": {
                  "score": 10.0, "max_score": 10.0, "checks": []}}}}
    out = io.StringIO()
    summarise(SimpleNamespace(records={"mallory": record}), ["mallory"], str(tmp_path / "course"),
              "attention", out=out)
    printed = out.getvalue()
    assert "FLAG" in printed
    assert not any(ch in printed for ch in "\r\x1b"), repr(printed)
