"""What the kit's tests share: the repository root, submission namespaces built from the
reference, the environment of the kit's commands, and a course folder with an assignment
released. The fixtures built on these are in ``tests/conftest.py``.

Nothing here imports from ``tools/``: the tests run the tools as commands, never as modules
(their code is in the packages ``authoring`` and ``grader_tests``).
"""

# No ``from __future__ import annotations`` here: ``compile`` would pass it on to the
# submissions run below (a dataclass of theirs would then see its annotations as strings).

import contextlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

import nbformat

from solutions import attention as _attention_reference

# The repository's root folder.
ROOT = Path(__file__).resolve().parent.parent

# The example class: a course of its own (``example/nbgrader_config.py``), its committed
# submissions (written by ``python -m tools.make_submissions``) and what grading them gives.
EXAMPLE = ROOT / "example"
EXPECTED = json.loads((EXAMPLE / "EXPECTED.json").read_text(encoding="utf-8"))["students"]

# The reference's source, compiled under a neutral file name: the graders flag code whose
# file is the reference's own (tampering), and a submission's code never is.
ATTENTION_SOURCE = inspect.getsource(_attention_reference)


def submission_namespace(*sources: str, label: str = "extra", training: bool = False,
                         ) -> dict[str, Any]:
    """A namespace like a student's notebook: the reference of ``attention`` (and, with
    ``training``, of ``training`` after it) exec'd as submission code, then each of
    ``sources`` (dedented) exec'd over them in order, in the same namespace.

    Args:
        sources: Python source, run in order.
        label: names the compiled files of ``sources``: ``<label:i>`` for the i-th (shown in
            tracebacks and in a function's ``__code__.co_filename``).
        training: also run the reference of assignment ``training``.

    Returns:
        The namespace (``__name__`` is ``"__submission__"``).

    Raises:
        Whatever running one of ``sources`` raises.
    """
    namespace: dict[str, Any] = {"__name__": "__submission__"}
    exec(compile(ATTENTION_SOURCE, "submission.py", "exec"), namespace)
    if training:
        from solutions import training as training_reference

        exec(compile(inspect.getsource(training_reference), "training_submission.py", "exec"),
             namespace)
    for i, source in enumerate(sources):
        exec(compile(textwrap.dedent(source), f"<{label}:{i}>", "exec"), namespace)
    return namespace


