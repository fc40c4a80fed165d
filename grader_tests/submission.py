"""Load a submission (a filled-in notebook or a ``.py`` module) into a namespace.

From a notebook, the code cells that define the student's work are run in order: the
solution cells, the cells tagged ``setup`` (imports) and any cell the student added
(no nbgrader metadata). Grade cells (hidden and visible tests) and the lesson's locked
cells are skipped: they test or demonstrate, they define nothing the graders need.
IPython syntax (``%magic``, ``!shell``) in a kept cell is commented out. From the
`training` notebook the given cells (``given_*``: constants, the model, the loop) run too,
and its gate cell does not (``load(..., assignment="training")``).
"""

import ast
import contextlib
import io
import json
import os
import re
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from . import assignments

MAGIC = re.compile(r"^(\s*)([%!].*)$", re.MULTILINE)


def N_(message: str) -> str:
    """Mark ``message`` for the catalogue (``i18n.N_``; this module runs in the jailed
    worker too, where ``i18n`` is not)."""
    return message


# The messages of this module (why a file is no notebook, the cells that failed while
# loading, a module the grading environment does not provide), in the language of the
# grading: in the grader translated with the kit's catalogue (``i18n``, which the grader
# has loaded; this module does not import it, ``i18n`` reading the course's configuration
# through ``config``, which imports this module), in the jailed worker, where the catalogue
# is not, with the table the grader sends in its load request (``use_messages``). English,
# the msgids, without either.
MESSAGES = (
    N_("{path}: no such file"), N_("{path}: unreadable ({error})"),
    N_("{path}: not graded: {size} bytes, more than a notebook may hold ({limit} MiB)"),
    N_("{path}: not a readable notebook (its JSON is nested too deeply to read)"),
    N_("{path}: not a readable notebook ({error})"),
    N_("{path}: not a notebook (lists or objects nested more than {depth} deep)"),
    N_("{path}: not a notebook (no list of cells)"),
    N_("{path}: cell {number}: {what} is {kind}, not {expected}"),
    N_("an object"), N_("a string"), N_("a list of strings"), N_("a list"), N_("a boolean"),
    N_("a number"),
    N_("a string or a list of strings"), N_("the cell"),
    N_("the file"), N_("cell {grade_id} (the part {part})"), N_("cell {grade_id}"),
    N_("the cell after {cell} that starts with {line}"),
    N_("the cell that starts with {line}"), N_("an empty cell after {cell}"),
    N_("an empty cell before every cell with an id"),
    N_("{cell} is a {kind} cell: graded as code, as nbgrader does"),
    N_("{count} cells carry the same id {grade_id} (duplicated or split): joined and "
       "graded as one"),
    N_("{cell}: imports {modules}, which the grading environment does not provide (it "
       "provides Python's standard library and {allowed}): code that uses it fails when "
       "graded [module-unavailable]"),
    N_("{cell}: imports {modules}, which the grading environment does not provide (it "
       "provides Python's standard library and {allowed}): code that uses them fails when "
       "graded [module-unavailable]"),
    N_("{cell}: stopped after {seconds:g} s (a loop that never ends at the top level of a "
       "cell?)"),
    N_("{cell}: still the stub (it raises NotImplementedError)"),
    N_("{cell}: syntax error at line {line} of the cell ({error}): none of the cell ran, so "
       "nothing it defines is graded. The grading runs Python {version}: code written for a "
       "newer Python (3.12's f-strings that reuse their quotes inside, for one) is a syntax "
       "error there"),
    # the worker's (``_worker.py``), a value of the student's it cannot send the grader
    N_("the result could not be sent: {error}"),
)
_TABLE: dict[str, str] | None = None  # the worker's translations (``use_messages``)


def use_messages(table: dict[str, str] | None) -> None:
    """Translate this module's messages with ``table`` (msgid -> text, from
    ``message_table``) from now on; None: with the kit's catalogue where it is, else
    English. For the jailed worker, told by the grader.

    Args:
        table: dict of str to str, or None.
    """
    global _TABLE
    _TABLE = None if table is None else {str(k): str(v) for k, v in table.items()
                                         if str(k) in MESSAGES}


