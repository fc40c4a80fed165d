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
gradebook (``Grade.auto_score``), flagging the submitted notebook when tampering was seen,
then the submission time and late penalty of that file as ``nbgrader autograde`` records
them (``gradebook.record_submission_time``: nbgrader's ``AssignLatePenalties`` as the
course configures it; for a student whose file is not graded again too).
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
students hit it; where nbgrader's in-kernel autograde (``autograded/``) of the same file
(the same answers) scored a cell differently, the summary says so.
"""

import argparse
import contextlib
import datetime
import glob
import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path

from . import assignments, dashboard
from .assignments import Assignment
from .batch_log import Log, log_name
from .config import allowed_modules, course_config, nbgrader_config
from .course_lock import course_lock
from .i18n import ArgumentParser, _, course_language, folder_language, ngettext, use_language
from .gradebook import (BatchSetupError, alembic_on_path, gradebook_has,  # noqa: F401
                        open_gradebook, record_submission_time, require_assignment,
                        withdraw_grade, write_gradebook)
from .job import die_with_parent, grade_job, zero_report  # noqa: F401  (re-exported)
from .local_pool import grade_in_pool, kill_pool  # noqa: F401  (re-exported)
from .notebook_choice import choose_notebook, sha256
from .report import GradeReport, visible
from .student_ids import student_id_problem
from .submission import SubmissionError, code_of_notebook

NOTEBOOK = assignments.DEFAULT.name  # the default assignment; its notebook id is its name
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
        return None, _("no folder {folder}").format(folder=folder)
    choice = choose_notebook(folder, assignment)
    if choice.path is not None:
        return choice.path, choice.note
    scripts = sorted(p for p in glob.glob(os.path.join(glob.escape(folder), "*.py"))
                     if os.path.isfile(p) and not os.path.islink(p))
    if scripts:
        return scripts[0], _("graded the Python file {file} (expected {assignment}.ipynb)"
                             ).format(file=os.path.basename(scripts[0]), assignment=assignment)
    links = sorted(os.path.basename(p) for p in glob.glob(os.path.join(glob.escape(folder), "*"))
                   if os.path.islink(p))
    if links:
        return None, _("{files}: a symbolic link, not a file handed in; nothing to grade"
                       ).format(files=", ".join(links))
    return None, _("the submission folder is empty: nothing to grade")


def configured(root, key):
    """``c.CourseDirectory.<key>`` of ``root/nbgrader_config.py``, or None if not set there."""
    return course_config(root).get(key)


class Interrupted(BaseException):
    """The batch was asked to stop (SIGTERM, SIGHUP; Ctrl-C is KeyboardInterrupt)."""


def _stop_on(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def answers(nb) -> list[str]:
    """The non-blank lines of the solution cells of the notebook ``nb`` (an
    ``nbformat.NotebookNode``), in order: what the student answered, the same in the file
    handed in and in nbgrader's autograded copy of it."""
    return [line for cell in nb.cells
            if cell.get("cell_type") == "code"
            and cell.get("metadata", {}).get("nbgrader", {}).get("solution")
            for line in str(cell.get("source", "")).splitlines() if line.strip()]


