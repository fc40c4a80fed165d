#!/usr/bin/env python
"""Write the instructor notebook ``source/attention/attention.ipynb`` from its document.

The notebook is generated, never edited by hand:

* its cells, in order, with their nbgrader metadata (the teaching text, the setup cell, the
  visible tests, the lesson cells, the exercises and the cells of the hidden checks) are the
  jupytext percent document ``notebooks/attention.py``, which an author edits as text
  (``notebooks/README.md``);
* a solution cell that says ``# {{ solution: NAME }}`` holds the function ``NAME`` of
  ``solutions/attention.py``, copied whole (signature, docstring and the
  ``### BEGIN SOLUTION`` / ``### END SOLUTION`` region), so that module is the single source
  of the reference solutions; in another language than English its docstring is that
  language's, from ``notebooks/<language>/docstrings.py``;
* the points of the graded cells (``{{ points: NAME }}`` in a heading, ``{{ points_table }}``
  in the introduction) come from ``grader_tests.core.POINTS``; ``{{ allowed_modules }}``
  and the setup cell's ``# {{ validate_helpers }}`` (``notebooks/validate_helpers.py``) from
  ``c.AttentionKit.allowed_modules`` of ``nbgrader_config.py``.

The output is deterministic: cell ids are the grade ids, the JSON is written by ``nbformat``
(sorted keys, one-space indent) as nbformat 4.5 with the ``python3`` kernelspec, and no
cell carries outputs or execution counts.

Usage, from the repository root (``python -m tools.build_all`` runs this and everything
that depends on the notebook)::

    python -m authoring.build_notebooks          # (re)write source/attention/attention.ipynb
    python -m authoring.build_notebooks --check  # exit 1 if the committed notebook is stale
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402

from grader_tests.config import allowed_modules  # noqa: E402
from grader_tests.core import POINTS  # noqa: E402
from solutions import attention as reference  # noqa: E402
from authoring.notebook_cells import (BEGIN_SOLUTION, DOCUMENTS, END_SOLUTION,  # noqa: E402
                                      graded_names, notebook_from_document, student_install,
                                      validate_helpers, write_or_check)
from authoring.notebook_cells import render as _render  # noqa: E402
from authoring.notebook_language import (WORDS, checked_document, course_language,  # noqa: E402
                                         points_label, with_docstring)

DOCUMENT = DOCUMENTS / "attention.py"  # the English document; others: notebooks/<language>/
NOTEBOOK = ROOT / "source" / "attention" / "attention.ipynb"
# The two exercises, which the points table of the introduction names (WORDS, by language).
EXERCISE_LABELS = ("exercise_weight_ratio", "exercise_decoder_budget")


def function_source(name: str) -> str:
    """The whole source of ``solutions.attention.<name>``, solution markers included.

    Raises:
        ValueError: unless it is a plain top-level function with exactly one solution
            region.
    """
    source = inspect.getsource(getattr(reference, name))
    if not source.startswith(f"def {name}("):
        raise ValueError(f"solutions/attention.py: {name} is not a plain top-level function")
    if source.count(BEGIN_SOLUTION) != 1 or source.count(END_SOLUTION) != 1:
        raise ValueError(f"solutions/attention.py: {name} needs exactly one "
                         f"{BEGIN_SOLUTION} / {END_SOLUTION} region in its body")
    return source


def heading(number: int, name: str, language: str = "en") -> str:
    """The heading of the section of function ``name``: ``## 1. `softmax` (10 points)``
    (``10 punti`` in Italian)."""
    return f"## {number}. `{name}` ({points_label(POINTS[name], language)})"


def points_table(parts: Sequence[str], language: str = "en") -> str:
    """The introduction's table of points in ``language``: one row per graded part of
    ``parts`` (functions numbered in order, the exercises by their ``WORDS`` label), then
    the total."""
    words = WORDS[language]
    rows = []
    for number, name in enumerate(parts, start=1):
        label = words[name] if name in EXERCISE_LABELS else f"{number}. `{name}`"
        rows.append(f"| {label} | {POINTS[name]} |")
    total = sum(POINTS.values())
    return (f"| {words['part']} | {words['points']} |\n|---|---|\n" + "\n".join(rows)
            + f"\n| **{words['total']}** | **{total}** |")


def build_notebook(language: str | None = None) -> nbformat.NotebookNode:
    """The instructor notebook (nbformat 4.5) of ``notebooks/attention.py``, or of its
    translation ``notebooks/<language>/attention.py``.

    Args:
        language: ``"en"`` or ``"it"``; None: the course's (``c.AttentionKit.language``
            of ``nbgrader_config.py``).

    Raises:
        ValueError: for an unknown language, a translation whose cells are not the
            English document's (``authoring.notebook_language.check_same_structure``), if the
            document is malformed (``notebook_from_document``), its functions are not
            those of ``solutions.attention.SPEC_FUNCTIONS`` in that order, each as a text,
            a solution, a visible test and a hidden cell with the numbered heading, or a
            solution placeholder names another function.
        FileNotFoundError: for a language whose document is missing.
    """
    language = course_language(ROOT) if language is None else language
    document = checked_document("attention", language)
    parts = graded_names(document)
    functions = [name for name in parts if name not in EXERCISE_LABELS]
    if functions != list(reference.SPEC_FUNCTIONS):
        raise ValueError(f"{document.relative_to(ROOT)}: its functions {functions} are not "
                         f"those of solutions/attention.py's SPEC_FUNCTIONS, in that order")
    modules = allowed_modules(str(ROOT))
    nb = notebook_from_document(document, {
        "student_install": lambda _: student_install(),
        "points_table": lambda _: points_table(list(reference.SPEC_FUNCTIONS)
                                               + list(EXERCISE_LABELS), language),
        "allowed_modules": lambda _: ", ".join(f"`{m}`" for m in modules),
        "points": lambda name: points_label(POINTS[name], language),
        "validate_helpers": lambda _: validate_helpers(parts, modules, language),
        "solution": lambda name: with_docstring(function_source(name), language),
    }, POINTS, "grader_tests")
    ids = [cell.id for cell in nb.cells]
    for number, name in enumerate(functions, start=1):
        slugs = [f"{name}_text", f"{name}_solution", f"{name}_visible_test",
                 f"{name}_hidden_checks"]
        at = ids.index(slugs[0]) if slugs[0] in ids else -1
        if ids[at:at + 4] != slugs:
            raise ValueError(f"{document.relative_to(ROOT)}: {name} needs the cells {slugs}, "
                             "in that order")
        if not nb.cells[at].source.startswith(heading(number, name, language) + "\n"):
            raise ValueError(f"{document.relative_to(ROOT)}: {slugs[0]} starts with "
                             f"`## {number}. `{name}` ({{{{ points: {name} }}}})`")
        if not nb.cells[at + 1].source.startswith(f"def {name}("):
            raise ValueError(f"{document.relative_to(ROOT)}: {slugs[1]} holds "
                             f"`# {{{{ solution: {name} }}}}`")
    return nb


def render(language: str | None = None) -> bytes:
    """The notebook's exact bytes (UTF-8 JSON ending with a newline) in ``language`` (the
    course's when None)."""
    return _render(build_notebook(language))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module's docstring); returns the exit status."""
    return write_or_check(argv, __doc__.split("\n\n")[0], NOTEBOOK, ROOT, render(),
                          "python -m authoring.build_notebooks",
                          "notebooks/attention.py, solutions/attention.py and "
                          "grader_tests.core.POINTS")


if __name__ == "__main__":
    sys.exit(main())
