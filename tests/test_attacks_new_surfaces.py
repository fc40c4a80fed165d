"""Attacks on the kit's newest surfaces, by a student who controls only the files of their
own submission folder: the notebook-choice rule (``notebook_choice``: batch and nbgrader's
pre-convert hook), the rewriting of unavailable imports (``submission``) and the feedback.

Each test fails while the attack works and passes once it is fixed: it asserts what the
kit must do (the file that must stay untouched, the grade the student earned, the text
that must not reach the feedback page).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys

import pytest

from grader_tests.batch import find_submission
from grader_tests.notebook_choice import answered_cells, stage_chosen_notebook
from tests.helpers import ROOT

STUB = "def g():\n    # YOUR CODE HERE\n    raise NotImplementedError()"


def _nb(answered, stubs=0, first_cell=None):
    """A small nbformat 4.5 notebook with ``answered`` answered solution cells and
    ``stubs`` stub solution cells (optionally ``first_cell`` first)."""
    cells = [] if first_cell is None else [first_cell]
    for i in range(answered):
        cells.append({"cell_type": "code", "id": f"a{i}", "execution_count": None,
                      "outputs": [], "source": f"def f{i}():\n    return {i}\n",
                      "metadata": {"nbgrader": {"solution": True, "grade": False,
                                                "locked": False, "grade_id": f"f{i}",
                                                "schema_version": 3}}})
    for i in range(stubs):
        cells.append({"cell_type": "code", "id": f"s{i}", "execution_count": None,
                      "outputs": [], "source": STUB,
                      "metadata": {"nbgrader": {"solution": True, "grade": False,
                                                "locked": False, "grade_id": f"g{i}",
                                                "schema_version": 3}}})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _write(path, nb):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb), encoding="utf-8")


def _hook(folder):
    """nbgrader's call of the pre-convert hook on one submission folder: the notebooks its
    glob found, an exception logged and swallowed (``run_pre_convert_hook``)."""
    notebooks = sorted(str(p) for p in folder.glob("*.ipynb"))
    try:
        stage_chosen_notebook(assignment="attention", student="*", notebooks=notebooks)
    except Exception:  # nbgrader logs "Pre-convert hook failed" and goes on
        pass
    return notebooks


# --- notebook_choice: fast, no nbgrader ------------------------------------------------


def test_partial_symlink_does_not_let_the_hook_write_outside_the_folder(tmp_path):
    """``attention.ipynb.partial`` a symbolic link: the hook opened it for writing, so a
    student overwrote any file the grader may write (another student's notebook, the
    instructor's, a file outside the course) with their own notebook."""
    course = tmp_path / "course"
    victim_nb = course / "submitted" / "bob" / "attention" / "attention.ipynb"
    _write(victim_nb, _nb(5))
    outside = tmp_path / "instructor_file.txt"
    outside.write_text("the instructor's data\n", encoding="utf-8")
    before_nb, before_out = victim_nb.read_bytes(), outside.read_bytes()
    for student, target in (("alice", "../../bob/attention/attention.ipynb"),
                            ("zed", "../../../../instructor_file.txt")):
        folder = course / "submitted" / student / "attention"
        _write(folder / "attention (1).ipynb", _nb(1))
        os.symlink(target, folder / "attention.ipynb.partial")
        _hook(folder)
    assert victim_nb.read_bytes() == before_nb, "bob's submission was overwritten"
    assert outside.read_bytes() == before_out, "a file outside the course was overwritten"


def test_a_second_autograde_still_grades_the_students_own_attention_ipynb(tmp_path):
    """The student's ``attention.ipynb`` is their best notebook and an untouched copy sits
    beside it: the first run rewrites ``attention.ipynb`` in place as the grading copy (the
    note cell first), so the second run leaves it out of the choice, grades the stub and
    writes the stub over it: the student's work is gone and they get 0."""
    folder = tmp_path / "course" / "submitted" / "frank" / "attention"
    _write(folder / "attention.ipynb", _nb(3))
    _write(folder / "attention (1).ipynb", _nb(0, stubs=3))
    for run in (1, 2):
        notebooks = _hook(folder)
        assert [os.path.basename(p) for p in notebooks] == ["attention.ipynb"], run
        assert answered_cells(notebooks[0]) == 3, f"run {run} grades the stub"
    # and the batch, after the hook ran, grades the work too
    path, _ = find_submission(str(folder), "attention")
    assert path is not None and answered_cells(path) == 3, path


def test_batch_grades_a_notebook_whose_first_cell_says_grading_note(tmp_path):
    """A first cell with ``metadata.grading_note`` (anyone can write it) made the batch
    treat the student's only notebook as the kit's own copy: 'the submission folder is
    empty', 0 points, while nbgrader's autograde grades it in full."""
    folder = tmp_path / "course" / "submitted" / "carol" / "attention"
    forged = {"cell_type": "markdown", "id": "n", "metadata": {"grading_note": True},
              "source": "hello"}
    _write(folder / "attention.ipynb", _nb(3, first_cell=forged))
    path, note = find_submission(str(folder), "attention")
    assert path == str(folder / "attention.ipynb"), note


def test_hook_that_cannot_write_its_copy_leaves_the_chosen_notebook_to_grade(tmp_path):
    """``attention.ipynb.partial`` a folder: the hook moved the student's
    ``attention.ipynb`` aside, then failed writing its copy; nbgrader went on with a
    notebook that no longer exists (grading error, 0) where the batch grades the work."""
    folder = tmp_path / "course" / "submitted" / "erin" / "attention"
    _write(folder / "attention.ipynb", _nb(0, stubs=3))
    _write(folder / "work.ipynb", _nb(3))
    (folder / "attention.ipynb.partial").mkdir()
    notebooks = _hook(folder)
    graded = [p for p in notebooks if os.path.basename(p) == "attention.ipynb"]
    assert graded and os.path.isfile(graded[0]), notebooks
    assert answered_cells(graded[0]) == 3  # what the batch grades


def test_note_shows_file_names_as_text_not_html(tmp_path):
    """A file name such as ``<img src=x onerror=alert(1)>.ipynb`` went verbatim into the
    note's markdown, which the feedback page (and the formgrader) render as HTML: the
    kit's own ``[grading]`` line carried the student's script."""
    folder = tmp_path / "course" / "submitted" / "frank" / "attention"
    _write(folder / "attention.ipynb", _nb(3))
    _write(folder / "<img src=x onerror=alert(1)>.ipynb", _nb(0, stubs=3))
    _hook(folder)
    from grader_tests.notebook_choice import note_cell, read_note

    note = note_cell(read_note(str(folder)))  # what opens the autograded notebook
    assert note["metadata"].get("grading_note") and "onerror" in note["source"]
    assert "<img" not in note["source"], note["source"]


# --- submission: the rewriting of unavailable imports ----------------------------------


def test_an_allowed_module_imported_beside_an_unavailable_one_stays_usable(tmp_path):
    """``import numpy as np, scipy`` bound ``np`` to an ``UnavailableModule`` too: a
    correct function that uses NumPy fails with "No module named 'numpy'" and scores 0
    as ``module-unavailable``."""
    from grader_tests.submission import load

    path = tmp_path / "s.py"
    path.write_text("import numpy as np, scipy\n"
                    "def softmax(x, axis=-1):\n"
                    "    e = np.exp(x - np.max(x, axis=axis, keepdims=True))\n"
                    "    return e / e.sum(axis=axis, keepdims=True)\n", encoding="utf-8")
    loaded = load(str(path))
    import numpy

    assert loaded.namespace["np"] is numpy
    assert loaded.namespace["softmax"](numpy.array([0.0, 0.0])).tolist() == [0.5, 0.5]
    assert any("scipy" in e and "module-unavailable" in e for e in loaded.cell_errors)


# --- the same, through nbgrader and the batch on a real course folder --------------------

REFERENCE_MARK = "REFERENCE-SOLUTION-MARK-7c1f"


def _scores(course):
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in gb.students:
            try:
                out[student.id] = gb.find_submission("attention", student.id).score
            except Exception:
                out[student.id] = None
    return out


@pytest.fixture(scope="module")
def course_run(tmp_path_factory):
    from grader_tests import jail
    from tests.helpers import correct_notebook, kit_env

    if jail.problem() is not None:
        pytest.skip("no jail here")
    base = tmp_path_factory.mktemp("attacks")
    course = base / "course"
    shutil.copytree(os.path.join(ROOT, "source", "attention"), course / "source" / "attention")
    shutil.copy(os.path.join(ROOT, "nbgrader_config.py"), course / "nbgrader_config.py")
    # the instructor's reference, where the kit keeps it (here a marker file)
    (course / "solutions").mkdir()
    (course / "solutions" / "attention.py").write_text(f"# {REFERENCE_MARK}\n")
    run = dict(cwd=course, env=kit_env(), capture_output=True, text=True, timeout=1800)
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment",
                           "attention", "--force"], **run)
    assert done.returncode == 0, done.stderr[-2000:]
    correct = json.loads(json.dumps(correct_notebook(course)))
    released = json.loads((course / "release" / "attention" / "attention.ipynb").read_text())
    sub = course / "submitted"

    def put(student, name, nb):
        _write(sub / student / "attention" / name, nb)

    # alice: her work renamed, the release as attention.ipynb, and a .partial link to bob's
    put("alice", "attention (1).ipynb", released)
    wrong = copy.deepcopy(correct)
    for cell in wrong["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "softmax_solution":
            cell["source"] = ("import numpy as np\ndef softmax(x, axis=-1):\n"
                              "    return np.zeros_like(np.asarray(x, dtype=float))\n")
    put("alice", "attention_work.ipynb", wrong)
    os.symlink("../../bob/attention/attention.ipynb",
               sub / "alice" / "attention" / "attention.ipynb.partial")
    put("bob", "attention.ipynb", correct)
    # carol: her one notebook, its first cell the kit's note as anyone can write it
    forged = copy.deepcopy(correct)
    forged["cells"].insert(0, {"cell_type": "markdown", "id": "forged",
                               "metadata": {"grading_note": True}, "source": "hello"})
    put("carol", "attention.ipynb", forged)
    # dave: a link to the instructor's reference, printed by a cell of his notebook
    leak = copy.deepcopy(correct)
    leak["cells"].insert(3, {"cell_type": "code", "id": "leak", "metadata": {},
                             "execution_count": None, "outputs": [],
                             "source": "print(open('ref.py').read())"})
    put("dave", "attention.ipynb", leak)
    os.symlink("../../../solutions/attention.py", sub / "dave" / "attention" / "ref.py")
    # erin: the release as attention.ipynb, her work beside it, a folder named .partial
    put("erin", "attention.ipynb", released)
    put("erin", "work.ipynb", correct)
    (sub / "erin" / "attention" / "attention.ipynb.partial").mkdir()
    # frank: his work as attention.ipynb, an untouched copy of the release beside it
    put("frank", "attention.ipynb", correct)
    put("frank", "attention (1).ipynb", released)
    # gwen: script in a markdown cell, in a displayed output and in a file name
    script = copy.deepcopy(correct)
    script["cells"].insert(1, {"cell_type": "markdown", "id": "md-script", "metadata": {},
                               "source": "<script>window.KIT_XSS_MD=1</script>"})
    script["cells"].insert(3, {"cell_type": "code", "id": "out-script", "metadata": {},
                               "execution_count": None, "outputs": [],
                               "source": "from IPython.display import HTML, display\n"
                                         "display(HTML('<script>window.KIT_XSS_OUT=1'\n"
                                         "             '</script>'))"})
    put("gwen", "attention.ipynb", script)
    put("gwen", "<img src=x onerror=kit_xss_name()>.ipynb", released)
    bob_before = (sub / "bob" / "attention" / "attention.ipynb").read_bytes()

    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--create", "--force"], **run)
    first = _scores(course)
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback",
                           "attention", "--force"], **run)
    # the instructor autogrades again (a late fix, a new student): --force re-grades all
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--student=frank", "--force"], **run)
    second = _scores(course)
    done = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                           "--workers", "1", "--summary-json", "summary.json"], **run)
    assert done.returncode in (0, 3), done.stdout[-3000:] + done.stderr[-3000:]
    batch = {r["student"]: r["score"] for r in
             json.loads((course / "summary.json").read_text())["students"]}
    return course, bob_before, first, second, batch