def in_kernel_scores(root, student, assignment, graded=None):
    """Per-cell scores of the hidden cells in ``autograded/`` (or None), read as nbgrader
    reads them (``nbgrader.utils.determine_grade``: an error or stderr is 0, a numeric
    result is partial credit, no result is full marks).

    Args:
        graded: str or None, the path (absolute or relative to ``root``) of the file the
            batch graded: None is returned unless the autograded notebook holds the same
            answers (``answers``), so scores of another file are never compared.
    """
    import nbformat
    from nbgrader.utils import determine_grade

    path = os.path.join(root, "autograded", student, assignment, f"{assignment}.ipynb")
    if not os.path.isfile(path):
        return None
    try:
        nb = nbformat.read(path, as_version=4)
        if graded is not None and answers(nb) != answers(nbformat.read(
                os.path.join(root, graded), as_version=4)):
            return None  # nbgrader's copy is of another file (or cells it joined)
    except Exception:  # an unreadable notebook (or a .py graded): nothing to compare
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
                         "note": _("not submitted (no {assignment} folder): nothing recorded"
                                   ).format(assignment=assignment)})
            continue
        if rec is None:
            rows.append({"student": student, "score": None, "flags": [],
                         "errors": [_("not graded")]})
            continue
        if rec.get("unreadable"):  # a file that cannot be read: not graded, and why
            rows.append({"student": student, "score": None, "flags": [],
                         "errors": [_("not graded: {reason}").format(reason=rec["error"])]})
            continue
        if rec["report"] is None:  # a grading error: the executor failed, no grade written
            rows.append({"student": student, "score": None, "flags": [],
                         "errors": [rec["error"]], "grading_error": True})
            continue
        report = GradeReport.from_json(rec["report"])
        hit = sorted({fault for f in report.functions.values() for fault in f.faults})
        faults.update(hit)
        errors = ([rec["error"]] if rec.get("error") else []) + rec.get("cell_errors", [])
        if rec.get("note"):
            errors.append(rec["note"])
        disagree = []
        kernel = in_kernel_scores(root, student, assignment, rec.get("path") or "")
        if kernel:
            for name, f in report.functions.items():
                if name in kernel and abs(kernel[name] - f.score) > 1e-6:
                    disagree.append(_("{name}: in-kernel {kernel:g}, isolated {isolated:g}").format(
                        name=name, kernel=kernel[name], isolated=f.score))
        rows.append({"student": student, "score": report.score, "max_score": report.max_score,
                     "flags": rec.get("flags", []), "errors": errors, "faults": hit,
                     "disagreements": disagree})
    student_head = _("student")
    # (a student id, a file name in a note, an error: printed with their control
    # characters made visible, which could otherwise erase or rewrite a row)
    width = max([len(visible(r["student"])) for r in rows] + [7, len(student_head)])
    score_head, extras_head = _("score"), _("faults / flags / errors")
    print(f"\n{student_head:<{width}}  {score_head:>12}  {extras_head}", file=out)
    for r in rows:
        score = "-" if r["score"] is None else f"{r['score']:.2f} / {r['max_score']:g}"
        if r.get("grading_error"):
            score = _("ERROR")
        extras = r.get("faults", []) + [_("FLAG: {flag}").format(flag=f) for f in r["flags"]] + \
            [_("error: {error}").format(error=e) for e in r["errors"]] + \
            ([r["note"]] if r.get("note") else []) + \
            [_("disagrees with nbgrader: {difference}").format(difference=d)
             for d in r.get("disagreements", [])]
        print(f"{visible(r['student']):<{width}}  {score:>12}  {visible('; '.join(extras))}",
              file=out)
    print("\n" + _("students per fault id:"), file=out)
    for fault, n in faults.most_common():
        print(f"  {fault:<28} {n}", file=out)
    failed = [r["student"] for r in rows if r.get("grading_error")]
    if failed:
        print("\n" + ngettext(
            "{count} student with a grading error, no grade written (run the same command "
            "again to grade them): {students}",
            "{count} students with a grading error, no grade written (run the same command "
            "again to grade them): {students}", len(failed)).format(
                count=len(failed), students=visible(", ".join(failed))), file=out)
    return {"students": rows, "faults": dict(faults), "grading_errors": failed}


