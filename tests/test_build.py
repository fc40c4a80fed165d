"""The notebooks are built from their documents (``notebooks/``), and one command rebuilds
everything that depends on them, in order (``python -m tools.build_all``).

* each builder's ``--check`` passes on the repository: the committed source notebooks are
  what the documents, the reference solutions and the points write;
* a document that breaks a rule of nbgrader's cells stops its builder with a message naming
  the document, the cell and the rule;
* ``python -m tools.build_all --check`` passes on the repository (slow: it runs
  ``nbgrader generate_assignment``);
* in a copy of the course, editing a visible test of the attention document makes the
  check fail, and one ``python -m tools.build_all`` rewrites the attention notebook, the
  training notebook whose gate holds the new digest, both releases and the example class,
  after which the check passes (slow).

The tests run the commands as an instructor does, in subprocesses.
"""

import hashlib
import json
import re
import shutil
import subprocess
import sys

import pytest
from tests.helpers import ROOT

# What a copy of the course needs for the builders and for build_all.
COURSE_FILES = ("tools", "authoring", "notebooks", "solutions", "grader_tests", "source",
                "release", "example", "nbgrader_config.py", "requirements-student.txt")


def run(cwd, *args, timeout=900):
    """Run ``python ARGS`` in ``cwd``: the completed process, output as text."""
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


def copy_course(target, entries=COURSE_FILES):
    """A copy of the repository's ``entries`` under ``target`` (caches left out)."""
    for name in entries:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns(
                "__pycache__", ".hypothesis", ".ipynb_checkpoints"))
        else:
            shutil.copy(source, target / name)
    return target


