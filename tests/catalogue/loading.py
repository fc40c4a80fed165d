"""Notebooks whose trouble is in how they load or run, not in a function: each is the
example class's correct notebook (``example/submitted/student_correct``) changed the way a
student's notebook goes wrong, with the message the kit must give for it and what it costs.

Fields of an entry: ``id``; ``change``, the change made to the notebook (a function of the
nbformat notebook, in place); ``cause``, phrases the message must contain (the real cause,
named: the cell, the line, the limit), looked for in the loading's notes (``cell_errors``)
on the grader's path and in the autograded notebook on nbgrader's; ``lost``, graded name ->
the fault id its checks report (every other name keeps full marks, on both paths, and no
note names a cell the student did not write); ``path``: ``"grade"`` when the message
shows on the grader's path (``python -m grader_tests grade``, the batch, and nbgrader's
hidden cells alike), ``"kernel"`` when it shows only in the kernel's run of nbgrader's
path (the feedback page).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import nbformat

from tests.helpers import EXAMPLE

CORRECT = EXAMPLE / "submitted" / "student_correct" / "attention" / "attention.ipynb"
PYTHON = ".".join(map(str, sys.version_info[:2]))


def correct() -> nbformat.NotebookNode:
    """The example class's correct notebook (a fresh copy)."""
    return nbformat.read(str(CORRECT), 4)


def _solution(nb, part):
    return next(c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == f"{part}_solution")


def _loop_that_catches_the_alarm(nb):
    # the functions are right; the cell then never finishes, and no time limit inside the
    # process stops it (every exception caught, the loop resumed)
    _solution(nb, "multi_head_attention").source += (
        "\n\nhistory = []\nwhile True:\n    try:\n        while True:\n"
        "            history.append(len(history) % 7)\n    except BaseException:\n"
        "        pass\n")


def _fstring_of_python_312(nb):
    cell = _solution(nb, "layer_norm_forward")
    head = "def layer_norm_forward(x, gamma, beta, eps=1e-5):\n"
    assert cell.source.startswith(head)
    cell.source = head + '    label = f"{"layer norm"}"  # valid from Python 3.12 on\n' + \
        cell.source[len(head):]


def _image_of_20_mb(nb):
    # a cell of the student's, after softmax's, showing a 20 MB PNG (27 MB as base64 in
    # the kernel's message, past the 16 MiB a message part may hold while grading and past
    # the kernel's whole 4 MiB budget, the largest output it is told it may send)
    at = nb.cells.index(_solution(nb, "softmax")) + 1
    nb.cells.insert(at, nbformat.v4.new_code_cell(
        "from IPython.display import Image, display\n"
        "png = b'\\x89PNG\\r\\n\\x1a\\n' + bytes(20 * 10**6)\n"
        "display(Image(data=png, format='png'))\n"
        "print('the image cell ran to its end')\n"))


def _metadata_lost(nb):
    # saved by a front end that keeps no cell metadata: no nbgrader ids, no tags
    for cell in nb.cells:
        cell.metadata = {}


@dataclass(frozen=True)
class Loading:
    """One notebook of the catalogue (see the module's doc)."""

    id: str
    change: Callable[[nbformat.NotebookNode], None]
    cause: tuple[str, ...]
    lost: dict[str, str] = field(default_factory=dict)
    path: str = "grade"

    def notebook(self) -> nbformat.NotebookNode:
        """The correct notebook with this entry's change."""
        nb = correct()
        self.change(nb)
        return nb

    def text(self) -> str:
        return nbformat.writes(self.notebook())


LOADING = [
    Loading("a top-level loop that never finishes, alarm caught", _loop_that_catches_the_alarm,
            cause=("cell multi_head_attention_solution (the part multi_head_attention)",
                   "still running after", "skipped", "the rest of the submission graded"),
            lost={"multi_head_attention": "not-implemented"}),
    Loading("an f-string of Python 3.12", _fstring_of_python_312,
            cause=("cell layer_norm_forward_solution (the part layer_norm_forward)",
                   "syntax error at line 2 of the cell", f"The grading runs Python {PYTHON}",
                   "3.12"),
            # (the backward is graded with the cache of the student's own forward)
            lost={"layer_norm_forward": "not-implemented",
                  "layer_norm_backward": "not-implemented"}),
    Loading("a 20 MB image shown", _image_of_20_mb, path="kernel",
            cause=("was refused", "at most 4 MiB", "the rest of the cell and of the notebook "
                   "ran")),
    Loading("cells without their nbgrader metadata", _metadata_lost, cause=()),
]

__all__ = ["LOADING", "Loading", "correct"]
