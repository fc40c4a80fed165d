"""Grade a whole ``submitted/`` folder, isolated, in parallel, into nbgrader's gradebook.

    python -m grader_tests batch [SUBMITTED] [--assignment attention|training] [--workers N]
                                 [--scheduler tcp://HOST:PORT] [--task-time-limit S]
                                 [--db-url URL] [--log FILE] [--fresh]

Each student's submission is graded by ``sandbox.grade_isolated`` in a pool of ``N``
worker processes (default: the machine's cores), or, with ``--scheduler``, on the workers
of a Dask distributed cluster, which receive the submission's bytes, not its path
(``dask_batch.py``; Dask is imported only then). As each student finishes, the
coordinator (this process, the only one that touches the database) appends the result
to a JSON-lines log and writes the score of every hidden-check cell to nbgrader's
gradebook (``Grade.auto_score``), flagging the submitted notebook when tampering was seen.
``--assignment training`` grades the `training` notebooks (``submitted/<student>/training``)
the same way, with that assignment's graders.

The gradebook is ``--db-url`` if given, else ``c.CourseDirectory.db_url`` of the course's
``nbgrader_config.py`` (beside SUBMITTED) if it sets one, else ``gradebook.db`` beside
SUBMITTED. Any SQLAlchemy URL nbgrader accepts will do: ``postgresql://USER@HOST/DB``
(with ``psycopg2``) when several graders share one gradebook.

Killed and started again, the command reads its log: a student whose submission file has
the same SHA-256 as the logged one is not graded again (its logged result is written to
the gradebook if the database missed it), so nothing is graded twice and nothing graded is
lost. A bad submission (unreadable notebook, empty folder) gets a grade of 0 with its
reason and never stops the batch. On a Dask cluster, a task whose worker died or that ran
past its time limit is tried once more elsewhere, then recorded as a *grading error*: a
log line with ``error`` and no report, no grade in the gradebook, ``ERROR`` in the
summary, exit status 3; the same command run again grades those students again. At the
end a summary lists per student the score, flags and errors, and per fault id how many
students hit it; where nbgrader's in-kernel autograde (``autograded/``) scored a cell
differently, the summary says so.
"""

import argparse
import concurrent.futures
import datetime
import glob
import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import sys
import time
import warnings
from collections import Counter

from . import dashboard
from .config import course_config
from .core import StudentTimeout, grade_id, report_dict
from .notebook_choice import choose_notebook
from .sandbox import graded_points
from .submission import SubmissionError, code_of_notebook

NOTEBOOK = "attention"  # the default assignment; nbgrader's notebook id is its name
# Exit status of ``main`` when some students ended with a grading error (no grade).
EXIT_GRADING_ERRORS = 3


def find_submission(folder, assignment=NOTEBOOK):
    """The file to grade in ``folder`` (``submitted/<student>/<assignment>``).

    A notebook chosen by ``notebook_choice.choose_notebook`` (the one with the most answered
    solution cells; on a tie ``<assignment>.ipynb``), the rule nbgrader's autograde applies
    too; with no notebook, a ``.py`` file.

    Returns:
        ``(path or None, note or None)``: the note says what was chosen or why nothing was.
    """
    if not os.path.isdir(folder):
        return None, f"no folder {folder}"
    choice = choose_notebook(folder, assignment)
    if choice.path is not None:
        return choice.path, choice.note
    scripts = sorted(p for p in glob.glob(os.path.join(glob.escape(folder), "*.py"))
                     if os.path.isfile(p) and not os.path.islink(p))
    if scripts:
        return scripts[0], f"graded the Python file {os.path.basename(scripts[0])} " \
                           f"(expected {assignment}.ipynb)"
    links = sorted(os.path.basename(p) for p in glob.glob(os.path.join(glob.escape(folder), "*"))
                   if os.path.islink(p))
    if links:
        return None, (f"{', '.join(links)}: a symbolic link, not a file handed in; nothing "
                      f"to grade")
    return None, "the submission folder is empty: nothing to grade"


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def configured(root, key):
    """``c.CourseDirectory.<key>`` of ``root/nbgrader_config.py``, or None if not set there."""
    return course_config(root).get(key)


