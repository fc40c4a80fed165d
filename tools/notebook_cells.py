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


# ---------------------------------------------------------------------------------------
# What makes Validate tell the truth, in both notebooks: the setup cell's helpers (each
# visible-test cell records how it ended; each graded part's check cell, before its hidden
# tests, fails while the part is missing, a stub, uses a module the grading environment
# lacks, or fails its visible checks), and the wrapping of a visible-test cell.

VALIDATE_HELPERS = r'''
# How the visible checks of each graded part last ended, by name: None when they passed,
# else the message they stopped with. The check cells (before the hidden checks) read it,
# so that Validate fails where a visible test fails.
VISIBLE_CHECKS = {}
GRADED_PARTS = __PARTS__  # every graded part, in the notebook's order
# The modules your notebook is graded with: Python's standard library and these.
GRADING_MODULES = __MODULES__


@contextlib.contextmanager
def visible_checks(name, seconds=5):
    """Run a visible-test block under ``time_limit(seconds)`` and remember in
    ``VISIBLE_CHECKS[name]`` whether it passed, then print that it did."""
    __tracebackhide__ = True
    VISIBLE_CHECKS[name] = "they did not finish"
    try:
        with time_limit(seconds):
            yield
    except BaseException as exc:
        VISIBLE_CHECKS[name] = f"{type(exc).__name__}: {exc}"
        raise
    VISIBLE_CHECKS[name] = None


def visible_checks_summary():
    """Print one line per graded part: its visible checks passed, failed, still a stub, or
    not run since the setup cell."""
    stubs = [n for n, failure in VISIBLE_CHECKS.items()
             if failure is not None and failure.startswith("NotImplementedError")]
    failed = [n for n, failure in VISIBLE_CHECKS.items()
              if failure is not None and n not in stubs]
    passed = [n for n, failure in VISIBLE_CHECKS.items() if failure is None]
    not_run = [n for n in GRADED_PARTS if n not in VISIBLE_CHECKS]
    for label, names in (("passed", passed), ("fail", failed), ("still stubs", stubs),
                         ("not run", not_run)):
        print(f"{label} ({len(names)}): {', '.join(names) if names else '-'}")


def _lines(text, width=80):
    """``text`` cut into lines of at most ``width`` characters (nbgrader validate cuts
    longer lines short)."""
    return "\n".join(textwrap.wrap(text, width, break_long_words=False))


def unavailable_modules(fn):
    """The modules ``fn`` uses (through the notebook's globals or an import in its body)
    that the grading environment does not provide, sorted (the kit's own reference, which
    the training gate binds on the instructor's side, is not counted)."""
    found, codes, seen = set(), [fn.__code__], set()
    while codes:
        code = codes.pop()
        if code in seen:
            continue
        seen.add(code)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        modules = [i.argval for i in dis.get_instructions(code) if i.opname == "IMPORT_NAME"]
        for global_name in code.co_names:
            value = globals().get(global_name)
            module = value.__name__ if isinstance(value, types.ModuleType) else \
                getattr(value, "__module__", None)
            # (a function whose module was never imported was defined by a notebook's
            # own code: the training gate loads the attention notebook's functions so)
            if isinstance(module, str) and (isinstance(value, types.ModuleType)
                                            or module in sys.modules):
                modules.append(module)
        for module in modules:
            top = str(module).split(".")[0]
            if top and top not in sys.stdlib_module_names and top not in GRADING_MODULES \
                    and top not in ("__main__", "builtins", "solutions"):
                found.add(top)
    return sorted(found)


def before_grading(name, *args, answers=()):
    """Why the part ``name`` cannot pass yet, or None: a function missing or still the
    stub, one that uses a module the grading environment lacks, an exercise answer not
    assigned, or visible checks that failed (or were not run) since the setup cell.

    For a function, ``args`` are small arguments to call it with (it is still the stub if
    it raises NotImplementedError; anything else it does is for the hidden checks to
    judge). For an exercise, ``answers`` names its answer variables.
    """
    if not answers:
        fn = globals().get(name)
        if not callable(fn):
            return f"{name} is not defined:\n" + _lines(
                f"the notebook has no function named {name} (deleted or renamed?); names "
                "are case-sensitive.")
        quiet = io.StringIO()
        try:
            with time_limit(2), contextlib.redirect_stdout(quiet), \
                    contextlib.redirect_stderr(quiet), warnings.catch_warnings(), \
                    np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                fn(*args)
        except NotImplementedError:
            return f"{name} is still the stub."
        except BaseException:
            pass
        missing = unavailable_modules(fn)
        if missing:
            return (f"{name} uses {', '.join(missing)}, missing when graded:\n" + _lines(
                f"the grading environment provides Python's standard library and "
                f"{', '.join(GRADING_MODULES)} only, so {name} would fail there."))
    else:
        missing = [v for v in answers if v not in globals()]
        if missing:
            return f"{name}: not answered yet.\n" + _lines(
                f"Assign {', '.join(missing)} in the answer cell.")
    if name not in VISIBLE_CHECKS:
        return f"the visible checks of {name} have not run:\n" + _lines(
            "run the notebook from the top (Kernel > Restart Kernel and Run All Cells).")
    if VISIBLE_CHECKS[name] is not None:
        return (f"the visible checks of {name} fail:\n"
                + _lines(VISIBLE_CHECKS[name]))
    return None
'''


def validate_helpers(parts, modules):
    """The setup cell's Validate helpers for a notebook whose graded parts are ``parts`` (in
    the notebook's order) and whose grading environment provides ``modules`` (top-level
    names of third-party modules; the standard library always)."""
    return VALIDATE_HELPERS.replace("__PARTS__", repr(tuple(parts))).replace(
        "__MODULES__", repr(tuple(modules)))


def recorded(name, source):
    """A visible-test cell's source run inside ``visible_checks(name)``, which remembers
    whether it passed (the hidden-check cell after it then fails under Validate if not).

    The cell's first line is its docstring; a ``with time_limit(N):`` block right after it
    becomes ``with visible_checks(name, N):``, any other body is indented under
    ``with visible_checks(name):``.
    """
    docstring, _, body = source.strip("\n").partition("\n")
    first, _, rest = body.partition("\n")
    limit = re.fullmatch(r"with time_limit\((\d+)\):", first)
    if limit:
        return f'{docstring}\nwith visible_checks("{name}", {limit.group(1)}):\n{rest}\n'
    indented = "\n".join("    " + line if line else line for line in body.split("\n"))
    return f'{docstring}\nwith visible_checks("{name}"):\n{indented}\n'
