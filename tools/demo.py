"""The kit's main job: release the `attention` assignment and autograde the example class.

Run from the repository root (``make demo`` does) as ``python -m tools.demo``. The example
class is a course of its own, ``example/`` (its ``nbgrader_config.py`` loads the kit's and
gives it its own course id, gradebook and folders; the assignment is the kit's own
``source/`` and ``release/``): the demo reads and writes nothing of the instructor's course
at the repository root (``submitted/``, ``gradebook.db``, manual grades, due dates). Every
step is nbgrader's own, configured by the course's ``nbgrader_config.py``:

1. in the example course only, delete what an earlier run wrote (``gradebook.db``,
   ``autograded/``, ``feedback/``, ``grades.csv``, ``class_summary.json``, ``unlocked/``),
   so that every run starts from scratch. Another course given with ``--root`` (an
   instructor's, as ``tools/ci_grade.py`` grades it) keeps everything: nbgrader regrades
   in place;
2. ``nbgrader generate_assignment attention --force``: writes ``release/attention/``
   (committed; ``tests/test_release.py`` proves it current) and records the assignment,
   its notebook and its cells in the gradebook; in the example course, the due date
   ``authoring.make_submissions.DUE_DATE`` is recorded with it (what ``nbgrader db assignment
   add attention --duedate=...`` does), so that nbgrader's late penalty applies to the
   submissions whose ``timestamp.txt`` is later;
3. every folder of ``submitted/`` becomes a student of the gradebook;
4. per student, nbgrader's ``autograde`` (``create``, ``force``) then
   ``generate_feedback``, through ``nbgrader.apps.NbGraderAPI`` in ``--jobs`` worker
   processes (each runs one student, hence one kernel, at a time). A submission that makes
   nbgrader fail is reported, tried once more with the ``nbgrader`` command line, and the
   others go on;
5. ``nbgrader export`` (its CSV plugin) writes ``grades.csv``;
6. the score table: per student the score from the gradebook (less nbgrader's late
   penalty, which is shown) and, for every graded name below full marks, the fault ids
   the graders reported. nbgrader's per-cell score (the gradebook) is joined, by grade id
   ``grader_tests.core.grade_id(name)``, to the report that the hidden cell published in
   the autograded notebook as a display output of MIME type
   ``grader_tests.notebook.RESULT_MIME``;
7. the class summary: how many students hit each fault id, printed and written to
   ``class_summary.json`` together with every student's per-name scores and faults;
8. the training gate: ``tools/unlock_training.py`` releases `training` (the committed
   ``release/training/``) to the students with full marks, into ``unlocked/<student>/``,
   and prints who is unlocked and who is not, and why (``training_unlocked`` in the
   summary).

The wall time of the whole job, and of each step, is printed.
"""

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# child_env: the environment of nbgrader and, through it, of the kernels
from grader_tests.config import course_directory, nbgrader_config  # noqa: F401  (re-exported)
from grader_tests.config import nbgrader_env as child_env
from grader_tests.i18n import not_a_course
from grader_tests.i18n import _, folder_language, ngettext, use_language
from grader_tests.report import visible

ASSIGNMENT = "attention"
NOTEBOOK = "attention"  # source/attention/attention.ipynb
ROOT = Path(__file__).resolve().parent.parent
# The example class: a course directory of its own (example/nbgrader_config.py).
EXAMPLE = ROOT / "example"
EXAMPLE_COURSE_ID = "attention-kit-example"
GENERATED = ("gradebook.db", "autograded", "feedback", "grades.csv", "class_summary.json",
             "unlocked", "exchange", "dashboard", "batch_log.jsonl", ".grading_chosen")
# Seconds a retry of one student on the command line may take before the demo gives up.
RETRY_TIME_LIMIT = 600


def log(message: str) -> None:
    """Print one progress line at once (the demo is watched while it runs)."""
    print(message, flush=True)


def nbgrader(root: str | Path, *args: str, timeout: float | None = None,
             ) -> subprocess.CompletedProcess[str]:
    """Run the command line ``nbgrader ARGS`` in ``root`` with this interpreter.

    Returns:
        ``subprocess.CompletedProcess``, stdout and stderr together as text.

    Raises:
        subprocess.TimeoutExpired: after ``timeout`` seconds.
    """
    from grader_tests.course_lock import inherit_fds

    return subprocess.run(  # (the run's grading lock handed down: the child shares it)
        [sys.executable, "-m", "nbgrader", *args],
        cwd=root, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=timeout, check=False, pass_fds=inherit_fds(),
    )


