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
from .student_ids import student_id_problem


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


def record_submission_time(gradebook, config, assignment: str, student: str,
                           folder: str | None, course_id: str | None = None) -> None:
    """Record, as ``nbgrader autograde`` does for the file it grades, when ``student``
    submitted and the late penalty that follows, by the course's own policy.

    The time is the one in ``folder/timestamp.txt``, read by nbgrader's
    ``CourseDirectory.get_existing_timestamp`` (without one, the gradebook's time stays, as
    on nbgrader's path); the penalty is computed by nbgrader's ``AssignLatePenalties``
    with the course's configuration (its ``plugin_class``, the kit's ``LatePenaltyPerDay``
    and its ``fraction_per_day``), from the notebook's score in the gradebook, the
    assignment's due date and the student's extension: call it after the scores are
    written.

    Args:
        gradebook: the database URL or an open ``nbgrader.api.Gradebook``.
        config: the course's traitlets ``Config`` (``config.nbgrader_config``).
        assignment: str, the assignment's name (also its notebook's).
        student: str, the student id.
        folder: str or None, the submission folder (``submitted/<student>/<assignment>``).
        course_id: str or None, ``c.CourseDirectory.course_id`` of the course.

    Raises:
        nbgrader.api.MissingEntry: the student has no submission of ``assignment``.
    """
    import nbformat
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import AssignLatePenalties

    timestamp = None
    if folder is not None and os.path.isdir(folder):
        try:
            timestamp = CourseDirectory(config=config).get_existing_timestamp(folder)
        except Exception:  # noqa: BLE001 (unreadable: the gradebook's time stays)
            timestamp = None
    with session(gradebook, course_id) as gb:
        if timestamp is not None:
            gb.update_or_create_submission(assignment, student, timestamp=timestamp)
        gb.find_submission_notebook(assignment, assignment, student)  # MissingEntry
        db_url = gb.engine.url.render_as_string(hide_password=False)
        gb.db.commit()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        AssignLatePenalties(config=config).preprocess(
            nbformat.v4.new_notebook(), {"nbgrader": {
                "notebook": assignment, "assignment": assignment, "student": student,
                "db_url": db_url}})


def withdraw_grade(gradebook, assignment: str, student: str,
                   course_id: str | None = None, flag: bool = True) -> bool:
    """A newer file of ``student`` ended in a grading error: the scores in the gradebook
    belong to an older file, so they are withdrawn (``auto_score`` None: "not graded" to
    nbgrader and to ``tools/unlock_training.py``) and, with ``flag``, the notebook is
    flagged. Nothing happens if the student has no submission there.

    Args:
        gradebook: the database URL or an open ``nbgrader.api.Gradebook``.
        flag: flag the notebook for review (the batch's next grade of the student clears
            it; nbgrader's autograde does not, so its path passes False).

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
        if flag:
            notebook.flagged = True
        gb.db.commit()
    return True


def autograde_converter() -> type:
    """nbgrader's ``Autograde`` converter as the course runs it: one bad student id
    never stops the class, and a failed regrade leaves no earlier grade behind.

    * One grader at a time per course (``course_lock.course_lock``): a second
      ``nbgrader autograde`` or ``batch`` on the course waits, with one line naming the
      holder, so that neither removes what the other wrote.
    * Every submission whose student id the kit's rule refuses
      (``student_ids.student_id_problem``) is left out, with an error naming the folder;
      so is a `training` submission of a student the instructor has not released it to
      (``release_ledger.not_released``).
      nbgrader matches each ``submitted/<student>/<assignment>`` folder against a regular
    expression whose ``.*`` stops at a newline: a folder whose name holds one makes
    ``nbgrader autograde`` raise before it grades anyone, and every student sorted after
    it is never graded. nbgrader has no setting for the converter its ``autograde``
    command uses; ``nbgrader_config.py`` puts this class in its place
    (``nbgrader.apps.autogradeapp.Autograde``).

    Returns:
        The subclass of ``nbgrader.converters.Autograde``.
    """
    import re

    from nbgrader.converters import Autograde

    class CourseAutograde(Autograde):
        """nbgrader's ``Autograde``: one run at a time per course, refused ids
        skipped, a failed regrade withdrawn."""

        def start(self) -> None:
            from .course_lock import course_lock

            command = " ".join(["nbgrader autograde", *sys.argv[2:]]) \
                if "autograde" in sys.argv[1:2] else "nbgrader autograde"
            with course_lock(self.coursedir.root, command, self.log.warning):
                super().start()

        def init_notebooks(self) -> None:
            super().init_notebooks()
            pattern = re.compile(self._format_source(
                "(?P<assignment_id>.*)", "(?P<student_id>.*)", escape=True), re.DOTALL)
            for folder in sorted(self.assignments):
                found = pattern.fullmatch(folder)
                problem = student_id_problem(found["student_id"] if found else None)
                if problem is not None:
                    self.log.error("Not graded: %r: %s. The other students are graded; "
                                   "rename the folder to the student's id to grade it",
                                   folder, problem)
                    del self.assignments[folder]
                else:
                    from .release_ledger import ASSIGNMENT, not_released  # the instructor's decision

                    problem = None if found is None or found["assignment_id"] != ASSIGNMENT \
                        else not_released(self.coursedir.root, found["student_id"])
                    if problem is not None:
                        self.log.error("Not graded: %r: %s", folder, problem)
                        del self.assignments[folder]
            if not self.assignments:
                from nbgrader.converters.base import NbGraderException

                raise NbGraderException("No submission to grade: none has a valid student "
                                        "id (and, for training, was released to its student)")

        def init_destination(self, assignment_id: str, student_id: str) -> bool:
            started = super().init_destination(assignment_id, student_id)
            if started:
                self.__dict__.setdefault("_kit_started", []).append((assignment_id,
                                                                     student_id))
            return started

        def convert_notebooks(self) -> None:
            try:
                super().convert_notebooks()
            finally:
                for assignment_id, student_id in self.__dict__.get("_kit_started", []):
                    if not os.path.isdir(self._format_dest(assignment_id, student_id)):
                        self._withdraw(assignment_id, student_id)

        def _withdraw(self, assignment_id: str, student_id: str) -> None:
            """nbgrader removed the student's ``autograded/`` folder after a failure:
            withdraw the gradebook's scores, an earlier file's."""
            try:
                if withdraw_grade(self.coursedir.db_url, assignment_id, student_id,
                                  self.coursedir.course_id or None, flag=False):
                    self.log.error("Grade withdrawn: %r's %s did not autograde, so the "
                                   "gradebook's scores (an earlier file's) are removed: "
                                   "not graded until it autogrades", student_id,
                                   assignment_id)
            except Exception as exc:  # noqa: BLE001 (nbgrader reports the first error)
                self.log.error("Could not withdraw %r's earlier grade: %s", student_id, exc)

    return CourseAutograde


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
