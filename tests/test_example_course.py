"""The example class is a course of its own: ``make demo`` grades it in ``example/`` and
leaves the instructor's course at the repository root as it was.

* ``example/nbgrader_config.py`` loads the kit's configuration and gives the example class
  its own course id, root and gradebook, with the kit's own ``source/`` and ``release/``;
* in a copy of the kit whose instructor's course holds a real student (autograded), a
  manual grade given through nbgrader's gradebook API and a due date, ``make demo`` runs
  twice (the README's command, in the copy, with this virtual environment): the student's
  files, the manual grade and the due date are still there, the instructor's gradebook
  never hears of the example students, and the demo prints its table each time;
* nbgrader's autograde of a notebook whose locked cells are as released logs no checksum
  warning (the hidden-test cells no longer raise a false one), while a student's change
  to a locked cell is still reported.
"""

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader_tests.core import grade_id
from grader_tests.config import course_directory, nbgrader_env
from tests.helpers import EXAMPLE, ROOT, copy_kit, table_line

DUE = "2030-06-01 12:00:00 UTC"
REAL = "real_student"
TAMPERER = "tampering_student"
# The example class's course id (example/nbgrader_config.py; tools/demo.py tells it by this).
EXAMPLE_COURSE_ID = "attention-kit-example"
EXAMPLE_STUDENTS = ["student_correct", "student_heads_merged_wrong"]


def test_the_example_course_has_its_own_gradebook_and_the_kits_assignment():
    example, kit = course_directory(EXAMPLE), course_directory(ROOT)
    assert example.course_id == EXAMPLE_COURSE_ID != kit.course_id
    assert Path(example.root) == EXAMPLE and Path(kit.root) == ROOT
    assert example.db_url == f"sqlite:///{EXAMPLE / 'gradebook.db'}"
    assert kit.db_url == f"sqlite:///{ROOT / 'gradebook.db'}"
    for step in ("source", "release"):
        path = example.format_path(getattr(example, f"{step}_directory"), ".", "attention")
        assert Path(path).resolve() == ROOT / step / "attention", step
    submitted = example.format_path(example.submitted_directory, "s", "attention")
    assert Path(submitted) == EXAMPLE / "submitted" / "s" / "attention"


def nbgrader(cwd, *args):
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=nbgrader_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-4000:]
    return done.stdout


def tree_digest(folder):
    """``{relative path: sha256}`` of every file under ``folder``."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def instructor_state(db_url):
    """What must survive in the instructor's gradebook: students, the due date, the manual
    grade of ``REAL``'s softmax hidden cell."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb:
        grade = gb.find_grade(grade_id("softmax"), "attention", "attention", REAL)
        return {"students": sorted(s.id for s in gb.students),
                "duedate": gb.find_assignment("attention").duedate,
                "manual_score": grade.manual_score, "auto_score": grade.auto_score}


@pytest.fixture(scope="module")
def instructors_kit(tmp_path_factory):
    """A copy of the kit (two example students) whose instructor's course holds ``REAL``
    and ``TAMPERER``, autograded, then a manual grade for ``REAL`` and a due date:
    ``(kit folder, autograde log)``."""
    kit = copy_kit(tmp_path_factory.mktemp("kit"), EXAMPLE_STUDENTS)
    # what `make demo` runs there: the Makefile and the tools (with this virtual environment)
    shutil.copy(ROOT / "Makefile", kit / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", kit / "pyproject.toml")
    shutil.copytree(ROOT / "tools", kit / "tools",
                    ignore=shutil.ignore_patterns("__pycache__"))
    handed_in = EXAMPLE / "submitted" / "student_mask_after_softmax" / "attention" / \
        "attention.ipynb"
    for student in (REAL, TAMPERER):
        nb = nbformat.read(str(handed_in), as_version=4)
        if student == TAMPERER:  # a locked visible test weakened by the student
            cell = next(c for c in nb.cells
                        if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_visible_test")
            cell.source = "pass  # the test was here\n"
        folder = kit / "submitted" / student / "attention"
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / "attention.ipynb"))
    nbgrader(kit, "generate_assignment", "attention", "--force")
    log = nbgrader(kit, "autograde", "attention", "--create", "--force")
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{kit / 'gradebook.db'}") as gb:
        grade = gb.find_grade(grade_id("softmax"), "attention", "attention", REAL)
        grade.manual_score = 7.5  # what formgrader writes when the instructor overrides
        gb.update_or_create_assignment("attention", duedate=DUE)
        gb.db.commit()
    return kit, log


@pytest.mark.slow
def test_only_a_changed_locked_cell_raises_a_checksum_warning(instructors_kit):
    _, log = instructors_kit
    warnings = re.findall(r"Attribute 'checksum' for cell (\S+) has changed", log)
    assert warnings == ["softmax_visible_test"], log[-4000:]


@pytest.mark.slow
def test_the_demo_twice_leaves_the_instructors_course_as_it_was(instructors_kit):
    kit, _ = instructors_kit
    db_url = f"sqlite:///{kit / 'gradebook.db'}"
    before = instructor_state(db_url)
    assert before["manual_score"] == 7.5 and before["students"] == [REAL, TAMPERER]
    submitted, autograded = tree_digest(kit / "submitted"), tree_digest(kit / "autograded")
    for run in (1, 2):
        # `make demo` in the copy, with this virtual environment (VENV; the jail admits the
        # environment's own path only), which `-o` keeps make from reinstalling for the
        # copy's newer pyproject.toml
        venv = Path(sys.prefix)
        done = subprocess.run(["make", f"VENV={venv}", "-o", f"{venv}/installed.stamp", "demo"],
                              cwd=kit,
                              env=nbgrader_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=1200, check=False)
        assert done.returncode == 0, done.stdout[-5000:]
        assert f"demo: course directory {kit / 'example'}" in done.stdout, done.stdout[:2000]
        assert table_line(done.stdout, "student_correct") == "student_correct 100.00 / 100 -"
        assert table_line(done.stdout, "student_heads_merged_wrong") == (
            "student_heads_merged_wrong 88.20 / 100 late 3 h 0 min: 98.00 - 9.80 late penalty")
        assert "merge_heads 3.00/5 (head-order)" in done.stdout, run
        assert instructor_state(db_url) == before, run
        assert tree_digest(kit / "submitted") == submitted, run
        assert tree_digest(kit / "autograded") == autograded, run
        assert not (kit / "grades.csv").exists() and not (kit / "unlocked").exists(), run
    example = kit / "example"
    assert (example / "gradebook.db").is_file() and (example / "grades.csv").is_file()
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{example / 'gradebook.db'}") as gb:
        assert sorted(s.id for s in gb.students) == EXAMPLE_STUDENTS
