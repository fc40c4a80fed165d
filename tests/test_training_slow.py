"""Assignment `training`, end to end (minutes): a full training reaches the lesson's copy
accuracy, the instructor notebook runs from top to bottom with the lesson's experiments,
and nbgrader accepts it (generate_assignment, validate, validate --invert)."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from solutions import training as tr
from tests.helpers import ROOT


# This model's matrices are tiny: several BLAS threads only wait for each other, and on a
# busy machine make a training many times slower.
tr.limit_blas_threads(1)
NOTEBOOK = ROOT / "source" / "training" / "training.ipynb"

pytestmark = pytest.mark.slow


def test_reference_training_reaches_the_lessons_copy_accuracy():
    """copy, L = 6, seed 0, 1500 steps: the lesson's 1.000 / 1.000 and a final loss of 0.0002."""
    result = tr.train("copy", 6, 0, tr.fast_ops())
    assert result["token_acc"] == 1.0 and result["seq_acc"] == 1.0
    assert result["final_loss"] < 0.001
    assert result["losses"][:20].mean() > 2.0           # it started from chance (log 20 = 3.0)


def test_no_positions_drop_is_reproduced():
    """Trap 7 (docs/contract.md, section 4): without positions, copy accuracy collapses (lesson: 0.204 per sequence)."""
    result = tr.train("copy", 6, 0, tr.fast_ops(), positions=False)
    assert result["seq_acc"] < 0.6 and result["token_acc"] < 0.9


def _run_notebook(path, env_extra=None, timeout=1500):
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = dict(os.environ, **(env_extra or {}))
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                resources={"metadata": {"path": str(Path(path).parent)}})
        started = time.perf_counter()
        client.execute()
        seconds = time.perf_counter() - started
    finally:
        os.environ.clear()
        os.environ.update(old)
    return nb, seconds


def _errors(nb):
    found = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                found.append((cell.id, output.ename, output.evalue[:500]))
            if output.output_type == "stream" and output.name == "stderr":
                found.append((cell.id, "stderr", output.text[:500]))
    return found


def _text(nb, cell_id):
    cell = next(c for c in nb.cells if c.id == cell_id)
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_source_notebook_executes_end_to_end_with_the_experiments():
    """The instructor notebook, reference solution, runs every cell without an error."""
    nb, seconds = _run_notebook(NOTEBOOK, {"PYTHONPATH": str(ROOT)})
    print(f"\ntraining.ipynb executed in {seconds:.0f} s (load average now "
          f"{os.getloadavg()[0]:.1f}); the notebook says: {_text(nb, 'notebook_time').strip()}")
    assert _errors(nb) == []
    # the 10-minute budget is measured by bench/, not asserted here (load-dependent)
    assert "Gate open" in _text(nb, "gate")
    table = _text(nb, "lesson_results_table")
    assert "copy  6   1.000 (1.000)" in table
    kv = _text(nb, "lesson_kv_cache")
    assert "tokens identical: True" in kv
    ablations = _text(nb, "lesson_ablations")
    assert "no positions" in ablations
    figures = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(figures) == 3                  # learning curves, attention maps, T^2 cost


def test_nbgrader_round_trip_and_unlock(tmp_path):
    """In a temporary copy of the course: nbgrader generate_assignment for both assignments,
    `validate` passes on the source (experiments skipped by NBGRADER_EXECUTION), and
    `validate --invert` sees every graded cell of the release fail; then one student's
    attention is autograded, the unlock command releases training to them, and their
    training is autograded to 100."""
    course = tmp_path / "course"
    for name in ("source/attention", "source/training"):
        shutil.copytree(ROOT / name, course / name)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    env = dict(os.environ, PYTHONPATH=str(ROOT),
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    nbgrader = [sys.executable, "-m", "nbgrader"]
    for assignment in ("attention", "training"):
        done = subprocess.run(nbgrader + ["generate_assignment", assignment, "--force"],
                              cwd=course, env=env, capture_output=True, text=True, check=False, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    release = (course / "release" / "training" / "training.ipynb").read_text()
    assert "### BEGIN SOLUTION" not in release and "grade(\"" not in release
    assert "raise NotImplementedError()" in release

    done = subprocess.run(nbgrader + ["validate", "source/training/training.ipynb"], cwd=course,
                          env=env, capture_output=True, text=True, check=False, timeout=900)
    assert done.returncode == 0 and "Success! Your notebook passes all the tests." in done.stdout, \
        done.stdout + done.stderr
    done = subprocess.run(nbgrader + ["validate", "--invert", "release/training/training.ipynb"],
                          cwd=course, env=env, capture_output=True, text=True, check=False, timeout=900)
    assert "Success! The notebook does not pass any tests." in done.stdout, done.stdout + done.stderr

    # One student, end to end: attention autograded, training unlocked, training autograded.
    # The submissions are the instructor's notebooks (every answer right); nbgrader restores
    # the hidden cells and the gate finds autograded/<student>/attention next to training.
    student = "student_correct"
    for assignment in ("attention", "training"):
        target = course / "submitted" / student / assignment
        target.mkdir(parents=True)
        shutil.copy(course / "source" / assignment / f"{assignment}.ipynb", target)
    done = subprocess.run(nbgrader + ["autograde", "attention", f"--student={student}", "--create",
                                      "--force"], cwd=course, env=env, capture_output=True,
                          text=True, check=False, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "unlock_training.py")], cwd=course,
                          env=env, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0 and "unlocked now (1)" in done.stdout, done.stdout + done.stderr
    assert (course / "unlocked" / student / "training" / "training.ipynb").is_file()
    done = subprocess.run(nbgrader + ["autograde", "training", f"--student={student}", "--force"],
                          cwd=course, env=env, capture_output=True, text=True, check=False,
                          timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        assert gradebook.find_submission("attention", student).score == 100
        assert gradebook.find_submission("training", student).score == 100
