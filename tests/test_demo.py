"""End to end: the main job (``python -m tools.demo``) on a copy of the kit grades the
example class (``example/``) as ``example/EXPECTED.json`` says, late penalty included, and
what it writes reveals nothing and loads nothing from the network.

Slow (a few minutes): nbgrader starts one kernel per student.
"""

import csv
import html as html_lib
import json
import re
import subprocess
import sys

import nbformat
import pytest

from grader_tests.core import grade_id
from grader_tests.config import nbgrader_env
from tests.helpers import (EXPECTED, ROOT, attention_solution_lines, copy_kit, table_line,
                           trap_functions)

pytestmark = pytest.mark.slow

# A submission nbgrader cannot read, added to the copy: the demo reports it and goes on.
BROKEN = "student_broken_notebook"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A copy of the kit, plus one unreadable submission in the example class, after one run
    of the demo: ``(example course folder, stdout, summary)``."""
    course = copy_kit(tmp_path_factory.mktemp("kit")) / "example"
    broken = course / "submitted" / BROKEN / "attention" / "attention.ipynb"
    broken.parent.mkdir(parents=True)
    broken.write_text("this is not a notebook\n")
    result = subprocess.run([sys.executable, "-m", "tools.demo", "--root", str(course)],
                            cwd=ROOT, env=nbgrader_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=1200, check=False)
    assert result.returncode == 0, result.stdout[-5000:]
    summary = json.loads((course / "class_summary.json").read_text())
    return course, result.stdout, summary


def test_every_readable_submission_is_graded_and_in_the_table(demo):
    course, stdout, summary = demo
    assert sorted(summary["results"]) == sorted([*EXPECTED, BROKEN])
    for student, result in summary["results"].items():
        assert result["graded"] == (student != BROKEN), f"{student}:\n{stdout[-5000:]}"
        assert student in stdout
    assert "wall time" in stdout


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_scores_and_fault_ids_are_the_expected_ones(demo, student):
    _, stdout, summary = demo
    expected, got = EXPECTED[student], summary["results"][student]
    assert got["score"] == pytest.approx(expected["score"], abs=1e-6), stdout[-5000:]
    for name, points in expected["functions"].items():
        cell = got["functions"][name]
        assert cell["score"] == pytest.approx(points, abs=1e-6), (
            f"{student}: {name} scored {cell['score']}, expected {points} "
            f"(faults reported: {cell['faults']})")
    for name, faults in expected["faults"].items():
        reported = got["functions"][name]["faults"]
        assert set(faults) <= set(reported), f"{student}: {name} reported {reported}, not {faults}"


def test_each_trap_costs_points_in_its_own_function_only(demo):
    _, _, summary = demo
    for student, function in trap_functions().items():
        below = {n for n, c in summary["results"][student]["functions"].items()
                 if c["score"] < c["max_score"] - 1e-9}
        assert below == {function}, f"{student}: points lost in {sorted(below)}"


def test_the_infinite_loop_is_stopped_and_reported_as_a_timeout(demo):
    _, _, summary = demo
    softmax = summary["results"]["student_softmax_infinite_loop"]["functions"]["softmax"]
    assert softmax["score"] == 0 and "timeout" in softmax["faults"]


def test_the_deleted_hidden_cell_is_restored_and_graded(demo):
    course, _, summary = demo
    path = course / "autograded" / "student_deleted_hidden_cell" / "attention" / "attention.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    ids = [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells]
    gid = grade_id("softmax")
    assert ids.count(gid) == 1
    assert ids[ids.index(gid) - 1] == "softmax_visible_test", "restored in the wrong place"
    cell = nb.cells[ids.index(gid)]
    assert "added back by nbgrader" in cell.source
    assert any(o.get("output_type") == "execute_result" for o in cell.outputs), "not run"
    softmax = summary["results"]["student_deleted_hidden_cell"]["functions"]["softmax"]
    assert softmax["score"] == softmax["max_score"] == 10


def test_a_correct_submission_writes_nothing_to_stderr(demo):
    course, _, _ = demo
    path = course / "autograded" / "student_correct" / "attention" / "attention.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    for i, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            assert not (output.get("output_type") == "stream" and output.get("name") == "stderr"), (
                f"cell {i} wrote to stderr: {output.get('text', '')[:500]}")
            assert output.get("output_type") != "error", f"cell {i} raised {output.get('ename')}"


def test_grades_csv_and_feedback_exist_for_every_student(demo):
    course, _, _ = demo
    rows = (course / "grades.csv").read_text().splitlines()
    assert len(rows) == 1 + len(EXPECTED) + 1  # a header, and the unreadable one with 0
    for student in EXPECTED:
        assert (course / "feedback" / student / "attention" / "attention.html").exists()


def test_feedback_reveals_no_solution_and_no_hidden_test(demo):
    course, _, _ = demo
    for html in sorted((course / "feedback").rglob("*.html")):
        text = html.read_text(encoding="utf-8")
        for marker in ("BEGIN HIDDEN TESTS", "BEGIN SOLUTION", "grader_tests/"):
            assert marker not in text, f"{html.relative_to(course)} shows {marker!r}"
    # The student who wrote nothing must not find a line of any solution in the feedback.
    stubs = course / "feedback" / "student_all_stubs" / "attention" / "attention.html"
    plain = html_lib.unescape(re.sub(r"<[^>]+>", "", stubs.read_text(encoding="utf-8")))
    shown = {line.strip() for line in plain.splitlines()}
    leaked = sorted(shown & attention_solution_lines())
    assert not leaked, f"the feedback of student_all_stubs shows solution lines: {leaked}"


def test_training_is_unlocked_for_exactly_the_students_with_full_marks(demo):
    course, stdout, summary = demo
    full = sorted(s for s, e in EXPECTED.items() if e["score"] == e.get("max_score", 100))
    assert full, "the example class has no student with full marks"
    assert summary["training_unlocked"] == full
    for student in EXPECTED:
        released = course / "unlocked" / student / "training" / "training.ipynb"
        assert released.is_file() == (student in full), student
    assert "training gate" in stdout


def test_the_late_student_loses_the_late_penalty_and_the_table_shows_it(demo):
    """nbgrader's late-submission plugin (nbgrader_config.py) takes 10 % of the score off
    the one student whose timestamp.txt is after the example class's due date; the table
    shows the score after the penalty and the penalty; grades.csv has nbgrader's columns."""
    course, stdout, summary = demo
    late = {s for s, e in EXPECTED.items() if e.get("late_penalty")}
    assert late == {"student_heads_merged_wrong"}
    for student, expected in EXPECTED.items():
        got = summary["results"][student]
        penalty = expected.get("late_penalty", 0.0)
        assert got["late_penalty"] == pytest.approx(penalty, abs=1e-6), student
        assert got["final_score"] == pytest.approx(expected["score"] - penalty, abs=1e-6)
        assert (got["seconds_late"] > 0) == (student in late), student
    assert table_line(stdout, "student_heads_merged_wrong") == (
        "student_heads_merged_wrong 88.20 / 100 late 3 h 0 min: 98.00 - 9.80 late penalty")
    with (course / "grades.csv").open(newline="") as f:
        rows = {r["student_id"]: r for r in csv.DictReader(f)}
    assert float(rows["student_heads_merged_wrong"]["late_submission_penalty"]) == \
        pytest.approx(9.8)
    assert float(rows["student_heads_merged_wrong"]["score"]) == pytest.approx(88.2)
    assert float(rows["student_correct"]["late_submission_penalty"]) == 0.0


