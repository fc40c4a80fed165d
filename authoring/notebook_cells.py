"""What the two notebook builders share: reading a notebook document, filling its
placeholders, checking its nbgrader cells, the exact bytes of a notebook, and the
``--check`` / write command line.

A notebook's text and given cells live in a jupytext "percent" document under
``notebooks/`` (``notebooks/README.md`` describes the format): each ``# %%`` header carries
the cell's nbgrader metadata (less the points of a graded cell, stamped by the builder),
and ``{{ key }}`` / ``{{ key: arguments }}`` marks text the builder computes. A line that
is only ``# {{ key: ... }}`` in a code cell is replaced whole, so the document stays valid
Python. ``authoring/build_notebooks.py`` (assignment `attention`) and
``authoring/build_training_notebook.py`` (assignment `training`) build their notebooks with
these helpers, so both follow the same conventions: every cell has nbgrader metadata
(schema 3) and an id equal to its grade id; only solution cells are unlocked; a solution
cell holds exactly one ``### BEGIN SOLUTION`` / ``### END SOLUTION`` region.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import jupytext
import nbformat

from authoring.student_requirements import python_of_requirements

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ROOT / "notebooks"
VALIDATE_HELPERS = DOCUMENTS / "validate_helpers.py"
# The catalogue of the messages of the notebooks' code (``tr()`` of the Validate helpers),
# shipped beside each notebook of a course in another language than English; the helpers
# open it by this name (``authoring.i18n.kernel_catalogue`` writes it).
KERNEL_CATALOGUE = "kit_messages.mo"

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN = "### BEGIN HIDDEN TESTS"
END_HIDDEN = "### END HIDDEN TESTS"
CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
HIDDEN_SUFFIX = "_hidden_checks"  # grader_tests.core.grade_id(name) == name + HIDDEN_SUFFIX

# ``{{ key }}`` or ``{{ key: arguments }}``; in code also a line that is only
# ``# {{ ... }}``, replaced whole. Filled text is not searched again.
PLACEHOLDER = re.compile(r"\{\{ (\w+)(?:: ([^{}\n]*?))? \}\}")
CODE_PLACEHOLDER = re.compile(r"^# \{\{ (\w+)(?:: ([^{}\n]*?))? \}\}$|" + PLACEHOLDER.pattern,
                              re.MULTILINE)

# What fills a placeholder: key -> function of its argument text ("" when it has none).
Fillers = Mapping[str, Callable[[str], str]]


def nbgrader_metadata(slug: str, *, grade: bool = False, solution: bool = False,
                      locked: bool = True, points: float | None = None) -> dict:
    """The ``nbgrader`` metadata (schema 3) of a cell whose grade id is ``slug``.

    Args:
        slug: the grade id (also the cell id).
        grade: whether the cell earns points (an autograder cell).
        solution: whether nbgrader replaces its solution region by a stub.
        locked: whether the student may not edit it (only solution cells are unlocked).
        points: the points of a graded cell; None otherwise.

    Returns:
        dict with the keys grade, grade_id, locked, schema_version, solution and, when
        given, points.
    """
    meta = {"grade": grade, "grade_id": slug, "locked": locked, "schema_version": 3,
            "solution": solution}
    if points is not None:
        meta["points"] = points
    return meta


def clean(text: str) -> str:
    """``text`` without leading and trailing blank lines.

    Raises:
        ValueError: if it holds a tab.
    """
    text = text.strip("\n")
    if "\t" in text:
        raise ValueError("tabs in cell source")
    return text


def translated_document(name: str, language: str) -> str:
    """The text of ``notebooks/<name>`` in ``language``, less its ``##`` lines (notes for
    the kit's maintainers): the English document for English, else
    ``notebooks/<language>/<name>``, checked to be the English one with only its comments
    and docstrings translated (``authoring.notebook_language.translated_code``).

    Raises:
        FileNotFoundError: if the language's document is missing; ValueError: if it is not
            the English one translated (the message names it).
    """
    from authoring.notebook_language import DEFAULT_LANGUAGE, check_language, translated_code

    def read(path: Path) -> str:
        lines = path.read_text(encoding="utf-8").split("\n")
        return "\n".join(line for line in lines if not line.startswith("##"))

    english = read(DOCUMENTS / name)
    if check_language(language) == DEFAULT_LANGUAGE:
        return english
    path, shown = DOCUMENTS / language / name, f"notebooks/{language}/{name}"
    if not path.is_file():
        raise FileNotFoundError(f"{shown}: no such document; a course in {language!r} needs "
                                f"the translation of notebooks/{name}")
    return translated_code(english, read(path), shown)


def validate_helpers(parts: Sequence[str], modules: Sequence[str],
                     language: str = "en") -> str:
    """The Validate helpers of a notebook (``notebooks/validate_helpers.py`` or its
    translation, ``translated_document``) for graded parts ``parts`` and grading modules
    ``modules``.

    Args:
        parts: the graded names in the notebook's order (``GRADED_PARTS``).
        modules: top-level names of the third-party modules the grading environment
            provides (``GRADING_MODULES``; the standard library always).
        language: the notebook's language (``"en"``, ``"it"``): that of the comments and
            docstrings; the code and its messages (``tr()``, the kit's catalogue) are the
            same.

    Returns:
        the Python source, ending with a newline.

    Raises:
        FileNotFoundError, ValueError: as ``translated_document``.
    """
    text = translated_document(VALIDATE_HELPERS.name, language)
    return fill(text, {"graded_parts": lambda _: repr(tuple(parts)),
                       "grading_modules": lambda _: repr(tuple(modules)),
                       "kernel_catalogue": lambda _: repr(KERNEL_CATALOGUE),
                       "student_python": lambda _: repr(tuple(python_of_requirements(
                           ROOT / "requirements-student.txt")))},
                f"{VALIDATE_HELPERS.relative_to(ROOT)}")


def student_install() -> str:
    """The one command that installs what a student needs for both notebooks, as markdown
    code, and the Python it is for: ``python -m pip install`` and the pinned requirements of
    ``requirements-student.txt`` (the grading environment's versions), written out so that
    a student who fetched only the notebook has it.

    Raises:
        OSError: the file cannot be read.
    """
    path = ROOT / "requirements-student.txt"
    pins = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    python = ", ".join(python_of_requirements(path))
    return "`python -m pip install " + " ".join(pins) + f"` in Python {python}"


def fill(text: str, fillers: Fillers, where: str, code: bool = True) -> str:
    """``text`` with every placeholder replaced by what ``fillers`` computes for it:
    ``{{ key }}`` in place and, in code, a line ``# {{ key: args }}`` whole (by a value
    of any number of lines).

    Args:
        text: a cell's source.
        fillers: key -> function of the placeholder's argument text.
        where: the document and cell, for the error message.
        code: whether ``text`` is code (False: markdown).

    Raises:
        ValueError: for a placeholder whose key ``fillers`` does not know.
    """
    def value(match: re.Match) -> str:
        groups = match.groups()  # (key, args) of a whole line, then of one in place
        key, args = (groups[0], groups[1]) if groups[0] else (groups[2], groups[3])
        args = (args or "").strip()
        if key not in fillers:
            raise ValueError(f"{where}: unknown placeholder {{{{ {key} }}}} (known: "
                             f"{', '.join(sorted(fillers))})")
        return fillers[key](args).strip("\n")

    return (CODE_PLACEHOLDER if code else PLACEHOLDER).sub(value, text)


def name_list(args: str) -> list[str]:
    """The comma-separated names of a placeholder's argument text."""
    return [name.strip() for name in args.split(",") if name.strip()]


def points_label(points: float) -> str:
    """``"10 points"``, ``"1 point"``."""
    return f"{points} point{'s' if points != 1 else ''}"


def graded_names(document: Path) -> list[str]:
    """The graded names of ``document`` in its order: those of its graded cells, whose grade
    ids are ``<name>_hidden_checks``."""
    out = []
    for cell in jupytext.read(document, fmt="py:percent").cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            out.append(str(meta.get("grade_id", "")).removesuffix(HIDDEN_SUFFIX))
    return out


def notebook_from_document(document: Path, fillers: Fillers, points: Mapping[str, float],
                           grade_module: str) -> nbformat.NotebookNode:
    """The instructor notebook written by ``document`` (nbformat 4.5, no outputs).

    Each cell's id is its grade id; its metadata are the header's (``nbgrader`` and
    ``tags`` only), a graded cell's points stamped from ``points``; its source is the
    document's, placeholders filled, without leading and trailing blank lines.

    Args:
        document: path of the jupytext percent document.
        fillers: what fills each placeholder key (``fill``).
        points: graded name -> points; exactly the names of the document's graded cells.
        grade_module: the module whose ``grade`` the hidden tests call
            (``grader_tests`` or ``grader_tests.checks_training``).

    Returns:
        the notebook, validated by nbformat.

    Raises:
        ValueError: for a cell without nbgrader metadata or with a key other than
            ``nbgrader`` and ``tags``, a bad or repeated grade id, an unlocked cell that is
            not a solution cell, a graded cell that states its points or whose hidden tests
            are not the one call into the graders, a solution cell without exactly one
            solution region, or graded names that are not ``points``'s.
    """
    shown = document.relative_to(ROOT) if document.is_relative_to(ROOT) else document
    cells, seen = [], set()
    for number, cell in enumerate(jupytext.read(document, fmt="py:percent").cells, start=1):
        meta = dict(cell.metadata)
        nbgrader = dict(meta.get("nbgrader") or {})
        slug = nbgrader.get("grade_id")
        where = f"{shown}, cell {number} ({slug or 'no grade id'})"
        if not slug or not CELL_ID.match(str(slug)) or slug in seen:
            raise ValueError(f"{where}: a cell needs a unique nbgrader grade_id matching "
                             "[a-zA-Z0-9_-]{1,64}")
        seen.add(slug)
        if set(meta) - {"nbgrader", "tags"}:
            raise ValueError(f"{where}: unexpected cell metadata {sorted(set(meta) - {'nbgrader', 'tags'})}")
        text = clean(fill(cell.source, fillers, where, code=cell.cell_type == "code"))
        if nbgrader.get("grade"):
            if "points" in nbgrader:
                raise ValueError(f"{where}: the points of a graded cell come from the graders' "
                                 "points table, not the document")
            name = slug.removesuffix(HIDDEN_SUFFIX)
            if name not in points or slug != name + HIDDEN_SUFFIX:
                raise ValueError(f"{where}: a graded cell's grade id is <name>{HIDDEN_SUFFIX} "
                                 f"with name one of {sorted(points)}")
            nbgrader["points"] = points[name]
            hidden = (f"{BEGIN_HIDDEN}\nfrom {grade_module} import grade\n"
                      f'grade("{name}", globals())\n{END_HIDDEN}')
            if not text.endswith("\n" + hidden) or text.count(BEGIN_HIDDEN) != 1 \
                    or f'before_grading("{name}"' not in text:
                raise ValueError(f"{where}: a graded cell checks before_grading(\"{name}\", ...) "
                                 f"and ends with its hidden tests, exactly:\n{hidden}")
        expected = nbgrader_metadata(slug, grade=bool(nbgrader.get("grade")),
                                     solution=bool(nbgrader.get("solution")),
                                     locked=bool(nbgrader.get("locked")),
                                     points=nbgrader.get("points"))
        if nbgrader != expected or (not expected["solution"] and not expected["locked"]):
            raise ValueError(f"{where}: nbgrader metadata {nbgrader} are not those of a locked "
                             "cell, a solution cell or a graded cell (schema 3)")
        if expected["solution"] and (text.count(BEGIN_SOLUTION) != 1
                                     or text.count(END_SOLUTION) != 1):
            raise ValueError(f"{where}: a solution cell needs exactly one solution region")
        metadata: dict[str, object] = {"nbgrader": nbgrader}
        if meta.get("tags"):
            metadata["tags"] = list(meta["tags"])
        if cell.cell_type == "markdown":
            cells.append(nbformat.v4.new_markdown_cell(text, id=slug, metadata=metadata))
        elif cell.cell_type == "code":
            cells.append(nbformat.v4.new_code_cell(text, id=slug, metadata=metadata))
        else:
            raise ValueError(f"{where}: a {cell.cell_type} cell (markdown and code only)")
    graded = [c.id.removesuffix(HIDDEN_SUFFIX) for c in cells
              if c.metadata["nbgrader"]["grade"]]
    if sorted(graded) != sorted(points):
        raise ValueError(f"{shown}: its graded cells and the points table differ: "
                         f"{sorted(set(graded) ^ set(points))}")
    nb = nbformat.v4.new_notebook()
    nb["nbformat"], nb["nbformat_minor"] = 4, 5
    nb["metadata"] = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    nb["cells"] = cells
    nbformat.validate(nb)
    return nb


def render(nb: nbformat.NotebookNode) -> bytes:
    """The notebook's exact bytes (UTF-8 JSON, as nbformat writes it, ending with a newline)."""
    text = nbformat.writes(nb, version=4)
    if not text.endswith("\n"):
        text += "\n"
    return text.encode("utf-8")


def write_or_check(argv: Sequence[str] | None, description: str, path: Path, root: Path,
                   expected: bytes, script: str, inputs: str) -> int:
    """The builders' command line: write ``expected`` to ``path``, or with ``--check``
    only compare.

    Args:
        argv: the arguments (``sys.argv[1:]`` when None).
        description: the ``--help`` text.
        path: the notebook; root: the folder it is shown relative to.
        expected: the notebook's bytes (``render``).
        script: the command that writes it (for the messages).
        inputs: what the notebook is built from (for the out-of-date message).

    Returns:
        exit status: 0, or 1 when ``--check`` finds the file missing or different.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if the notebook on disk differs from what "
                             "this script would write")
    args = parser.parse_args(argv)
    shown = path.relative_to(root)
    if args.check:
        if not path.exists():
            print(f"{shown} does not exist: run `{script}` and commit the result.",
                  file=sys.stderr)
            return 1
        if path.read_bytes() != expected:
            print(f"{shown} is out of date with {inputs} (or was edited by hand): run "
                  f"`{script}` and commit the result.", file=sys.stderr)
            return 1
        print(f"{shown} is up to date.")
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_bytes() == expected:
        print(f"{shown} unchanged.")
    else:
        path.write_bytes(expected)
        print(f"wrote {shown}")
    return 0