def kit_env(**extra: str) -> dict[str, str]:
    """The environment of a kit command run by a test: the kit of this checkout importable
    (first on ``PYTHONPATH``), this virtual environment's ``bin`` first on PATH (nbgrader runs
    ``alembic``), one BLAS thread, plus ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.update(extra)
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


def release_course(root: Path, env: dict[str, str] | None = None, timeout: float = 900,
                   ) -> Path:
    """Make ``root`` a course folder with assignment ``attention`` released into its own
    gradebook: the kit's ``source/attention/`` and ``nbgrader_config.py`` copied in, then
    ``nbgrader generate_assignment attention --force`` run there.

    Args:
        root: an empty folder.
        env: the command's environment (``kit_env()`` when None).
        timeout: seconds the command may take.

    Returns:
        ``root``.

    Raises:
        AssertionError: nbgrader failed (its stderr's end in the message).
        subprocess.TimeoutExpired: after ``timeout`` seconds.
    """
    shutil.copytree(ROOT / "source", root / "source", ignore=shutil.ignore_patterns("training"))
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "attention",
                           "--force"], cwd=root, env=env or kit_env(), capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return root


def example_notebook(student: str) -> str:
    """The text of the example class's committed ``attention`` notebook of ``student``.

    Raises:
        FileNotFoundError: no such student in ``example/submitted/``.
    """
    return (EXAMPLE / "submitted" / student / "attention" / "attention.ipynb").read_text(
        encoding="utf-8")


def trap_functions() -> dict[str, str]:
    """``{student: graded name}`` of the example students with one mistake: the one name below
    full marks in ``example/EXPECTED.json``."""
    from grader_tests.core import POINTS

    found = {}
    for student, entry in EXPECTED.items():
        below = [n for n, got in entry["functions"].items() if got < POINTS[n]]
        if len(below) == 1:
            found[student] = below[0]
    return found


def attention_solution_lines() -> set[str]:
    """Every line with a letter or digit of every solution region of assignment `attention`
    (the reference functions' and the instructor notebook's exercises'), stripped: none may
    show in what students receive (``grader_tests.regions.solution_lines``)."""
    from grader_tests.regions import solution_lines

    return solution_lines(_attention_reference, ROOT / "source" / "attention" / "attention.ipynb")


def copy_kit(folder: Path, example_students: list[str] | None = None) -> Path:
    """The kit's course layout in ``folder``: its ``nbgrader_config.py``, the assignments'
    ``source/`` and ``release/``, and the example class ``example/`` (its configuration and
    ``example_students`` of its ``submitted/``, all by default). Returns ``folder``."""
    ignore = shutil.ignore_patterns(".hypothesis", ".ipynb_checkpoints")
    shutil.copy(ROOT / "nbgrader_config.py", folder / "nbgrader_config.py")
    for part in ("source/attention", "release/attention", "release/training"):
        shutil.copytree(ROOT / part, folder / part, ignore=ignore)
    (folder / "example" / "submitted").mkdir(parents=True)
    shutil.copy(EXAMPLE / "nbgrader_config.py", folder / "example" / "nbgrader_config.py")
    for student in example_students or EXPECTED:
        shutil.copytree(EXAMPLE / "submitted" / student,
                        folder / "example" / "submitted" / student, ignore=ignore)
    return folder


def table_line(stdout: str, student: str) -> str:
    """The grade table's line of ``student`` in the demo's ``stdout``, its runs of spaces
    made one.

    Raises:
        StopIteration: no line of ``student``.
    """
    line = next(ln for ln in stdout.splitlines() if ln.startswith(student + " "))
    return " ".join(line.split())


def graded_course(folder: Path, students: list[str], language: str | None = None,
                  beside_source: dict[str, bytes] | None = None,
                  submitted_extra: dict[str, bytes] | None = None) -> Path:
    """A course in ``folder/course`` made the way an instructor makes one: the kit's
    ``nbgrader_config.py`` (with ``c.AttentionKit.language = language`` added when given),
    the attention source with the files ``beside_source`` (name -> bytes) written into it
    (one named ``attention.ipynb`` replaces the kit's notebook: what ``tools.build_all``
    writes there for a course in another language), the
    example class's ``students`` with the files ``submitted_extra`` added to each
    submission; then nbgrader's ``generate_assignment``, ``autograde`` and
    ``generate_feedback``.

    Returns:
        Path, the course folder (``feedback/<student>/attention/attention.html`` written).

    Raises:
        AssertionError: an nbgrader command failed (its output's end in the message).
    """
    import shutil
    import subprocess
    import sys

    from grader_tests.config import nbgrader_env

    course = folder / "course"
    shutil.copytree(ROOT / "source" / "attention", course / "source" / "attention")
    config = (ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    if language is not None:
        config += f"\nc.AttentionKit.language = {language!r}\n"
    (course / "nbgrader_config.py").write_text(config, encoding="utf-8")
    for name, data in (beside_source or {}).items():
        (course / "source" / "attention" / name).write_bytes(data)
    for student in students:
        shutil.copytree(EXAMPLE / "submitted" / student, course / "submitted" / student)
        for name, data in (submitted_extra or {}).items():
            (course / "submitted" / student / "attention" / name).write_bytes(data)
    env = nbgrader_env()
    for args in (["generate_assignment", "attention", "--force"],
                 ["autograde", "attention", "--create", "--force"],
                 ["generate_feedback", "attention", "--force"]):
        done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return course


def alembic_head() -> str:
    """The head revision of nbgrader's gradebook schema, read from the migration scripts
    nbgrader ships (the revision no other one follows). nbgrader's ``Gradebook()`` on a new
    database asks the ``alembic heads`` command for it, a subprocess of seconds;
    ``new_gradebooks_quickly`` gives it this instead (the slow lane checks both agree)."""
    import re

    import nbgrader

    versions = Path(nbgrader.__file__).parent / "alembic" / "versions"
    revisions, followed = set(), set()
    for script in versions.glob("*.py"):
        text = script.read_text(encoding="utf-8")
        revisions.update(re.findall(r"^revision = '(\w+)'", text, re.M))
        followed.update(re.findall(r"^down_revision = '(\w+)'", text, re.M))
    heads = revisions - followed
    if len(heads) != 1:
        raise RuntimeError(f"nbgrader's migrations have heads {sorted(heads)}, not one")
    return heads.pop()


@contextlib.contextmanager
def new_gradebooks_quickly() -> Iterator[None]:
    """While open, nbgrader's ``Gradebook()`` on a new database stamps the head revision
    ``alembic_head()`` reads instead of running the ``alembic heads`` command."""
    from unittest import mock

    import nbgrader.api

    with mock.patch.object(nbgrader.api, "get_alembic_version", alembic_head):
        yield


# --- the unlock command's tests (test_training_unlock.py, test_exchange.py) ----------------


def open_gradebook(path):
    """An nbgrader gradebook at ``path`` with assignment `attention` of 60 + 40 points."""
    from nbgrader.api import Gradebook

    gb = Gradebook(f"sqlite:///{path}")
    gb.add_assignment("attention")
    gb.add_notebook("attention", "attention")
    gb.add_grade_cell("part_a", "attention", "attention", max_score=60, cell_type="code")
    gb.add_grade_cell("part_b", "attention", "attention", max_score=40, cell_type="code")
    return gb


def set_scores(gb, scores):
    """One student per entry: None = no submission, (a, b) = the two cells' auto scores
    (None, None: submitted, not graded yet)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy's notes on nbgrader's own session use
        for student, pair in scores.items():
            gb.update_or_create_student(student)
            if pair is None:
                continue
            if not any(s.student.id == student for s in gb.assignment_submissions("attention")):
                gb.add_submission("attention", student)
            for cell, score in zip(("part_a", "part_b"), pair):
                grade = gb.find_grade(cell, "attention", "attention", student)
                grade.auto_score = score
                grade.needs_manual_grade = score is None
        gb.db.commit()


def release_folder(tmp_path):
    """``tmp_path/release/training/`` holding the kit's training notebook."""
    release = tmp_path / "release" / "training"
    release.mkdir(parents=True)
    shutil.copy(ROOT / "source" / "training" / "training.ipynb",
                release / "training.ipynb")
    return release


def still_running(processes: "dict[int, object]") -> list:
    """The ``psutil.Process`` objects of ``processes`` (pid -> process) still running;
    a zombie, or a process gone, has ended."""
    import psutil

    alive = []
    for p in processes.values():
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:  # type: ignore[attr-defined]
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


class PeakMemory:
    """The growth of this process's resident set (bytes) while the block runs."""

    def __enter__(self):
        import psutil

        self.process = psutil.Process()
        self.base = self.peak = self.process.memory_info().rss
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()
        self.growth = self.peak - self.base