@pytest.mark.slow
def test_nbgrader_hook_does_not_overwrite_another_students_submission(course_run):
    course, bob_before, first, second, batch = course_run
    assert (course / "submitted" / "bob" / "attention" / "attention.ipynb").read_bytes() \
        == bob_before
    assert first["bob"] == 100.0, first  # bob's own work, not alice's
    assert batch["bob"] == 100.0, batch


@pytest.mark.slow
def test_forged_grading_note_grades_the_same_on_both_paths(course_run):
    course, bob_before, first, second, batch = course_run
    assert first["carol"] == 100.0 and batch["carol"] == 100.0, (first, batch)


@pytest.mark.slow
def test_symbolic_link_does_not_carry_the_reference_into_kernel_or_feedback(course_run):
    """A link in the submission folder is not graded, but nbgrader's autograde copied the
    file it points at into ``autograded/`` (where the jailed kernel reads it) and
    ``generate_feedback`` into ``feedback/``: the reference solution reaches the student
    through the feedback page (the printed cell) and the feedback folder."""
    course, bob_before, first, second, batch = course_run
    autograded = (course / "autograded" / "dave" / "attention" / "attention.ipynb").read_text()
    assert REFERENCE_MARK not in autograded
    for page in (course / "feedback" / "dave").rglob("*"):
        if page.is_file():
            assert REFERENCE_MARK not in page.read_text(errors="replace"), page