def alembic_on_path():
    """nbgrader's ``Gradebook`` runs the ``alembic`` command found on PATH (to create or
    upgrade the database); when Python runs from a virtual environment that was not
    activated, put that environment's ``bin`` first."""
    bin_dir = os.path.dirname(sys.executable)
    if shutil.which("alembic") is None and os.path.exists(os.path.join(bin_dir, "alembic")):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def _gradebook(db_url, course_id):
    """nbgrader's ``Gradebook`` of the course ``course_id`` (nbgrader's default course
    when None), as nbgrader's own commands open it."""
    from nbgrader.api import Gradebook

    alembic_on_path()
    return Gradebook(db_url, course_id) if course_id else Gradebook(db_url)


def die_with_parent():
    """Pool initializer: this grading process is killed when its parent goes, however it
    goes (``PR_SET_PDEATHSIG``; its jail follows through bubblewrap's own)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pool's own shutdown has to do
        return
    if os.getppid() == 1:  # the parent went before the request took effect
        os._exit(1)


def kill_pool(pool):
    """Kill the processes of a ``ProcessPoolExecutor`` now and shut it down."""
    for process in list(getattr(pool, "_processes", {}).values()):
        try:
            process.kill()
        except (OSError, ValueError, AttributeError):
            pass
    pool.shutdown(wait=False, cancel_futures=True)


class Interrupted(BaseException):
    """The batch was asked to stop (SIGTERM, SIGHUP; Ctrl-C is KeyboardInterrupt)."""


def _stop_on(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def log_name(assignment):
    """File name of the default log of ``assignment`` (one log per assignment, so that
    resuming one never skips a student of the other)."""
    return "batch_log.jsonl" if assignment == NOTEBOOK else f"batch_log_{assignment}.jsonl"


def _grade_job(student, path, assignment=NOTEBOOK, jailed=True):
    """Run in a fresh grading process: grade one file of ``assignment``; never raises.

    Whatever the submission does (time, memory, death, a ``BaseException``, garbage on the
    wire) ends as that student's grade or grading error; a machine without the jail is a
    grading error (no grade), since no student code may run there."""
    from .jail import JailUnavailable
    from .sandbox import grade_isolated

    started = time.perf_counter()
    grading_error = False
    try:
        results, cell_errors, flags = grade_isolated(path, assignment=assignment, jailed=jailed)
        report = report_dict(results)
        error = None
    except JailUnavailable as exc:
        report, cell_errors, flags, grading_error = None, [], [], True
        error = f"not graded: {exc}"
    except (Exception, SystemExit, StudentTimeout) as exc:  # the grader's own failure
        report, cell_errors, flags = None, [], []
        error = f"grading failed: {type(exc).__name__}: {exc}"
    record = {"student": student, "report": report, "cell_errors": cell_errors, "flags": flags,
              "error": error, "seconds": round(time.perf_counter() - started, 3)}
    if grading_error:
        record["grading_error"] = True
    return record


def zero_report(message, assignment=NOTEBOOK):
    """A report of 0 points everywhere, for a submission that could not be graded."""
    points_of = graded_points(assignment)
    functions = {name: {"score": 0.0, "max_score": float(points),
                        "checks": [{"name": "submission readable", "passed": False,
                                    "fault": "other", "message": message}]}
                 for name, points in points_of.items()}
    return {"score": 0.0, "max_score": float(sum(points_of.values())), "functions": functions}


class Log:
    """Append-only JSON-lines record of finished students; the last line per student wins."""

    def __init__(self, path):
        self.path = path
        self.records = {}
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:  # a line cut by a kill mid-write
                        continue
                    self.records[rec["student"]] = rec

    def append(self, record):
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records[record["student"]] = record


def write_gradebook(db_url, assignment, record, course_id=None):
    """Record one student's per-cell scores (and tampering flag) in nbgrader's gradebook.

    Args:
        course_id: str or None, ``c.CourseDirectory.course_id`` of the course.

    Raises:
        nbgrader.api.MissingEntry: if the assignment is not in the gradebook (run
            ``nbgrader generate_assignment`` first).
    """
    from nbgrader.api import MissingEntry

    report = record["report"]
    if report is None:
        raise ValueError(f"{record['student']}: a grading error has no grade to write")
    flagged = bool(record.get("flags"))
    with warnings.catch_warnings(), _gradebook(db_url, course_id) as gb:
        warnings.simplefilter("ignore")  # nbgrader's own SQLAlchemy warnings on add_submission
        gb.update_or_create_student(record["student"])
        try:
            gb.find_submission(assignment, record["student"])
        except MissingEntry:
            gb.add_submission(assignment, record["student"])
        for name, f in report["functions"].items():
            try:
                grade = gb.find_grade(grade_id(name), assignment, assignment, record["student"])
            except MissingEntry:
                continue
            grade.auto_score = float(f["score"])
            # as nbgrader's own autograde (SaveAutoGrades): review over a manual score; and
            # a flagged submission waits for the instructor (formgrader lists it, the
            # training gate stays closed)
            grade.needs_manual_grade = grade.manual_score is not None or flagged
        notebook = gb.find_submission_notebook(assignment, assignment, record["student"])
        notebook.flagged = flagged
        gb.db.commit()


def withdraw_grade(db_url, assignment, student, course_id=None):
    """A newer file of ``student`` ended in a grading error: the scores in the gradebook
    belong to an older file, so they are withdrawn (``auto_score`` None: "not graded" to
    nbgrader and to ``tools/unlock_training.py``) and the notebook is flagged. Nothing
    happens if the student has no submission there.

    Returns:
        True if a grade was withdrawn.
    """
    from nbgrader.api import MissingEntry

    with warnings.catch_warnings(), _gradebook(db_url, course_id) as gb:
        warnings.simplefilter("ignore")
        try:
            notebook = gb.find_submission_notebook(assignment, assignment, student)
        except MissingEntry:
            return False
        for name in graded_points(assignment):
            try:
                grade = gb.find_grade(grade_id(name), assignment, assignment, student)
            except MissingEntry:
                continue
            grade.auto_score = None
            grade.needs_manual_grade = True
        notebook.flagged = True
        gb.db.commit()
    return True


def gradebook_has(db_url, assignment, student, course_id=None):
    """True if every hidden-check cell of ``student`` has an automatic score."""
    from nbgrader.api import MissingEntry

    with _gradebook(db_url, course_id) as gb:
        try:
            for name in graded_points(assignment):
                if gb.find_grade(grade_id(name), assignment, assignment, student).auto_score is None:
                    return False
        except MissingEntry:
            return False
    return True


def in_kernel_scores(root, student, assignment):
    """Per-cell scores of the hidden cells in ``autograded/`` (or None), read as nbgrader
    reads them (``nbgrader.utils.determine_grade``: an error or stderr is 0, a numeric
    result is partial credit, no result is full marks)."""
    import nbformat
    from nbgrader.utils import determine_grade

    path = os.path.join(root, "autograded", student, assignment, f"{assignment}.ipynb")
    if not os.path.isfile(path):
        return None
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # an unreadable autograded notebook: nothing to compare
        return None
    scores = {}
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if not gid.endswith("_hidden_checks") or cell.cell_type != "code":
            continue
        try:
            score, _ = determine_grade(cell)
        except (ValueError, KeyError):
            continue
        scores[gid[: -len("_hidden_checks")]] = float(score or 0.0)
    return scores


def summarise(log, students, root, assignment, out=sys.stdout, absent=()):
    """Print the per-student table, the per-fault counts and any in-kernel disagreement.

    Args:
        absent: students with no folder for ``assignment`` (listed, nothing recorded).

    Returns:
        dict with ``students`` (rows) and ``faults`` (id -> number of students).
    """
    rows, faults = [], Counter()
    for student in students:
        rec = log.records.get(student)
        if student in absent:
            rows.append({"student": student, "score": None, "flags": [], "errors": [],
                         "not_submitted": True,
                         "note": f"not submitted (no {assignment} folder): nothing recorded"})
            continue
        if rec is None:
            rows.append({"student": student, "score": None, "flags": [], "errors": ["not graded"]})
            continue
        report = rec["report"]
        if report is None:  # a grading error: the executor failed, no grade was written
            rows.append({"student": student, "score": None, "flags": [],
                         "errors": [rec["error"]], "grading_error": True})
            continue
        hit = sorted({c["fault"] for f in report["functions"].values() for c in f["checks"]
                      if not c["passed"]})
        faults.update(hit)
        errors = ([rec["error"]] if rec.get("error") else []) + rec.get("cell_errors", [])
        if rec.get("note"):
            errors.append(rec["note"])
        disagree = []
        kernel = in_kernel_scores(root, student, assignment)
        if kernel:
            for name, f in report["functions"].items():
                if name in kernel and abs(kernel[name] - f["score"]) > 1e-6:
                    disagree.append(f"{name}: in-kernel {kernel[name]:g}, isolated {f['score']:g}")
        rows.append({"student": student, "score": report["score"], "max_score": report["max_score"],
                     "flags": rec.get("flags", []), "errors": errors, "faults": hit,
                     "disagreements": disagree})
    width = max([len(r["student"]) for r in rows] + [7])
    print(f"\n{'student':<{width}}  {'score':>12}  faults / flags / errors", file=out)
    for r in rows:
        score = "-" if r["score"] is None else f"{r['score']:.2f} / {r['max_score']:g}"
        if r.get("grading_error"):
            score = "ERROR"
        extras = r.get("faults", []) + [f"FLAG: {f}" for f in r["flags"]] + \
            [f"error: {e}" for e in r["errors"]] + ([r["note"]] if r.get("note") else []) + \
            [f"disagrees with nbgrader: {d}" for d in r.get("disagreements", [])]
        print(f"{r['student']:<{width}}  {score:>12}  {'; '.join(extras)}", file=out)
    print("\nstudents per fault id:", file=out)
    for fault, n in faults.most_common():
        print(f"  {fault:<28} {n}", file=out)
    failed = [r["student"] for r in rows if r.get("grading_error")]
    if failed:
        print(f"\n{len(failed)} student(s) with a grading error, no grade written (run the "
              f"same command again to grade them): {', '.join(failed)}", file=out)
    return {"students": rows, "faults": dict(faults), "grading_errors": failed}


def run(submitted, assignment=NOTEBOOK, workers=None, db_url=None, log_path=None, fresh=False,
        root=None, progress=True, scheduler=None, task_time_limit=None, allow_unjailed=False):
    """Grade every student folder of ``submitted``; see the module doc.

    Args:
        workers: int, processes of the local pool (default: the machine's cores); ignored
            with ``scheduler``.
        scheduler: str or None, the address of a Dask scheduler (``tcp://HOST:PORT``):
            grade on its workers instead of a local pool.
        task_time_limit: float or None, seconds one Dask task may grade (default
            ``dask_batch.TASK_TIME_LIMIT``).
        allow_unjailed: bool, grade without the jail where it cannot be made (also
            ``c.AttentionKit.allow_unjailed`` in the course's ``nbgrader_config.py``).

    Raises:
        BatchSetupError: no submissions folder, the assignment not in the gradebook, or no
            jail on this machine (and unjailed grading not allowed).

    Returns:
        the summary dict of ``summarise``.
    """
    root = root or os.path.dirname(os.path.abspath(submitted))
    course = course_config(root)  # read once: the gradebook's URL and the course id
    course_id = course.get("course_id")
    from .jail import JailUnavailable, sweep_stale_folders, use_jail

    sweep_stale_folders()  # the copies a killed earlier run could not remove

    try:  # on a Dask cluster the workers' machines need the jail; here the local one does
        jailed = True if scheduler else use_jail(
            allow_unjailed or bool(course_config(root, "AttentionKit").get("allow_unjailed")))
    except JailUnavailable as exc:
        raise BatchSetupError(str(exc)) from None
    db_url = db_url or course.get("db_url") or \
        "sqlite:///" + os.path.join(root, "gradebook.db")
    log_path = log_path or os.path.join(root, log_name(assignment))
    if fresh and os.path.exists(log_path):
        os.remove(log_path)
    if not os.path.isdir(submitted):
        raise BatchSetupError(f"{submitted}: no such folder (the folder of the students' "
                              f"submissions, submitted/<student>/{assignment}/)")
    require_assignment(db_url, assignment, course_id)
    log = Log(log_path)
    students = sorted(d for d in os.listdir(submitted)
                      if os.path.isdir(os.path.join(submitted, d)) and not d.startswith("."))
    # A student with no <assignment> folder has not submitted it: nothing is recorded (an
    # empty folder is a submission, graded 0 with its reason).
    absent = {s for s in students if not os.path.isdir(os.path.join(submitted, s, assignment))}
    jobs, notes = [], {}
    for student in [s for s in students if s not in absent]:
        folder = os.path.join(submitted, student, assignment)
        try:
            path, note = find_submission(folder, assignment)
            digest = None if path is None else sha256(path)
        except Exception as exc:  # last resort: one student's files never stop the batch
            path, note = None, (f"{student}: {os.path.relpath(folder, root)}: the submission "
                                f"could not be read ({type(exc).__name__}: {str(exc)[:300]})")
        if path is None:
            rec = {"student": student, "sha256": None, "report": zero_report(note, assignment),
                   "cell_errors": [], "flags": [], "error": note, "seconds": 0.0}
            previous = log.records.get(student)
            if previous is None or previous.get("sha256") is not None:
                log.append(rec)
            write_gradebook(db_url, assignment, log.records[student], course_id)
            continue
        previous = log.records.get(student)
        if previous is not None and previous.get("sha256") == digest \
                and previous.get("report") is not None:  # (a grading error is graded again)
            if not gradebook_has(db_url, assignment, student, course_id):
                # logged but not yet stored
                write_gradebook(db_url, assignment, previous, course_id)
            continue
        if path.endswith(".ipynb"):
            try:
                code_of_notebook(path)
            except Exception as exc:  # SubmissionError; anything else: last resort
                error = str(exc) if isinstance(exc, SubmissionError) else (
                    f"{student}: {os.path.relpath(path, root)}: not readable "
                    f"({type(exc).__name__}: {str(exc)[:300]})")
                rec = {"student": student, "sha256": digest,
                       "report": zero_report(error, assignment), "cell_errors": [], "flags": [], "error": error, "seconds": 0.0,
                       "path": os.path.relpath(path, root), "note": note}
                log.append(rec)
                write_gradebook(db_url, assignment, rec, course_id)
                continue
        notes[student] = (path, digest, note)
        jobs.append((student, path))

    workers = workers or os.cpu_count() or 1
    bar = None
    if progress and jobs:
        from rich.progress import Progress

        bar = Progress(transient=False)
        bar.start()
        where = f"on the Dask cluster {scheduler}" if scheduler else f"with {workers} worker(s)"
        task = bar.add_task(f"grading {len(jobs)} submission(s) {where}", total=len(jobs))

    def finish(student, rec):
        """Log one finished student and write the grade (none for a grading error)."""
        path, digest, note = notes[student]
        if rec["report"] is None and not rec.get("grading_error"):
            # the grader failed on this file: 0
            rec["report"] = zero_report(rec["error"], assignment)
        rec.update(sha256=rec.get("sha256") or digest,  # a Dask task's: of the bytes sent
                   path=os.path.relpath(path, root), note=note,
                   finished=datetime.datetime.now(datetime.timezone.utc).isoformat())
        earlier = log.records.get(student)
        log.append(rec)
        if not rec.get("grading_error"):
            write_gradebook(db_url, assignment, rec, course_id)
        elif earlier is not None and earlier.get("report") is not None \
                and earlier.get("sha256") != rec["sha256"]:
            withdraw_grade(db_url, assignment, student, course_id)
        if bar is not None:
            bar.advance(task)

    try:
        if scheduler:
            from .dask_batch import TASK_TIME_LIMIT, grade_on_cluster

            say = bar.console.print if bar is not None else (lambda text: None)
            grade_on_cluster(scheduler, jobs, finish, task_time_limit or TASK_TIME_LIMIT,
                             progress=say, assignment=assignment)
        else:
            # A fresh process per submission (forked from a server that imported the
            # graders once): nothing one student's grading did survives into the next.
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["grader_tests.sandbox", "grader_tests.checks"])
            pool = concurrent.futures.ProcessPoolExecutor(
                max_workers=workers, mp_context=context, max_tasks_per_child=1,
                initializer=die_with_parent)
            try:
                futures = {pool.submit(_grade_job, s, p, assignment, jailed): s
                           for s, p in jobs}
                for future in concurrent.futures.as_completed(futures):
                    student = futures[future]
                    try:
                        rec = future.result()
                    except Exception as exc:
                        # A pool process died (every later future of a broken pool fails
                        # too): a grading error, never a grade; the next run grades them.
                        rec = {"student": student, "report": None, "cell_errors": [],
                               "flags": [], "grading_error": True,
                               "error": f"grading process failed: {type(exc).__name__}: "
                                        f"{exc}", "seconds": 0.0}
                    finish(student, rec)
            except BaseException:
                # Interrupted (Ctrl-C, SIGTERM, SIGHUP): the grading processes go at once,
                # and their jails with them; what finished is in the log and the gradebook.
                kill_pool(pool)
                raise
            pool.shutdown(wait=True)
    finally:
        if bar is not None:
            bar.stop()
    if not jobs and progress:
        graded = len(students) - len(absent)
        print(f"nothing to grade: the {graded} submission(s) of {assignment} are in the log "
              f"{os.path.basename(log_path)} with the same files (--fresh grades them again)")
    summary = summarise(log, students, root, assignment, absent=absent)
    dashboard.after_grading(root, assignment, db_url, log_path)
    return summary


class BatchSetupError(Exception):
    """The batch cannot start: no submissions folder, or the assignment is not in the
    gradebook."""


def require_assignment(db_url, assignment, course_id=None):
    """Raise ``BatchSetupError`` unless ``assignment`` is recorded in the gradebook."""
    from nbgrader.api import MissingEntry

    with warnings.catch_warnings(), _gradebook(db_url, course_id) as gb:
        warnings.simplefilter("ignore")
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise BatchSetupError(
                f"assignment {assignment} is not in the gradebook {db_url}: run `nbgrader "
                f"generate_assignment {assignment} --force` in the course folder first") from None


# Exit status of ``main`` when the batch was interrupted (as a shell reports SIGINT).
EXIT_INTERRUPTED = 130


def interrupted(args, exc):
    """After an interruption: say what the log holds and how to go on; ``EXIT_INTERRUPTED``."""
    submitted = os.path.abspath(args.submitted)
    root = os.path.dirname(submitted)
    log_path = args.log or os.path.join(root, log_name(args.assignment))
    records = Log(log_path).records if os.path.exists(log_path) else {}
    graded = sorted(s for s, r in records.items() if r.get("report") is not None)
    what = "Ctrl-C" if isinstance(exc, KeyboardInterrupt) else str(exc)
    # On a Dask cluster, the workers confirm that they dropped the batch's tasks
    # (dask_batch.stop_tasks); the ones they had not yet dropped are named above.
    left = "no grading process is left running" if not getattr(exc, "tasks_still_held", None) \
        else "some Dask workers had not yet ended their grading tasks (see the warning)"
    print(f"\ninterrupted ({what}): {left}. The log "
          f"{log_path} holds {len(graded)} graded student(s)"
          + (f": {', '.join(graded)}" if graded else "")
          + ". Run the same command again to grade the others.", file=sys.stderr)
    return EXIT_INTERRUPTED


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m grader_tests batch",
                                     description="Grade every submission, isolated, into the "
                                                 "gradebook.")
    parser.add_argument("submitted", nargs="?", default="submitted")
    parser.add_argument("--assignment", default=NOTEBOOK, choices=("attention", "training"))
    parser.add_argument("--workers", type=int, default=None,
                        help="processes of the local pool (default: the machine's cores)")
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="grade on this Dask distributed scheduler's workers instead of "
                             "a local pool")
    parser.add_argument("--task-time-limit", type=float, default=None, metavar="SECONDS",
                        help="with --scheduler: seconds one submission may grade on a worker "
                             "before it is tried elsewhere (default 600)")
    parser.add_argument("--db-url", default=None,
                        help="the gradebook (default: c.CourseDirectory.db_url of the course's "
                             "nbgrader_config.py, else gradebook.db beside SUBMITTED)")
    parser.add_argument("--log", default=None,
                        help="JSON-lines log (default: batch_log.jsonl beside SUBMITTED for "
                             "attention, batch_log_training.jsonl for training)")
    parser.add_argument("--fresh", action="store_true", help="forget the log: grade everyone")
    parser.add_argument("--summary-json", default=None, help="also write the summary here")
    parser.add_argument("--unjailed", action="store_true",
                        help="where bubblewrap's jail cannot be made, grade in plain processes "
                             "(student code then runs as you: trusted code only)")
    args = parser.parse_args(argv)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_on)
    # Ctrl-C stops the batch even where it was started with SIGINT ignored (a background
    # job of a script).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        summary = run(args.submitted, args.assignment, args.workers, args.db_url, args.log,
                      args.fresh, scheduler=args.scheduler,
                      task_time_limit=args.task_time_limit, allow_unjailed=args.unjailed)
    except (KeyboardInterrupt, Interrupted) as exc:
        return interrupted(args, exc)
    except BatchSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, TimeoutError) as exc:
        if not args.scheduler:
            raise
        # Nothing is lost: every student finished so far is in the log and the gradebook.
        print(f"error: the Dask cluster at {args.scheduler}: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 2
    if args.summary_json:
        with open(args.summary_json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    return EXIT_GRADING_ERRORS if summary["grading_errors"] else 0
