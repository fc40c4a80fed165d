"""Load a submission (a filled-in notebook or a ``.py`` module) into a namespace.

From a notebook, the code cells that define the student's work are run in order: the
solution cells, the cells tagged ``setup`` (imports) and any cell the student added
(no nbgrader metadata). Grade cells (hidden and visible tests) and the lesson's locked
cells are skipped: they test or demonstrate, they define nothing the graders need.
IPython syntax (``%magic``, ``!shell``) in a kept cell is commented out.
"""

import contextlib
import io
import json
import os
import re
import signal
import threading
import warnings
from dataclasses import dataclass, field

MAGIC = re.compile(r"^(\s*)([%!].*)$", re.MULTILINE)


class SubmissionError(Exception):
    """The submission cannot be read (not a notebook, invalid JSON, no such file)."""


@dataclass
class Loaded:
    """A loaded submission: its namespace and what went wrong while running its cells."""

    path: str
    namespace: dict
    cell_errors: list = field(default_factory=list)


def _keep(cell):
    meta = cell.get("metadata", {}) or {}
    if cell.get("cell_type") == "raw" and (meta.get("nbgrader") or {}).get("solution"):
        return True  # a solution cell turned into raw by mistake: its code is still the answer
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


def code_of_notebook(path):
    """The code a grader runs from notebook ``path``: list of ``(cell_index, source)``.

    Raises:
        SubmissionError: if the file is not a readable notebook.
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SubmissionError(f"{path}: not a readable notebook ({type(exc).__name__}: {exc})") \
            from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        raise SubmissionError(f"{path}: not a notebook (no list of cells)")
    out = []
    for i, cell in enumerate(cells):
        if isinstance(cell, dict) and _keep(cell):
            source = cell.get("source", "")
            if isinstance(source, list):
                source = "".join(source)
            out.append((i, MAGIC.sub(r"\1pass  # \2", source)))
    return out


class CellTimeout(BaseException):
    """A cell of the submission ran past its time limit while loading."""


def _alarm(signum, frame):
    raise CellTimeout()


def load(path, cell_time_limit=None):
    """Run a submission's code in a fresh namespace.

    Args:
        path: str, a ``.ipynb`` notebook or a ``.py`` module.
        cell_time_limit: float or None, seconds one cell may run (SIGALRM, main thread
            only); a cell that runs longer is stopped and recorded in ``cell_errors``.

    Returns:
        Loaded. A cell that raises is recorded in ``cell_errors`` and the next cells still
        run, as in a notebook run top to bottom.

    Raises:
        SubmissionError: if the file cannot be read.
    """
    if not os.path.isfile(path):
        raise SubmissionError(f"{path}: no such file")
    if path.endswith(".py"):
        try:
            with open(path, encoding="utf-8") as f:
                chunks = [(0, f.read())]
        except (OSError, UnicodeDecodeError) as exc:
            raise SubmissionError(f"{path}: unreadable ({exc})") from None
    else:
        chunks = code_of_notebook(path)
    namespace = {"__name__": "__submission__", "__file__": os.path.abspath(path)}
    loaded = Loaded(path, namespace)
    use_alarm = bool(cell_time_limit) and hasattr(signal, "SIGALRM") and \
        threading.current_thread() is threading.main_thread()
    for index, source in chunks:
        sink = io.StringIO()
        previous = signal.signal(signal.SIGALRM, _alarm) if use_alarm else None
        try:
            code = compile(source, f"{os.path.basename(path)} cell {index}", "exec")
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
            loaded.cell_errors.append(f"cell {index}: stopped after {cell_time_limit:g} s "
                                      f"(a loop that never ends at the top level of a cell?)")
        except (Exception, SystemExit, KeyboardInterrupt) as exc:
            # the student's cell failed: record it and keep going, as a notebook run would
            loaded.cell_errors.append(f"cell {index}: {type(exc).__name__}: {exc}")
        finally:
            if use_alarm:
                signal.signal(signal.SIGALRM, previous)
    return loaded
