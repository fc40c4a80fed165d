"""The class dashboard (``grader_tests/dashboard.py``) on a small gradebook made here.

The course: the assignment's hidden-check cells recorded with nbgrader's ``Gradebook``
and six students whose grades reached it by each path the kit has: ``alice`` by
``nbgrader autograde`` (reports in ``autograded/``, one cell stopped by a time-out),
``frank`` the same way with every cell a stub, ``<script>`` and ``bob`` by ``batch``
(the log), ``carol`` whose gradebook scores match
no record, ``erin`` with a manual score over a graded mistake, and ``dave`` without a
submission. Checked: every figure is in the page and in the folder as PNG and SVG, the
numbers are the gradebook's, the fault counts are the reports' of the parts below full
marks, a hostile student id is escaped, and every link points at an existing feedback
page.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import statistics
import sys
import urllib.parse
import warnings
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from grader_tests import dashboard
from grader_tests.batch import alembic_on_path
from grader_tests.core import POINTS, grade_id
from grader_tests.notebook import RESULT_MIME
from tests.helpers import ROOT, alembic_head, new_gradebooks_quickly

# One worker builds the course and its dashboard once for every test of the module.
pytestmark = pytest.mark.xdist_group("dashboard")

A = "attention"
HOSTILE = "<script>"  # a folder name a student may choose
MATH = "x$y^2$"       # mathtext in a label would be parsed, not shown
SDPA = "scaled_dot_product_attention"


def _report(name, score, faults=()):
    checks = [{"name": "values", "passed": True, "fault": None, "message": ""}]
    checks += [{"name": f"check {f}", "passed": False, "fault": f, "message": "m"}
               for f in faults]
    return {"name": name, "score": score, "max_score": float(POINTS[name]), "checks": checks,
            "seconds": 0.1}


def _autograded(root, student, reports, errors=()):
    """``autograded/<student>/attention/attention.ipynb`` with one hidden cell per graded
    name: its report as the kit's autograde writes it, or an error output."""
    cells = []
    for name in POINTS:
        cell = nbformat.v4.new_code_cell("grade(...)")
        cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade_id(name),
                                     "points": POINTS[name], "solution": False,
                                     "locked": True, "schema_version": 3}
        if name in errors:
            cell.outputs = [nbformat.v4.new_output("error", ename=errors[name], evalue="",
                                                   traceback=[])]
        else:
            rep = reports.get(name, _report(name, float(POINTS[name])))
            cell.outputs = [nbformat.v4.new_output("display_data", data={RESULT_MIME: rep})]
        cells.append(cell)
    folder = root / "autograded" / student / A
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), str(folder / f"{A}.ipynb"))


def _log_record(student, scores, faults):
    functions = {}
    for name, top in POINTS.items():
        score = scores.get(name, float(top))
        functions[name] = {"score": score, "max_score": float(top),
                           "checks": [{"name": "c", "passed": name not in faults,
                                       "fault": faults.get(name), "message": ""}]}
    return {"student": student, "sha256": "0" * 64, "report": {
        "score": sum(f["score"] for f in functions.values()), "max_score": 100.0,
        "functions": functions}, "cell_errors": [], "flags": [], "error": None,
        "seconds": 1.0, "note": None}


def _feedback(root, student):
    page = root / "feedback" / student / A / f"{A}.html"
    page.parent.mkdir(parents=True)
    page.write_text(f"<html><head><title>feedback</title></head><body>"
                    f"<p id='who'>{student.encode().hex()}</p></body></html>")
    return page


# Automatic scores per student (names not listed: full marks).
AUTO = {
    "alice": {SDPA: 7.2, "softmax": 0.0},
    HOSTILE: {"padding_mask": 0.0, SDPA: 3.6},
    "bob": {"merge_heads": 3.0},
    MATH: {"merge_heads": 3.0},
    "carol": {"layer_norm_backward": 6.0},
    "erin": {"merge_heads": 3.0},
    "frank": {name: 0.0 for name in POINTS},  # every cell a stub: no report at all
}


