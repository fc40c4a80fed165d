"""Notebooks as students really hand them in, graded the same by nbgrader's autograde and
by the batch: a solution cell duplicated, split in JupyterLab (both halves keep its
nbgrader id), turned into markdown or raw, and an nbformat 4.4 notebook (no cell ids) with
a hidden cell deleted; a notebook renamed, or several notebooks in one folder (the one
with the most answered solution cells is graded, on both paths, with a note). Each correct
student gets full marks on both paths, a valid autograded notebook and feedback."""

from __future__ import annotations

import copy
import html
import json
import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from grader_tests import jail
from grader_tests.core import POINTS
from tests.helpers import ROOT, kit_env

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(jail.problem() is not None, reason="no jail here")]


def _index(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells)
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _variants(correct):
    out = {}
    nb = copy.deepcopy(correct)
    i = _index(nb, "softmax_solution")
    nb.cells.insert(i + 1, copy.deepcopy(nb.cells[i]))
    out["s_duplicated"] = nb
    nb = copy.deepcopy(correct)
    cell = nb.cells[i]
    lines = cell.source.split("\n")
    cut = next(k for k in range(len(lines) // 2, len(lines)) if lines[k].startswith("def ")
               or k == len(lines) - 1)
    cut = max(cut, 1)
    second = copy.deepcopy(cell)
    cell.source, second.source = "\n".join(lines[:cut]), "\n".join(lines[cut:])
    second["id"] = cell["id"] + "-2"
    nb.cells.insert(i + 1, second)
    out["s_split"] = nb
    for kind in ("markdown", "raw"):
        nb = copy.deepcopy(correct)
        j = _index(nb, "causal_mask_solution")
        old = nb.cells[j]
        new = (nbformat.v4.new_markdown_cell if kind == "markdown" else
               nbformat.v4.new_raw_cell)(old.source, metadata=old.metadata)
        new["id"] = old["id"]
        nb.cells[j] = new
        out[f"s_{kind}"] = nb
    nb = copy.deepcopy(correct)
    del nb.cells[_index(nb, "softmax_hidden_checks")]
    nb.nbformat_minor = 4
    for cell in nb.cells:
        cell.pop("id", None)
    out["s_v44_deleted_hidden"] = nb
    return out


def as_read(markdown: str) -> str:
    """The text a reader sees of one line of markdown written as ``inert_markdown`` writes
    it: CommonMark's backslash escapes of ASCII punctuation undone, then HTML's entities."""
    return html.unescape(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown))


# Submission folders with a renamed notebook or several notebooks: file name -> "work" (the
# correct notebook) or "release" (the untouched release). The work is graded on both paths,
# with a note naming what was graded and what was not.
RENAMED = {
    "s_renamed": {"attention (1).ipynb": "work"},
    "s_two_renamed": {"attention (1).ipynb": "release", "attention_final.ipynb": "work"},
    "s_work_beside_stub": {"attention.ipynb": "release", "attention_work.ipynb": "work"},
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    shutil.copytree(os.path.join(ROOT, "source", "attention"), course / "source" / "attention")
    shutil.copy(os.path.join(ROOT, "nbgrader_config.py"), course / "nbgrader_config.py")
    run = dict(cwd=course, env=kit_env(), capture_output=True, text=True, timeout=1800)
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "attention",
                           "--force"], **run)
    assert done.returncode == 0, done.stderr[-2000:]
    correct = nbformat.read(os.path.join(ROOT, "example", "submitted", "student_correct",
                                         "attention", "attention.ipynb"), 4)
    students = _variants(correct)
    files = {student: {"attention.ipynb": nb} for student, nb in students.items()}
    released = nbformat.read(str(course / "release" / "attention" / "attention.ipynb"), 4)
    for student, layout in RENAMED.items():
        files[student] = {name: correct if what == "work" else released
                          for name, what in layout.items()}
        students[student] = correct
    for student, layout in files.items():
        folder = course / "submitted" / student / "attention"
        folder.mkdir(parents=True)
        for name, nb in layout.items():
            with open(folder / name, "w", encoding="utf-8") as f:
                json.dump(nb, f)  # as written, without nbformat's repairs
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--create", "--force"], **run)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    kernel = {s: _scores(course, s) for s in students}
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", "attention",
                           "--force"], **run)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    done = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                           "--workers", "2", "--summary-json", "summary.json"], **run)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = {r["student"]: r for r in
               json.loads((course / "summary.json").read_text())["students"]}
    return course, students, kernel, summary


def _scores(course, student):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook("attention", "attention", student)
        return {g.name[: -len("_hidden_checks")]: g.auto_score for g in notebook.grades
                if g.name.endswith("_hidden_checks")}


@pytest.mark.parametrize("student", ["s_duplicated", "s_split", "s_markdown", "s_raw",
                                     "s_v44_deleted_hidden"])
def test_both_paths_grade_the_notebook_as_written(graded, student):
    course, students, kernel, summary = graded
    full = {k: float(v) for k, v in POINTS.items()}
    assert kernel[student] == full, student
    assert _scores(course, student) == full, student  # the batch wrote the same
    assert summary[student]["disagreements"] == [], summary[student]
    autograded = nbformat.read(str(course / "autograded" / student / "attention" /
                                   "attention.ipynb"), 4)
    nbformat.validate(autograded)
    assert (course / "feedback" / student / "attention" / "attention.html").is_file()
    if student in ("s_duplicated", "s_split", "s_markdown", "s_raw"):
        assert any("graded as" in e for e in summary[student]["errors"]), summary[student]


@pytest.mark.parametrize("student", sorted(RENAMED))
def test_both_paths_grade_the_notebook_with_the_most_answers(graded, student):
    course, students, kernel, summary = graded
    full = {k: float(v) for k, v in POINTS.items()}
    assert kernel[student] == full, (student, kernel[student])
    assert _scores(course, student) == full, student  # the batch wrote the same
    work = next(name for name, what in RENAMED[student].items() if what == "work")
    others = [name for name, what in RENAMED[student].items() if what != "work"]
    said = " ".join(summary[student]["errors"])
    assert work in said and all(name in said for name in others), summary[student]
    autograded = nbformat.read(str(course / "autograded" / student / "attention" /
                                   "attention.ipynb"), 4)
    nbformat.validate(autograded)
    source = autograded.cells[0].source
    assert source.startswith("**[grading]**"), source
    note = as_read(source)  # the note as a reader sees it: file names are inert markdown
    assert work in note, note
    assert all(f"{name} (0 answered)" in note for name in others), note
    feedback = (course / "feedback" / student / "attention" / "attention.html").read_text(
        encoding="utf-8")
    assert work in feedback
    # nothing the student handed in is lost: their own attention.ipynb, when another
    # notebook is graded, is kept unchanged beside the course
    for name, what in RENAMED[student].items():
        here = course / "submitted" / student / "attention" / name
        if name == "attention.ipynb":
            kept = course / ".grading_chosen" / student / "attention" / name
            assert json.loads(kept.read_text(encoding="utf-8"))["cells"][0]["metadata"] \
                .get("grading_note") is None
            assert str(kept.relative_to(course)) in note, note
        else:
            assert here.is_file(), here
