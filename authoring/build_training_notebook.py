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
* its first code cell, ``# {{ gate }}``, is **the gate** (``GATE_TEMPLATE`` below): it
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
                                      student_install, validate_helpers, write_or_check)
from authoring.notebook_language import (WORDS, checked_document, course_language,  # noqa: E402
                                         points_label, with_docstring)

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


def given(*definitions: str) -> str:
    """Sources of the given (non-graded) definitions of ``solutions.training`` named
    ``definitions``, two blank lines apart.

    Raises:
        ValueError: for one that has a solution region.
    """
    parts = []
    for name in definitions:
        source = source_of(name)
        if BEGIN_SOLUTION in source:
            raise ValueError(f"{name} has a solution region: it is a stub, not given code")
        parts.append(source)
    return "\n\n\n".join(parts)


def constants(wanted: Sequence[str]) -> str:
    """The module-level constants ``wanted`` of solutions/training.py with their comments,
    in the module's order.

    Raises:
        ValueError: for a name that is not such a constant.
    """
    text = inspect.getsource(reference)
    tree = ast.parse(text)
    lines = text.split("\n")
    assigned = {getattr(t, "id", None) for node in tree.body if isinstance(node, ast.Assign)
                for t in node.targets}
    if set(wanted) - assigned:
        raise ValueError(f"solutions/training.py has no constant {sorted(set(wanted) - assigned)}")
    out = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) in wanted
                                                for t in node.targets):
            start = node.lineno - 1
            while start > 0 and lines[start - 1].startswith("# ") and \
                    not lines[start - 1].startswith("# ---"):
                start -= 1
            out.append("\n".join(lines[start:node.end_lineno]))
    return "\n".join(out)


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


def gate_source(language: str | None = None) -> str:
    """The gate cell: the template with the function names and the fingerprints of the
    attention notebook in ``language`` (the course's when None) filled in."""
    hashes = attention_fingerprints(language)
    body = "{\n" + "".join(f'    "{k}": "{v}",\n' for k, v in hashes.items()) + "}"
    names = "(\n" + "".join(f'    "{n}",\n' for n in ATTENTION_FUNCTIONS) + ")"
    text = GATE_TEMPLATE.replace("__FUNCTIONS__", names).replace("__HASHES__", body).replace(
        "__VALIDATE_HELPERS__", validate_helpers(GRADED, allowed_modules(str(ROOT))).strip("\n"))
    if BEGIN_SOLUTION in text or "BEGIN HIDDEN" in text:
        raise ValueError("the gate cell must not contain nbgrader markers")
    return text


