"""What a student installs, and what a student's machine does to the lesson cells.

The student requirements (requirements-student.txt, the notebooks' "Before you start"
line) are written from pyproject.toml's group ``student``; every module any cell of the two
release notebooks imports is installed by that list; and the notebooks' ``time_limit``
judges processor time, so that a busy machine does not stop correct code, while a loop
that never ends is still stopped, a lesson cell's limit reporting instead of raising.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from authoring import student_requirements
from authoring.notebook_cells import student_install

ROOT = Path(__file__).resolve().parents[1]
RELEASES = [ROOT / "release" / a / f"{a}.ipynb" for a in ("attention", "training")]


def _cells(path: Path, kind: str = "code") -> list[dict]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return [cell for cell in notebook["cells"] if cell["cell_type"] == kind]


def _source(cell: dict) -> str:
    source = cell["source"]
    return "".join(source) if isinstance(source, list) else source


def test_requirements_student_is_written_from_pyproject():
    """The committed file is what the group ``student`` writes, its pins are the kit's own
    versions, and both release notebooks give the same install line and Python."""
    assert (ROOT / "requirements-student.txt").read_text(encoding="utf-8") == \
        student_requirements.requirements_text(), \
        "stale: run python -m authoring.student_requirements"
    pins = student_requirements.student_pins()
    assert "rich==15.0.0" in pins  # the training lesson's progress bar
    assert student_requirements.python_of_requirements() == \
        student_requirements.student_python() == ["3.11"]
    line = student_install()
    assert line == f"`python -m pip install {' '.join(pins)}` in Python 3.11"
    for release in RELEASES:
        markdown = "".join(_source(cell) for cell in _cells(release, "markdown"))
        assert line in markdown, release.name


def test_a_student_pin_that_differs_from_the_kits_stops_the_writer(tmp_path):
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    changed = tmp_path / "pyproject.toml"
    changed.write_text(text.replace('    "rich==15.0.0",\n]', '    "rich==14.0.0",\n]', 1))
    with pytest.raises(ValueError, match=r"\[student\] pins rich==14.0.0, dependencies rich==15.0.0"):
        student_requirements.student_pins(changed)


def _imported_modules(path: Path) -> dict[str, str]:
    """Top-level module -> the first cell (grade id) of ``path`` that imports it, from
    every code cell's ``import`` statements (IPython's ``%`` and ``!`` lines left out)."""
    found: dict[str, str] = {}
    for cell in _cells(path):
        lines = [line for line in _source(cell).splitlines()
                 if not line.lstrip().startswith(("%", "!"))]
        tree = ast.parse("\n".join(lines))
        where = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", cell.get("id"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], f"{path.name}: {where}")
    return found


def _installed_by(pins: list[str]) -> set[str]:
    """The distributions (normalised names) that installing ``pins`` installs: the
    closure of their requirements, read from this environment's metadata (the same
    versions: the kit's pins)."""
    def norm(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    seen: set[str] = set()
    todo = [Requirement(pin) for pin in pins]
    while todo:
        requirement = todo.pop()
        name = norm(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        for extra in requirement.extras or {""}:
            for text in metadata.requires(requirement.name) or []:
                needed = Requirement(text)
                if needed.marker is None or needed.marker.evaluate({"extra": extra}):
                    todo.append(needed)
    return seen


def test_every_module_the_release_notebooks_import_is_installed_by_the_student_list():
    """Parsed from the cells, not listed by hand: every module of both release notebooks
    is the standard library's or a distribution the student list installs."""
    installed = _installed_by(student_requirements.student_pins())
    owners = metadata.packages_distributions()
    modules: dict[str, str] = {}
    for release in RELEASES:
        for module, where in _imported_modules(release).items():
            modules.setdefault(module, where)
    assert {"numpy", "matplotlib", "rich", "IPython"} <= set(modules)
    missing = []
    for module, where in sorted(modules.items()):
        if module in sys.stdlib_module_names:
            continue
        dists = {re.sub(r"[-_.]+", "-", d).lower() for d in owners.get(module, [])}
        if not dists & installed:
            missing.append(f"{module} ({where}; from {sorted(dists) or 'no distribution'})")
    assert not missing, "imported but not installed by the student list: " + "; ".join(missing)
    # and the check sees a missing one: without rich, the training lesson's import is named
    without = _installed_by([p for p in student_requirements.student_pins()
                             if not p.startswith("rich")])
    assert "rich" not in without


def _setup_source() -> str:
    """The released attention notebook's setup cell (time_limit, tr, the Validate helpers)."""
    for cell in _cells(RELEASES[0]):
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "setup":
            return _source(cell)
    raise AssertionError("no setup cell")


def _run_kernel_code(body: str, tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the setup cell then ``body`` in a fresh Python (its main thread, as a kernel)."""
    script = tmp_path / "cells.py"
    script.write_text(_setup_source() + "\n\n" + textwrap.dedent(body), encoding="utf-8")
    env = dict(os.environ, MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_time_limit_stops_a_loop_on_processor_time_not_on_the_clock(tmp_path):
    """A second and a half of sleep under a one-second limit is not stopped (no processor
    time used); a loop that never ends is, its message saying first that the machine may be
    busy; in a lesson cell the message is printed and the code after the cell runs."""
    done = _run_kernel_code("""
        with time_limit(1):
            time.sleep(1.5)
        print("slept")
        try:
            with time_limit(1):
                while True:
                    pass
        except TimeoutError as exc:
            print("raised:", exc)
        with time_limit(1, lesson=True):
            while True:
                pass
        print("after the lesson cell")
    """, tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    said = ("this code used more than 1 s of processor time. If the machine is busy, run the "
            "cell again later; if it stops again, is there a loop that never ends?")
    assert done.stdout.splitlines() == ["slept", f"raised: {said}", "after the lesson cell"]
    assert said + "\nThis lesson cell stopped there (it carries no points); the cells below " \
        "run as usual." in done.stderr


def _lesson_cost_cells() -> str:
    """The cells the T^2 lesson needs, with the reference answers: the figures cell, the
    reference softmax, causal_mask and scaled_dot_product_attention, then the lesson."""
    from solutions import attention as reference
    import inspect

    wanted = ("lesson_figures", "lesson_cost")
    cells = {cell["metadata"].get("nbgrader", {}).get("grade_id"): _source(cell)
             for cell in _cells(RELEASES[0])}
    functions = "\n\n".join(inspect.getsource(getattr(reference, name))
                            for name in ("softmax", "causal_mask", "scaled_dot_product_attention"))
    return "\n\n".join([cells[wanted[0]], functions, cells[wanted[1]]])


def test_the_t_squared_lesson_is_not_accused_on_a_loaded_machine(tmp_path):
    """The lesson cell that times a correct attention, run while burner processes (two per
    core) keep every processor busy, finishes without the time-limit message."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(2 * (os.cpu_count() or 1))]
    try:
        done = _run_kernel_code(_lesson_cost_cells(), tmp_path)
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "processor time" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert "slope of log(time) against log(T)" in done.stdout, done.stdout[-3000:]
