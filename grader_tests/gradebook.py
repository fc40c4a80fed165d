"""The gradebook adapter: what the batch writes to and reads from nbgrader's gradebook.

Every function takes either the gradebook's database URL (a session is opened for that
call, as nbgrader's own commands open it) or an open ``nbgrader.api.Gradebook`` (used as
is: ``batch.run`` opens one session for the whole batch). Only nbgrader's own API is
used; scores go to the hidden-check cells (``Grade.auto_score``), a flag to the submitted
notebook.
"""

import contextlib
import os
import shutil
import sys
import warnings

from .i18n import _
from collections.abc import Iterable, Iterator

from . import assignments
from .assignments import Assignment, grade_id


class BatchSetupError(Exception):
    """The batch cannot start: no submissions folder, the assignment not in the gradebook,
    or no jail on this machine (and unjailed grading not allowed)."""


def alembic_on_path() -> None:
    """nbgrader's ``Gradebook`` runs the ``alembic`` command found on PATH (to create or
    upgrade the database); when Python runs from a virtual environment that was not
    activated, put that environment's ``bin`` first."""
    bin_dir = os.path.dirname(sys.executable)
    if shutil.which("alembic") is None and os.path.exists(os.path.join(bin_dir, "alembic")):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def open_gradebook(db_url: str, course_id: str | None = None):
    """nbgrader's ``Gradebook`` of the course ``course_id`` (nbgrader's default course when
    None), as nbgrader's own commands open it; a context manager that closes it."""
    from nbgrader.api import Gradebook

    alembic_on_path()
    return Gradebook(db_url, course_id) if course_id else Gradebook(db_url)


@contextlib.contextmanager
def session(gradebook, course_id: str | None = None) -> Iterator:
    """An open ``Gradebook`` for ``gradebook``: the same object when it is one already
    (left open), else a new session of the URL ``gradebook`` (closed after), with
    nbgrader's own SQLAlchemy warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if isinstance(gradebook, str):
            with open_gradebook(gradebook, course_id) as gb:
                yield gb
        else:
            yield gradebook


def _names(assignment: "str | Assignment") -> Iterable[str]:
    return assignments.get(assignment).graded_names


def write_gradebook(gradebook, assignment: str, record: dict,
                    course_id: str | None = None) -> None:
    """Record one student's per-cell scores (and tampering flag) in nbgrader's gradebook.

    Args:
        gradebook: the database URL or an open ``nbgrader.api.Gradebook``.
        assignment: str, the assignment's name.
        record: a batch record with a ``report`` (``GradeReport.to_json``) and ``flags``.
        course_id: str or None, ``c.CourseDirectory.course_id`` of the course.

    Raises:
        ValueError: the record is a grading error (no report), or its student id is one
            the kit's rule refuses (``student_ids.student_id_problem``).
        nbgrader.api.MissingEntry: if the assignment is not in the gradebook (run
            ``nbgrader generate_assignment`` first).
    """
    from nbgrader.api import MissingEntry

    from .student_ids import student_id_problem

    problem = student_id_problem(record["student"])
    if problem is not None:
        raise ValueError(f"{record['student']!r}: {problem}: not written to the gradebook")
    report = record["report"]
    if report is None:
        raise ValueError(_("{student}: a grading error has no grade to write").format(
            student=record["student"]))
    flagged = bool(record.get("flags"))
    with session(gradebook, course_id) as gb:
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


def withdraw_grade(gradebook, assignment: str, student: str,
                   course_id: str | None = None) -> bool:
    """A newer file of ``student`` ended in a grading error: the scores in the gradebook
    belong to an older file, so they are withdrawn (``auto_score`` None: "not graded" to
    nbgrader and to ``tools/unlock_training.py``) and the notebook is flagged. Nothing
    happens if the student has no submission there.

    Args:
        gradebook: the database URL or an open ``nbgrader.api.Gradebook``.

    Returns:
        True if a grade was withdrawn.
    """
    from nbgrader.api import MissingEntry

    with session(gradebook, course_id) as gb:
        try:
            notebook = gb.find_submission_notebook(assignment, assignment, student)
        except MissingEntry:
            return False
        for name in _names(assignment):
            try:
                grade = gb.find_grade(grade_id(name), assignment, assignment, student)
            except MissingEntry:
                continue
            grade.auto_score = None
            grade.needs_manual_grade = True
        notebook.flagged = True
        gb.db.commit()
    return True


def gradebook_has(gradebook, assignment: str, student: str,
                  course_id: str | None = None) -> bool:
    """True if every hidden-check cell of ``student`` has an automatic score."""
    from nbgrader.api import MissingEntry

    with session(gradebook, course_id) as gb:
        try:
            for name in _names(assignment):
                if gb.find_grade(grade_id(name), assignment, assignment, student).auto_score is None:
                    return False
        except MissingEntry:
            return False
    return True


def require_assignment(gradebook, assignment: str, course_id: str | None = None) -> None:
    """Raise ``BatchSetupError`` unless ``assignment`` is recorded in the gradebook."""
    from nbgrader.api import MissingEntry

    with session(gradebook, course_id) as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            where = gradebook if isinstance(gradebook, str) else gb.engine.url
            raise BatchSetupError(_(
                "assignment {assignment} is not in the gradebook {where}: run `nbgrader "
                "generate_assignment {assignment} --force` in the course folder first").format(
                    assignment=assignment, where=where)) from None
