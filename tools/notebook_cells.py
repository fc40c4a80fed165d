"""What the two notebook builders share: nbgrader cell factories, the exact bytes of a
notebook, and the ``--check`` / write command line.

``tools/build_notebooks.py`` (assignment `attention`) and
``tools/build_training_notebook.py`` (assignment `training`) build their notebooks from
these, so both follow the same conventions: every cell has nbgrader metadata (schema 3)
and an id equal to its grade id; only solution cells are unlocked; a solution cell holds
exactly one ``### BEGIN SOLUTION`` / ``### END SOLUTION`` region.
"""

import argparse
import re
import sys

import nbformat

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
CELL_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def nbgrader_metadata(slug, *, grade=False, solution=False, locked=True, points=None):
    """The ``nbgrader`` metadata of a cell whose grade id is ``slug``."""
    meta = {"grade": grade, "grade_id": slug, "locked": locked, "schema_version": 3,
            "solution": solution}
    if points is not None:
        meta["points"] = points
    return meta


def clean(text):
    """``text`` without leading and trailing blank lines.

    Raises:
        ValueError: if it holds a tab.
    """
    text = text.strip("\n")
    if "\t" in text:
        raise ValueError("tabs in cell source")
    return text


def markdown(slug, text):
    """A locked markdown cell whose id and grade id are ``slug``."""
    return nbformat.v4.new_markdown_cell(clean(text), id=slug,
                                         metadata={"nbgrader": nbgrader_metadata(slug)})


def locked_code(slug, text, tags=()):
    """A locked, ungraded code cell (setup, visible tests, lesson cells)."""
    metadata = {"nbgrader": nbgrader_metadata(slug)}
    if tags:
        metadata["tags"] = list(tags)
    return nbformat.v4.new_code_cell(clean(text), id=slug, metadata=metadata)


def solution_code(slug, text):
    """An unlocked solution cell: nbgrader replaces its solution region by a stub.

    Raises:
        ValueError: unless the text holds exactly one solution region.
    """
    text = clean(text)
    if text.count(BEGIN_SOLUTION) != 1 or text.count(END_SOLUTION) != 1:
        raise ValueError(f"{slug}: a solution cell needs exactly one solution region")
    return nbformat.v4.new_code_cell(
        text, id=slug,
        metadata={"nbgrader": nbgrader_metadata(slug, solution=True, locked=False)})


def render(nb):
    """The notebook's exact bytes (UTF-8 JSON ending with a newline)."""
    text = nbformat.writes(nb, version=4)
    if not text.endswith("\n"):
        text += "\n"
    return text.encode("utf-8")


def write_or_check(argv, description, path, root, expected, script, inputs):
    """The builders' command line: write ``expected`` to ``path``, or with ``--check``
    only compare.

    Args:
        argv: list of str or None (``sys.argv[1:]``).
        description: str, the ``--help`` text.
        path: Path of the notebook; root: Path it is shown relative to.
        expected: bytes (``render``).
        script: str, the command that writes it (for the messages).
        inputs: str, what the notebook is built from (for the out-of-date message).

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