def is_example_course(coursedir: Any) -> bool:
    """Whether ``coursedir`` (nbgrader's ``CourseDirectory``) is the example class: its
    course id is ``EXAMPLE_COURSE_ID`` (``example/nbgrader_config.py`` sets it)."""
    return coursedir.course_id == EXAMPLE_COURSE_ID


def clean(root: Path) -> None:
    """Delete everything an earlier run of the demo wrote in the course folder ``root``.
    Only ever called on the example course."""
    for name in GENERATED:
        path = root / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def students_of(root: Path) -> list[str]:
    """Student ids: the folders of ``submitted/`` that hold the assignment, sorted."""
    submitted = root / "submitted"
    if not submitted.is_dir():
        return []
    return sorted(p.name for p in submitted.iterdir()
                  if p.is_dir() and (p / ASSIGNMENT).is_dir())


def record_due_date(coursedir: Any, duedate: str) -> None:
    """Record ``duedate`` (text in a form ``grader_tests.due_dates.parse_due_date``
    accepts, as ``nbgrader db assignment add --duedate`` takes it) as the assignment's
    due date in the gradebook, read by the course's rule.

    Raises:
        grader_tests.due_dates.DueDateError: a form the rule refuses.
    """
    from nbgrader.api import Gradebook

    from grader_tests.due_dates import parse_due_date

    gb = Gradebook(coursedir.db_url, coursedir.course_id)
    try:
        gb.update_or_create_assignment(ASSIGNMENT, duedate=parse_due_date(
            duedate, str(coursedir.config.get("NbGraderAPI", {}).get("timezone", "UTC"))))
    finally:
        gb.close()
        gb.engine.dispose()


def register_students(coursedir: Any, students: list[str]) -> None:
    """Make sure the assignment is in the gradebook and add every student to it."""
    from nbgrader.api import Gradebook

    gb = Gradebook(coursedir.db_url, coursedir.course_id)
    try:
        gb.find_assignment(ASSIGNMENT)  # recorded by generate_assignment; MissingEntry if not
        for student in students:
            gb.update_or_create_student(student)
    finally:
        gb.close()
        gb.engine.dispose()  # no open connection may be inherited by the worker processes


# ---------------------------------------------------------------------------------------
# Grading: worker processes forked from the demo once nbgrader is imported, so that each
# student costs a kernel and nbgrader's work, not another start of nbgrader.

_api = None


def _worker_start(root):
    """Set up a worker process: nbgrader's API with the course's configuration. The
    worker's own output (nbgrader's log, the kernels' stderr) goes to /dev/null: what
    matters comes back in each call's result."""
    global _api
    from nbgrader.apps import NbGraderAPI

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    config = nbgrader_config(root)
    _api = NbGraderAPI(coursedir=course_directory(root, config), config=config)


def _worker_grade(student):
    """In a worker: nbgrader's autograde, then its feedback, for one student."""
    started = time.perf_counter()
    result = _api.autograde(ASSIGNMENT, student, force=True, create=True)
    ok, feedback = bool(result.get("success")), False
    output = "" if ok else (result.get("log", "") + result.get("error", ""))
    if ok:
        result = _api.generate_feedback(ASSIGNMENT, student, force=True)
        feedback = bool(result.get("success"))
        if not feedback:
            output = result.get("log", "") + result.get("error", "")
    return {"student": student, "ok": ok, "feedback": feedback,
            "seconds": time.perf_counter() - started, "output": output}


def grade_with_command_line(root: Path, student: str) -> dict[str, Any]:
    """One student's autograde and feedback with the ``nbgrader`` command line (a retry)."""
    started = time.perf_counter()
    ok = feedback = False
    output = ""
    try:
        result = nbgrader(root, "autograde", ASSIGNMENT, f"--student={student}",
                          "--create", "--force", timeout=RETRY_TIME_LIMIT)
        ok = result.returncode == 0
        output = "" if ok else result.stdout
        if ok:
            result = nbgrader(root, "generate_feedback", ASSIGNMENT, f"--student={student}",
                              "--force", timeout=RETRY_TIME_LIMIT)
            feedback = result.returncode == 0
            output = "" if feedback else result.stdout
    except subprocess.TimeoutExpired:
        output = f"nbgrader did not finish within {RETRY_TIME_LIMIT} s"
    return {"student": student, "ok": ok, "feedback": feedback,
            "seconds": time.perf_counter() - started, "output": output}


