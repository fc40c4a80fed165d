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