def message_table(translate: Callable[[str], str]) -> dict[str, str]:
    """This module's messages translated by ``translate`` (the grader's ``i18n._``, in
    the grading's language): what the grader sends the worker (``use_messages``).

    Returns:
        dict msgid -> its translation, for every entry of ``MESSAGES``.
    """
    return {m: translate(m) for m in MESSAGES}


def _(message: str) -> str:
    """``message`` (one of ``MESSAGES``) in the language of the grading: the worker's
    table, else the catalogue of the grader's ``i18n`` where it is loaded, else English."""
    if _TABLE is not None:
        return _TABLE.get(message, message)
    i18n = sys.modules.get(f"{__package__ or 'grader_tests'}.i18n")
    return message if i18n is None else i18n._(message)


class SubmissionError(Exception):
    """The submission cannot be read (not a notebook, invalid JSON, no such file)."""


@dataclass
class Loaded:
    """A loaded submission: its namespace, what went wrong while running its cells, and
    the indices of the cells stopped at their time limit (``timed_out``)."""

    path: str
    namespace: dict
    cell_errors: list = field(default_factory=list)
    timed_out: list = field(default_factory=list)


# Locked cells of the training notebook whose grade id starts with this define the model,
# the loop and the constants the student's functions use: they run too (see ``load``).
GIVEN_PREFIX = "given_"
# The training notebook's first cell (it loads the student's attention notebook).
GATE_ID = assignments.TRAINING.gate_cell


def keeps(cell: dict, given: bool = False) -> bool:
    """Whether the loader runs ``cell`` (a cell as ``read_cells`` gives it): a solution
    cell, a cell tagged ``setup``, a cell without nbgrader metadata (the student's own);
    with ``given``, the given cells of the training notebook too; not the grade cells,
    the locked cells, the lesson and the visible tests."""
    return _keep(cell, given)


def _keep(cell, given=False):
    meta = cell.get("metadata", {}) or {}
    if given and cell.get("cell_type") == "code" and str(
            (meta.get("nbgrader") or {}).get("grade_id", "")).startswith(GIVEN_PREFIX):
        return True
    if cell.get("cell_type") in ("raw", "markdown") and (meta.get("nbgrader") or {}).get(
            "solution"):
        return True  # a solution cell turned into raw or markdown by mistake: its code is
        # still the answer (nbgrader's autograde turns it back into code too)
    if cell.get("cell_type") != "code":
        return False
    tags = meta.get("tags", []) or []
    nb = meta.get("nbgrader", {}) or {}
    if "setup" in tags or nb.get("solution"):
        return True
    if nb.get("grade") or nb.get("locked") or nb.get("task"):
        return False
    if "lesson" in tags or "visible-test" in tags:
        return False
    return True


# A notebook file larger than this (bytes) is not read: it is no notebook a student wrote.
MAX_NOTEBOOK_BYTES = 256 * 2**20
# Deepest nesting of lists and objects a notebook may have (Jupyter writes about 6: an
# output's data; the JSON parser and nbformat's validator recurse on it).
MAX_NESTING = 64