GATE_TEMPLATE = r'''
"""THE GATE. Run this cell first; do not edit it (it is restored when your notebook is graded).

This assignment trains a model built from the functions you wrote in assignment `attention`.
A wrong backward pass would not crash the training, it would quietly train a worse model,
so the assignment opens only when your attention functions pass their visible checks.

This cell loads your functions from your attention notebook, by default
`../attention/attention.ipynb` (the `attention` folder next to this `training` folder; set
the environment variable ATTENTION_NOTEBOOK to use another path), runs the visible checks
of that notebook on them, and then either opens the gate or stops with the list of
functions to fix. Every later cell that uses your functions starts with `require_gate()`.
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one BLAS thread per process: the runs use one process per core

import contextlib
import dis
import gettext
import hashlib
import io
import json
import math
import signal
import sys
import textwrap
import threading
import time
import types
import warnings
from pathlib import Path

import numpy as np

NOTEBOOK_STARTED = time.perf_counter()  # the last cell reports how long the notebook took
ATTENTION_FUNCTIONS = __FUNCTIONS__
# SHA-256 of the released setup cell and visible-test cells of the attention notebook.
_RELEASED_CELLS = __HASHES__


class GateClosed(Exception):
    """Raised while the attention functions have not passed their visible checks."""


@contextlib.contextmanager
def time_limit(seconds):
    """Raise TimeoutError if the code inside runs longer than ``seconds`` (main thread only)."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise TimeoutError(tr("this code took longer than {seconds} s: is there a loop that never ends?",
                              seconds=seconds))

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def require_implemented(fn, *args):
    """Raise NotImplementedError while ``fn`` is still the stub; anything else it does on
    ``args`` is for the hidden checks to judge."""
    quiet = io.StringIO()
    try:
        with time_limit(2), contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet), \
                warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            fn(*args)
    except NotImplementedError:
        raise
    except BaseException:
        pass


def _gate_run():
    """Load, check and report; returns (open, report, functions)."""
    def fingerprint(source):
        return hashlib.sha256(source.strip().replace("\r\n", "\n").encode("utf-8")).hexdigest()

    def first_line(exc):
        text = f"{type(exc).__name__}: {exc}".strip()
        return text if len(text) <= 400 else text[:400] + " ..."

    where = os.environ.get("ATTENTION_NOTEBOOK", "").strip()
    path = Path(where).expanduser() if where else Path("..") / "attention" / "attention.ipynb"
    if not path.is_file():
        # Never anyone else's functions (not even the kit's reference where it is installed):
        # the gate opens on the student's own attention notebook or stays closed.
        told = (tr("the path in ATTENTION_NOTEBOOK") if where
                else tr("the attention folder next to this training folder"))
        return False, tr(
            "The gate is closed: it could not find your attention notebook ({told}):\n"
            "  {path}\n"
            "Fetch or put your attention folder next to this training folder (the two assignments side\n"
            "by side: attention/attention.ipynb and training/training.ipynb, as nbgrader fetches them),\n"
            "or tell the gate where your attention.ipynb is: run, in a new cell,\n"
            "    %env ATTENTION_NOTEBOOK=/path/to/your/attention.ipynb\n"
            "then run this cell again.", told=told, path=path.resolve()), {}

    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = {}
        for cell in notebook.get("cells", []):
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            source = cell.get("source", "")
            if grade_id and cell.get("cell_type") == "code":
                cells[grade_id] = "".join(source) if isinstance(source, list) else source
    except (OSError, ValueError, AttributeError) as exc:
        return False, tr("The gate could not read {path}: {error}", path=path,
                         error=first_line(exc)), {}

    tampered = [grade_id for grade_id, digest in _RELEASED_CELLS.items()
                if grade_id not in cells or fingerprint(cells[grade_id]) != digest]
    if tampered:
        return False, tr(
            "In {path}, these locked cells are missing or differ from the released notebook:\n  {cells}\n"
            "The gate runs the visible checks exactly as they were released. Restore those cells\n"
            "(copy them from a fresh copy of the released attention notebook), save, and run this cell again.",
            path=path, cells=", ".join(tampered)), {}

    namespace = {"__name__": "attention_notebook"}
    failures = {}
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with time_limit(60):
                exec(compile(cells["setup"], f"{path.name}: setup", "exec"), namespace)
        except (Exception, SystemExit) as exc:  # noqa: BLE001
            return False, tr("The setup cell of {path} failed: {error}", path=path,
                             error=first_line(exc)), {}
        for name in ATTENTION_FUNCTIONS:
            source = cells.get(f"{name}_solution")
            if source is None:
                failures[name] = tr("its cell ({cell}) is missing from the notebook",
                                    cell=name + "_solution")
                continue
            try:
                with time_limit(30):
                    exec(compile(source, f"{path.name}: {name}_solution", "exec"), namespace)
            except (Exception, SystemExit) as exc:  # noqa: BLE001
                failures[name] = tr("running its cell raised {error}", error=first_line(exc))
        for name in ATTENTION_FUNCTIONS:
            if name in failures:
                continue
            try:
                with time_limit(60):
                    exec(compile(cells[f"{name}_visible_test"], f"{path.name}: {name}_visible_test",
                                 "exec"), dict(namespace))
            except (Exception, SystemExit) as exc:  # noqa: BLE001
                failures[name] = first_line(exc)
    if failures:
        lines = [f"  - {name}: {message}" for name, message in failures.items()]
        return False, tr(
            "The training assignment opens when your attention functions pass their visible checks.\n"
            "In {path}, {failed} of {total} do not:\n{lines}\n"
            "Fix them in your attention notebook (the visible test under each function explains what\n"
            "is wrong), save it, and run this cell again.", path=path, failed=len(failures),
            total=len(ATTENTION_FUNCTIONS), lines="\n".join(lines)), {}
    functions = {name: namespace[name] for name in ATTENTION_FUNCTIONS}
    marker = "### BEGIN " + "SOLUTION"
    whose = (tr("the instructor's source notebook (the reference solution)")
             if any(marker in cells.get(f"{n}_solution", "") for n in ATTENTION_FUNCTIONS)
             else tr("your notebook"))
    return True, tr("Gate open: the {count} attention functions of {whose}, {path},\n"
                    "pass their visible checks and are now defined here.", count=len(functions),
                    whose=whose, path=path), functions


__VALIDATE_HELPERS__


_gate = types.SimpleNamespace(open=False, report=tr("the gate cell has not finished"), functions={})
_gate.open, _gate.report, _gate.functions = _gate_run()
globals().update(_gate.functions)


def require_gate():
    """Raise GateClosed unless the gate cell ran and passed, and the attention functions it
    checked are still the ones defined in this notebook."""
    if not _gate.open:
        raise GateClosed(tr("run the first cell of this notebook (the gate) and make it pass:")
                         + "\n" + _gate.report)
    changed = [name for name, fn in _gate.functions.items() if globals().get(name) is not fn]
    if changed:
        raise GateClosed(tr("{names} changed after the gate checked them: fix them in your "
                            "attention notebook, not here, and run the gate cell again.",
                            names=", ".join(changed)))


print(_gate.report)
if not _gate.open:
    raise GateClosed(_gate.report)
'''


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
        "constants": lambda args: constants(name_list(args)),
        "given": lambda args: given(*name_list(args)),
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
