"""Write the example class: ``example/submitted/<student>/attention/attention.ipynb``.

The example class is a course of its own, ``example/`` (``example/nbgrader_config.py``),
apart from the instructor's course at the repository root: its students never mix with
real ones. Beside each notebook, ``timestamp.txt`` says when the student submitted (the
file ``nbgrader submit`` and ``nbgrader collect`` write, read by ``nbgrader autograde``):
every student handed in before the due date ``DUE_DATE`` except one, late by
``LATE[student]``, whom nbgrader's late penalty (``nbgrader_config.py``) costs points.

Every submission is the released notebook (``release/attention/attention.ipynb``) with its
solution cells filled in the way a student fills them: nbgrader's stub (``# YOUR CODE
HERE`` / ``raise NotImplementedError()``) is replaced by code, and nothing else changes.
The code of a function is the region between ``### BEGIN SOLUTION`` and ``### END
SOLUTION`` of the reference (``solutions/attention.py``), so a filled function is the
reference function without its marker lines; a trap student's region is the reference's
with one bug put in by an exact text edit (which fails loudly if the reference changes
under it). The exercise answers are the solution regions of the instructor notebook
(``source/attention/attention.ipynb``).

The students (fictitious), and the one function that carries each one's trap:

========================================  ==================================================
student_correct                           everything right
student_mask_after_softmax                ``scaled_dot_product_attention`` zeroes the masked
                                          weights after the softmax (trap 2, docs/contract.md §4)
student_softmax_query_axis                ``scaled_dot_product_attention`` calls
                                          ``softmax(scores, axis=-2)``: it normalises over
                                          the queries (trap 6); ``softmax`` itself is right
student_heads_merged_wrong                ``merge_heads`` reshapes to ``(B, T, h, d_h)``
                                          before transposing (trap 3)
student_layer_norm_backward_missing_term  ``layer_norm_backward`` drops the
                                          ``- xhat * mean(dxhat * xhat)`` term
student_all_stubs                         the released notebook, unchanged
student_softmax_infinite_loop             ``softmax`` loops forever (a counter that is never
                                          increased); the other functions are right and
                                          call ``softmax`` only where the contract does
student_deleted_hidden_cell               everything right, but the hidden cell
                                          ``softmax_hidden_checks`` deleted
========================================  ==================================================

The output is deterministic (same release, reference and source notebook, same bytes);
``tests/test_submissions.py`` proves the committed class is what this writes. The score
each student must get, and the late penalty, are in ``example/EXPECTED.json``.

Usage, from the repository root::

    python -m tools.make_submissions            # (re)write example/submitted/<student>/...
    python -m tools.make_submissions --check    # exit 1 if the committed class is stale
"""

import argparse
import copy
import datetime
import inspect
import re
import sys
from pathlib import Path
from typing import Any, Union

import nbformat

from authoring.notebook_language import STUB_RAISE, code_stubs
from grader_tests import regions
from grader_tests.core import grade_id
from grader_tests.regions import BEGIN, END, region_of, solution_cells  # noqa: F401  (re-exported)
from solutions import attention as reference

ROOT = Path(__file__).resolve().parent.parent
# A file or folder, as a string or a path.
PathLike = Union[str, Path]
# A bug: a whole replacement solution region, or ``(old, new)`` edits of the reference's.
Bug = Union[str, list[tuple[str, str]]]
ASSIGNMENT = "attention"
RELEASE = ROOT / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
SOURCE = ROOT / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
SUBMITTED = ROOT / "example" / "submitted"

# The example class's due date, as nbgrader takes it (``nbgrader db assignment add
# attention --duedate=...``); ``tools/demo.py`` records it in the example gradebook.
DUE_DATE = "2025-03-14 17:00:00 UTC"
# nbgrader's timestamp format (``c.Exchange.timestamp_format``, the one ``nbgrader
# submit`` writes into ``timestamp.txt``).
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"
# How long before the due date each student handed in, one minute apart, in the order of
# ``STUDENTS`` (the first one 2 days early) ...
EARLY_FIRST = datetime.timedelta(days=2)
# ... except the late one: submitted this long after the due date.
LATE = {"student_heads_merged_wrong": datetime.timedelta(hours=3)}

# The two lines of the stub nbgrader writes in place of a solution region, in any of the
# notebooks' languages (authoring.notebook_language.LanguageClearSolutions).
STUB = (code_stubs(), STUB_RAISE)
DEF = re.compile(r"^def (\w+)\(", re.MULTILINE)


# ---------------------------------------------------------------------------------------
# The bugs. Each is a list of (old, new) text edits of one function's solution region.