@pytest.mark.slow
def test_a_failing_hook_does_not_cost_the_student_their_grade(course_run):
    course, bob_before, first, second, batch = course_run
    assert batch["erin"] == 100.0
    assert first["erin"] == 100.0, first


@pytest.mark.slow
def test_autograde_run_twice_keeps_the_students_work(course_run):
    course, bob_before, first, second, batch = course_run
    assert first["frank"] == 100.0, first
    assert second["frank"] == 100.0, second
    assert batch["frank"] == 100.0, batch


@pytest.mark.slow
def test_feedback_page_carries_no_script_of_the_student(course_run):
    """The feedback page renders a student's markdown, displayed HTML and (through the
    kit's note) file names as raw HTML: a script of theirs runs in the page the student and
    the instructor open (nbconvert's ``sanitize_html`` is off)."""
    import re

    course, bob_before, first, second, batch = course_run
    page = (course / "feedback" / "gwen" / "attention" / "attention.html").read_text(
        encoding="utf-8")
    assert "kit_xss_name" in page  # the note names the file, as text
    found = [mark for mark in ("KIT_XSS_MD", "KIT_XSS_OUT")
             if re.search(r"<script[^>]*>\s*window\." + mark, page)]
    if re.search(r"<img[^>]*onerror=\"?kit_xss_name\(", page):
        found.append("file name")
    assert found == [], found