class Recorder:
    """What the batch does with each finished student: append the record to the log and
    write the grade to the gradebook (withdraw an older one for a grading error). The
    coordinator's only writer: the executors hand it records, never touch either.

    Args:
        log: the batch's ``Log``.
        gradebook: an open ``nbgrader.api.Gradebook`` (one session for the batch).
        assignment: the ``Assignment`` graded.
        root: str, the course folder (paths are logged relative to it).
        course_id: str or None, the course's id in the gradebook.
    """

    def __init__(self, log: Log, gradebook, assignment: Assignment, root: str,
                 course_id: str | None = None) -> None:
        self.log, self.gradebook, self.assignment = log, gradebook, assignment
        self.root, self.course_id = root, course_id
        self.pending: dict[str, tuple[str, str, str | None]] = {}  # student -> path, sha, note
        self.folders: dict[str, str] = {}  # student -> submission folder (its timestamp.txt)
        self._config = None  # the course's nbgrader configuration, read when first needed

    def write(self, record: dict) -> None:
        """Write ``record``'s grade to the gradebook, then the submission time and the late
        penalty of the student's file, as ``nbgrader autograde`` records them."""
        write_gradebook(self.gradebook, self.assignment.name, record, self.course_id)
        self.record_time(record["student"])

    def record_time(self, student: str) -> None:
        """The submission time and late penalty of ``student``'s file, by nbgrader's own
        policy as the course configures it (``gradebook.record_submission_time``)."""
        try:
            if self._config is None:
                self._config = nbgrader_config(self.root)
            record_submission_time(self.gradebook, self._config, self.assignment.name,
                                   student, self.folders.get(student), self.course_id)
        except Exception as exc:  # noqa: BLE001 (one student never stops the batch)
            self.gradebook.db.rollback()
            print(_("{student}: the late penalty could not be recorded ({error}); the "
                    "gradebook keeps its earlier one").format(
                        student=visible(student), error=f"{type(exc).__name__}: {exc}"),
                  file=sys.stderr)

    def expect(self, student: str, path: str, digest: str, note: str | None) -> None:
        """Remember the file sent to grading for ``student`` (its path, SHA-256, note)."""
        self.pending[student] = (path, digest, note)

    def finish(self, student: str, record: dict) -> None:
        """Log one finished student and write the grade (none for a grading error)."""
        path, digest, note = self.pending[student]
        if record["report"] is None and not record.get("grading_error"):
            # the grader failed on this file: 0
            record["report"] = zero_report(record["error"], self.assignment)
        record.update(sha256=record.get("sha256") or digest,  # a Dask task's: of the bytes
                      path=os.path.relpath(path, self.root), note=note,
                      finished=datetime.datetime.now(datetime.timezone.utc).isoformat())
        earlier = self.log.records.get(student)
        self.log.append(record)
        if not record.get("grading_error"):
            self.write(record)
        elif earlier is not None and earlier.get("report") is not None \
                and earlier.get("sha256") != record["sha256"]:
            withdraw_grade(self.gradebook, self.assignment.name, student, self.course_id)


