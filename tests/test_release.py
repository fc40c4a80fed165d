"""The committed releases, ``release/attention/`` and ``release/training/``, are what
nbgrader makes of the sources and give nothing away; nbgrader's own validation passes on
each source and fails on each release.

* regenerated (``nbgrader generate_assignment``, in a temporary course) it is equal, cell
  by cell, to the committed one;
* it holds no solution marker, no hidden-test marker, no mention of ``grader_tests``, and
  no line of a solution region (for `attention`, the reference functions' and the
  exercises'; for `training`, the source's solution regions, less lines the notebook
  shows anyway in its given code);
* ``nbgrader validate`` passes on the instructor notebook, and ``nbgrader validate
  --invert`` finds no test cell passing on the release (every hidden cell fails while the
  functions are stubs).
"""

import shutil
import subprocess
import sys

import nbformat
import pytest

from grader_tests.config import nbgrader_env
from grader_tests.regions import region_of, solution_cells
from tests.helpers import ROOT, attention_solution_lines

ASSIGNMENTS = ("attention", "training")


def paths(assignment):
    """``(source notebook, release folder, release notebook, how to regenerate)``."""
    release_dir = ROOT / "release" / assignment
    return (ROOT / "source" / assignment / f"{assignment}.ipynb", release_dir,
            release_dir / f"{assignment}.ipynb",
            f"python -m tools.build_all (or nbgrader generate_assignment {assignment} --force)")


def nbgrader(cwd, *args):
    """Run ``nbgrader ARGS`` in ``cwd``; stdout and stderr together as text."""
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=nbgrader_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600, check=False)


def grade_id_of(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "(no grade id)")


def secret_lines(assignment):
    """Lines (stripped, with a letter or digit) no student may see in the release."""
    source_path = paths(assignment)[0]
    if assignment == "attention":
        return attention_solution_lines()
    source = nbformat.read(str(source_path), as_version=4)
    solutions = solution_cells(source)
    secret = {line.strip() for cell in solutions.values()
              for line in region_of(cell.source).splitlines() if any(ch.isalnum() for ch in line)}
    shown = {line.strip() for cell in source.cells if cell not in solutions.values()
             and not (cell.get("metadata", {}).get("nbgrader", {}).get("grade"))
             for line in cell.source.splitlines()}
    return secret - shown


@pytest.fixture(scope="module", params=ASSIGNMENTS)
def assignment(request):
    return request.param


@pytest.fixture(scope="module")
def regenerated(assignment, tmp_path_factory):
    """The release folder that nbgrader generates now, in a course of its own."""
    course = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "source" / assignment, course / "source" / assignment,
                    ignore=shutil.ignore_patterns(".hypothesis", ".ipynb_checkpoints"))
    result = nbgrader(course, "generate_assignment", assignment, "--force")
    assert result.returncode == 0, result.stdout[-3000:]
    return course / "release" / assignment


@pytest.mark.slow  # runs nbgrader generate_assignment
def test_release_is_what_nbgrader_generates_from_the_source(assignment, regenerated):
    SOURCE, RELEASE_DIR, RELEASE, REGENERATE = paths(assignment)
    committed = nbformat.read(str(RELEASE), as_version=4)
    fresh = nbformat.read(str(regenerated / RELEASE.name), as_version=4)
    assert (committed.nbformat, committed.nbformat_minor) == (fresh.nbformat, fresh.nbformat_minor)
    assert committed.metadata == fresh.metadata, f"notebook metadata differ; regenerate: {REGENERATE}"
    assert [grade_id_of(c) for c in committed.cells] == [grade_id_of(c) for c in fresh.cells], (
        f"the release's cells are not the source's; regenerate: {REGENERATE}")
    for i, (old, new) in enumerate(zip(committed.cells, fresh.cells)):
        assert old == new, f"cell {i} ({grade_id_of(old)}) is out of date; regenerate: {REGENERATE}"
    assert RELEASE.read_text(encoding="utf-8") == (regenerated / RELEASE.name).read_text(
        encoding="utf-8"), f"same cells, different file; regenerate: {REGENERATE}"


@pytest.mark.slow  # runs nbgrader generate_assignment
def test_release_holds_the_files_nbgrader_releases(assignment, regenerated):
    RELEASE_DIR = paths(assignment)[1]
    def files(folder):
        return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())

    assert files(RELEASE_DIR) == files(regenerated)


