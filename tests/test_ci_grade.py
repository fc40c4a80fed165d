"""``tools/ci_grade.py``, the script of the CI workflows, run as the workflows run it.

The grading run on a copy of the course (slow: it autogrades the example class) must exit
0 although students failed, and write what the workflow uploads; a broken kit must exit 2.
``--visible-only`` must report, per visible test, passed or failed.
"""

import csv
import json
import shutil
import subprocess
import sys

import pytest

from grader_tests.config import nbgrader_env
from tests.helpers import ROOT

EXPECTED = json.loads((ROOT / "example" / "EXPECTED.json").read_text())["students"]
IGNORE = shutil.ignore_patterns(".hypothesis", ".ipynb_checkpoints", "__pycache__")
# Where a part of the copied course comes from: the example class stands for the students
# an instructor collected into the course's submitted/.
FROM = {"submitted": ROOT / "example" / "submitted"}


def copy_course(folder, parts=("source/attention", "release/attention", "submitted")):
    shutil.copy(ROOT / "nbgrader_config.py", folder / "nbgrader_config.py")
    for part in parts:
        shutil.copytree(FROM.get(part, ROOT / part), folder / part, ignore=IGNORE)
    return folder


def ci_grade(*args, summary=None, timeout=1200):
    """``python -m tools.ci_grade ARGS`` as the workflows run it; ``summary`` is the file
    that stands for ``$GITHUB_STEP_SUMMARY``."""
    env = nbgrader_env()
    env.pop("GITHUB_STEP_SUMMARY", None)
    if summary is not None:
        env["GITHUB_STEP_SUMMARY"] = str(summary)
    return subprocess.run([sys.executable, "-m", "tools.ci_grade", *map(str, args)], cwd=ROOT,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, check=False)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = copy_course(tmp_path_factory.mktemp("course"))
    summary = course / "step_summary.md"
    result = ci_grade("--root", course, summary=summary)
    return course, result, summary


@pytest.mark.slow
def test_grading_exits_0_although_students_failed(graded):
    _, result, _ = graded
    assert result.returncode == 0, result.stdout[-5000:]
    scores = {s: e["score"] for s, e in EXPECTED.items()}
    assert min(scores.values()) < 100  # the example class has failing students


@pytest.mark.slow
def test_grading_writes_grades_summary_and_feedback(graded):
    course, result, summary = graded
    with (course / "grades.csv").open(newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert sorted(rows) == sorted(EXPECTED), result.stdout[-3000:]
    for student, expected in EXPECTED.items():
        assert float(rows[student]["score"]) == pytest.approx(expected["score"], abs=1e-6)
        assert float(rows[student]["max_score"]) == pytest.approx(100.0)
        assert (course / "feedback" / student / "attention" / "attention.html").is_file()
    class_summary = json.loads((course / "class_summary.json").read_text())
    assert sorted(class_summary["results"]) == sorted(EXPECTED)
    assert all(r["graded"] for r in class_summary["results"].values())
    assert class_summary["faults"].get("not-implemented", 0) >= 1
    report = summary.read_text()
    assert "## Autograde" in report and "| fault id | students |" in report
    for student in EXPECTED:
        assert f"| {student} |" in report


def test_grading_exits_2_when_the_kit_is_broken(tmp_path):
    """No source to release: the kit, not a student, failed."""
    course = copy_course(tmp_path, parts=("release/attention", "submitted"))
    summary = tmp_path / "step_summary.md"
    result = ci_grade("--root", course, summary=summary, timeout=300)
    assert result.returncode == 2, result.stdout[-3000:]
    assert "KIT BROKEN" in result.stdout
    assert "the kit failed" in summary.read_text()


@pytest.mark.slow  # runs nbgrader
def test_grading_exits_2_when_nbgrader_cannot_release(tmp_path):
    """A broken nbgrader_config.py: generate_assignment fails, so does the run."""
    course = copy_course(tmp_path)
    (course / "nbgrader_config.py").write_text("c = get_config()\nc.Broken = (\n")
    result = ci_grade("--root", course, timeout=300)
    assert result.returncode == 2, result.stdout[-3000:]
    assert "KIT BROKEN" in result.stdout


def visible_table(summary):
    """``{test: (result, message)}`` from the Markdown table of ``--visible-only``."""
    rows = {}
    for line in summary.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1] in ("passed", "**failed**"):
            rows[cells[0]] = (cells[1].strip("*"), cells[2])
    return rows


@pytest.mark.slow  # runs the whole notebook in a kernel
def test_visible_only_on_a_correct_notebook(tmp_path):
    summary = tmp_path / "step_summary.md"
    notebook = ROOT / "example" / "submitted" / "student_correct" / "attention" / "attention.ipynb"
    result = ci_grade("--visible-only", notebook, "--strict", summary=summary, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    rows = visible_table(summary)
    assert len(rows) >= 15 and {"softmax", "causal_mask", "attention_backward"} <= set(rows)
    assert all(r == "passed" for r, _ in rows.values()), rows
    assert rows["causal_mask"][1] == "causal_mask: visible checks passed"
    text = summary.read_text()
    assert f"{len(rows)}/{len(rows)} passed" in text
    assert "require_implemented" not in text  # hidden-check cells are not run


@pytest.mark.slow  # runs the whole notebook in a kernel
def test_visible_only_on_the_stubs(tmp_path):
    summary = tmp_path / "step_summary.md"
    notebook = ROOT / "release" / "attention" / "attention.ipynb"
    result = ci_grade("--visible-only", notebook, summary=summary, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]  # failed tests do not fail the run
    rows = visible_table(summary)
    assert rows and all(r == "failed" for r, _ in rows.values()), rows
    assert rows["softmax"][1].startswith("NotImplementedError")
    assert f"0/{len(rows)} passed" in summary.read_text()
    strict = ci_grade("--visible-only", notebook, "--strict", summary=tmp_path / "s2.md",
                      timeout=300)
    assert strict.returncode == 1, strict.stdout[-3000:]


def test_visible_only_on_an_unreadable_file(tmp_path):
    bad = tmp_path / "attention.ipynb"
    bad.write_text("not a notebook")
    result = ci_grade("--visible-only", bad, summary=tmp_path / "s.md", timeout=120)
    assert result.returncode == 0, result.stdout  # the student's file, not the kit
    assert "cannot be read" in (tmp_path / "s.md").read_text()