def _queue(submitted: str, students: list[str], recorder: Recorder) -> list[tuple[str, str]]:
    """The ``(student, path)`` jobs left to grade; a submission with nothing to grade or
    an unreadable notebook is recorded at once (0 and its reason), a file already in the
    log with the same SHA-256 is not graded again (written to the gradebook if missing).
    """
    log, assignment, root = recorder.log, recorder.assignment, recorder.root
    name = assignment.name
    jobs = []
    for student in students:
        folder = os.path.join(submitted, student, name)
        recorder.folders[student] = folder
        try:
            path, note = find_submission(folder, name)
            digest = None if path is None else sha256(path)
        except Exception as exc:  # last resort: one student's files never stop the batch
            path, note = None, _("{student}: {folder}: the submission could not be read "
                                 "({error})").format(
                student=student, folder=os.path.relpath(folder, root),
                error=f"{type(exc).__name__}: {str(exc)[:300]}")
        if path is None:
            rec = {"student": student, "sha256": None, "report": zero_report(note, assignment),
                   "cell_errors": [], "flags": [], "error": note, "seconds": 0.0}
            previous = log.records.get(student)
            if previous is None or previous.get("sha256") is not None:
                log.append(rec)
            recorder.write(log.records[student])
            continue
        previous = log.records.get(student)
        if previous is not None and previous.get("sha256") == digest \
                and previous.get("unreadable"):
            continue  # the same unreadable file: its earlier grade already withdrawn
        if previous is not None and previous.get("sha256") == digest \
                and previous.get("report") is not None:  # (a grading error is graded again)
            if not gradebook_has(recorder.gradebook, name, student, recorder.course_id):
                recorder.write(previous)  # logged but not yet stored
            else:  # the same file: its time and penalty again (an extension, a new due date)
                recorder.record_time(student)
            continue
        if path.endswith(".ipynb"):
            try:
                code_of_notebook(path)
            except Exception as exc:  # SubmissionError; anything else: last resort
                error = str(exc) if isinstance(exc, SubmissionError) else _(
                    "{student}: {path}: not readable ({error})").format(
                        student=student, path=os.path.relpath(path, root),
                        error=f"{type(exc).__name__}: {str(exc)[:300]}")
                # a grading error, as nbgrader's autograde path: no grade for this file,
                # and an earlier file's grade withdrawn (one rule: withdraw_grade)
                # (not a grading error: the same file fails the same way, nothing to retry)
                withdraw_grade(recorder.gradebook, name, student, recorder.course_id,
                               flag=False)
                log.append({"student": student, "sha256": digest, "report": None,
                            "unreadable": True, "cell_errors": [], "flags": [],
                            "error": error, "seconds": 0.0,
                            "path": os.path.relpath(path, root), "note": note})
                continue
        recorder.expect(student, path, digest, note)  # type: ignore[arg-type]  # path: read
        jobs.append((student, path))
    return jobs