def _too_deep(data, limit):
    """True if ``data`` (parsed JSON) nests lists and objects deeper than ``limit``;
    iterative, so that no nesting makes it recurse."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = value.values()
        elif not isinstance(value, list):
            continue
        if depth > limit:
            return True
        stack.extend((v, depth + 1) for v in value if isinstance(v, (dict, list)))
    return False


def _kind(value):
    """How a message names the JSON kind of ``value``."""
    kind = {dict: N_("an object"), list: N_("a list"), str: N_("a string"),
            bool: N_("a boolean"), int: N_("a number"), float: N_("a number")}.get(type(value))
    return _(kind) if kind else "null" if value is None else type(value).__name__


def read_cells(path):
    """The cells of the notebook file ``path``, read as hostile data and checked for shape.

    Every cell is returned as a new dict in which ``cell_type`` is a str, ``metadata`` a
    dict, ``metadata["nbgrader"]`` a dict (empty when absent or null) whose ``grade_id``
    is a str or None, ``metadata["tags"]`` a list of str, and ``source`` a str (a list of
    lines joined), so that callers may use them without further checks.

    Args:
        path: str, a ``.ipynb`` file (nbformat 4 JSON).

    Returns:
        list of dict, one per cell, in the notebook's order.

    Raises:
        SubmissionError: (and nothing else) if the file cannot be read, is larger than
            ``MAX_NOTEBOOK_BYTES``, is not JSON, nests deeper than ``MAX_NESTING``, or any
            cell has another shape than above; the message names the file, the cell
            (counted from 1) and what is wrong.
    """
    try:
        size = os.path.getsize(path)
        if size > MAX_NOTEBOOK_BYTES:
            raise SubmissionError(_("{path}: not graded: {size} bytes, more than a notebook "
                                    "may hold ({limit} MiB)").format(
                                        path=path, size=size, limit=MAX_NOTEBOOK_BYTES // 2**20))
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except SubmissionError:
        raise
    except RecursionError:
        raise SubmissionError(_("{path}: not a readable notebook (its JSON is nested too "
                                "deeply to read)").format(path=path)) from None
    except (OSError, ValueError, MemoryError) as exc:  # (decoding errors are ValueErrors)
        raise SubmissionError(_("{path}: not a readable notebook ({error})").format(
            path=path, error=f"{type(exc).__name__}: {str(exc)[:200]}")) from None
    if _too_deep(data, MAX_NESTING):
        raise SubmissionError(_("{path}: not a notebook (lists or objects nested more than "
                                "{depth} deep)").format(path=path, depth=MAX_NESTING))
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        raise SubmissionError(_("{path}: not a notebook (no list of cells)").format(path=path))
    out = []
    for number, cell in enumerate(cells, start=1):
        def wrong(what, value, expected):
            return SubmissionError(_("{path}: cell {number}: {what} is {kind}, not {expected}"
                                     ).format(path=path, number=number, what=what,
                                              kind=_kind(value), expected=_(expected)))
        if not isinstance(cell, dict):
            raise wrong(_("the cell"), cell, "an object")
        cell_type = cell.get("cell_type")
        if not isinstance(cell_type, str):
            raise wrong("cell_type", cell_type, "a string")
        meta = cell.get("metadata")
        meta = {} if meta is None else meta
        if not isinstance(meta, dict):
            raise wrong("metadata", meta, "an object")
        nbgrader = meta.get("nbgrader")
        nbgrader = {} if nbgrader is None else nbgrader
        if not isinstance(nbgrader, dict):
            raise wrong("metadata.nbgrader", nbgrader, "an object")
        grade_id = nbgrader.get("grade_id")
        if grade_id is not None and not isinstance(grade_id, str):
            raise wrong("metadata.nbgrader.grade_id", grade_id, "a string")
        tags = meta.get("tags")
        tags = [] if tags is None else tags
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise wrong("metadata.tags", tags, "a list of strings")
        source = cell.get("source", "")
        source = "" if source is None else source
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise wrong("source", source, "a string or a list of strings")
        out.append({**cell, "cell_type": cell_type, "source": source,
                    "metadata": {**meta, "nbgrader": nbgrader, "tags": tags}})
    return out


_cells = read_cells


def nbgrader_metadata(cell):
    """The nbgrader metadata of ``cell`` (a dict or an nbformat ``NotebookNode`` of a
    student's notebook, any shape), as a dict: empty when the cell, its metadata or its
    nbgrader metadata is not a dict, and without a ``grade_id`` that is not a str."""
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    if not isinstance(meta, dict):
        return {}
    if "grade_id" in meta and not isinstance(meta["grade_id"], str):
        return {k: v for k, v in meta.items() if k != "grade_id"}
    return meta


def assignment_of(path: str) -> str:
    """Name of the assignment of ``path``: the assignment whose gate cell the notebook has
    (``Assignment.gate_cell``: `training`), else ``assignments.DEFAULT`` (`attention`; a
    ``.py`` file included).

    Raises:
        SubmissionError: if ``path`` is a notebook that cannot be read.
    """
    if path.endswith(".py"):
        return assignments.DEFAULT.name
    gates = {a.gate_cell: a.name for a in assignments.ASSIGNMENTS.values() if a.gate_cell}
    for cell in _cells(path):
        found = ((cell.get("metadata", {}) or {}).get("nbgrader") or {}).get("grade_id")
        if found in gates:
            return gates[found]
    return assignments.DEFAULT.name


def gate_definitions(source):
    """The training gate cell's imports, constants, functions and classes, without the
    statements that load and check the attention notebook (the graders need the former;
    the latter would close the gate or open it on the wrong functions). A cell that does
    not parse is returned unchanged (its error is recorded when it runs)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    kept = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            kept.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and not any(
                isinstance(n, ast.Call) for n in ast.walk(node.value or ast.Constant(None))
                if not (isinstance(n, ast.Call) and _is_plain_call(n))):
            kept.append(node)
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


def _is_plain_call(node):
    """Calls a constant definition may make: ``time.perf_counter()``, ``os.environ.get``."""
    text = ast.unparse(node.func)
    return text in ("time.perf_counter", "os.environ.get", "frozenset", "tuple", "dict",
                    "set", "list")


def code_of_notebook(path, given=False):
    """The code a grader runs from notebook ``path``: list of ``(cell_index, source)``.

    Args:
        given: also keep the given (locked, ``given_*``) cells of the training notebook.

    Raises:
        SubmissionError: if the file is not a readable notebook.
    """
    cells = _cells(path)
    out = []
    joined = {}  # grade id of a solution cell -> its place in ``out``
    for i, cell in enumerate(cells):
        meta = (cell.get("metadata", {}) or {}).get("nbgrader") or {}
        gate = given and meta.get("grade_id") == GATE_ID and cell.get("cell_type") == "code"
        if gate or _keep(cell, given):
            source = cell.get("source", "")
            if isinstance(source, list):
                source = "".join(source)
            if gate:
                source = gate_definitions(source)
            source = MAGIC.sub(r"\1pass  # \2", source)
            grade_id = meta.get("grade_id") if meta.get("solution") else None
            if grade_id and grade_id in joined:
                # The same solution cell twice (duplicated, or split in JupyterLab with both
                # halves keeping the id): graded as one, as nbgrader's autograde joins them.
                at = joined[grade_id]
                if source != out[at][1]:
                    out[at] = (out[at][0], out[at][1] + "\n" + source)
                continue
            if grade_id:
                joined[grade_id] = len(out)
            out.append((i, source))
    return out


# Endings of the nbgrader ids of a graded part's cells (``softmax_solution``...): what is
# left is the part's name, which the notebook's headings and the feedback's reports show.
PART_SUFFIXES = ("_solution", "_visible_test", "_hidden_checks", "_answer", "_check", "_text")
LINE_CHARS = 60  # of a cell's first line quoted in a message


def _grade_id(cell: dict) -> str | None:
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    meta = (meta.get("nbgrader") if isinstance(meta, dict) else None) or {}
    grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
    return grade_id if isinstance(grade_id, str) and grade_id else None


def _id_name(grade_id: str) -> str:
    for suffix in PART_SUFFIXES:
        if grade_id.endswith(suffix) and len(grade_id) > len(suffix):
            return _("cell {grade_id} (the part {part})").format(
                grade_id=grade_id, part=grade_id[: -len(suffix)])
    return _("cell {grade_id}").format(grade_id=grade_id)


def cell_name(cells: list, index: int) -> str:
    """How a message names cell ``index`` of a notebook for the student who reads it on
    the feedback page or in Jupyter, where cells carry no number (``In [ ]:``): by its
    nbgrader id and the graded part it belongs to (``cell merge_heads_hidden_checks (the
    part merge_heads)``); a cell without an id (one the student added) by the first line
    of its code and the nearest cell with an id before it (``the cell after cell
    softmax_solution (the part softmax) that starts with `while True:` ``).

    Args:
        cells: the notebook's cells (dicts, as nbformat or ``read_cells`` gives them; read
            as hostile data).
        index: int, the cell's place in ``cells``, counted from 0.

    Returns:
        str, in the current language; the quoted line is cut at ``LINE_CHARS`` characters
        and holds printable characters only.
    """
    grade_id = _grade_id(cells[index])
    if grade_id:
        return _id_name(grade_id)
    source = cells[index].get("source", "") if isinstance(cells[index], dict) else ""
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    line = next((t.strip() for t in str(source).splitlines() if t.strip()), "")
    line = "".join(ch if ch.isprintable() else "?" for ch in line)
    if len(line) > LINE_CHARS:
        line = line[: LINE_CHARS - 3] + "..."
    before = next((g for g in map(_grade_id, reversed(cells[:index])) if g), None)
    if line:
        quoted = f"`{line}`"
        return _("the cell after {cell} that starts with {line}").format(
            cell=_id_name(before), line=quoted) if before else \
            _("the cell that starts with {line}").format(line=quoted)
    return _("an empty cell after {cell}").format(cell=_id_name(before)) if before else \
        _("an empty cell before every cell with an id")


def _cell_name(index, cells):
    """How a loading error names a cell: ``cell_name`` of the notebook's ``cells``
    (``cell exercise_weight_ratio_answer (the part exercise_weight_ratio)``); ``the file``
    for a ``.py`` submission (no cells)."""
    if not cells:
        return _("the file")
    return cell_name(cells, index)


def _structure_notes(cells):
    """What the grader did about the notebook's structure, one sentence each: solution
    cells turned into markdown or raw (graded as code), solution cells that appear more
    than once (joined and graded as one)."""
    notes, seen = [], {}
    for i, cell in enumerate(cells):
        meta = (cell.get("metadata", {}) or {}).get("nbgrader") or {}
        if not meta.get("solution"):
            continue
        grade_id = meta.get("grade_id")
        if cell.get("cell_type") in ("raw", "markdown"):
            notes.append(_("{cell} is a {kind} cell: graded as code, as nbgrader does").format(
                cell=cell_name(cells, i), kind=cell.get("cell_type")))
        seen.setdefault(grade_id, []).append(i + 1)
    for grade_id, places in seen.items():
        if len(places) > 1:
            notes.append(_("{count} cells carry the same id {grade_id} (duplicated or "
                           "split): joined and graded as one").format(
                               count=len(places), grade_id=grade_id))
    return notes


def _no_op(*args, **kwargs):
    """Stands for the gate's ``require_gate`` / ``require_implemented`` while grading."""
    return None


# Third-party modules a student's code may import when graded, unless the course sets
# ``c.AttentionKit.allowed_modules`` (``config.allowed_modules``); Python's standard
# library is always available.
DEFAULT_ALLOWED_MODULES = ("numpy", "matplotlib")


def is_available(module, allowed):
    """True if the module named ``module`` (dotted or not) may be imported when graded:
    part of Python's standard library, or its top-level name is in ``allowed``."""
    top = module.split(".")[0]
    return top in sys.stdlib_module_names or top in allowed


def _unavailable(module, allowed):
    """The message of a ``ModuleNotFoundError`` for ``module``, not in ``allowed``: Python's
    own (``No module named 'scipy'``) continued, in English in every course as Python's
    exception messages are (the report's fault id ``module-unavailable`` is explained in
    the course's language beside it)."""
    return (f"No module named {module!r} when graded: the grading environment provides "
            f"Python's standard library and {', '.join(allowed)} only")


class UnavailableModule:
    """What a student's name for a module the grading environment does not provide is
    bound to (``import scipy`` becomes ``scipy = UnavailableModule("scipy", ...)``): the
    rest of the cell still runs, and any use raises ``ModuleNotFoundError`` naming the
    module and what is provided, which the graders report as ``module-unavailable``."""

    def __init__(self, module, allowed):
        object.__setattr__(self, "_message", _unavailable(module, allowed))

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):  # introspection: a plain object
            raise AttributeError(name)
        raise ModuleNotFoundError(object.__getattribute__(self, "_message"))

    def __call__(self, *args, **kwargs):
        raise ModuleNotFoundError(object.__getattribute__(self, "_message"))

    def __repr__(self):
        return f"<unavailable: {object.__getattribute__(self, '_message')}>"


