"""Which notebook of a submission folder is graded, one rule for every grading path.

A student may hand in the assignment's notebook renamed (``attention (1).ipynb``, the
copy a browser download makes), or several notebooks (their work in
``attention_final.ipynb`` beside an untouched ``attention (1).ipynb``). The rule:

* the notebook with the most *answered* solution cells is graded (a solution cell is
  answered when it no longer raises ``NotImplementedError``, the release's stub);
* on a tie, the notebook with the assignment's own name (``attention.ipynb``) wins, then
  the first name in sort order;
* a notebook that cannot be read as JSON counts as having no answered cell.

``batch`` applies it through ``choose_notebook``; nbgrader's ``autograde`` through
``stage_chosen_notebook``, configured as its ``pre_convert_hook`` in
``nbgrader_config.py``. The note saying what was chosen, and which notebooks were not
graded, goes to the batch summary and, on nbgrader's path, into the graded notebook as a
first markdown cell, which the feedback shows.

nbgrader grades only ``submitted/<student>/<assignment>/<assignment>.ipynb``, so on its
path the chosen notebook is copied there, with the note (a copy the rule then leaves out
of its choice). A student's own ``<assignment>.ipynb`` that is not the chosen one is first
moved, unchanged, to ``<course>/.grading_chosen/<student>/<assignment>/``.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
from dataclasses import dataclass, field

STUB = "raise NotImplementedError"
# Where nbgrader's path puts the chosen notebook under the expected name, per course
# (``<course>/<STAGING>/<student>/<assignment>/``); the student's files are never changed.
STAGING = ".grading_chosen"
NOTE_MARK = "**[grading]**"
# A notebook larger than this (bytes) is not read to count its answers: it counts as none.
MAX_NOTEBOOK_BYTES = 256 * 2**20


@dataclass
class NotebookChoice:
    """The notebook to grade in one submission folder.

    Attributes:
        path: the notebook to grade, or None when the folder holds none.
        answered: how many of its solution cells are answered.
        others: ``(file name, answered cells)`` of every notebook not graded.
        note: one sentence for the student and the instructor, or None when the folder
            holds exactly the expected notebook.
    """

    path: str | None
    answered: int = 0
    others: list[tuple[str, int]] = field(default_factory=list)
    note: str | None = None


def answered_cells(path: str) -> int:
    """Number of answered solution cells of the notebook at ``path``.

    Args:
        path: a ``.ipynb`` file.

    Returns:
        The count of cells whose nbgrader metadata says ``solution`` and whose source does
        not raise ``NotImplementedError``; -1 when the file is not a readable notebook.
    """
    try:
        if os.path.getsize(path) > MAX_NOTEBOOK_BYTES:
            return -1
        with open(path, encoding="utf-8") as f:
            nb = json.load(f)
        count = 0
        for cell in nb.get("cells", []):
            meta = (cell.get("metadata") or {}).get("nbgrader") or {}
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else str(source)
            if meta.get("solution") and STUB not in source:
                count += 1
        return count
    except (OSError, ValueError, AttributeError, TypeError):
        return -1


def is_grading_copy(path: str) -> bool:
    """True if ``path`` is a notebook this module wrote (its first cell is the note)."""
    try:
        with open(path, encoding="utf-8") as f:
            cells = json.load(f).get("cells") or [{}]
        return bool((cells[0].get("metadata") or {}).get("grading_note"))
    except (OSError, ValueError, AttributeError, TypeError, IndexError):
        return False


def notebooks_in(folder: str) -> list[str]:
    """The student's ``.ipynb`` files directly in ``folder``, sorted by name: regular files
    only (a symbolic link could point at any file of the grading machine, the instructor's
    notebook included), checkpoints and the copies this module wrote left out."""
    return sorted(p for p in glob.glob(os.path.join(glob.escape(folder), "*.ipynb"))
                  if os.path.isfile(p) and not os.path.islink(p) and not is_grading_copy(p))


def choose_notebook(folder: str, assignment: str) -> NotebookChoice:
    """Apply the module's rule to the submission folder ``folder``.

    Args:
        folder: ``submitted/<student>/<assignment>``.
        assignment: the assignment's name; its notebook is ``<assignment>.ipynb``.

    Returns:
        A ``NotebookChoice``; ``path`` is None when the folder holds no notebook.
    """
    expected = f"{assignment}.ipynb"
    found = [(p, answered_cells(p)) for p in notebooks_in(folder)]
    if not found:
        return NotebookChoice(None)
    found.sort(key=lambda item: (-item[1], os.path.basename(item[0]) != expected,
                                 os.path.basename(item[0])))
    (path, answered), rest = found[0], found[1:]
    others = [(os.path.basename(p), max(n, 0)) for p, n in rest]
    name = os.path.basename(path)
    if name == expected and not others:
        return NotebookChoice(path, answered)
    said = []
    if name != expected:
        said.append(f"graded {name} as {expected}")
    else:
        said.append(f"graded {expected}")
    if others:
        said[0] += f" ({answered} answered solution cells, the most)"
        said.append("not graded: " + ", ".join(f"{n} ({k} answered)" for n, k in others))
    return NotebookChoice(path, answered, others, "; ".join(said) + ".")


def _with_note(path: str, note: str, out: str) -> None:
    """Write the notebook ``path`` to ``out`` with ``note`` as a first markdown cell."""
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    cell = {"cell_type": "markdown", "metadata": {"grading_note": True},
            "source": f"{NOTE_MARK} {note[0].upper()}{note[1:]}"}
    if (nb.get("nbformat"), nb.get("nbformat_minor", 0)) >= (4, 5):
        cell["id"] = "grading-note"
    nb["cells"] = [cell] + list(nb.get("cells", []))
    with open(out, "w", encoding="utf-8") as f:
        json.dump(nb, f, indent=1, ensure_ascii=False)
        f.write("\n")


def stage_chosen_notebook(assignment: str | None = None, student: str | None = None,
                          notebooks: list[str] | None = None, **_: object) -> None:
    """nbgrader's ``pre_convert_hook`` for autograde: apply the rule to the one submission
    folder being converted, in place in ``notebooks``.

    nbgrader passes the notebooks it found in ``submitted/<student>/<assignment>/`` (its
    ``assignment`` and ``student`` arguments are the command's patterns, so the folder is
    read from the paths). When the folder holds only ``<assignment>.ipynb`` nothing
    changes. Otherwise the chosen notebook is written, with the note as its first cell, to
    ``<assignment>.ipynb`` in that folder, after moving a student's own file of that name
    (not the chosen one) to ``<course>/.grading_chosen/<student>/<assignment>/``; and
    ``notebooks`` becomes that one path.

    Args:
        assignment, student: ignored (nbgrader's patterns).
        notebooks: nbgrader's list of notebook paths for one submission, changed in place.
    """
    if not notebooks:
        return
    folder = os.path.dirname(os.path.abspath(notebooks[0]))
    # a symbolic link is not a submission: it could point at any file of this machine
    notebooks[:] = [p for p in notebooks if not os.path.islink(p)]
    assignment_id = os.path.basename(folder)
    student_dir = os.path.dirname(folder)
    course = os.path.dirname(os.path.dirname(student_dir))
    choice = choose_notebook(folder, assignment_id)
    if choice.path is None or choice.note is None:
        return
    target = os.path.join(folder, f"{assignment_id}.ipynb")
    if os.path.exists(target) and not is_grading_copy(target) and \
            os.path.abspath(choice.path) != os.path.abspath(target):
        aside = os.path.join(course, STAGING, os.path.basename(student_dir), assignment_id)
        os.makedirs(aside, exist_ok=True)
        kept = os.path.join(aside, f"{assignment_id}.ipynb")
        number = 1
        while os.path.exists(kept):
            number += 1
            kept = os.path.join(aside, f"{assignment_id} ({number}).ipynb")
        shutil.move(target, kept)
        choice.note = (choice.note[:-1] + f"; the {assignment_id}.ipynb handed in is kept "
                       f"unchanged at {os.path.relpath(kept, course)}.")
    staged = target + ".partial"
    _with_note(choice.path, choice.note, staged)
    os.replace(staged, target)
    notebooks[:] = [target]
