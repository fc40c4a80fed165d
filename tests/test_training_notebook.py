"""Assignment `training`, its notebook (``source/training/training.ipynb``): its structure,
and the gate that opens the training only once the attention notebook's functions pass."""

import inspect
import math
import subprocess
import sys

import nbformat
import numpy as np
import pytest

from grader_tests.checks_training import (
    POINTS_TRAINING,
)
from grader_tests.core import grade_id
from solutions import attention as attention_ref
from solutions import training as tr
from tests.helpers import ROOT

NOTEBOOK = ROOT / "source" / "training" / "training.ipynb"
ATTENTION_NOTEBOOK = ROOT / "source" / "attention" / "attention.ipynb"


# --- the notebook ---------------------------------------------------------------------------


@pytest.mark.slow  # the fast lane runs the same command in test_build.py
def test_notebook_is_current():
    result = subprocess.run([sys.executable, "-m", "authoring.build_training_notebook",
                             "--check"], capture_output=True, text=True, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_notebook_structure():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert nb.cells[0].id == "gate" and nb.cells[0].cell_type == "code"
    graded = {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"] for c in nb.cells
              if c.metadata.nbgrader.get("grade")}
    assert graded == {grade_id(n): p for n, p in POINTS_TRAINING.items()}
    for cell in nb.cells:
        meta = cell.metadata.nbgrader
        assert meta["schema_version"] == 3
        if cell.cell_type != "code" or cell.id == "gate":
            continue
        if meta["grade"]:
            assert "### BEGIN HIDDEN TESTS" in cell.source
        elif meta["solution"]:
            assert cell.source.count("### BEGIN SOLUTION") == 1
        else:  # every locked code cell after the gate starts with the gate's check
            first = next(line for line in cell.source.split("\n") if not line.startswith('"""'))
            assert first == "require_gate()", cell.id
    for name in POINTS_TRAINING:
        solution = next(c for c in nb.cells if c.id == f"{name}_solution")
        assert solution.source == inspect.getsource(getattr(tr, name)).rstrip("\n")


# --- the gate -------------------------------------------------------------------------------


def gate_source():
    return nbformat.read(NOTEBOOK, as_version=4).cells[0].source


def make_course(tmp_path, edit=None):
    """tmp/attention/attention.ipynb (the instructor's, optionally edited) and tmp/training."""
    nb = nbformat.read(ATTENTION_NOTEBOOK, as_version=4)
    if edit:
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") in edit:
                cell.source = edit[cell.metadata.nbgrader["grade_id"]](cell.source)
    (tmp_path / "attention").mkdir()
    nbformat.write(nb, tmp_path / "attention" / "attention.ipynb")
    (tmp_path / "training").mkdir()
    return tmp_path / "training"


def run_gate(namespace=None):
    namespace = {"__name__": "__main__"} if namespace is None else namespace
    exec(compile(gate_source(), "gate", "exec"), namespace)
    return namespace


def test_gate_opens_on_working_functions(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(make_course(tmp_path))
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    ns = run_gate()
    assert "Gate open" in capsys.readouterr().out
    ns["require_gate"]()
    for name in attention_ref.SPEC_FUNCTIONS:
        assert callable(ns[name])
    x = np.array([[0.0, math.log(3.0)]])
    assert np.allclose(ns["softmax"](x), [[0.25, 0.75]])


def closed_gate_message(ns: dict) -> str:
    """Run the gate cell in ``ns``; it must raise the notebook's ``GateClosed``: its message."""
    with pytest.raises(Exception) as info:
        run_gate(ns)
    assert type(info.value).__name__ == "GateClosed"
    return str(info.value)


def test_gate_closes_and_names_the_failing_function(tmp_path, monkeypatch):
    def drop_mean_term(src):
        assert "- dxhat.mean(axis=-1, keepdims=True)" in src
        return src.replace("- dxhat.mean(axis=-1, keepdims=True)", "")

    broken = {"layer_norm_backward_solution": drop_mean_term}
    monkeypatch.chdir(make_course(tmp_path, broken))
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    ns: dict = {"__name__": "__main__"}
    message = closed_gate_message(ns)
    assert "layer_norm_backward" in message and "1 of 15" in message
    with pytest.raises(Exception, match="run the first cell"):  # later cells stop too
        ns["require_gate"]()


def test_a_closed_gate_shows_its_report_once(tmp_path, monkeypatch, capsys):
    """Closed, the gate prints nothing: its report is GateClosed's message, read once; open,
    it prints its report."""
    broken = {"softmax_solution": lambda src: src + "\n\ndef softmax(scores, axis=-1):\n"
                                                    "    return scores\n"}
    monkeypatch.chdir(make_course(tmp_path, broken))
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    message = closed_gate_message({"__name__": "__main__"})
    assert message.startswith("The training assignment opens when your attention functions "
                              "pass their visible checks.\n")
    assert "  - softmax: AssertionError: " in message
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("ATTENTION_NOTEBOOK", str(tmp_path / "nowhere.ipynb"))
    with pytest.raises(Exception, match="could not find your attention notebook"):
        run_gate()
    assert capsys.readouterr().out == ""


def test_gate_refuses_an_edited_visible_test(tmp_path, monkeypatch):
    weakened = {"softmax_visible_test": lambda src: 'print("softmax: visible checks passed")'}
    monkeypatch.chdir(make_course(tmp_path, weakened))
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    with pytest.raises(Exception, match="softmax_visible_test"):
        run_gate()


def test_gate_cannot_be_skipped_by_redefining_a_function(tmp_path, monkeypatch):
    monkeypatch.chdir(make_course(tmp_path))
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    ns = run_gate()
    ns["softmax"] = lambda scores, axis=-1: scores       # a later cell redefines it
    with pytest.raises(Exception, match="softmax changed after the gate"):
        ns["require_gate"]()


def test_gate_without_a_notebook_explains_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTENTION_NOTEBOOK", str(tmp_path / "nowhere" / "attention.ipynb"))
    with pytest.raises(Exception, match="could not find your attention notebook"):
        run_gate()


def test_gate_never_falls_back_to_the_reference_when_the_notebook_is_missing(tmp_path, monkeypatch):
    """Where the kit is installed (``solutions`` importable, as here) a training folder with
    no attention folder beside it keeps the gate closed, says where it looked and how to
    give the path, and defines none of the attention functions."""
    import solutions.attention  # noqa: F401  (importable: the case that used to open the gate)

    monkeypatch.chdir(make_course(tmp_path))
    (tmp_path / "attention" / "attention.ipynb").unlink()         # fetched training only
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    ns: dict = {"__name__": "__main__"}
    message = closed_gate_message(ns)
    assert "The gate is closed: it could not find your attention notebook" in message
    assert str(tmp_path / "attention" / "attention.ipynb") in message
    assert "%env ATTENTION_NOTEBOOK=" in message
    assert not any(name in ns for name in attention_ref.SPEC_FUNCTIONS)
    with pytest.raises(Exception, match="run the first cell"):
        ns["require_gate"]()


def test_gate_finds_the_notebook_given_by_path(tmp_path, monkeypatch, capsys):
    """The path the closed gate asks for (ATTENTION_NOTEBOOK, set in the kernel) opens it on
    that notebook's functions, not the kit's."""
    make_course(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)                                  # no ../attention here
    monkeypatch.setenv("ATTENTION_NOTEBOOK", str(tmp_path / "attention" / "attention.ipynb"))
    ns = run_gate()
    assert "Gate open" in capsys.readouterr().out
    assert ns["softmax"] is not attention_ref.softmax
    assert ns["softmax"].__code__.co_filename.endswith("softmax_solution")


def test_released_by_the_instructor_the_gate_opens_on_the_decision(tmp_path, monkeypatch, capsys):
    """The instructor's decision recorded at release (``released.json``, written by the
    unlock) is the gate's rule: a student released at a threshold below full marks, whose
    softmax still fails a visible check, starts the training, told which check fails; a
    function not defined at all still keeps it closed (nothing to train with)."""
    from grader_tests.unlock import DECISION_FILE, write_decision

    broken = {"softmax_solution": lambda src: src + "\n\ndef softmax(scores, axis=-1):\n"
                                                    "    return scores\n"}
    training = make_course(tmp_path, broken)
    monkeypatch.chdir(training)
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    assert "softmax" in closed_gate_message({"__name__": "__main__"})  # no decision: closed
    write_decision(training, {"released": True, "student": "ada", "threshold": "95 % of 100"})
    assert (training / DECISION_FILE).is_file()
    ns = run_gate()
    report = capsys.readouterr().out
    assert report.startswith("Gate open: the instructor released training to ada "
                             "(attention at 95 % of 100).")
    assert "These still fail a visible check" in report and "  - softmax: " in report
    ns["require_gate"]()
    assert ns["softmax"](np.array([[1.0, 2.0]])).tolist() == [[1.0, 2.0]]  # theirs, as it is

    def without_softmax(src):
        return "raise RuntimeError('half-written cell')\n" + src

    (tmp_path / "second").mkdir()
    training = make_course(tmp_path / "second", {"softmax_solution": without_softmax})
    write_decision(training, {"released": True, "threshold": "full marks"})
    monkeypatch.chdir(training)
    message = closed_gate_message({"__name__": "__main__"})
    assert "softmax: running its cell raised RuntimeError: half-written cell" in message
