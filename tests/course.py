"""What the tests that run the kit's commands on a course folder share."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kit_env(**extra: str) -> dict[str, str]:
    """The environment of a kit command run by a test: the kit importable, one BLAS thread,
    this virtual environment's ``bin`` first on PATH (nbgrader runs ``alembic``), plus
    ``extra``."""
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", **extra)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def correct_notebook(course: Path) -> nbformat.NotebookNode:
    """The course's release notebook with every solution cell filled from its source
    notebook: a student who got everything right."""
    release = nbformat.read(str(course / "release" / "attention" / "attention.ipynb"), 4)
    source = nbformat.read(str(course / "source" / "attention" / "attention.ipynb"), 4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in release.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = answers[meta["grade_id"]]
    return release


def graded_course(folder: Path, students: list[str], language: str | None = None) -> Path:
    """A course in ``folder`` made the way an instructor makes one: the kit's
    ``nbgrader_config.py`` (with ``c.AttentionKit.language = language`` added when given),
    the attention source, the example class's ``students``; then nbgrader's
    ``generate_assignment``, ``autograde`` and ``generate_feedback``.

    Returns:
        Path, the course folder (``feedback/<student>/attention/attention.html`` written).

    Raises:
        AssertionError: an nbgrader command failed (its output's end in the message).
    """
    import shutil
    import subprocess

    from tools.demo import child_env

    course = folder / "course"
    shutil.copytree(Path(ROOT) / "source" / "attention", course / "source" / "attention")
    config = (Path(ROOT) / "nbgrader_config.py").read_text()
    if language is not None:
        config += f"\nc.AttentionKit.language = {language!r}\n"
    (course / "nbgrader_config.py").write_text(config)
    for student in students:
        shutil.copytree(Path(ROOT) / "example" / "submitted" / student,
                        course / "submitted" / student)
    env = child_env()
    for args in (["generate_assignment", "attention", "--force"],
                 ["autograde", "attention", "--create", "--force"],
                 ["generate_feedback", "attention", "--force"]):
        done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return course
