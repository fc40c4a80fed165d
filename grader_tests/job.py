"""The job: grading one submission, the unit both executors (``local_pool``, ``dask_batch``)
run in a fresh grading process of their own.

``grade_job`` grades one file in the jail and returns its *record*, the JSON-ready dict
the batch logs (``batch_log``) and writes to the gradebook (``gradebook``); it never
raises. A grading process calls ``die_with_parent`` first, so it never outlives whoever
started it.
"""

import os
import signal
import time

from . import assignments
from .assignments import Assignment
from .guard import StudentTimeout
from .i18n import N_, _, current_language, use_language
from .report import CheckResult, FunctionResult, GradeReport


def die_with_parent() -> None:
    """Make this grading process be killed when its parent goes, however it goes
    (``PR_SET_PDEATHSIG``; its jail follows through bubblewrap's own). A pool
    initializer; a no-op where the kernel has no such request."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pool's own shutdown has to do
        return
    if os.getppid() == 1:  # the parent went before the request took effect
        os._exit(1)


def grade_job(student: str, path: str, assignment: "str | Assignment" = assignments.DEFAULT,
              jailed: bool = True, language: str | None = None,
              allowed_modules: "tuple[str, ...] | list[str] | None" = None) -> dict:
    """Grade one file of ``assignment`` in the jail; never raises.

    Whatever the submission does (time, memory, death, a ``BaseException``, garbage on the
    wire) ends as that student's grade or grading error; a machine without the jail is a
    grading error (no grade), since no student code may run there.

    Args:
        student: str, the student id (recorded only).
        path: str, the submission file (notebook or ``.py``).
        assignment: the ``Assignment`` or its name.
        jailed: bool, grade in the jail (False only where unjailed grading was allowed).
        language: the language of the report's messages (``i18n.LANGUAGES``), read by the
            batch from the course's configuration (default: this process's current one).
        allowed_modules: the third-party modules the submission may import, read by the
            batch from the course's configuration (``config.allowed_modules``; default:
            the course in this process's current folder).

    Returns:
        the record: ``{"student", "report" (``GradeReport.to_json`` or None), "cell_errors",
        "flags", "error" (str or None), "seconds"}``, plus ``"grading_error": True`` when
        the grader could not grade (no report then).
    """
    from .jail import JailUnavailable
    from .sandbox import grade_isolated

    name = assignments.get(assignment).name
    started = time.perf_counter()
    grading_error = False
    try:
        with use_language(language or current_language()):
            try:
                results, cell_errors, flags = grade_isolated(
                    path, assignment=name, jailed=jailed,
                    allowed_modules=None if allowed_modules is None else tuple(allowed_modules))
                report = GradeReport(name, results, cell_errors, flags).to_json()
                error = None
            except JailUnavailable as exc:
                report, cell_errors, flags, grading_error = None, [], [], True
                error = _("not graded: {reason}").format(reason=exc)
            except (Exception, SystemExit, StudentTimeout) as exc:  # the grader's own failure
                report, cell_errors, flags = None, [], []
                error = _("grading failed: {error}").format(
                    error=f"{type(exc).__name__}: {exc}")
    except (ValueError, OSError) as exc:  # no such language, or its catalogue missing
        report, cell_errors, flags, grading_error = None, [], [], True
        error = f"not graded: {type(exc).__name__}: {exc}"
    record = {"student": student, "report": report, "cell_errors": cell_errors, "flags": flags,
              "error": error, "seconds": round(time.perf_counter() - started, 3)}
    if grading_error:
        record["grading_error"] = True
    return record


def zero_report(message: str, assignment: "str | Assignment" = assignments.DEFAULT) -> dict:
    """The JSON form (``GradeReport.to_json``) of 0 points everywhere, for a submission
    that could not be graded; ``message`` says why, in each graded name's one check (whose
    title, an English msgid, is translated where the report is shown)."""
    owner = assignments.get(assignment)
    functions = {name: FunctionResult(name, 0.0, float(points), [CheckResult(
        N_("submission readable"), False, "other", message)])
        for name, points in owner.points.items()}
    return GradeReport(owner.name, functions).to_json()


def grading_error_record(student: str, error: str, **extra: object) -> dict:
    """The record of a student the executor could not grade: no report, no grade written,
    graded again by the next run.

    Args:
        student: str, the student id.
        error: str, why.
        **extra: more fields (``attempts``).
    """
    return {"student": student, "report": None, "cell_errors": [], "flags": [],
            "grading_error": True, "error": error, "seconds": 0.0, **extra}
