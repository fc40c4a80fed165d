"""Which notebook of a submission folder is graded, one rule for every grading path.

A student may hand in the assignment's notebook renamed (``attention (1).ipynb``, the
copy a browser download makes), or several notebooks (their work in
``attention_final.ipynb`` beside an untouched ``attention (1).ipynb``). The rule:

* the notebook with the most *answered* solution cells is graded (a solution cell is
  answered when it no longer raises ``NotImplementedError``, the release's stub);
* on a tie, the notebook with the assignment's own name (``attention.ipynb``) wins, then
  the first name in sort order;
* a notebook that cannot be read as JSON, or is not shaped as a notebook
  (``submission.read_cells``), counts as having no answered cell.

``batch`` applies it through ``choose_notebook``; nbgrader's ``autograde`` through
``stage_chosen_notebook``, configured as its ``pre_convert_hook`` in
``nbgrader_config.py``. The note saying what was chosen, and which notebooks were not
graded, goes to the batch summary and, on nbgrader's path, into the autograded notebook as
a first markdown cell (``autograde.NoteChosenNotebook``), which the feedback shows.

nbgrader grades only ``submitted/<student>/<assignment>/<assignment>.ipynb``. When the
chosen notebook has another name, the hook copies it there; a student's own file of that
name is first moved, unchanged, to ``<course>/.grading_chosen/<student>/<assignment>/``,
where the kit also keeps what identifies the one copy it wrote last (so that a copy is
never mistaken for the student's work) and the note. The copy is known by the file itself,
never by its bytes: its device and inode, its change time (which only the system sets), a
modification time the kit drew at random when it wrote it, its size and its digest. Any
notebook written into the folder later (a resubmission, whatever its bytes, even those of
an earlier copy) is another file, so it is the student's. Symbolic links in the submission folder are moved there too: nbgrader would copy
the files they point at into the grading folder.
"""

from __future__ import annotations

import glob
import hashlib
import html
import json
import os
import re
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field

from .i18n import DEFAULT_LANGUAGE, _, course_language, use_language
from .report import visible
from .submission import MAX_NOTEBOOK_BYTES, SubmissionError, read_cells  # noqa: F401

STUB = "raise NotImplementedError"
# Where nbgrader's path puts the chosen notebook under the expected name, per course
# (``<course>/<STAGING>/<student>/<assignment>/``); the student's files are never changed.
STAGING = ".grading_chosen"
COPIES = "copy.json"     # in the staging folder: what identifies the copy the kit wrote
NOTE = "note.md"         # in the staging folder: the note of the last choice
NOTE_MARK = "**[grading]**"


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
        not raise ``NotImplementedError``; -1 when the file is not a readable notebook of
        the expected shape (``submission.read_cells``: the file is hostile data, nothing in
        it raises here).
    """
    try:
        cells = read_cells(path)
    except SubmissionError:
        return -1
    return sum(1 for cell in cells
               if cell["metadata"]["nbgrader"].get("solution") and STUB not in cell["source"])


def staging_of(folder: str) -> str:
    """``<course>/.grading_chosen/<student>/<assignment>`` for the submission folder
    ``<course>/submitted/<student>/<assignment>``."""
    folder = os.path.abspath(folder)
    student_dir = os.path.dirname(folder)
    course = os.path.dirname(os.path.dirname(student_dir))
    return os.path.join(course, STAGING, os.path.basename(student_dir),
                        os.path.basename(folder))


def sha256(path: str) -> str:
    """The SHA-256 of the file at ``path`` (its bytes, read in blocks), as 64 hex digits.

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _identity(path: str) -> dict:
    """What identifies the file at ``path`` (not followed if a link): device, inode,
    change and modification times in ns, size, and the SHA-256 of its bytes."""
    info = os.lstat(path)
    return {"device": info.st_dev, "inode": info.st_ino, "ctime_ns": info.st_ctime_ns,
            "mtime_ns": info.st_mtime_ns, "size": info.st_size, "sha256": sha256(path)}


