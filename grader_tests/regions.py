"""nbgrader's solution regions: the lines between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` in a reference function or a solution cell, which nbgrader replaces by
its stub in what students receive (``authoring/make_submissions.py`` fills them back in; the
release tests prove that none of their lines shows in a release or a feedback page)."""

from __future__ import annotations

import inspect
import os
from types import ModuleType

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def region_of(text: str) -> str:
    """The lines strictly between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` of
    ``text``, newline-terminated.

    Raises:
        ValueError: if ``text`` does not hold exactly one such region.
    """
    lines = text.splitlines()
    begins = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise ValueError("expected exactly one solution region")
    return "\n".join(lines[begins[0] + 1:ends[0]]) + "\n"


def reference_region(reference: ModuleType, name: str) -> str:
    """The solution region of function ``name`` of the module ``reference`` (indented as in
    its body).

    Raises:
        AttributeError: ``reference`` has no ``name``.
        ValueError: the function does not hold exactly one solution region.
    """
    return region_of(inspect.getsource(getattr(reference, name)))


def solution_cells(nb: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    """``{grade_id: cell}`` of the solution cells of a notebook, in the notebook's order."""
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")}


def solution_lines(reference: ModuleType, source_path: str | os.PathLike[str]) -> set[str]:
    """Every line with a letter or digit in it of every solution region, stripped: those of
    the functions ``reference.SPEC_FUNCTIONS`` names and those of the solution cells of the
    instructor notebook at ``source_path`` (the exercises'). None may show in what students
    receive.

    Raises:
        ValueError: a function or a solution cell does not hold exactly one region.
        OSError: ``source_path`` cannot be read.
    """
    regions = [reference_region(reference, name) for name in reference.SPEC_FUNCTIONS]
    source = nbformat.read(str(source_path), as_version=4)
    regions += [region_of(cell.source) for cell in solution_cells(source).values()]
    return {line.strip() for region in regions for line in region.splitlines()
            if any(ch.isalnum() for ch in line)}
