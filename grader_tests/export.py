"""``nbgrader export``'s ``grades.csv``, safe to open in a spreadsheet and to upload.

nbgrader's ``CsvExportPlugin`` joins the values with commas and writes them unquoted: a
student id (a folder name the student chose) holding commas adds columns, one holding a
newline adds a row, and one beginning with ``=`` is a formula in a spreadsheet.
:class:`CourseCsvExport` (set as ``c.ExportApp.plugin_class`` in ``nbgrader_config.py``,
and used by ``tools/demo.py``) writes the same columns and values with Python's ``csv``
module (every field that needs it quoted, so that ``csv.DictReader`` reads one row per
student and assignment) and neutralises every cell a student or a roster controls (the
student id, the names, the e-mail): a cell that begins with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return gets a leading apostrophe, which spreadsheets show as text
(OWASP, "CSV Injection").

An assignment the kit releases student by student (`training`, behind its gate: an
``Assignment`` with a ``gate_cell``) has a row only for the students it was released to,
those the unlock command recorded in its ledger (``unlocked/unlocked.json`` of the course
root, ``release_ledger.LEDGER``), and for anyone who submitted it: a student it was never released
to has nothing to be scored on, where nbgrader's plugin writes a row of 0.0 as for a
student who did not hand in. The log says how many rows were left out and why.
"""

from __future__ import annotations

import csv
import os
from typing import Any

from nbgrader.api import MissingEntry
from nbgrader.plugins import ExportPlugin

from . import assignments
from .release_ledger import released_to
from .student_ids import FORMULA_STARTS

__all__ = ["COLUMNS", "CourseCsvExport", "neutralise"]

# nbgrader's CsvExportPlugin's columns, in its order.
COLUMNS = ("assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
           "email", "raw_score", "late_submission_penalty", "score", "max_score")
# The cells a student (their id is a folder name) or a roster import wrote.
STUDENT_CELLS = ("student_id", "last_name", "first_name", "email")
_FORMULA = (*FORMULA_STARTS, "\t", "\r")


def neutralise(text: str) -> str:
    """``text`` as a spreadsheet shows it as text: a leading apostrophe when it begins
    with a character that starts a formula (``= + - @``, a tab, a carriage return),
    else unchanged."""
    return "'" + text if text.startswith(_FORMULA) else text


class CourseCsvExport(ExportPlugin):
    """nbgrader's CSV export (same file, columns and values), quoted and with the
    student-controlled cells neutralised, and no row for a gated assignment a student was
    never released to (see the module)."""

    def _course_root(self) -> str:
        """The course root: the exporting app's ``CourseDirectory.root``, else the current
        folder."""
        coursedir = getattr(self.parent, "coursedir", None)
        return str(getattr(coursedir, "root", None) or os.getcwd())

    def export(self, gradebook: Any) -> None:
        """Write ``self.to`` (default ``grades.csv``): one row per assignment and
        student of ``gradebook`` (``nbgrader.api.Gradebook``), as nbgrader's plugin
        (a student with no submission: empty timestamp, scores 0), restricted to
        ``self.assignment`` / ``self.student`` when set; a gated assignment
        (``assignments.Assignment.gate_cell``) has no row for a student with no
        submission it was never released to (``release_ledger.released_to``).

        Raises:
            OSError: the file cannot be written, or the unlock ledger read.
            ValueError: the unlock ledger is not JSON.
        """
        dest = self.to or "grades.csv"
        students = [str(s) for s in self.student]
        chosen = [str(a) for a in self.assignment]
        gated = {name for name, a in assignments.ASSIGNMENTS.items() if a.gate_cell}
        released = released_to(self._course_root()) if gated else set()
        left_out: dict[str, int] = {}
        self.log.info("Exporting grades to %s", dest)
        with open(dest, "w", encoding="utf-8", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS, quoting=csv.QUOTE_MINIMAL,
                                    lineterminator="\n")
            writer.writeheader()
            for assignment in gradebook.assignments:
                if chosen and assignment.name not in chosen:
                    continue
                for student in gradebook.students:
                    if students and student.id not in students:
                        continue
                    row = {"assignment": assignment.name, "duedate": assignment.duedate,
                           "student_id": student.id, "last_name": student.last_name,
                           "first_name": student.first_name, "email": student.email,
                           "max_score": assignment.max_score}
                    try:
                        submission = gradebook.find_submission(assignment.name, student.id)
                    except MissingEntry:
                        if assignment.name in gated and student.id not in released:
                            left_out[assignment.name] = left_out.get(assignment.name, 0) + 1
                            continue  # never released to them: nothing to score
                        row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0,
                                   score=0.0)
                    else:
                        penalty = submission.late_submission_penalty
                        row.update(timestamp=submission.timestamp, raw_score=submission.score,
                                   late_submission_penalty=penalty,
                                   score=max(0.0, submission.score - penalty))
                    cells = {key: "" if value is None else str(value)
                             for key, value in row.items()}
                    for key in STUDENT_CELLS:
                        cells[key] = neutralise(cells[key])
                    writer.writerow(cells)
        for name, count in left_out.items():
            self.log.info("%s: no row for %d student(s) it was never released to (not in "
                          "the unlock ledger unlocked/unlocked.json, no submission)", name, count)