def test_release_reveals_no_solution_and_no_hidden_test(assignment):
    RELEASE = paths(assignment)[2]
    text = RELEASE.read_text(encoding="utf-8")
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
                   "grader_tests"):
        assert marker not in text, f"the release contains {marker!r}"
    released = nbformat.read(str(RELEASE), as_version=4)
    secret = secret_lines(assignment)
    assert len(secret) > 20, sorted(secret)
    for i, cell in enumerate(released.cells):
        leaked = sorted({line.strip() for line in cell.source.splitlines()} & secret)
        assert not leaked, f"cell {i} ({grade_id_of(cell)}) shows solution lines: {leaked}"


def test_every_solution_cell_of_the_release_is_a_stub(assignment):
    released = nbformat.read(str(paths(assignment)[2]), as_version=4)
    stubs = [c for c in released.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    assert stubs, "the release has no solution cell"
    for cell in stubs:
        assert "raise NotImplementedError()" in cell.source, grade_id_of(cell)


@pytest.mark.slow  # runs the whole notebook (nbgrader validate)
def test_nbgrader_validate_passes_on_the_source(assignment, tmp_path):
    # a copy, so that nothing the kernel leaves behind lands beside the source notebook;
    # laid out as in source/ (the training notebook's gate opens only on the attention
    # notebook beside it, here the instructor's)
    source = paths(assignment)[0]
    (tmp_path / assignment).mkdir()
    shutil.copy(source, tmp_path / assignment / source.name)
    if assignment == "training":
        (tmp_path / "attention").mkdir()
        shutil.copy(ROOT / "source" / "attention" / "attention.ipynb", tmp_path / "attention")
    result = nbgrader(ROOT, "validate", str(tmp_path / assignment / source.name))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "Success! Your notebook passes all the tests." in result.stdout, result.stdout[-3000:]


@pytest.mark.slow  # runs the whole release (nbgrader validate)
def test_nbgrader_validate_invert_fails_every_test_of_the_release(assignment, tmp_path):
    release = paths(assignment)[2]
    shutil.copy(release, tmp_path / release.name)
    result = nbgrader(ROOT, "validate", "--invert", str(tmp_path / release.name))
    assert result.returncode == 0, result.stdout[-3000:]
    assert "NOTEBOOK PASSED ON" not in result.stdout, (
        "nbgrader validate --invert found test cells that pass on the release:\n"
        + result.stdout[-3000:])
    assert "Success! The notebook does not pass any tests." in result.stdout, result.stdout[-3000:]


EXAMPLE_CLASS = ROOT / "example" / "submitted"
EXPECTED = __import__("json").loads((ROOT / "example" / "EXPECTED.json")
                                    .read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("student", sorted(EXPECTED["students"]))
def test_nbgrader_validate_tells_each_example_student_the_truth(student, tmp_path):
    """Validate (``nbgrader validate``, what the Lab's button runs) succeeds only where every
    part is written and every visible check passes, and names every part that loses points
    in grading, by name, with the reason: still the stub, or the visible check's message."""
    expected = EXPECTED["students"][student]
    notebook = EXAMPLE_CLASS / student / "attention" / "attention.ipynb"
    shutil.copy(notebook, tmp_path / notebook.name)
    result = nbgrader(ROOT, "validate", str(tmp_path / notebook.name))
    out = result.stdout
    losing = sorted(name for name, points in expected["functions"].items()
                    if points < POINTS_OF[name])
    if not losing:
        assert "Success! Your notebook passes all the tests." in out, out[-3000:]
        return
    assert "VALIDATION FAILED" in out, out[-3000:]
    assert "Success!" not in out, out[-3000:]
    for name in losing:
        said = (f"the visible checks of {name} fail", f"{name} is still the stub",
                f"{name}: not answered yet")
        assert any(s in out for s in said), f"Validate does not name {name}:\n{out[-3000:]}"
    # One short reason per part, not a traceback through the notebook's helpers.
    assert "in before_grading" not in out and "in visible_checks" not in out, out[-3000:]


POINTS_OF = {name: points for name, points
             in EXPECTED["students"]["student_correct"]["functions"].items()}