class _WithoutUnavailableImports(ast.NodeTransformer):
    """Replace each import of a module outside ``allowed``; remember the modules.

    At the top level of a cell the names it would bind get ``UnavailableModule`` stand-ins,
    so the rest of the cell runs; inside a function or a ``try`` block the import raises
    ``ModuleNotFoundError`` there, as it would where the module is missing (a fallback in
    ``except ImportError`` then works).
    """

    def __init__(self, allowed):
        self.allowed = tuple(allowed)
        self.missing = []
        self.nested = 0

    def _message(self, module):
        return _unavailable(module, self.allowed)

    def _replace(self, node, modules_and_names):
        unavailable = [m for m, _ in modules_and_names if not is_available(m, self.allowed)]
        if not unavailable:
            return node
        for module in unavailable:  # said at load time only where nothing catches it
            if not self.nested and module not in self.missing:
                self.missing.append(module)
        out = []
        if isinstance(node, ast.Import):  # ``import numpy as np, scipy``: numpy still imported
            kept = [alias for alias, (module, _) in zip(node.names, modules_and_names)
                    if is_available(module, self.allowed)]
            if kept:
                out.append(ast.copy_location(ast.Import(names=kept), node))
        if self.nested or not modules_and_names[0][1]:
            raise_it = ast.Raise(ast.Call(ast.Name("ModuleNotFoundError", ast.Load()),
                                          [ast.Constant(self._message(unavailable[0]))], []))
            return out + [ast.copy_location(raise_it, node)]
        for module, bound in modules_and_names:
            if is_available(module, self.allowed):
                continue
            value = ast.Call(ast.Name("__unavailable_module__", ast.Load()),
                             [ast.Constant(module), ast.Constant(self.allowed)], [])
            out.append(ast.copy_location(ast.Assign([ast.Name(bound, ast.Store())], value),
                                         node))
        return out

    def _nested(self, node):
        self.nested += 1
        try:
            return self.generic_visit(node)
        finally:
            self.nested -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _nested

    def visit_Try(self, node):
        self.nested += 1
        try:
            node.body = [self.visit(n) for n in node.body]
            node.body = [x for n in node.body for x in (n if isinstance(n, list) else [n])]
        finally:
            self.nested -= 1
        for field_name in ("handlers", "orelse", "finalbody"):
            items = [self.visit(n) for n in getattr(node, field_name)]
            setattr(node, field_name,
                    [x for n in items for x in (n if isinstance(n, list) else [n])])
        return node

    visit_TryStar = visit_Try

    def visit_Import(self, node):
        return self._replace(node, [(a.name, a.asname or a.name.split(".")[0])
                                    for a in node.names])

    def visit_ImportFrom(self, node):
        if node.level or node.module is None:
            return node
        if any(a.name == "*" for a in node.names):
            return self._replace(node, [(node.module, None)])
        return self._replace(node, [(node.module, a.asname or a.name) for a in node.names])