MASK_AFTER_SOFTMAX = [(
    "    if mask is not None:\n"
    "        scores = np.where(np.asarray(mask, dtype=bool), scores, -np.inf)\n"
    "    weights = softmax(scores, axis=-1)\n",
    "    weights = softmax(scores, axis=-1)\n"
    "    if mask is not None:\n"
    "        weights = weights * np.asarray(mask, dtype=bool)  # masked positions get weight 0\n",
)]

SOFTMAX_QUERY_AXIS = [(
    "    weights = softmax(scores, axis=-1)\n",
    "    weights = softmax(scores, axis=-2)\n",
)]

MERGE_RESHAPE_FIRST = [(
    "    return M.transpose(0, 2, 1, 3).reshape(B, T, h * d_h)",
    "    return M.reshape(B, T, h, d_h).transpose(0, 2, 1, 3).reshape(B, T, h * d_h)",
)]

LAYER_NORM_BACKWARD_MISSING_TERM = [(
    "        - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)\n",
    "",
)]

# The whole region of a softmax that never returns: the renormalising loop's counter is
# never increased.
SOFTMAX_INFINITE_LOOP = """\
    scores = np.asarray(scores, dtype=float)
    exps = np.exp(scores - np.max(scores, axis=axis, keepdims=True))
    weights = exps / np.sum(exps, axis=axis, keepdims=True)
    step = 0
    while step < 3:
        weights = weights / np.sum(weights, axis=axis, keepdims=True)
    return weights
"""

# student -> {"bugs": {function: edits or a whole region}, "stubs": bool, "delete": [grade ids]}
STUDENTS: dict[str, dict[str, Any]] = {
    "student_correct": {},
    "student_mask_after_softmax": {"bugs": {"scaled_dot_product_attention": MASK_AFTER_SOFTMAX}},
    "student_softmax_query_axis": {"bugs": {"scaled_dot_product_attention": SOFTMAX_QUERY_AXIS}},
    "student_heads_merged_wrong": {"bugs": {"merge_heads": MERGE_RESHAPE_FIRST}},
    "student_layer_norm_backward_missing_term": {
        "bugs": {"layer_norm_backward": LAYER_NORM_BACKWARD_MISSING_TERM}},
    "student_all_stubs": {"stubs": True},
    "student_softmax_infinite_loop": {"bugs": {"softmax": SOFTMAX_INFINITE_LOOP}},
    "student_deleted_hidden_cell": {"delete": [grade_id("softmax")]},
}

# The graded name that carries each trap student's bug (the only one that may lose points).
TRAP_FUNCTION = {
    "student_mask_after_softmax": "scaled_dot_product_attention",
    "student_softmax_query_axis": "scaled_dot_product_attention",
    "student_heads_merged_wrong": "merge_heads",
    "student_layer_norm_backward_missing_term": "layer_norm_backward",
    "student_softmax_infinite_loop": "softmax",
}


# ---------------------------------------------------------------------------------------
# Solution regions.


def reference_region(name: str) -> str:
    """The solution region of reference function ``name`` (indented as in its body)."""
    return regions.reference_region(reference, name)


def reference_function(name: str) -> str:
    """The source of reference function ``name`` with its two marker lines removed."""
    lines = inspect.getsource(getattr(reference, name)).splitlines()
    return "\n".join(line for line in lines if line.strip() not in (BEGIN, END)) + "\n"


def solution_lines(source_path: PathLike = SOURCE) -> set[str]:
    """Every line with a letter or digit in it of every solution region, stripped: the
    reference functions' and the instructor notebook's (the exercises'). None may show in
    what students receive."""
    return regions.solution_lines(reference, source_path)


def apply_bug(region: str, bug: Bug) -> str:
    """``region`` with ``bug`` applied: a whole replacement region (str) or a list of
    ``(old, new)`` edits, each of which must match exactly once."""
    if isinstance(bug, str):
        return bug
    for old, new in bug:
        if region.count(old) != 1:
            raise ValueError(f"bug edit does not match the reference exactly once: {old!r}")
        region = region.replace(old, new)
    return region


def fill(cell_source: str, region: str) -> str:
    """Replace nbgrader's two-line stub in ``cell_source`` by ``region``.

    Raises:
        ValueError: if the cell holds no stub, or the stub's indentation differs from the
            region's.
    """
    lines = cell_source.splitlines()
    for i in range(len(lines) - 1):
        if lines[i].strip() in STUB[0] and lines[i + 1].strip() == STUB[1]:
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            body = region.rstrip("\n").splitlines()
            first = next((line for line in body if line.strip()), "")
            if not first.startswith(indent) or first[len(indent):len(indent) + 1].isspace():
                raise ValueError("the stub and the solution region are indented differently")
            filled = lines[:i] + body + lines[i + 2:]
            return "\n".join(filled) + ("\n" if cell_source.endswith("\n") else "")
    raise ValueError("no nbgrader stub in this cell")