def describe(run: dict[str, Any]) -> str:
    """How one student's run ended, in a few words (a progress line's end)."""
    if run["ok"] and run["feedback"]:
        return _("autograded, feedback written")
    if run["ok"]:
        return _("autograded; FEEDBACK FAILED")
    return _("AUTOGRADE FAILED")


def ended(run: dict[str, Any]) -> str:
    """A progress line's end: how one student's run ended, and in how long."""
    return _("{outcome} in {seconds:5.1f} s").format(outcome=describe(run),
                                                     seconds=run["seconds"])


def grade_all(root: Path, students: list[str], jobs: int) -> dict[str, dict[str, Any]]:
    """Autograde every student and write the feedback, ``jobs`` students at a time,
    printing a line per student as it ends. A student whose autograde or feedback failed
    (or whose worker died) is tried once more with the command line; nbgrader's log of a
    second failure is printed, and the demo goes on.

    Returns:
        dict student -> ``{"student", "ok", "feedback", "seconds", "output"}``.
    """
    done = {}
    total = len(students)
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=context,
                                                initializer=_worker_start,
                                                initargs=(root,)) as pool:
        futures = {pool.submit(_worker_grade, s): s for s in students}
        for future in concurrent.futures.as_completed(futures):
            student = futures[future]
            try:
                r = future.result()
            except Exception as exc:  # the worker died (BrokenProcessPool) or failed
                r = {"student": student, "ok": False, "feedback": False, "seconds": 0.0,
                     "output": f"{type(exc).__name__}: {exc}"}
            done[student] = r
            log(f"  [{len(done)}/{total}] {visible(student):<42} " + ended(r))
    for student in students:
        if not (done[student]["ok"] and done[student]["feedback"]):
            r = grade_with_command_line(root, student)
            done[student] = r
            log("  [" + _("again") + f"] {visible(student):<42} " + ended(r))
            if r["output"]:
                tail = r["output"].splitlines()[-15:]
                log("    " + _("nbgrader said:") + "\n"
                    + "\n".join("    | " + visible(line) for line in tail))
    return {s: done[s] for s in students}


def export_grades(root: Path, coursedir: Any) -> None:
    """``nbgrader export``: the course's exporter (``c.ExportApp.plugin_class``, the kit's
    quoted CSV) writes ``grades.csv`` from the gradebook."""
    from nbgrader.api import Gradebook

    from grader_tests.export import CourseCsvExport

    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        CourseCsvExport(to=str(root / "grades.csv"), config=nbgrader_config(root)).export(gb)


# ---------------------------------------------------------------------------------------
# Reading the results: nbgrader's scores joined to the graders' reports.


def graded_names() -> dict[str, str]:
    """``{grade id: graded name}`` of the hidden cells, in ``POINTS`` order."""
    from grader_tests.core import POINTS, grade_id

    return {grade_id(name): name for name in POINTS}


def reports_in_notebook(path: str | Path) -> dict[str, dict[str, Any]]:
    """The graders' reports in an autograded notebook, and how each grade cell ended.

    Returns:
        dict grade id -> ``{"report": dict or None, "error": str or None}``: ``report`` is
        the ``RESULT_MIME`` payload the hidden cell published, ``error`` the name of the
        error the cell ended with (``CellTimeoutError`` when nbgrader stopped it), or
        ``"stderr"`` if it wrote to stderr.
    """
    import nbformat
    from grader_tests.notebook import RESULT_MIME

    nb = nbformat.read(str(path), as_version=4)
    found = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade"):
            continue
        report, error = None, None
        for output in cell.get("outputs", []):
            if output.get("output_type") == "display_data" and RESULT_MIME in output.get("data", {}):
                report = output["data"][RESULT_MIME]
                if isinstance(report, str):
                    report = json.loads(report)
            elif output.get("output_type") == "error":
                error = output.get("ename") or "error"
            elif output.get("output_type") == "stream" and output.get("name") == "stderr":
                error = error or "stderr"
        found[meta["grade_id"]] = {"report": report, "error": error}
    return found


