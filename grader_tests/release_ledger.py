"""The instructor's record of whom `training` was released to: the unlock command's
ledger, ``<course root>/unlocked/unlocked.json``, and the one rule that reads it.

The unlock command (``grader_tests.unlock``, ``tools/unlock_training.py``) writes the
ledger; every part of the kit that asks "was `training` released to this student?" reads it
here: nbgrader's autograde (``gradebook.autograde_converter``), the batch, and the export of
``grades.csv``. This module imports nothing of the kit but ``i18n``, so that the gradebook
can ask without importing the unlock command (which imports the gradebook).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .i18n import _

# The assignment the ledger gates, and the one whose grade opens it.
ASSIGNMENT = "training"
GATE_ASSIGNMENT = "attention"
# The ledger's file name, in the course's ``unlocked/`` folder.
LEDGER = "unlocked.json"


def ledger_path(root: str | Path) -> Path:
    """The ledger's path in the course whose root folder is ``root``."""
    return Path(root) / "unlocked" / LEDGER


def load_ledger(path: Path) -> dict[str, Any]:
    """The ledger ``{"assignment": ..., "students": {id: record}}`` (empty if absent).

    Raises:
        OSError: the file exists but cannot be read.
        ValueError: it is not JSON (``json.JSONDecodeError``).
    """
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        data.setdefault("students", {})
        return data
    return {"assignment": ASSIGNMENT, "students": {}}


def released_to(root: str | Path) -> set[str]:
    """The students the unlock command released `training` to in the course ``root``:
    the ids of its ledger, empty when there is none.

    Raises:
        OSError, ValueError: the ledger exists but cannot be read as JSON.
    """
    return {str(s) for s in load_ledger(ledger_path(root))["students"]}


def not_released(root: str | Path, student: str) -> str | None:
    """Why a `training` submission of ``student`` in the course ``root`` is not graded,
    or None when it is: a student the ledger does not hold was not released `training`
    (whatever the notebook's own gate printed).

    Returns:
        None, or the reason (str, in the current language), which starts with
        "not released to this student".
    """
    ledger = ledger_path(root)
    try:
        students = load_ledger(ledger)["students"]
    except (OSError, ValueError) as exc:
        students = {}
        why = str(exc)
    else:
        why = ""
    if isinstance(students, dict) and student in students:
        return None
    return _("not released to this student: {student} is not in {ledger}, the record of "
             "the students `tools/unlock_training.py` released {assignment} to{why}").format(
                 student=student, ledger=ledger, assignment=ASSIGNMENT,
                 why=f" ({why})" if why else "")