# ---------------------------------------------------------------------------------------
# The class.


def submission(release: nbformat.NotebookNode, source: nbformat.NotebookNode,
               spec: dict[str, Any]) -> nbformat.NotebookNode:
    """One student's notebook: a deep copy of ``release`` filled as ``spec`` says."""
    nb = copy.deepcopy(release)
    if not spec.get("stubs"):
        answers = solution_cells(source)
        bugs = spec.get("bugs", {})
        for gid, cell in solution_cells(nb).items():
            defined = DEF.findall(cell.source)
            if len(defined) == 1 and defined[0] in reference.SPEC_FUNCTIONS:
                name = defined[0]
                region = reference_region(name)
                if name in bugs:
                    region = apply_bug(region, bugs[name])
            else:  # an exercise: the instructor notebook's answer
                region = region_of(answers[gid].source)
            cell.source = fill(cell.source, region)
    delete = set(spec.get("delete", ()))
    if delete:
        kept = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in delete]
        if len(nb.cells) - len(kept) != len(delete):
            raise ValueError(f"cells to delete not found: {sorted(delete)}")
        nb.cells = kept
    return nb


def build(release_path: PathLike = RELEASE, source_path: PathLike = SOURCE) -> dict[str, str]:
    """Every student's notebook, as ``{student: notebook text}`` (what ``write`` writes)."""
    release = nbformat.read(str(release_path), as_version=4)
    source = nbformat.read(str(source_path), as_version=4)
    out = {}
    for student, spec in STUDENTS.items():
        nb = submission(release, source, spec)
        nbformat.validate(nb)
        out[student] = nbformat.writes(nb) + "\n"
    return out


def due_date() -> datetime.datetime:
    """``DUE_DATE`` as an aware UTC ``datetime``."""
    return datetime.datetime.strptime(DUE_DATE.removesuffix(" UTC"), "%Y-%m-%d %H:%M:%S") \
        .replace(tzinfo=datetime.timezone.utc)


def timestamps() -> dict[str, str]:
    """``{student: timestamp.txt text}``: when each student submitted, in nbgrader's format
    (``"2025-03-12 17:00:00.000000 UTC"``); the students of ``LATE`` after the due date,
    the others before it."""
    due, out = due_date(), {}
    for i, student in enumerate(STUDENTS):
        when = due + LATE[student] if student in LATE else \
            due - EARLY_FIRST + datetime.timedelta(minutes=i)
        out[student] = when.strftime(TIMESTAMP_FORMAT) + "\n"
    return out


def path_of(student: str, root: PathLike = SUBMITTED) -> Path:
    """Where ``student``'s notebook is under the submissions folder ``root``."""
    return Path(root) / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"


def timestamp_path_of(student: str, root: PathLike = SUBMITTED) -> Path:
    """Where ``student``'s ``timestamp.txt`` is under the submissions folder ``root``."""
    return Path(root) / student / ASSIGNMENT / "timestamp.txt"


def write(root: PathLike = SUBMITTED, release_path: PathLike = RELEASE,
          source_path: PathLike = SOURCE) -> list[Path]:
    """Write every student's notebook and ``timestamp.txt`` under ``root``; returns the
    paths written."""
    written = []
    stamps = timestamps()
    for student, text in build(release_path, source_path).items():
        path = path_of(student, root)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        timestamp_path_of(student, root).write_text(stamps[student], encoding="utf-8")
        written += [path, timestamp_path_of(student, root)]
    return written


def stale(root: PathLike = SUBMITTED, release_path: PathLike = RELEASE,
          source_path: PathLike = SOURCE) -> list[str]:
    """Students whose committed notebook or ``timestamp.txt`` differs from what ``write``
    would write."""
    stamps = timestamps()

    def differs(path, text):
        return not path.exists() or path.read_text(encoding="utf-8") != text

    return [s for s, text in build(release_path, source_path).items()
            if differs(path_of(s, root), text) or differs(timestamp_path_of(s, root), stamps[s])]


def main(argv: list[str] | None = None) -> int:
    """The command line: write the example class, or with ``--check`` exit 1 naming every
    stale student."""
    parser = argparse.ArgumentParser(prog="python -m tools.make_submissions",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a committed submission differs from what would be written")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale()
        for student in out_of_date:
            print(f"stale: {path_of(student).relative_to(ROOT)}")
        return 1 if out_of_date else 0
    for path in write():
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