def _compile_cell(source, filename, allowed):
    """``source`` compiled with imports of unavailable modules replaced (see
    ``UnavailableModule``; ``allowed`` None: every module allowed); the list of those
    modules."""
    if allowed is None:
        return compile(source, filename, "exec"), []
    tree = ast.parse(source, filename, "exec")
    transformer = _WithoutUnavailableImports(allowed)
    tree = ast.fix_missing_locations(transformer.visit(tree))
    return compile(tree, filename, "exec"), transformer.missing


# What a cell defines at its top level, read from its lines when it does not parse: ``def``,
# ``class`` and assignments at the start of a line.
DEFINES = re.compile(r"^(?:async[ \t]+def|def|class)[ \t]+([A-Za-z_]\w*)"
                     r"|^([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=(?!=)", re.MULTILINE)


def syntax_error_message(cell: str, error: SyntaxError) -> str:
    """How a loading error says that ``cell`` (``cell_name``) does not parse: the line of
    the cell and Python's message, that none of the cell ran, and the Python version of
    the grading (a cell written for a newer Python is a syntax error there).

    Args:
        cell: str, the cell as ``cell_name`` names it.
        error: the ``SyntaxError`` (or ``IndentationError``) of compiling its code.

    Returns:
        str, in the current language.
    """
    return _("{cell}: syntax error at line {line} of the cell ({error}): none of the cell "
             "ran, so nothing it defines is graded. The grading runs Python {version}: code "
             "written for a newer Python (3.12's f-strings that reuse their quotes inside, for "
             "one) is a syntax error there").format(
                 cell=cell, line=error.lineno if error.lineno is not None else "?",
                 error=str(error.msg)[:200], version=".".join(map(str, sys.version_info[:2])))