def _recorded_copy(folder: str) -> dict | None:
    """The identity of the copy the kit last wrote into ``folder`` (staging), or None."""
    try:
        with open(os.path.join(staging_of(folder), COPIES), encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _mark_as_copy(path: str) -> dict:
    """Give the copy just written at ``path`` a modification time drawn at random within
    the last second (no one outside the grading machine can know it) and return its
    identity."""
    now = time.time_ns()
    stamp = now - secrets.randbelow(10**9)
    os.utime(path, ns=(stamp, stamp), follow_symlinks=False)
    return _identity(path)


def is_grading_copy(path: str) -> bool:
    """True if ``path`` is the very file the kit wrote as its copy into its folder: named
    ``<assignment>.ipynb`` (the only name the kit writes), a regular file, and the same
    device, inode, change and modification times, size and digest as recorded in the
    folder's staging manifest, out of the student's reach. A file written later, whatever
    its bytes, has another change time: it is the student's."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.basename(path) != f"{os.path.basename(folder)}.ipynb":
        return False
    recorded = _recorded_copy(folder)
    if recorded is None:
        return False
    try:
        return not os.path.islink(path) and _identity(path) == recorded
    except OSError:
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
        said.append(_("graded {name} as {expected}").format(name=name, expected=expected))
    else:
        said.append(_("graded {expected}").format(expected=expected))
    if others:
        said[0] += _(" ({answered} answered solution cells, the most)").format(answered=answered)
        said.append(_("not graded: {notebooks}").format(notebooks=", ".join(
            _("{name} ({answered} answered)").format(name=n, answered=k) for n, k in others)))
    return NotebookChoice(path, answered, others, "; ".join(said) + ".")


# ASCII punctuation markdown may read as markup (CommonMark lets a backslash escape each);
# ``&``, ``<`` and ``>`` are HTML-escaped instead (a backslash would show their entity).
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+\-.!|~\"'=:/$^%@,;?])")


def inert_markdown(text: str) -> str:
    """``text`` as markdown that renders as exactly that text: control and separator
    characters written as escapes (``report.visible``: a newline in a file name starts no
    paragraph or heading), markdown punctuation backslash-escaped (no emphasis, link,
    image, heading, list or math), ``&``, ``<`` and ``>`` HTML-escaped (no tag).

    Args:
        text: a sentence naming a student's files.

    Returns:
        str, one line of markdown without ``<`` or ``>``.
    """
    text = _MARKDOWN_PUNCTUATION.sub(r"\\\1", visible(text))
    return html.escape(text, quote=False)


def note_cell(note: str, nbformat_minor: int = 5) -> dict:
    """The markdown cell that opens an autograded notebook with ``note`` (file names shown
    as text: the note is made inert markdown, ``inert_markdown``)."""
    cell = {"cell_type": "markdown", "metadata": {"grading_note": True},
            "source": f"{NOTE_MARK} {inert_markdown(note[0].upper() + note[1:])}"}
    if nbformat_minor >= 5:
        cell["id"] = "grading-note"
    return cell


def read_note(folder: str) -> str | None:
    """The note the hook left for the submission folder ``folder``, or None."""
    try:
        with open(os.path.join(staging_of(folder), NOTE), encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _unique(path: str) -> str:
    base, ext = os.path.splitext(path)
    number = 1
    while os.path.lexists(path):
        number += 1
        path = f"{base} ({number}){ext}"
    return path


def _links_aside(folder: str, staging: str) -> list[str]:
    """Move every symbolic link under ``folder`` (the links themselves) to
    ``staging/links``; their paths relative to ``folder``."""
    moved = []
    for here, dirs, files in os.walk(folder):
        for name in sorted(dirs + files):
            path = os.path.join(here, name)
            if os.path.islink(path):
                relative = os.path.relpath(path, folder)
                kept = _unique(os.path.join(staging, "links", relative))
                os.makedirs(os.path.dirname(kept), exist_ok=True)
                os.rename(path, kept)
                moved.append(relative)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(here, d))]
    return moved


def stage_chosen_notebook(assignment: str | None = None, student: str | None = None,
                          notebooks: list[str] | None = None, **ignored: object) -> None:
    """nbgrader's ``pre_convert_hook`` for autograde: apply the rule to the one submission
    folder being converted, in place in ``notebooks``.

    nbgrader passes the notebooks it found in ``submitted/<student>/<assignment>/`` (its
    ``assignment`` and ``student`` arguments are the command's patterns, so the folder is
    read from the paths). Symbolic links are moved to the staging folder. When the chosen
    notebook has another name than ``<assignment>.ipynb``, it is copied to that name
    (written to a new private file, then renamed over), after moving a student's own file
    of that name to the staging folder. The note is kept for ``NoteChosenNotebook``.
    ``notebooks`` becomes the one path to grade. If any step fails, ``notebooks`` keeps
    nbgrader's own list (less symbolic links) and the student's files are as they were.

    Args:
        assignment, student: ignored (nbgrader's patterns).
        notebooks: nbgrader's list of notebook paths for one submission, changed in place.
    """
    if not notebooks:
        return
    folder = os.path.dirname(os.path.abspath(notebooks[0]))
    course = os.path.dirname(os.path.dirname(os.path.dirname(staging_of(folder))))
    try:  # the note's language: the course's setting (the instructor's configuration)
        language = course_language(course)
    except Exception:  # an unreadable configuration: nbgrader itself reports it
        language = DEFAULT_LANGUAGE
    with use_language(language):
        _stage(notebooks, folder, course)


def _stage(notebooks: list[str], folder: str, course: str) -> None:
    staging = staging_of(folder)
    assignment_id = os.path.basename(folder)
    target = os.path.join(folder, f"{assignment_id}.ipynb")
    temporary = None
    try:
        links = _links_aside(folder, staging)
        notebooks[:] = [p for p in notebooks if os.path.isfile(p) and not os.path.islink(p)]
        choice = choose_notebook(folder, assignment_id)
        said = [choice.note] if choice.note else []
        if choice.path is not None and os.path.abspath(choice.path) != target:
            descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".grading-",
                                                     suffix=".tmp")
            with os.fdopen(descriptor, "wb") as out, open(choice.path, "rb") as f:
                shutil.copyfileobj(f, out)
            if os.path.lexists(target) and not is_grading_copy(target):
                os.makedirs(staging, exist_ok=True)
                kept = _unique(os.path.join(staging, f"{assignment_id}.ipynb"))
                shutil.move(target, kept)
                said.append(_("the {assignment}.ipynb handed in is kept unchanged at "
                              "{path}").format(assignment=assignment_id,
                                               path=os.path.relpath(kept, course)))
            os.replace(temporary, target)
            temporary = None
            identity = _mark_as_copy(target)
            os.makedirs(staging, exist_ok=True)
            with open(os.path.join(staging, COPIES), "w", encoding="utf-8") as f:
                json.dump(identity, f)
        if links:
            said.append(_("symbolic links are not graded and were set aside: {links}").format(
                links=", ".join(links)))
        note_path = os.path.join(staging, NOTE)
        if said:  # (nothing is written for a folder with nothing to say)
            os.makedirs(staging, exist_ok=True)
            with open(note_path, "w", encoding="utf-8") as f:
                f.write("; ".join(s.rstrip(".") for s in said) + ".")
        elif os.path.exists(note_path):
            os.remove(note_path)  # an earlier run's note, no longer true
        if choice.path is not None:
            notebooks[:] = [target]
    except Exception:
        if temporary is not None and os.path.exists(temporary):
            os.remove(temporary)
        notebooks[:] = [p for p in notebooks if not os.path.islink(p)]
        raise
