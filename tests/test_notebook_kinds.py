"""Notebooks as students really hand them in, graded the same by nbgrader's autograde and
by the batch: a solution cell duplicated, split in JupyterLab (both halves keep its
nbgrader id), turned into markdown or raw, and an nbformat 4.4 notebook (no cell ids) with
a hidden cell deleted. Each correct student gets full marks on both paths, a valid
autograded notebook and feedback."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys

import nbformat
import pytest

from grader_tests import jail
from grader_tests.core import POINTS
from tests.course import kit_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    shutil.copytree(os.path.join(ROOT, "source", "attention"), course / "source" / "attention")
    shutil.copy(os.path.join(ROOT, "nbgrader_config.py"), course / "nbgrader_config.py")
    run = dict(cwd=course, env=kit_env(), capture_output=True, text=True, timeout=1800)
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "attention",
                           "--force"], **run)
    assert done.returncode == 0, done.stderr[-2000:]
    correct = nbformat.read(os.path.join(ROOT, "submitted", "student_correct", "attention",
                                         "attention.ipynb"), 4)
    students = _variants(correct)
    for student, nb in students.items():
        folder = course / "submitted" / student / "attention"
        folder.mkdir(parents=True)
        with open(folder / "attention.ipynb", "w", encoding="utf-8") as f:
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