def undefined_by_syntax(path: str, assignment=assignments.DEFAULT.name) -> dict[str, str]:
    """The names a cell of the submission ``path`` would define, had it parsed, each with
    ``syntax_error_message`` of that cell: what the graders say instead of "not defined".
    Read by the grader from the file (no code of the submission runs): the cells ``load``
    runs, compiled only; a cell's names are its graded part (from its nbgrader id) and the
    ``def``, ``class`` and assignments at the start of its lines (``DEFINES``).

    Args:
        path: str, a ``.ipynb`` notebook or a ``.py`` module.
        assignment: the ``assignments.Assignment`` or its name (which cells ``load`` runs).

    Returns:
        dict name -> message (first failing cell wins); empty when every cell parses or the
        file cannot be read.
    """
    try:
        if path.endswith(".py"):
            with open(path, encoding="utf-8") as f:
                chunks, cells = [(0, f.read())], []
        else:
            chunks = code_of_notebook(path, given=assignments.get(assignment).given_cells)
            cells = _cells(path)
    except (OSError, UnicodeDecodeError, SubmissionError):
        return {}
    out: dict[str, str] = {}
    for index, source in chunks:
        try:
            compile(source, "<cell>", "exec", dont_inherit=True)  # compiled, never run
            continue
        except SyntaxError as exc:
            error = exc
        except (ValueError, RecursionError, MemoryError):
            continue
        why = syntax_error_message(_cell_name(index, cells), error)
        for name in cell_definitions(cells[index] if cells else None, source):
            out.setdefault(name, why)
    return out