def faults_of(report: dict[str, Any]) -> list[str]:
    """Distinct fault ids of a report's failed checks, in order of first appearance."""
    seen = []
    for check in report.get("checks", []):
        fault = check.get("fault") or "other"
        if not check.get("passed") and fault not in seen:
            seen.append(fault)
    return seen


# The fault id of a grade cell below full marks that ended before the graders reported:
# the hidden cell's visible line raises NotImplementedError while the function is a stub;
# nbgrader stops a cell that outruns its time limit; anything else is a crash.
CELL_ERROR_FAULTS = {"NotImplementedError": "not-implemented", "CellTimeoutError": "timeout",
                     "TimeoutError": "timeout"}


def collect_results(root: Path, coursedir: Any, students: list[str], runs: dict[str, dict[str, Any]],
                    ) -> dict[str, dict[str, Any]]:
    """Per student: the total, and per grade cell nbgrader's score and the graders' faults.

    Returns:
        dict student -> ``{"ok", "score", "max_score", "late_penalty", "seconds_late",
        "cells": {name: {"grade_id", "score", "max_score", "faults"}}}``, ``name`` being
        the graded name of the hidden cell. ``score`` is nbgrader's raw score (points),
        ``late_penalty`` the points its late-submission plugin took off (0 when on time),
        ``seconds_late`` how late ``timestamp.txt`` says the submission was. ``faults``
        lists the fault ids of the checks the graders reported failed, or, for a cell
        below full marks that ended in an error before the graders reported, the fault id
        of that error (``CELL_ERROR_FAULTS``).
    """
    from nbgrader.api import Gradebook, MissingEntry

    names = graded_names()
    results = {}
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        for student in students:
            entry = {"ok": runs[student]["ok"], "score": None, "max_score": None,
                     "late_penalty": 0.0, "seconds_late": 0.0, "cells": {}}
            results[student] = entry
            if not entry["ok"]:
                continue
            try:
                submission = gb.find_submission(ASSIGNMENT, student)
                notebook = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, student)
            except MissingEntry:
                entry["ok"] = False
                continue
            entry["score"] = float(submission.score)
            entry["max_score"] = float(submission.max_score)
            entry["late_penalty"] = float(submission.late_submission_penalty or 0.0)
            entry["seconds_late"] = float(submission.total_seconds_late or 0.0)
            path = root / "autograded" / student / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
            outputs = reports_in_notebook(path)
            for grade in notebook.grades:
                out = outputs.get(grade.name, {"report": None, "error": "cell missing"})
                score, top = float(grade.score), float(grade.max_score)
                if out["report"] is not None:
                    faults = faults_of(out["report"])
                elif score < top:
                    faults = [CELL_ERROR_FAULTS.get(out["error"], "crash")]
                else:
                    faults = []
                entry["cells"][names.get(grade.name, grade.name)] = {
                    "grade_id": grade.name, "score": score, "max_score": top, "faults": faults}
    return results


def in_points_order(cells: Iterable[str]) -> list[str]:
    """Names of ``cells`` in ``POINTS`` order, then any other grade cell by name."""
    order = list(graded_names().values())
    return sorted(cells, key=lambda n: (order.index(n) if n in order else len(order), n))


def below_full_marks(cell: dict[str, Any]) -> bool:
    """Whether a grade cell's ``score`` is below its ``max_score`` (points)."""
    return cell["score"] < cell["max_score"] - 1e-9


def final_score(entry: dict[str, Any]) -> float:
    """The score after nbgrader's late penalty (as ``nbgrader export`` computes it)."""
    return max(0.0, entry["score"] - entry["late_penalty"])