def run(submitted, assignment=NOTEBOOK, workers=None, db_url=None, log_path=None, fresh=False,
        root=None, progress=True, scheduler=None, task_time_limit=None, allow_unjailed=False):
    """Grade every student folder of ``submitted``; see the module doc.

    Args:
        submitted: str, the folder of the students' submissions.
        assignment: the ``Assignment`` or its name (default `attention`).
        workers: int, processes of the local pool (default: the machine's cores); ignored
            with ``scheduler``.
        db_url: str, the gradebook's URL (default: the course's, else ``gradebook.db``).
        log_path: str, the JSON-lines log (default ``log_name(assignment)`` in ``root``).
        fresh: bool, forget the log.
        root: str, the course folder (default: the parent of ``submitted``).
        progress: bool, show a progress bar.
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
    owner = assignments.get(assignment)
    assignment = owner.name
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
    try:  # the reports' language: the course's setting, read here and handed to each job
        language = course_language(root)
    except ValueError as exc:
        raise BatchSetupError(str(exc)) from None
    # the modules graded code may import: the course's list, read here once and handed to
    # each job (a pool process or a Dask worker reads no course configuration)
    allowed = allowed_modules(root)
    db_url = db_url or course.get("db_url") or \
        "sqlite:///" + os.path.join(root, "gradebook.db")
    log_path = log_path or os.path.join(root, log_name(owner))
    with use_language(language), \
            course_lock(root, f"python -m grader_tests batch --assignment {assignment}"):
        # (one grader at a time per course: a running autograde or batch is waited for,
        # and nothing of the course, the log included, is touched before)
        if fresh and os.path.exists(log_path):
            os.remove(log_path)
        return _run(submitted, owner, root, course_id, db_url, log_path, workers, jailed,
                    progress, scheduler, task_time_limit, language, allowed)


def _run(submitted: str, owner: Assignment, root: str, course_id: str | None, db_url: str,
         log_path: str, workers: int | None, jailed: bool, progress: bool,
         scheduler: str | None, task_time_limit: float | None, language: str,
         allowed: tuple[str, ...]) -> dict:
    """``run`` once the course is read, in its language (``i18n.use_language``)."""
    assignment = owner.name
    if not os.path.isdir(submitted):
        raise BatchSetupError(_("{submitted}: no such folder (the folder of the students' "
                                "submissions, submitted/<student>/{assignment}/)").format(
                                    submitted=submitted, assignment=assignment))
    students = sorted(d for d in os.listdir(submitted)
                      if os.path.isdir(os.path.join(submitted, d)) and not d.startswith("."))
    # A folder whose name the kit's rule for a student id refuses is reported and skipped;
    # the rest of the class is graded.
    for student in [s for s in students if student_id_problem(s) is not None]:
        print(_("not graded: {folder}: {why}").format(
            folder=visible(repr(os.path.join(submitted, student))),
            why=student_id_problem(student)), file=sys.stderr)
        students.remove(student)
    # A student with no <assignment> folder has not submitted it: nothing is recorded (an
    # empty folder is a submission, graded 0 with its reason).
    absent = {s for s in students if not os.path.isdir(os.path.join(submitted, s, assignment))}
    from .release_ledger import ASSIGNMENT as GATED, not_released

    if assignment == GATED:  # graded only for the students it was released to

        for student in [s for s in students if s not in absent and not_released(root, s)]:
            print(_("not graded: {folder}: {why}").format(
                folder=visible(repr(os.path.join(submitted, student, assignment))),
                why=visible(not_released(root, student))), file=sys.stderr)
            students.remove(student)
    with open_gradebook(db_url, course_id) as gb:  # one session for the whole batch
        require_assignment(gb, assignment, course_id)
        recorder = Recorder(Log(log_path), gb, owner, root, course_id)
        jobs = _queue(submitted, [s for s in students if s not in absent], recorder)
        _grade(jobs, recorder, workers or os.cpu_count() or 1, jailed, progress, scheduler,
               task_time_limit, language, allowed)
    if not jobs and progress:
        graded = len(students) - len(absent)
        print(ngettext(
            "nothing to grade: the {count} submission of {assignment} is in the log {log} "
            "with the same file (--fresh grades it again)",
            "nothing to grade: the {count} submissions of {assignment} are in the log {log} "
            "with the same files (--fresh grades them again)", graded).format(
                count=graded, assignment=assignment, log=os.path.basename(log_path)))
    summary = summarise(recorder.log, students, root, assignment, absent=absent)
    dashboard.after_grading(Path(root), assignment, db_url, Path(log_path))
    return summary


def _grade(jobs: list[tuple[str, str]], recorder: Recorder, workers: int, jailed: bool,
           progress: bool, scheduler: str | None, task_time_limit: float | None,
           language: str = "en", allowed: tuple[str, ...] | None = None) -> None:
    """Grade ``jobs`` on the local pool or the Dask cluster, handing each record to
    ``recorder`` as it arrives, with a progress bar."""
    if not jobs:
        return
    bar = task = None
    if progress:
        from rich.progress import Progress

        bar = Progress(transient=False)
        bar.start()
        where = _("on the Dask cluster {scheduler}").format(scheduler=scheduler) if scheduler \
            else ngettext("with {count} worker", "with {count} workers", workers).format(
                count=workers)
        task = bar.add_task(ngettext("grading {count} submission {where}",
                                     "grading {count} submissions {where}", len(jobs)).format(
                                         count=len(jobs), where=where), total=len(jobs))
    held: dict = {}
    name = recorder.assignment.name
    if scheduler:
        from .dask_batch import TASK_TIME_LIMIT, grade_on_cluster

        say = bar.console.print if bar is not None else (lambda text: None)
        records = grade_on_cluster(scheduler, jobs, task_time_limit or TASK_TIME_LIMIT,
                                   progress=say, assignment=name, held_on_stop=held,
                                   language=language, allowed_modules=allowed)
    else:
        records = grade_in_pool(jobs, workers, name, jailed, language, allowed)
    try:
        with contextlib.closing(records):  # stopped here, the executor stops its work
            for student, record in records:
                recorder.finish(student, record)
                if bar is not None:
                    bar.advance(task)  # type: ignore[arg-type]  # set with bar
    except BaseException as exc:
        if held and not getattr(exc, "tasks_still_held", None):
            exc.tasks_still_held = held  # type: ignore[attr-defined]  # the batch's last words
        raise
    finally:
        if bar is not None:
            bar.stop()


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
    with use_language(folder_language(root)):
        # On a Dask cluster, the workers confirm that they dropped the batch's tasks
        # (dask_batch.stop_tasks); the ones they had not yet dropped are named above.
        left = _("no grading process is left running") \
            if not getattr(exc, "tasks_still_held", None) else \
            _("some Dask workers had not yet ended their grading tasks (see the warning)")
        print("\n" + ngettext(
            "interrupted ({what}): {left}. The log {log} holds {count} graded student",
            "interrupted ({what}): {left}. The log {log} holds {count} graded students",
            len(graded)).format(what=what, left=left, log=log_path, count=len(graded))
            + (f": {visible(', '.join(graded))}" if graded else "")
            + ". " + _("Run the same command again to grade the others."), file=sys.stderr)
    return EXIT_INTERRUPTED


def parser() -> argparse.ArgumentParser:
    """The batch's command-line parser, its help in the current language
    (``i18n.use_language``)."""
    parser = ArgumentParser(prog="python -m grader_tests batch",
                            description=_("Grade every submission, isolated, into the "
                                          "gradebook."))
    parser.add_argument("submitted", nargs="?", default="submitted",
                        help=_("the folder of the submissions, submitted/<student>/"
                               "<assignment>/ (default: submitted)"))
    parser.add_argument("--assignment", default=NOTEBOOK, choices=list(assignments.ASSIGNMENTS),
                        help=_("the assignment to grade (default: attention)"))
    parser.add_argument("--workers", type=int, default=None,
                        help=_("processes of the local pool (default: the machine's cores)"))
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help=_("grade on this Dask distributed scheduler's workers instead of "
                               "a local pool"))
    parser.add_argument("--task-time-limit", type=float, default=None, metavar="SECONDS",
                        help=_("with --scheduler: seconds one submission may grade on a "
                               "worker before it is tried elsewhere (default 600)"))
    parser.add_argument("--db-url", default=None,
                        help=_("the gradebook (default: c.CourseDirectory.db_url of the "
                               "course's nbgrader_config.py, else gradebook.db beside "
                               "SUBMITTED)"))
    parser.add_argument("--log", default=None,
                        help=_("JSON-lines log (default: batch_log.jsonl beside SUBMITTED for "
                               "attention, batch_log_training.jsonl for training)"))
    parser.add_argument("--fresh", action="store_true",
                        help=_("forget the log: grade everyone"))
    parser.add_argument("--summary-json", default=None,
                        help=_("also write the summary here"))
    parser.add_argument("--unjailed", action="store_true",
                        help=_("where bubblewrap's jail cannot be made, grade in plain "
                               "processes (student code then runs as you: trusted code only)"))
    return parser


def _language_of(argv: list[str] | None) -> str:
    """The language of the course the batch's command line points at (the folder above
    SUBMITTED, else the current folder), for its help and its errors; ``"en"`` where it
    cannot be read."""
    positional = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    submitted = positional[0] if positional and os.path.isdir(positional[0]) else "submitted"
    return folder_language(os.path.dirname(os.path.abspath(submitted)))


def main(argv=None):
    language = _language_of(argv)
    with use_language(language):
        args = parser().parse_args(argv)
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
        with use_language(language):
            print(_("error: {error}").format(error=exc), file=sys.stderr)
        return 2
    except (OSError, TimeoutError) as exc:
        if not args.scheduler:
            raise
        # Nothing is lost: every student finished so far is in the log and the gradebook.
        with use_language(language):
            print(_("error: the Dask cluster at {scheduler}: {error}").format(
                scheduler=args.scheduler, error=f"{type(exc).__name__}: {exc}"), file=sys.stderr)
        return 2
    if args.summary_json:
        with open(args.summary_json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
    return EXIT_GRADING_ERRORS if summary["grading_errors"] else 0
