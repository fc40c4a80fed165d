"""The class dashboard: one static HTML page of an assignment's results, and its figures.

    python -m grader_tests dashboard [--root COURSE] [--assignment attention|training]
                                     [--db-url URL] [--log FILE] [--out FOLDER]

Written at the end of ``make demo`` and of ``python -m grader_tests batch``, and by the
command above from any course folder, into ``dashboard/<assignment>/`` of the course:

* ``index.html``: self-contained (every figure embedded as an SVG data URI in an
  ``<img>``, no script, no style sheet or font from elsewhere, a Content-Security-Policy
  that allows neither), to open from disk or to attach to a mail;
* the four figures as ``.png`` (150 dpi) and ``.svg`` files beside it, for slides:
  ``scores`` (the distribution of the students' totals), ``functions`` (per graded part:
  mean points and the range over the students against the part's maximum), ``faults``
  (how many students hit each fault id of ``faults.FAULTS``, with its explanation: the
  class's misconceptions) and ``heatmap`` (student x graded part, the fraction of the
  points earned).

Where the numbers come from. The points are the gradebook's (nbgrader's ``Gradebook``:
``Grade.score`` per hidden-check cell, a manual score included, and the submission's
total), whichever path wrote them. The fault ids are not in the gradebook; they are the
graders' reports, recorded where each path records them: ``nbgrader autograde`` (and so
``make demo``) as the ``RESULT_MIME`` output of each hidden cell of
``autograded/<student>/<assignment>/<assignment>.ipynb``, ``batch`` in its log
(``batch_log.jsonl``). For each student the dashboard takes the record whose per-cell
scores are the gradebook's automatic scores (``Grade.auto_score``): the one that wrote
the gradebook's grade. A student whose gradebook scores match neither record is shown
with "fault ids unknown", never with another run's faults. As in ``make demo``'s class
summary, a student counts once per fault id, and only for the parts below full marks.

Everything a student chose (their id, which is a folder name) or their notebook produced
(reports, flags, notes) is HTML-escaped on the page and drawn as plain text in the
figures (no mathtext); a link to a feedback page is relative, percent-encoded, and only
written when the page exists inside the course's feedback folder.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import html
import io
import json
import os
import statistics
import sys
import unicodedata
import urllib.parse
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, TextIO, cast

from .faults import FAULTS, explain  # noqa: F401  (FAULTS re-exported)
from .i18n import (
    N_,
    ArgumentParser,
    _,
    course_language,
    current_language,
    folder_language,
    not_a_course,
    use_language,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator  # the linear axes' AutoLocator is one
    from nbgrader.coursedir import CourseDirectory

DEFAULT_ASSIGNMENT = "attention"
FOLDER = "dashboard"  # beside the course's autograded/ and feedback/
# The figures, in the page's order: file stem -> (title, caption).
FIGURES = {
    "scores": N_("Score distribution"),
    "functions": N_("Points per graded part"),
    "faults": N_("Students per fault id"),
    "heatmap": N_("Student x graded part"),
}
PNG_DPI = 150
# Tolerance between a recorded report's points and the gradebook's automatic score
# (the batch log rounds to 6 decimals).
SCORE_TOLERANCE = 1e-5
# The fault id of a hidden cell below full marks that ended before the graders reported
# (the same mapping as ``make demo``'s table): a stub, a cell nbgrader stopped, a crash.
CELL_ERROR_FAULTS = {"NotImplementedError": "not-implemented", "CellTimeoutError": "timeout",
                     "TimeoutError": "timeout"}
# Longest student id or fault id drawn in a figure (longer ones end in an ellipsis).
LABEL_CHARS = 44
# Above this many students the heat map has no per-row labels and no numbers in its cells.
HEATMAP_LABELLED = 80


class DashboardError(Exception):
    """The dashboard cannot be written: no gradebook, or the assignment is not in it."""


@dataclass
class Part:
    """One graded part (a hidden-check cell) of one student.

    Attributes:
        name: the graded name (``softmax``), the grade id without ``_hidden_checks``.
        score: points of the gradebook (``Grade.score``: the manual score if any, else the
            automatic one); None when not graded.
        max_score: the cell's points.
        faults: fault ids the graders reported for this part (empty when it has full
            marks); None when no record of the graders matches the gradebook.
    """

    name: str
    score: float | None
    max_score: float
    faults: list[str] | None = None


@dataclass
class StudentResult:
    """One student's submission of the assignment, as the gradebook holds it.

    Attributes:
        student: the student id (untrusted: a folder name the student may have chosen).
        score, max_score: the submission's total points after nbgrader's late penalty
            (``SubmittedAssignment.score - late_submission_penalty``, at least 0: the score
            ``nbgrader export`` writes to grades.csv), and the assignment's points.
        late_penalty: points the late penalty took (0 for a submission on time).
        parts: graded name -> ``Part``.
        flagged: the submitted notebook is flagged for review (``SubmittedNotebook.flagged``).
        needs_manual_grade: some cell waits for the instructor.
        feedback: the student's feedback page, or None when there is none.
        source: where the fault ids come from: ``"autograded"``, ``"batch log"``, or None.
        notes: what the batch log recorded beside the grade (flags, errors, the note on
            which notebook was graded); untrusted text.
    """

    student: str
    score: float
    max_score: float
    parts: dict[str, Part] = field(default_factory=dict)
    flagged: bool = False
    needs_manual_grade: bool = False
    feedback: Path | None = None
    source: str | None = None
    notes: list[str] = field(default_factory=list)
    late_penalty: float = 0.0


@dataclass
class ClassResults:
    """An assignment's results across the class.

    Attributes:
        course_id, assignment: what the gradebook calls them.
        parts: graded names in the points table's order, each with its maximum points.
        students: the students with a submission, by id.
        absent: gradebook students without a submission of the assignment.
        refused: the inbound folders ``nbgrader collect`` refused (the records of
            ``refused/<assignment>/refused.jsonl``: ``folder``, ``claimed``, ``owner``,
            ``reason``, ``kept``; untrusted text).
    """

    course_id: str
    assignment: str
    parts: dict[str, float]
    students: list[StudentResult]
    absent: list[str]
    refused: list[dict] = field(default_factory=list)

    @property
    def max_score(self) -> float:
        """The assignment's total points."""
        return float(sum(self.parts.values()))

    def graded(self) -> list[StudentResult]:
        """The students whose every part has a score in the gradebook."""
        return [s for s in self.students
                if all(p.score is not None for p in s.parts.values())]

    def fault_counts(self) -> dict[str, list[str]]:
        """Fault id -> the students who hit it (on a part below full marks), most first.

        A student counts once per fault id; the order is by number of students, then id.
        """
        hit: dict[str, list[str]] = {}
        for s in self.students:
            seen = {f for p in s.parts.values() if below_full_marks(p)
                    for f in (p.faults or ())}
            for fault in seen:
                hit.setdefault(fault, []).append(s.student)
        return dict(sorted(hit.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def below_full_marks(part: Part) -> bool:
    """True if ``part`` is graded and below its maximum points."""
    return part.score is not None and part.score < part.max_score - 1e-9


# ---------------------------------------------------------------------------------------
# Reading: the gradebook, and the graders' reports where each path recorded them.


def course_directory(root: Path) -> CourseDirectory:
    """nbgrader's ``CourseDirectory`` of the course in ``root``, configured by its
    ``nbgrader_config.py`` (read as nbgrader reads it) and rooted at ``root``."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    config = Config()
    if (root / "nbgrader_config.py").is_file():
        config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    return CourseDirectory(config=config, root=str(root))


def _part_name(grade_id: str) -> str:
    suffix = "_hidden_checks"
    return grade_id[: -len(suffix)] if grade_id.endswith(suffix) else grade_id


def _failed_faults(checks: object) -> list[str]:
    """Distinct fault ids of the failed checks of a report, in order (``other`` for a
    failed check without one); malformed entries are skipped."""
    seen: list[str] = []
    for check in checks if isinstance(checks, list) else ():
        if not isinstance(check, dict) or check.get("passed"):
            continue
        fault = str(check.get("fault") or "other")
        if fault not in seen:
            seen.append(fault)
    return seen


def reports_in_autograded(path: Path) -> dict[str, dict] | None:
    """The graders' reports in an autograded notebook, one per hidden-check cell.

    Args:
        path: ``autograded/<student>/<assignment>/<assignment>.ipynb``.

    Returns:
        graded name -> ``{"score": float or None, "reported": bool, "faults": [str],
        "error": str or None}``: ``score`` and ``faults`` from the cell's ``RESULT_MIME``
        output (``reported``); without one, ``score`` is what nbgrader makes of the cell
        (0 after an error, else None: not compared) and ``error`` the name of the error
        the cell ended with (``CellTimeoutError``...). None when the notebook is missing
        or unreadable.
    """
    import nbformat

    from .notebook import RESULT_MIME

    if not path.is_file():
        return None
    try:
        nb = nbformat.read(str(path), as_version=4)
    except Exception:  # an unreadable notebook holds no usable report
        return None
    found = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code" or not meta.get("grade") or not meta.get("grade_id"):
            continue
        score, faults, error = None, [], None
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "display_data" and RESULT_MIME in output.get("data", {}):
                report = output["data"][RESULT_MIME]
                if isinstance(report, str):
                    try:
                        report = json.loads(report)
                    except ValueError:
                        report = {}
                if isinstance(report, dict) and isinstance(report.get("score"), (int, float)):
                    score = float(report["score"])
                    faults = _failed_faults(report.get("checks"))
            elif kind == "error":
                error = str(output.get("ename") or "error")
        reported = score is not None
        if not reported and error is not None:
            score = 0.0  # nbgrader's grade of a cell that ended in an error
        found[_part_name(str(meta["grade_id"]))] = {"score": score, "reported": reported,
                                                    "faults": faults, "error": error}
    return found


def reports_in_log(log_path: Path | None) -> dict[str, dict]:
    """The batch log's last record per student (``batch.Log``).

    Returns:
        student -> ``{"parts": {name: {"score", "reported": True, "faults", "error":
        None}}, "notes":
        [str]}``; students whose last record holds no report (a grading error) are left
        out. Empty when there is no log.
    """
    if log_path is None or not Path(log_path).is_file():
        return {}
    from .batch_log import Log

    found = {}
    for student, record in Log(str(log_path)).records.items():
        report = record.get("report")
        if not isinstance(report, dict) or not isinstance(report.get("functions"), dict):
            continue
        parts = {}
        for name, f in report["functions"].items():
            if isinstance(f, dict) and isinstance(f.get("score"), (int, float)):
                parts[str(name)] = {"score": float(f["score"]), "reported": True,
                                    "faults": _failed_faults(f.get("checks")), "error": None}
        notes = [_("flag: {flag}").format(flag=f) for f in record.get("flags") or []]
        notes += [str(e) for e in [record.get("error"), *(record.get("cell_errors") or []),
                                   record.get("note")] if e]
        found[str(student)] = {"parts": parts, "notes": notes}
    return found


def _agrees(recorded: dict[str, dict], auto: dict[str, float | None]) -> bool:
    """True if every part with both a recorded score and an automatic score in the
    gradebook has the same points in both, and at least one part was compared."""
    compared = 0
    for name, score in auto.items():
        rec = recorded.get(name)
        if score is None or rec is None or rec["score"] is None:
            continue
        if abs(rec["score"] - score) > SCORE_TOLERANCE:
            return False
        compared += 1
    return compared > 0


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def read_results(root: Path, assignment: str = DEFAULT_ASSIGNMENT, db_url: str | None = None,
                 log_path: Path | None = None) -> ClassResults:
    """An assignment's results: the gradebook's points, the graders' fault ids.

    Args:
        root: the course folder (its ``nbgrader_config.py`` gives the gradebook, the
            course id and the folders' layout).
        assignment: the assignment id; its notebook has the same name.
        db_url: the gradebook (default: the course's ``c.CourseDirectory.db_url``).
        log_path: the batch log (default: ``batch.log_name(assignment)`` in ``root``).

    Raises:
        DashboardError: the gradebook does not exist, or does not hold ``assignment``.
    """
    from nbgrader.api import Gradebook, MissingEntry

    from .assignments import get as assignment_named
    from .batch_log import log_name
    from .gradebook import alembic_on_path

    root = Path(root).resolve()
    coursedir = course_directory(root)
    db_url = db_url or coursedir.db_url
    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///"):]).is_file():
        problem = not_a_course(root)  # the course may be the wrong folder (--root)
        if problem:
            raise DashboardError(_("no gradebook at {path}: {problem}").format(
                path=db_url[len("sqlite:///"):], problem=problem))
        raise DashboardError(_("no gradebook at {path}: grade the class first (make demo, "
                               "nbgrader autograde, or python -m grader_tests batch)").format(
                                   path=db_url[len("sqlite:///"):]))
    if log_path is None:
        log_path = root / log_name(assignment)
    logged = reports_in_log(log_path)
    order = list(assignment_named(assignment).points)
    feedback_root = Path(coursedir.format_path(coursedir.feedback_directory, ".", "."))
    alembic_on_path()
    course_id = coursedir.course_id or "default_course"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nbgrader's own SQLAlchemy warnings
        with Gradebook(db_url, course_id) as gb:
            try:
                record = gb.find_assignment(assignment)
                gb.find_notebook(assignment, assignment)
            except MissingEntry:
                raise DashboardError(_(
                    "assignment {assignment} (notebook {assignment}.ipynb) is not in the "
                    "gradebook {db_url}: run `nbgrader generate_assignment {assignment}` "
                    "and grade the class first").format(assignment=assignment,
                                                        db_url=db_url)) from None
            cells = {_part_name(c.name): float(c.max_score)
                     for nb in record.notebooks for c in nb.grade_cells}
            parts = {n: cells[n] for n in sorted(
                cells, key=lambda n: (order.index(n) if n in order else len(order), n))}
            totals = {d["student"]: d for d in gb.submission_dicts(assignment)}
            students, absent = [], []
            for student in sorted(s.id for s in gb.students):
                if student not in totals:
                    absent.append(student)
                    continue
                try:
                    notebook = gb.find_submission_notebook(assignment, assignment, student)
                except MissingEntry:  # a submission without the notebook: nothing graded
                    notebook = None
                grades = {_part_name(g.name): g for g in notebook.grades} if notebook else {}
                penalty = float(gb.find_submission(assignment, student)
                                .late_submission_penalty or 0.0)
                raw = float(totals[student]["score"])
                row = StudentResult(
                    student=student, score=max(0.0, raw - penalty),
                    max_score=float(totals[student]["max_score"]), late_penalty=penalty,
                    flagged=bool(notebook is not None and notebook.flagged),
                    needs_manual_grade=bool(totals[student]["needs_manual_grade"]))
                auto = {n: (None if g.auto_score is None else float(g.auto_score))
                        for n, g in grades.items()}
                recorded, source = None, None
                autograded = reports_in_autograded(Path(coursedir.format_path(
                    coursedir.autograded_directory, student, assignment)) / f"{assignment}.ipynb")
                if autograded is not None and _agrees(autograded, auto):
                    recorded, source = autograded, "autograded"
                elif student in logged and _agrees(logged[student]["parts"], auto):
                    recorded, source = logged[student]["parts"], "batch log"
                    row.notes = logged[student]["notes"]
                row.source = source
                for name in parts:
                    g = grades.get(name)
                    score = None if g is None or g.score is None else float(g.score)
                    part = Part(name, score, parts[name])
                    if recorded is not None:
                        rec = recorded.get(name)
                        if not below_full_marks(part):
                            part.faults = []
                        elif rec is not None and rec["reported"]:
                            part.faults = list(rec["faults"]) or ["other"]
                        elif rec is not None:  # the cell ended before the graders reported
                            part.faults = [CELL_ERROR_FAULTS.get(rec["error"], "crash")]
                    row.parts[name] = part
                page = Path(coursedir.format_path(coursedir.feedback_directory, student,
                                                  assignment)) / f"{assignment}.html"
                if page.is_file() and _inside(page, feedback_root):
                    row.feedback = page
                students.append(row)
    from .exchange import REFUSED_DIRECTORY, REFUSED_RECORDS, read_refused

    refused = read_refused(root / REFUSED_DIRECTORY / assignment / REFUSED_RECORDS)
    return ClassResults(course_id=course_id, assignment=assignment, parts=parts,
                        students=students, absent=absent, refused=refused)


# ---------------------------------------------------------------------------------------
# Figures: matplotlib's object interface on the Agg canvas (no pyplot, no global state).


def plain_label(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` made safe to draw: control characters removed, cut to ``limit``
    characters with an ellipsis. (Mathtext is switched off where it is drawn.)"""
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in str(text))
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def figure_scores(data: ClassResults) -> Figure:
    """Histogram of the graded students' totals, bins of 5 % of the maximum, with the
    mean and the median marked."""
    fig = _figure(7.0, 3.6)
    ax = fig.add_subplot()
    top = data.max_score or 1.0
    scores = [s.score for s in data.graded()]
    bins = [top * i / 20 for i in range(21)]
    ax.hist(scores, bins=bins, color="#4c72b0", edgecolor="white")
    if scores:
        mean, median = statistics.fmean(scores), statistics.median(scores)
        ax.axvline(mean, color="#c44e52", linestyle="--",
                   label=_("mean {mean:.2f}").format(mean=mean))
        ax.axvline(median, color="#222222", linestyle=":",
                   label=_("median {median:.2f}").format(median=median))
        ax.legend(loc="upper left")
    ax.set_xlim(0, top)
    cast("MaxNLocator", ax.yaxis.get_major_locator()).set_params(integer=True)
    ax.set_xlabel(_("score (points out of {top:g})").format(top=top))
    ax.set_ylabel(_("students"))
    ax.set_title(_("{title}: {count} students graded").format(title=_(FIGURES["scores"]),
                                                             count=len(scores)))
    return fig


def part_statistics(data: ClassResults) -> dict[str, dict[str, float]]:
    """Per graded part over the graded students: ``{"max", "mean", "min", "highest",
    "full"}`` (``full``: how many students have full marks), in points."""
    graded = data.graded()
    stats = {}
    for name, top in data.parts.items():
        scores = [score for s in graded if (score := s.parts[name].score) is not None]
        stats[name] = {
            "max": top,
            "mean": statistics.fmean(scores) if scores else 0.0,
            "min": min(scores) if scores else 0.0,
            "highest": max(scores) if scores else 0.0,
            "full": sum(not below_full_marks(s.parts[name]) for s in graded),
        }
    return stats


def figure_functions(data: ClassResults) -> Figure:
    """Per graded part, a bar of its maximum points, the class's mean on it, and the
    range (lowest to highest score over the graded students)."""
    stats = part_statistics(data)
    names = list(stats)
    fig = _figure(7.5, 0.32 * len(names) + 1.4)
    ax = fig.add_subplot()
    y = list(range(len(names)))
    ax.barh(y, [stats[n]["max"] for n in names], color="#dddddd", label=_("maximum"))
    ax.barh(y, [stats[n]["mean"] for n in names], height=0.55, color="#4c72b0",
            label=_("class mean"))
    lows = [stats[n]["mean"] - stats[n]["min"] for n in names]
    highs = [stats[n]["highest"] - stats[n]["mean"] for n in names]
    ax.errorbar([stats[n]["mean"] for n in names], y, xerr=[lows, highs], fmt="none",
                ecolor="#222222", capsize=3, label=_("lowest to highest"))
    ax.set_yticks(y, [plain_label(n) for n in names], parse_math=False)
    ax.invert_yaxis()
    ax.set_xlabel(_("points"))
    ax.set_title(_(FIGURES["functions"]))
    ax.legend(loc="lower right", fontsize="small")
    return fig


def figure_faults(data: ClassResults) -> Figure:
    """Per fault id, how many students hit it, with the fault's explanation under its bar."""
    counts = data.fault_counts()
    fig = _figure(8.0, 0.62 * max(1, len(counts)) + 1.2)
    ax = fig.add_subplot()
    n = len(data.students)
    if not counts:
        ax.text(0.5, 0.5, _("no fault reported"), ha="center", va="center",
                transform=ax.transAxes)
        ax.set_axis_off()
    else:
        ids = list(counts)
        y = [1.0 * i for i in range(len(ids))]
        ax.barh(y, [len(counts[f]) for f in ids], height=0.42, color="#c44e52")
        for yi, fault in zip(y, ids):
            ax.text(len(counts[fault]), yi, f" {len(counts[fault])}", va="center",
                    parse_math=False)
            explanation = explain(fault)
            ax.text(0, yi + 0.36, plain_label(explanation, 125), va="center", fontsize=7,
                    color="#444444", parse_math=False)
        ax.set_yticks(y, [plain_label(f) for f in ids], parse_math=False)
        ax.set_ylim(len(ids) - 0.4, -0.5)
        ax.set_xlim(0, max(n, 1) * 1.05)
        cast("MaxNLocator", ax.xaxis.get_major_locator()).set_params(integer=True)
        ax.set_xlabel(_("students (of {n})").format(n=n))
    ax.set_title(_(FIGURES["faults"]))
    return fig


def figure_heatmap(data: ClassResults) -> Figure:
    """Students (rows) x graded parts (columns): the fraction of each part's points
    earned, with the points written in each cell up to ``HEATMAP_LABELLED`` students."""
    import numpy as np

    names = list(data.parts)
    rows = data.students
    grid = np.full((max(1, len(rows)), len(names)), np.nan)
    for i, s in enumerate(rows):
        for j, name in enumerate(names):
            part = s.parts[name]
            if part.score is not None and part.max_score > 0:
                grid[i, j] = part.score / part.max_score
    labelled = len(rows) <= HEATMAP_LABELLED
    height = min(0.3 * len(rows) + 2.6, 40.0) if labelled else 12.0
    fig = _figure(0.42 * len(names) + 4.0, height)
    ax = fig.add_subplot()
    image = ax.imshow(grid, cmap="RdYlGn", vmin=0.0, vmax=1.0, aspect="auto",
                      interpolation="nearest")
    ax.set_xticks(range(len(names)), [plain_label(n) for n in names], rotation=60,
                  ha="right", rotation_mode="anchor", parse_math=False)
    if labelled:
        ax.set_yticks(range(len(rows)), [plain_label(s.student) for s in rows],
                      parse_math=False)
        for i, s in enumerate(rows):
            for j, name in enumerate(names):
                part = s.parts[name]
                if part.score is not None:
                    ax.text(j, i, _num(part.score), ha="center", va="center", fontsize=6,
                            parse_math=False)
    else:
        ax.set_ylabel(_("{count} students, by id").format(count=len(rows)))
        ax.set_yticks([])
    fig.colorbar(image, ax=ax, label=_("fraction of the points"), shrink=0.8)
    ax.set_title(_(FIGURES["heatmap"]))
    return fig


def figures(data: ClassResults) -> dict[str, Figure]:
    """The four figures (matplotlib ``Figure``), keyed as ``FIGURES``."""
    return {"scores": figure_scores(data), "functions": figure_functions(data),
            "faults": figure_faults(data), "heatmap": figure_heatmap(data)}


def _write_bytes(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def render(fig: Figure, fmt: str) -> bytes:
    """``fig`` as PNG (``PNG_DPI`` dots per inch) or SVG bytes, without a date or a
    random id in them.

    Args:
        fig: the figure.
        fmt: ``"png"`` or ``"svg"``.
    """
    import matplotlib

    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "attention-kit", "svg.fonttype": "path"}):
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(buffer, format=fmt, dpi=PNG_DPI, metadata=metadata)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------
# The page.

E = html.escape  # every string of the page that is not the kit's own goes through it

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 72em;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
figure { margin: 1em 0; } figure img { width: min(100%, 60em); height: auto; }
figcaption { font-size: 0.9em; color: #555; }
table { border-collapse: collapse; margin: 0.5em 0; }
th { white-space: nowrap; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left;
         vertical-align: top; overflow-wrap: anywhere; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #777; } .flag { color: #a00; font-weight: bold; }
"""
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _link(target: Path, out_dir: Path) -> str:
    """A relative, percent-encoded URL from ``out_dir`` to ``target``, HTML-escaped."""
    relative = os.path.relpath(target, out_dir).replace(os.sep, "/")
    return E(urllib.parse.quote(relative), quote=True)


def _num(x: float | None) -> str:
    """A score as the kit prints it for people: 2 decimals (``"6.12"``), ``"-"`` for None
    (the JSON and CSV files keep full precision)."""
    return "-" if x is None else f"{x:.2f}"


def page_html(data: ClassResults, svgs: dict[str, bytes], out_dir: Path,
              generated: str) -> str:
    """The dashboard page.

    Args:
        data: the results.
        svgs: figure stem -> SVG bytes, embedded as data URIs in ``<img>`` elements.
        out_dir: the folder the page is written to (links are relative to it).
        generated: the time of writing, shown in the header.

    Returns:
        The HTML text; every string that is not the kit's own is escaped.
    """
    graded = data.graded()
    scores = [s.score for s in graded]
    stats = part_statistics(data)
    faults = data.fault_counts()
    label = SimpleNamespace(  # the page's labels, translated and escaped
        submissions=E(_("submissions")),
        graded=E(_("graded")),
        mean_score=E(_("mean score")),
        median_score=E(_("median score")),
        lowest_highest=E(_("lowest, highest")),
        to_review=E(_("to review (flagged or waiting for a manual grade)")),
        students_without_a_submission=E(_("students without a submission")),
        for_slides=E(_("For slides: {png}, {svg} in this folder.")),
        part=E(_("part")),
        max=E(_("max")),
        mean=E(_("mean")),
        lowest=E(_("lowest")),
        highest=E(_("highest")),
        full_marks=E(_("full marks")),
        fault_id=E(_("fault id")),
        what_it_means=E(_("what it means")),
        students=E(_("students")),
        students_heading=E(_("Students")),
        who=E(_("who")),
        no_fault_reported=E(_("No fault reported.")),
        student=E(_("student")),
        score=E(_("score")),
        review=E(_("review")),
        below_full_marks=E(_("below full marks: part points (fault ids)")),
        notes=E(_("notes")),
        no_feedback_page=E(_("(no feedback page)")),
        part_not_graded=E(_("{part} not graded")),
        refused_at_collect=E(_("refused at collect")),
        folder=E(_("folder")),
        claimed_for=E(_("named as")),
        owned_by=E(_("owned by")),
        why=E(_("why")),
    )
    title = E(_("{assignment}: class dashboard").format(assignment=data.assignment))
    out = [
        "<!DOCTYPE html>", f'<html lang="{current_language()}">', "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title>", f"<style>{STYLE}</style>", "</head>",
        "<body>",
        f"<h1>{title}</h1>",
        '<p class="muted">' + E(_("course {course}; from the gradebook, written {when}.").format(
            course=data.course_id, when=generated)) + "</p>",
        '<table id="overview"><tbody>',
        f'<tr><th>{label.submissions}</th><td class="num">{len(data.students)}</td></tr>',
        f'<tr><th>{label.graded}</th><td class="num">{len(graded)}</td></tr>',
    ]
    if scores:
        out += [f'<tr><th>{label.mean_score}</th><td class="num">'
                f"{statistics.fmean(scores):.2f} / {data.max_score:g}</td></tr>",
                f'<tr><th>{label.median_score}</th><td class="num">'
                f"{statistics.median(scores):.2f}</td></tr>",
                f'<tr><th>{label.lowest_highest}</th><td class="num">{min(scores):.2f}, '
                f"{max(scores):.2f}</td></tr>"]
    review = [s for s in data.students if s.flagged or s.needs_manual_grade]
    out += [f'<tr><th>{label.to_review}</th>'
            f'<td class="num">{len(review)}</td></tr>',
            f'<tr><th>{label.students_without_a_submission}</th>'
            f'<td class="num">{len(data.absent)}</td></tr>']
    if data.refused:
        out.append(f'<tr><th><a href="#refused">{label.refused_at_collect}</a></th>'
                   f'<td class="num flag">{len(data.refused)}</td></tr>')
    out.append("</tbody></table>")

    for stem, figure_title in FIGURES.items():
        title = _(figure_title)
        uri = "data:image/svg+xml;base64," + base64.b64encode(svgs[stem]).decode("ascii")
        out += [f'<h2 id="{stem}">{E(title)}</h2>', '<figure class="dashboard-figure">',
                f'<img src="{uri}" alt="{E(title)}">',
                "<figcaption>" + label.for_slides.format(
                    png=f"<code>{stem}.png</code>", svg=f"<code>{stem}.svg</code>")
                + "</figcaption>", "</figure>"]
        if stem == "functions":
            out += [f'<table id="parts"><thead><tr><th>{label.part}</th>'
                    f'<th class="num">{label.max}</th>'
                    f'<th class="num">{label.mean}</th><th class="num">{label.lowest}</th>'
                    f'<th class="num">{label.highest}</th>'
                    f'<th class="num">{label.full_marks}</th></tr>'
                    "</thead><tbody>"]
            for name, st in stats.items():
                out.append(f"<tr><td><code>{E(name)}</code></td>"
                           f'<td class="num">{st["max"]:g}</td>'
                           f'<td class="num">{st["mean"]:.2f}</td>'
                           f'<td class="num">{st["min"]:.2f}</td>'
                           f'<td class="num">{st["highest"]:.2f}</td>'
                           f'<td class="num">{st["full"]}</td></tr>')
            out.append("</tbody></table>")
        if stem == "faults":
            out += [f'<table id="faults"><thead><tr><th>{label.fault_id}</th>'
                    f'<th>{label.what_it_means}</th>'
                    f'<th class="num">{label.students}</th><th>{label.who}</th></tr>'
                    "</thead><tbody>"]
            for fault, who in faults.items():
                meaning = explain(fault)
                out.append(f"<tr><td><code>{E(fault)}</code></td><td>{E(meaning)}</td>"
                           f'<td class="num">{len(who)}</td><td>{E(", ".join(who))}</td></tr>')
            out.append("</tbody></table>")
            if not faults:
                out.append(f"<p>{label.no_fault_reported}</p>")

    out += [f'<h2 id="students">{label.students_heading}</h2>',
            f'<table id="student-table"><thead><tr><th>{label.student}</th>'
            f'<th class="num">{label.score}</th>'
            f"<th>{label.review}</th>"
            f"<th>{label.below_full_marks}</th>"
            f"<th>{label.notes}</th></tr></thead><tbody>"]
    for s in data.students:
        name = E(s.student)
        cell = (f'<a class="feedback" href="{_link(s.feedback, out_dir)}">{name}</a>'
                if s.feedback else
                f'{name} <span class="muted">{label.no_feedback_page}</span>')
        lost = []
        for p in s.parts.values():
            if p.score is None:
                lost.append(label.part_not_graded.format(part=f"<code>{E(p.name)}</code>"))
            elif below_full_marks(p):
                why = _("fault ids unknown") if p.faults is None else ", ".join(p.faults)
                lost.append(f"<code>{E(p.name)}</code> {_num(p.score)}/{p.max_score:g} ({E(why)})")
        review_text = "; ".join(t for t, on in ((_("flagged"), s.flagged),
                                                (_("manual grade"), s.needs_manual_grade)) if on)
        notes = list(s.notes)
        if s.late_penalty > 0:
            notes.append(_("late: the late penalty took {penalty:.2f} of {raw:.2f} points").format(
                penalty=s.late_penalty, raw=s.score + s.late_penalty))
        if s.source is None:
            notes.append(_("fault ids unknown: the gradebook's scores match neither "
                           "autograded/ nor the batch log"))
        out.append(f"<tr><td>{cell}</td>"
                   f'<td class="num">{_num(s.score)} / {s.max_score:g}</td>'
                   f'<td class="flag">{E(review_text)}</td>'
                   f"<td>{'<br>'.join(lost) or '-'}</td>"
                   f"<td>{'<br>'.join(E(n) for n in notes)}</td></tr>")
    out.append("</tbody></table>")
    if data.absent:
        out.append("<p>" + E(_("In the gradebook without a submission of {assignment}: "
                                "{students}.").format(assignment=data.assignment,
                                                      students=", ".join(data.absent))) + "</p>")
    if data.refused:
        out += [f'<h2 id="refused">{label.refused_at_collect}</h2>',
                "<p>" + E(_("Folders of the exchange's inbound that nbgrader collect did not "
                            "collect: each is named as a student's submission but is not "
                            "theirs, or its name is refused. They are left in the inbound, "
                            "and a copy of each is kept in {folder}.").format(
                                folder=f"refused/{data.assignment}/")) + "</p>",
                f'<table id="refused-table"><thead><tr><th>{label.folder}</th>'
                f"<th>{label.claimed_for}</th><th>{label.owned_by}</th>"
                f"<th>{label.why}</th></tr></thead><tbody>"]
        for r in data.refused:
            out.append("<tr>" + "".join(f"<td>{E(str(r.get(key, '')))}</td>" for key in
                                        ("folder", "claimed", "owner", "reason")) + "</tr>")
        out.append("</tbody></table>")
    out += ["</body>", "</html>", ""]
    return "\n".join(out)


def write_dashboard(root: Path, assignment: str = DEFAULT_ASSIGNMENT,
                    db_url: str | None = None, log_path: Path | None = None,
                    out_dir: Path | None = None) -> Path:
    """Write the dashboard of ``assignment``: ``index.html`` and the figures as PNG and SVG.

    Args:
        root: the course folder.
        assignment: the assignment id.
        db_url: the gradebook (default: the course's).
        log_path: the batch log (default: the course's ``batch_log*.jsonl``).
        out_dir: where to write (default ``root/dashboard/<assignment>``).

    Returns:
        The path of ``index.html``.

    Raises:
        DashboardError: no gradebook, or the assignment is not in it.
    """
    root = Path(root).resolve()
    with use_language(course_language(str(root))):
        return _write_dashboard(root, assignment, db_url, log_path, out_dir)


def _write_dashboard(root: Path, assignment: str, db_url: str | None,
                     log_path: Path | None, out_dir: Path | None) -> Path:
    data = read_results(root, assignment, db_url, log_path)
    out_dir = Path(out_dir or root / FOLDER / assignment).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    svgs = {}
    for stem, fig in figures(data).items():
        svgs[stem] = render(fig, "svg")
        _write_bytes(out_dir / f"{stem}.svg", svgs[stem])
        _write_bytes(out_dir / f"{stem}.png", render(fig, "png"))
    generated = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = out_dir / "index.html"
    _write_bytes(page, page_html(data, svgs, out_dir, generated).encode("utf-8"))
    return page


def after_grading(root: Path, assignment: str = DEFAULT_ASSIGNMENT, db_url: str | None = None,
                  log_path: Path | None = None, out: TextIO | None = None,
                  shown_from: Path | None = None) -> Path | None:
    """Write the dashboard at the end of a grading run; never raises.

    Prints one line: where the page is (relative to the working folder when it lies
    inside it, absolute otherwise: ``make demo`` runs from the repository root and writes
    ``example/dashboard/...``), or why it could not be written (the grades are in the
    gradebook either way; ``python -m grader_tests dashboard`` writes it again).

    Args:
        out: the text stream to print to (default: ``sys.stdout``).
        shown_from: the folder the printed path is relative to (default: the current
            one; a command that changed folder passes the one it was run from).

    Returns:
        The page's path, or None.
    """
    out = out or sys.stdout
    with use_language(folder_language(str(root))):
        try:
            page = write_dashboard(root, assignment, db_url, log_path)
        except Exception as exc:  # the grades are recorded: a dashboard never stops the run
            print(_("dashboard: not written ({error}); `python -m grader_tests dashboard "
                    "--assignment {assignment}` writes it").format(
                        error=f"{type(exc).__name__}: {exc}", assignment=assignment), file=out)
            return None
        try:  # a path the reader can open from where the command ran
            shown = page.resolve().relative_to((shown_from or Path.cwd()).resolve())
        except ValueError:
            shown = page
        print(_("dashboard: {page} (figures as PNG and SVG beside it)").format(page=shown),
              file=out)
    return page


def main(argv: list[str] | None = None) -> int:
    """``python -m grader_tests dashboard``.

    Args:
        argv: the arguments after ``dashboard`` (default: the command line's).

    Returns:
        The exit status: 0 when the dashboard was written, 2 when it cannot be (the reason
        on stderr: no gradebook, or the assignment is not in it).
    """
    with use_language(folder_language(os.getcwd())):  # the help in the course's language
        args = parser().parse_args(argv)
    with use_language(folder_language(str(args.root))):
        try:
            page = write_dashboard(args.root, args.assignment, args.db_url, args.log,
                                   args.out)
        except DashboardError as exc:
            print(_("error: {error}").format(error=exc), file=sys.stderr)
            return 2
        print(_("dashboard: {page}").format(page=page))
    return 0


def parser() -> argparse.ArgumentParser:
    """The command line's parser, its help in the current language (``i18n.use_language``).
    """
    parser = ArgumentParser(
        prog="python -m grader_tests dashboard",
        description=_("Write the class dashboard (HTML page, PNG and SVG figures) of an "
                      "assignment from the course's gradebook."))
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help=_("the course folder (default: the current one)"))
    parser.add_argument("--assignment", default=DEFAULT_ASSIGNMENT,
                        choices=("attention", "training"),
                        help=_("the assignment (default: attention)"))
    parser.add_argument("--db-url", default=None,
                        help=_("the gradebook (default: the course's nbgrader_config.py)"))
    parser.add_argument("--log", type=Path, default=None,
                        help=_("the batch log (default: the course's batch_log.jsonl, or "
                               "batch_log_training.jsonl)"))
    parser.add_argument("--out", type=Path, default=None,
                        help=_("the folder to write (default: dashboard/<assignment>/ in the "
                               "course)"))
    return parser
