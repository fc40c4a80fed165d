## The training notebook's first cell, the gate, as authoring/build_training_notebook.py's
## gate_source() fills it in: __FUNCTIONS__ (the attention functions' names), __HASHES__ (the
## SHA-256 of the attention notebook's setup and visible-test cells, in the same language)
## and __VALIDATE_HELPERS__ (notebooks/validate_helpers.py). The lines starting with `##`
## are left out. Its translations (notebooks/<language>/gate.py) change only its comments
## and docstrings: its messages are tr() calls, translated by the kit's catalogue.
"""THE GATE. Run this cell first; do not edit it (it is restored when your notebook is graded).

This assignment trains a model built from the functions you wrote in assignment `attention`.
A wrong backward pass would not crash the training, it would quietly train a worse model,
so your instructor releases it to you once your attention notebook is graded.

This cell loads your functions from your attention notebook, by default
`../attention/attention.ipynb` (the `attention` folder next to this `training` folder; set
the environment variable ATTENTION_NOTEBOOK to use another path) and runs the visible checks
of that notebook on them. Released by your instructor (the file released.json beside this
notebook), it opens, listing any visible check that still fails; without that decision it
opens only when every visible check passes, and otherwise stops with the list of functions
to fix. Every later cell that uses your functions starts with `require_gate()`.
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


# The instructor's decision, written beside this notebook when training is released to you
# (the course's unlock step writes it under this name).
RELEASE_DECISION = "released.json"


def release_decision():
    """The instructor's decision recorded when training was released to you (a dict with the
    threshold and your attention score), or None where there is none (the instructor's own
    notebook, or a training folder handed out another way)."""
    try:
        decision = json.loads(Path(RELEASE_DECISION).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return decision if isinstance(decision, dict) and decision.get("released") is True else None


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
    # Released by the instructor, the gate is the instructor's decision: a visible check that
    # still fails is reported, and the training uses the functions as they are (one that is
    # not defined at all still keeps it closed: there is nothing to train with).
    decision = release_decision()
    lines = [f"  - {name}: {message}" for name, message in failures.items()]
    if failures and (decision is None or any(name not in namespace for name in failures)):
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
    if decision is None:
        return True, tr("Gate open: the {count} attention functions of {whose}, {path},\n"
                        "pass their visible checks and are now defined here.", count=len(functions),
                        whose=whose, path=path), functions
    report = tr("Gate open: the instructor released training to {student} (attention at {threshold}).\n"
                "The {count} attention functions of {whose}, {path}, are now defined here.",
                student=decision.get("student", "?"), threshold=decision.get("threshold", "?"),
                count=len(functions), whose=whose, path=path)
    if failures:
        report += "\n" + tr("These still fail a visible check, and the training uses them as they are:\n"
                            "{lines}", lines="\n".join(lines))
    return True, report, functions


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


# Closed, the report is the exception's message, shown once (not printed as well).
if not _gate.open:
    raise GateClosed(_gate.report)
print(_gate.report)