def test_feedback_writes_its_formulas_as_mathml_and_loads_no_script(demo):
    """The kit's feedback template and markdown filter are used on nbgrader's API path too
    (the demo's first try, never retried for a readable notebook): the page loads no
    script (no MathJax, no CDN) and its formulas are MathML."""
    course, stdout, _ = demo
    assert not [s for s in EXPECTED if f"[again] {s} " in stdout], stdout[-5000:]
    page = (course / "feedback" / "student_correct" / "attention" / "attention.html").read_text(
        encoding="utf-8")
    assert re.findall(r'<script[^>]* src="([^"]+)"', page) == []
    assert "MathJax" not in page
    assert page.count("<math ") > 100 and "<mfrac>" in page
    # nbgrader's labels, in the kit's template, in the course's language (English here)
    assert "attention (Score: 100.0 / 100.0)" in page and "Grade cell: <code>" in page
    assert "Student's answer" in page and "(Top)" in page and "Punteggio" not in page


def test_batch_agrees_with_nbgrader_autograde_student_by_student(demo):
    """The isolated batch, run after the demo's nbgrader autograde on the same class, finds
    every student's hidden cells scored the same, function by function, and the expected
    points; nobody of the example class is flagged."""
    course, _, _ = demo
    done = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                           "--workers", "2", "--summary-json", "batch_summary.json"],
                          cwd=course, env=nbgrader_env(), capture_output=True, text=True,
                          timeout=1200, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = {r["student"]: r for r in json.loads(
        (course / "batch_summary.json").read_text())["students"]}
    for student, expected in EXPECTED.items():
        row = rows[student]
        assert row["disagreements"] == [], (student, row["disagreements"])
        assert row["flags"] == [], (student, row["flags"])
        assert row["score"] == pytest.approx(expected["score"]), student
