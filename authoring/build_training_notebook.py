#!/usr/bin/env python
"""Write the instructor notebook ``source/training/training.ipynb`` from its document.

The notebook is generated, never edited by hand:

* its cells, in order, with their nbgrader metadata (the teaching text, the given cells'
  own lines, the visible tests, the cells of the hidden checks and the cells that re-run
  the lesson's experiments) are the jupytext percent document ``notebooks/training.py``,
  which an author edits as text (``notebooks/README.md``). Every locked code cell after the
  gate starts with ``require_gate()`` (after its one-line docstring), whose state lives in
  the gate cell. The experiment cells check ``RUN_EXPERIMENTS``: they are skipped while
  nbgrader validates or autogrades (it sets ``NBGRADER_EXECUTION``), since they take
  minutes and carry no points;
* its first code cell, ``# {{ gate }}``, is **the gate** (``notebooks/gate.py``): it
  loads the student's own attention functions from their `attention` notebook
  (``../attention/attention.ipynb`` relative to the training folder, or
  ``$ATTENTION_NOTEBOOK``; on the instructor's side that path is
  ``source/attention/attention.ipynb``, the reference solution), runs that notebook's
  visible checks on them (its setup and visible-test cells, verified against the SHA-256
  fingerprints of the released ones, which this script reads from
  ``source/attention/attention.ipynb``: build that notebook first), and stops with the list
  of failing functions if any fails;
* a solution cell ``# {{ solution: NAME }}`` holds the function ``NAME`` of
  ``solutions/training.py``, which carries a ``### BEGIN SOLUTION`` / ``### END SOLUTION``
  region, copied whole (in another language than English with that language's docstring,
  from ``notebooks/<language>/docstrings.py``); a line ``# {{ given: NAMES }}`` the other (given) functions and
  classes of that module, copied whole, and ``# {{ constants: NAMES }}`` its module-level
  constants with their comments, so that module is the single source of the code;
* the points of the graded cells (``{{ points: NAME }}`` in a heading, ``{{ points_table }}``
  in the introduction) come from ``grader_tests.checks_training.POINTS_TRAINING``.

The output is deterministic: cell ids are the grade ids, the JSON is written by ``nbformat``
as nbformat 4.5 with the ``python3`` kernelspec, and no cell carries outputs.

Usage, from the repository root (``python -m tools.build_all`` builds the attention notebook
first, then this one, then what depends on them)::

    python -m authoring.build_training_notebook          # (re)write the notebook
    python -m authoring.build_training_notebook --check  # exit 1 if the committed one is stale
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402

from grader_tests.checks_training import POINTS_TRAINING  # noqa: E402
from grader_tests.config import allowed_modules  # noqa: E402
from solutions import attention as attention_reference  # noqa: E402
from solutions import training as reference  # noqa: E402
from authoring import notebook_cells  # noqa: E402
from authoring.notebook_cells import (BEGIN_SOLUTION, DOCUMENTS, END_SOLUTION,  # noqa: E402
                                      graded_names, name_list, notebook_from_document,
                                      student_install, translated_document,
                                      validate_helpers, write_or_check)
from authoring.notebook_language import (DEFAULT_LANGUAGE, WORDS,  # noqa: E402
                                         checked_document, course_language, points_label,
                                         translated_code, with_docstring)

DOCUMENT = DOCUMENTS / "training.py"  # the English document; others: notebooks/<language>/
NOTEBOOK = ROOT / "source" / "training" / "training.ipynb"
ATTENTION_NOTEBOOK = ROOT / "source" / "attention" / "attention.ipynb"
ATTENTION_FUNCTIONS = tuple(attention_reference.SPEC_FUNCTIONS)

GATE_LINE = "require_gate()"

# The graded functions, in the order the notebook teaches them.
GRADED = ("make_batch", "model_param_count", "masked_cross_entropy", "block_backward",
          "adam_step", "greedy_generate", "answer_accuracy")


# ---------------------------------------------------------------------------------------
# Code taken from solutions/training.py.


def source_of(name: str) -> str:
    """The whole source of ``solutions.training.<name>`` (function or class).

    Raises:
        ValueError: unless it is a plain top-level definition.
    """
    source = inspect.getsource(getattr(reference, name))
    if not source.startswith((f"def {name}(", f"class {name}", "@dataclass")):
        raise ValueError(f"solutions/training.py: {name} is not a plain top-level definition")
    return source.rstrip("\n")


def stub_source(name: str) -> str:
    """The whole source of the graded function ``solutions.training.<name>``.

    Raises:
        ValueError: unless it has exactly one solution region.
    """
    source = source_of(name)
    if source.count(BEGIN_SOLUTION) != 1 or source.count(END_SOLUTION) != 1:
        raise ValueError(f"solutions/training.py: {name} needs exactly one solution region")
    return source


# The given code in a language other than English: ``notebooks/<language>/given.py``, the
# definitions and constants of solutions/training.py that the notebook copies, with their
# comments and docstrings translated (checked against solutions/ by ``translated_code``).
GIVEN_DOCUMENT = "given.py"


def _given_translation(language: str) -> tuple[str, dict[str, str]]:
    """``notebooks/<language>/given.py``: its text and its top-level definitions' sources,
    by name.

    Raises:
        FileNotFoundError: if it is missing; ValueError: if it is not Python.
    """
    path, shown = DOCUMENTS / language / GIVEN_DOCUMENT, f"notebooks/{language}/{GIVEN_DOCUMENT}"
    if not path.is_file():
        raise FileNotFoundError(f"{shown}: no such document; a course in {language!r} needs "
                                "the translation of the given code of solutions/training.py "
                                "there")
    text = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ValueError(f"{shown}: not Python ({exc})") from exc
    lines = text.split("\n")
    definitions = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            definitions[node.name] = "\n".join(lines[start:node.end_lineno])
    return text, definitions


def given(*definitions: str, language: str = DEFAULT_LANGUAGE) -> str:
    """Sources of the given (non-graded) definitions of ``solutions.training`` named
    ``definitions``, two blank lines apart; in another language than English, those of
    ``notebooks/<language>/given.py``, the same code with its comments and docstrings
    translated.

    Raises:
        ValueError: for one that has a solution region, or whose translation is missing
            or is not the English one translated (``translated_code``, naming it);
            FileNotFoundError: if the language's ``given.py`` is missing.
    """
    parts = []
    translations = None if language == DEFAULT_LANGUAGE else _given_translation(language)[1]
    for name in definitions:
        source = source_of(name)
        if BEGIN_SOLUTION in source:
            raise ValueError(f"{name} has a solution region: it is a stub, not given code")
        if translations is not None:
            where = f"notebooks/{language}/{GIVEN_DOCUMENT}: {name}"
            if name not in translations:
                raise ValueError(f"{where}: missing (copy it from solutions/training.py and "
                                 "translate its comments and docstrings)")
            source = translated_code(source, translations[name], where)
        parts.append(source)
    return "\n\n\n".join(parts)


def _constants_of(text: str, wanted: Sequence[str]) -> dict[str, str]:
    """The module-level constants ``wanted`` of the module ``text``, each with the ``# ``
    comment lines right above it, by name (the first of its targets)."""
    tree = ast.parse(text)
    lines = text.split("\n")
    out = {}
    for node in tree.body:
        names = [t.id for t in node.targets if isinstance(t, ast.Name)] \
            if isinstance(node, ast.Assign) else []
        if any(n in wanted for n in names):
            start = node.lineno - 1
            while start > 0 and lines[start - 1].startswith("# ") and \
                    not lines[start - 1].startswith("# ---"):
                start -= 1
            out[next(n for n in names if n in wanted)] = "\n".join(lines[start:node.end_lineno])
    return out


def constants(wanted: Sequence[str], language: str = DEFAULT_LANGUAGE) -> str:
    """The module-level constants ``wanted`` of solutions/training.py with their comments,
    in the module's order; in another language than English, with the comments of
    ``notebooks/<language>/given.py``.

    Raises:
        ValueError: for a name that is not such a constant, or whose translation is
            missing or not the English one translated (``translated_code``);
            FileNotFoundError: if the language's ``given.py`` is missing.
    """
    found = _constants_of(inspect.getsource(reference), wanted)
    if set(wanted) - set(found):
        raise ValueError(f"solutions/training.py has no constant {sorted(set(wanted) - set(found))}")
    if language != DEFAULT_LANGUAGE:
        translated = _constants_of(_given_translation(language)[0], wanted)
        for name, source in found.items():
            where = f"notebooks/{language}/{GIVEN_DOCUMENT}: {name}"
            if name not in translated:
                raise ValueError(f"{where}: missing (copy it from solutions/training.py with "
                                 "its comments translated)")
            found[name] = translated_code(source, translated[name], where)
    return "\n".join(found.values())


def attention_fingerprints(language: str | None = None) -> dict[str, str]:
    """SHA-256 of the setup and visible-test cells of the attention notebook in ``language``,
    by grade id: the committed ``source/attention/attention.ipynb`` for the course's
    language (None), the attention notebook built in memory for another one (its cells'
    comments and docstrings are that language's).

    Raises:
        ValueError: if a cell is missing, or the attention document cannot be built.
    """
    if language is None or language == course_language(ROOT):
        notebook = json.loads(ATTENTION_NOTEBOOK.read_text(encoding="utf-8"))
    else:
        from authoring import build_notebooks

        notebook = json.loads(build_notebooks.render(language).decode("utf-8"))
    cells = {}
    for cell in notebook["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid and cell["cell_type"] == "code":
            source = cell["source"]
            cells[gid] = "".join(source) if isinstance(source, list) else source
    wanted = ["setup"] + [f"{name}_visible_test" for name in ATTENTION_FUNCTIONS]
    missing = [w for w in wanted if w not in cells]
    if missing:
        raise ValueError(f"{ATTENTION_NOTEBOOK.relative_to(ROOT)} has no cell {missing}")
    return {w: hashlib.sha256(cells[w].strip().replace("\r\n", "\n").encode("utf-8")).hexdigest()
            for w in wanted}


# The gate cell's document, ``notebooks/gate.py`` (its translations: ``notebooks/<language>/``).
GATE_DOCUMENT = "gate.py"


def gate_source(language: str | None = None) -> str:
    """The gate cell: ``notebooks/gate.py`` in ``language`` (the course's when None), with the
    function names, the fingerprints of the attention notebook in that language and the
    Validate helpers filled in.

    Raises:
        ValueError: if the attention notebook lacks a cell the gate fingerprints, the
            language's gate or helpers are not the English ones translated
            (``translated_document``), or the text holds an nbgrader marker;
            FileNotFoundError: if a translation is missing.
    """
    hashes = attention_fingerprints(language)
    body = "{\n" + "".join(f'    "{k}": "{v}",\n' for k, v in hashes.items()) + "}"
    names = "(\n" + "".join(f'    "{n}",\n' for n in ATTENTION_FUNCTIONS) + ")"
    language = course_language(ROOT) if language is None else language
    template = translated_document(GATE_DOCUMENT, language).strip("\n")
    helpers = validate_helpers(GRADED, allowed_modules(str(ROOT)), language).strip("\n")
    text = template.replace("__FUNCTIONS__", names).replace("__HASHES__", body).replace(
        "__VALIDATE_HELPERS__", helpers)
    if BEGIN_SOLUTION in text or "BEGIN HIDDEN" in text:
        raise ValueError("the gate cell must not contain nbgrader markers")
    return text




# ---------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------
# Assembly: the document, its placeholders filled.


def heading(number: int, name: str, language: str = "en") -> str:
    """The heading of the section of function ``name``: ``## 1. `make_batch` (15 points)``
    (``15 punti`` in Italian)."""
    return f"## {number}. `{name}` ({points_label(POINTS_TRAINING[name], language)})"


def points_table(language: str = "en") -> str:
    """The introduction's table of points in ``language``: one row per graded function,
    then the total."""
    words = WORDS[language]
    return "\n".join([f"| {words['part']} | {words['points']} |", "|---|---|"]
                     + [f"| `{name}` | {POINTS_TRAINING[name]} |" for name in GRADED]
                     + [f"| **{words['total']}** | **{sum(POINTS_TRAINING.values())}** |"])


def build_notebook(language: str | None = None) -> nbformat.NotebookNode:
    """The instructor notebook (nbformat 4.5) of ``notebooks/training.py``, or of its
    translation ``notebooks/<language>/training.py``.

    Args:
        language: ``"en"`` or ``"it"``; None: the course's (``c.AttentionKit.language``
            of ``nbgrader_config.py``).

    Raises:
        ValueError: for an unknown language, a translation whose cells are not the
            English document's (``authoring.notebook_language.check_same_structure``), if the
            document is malformed (``notebook_from_document``), its graded functions are
            not ``GRADED`` in that order, each as a text, a solution, a visible test and a
            hidden cell with the numbered heading, its first cell is not the gate, or a
            locked code cell after the gate does not start with ``require_gate()``.
        FileNotFoundError: for a language whose document is missing.
    """
    language = course_language(ROOT) if language is None else language
    document = checked_document("training", language)
    shown = document.relative_to(ROOT)
    if sorted(GRADED) != sorted(POINTS_TRAINING):
        raise ValueError("POINTS_TRAINING and the notebook's graded names differ")
    if graded_names(document) != list(GRADED):
        raise ValueError(f"{shown}: its graded functions {graded_names(document)} are not "
                         f"GRADED, {list(GRADED)}, in that order")
    nb = notebook_from_document(document, {
        "gate": lambda _: gate_source(language),
        "student_install": lambda _: student_install(),
        "points_table": lambda _: points_table(language),
        "points": lambda name: points_label(POINTS_TRAINING[name], language),
        "constants": lambda args: constants(name_list(args), language),
        "given": lambda args: given(*name_list(args), language=language),
        "solution": lambda name: with_docstring(stub_source(name), language),
    }, POINTS_TRAINING, "grader_tests.checks_training")
    cells = nb.cells
    if cells[0].id != "gate" or cells[0].cell_type != "code":
        raise ValueError(f"{shown}: the first cell is the gate, `# {{{{ gate }}}}`")
    for cell in cells[1:]:
        meta = cell.metadata["nbgrader"]
        if cell.cell_type == "code" and meta["locked"] and not meta["grade"]:
            lines = cell.source.split("\n")
            at = 1 if lines[0].startswith('"""') and lines[0].endswith('"""') else 0
            if len(lines) <= at or lines[at] != GATE_LINE:
                raise ValueError(f"{shown}: cell {cell.id} starts with {GATE_LINE} (after its "
                                 "one-line docstring, if any)")
    ids = [cell.id for cell in cells]
    for number, name in enumerate(GRADED, start=1):
        slugs = [f"{name}_text", f"{name}_solution", f"{name}_visible_test",
                 f"{name}_hidden_checks"]
        at = ids.index(slugs[0]) if slugs[0] in ids else -1
        if ids[at:at + 4] != slugs:
            raise ValueError(f"{shown}: {name} needs the cells {slugs}, in that order")
        if not cells[at].source.startswith(heading(number, name, language) + "\n"):
            raise ValueError(f"{shown}: {slugs[0]} starts with "
                             f"`## {number}. `{name}` ({{{{ points: {name} }}}})`")
        if not cells[at + 1].source.startswith(f"def {name}("):
            raise ValueError(f"{shown}: {slugs[1]} holds `# {{{{ solution: {name} }}}}`")
    return nb


def render(language: str | None = None) -> bytes:
    """The notebook's exact bytes (UTF-8 JSON ending with a newline) in ``language`` (the
    course's when None)."""
    return notebook_cells.render(build_notebook(language))


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module's docstring); returns the exit status."""
    return write_or_check(argv, __doc__.split("\n\n")[0], NOTEBOOK, ROOT, render(),
                          "python -m authoring.build_training_notebook",
                          "notebooks/training.py, solutions/training.py, the "
                          "attention notebook's visible tests or POINTS_TRAINING")


if __name__ == "__main__":
    sys.exit(main())