def cell_definitions(cell: dict | None, source: str) -> list[str]:
    """The names a cell defines, read without running or parsing it: its graded part
    (from its nbgrader id: ``softmax_solution`` defines ``softmax``) and the ``def``,
    ``class`` and assignments at the start of its lines (``DEFINES``).

    Args:
        cell: the cell (as ``read_cells`` gives it), or None (a ``.py`` file).
        source: str, its code as the loader runs it.

    Returns:
        list of str, the part first, without repeats.
    """
    grade_id = _grade_id(cell) if cell is not None else None
    part = next((grade_id[: -len(s)] for s in PART_SUFFIXES if grade_id and
                 grade_id.endswith(s) and len(grade_id) > len(s)), None)
    names = ([part] if part else []) + [a or b for a, b in DEFINES.findall(source)]
    return list(dict.fromkeys(names))


class CellTimeout(BaseException):
    """A cell of the submission ran past its time limit while loading."""


def _alarm(signum, frame):
    raise CellTimeout()


def load(path, cell_time_limit=None, assignment=assignments.DEFAULT.name, allowed_modules=None,
         on_cell=None, skip=()):
    """Run a submission's code in a fresh namespace.

    Args:
        path: str, a ``.ipynb`` notebook or a ``.py`` module.
        cell_time_limit: float or None, seconds one cell may run (SIGALRM, main thread
            only); a cell that runs longer is stopped and recorded in ``cell_errors``.
        assignment: the ``assignments.Assignment`` or its name. For one with given cells
            (`training`) the given cells run too (the constants and the model the
            student's functions use), the gate cell does not: ``require_gate`` and
            ``require_implemented`` are no-ops, and the graders bind the attention
            functions to the reference themselves.
        allowed_modules: tuple of str, top-level names of the third-party modules the
            grading environment provides (default ``config.DEFAULT_ALLOWED_MODULES``); an
            import of anything else (the standard library aside) is not run: its names
            are bound to ``UnavailableModule`` and the cell says so in ``cell_errors``.
        on_cell: called with each cell's index in the notebook (0 for a ``.py`` file)
            before it runs: how the jailed worker tells the grader which cell runs, so
            that the grader can stop one that never finishes (``sandbox.Sandbox``).
        skip: indices of cells not to run: cells the grader stopped on an earlier load,
            and the kit's own cells that lost their metadata (``evidence.kit_cells``).

    Returns:
        Loaded. A cell that raises is recorded in ``cell_errors`` and the next cells still
        run, as in a notebook run top to bottom.

    Raises:
        SubmissionError: if the file cannot be read.
    """
    if not os.path.isfile(path):
        raise SubmissionError(_("{path}: no such file").format(path=path))
    with_given = assignments.get(assignment).given_cells
    cells, given = [], set()
    if path.endswith(".py"):
        try:
            with open(path, encoding="utf-8") as f:
                chunks = [(0, f.read())]
        except (OSError, UnicodeDecodeError) as exc:
            raise SubmissionError(_("{path}: unreadable ({error})").format(
                path=path, error=exc)) from None
    else:
        chunks = code_of_notebook(path, given=with_given)
        cells = _cells(path)
        given = {i for i, cell in enumerate(_cells(path))
                 if ((cell.get("metadata", {}) or {}).get("nbgrader") or {}).get("locked")
                 and not ((cell.get("metadata", {}) or {}).get("nbgrader") or {}).get("solution")}
    allowed_modules = tuple(DEFAULT_ALLOWED_MODULES if allowed_modules is None
                            else allowed_modules)
    namespace = {"__name__": "__submission__", "__file__": os.path.abspath(path),
                 "__unavailable_module__": UnavailableModule}
    notes = [] if path.endswith(".py") else _structure_notes(_cells(path))
    if with_given:
        namespace.update(require_gate=_no_op, require_implemented=_no_op)
    loaded = Loaded(path, namespace, list(notes))
    use_alarm = bool(cell_time_limit) and hasattr(signal, "SIGALRM") and \
        threading.current_thread() is threading.main_thread()
    for index, source in chunks:
        if index in skip:
            continue
        if on_cell is not None:
            on_cell(index)
        if with_given:  # after the gate's definitions too
            namespace.update(require_gate=_no_op, require_implemented=_no_op)
        sink = io.StringIO()
        previous = signal.signal(signal.SIGALRM, _alarm) if use_alarm else None
        try:
            # (the release's own given cells import what they need: not judged)
            try:
                code, missing = _compile_cell(source, f"{os.path.basename(path)} cell {index}",
                                              None if index in given else allowed_modules)
            except SyntaxError as exc:  # nothing of the cell runs (as in Jupyter)
                loaded.cell_errors.append(syntax_error_message(_cell_name(index, cells), exc))
                continue
            if missing:
                loaded.cell_errors.append((_(
                    "{cell}: imports {modules}, which the grading environment does not "
                    "provide (it provides Python's standard library and {allowed}): code "
                    "that uses it fails when graded [module-unavailable]") if len(missing) == 1
                    else _("{cell}: imports {modules}, which the grading environment does not "
                           "provide (it provides Python's standard library and {allowed}): "
                           "code that uses them fails when graded [module-unavailable]")
                ).format(cell=_cell_name(index, cells), modules=", ".join(missing),
                         allowed=", ".join(allowed_modules)))
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, cell_time_limit)
                try:
                    exec(code, namespace)
                finally:
                    if use_alarm:
                        signal.setitimer(signal.ITIMER_REAL, 0)
        except CellTimeout:
            loaded.timed_out.append(index)
            loaded.cell_errors.append(_("{cell}: stopped after {seconds:g} s (a loop that "
                                        "never ends at the top level of a cell?)").format(
                                            cell=_cell_name(index, cells),
                                            seconds=cell_time_limit))
        except NotImplementedError:
            loaded.cell_errors.append(_("{cell}: still the stub (it raises "
                                        "NotImplementedError)").format(
                                            cell=_cell_name(index, cells)))
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            # the student's cell failed: record it and keep going, as a notebook run would
            loaded.cell_errors.append(f"{_cell_name(index, cells)}: "
                                      f"{type(exc).__name__}: {exc}")
        finally:
            if use_alarm:
                signal.signal(signal.SIGALRM, previous)
    return loaded