LATE_PENALTY = 9.4  # carol's: the page shows her score after it, as grades.csv does


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The course folder: gradebook, autograded notebook, batch log, feedback pages."""
    from nbgrader.api import Gradebook

    root = tmp_path_factory.mktemp("dash") / "course"
    root.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    alembic_on_path()
    with warnings.catch_warnings(), new_gradebooks_quickly(), \
            Gradebook(f"sqlite:///{root / 'gradebook.db'}", "attention-kit") as gb:
        gb.add_assignment(A)
        gb.add_notebook(A, A)
        for name, points in POINTS.items():
            gb.add_grade_cell(grade_id(name), A, A, max_score=points, cell_type="code")
        warnings.simplefilter("ignore")  # nbgrader's own SQLAlchemy warnings on add_submission
        gb.add_student("dave")
        for student, lost in AUTO.items():
            gb.add_student(student)
            gb.add_submission(A, student)
            for name, points in POINTS.items():
                grade = gb.find_grade(grade_id(name), A, A, student)
                grade.auto_score = lost.get(name, float(points))
                grade.needs_manual_grade = False  # as nbgrader's autograde leaves it
        gb.find_grade(grade_id("merge_heads"), A, A, "erin").manual_score = 5.0
        gb.find_submission_notebook(A, A, "bob").flagged = True
        gb.find_submission_notebook(A, A, "carol").late_submission_penalty = LATE_PENALTY
        gb.db.commit()
    _autograded(root, "alice", {SDPA: _report(SDPA, 7.2, ["mask-after-softmax"])},
                errors={"softmax": "CellTimeoutError"})
    _autograded(root, "frank", {}, errors={name: "NotImplementedError" for name in POINTS})
    log = [
        _log_record(HOSTILE, AUTO[HOSTILE], {"padding_mask": "padding-ignored",
                                             SDPA: "softmax-wrong-axis"}),
        _log_record("bob", AUTO["bob"], {"merge_heads": "head-order"}),
        _log_record(MATH, AUTO[MATH], {"merge_heads": "head-order"}),
        _log_record("erin", AUTO["erin"], {"merge_heads": "head-order"}),
        # carol's log is of another file: 2 points where the gradebook has 6
        _log_record("carol", {"layer_norm_backward": 2.0},
                    {"layer_norm_backward": "layer-norm-backward-terms"}),
    ]
    log[1]["flags"] = ["reads the environment <b>os.environ</b>"]
    (root / "batch_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))
    for student in ("alice", HOSTILE, "erin"):
        _feedback(root, student)
    return root


class Page(HTMLParser):
    """What the tests read in the page: images, links, and the rows of each table."""

    def __init__(self):
        super().__init__()
        self.images, self.links, self.tables = [], [], {}
        self.table = self.row = self.cell = None
        self.tags = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == "img":
            self.images.append(attrs)
        elif tag == "a":
            self.links.append(attrs)
            if self.row is not None:
                self.row.setdefault("hrefs", []).append(attrs.get("href"))
        elif tag == "table":
            self.table = self.tables.setdefault(attrs.get("id"), [])
        elif tag == "tr" and self.table is not None:
            self.row = {"cells": []}
            self.table.append(self.row)
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.row["cells"].append("".join(self.cell).strip())
            self.cell = None
        elif tag == "table":
            self.table = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


@pytest.fixture(scope="module")
def written(course):
    page = dashboard.write_dashboard(course)
    text = page.read_text(encoding="utf-8")
    parsed = Page()
    parsed.feed(text)
    return page, text, parsed


def _gradebook(course):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{course / 'gradebook.db'}", "attention-kit")


def test_every_figure_is_in_the_page_and_in_the_folder_as_png_and_svg(written):
    page, text, parsed = written
    assert page == page.parent.parent.parent / "dashboard" / A / "index.html"
    figures = [i for i in parsed.images if i["src"].startswith("data:image/svg+xml;base64,")]
    assert [i["alt"] for i in figures] == list(dashboard.FIGURES.values())
    assert len(parsed.images) == len(dashboard.FIGURES)
    for stem, image in zip(dashboard.FIGURES, figures):
        svg = base64.b64decode(image["src"].split(",", 1)[1])
        assert svg == (page.parent / f"{stem}.svg").read_bytes()
        assert b"<svg" in svg and b"<script" not in svg.lower()
        png = (page.parent / f"{stem}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    # self-contained: nothing fetched, no script at all
    assert "<script" not in text.lower() and "http://" not in text and "https://" not in text
    assert "default-src 'none'" in text


def test_scores_are_the_gradebooks(course, written):
    _, _, parsed = written
    rows = {r["cells"][0].split(" (no feedback page)")[0]: r
            for r in parsed.tables["student-table"][1:]}
    with _gradebook(course) as gb:
        totals = {d["student"]: d["score"] for d in gb.submission_dicts(A)}  # raw
        assert totals["carol"] == pytest.approx(100 - 4)
        totals["carol"] -= LATE_PENALTY  # the score after the late penalty, as grades.csv
        assert set(rows) == set(totals) == set(AUTO)
        for student, total in totals.items():
            assert rows[student]["cells"][1] == f"{total:.2f} / 100"
        assert "late: the late penalty took 9.40 of 96.00 points" in rows["carol"]["cells"][-1]
        # erin's manual score counts, her graded mistake does not
        assert totals["erin"] == pytest.approx(100.0)
        assert totals["alice"] == pytest.approx(100 - 4.8 - 10)
        parts = {r["cells"][0]: r["cells"][1:] for r in parsed.tables["parts"][1:]}
        assert list(parts) == list(POINTS)
        for name in POINTS:
            scores = [gb.find_grade(grade_id(name), A, A, s).score for s in AUTO]
            assert parts[name] == [f"{POINTS[name]:g}", f"{statistics.fmean(scores):.2f}",
                                   f"{min(scores):.2f}", f"{max(scores):.2f}",
                                   str(sum(s == POINTS[name] for s in scores))]
    overview = {r["cells"][0]: r["cells"][1] for r in parsed.tables["overview"]}
    assert overview["submissions"] == "7" and overview["graded"] == "7"
    assert overview["students without a submission"] == "1"
    assert overview["to review (flagged or waiting for a manual grade)"] == "1"  # bob
    assert overview["mean score"] == f"{statistics.fmean(totals.values()):.2f} / 100"


def test_fault_counts_are_the_reports_of_parts_below_full_marks(written):
    _, _, parsed = written
    faults = {r["cells"][0]: r["cells"][2:] for r in parsed.tables["faults"][1:]}
    assert faults == {
        "head-order": ["2", f"bob, {MATH}"],  # not erin: her manual score is full marks
        "mask-after-softmax": ["1", "alice"],
        "padding-ignored": ["1", HOSTILE],
        "softmax-wrong-axis": ["1", HOSTILE],
        "timeout": ["1", "alice"],  # the cell nbgrader stopped, no report
        "not-implemented": ["1", "frank"],  # stubs: every cell ended in an error
    }
    meanings = {r["cells"][0]: r["cells"][1] for r in parsed.tables["faults"][1:]}
    assert meanings["head-order"] == dashboard.FAULTS["head-order"]
    rows = {r["cells"][0].split(" (no feedback page)")[0]: r["cells"]
            for r in parsed.tables["student-table"][1:]}
    assert "layer_norm_backward 6.00/10 (fault ids unknown)" in rows["carol"][3]
    assert "match neither" in rows["carol"][4]
    assert "softmax 0.00/10 (timeout)" in rows["alice"][3]
    # every score the page prints has 2 decimals (7.2 points of 12 lost: 4.80/12)
    assert f"{SDPA} {7.2:.2f}/{POINTS[SDPA]:g} (mask-after-softmax)" in rows["alice"][3]
    assert not re.search(r"\b\d+\.\d(?!\d)|\b\d+\.\d{3,}", " ".join(
        cell for row in rows.values() for cell in row[1:4]))
    assert "exercise_decoder_budget 0.00/3 (not-implemented)" in rows["frank"][3]
    assert rows["bob"][2] == "flagged"
    assert "<b>os.environ</b>" in rows["bob"][4]  # shown as text (the parser unescaped it)


def test_hostile_student_id_is_escaped_in_the_page_and_drawn_as_text(written):
    page, text, parsed = written
    assert HOSTILE not in text
    assert "&lt;script&gt;" in text
    assert "<b>" not in text and "&lt;b&gt;os.environ&lt;/b&gt;" in text
    assert f"{HOSTILE}" in [r["cells"][0] for r in parsed.tables["student-table"][1:]]
    # mathtext off: the heat map and no figure failed on x$y^2$
    assert (page.parent / "heatmap.svg").read_bytes().count(b"<svg") == 1


def test_links_point_at_existing_feedback_pages(course, written):
    page, _, parsed = written
    hrefs = [link["href"] for link in parsed.links]
    linked = {}
    for href in hrefs:
        assert urllib.parse.urlsplit(href).scheme == "" and not href.startswith("/")
        target = (page.parent / urllib.parse.unquote(href)).resolve()
        assert target.is_file(), href
        assert target.is_relative_to(course / "feedback")
        linked[target.parent.parent.name] = href
    assert set(linked) == {"alice", HOSTILE, "erin"}
    assert linked[HOSTILE] == "../../feedback/%3Cscript%3E/attention/attention.html"
    rows = {r["cells"][0]: r for r in parsed.tables["student-table"][1:]}
    assert rows["bob (no feedback page)"].get("hrefs") is None


def test_a_feedback_link_never_leaves_the_feedback_folder(course, tmp_path):
    outside = tmp_path / "elsewhere.html"
    outside.write_text("not feedback")
    folder = course / "feedback" / "bob" / A
    folder.mkdir(parents=True)
    (folder / f"{A}.html").symlink_to(outside)
    try:
        data = dashboard.read_results(course)
        assert {s.student: s.feedback for s in data.students}["bob"] is None
    finally:
        shutil.rmtree(course / "feedback" / "bob")


def test_command_writes_it_and_says_why_it_cannot(course, tmp_path, capsys):
    """The graders' command line hands ``dashboard`` to this command (in-process here; the
    same through ``python -m grader_tests`` in a subprocess is in the slow lane)."""
    from grader_tests.__main__ import main as graders_main

    out = tmp_path / "out"
    capsys.readouterr()
    assert graders_main(["dashboard", "--root", str(course), "--out", str(out)]) == 0
    assert (out / "index.html").is_file() and (out / "faults.svg").is_file()
    assert capsys.readouterr().out.strip() == f"dashboard: {out / 'index.html'}"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert dashboard.main(["--root", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "no gradebook at" in err and str(empty) in err
    assert f"{empty} is not a course: it has no nbgrader_config.py. A course folder needs its " \
           "own nbgrader_config.py: the example class's example/nbgrader_config.py" in err
    missing = tmp_path / "missing"
    assert dashboard.main(["--root", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"{missing} is not a folder." in err and "Traceback" not in err
    assert not missing.exists()
    assert dashboard.main(["--root", str(course), "--assignment", "training"]) == 2
    assert "assignment training" in capsys.readouterr().err


def test_after_grading_names_the_page_from_the_working_folder(course, tmp_path, monkeypatch,
                                                               capsys):
    """``make demo`` runs from the repository root and writes ``example/dashboard/``: the
    line names the page as a path that opens from there, not from the course folder."""
    monkeypatch.chdir(course.parent)
    page = dashboard.after_grading(course)
    assert page == course / "dashboard" / A / "index.html" and page.is_file()
    shown = Path(course.name, "dashboard", A, "index.html")
    assert capsys.readouterr().out.strip() == (
        f"dashboard: {shown} (figures as PNG and SVG beside it)")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    dashboard.after_grading(course)
    assert capsys.readouterr().out.strip() == (
        f"dashboard: {page.resolve()} (figures as PNG and SVG beside it)")



def test_after_grading_names_the_page_from_where_a_command_that_changed_folder_ran(
        course, monkeypatch, capsys):
    """The demo works inside the course folder (``os.chdir``) but is run from the
    repository root: it passes that folder, and the line names ``example/dashboard/...``."""
    monkeypatch.chdir(course)
    dashboard.after_grading(course, shown_from=course.parent)
    shown = Path(course.name, "dashboard", A, "index.html")
    assert capsys.readouterr().out.strip() == (
        f"dashboard: {shown} (figures as PNG and SVG beside it)")

def test_after_grading_never_raises(tmp_path, capsys):
    assert dashboard.after_grading(tmp_path) is None
    assert "dashboard: not written (DashboardError: no gradebook" in capsys.readouterr().out


@pytest.mark.slow
def test_the_gradebooks_schema_head_is_the_one_alembic_names():
    """The revision the fast tests stamp on a new gradebook is what ``alembic heads`` says."""
    from nbgrader.api import get_alembic_version

    alembic_on_path()
    assert alembic_head() == get_alembic_version()


@pytest.mark.slow
def test_subcommand_of_the_graders_command_line(course, tmp_path):
    import subprocess

    from tests.helpers import kit_env

    done = subprocess.run([sys.executable, "-m", "grader_tests", "dashboard", "--root",
                           str(course), "--out", str(tmp_path / "d")], env=kit_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "d" / "index.html").is_file()
    assert done.stdout.strip() == f"dashboard: {tmp_path / 'd' / 'index.html'}"


@pytest.mark.slow
def test_batch_writes_the_dashboard_with_its_logged_faults(tmp_path):
    """``batch`` on a released course with one example student whose ``merge_heads``
    mixes the heads up: the page shows the gradebook's total and the logged fault."""
    import subprocess

    from nbgrader.api import Gradebook

    from tests.helpers import kit_env

    root = tmp_path / "course"
    shutil.copytree(ROOT / "source" / A, root / "source" / A)
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    student = "student_heads_merged_wrong"
    shutil.copytree(ROOT / "example" / "submitted" / student, root / "submitted" / student)
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", A,
                           "--force"], cwd=root, env=kit_env(), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    done = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                           "--workers", "1"], cwd=root, env=kit_env(), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"dashboard: {Path('dashboard', A, 'index.html')}" in done.stdout
    page = root / "dashboard" / A / "index.html"
    parsed = Page()
    parsed.feed(page.read_text(encoding="utf-8"))
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "attention-kit") as gb:
        total = gb.find_submission(A, student).score
    assert total < 100
    rows = parsed.tables["student-table"][1:]
    assert [r["cells"][:2] for r in rows] == [[f"{student} (no feedback page)",
                                               f"{total:.2f} / 100"]]
    assert "merge_heads" in rows[0]["cells"][3] and "head-order" in rows[0]["cells"][3]
    assert {r["cells"][0]: r["cells"][2] for r in parsed.tables["faults"][1:]} == \
        {"head-order": "1"}
    assert all((page.parent / f"{stem}.{ext}").is_file()
               for stem in dashboard.FIGURES for ext in ("png", "svg"))