def late_note(entry: dict[str, Any]) -> str | None:
    """``"late 3 h 0 min: 98.00 - 9.80 late penalty"`` for a late submission, else None; in
    the current language (``grader_tests.i18n.use_language``)."""
    if entry["seconds_late"] <= 0:
        return None
    minutes = int(entry["seconds_late"] // 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    late = (f"{days} d " if days else "") + f"{hours} h {minutes} min"
    return _("late {late}: {score:.2f} - {penalty:.2f} late penalty").format(
        late=late, score=entry["score"], penalty=entry["late_penalty"])


def print_table(results: dict[str, dict[str, Any]]) -> None:
    """The score table: student, score / max (after the late penalty, which is shown),
    and each name below full marks with the fault ids its checks reported; its words in the
    current language (``grader_tests.i18n.use_language``)."""
    head = _("student")
    width = max([len(head)] + [len(visible(s)) for s in results])  # (ids as printed)
    log("")
    score_head = _("score")
    log(f"{head:<{width}}  {score_head:>15}  " + _("below full marks: name points (fault ids)"))
    log(f"{'-' * width}  {'-' * 15}  {'-' * 48}")
    for student, entry in results.items():
        if not entry["ok"]:
            not_graded = _("not graded")
            log(f"{visible(student):<{width}}  {not_graded:>15}  " + _("autograde failed (see above)"))
            continue
        score = f"{final_score(entry):.2f} / {entry['max_score']:g}"
        lost = [] if late_note(entry) is None else [late_note(entry)]
        no_fault = _("no fault reported")
        lost += [f"{name} {cell['score']:.2f}/{cell['max_score']:g} "
                f"({', '.join(cell['faults']) or no_fault})"
                for name in in_points_order(entry["cells"])
                for cell in [entry["cells"][name]] if below_full_marks(cell)]
        log(f"{visible(student):<{width}}  {score:>15}  {lost[0] if lost else '-'}")
        for line in lost[1:]:
            log(f"{'':<{width}}  {'':>15}  {line}")


def class_summary(results: dict[str, dict[str, Any]]) -> dict[str, int]:
    """How many students hit each fault id (a student counts once per id), most first."""
    counts: dict[str, int] = {}
    for entry in results.values():
        hit = {f for cell in entry["cells"].values() if below_full_marks(cell)
               for f in cell["faults"]}
        for fault in hit:
            counts[fault] = counts.get(fault, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def print_summary(counts: dict[str, int], n_students: int) -> None:
    """Print the class summary: per fault id, how many of the ``n_students`` hit it (in the
    current language, ``grader_tests.i18n.use_language``)."""
    log("")
    log(ngettext("class summary: how many of the {count} student hit each fault id",
                 "class summary: how many of the {count} students hit each fault id",
                 n_students).format(count=n_students))
    if not counts:
        log("  " + _("(none)"))
    for fault, n in counts.items():
        log(f"  {fault:<28} {n}")


def open_training_gate(root: Path, coursedir: Any) -> list[str] | None:
    """Step 8: ``tools/unlock_training.py`` (``grader_tests.unlock``) with its default
    threshold (full marks):
    release `training` to the students whose `attention` grade allows it; print who is
    unlocked and who is not, and why.

    Returns:
        sorted list of the students unlocked (None when ``release/training/`` is absent).
    """
    from grader_tests import unlock as unlock_training

    release = Path(coursedir.format_path(coursedir.release_directory, ".", "training"))
    if not (release / "training.ipynb").is_file():
        log(_("training gate: skipped (no release/training/ in this course)"))
        return None
    log("")
    log(_("training gate: python tools/unlock_training.py (threshold: full marks)"))
    status = unlock_training.main(["--root", str(root), "--release", str(release)])
    if status != 0:
        log(_("training gate: tools/unlock_training.py ended with status {status}").format(
            status=status))
        return None
    # no ledger when nobody was unlocked: load_ledger reads that as an empty one
    ledger = unlock_training.load_ledger(root / "unlocked" / unlock_training.LEDGER)
    return sorted(ledger["students"])


def summary_json(students: list[str], counts: dict[str, int], results: dict[str, dict[str, Any]],
                 seconds: float) -> dict[str, Any]:
    """What ``class_summary.json`` holds."""
    return {
        "assignment": ASSIGNMENT,
        "students": len(students),
        "faults": counts,
        "results": {
            s: {"graded": e["ok"], "score": e["score"], "max_score": e["max_score"],
                "late_penalty": e["late_penalty"], "seconds_late": e["seconds_late"],
                "final_score": None if e["score"] is None else final_score(e),
                "functions": {n: {"score": c["score"], "max_score": c["max_score"],
                                  "faults": c["faults"]}
                              for n, c in e["cells"].items()}}
            for s, e in results.items()
        },
        "seconds": seconds,
    }


# ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """The demo's command line (``python -m tools.demo``); returns the exit status: 0 when
    it ran, 2 when ``--root`` is not a course folder (the reason on stderr)."""
    parser = argparse.ArgumentParser(prog="python -m tools.demo",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=EXAMPLE,
                        help="course directory (default: the example class, example/; "
                             "only there does the demo delete what an earlier run wrote)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="students graded at once, one kernel each (default: 2)")
    parser.add_argument("--started", type=float, default=None,
                        help="epoch seconds when `make demo` started (to print the time "
                             "since, install included)")
    args = parser.parse_args(argv)
    with use_language(folder_language(str(args.root.resolve()))):  # the course's language
        problem = not_a_course(args.root)
        if problem:  # (nbgrader would stop with a traceback of traitlets)
            print(_("demo: {problem}").format(problem=problem), file=sys.stderr)
            return 2
        return run(args)


def run(args: argparse.Namespace) -> int:
    """The demo (``main``'s steps), its progress lines in the language in use; returns the
    exit status. The whole run holds the course's grading lock (``course_lock``): another
    autograde or batch of the course waits for it, and this one for them; its own workers
    and retries share it."""
    from grader_tests.course_lock import course_lock

    with course_lock(args.root.resolve(), "python -m tools.demo"):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """``run`` once the course's grading lock is held."""
    root = args.root.resolve()
    started = time.perf_counter()
    invoked_from = Path.cwd()                 # where the printed paths are read from
    os.chdir(root)
    os.environ.update(child_env())  # inherited by the workers and their kernels

    log(_("demo: course directory {root}").format(root=root))
    coursedir = course_directory(root)
    example = is_example_course(coursedir)
    if example:
        clean(root)
    else:
        log(_("demo: {root} is not the example class ({course}): nothing is deleted, "
              "nbgrader regrades in place").format(root=root, course=EXAMPLE_COURSE_ID))
    # Generate the release in a child process while this one imports nbgrader.
    t = time.perf_counter()
    release = subprocess.Popen(
        [sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"],
        cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    import nbgrader.apps  # noqa: F401  (the workers fork with nbgrader already imported)

    out = release.communicate()[0]
    if release.returncode != 0:
        log(out[-4000:])
        raise SystemExit(_("demo: nbgrader generate_assignment failed (exit {status})").format(
            status=release.returncode))
    log(_("release: release/{assignment}/ generated in {seconds:.1f} s").format(
        assignment=ASSIGNMENT, seconds=time.perf_counter() - t))

    students = students_of(root)
    if not students:
        raise SystemExit(_("demo: no submissions under {folder} "
                           "(python -m tools.make_submissions writes the example class)").format(
                               folder=root / "submitted"))
    if example:
        from authoring.make_submissions import DUE_DATE

        record_due_date(coursedir, DUE_DATE)
        log(_("gradebook: due date {date}").format(date=DUE_DATE))
    register_students(coursedir, students)
    log(ngettext("gradebook: assignment '{assignment}' and {count} student",
                 "gradebook: assignment '{assignment}' and {count} students",
                 len(students)).format(assignment=ASSIGNMENT, count=len(students)))

    t = time.perf_counter()
    log(_("autograde and feedback: {count} submissions, {jobs} at a time").format(
        count=len(students), jobs=args.jobs))
    runs = grade_all(root, students, args.jobs)
    log(_("autograde and feedback: done in {seconds:.1f} s").format(
        seconds=time.perf_counter() - t))

    t = time.perf_counter()
    export_grades(root, coursedir)
    log(_("export: grades.csv written in {seconds:.1f} s").format(
        seconds=time.perf_counter() - t))

    results = collect_results(root, coursedir, students, runs)
    counts = class_summary(results)
    with use_language(folder_language(str(root))):  # the tables in the course's language
        print_table(results)
        print_summary(counts, len(students))
    unlocked = open_training_gate(root, coursedir)
    from grader_tests.dashboard import after_grading  # (the students' copy has no graders)
    after_grading(root, ASSIGNMENT, shown_from=invoked_from)  # step 8, timed below
    seconds = time.perf_counter() - started
    summary = summary_json(students, counts, results, round(seconds, 1))
    summary["training_unlocked"] = unlocked
    (root / "class_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    graded = sum(e["ok"] for e in results.values())
    log("")
    log(_("demo: {graded}/{count} submissions graded, wall time {seconds:.1f} s").format(
        graded=graded, count=len(students), seconds=seconds))
    if args.started is not None:
        log(_("make demo: {seconds:.0f} s in all, set-up included").format(
            seconds=time.time() - args.started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