@pytest.mark.parametrize("builder", ["build_notebooks", "build_training_notebook"])
def test_each_builder_finds_its_committed_notebook_current(builder):
    done = run(ROOT, "-m", f"authoring.{builder}", "--check", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "is up to date." in done.stdout


@pytest.mark.parametrize("document", ["attention.py", "training.py", "validate_helpers.py"])
def test_each_document_is_python_an_editor_can_highlight_and_lint(document):
    """Every code cell, placeholders included, is Python; the markdown cells are comments."""
    text = (ROOT / "notebooks" / document).read_text(encoding="utf-8")
    compile(text, document, "exec", dont_inherit=True)
    if document != "validate_helpers.py":
        assert text.count("\n# %%") >= 40, "the document holds the notebook's cells"


def edit(path, old, new):
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


SOFTMAX_HIDDEN_HEADER = ('# %% nbgrader={"grade": true, "grade_id": "softmax_hidden_checks", '
                         '"locked": true, "schema_version": 3, "solution": false}')


# Each case runs a builder (4-5 s of CPU): the fast lane runs one per builder, the others
# (the same path through the builder, another rule) run in the slow lane.
SLOW = pytest.mark.slow


@pytest.mark.parametrize("document, old, new, said", [
    pytest.param("attention.py", SOFTMAX_HIDDEN_HEADER,
                 SOFTMAX_HIDDEN_HEADER.replace('"locked": true,', '"locked": true, "points": 10,'),
                 "(softmax_hidden_checks): the points of a graded cell come from the graders' "
                 "points table", marks=SLOW),
    pytest.param("attention.py", 'grade("softmax", globals())', 'grade("causal_mask", globals())',
                 "(softmax_hidden_checks): a graded cell checks before_grading(\"softmax\"",
                 marks=SLOW),
    ("attention.py", "# {{ solution: causal_mask }}", "# {{ solutoin: causal_mask }}",
     "(causal_mask_solution): unknown placeholder {{ solutoin }}"),
    pytest.param("attention.py", '"grade_id": "causal_mask_visible_test", "locked": true',
                 '"grade_id": "causal_mask_visible_test", "locked": false',
                 "(causal_mask_visible_test): nbgrader metadata", marks=SLOW),
    pytest.param("attention.py", '"grade_id": "padding_mask_text"',
                 '"grade_id": "causal_mask_text"',
                 "(causal_mask_text): a cell needs a unique nbgrader grade_id", marks=SLOW),
    ("training.py", '"""Given: Adam\'s initial state."""\nrequire_gate()\n',
     '"""Given: Adam\'s initial state."""\n',
     "cell given_adam_init starts with require_gate()"),
])
def test_a_broken_document_stops_its_builder_naming_the_cell(tmp_path, document, old, new,
                                                              said):
    course = copy_course(tmp_path, ("authoring", "notebooks", "source", "nbgrader_config.py",
                                     "requirements-student.txt"))
    edit(course / "notebooks" / document, old, new)
    builder = "build_notebooks" if document == "attention.py" else "build_training_notebook"
    done = run(course, "-m", f"authoring.{builder}", timeout=300)
    assert done.returncode != 0
    assert f"notebooks/{document}" in done.stderr and said in done.stderr, done.stderr[-3000:]
    # nothing written
    name = document.replace(".py", "")
    assert (course / "source" / name / f"{name}.ipynb").read_bytes() == \
        (ROOT / "source" / name / f"{name}.ipynb").read_bytes()


@pytest.mark.slow
def test_build_all_check_passes_on_the_repository():
    done = run(ROOT, "-m", "tools.build_all", "--check")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "everything is up to date" in done.stdout
    for step in ("source/attention/", "source/training/", "release/attention/",
                 "release/training/", "example/submitted/"):
        assert f"{step}: up to date" in done.stdout, done.stdout


def gate_digest(training_notebook, grade_id):
    """The SHA-256 the training notebook's gate expects for the attention cell ``grade_id``."""
    gate = json.loads(training_notebook.read_text(encoding="utf-8"))["cells"][0]
    source = "".join(gate["source"])
    found = re.search(rf'"{grade_id}": "([0-9a-f]{{64}})"', source)
    assert found, f"the gate has no digest of {grade_id}"
    return found.group(1)


def cell_digest(attention_notebook, grade_id):
    """The SHA-256 of an attention notebook's cell, as the gate computes it."""
    cells = json.loads(attention_notebook.read_text(encoding="utf-8"))["cells"]
    source = "".join(next(c for c in cells if c["id"] == grade_id)["source"])
    return hashlib.sha256(source.strip().replace("\r\n", "\n").encode("utf-8")).hexdigest()


@pytest.mark.slow
def test_editing_a_visible_test_rebuilds_the_training_gate_the_releases_and_the_class(
        tmp_path):
    course = copy_course(tmp_path)
    released_attention = course / "release" / "attention" / "attention.ipynb"
    released_training = course / "release" / "training" / "training.ipynb"
    before = gate_digest(released_training, "causal_mask_visible_test")
    assert before == cell_digest(released_attention, "causal_mask_visible_test")

    edit(course / "notebooks" / "attention.py",
         '"causal_mask(1) should be [[True]]: a token sees itself"',
         '"causal_mask(1) should be [[True]]: a token always sees itself"')
    done = run(course, "-m", "tools.build_all", "--check")
    assert done.returncode == 1, done.stdout
    assert "stale: source/attention/attention.ipynb" in done.stdout, done.stdout

    done = run(course, "-m", "tools.build_all")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for path in ("source/attention/attention.ipynb", "source/training/training.ipynb",
                 "release/attention/attention.ipynb", "release/training/training.ipynb",
                 "example/submitted/student_correct/attention/attention.ipynb"):
        assert f"wrote: {path}" in done.stdout, done.stdout
    assert "a token always sees itself" in released_attention.read_text(encoding="utf-8")
    after = gate_digest(released_training, "causal_mask_visible_test")
    assert after != before
    assert after == cell_digest(released_attention, "causal_mask_visible_test")
    assert after == gate_digest(course / "source" / "training" / "training.ipynb",
                                "causal_mask_visible_test")
    student = course / "example" / "submitted" / "student_correct" / "attention" / "attention.ipynb"
    assert cell_digest(student, "causal_mask_visible_test") == after

    done = run(course, "-m", "tools.build_all", "--check")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "everything is up to date" in done.stdout
