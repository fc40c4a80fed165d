"""A student's notebook is hostile data, and the jailed kernel reaches nothing writable on
the host's disk.

- Reading: every function that reads a student's notebook (choosing it, reading its cells,
  naming its assignment) either returns or raises ``SubmissionError`` naming the file, the
  cell and what is wrong, whatever the file holds (JSON nested too deeply for the parser,
  metadata of the wrong type at any level); ``batch`` records that student's error and
  grades the rest of the class.
- Disk: the kernel nbgrader's path runs in the jail finds its connection file's folder
  read-only; the only place it can write is the jail's own size-capped ``/tmp``, which is
  not on the host's disk (its sockets are the grader's, passed in as descriptors).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader_tests import jail
from grader_tests.notebook_choice import answered_cells, choose_notebook
from grader_tests.submission import (MAX_NESTING, SubmissionError, _structure_notes,
                                     assignment_of, cell_name, code_of_notebook, read_cells)
from tests.helpers import correct_notebook, kit_env


no_jail = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")


def _cell(**meta):
    return {"cell_type": "code", "metadata": meta, "source": "x = 1", "outputs": [],
            "execution_count": None}


def _notebook(cells):
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


# --- reading: each shape named ----------------------------------------------------------


def test_json_nested_too_deep_for_the_parser_is_the_students_error(tmp_path):
    path = tmp_path / "scratch.ipynb"
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(SubmissionError, match=r"scratch\.ipynb: .*nested too deeply"):
        read_cells(str(path))
    assert answered_cells(str(path)) == -1


def test_json_nested_deeper_than_a_notebook_is_refused_though_parsed(tmp_path):
    value = "x"
    for _ in range(MAX_NESTING + 5):
        value = [value]
    path = tmp_path / "deep.ipynb"
    path.write_text(json.dumps(_notebook([{**_cell(), "outputs": value}])))
    with pytest.raises(SubmissionError, match=f"nested more than {MAX_NESTING} deep"):
        read_cells(str(path))


@pytest.mark.parametrize("cell, said", [
    (_cell(nbgrader=["solution"]), "cell 2: metadata.nbgrader is a list, not an object"),
    ({**_cell(), "metadata": "solution"}, "cell 2: metadata is a string, not an object"),
    (["code"], "cell 2: the cell is a list, not an object"),
    (_cell(nbgrader={"solution": True, "grade_id": ["a"]}),
     "cell 2: metadata.nbgrader.grade_id is a list, not a string"),
    (_cell(tags="setup"), "cell 2: metadata.tags is a string, not a list of strings"),
    (_cell(tags=[1]), "cell 2: metadata.tags is a list, not a list of strings"),
    ({**_cell(), "source": ["x", 1]}, "cell 2: source is a list, not a string or a list"),
    ({**_cell(), "source": {"a": 1}}, "cell 2: source is an object, not a string"),
    ({**_cell(), "cell_type": 3}, "cell 2: cell_type is a number, not a string"),
])
def test_a_cell_of_the_wrong_shape_is_named_with_what_is_wrong(tmp_path, cell, said):
    path = tmp_path / "attention.ipynb"
    path.write_text(json.dumps(_notebook([_cell(nbgrader={"solution": True,
                                                          "grade_id": "f"}), cell])))
    with pytest.raises(SubmissionError) as caught:
        code_of_notebook(str(path))
    assert str(caught.value).startswith(f"{path}: {said}"), str(caught.value)
    assert answered_cells(str(path)) == -1


def test_null_metadata_and_line_lists_read_as_jupyter_writes_them(tmp_path):
    path = tmp_path / "attention.ipynb"
    path.write_text(json.dumps(_notebook([
        {**_cell(nbgrader=None, tags=None), "source": ["a = 1\n", "b = 2"]},
        {**_cell(nbgrader={"solution": True, "grade_id": "f"}), "source": None},
        {**_cell(), "metadata": None}])))
    assert [c["source"] for c in read_cells(str(path))] == ["a = 1\nb = 2", "", "x = 1"]
    assert code_of_notebook(str(path)) == [(0, "a = 1\nb = 2"), (1, ""), (2, "x = 1")]
    assert answered_cells(str(path)) == 1


def test_an_odd_notebook_beside_a_good_one_does_not_change_the_choice(tmp_path):
    folder = tmp_path / "submitted" / "s" / "attention"
    folder.mkdir(parents=True)
    good = _notebook([_cell(nbgrader={"solution": True, "grade_id": "f"})])
    (folder / "attention.ipynb").write_text(json.dumps(good))
    (folder / "a_scratch.ipynb").write_bytes(b"[" * 50_000)
    (folder / "b_odd.ipynb").write_text(json.dumps(_notebook([_cell(nbgrader=["solution"])])))
    choice = choose_notebook(str(folder), "attention")
    assert os.path.basename(choice.path) == "attention.ipynb"
    assert choice.answered == 1
    assert sorted(choice.others) == [("a_scratch.ipynb", 0), ("b_odd.ipynb", 0)]


# --- reading: any JSON-ish notebook -----------------------------------------------------

LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | \
    st.text(max_size=12)
JSON = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3) |
                    st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=12)
NBGRADER = st.fixed_dictionaries({}, optional={
    "solution": JSON, "grade": JSON, "locked": JSON, "task": JSON,
    "grade_id": st.sampled_from(["gate", "softmax", "given_x", "f_hidden_checks"]) | JSON})
METADATA = st.fixed_dictionaries({}, optional={
    "nbgrader": NBGRADER | JSON,
    "tags": st.lists(st.sampled_from(["setup", "lesson", "visible-test"]) | JSON,
                     max_size=3) | JSON})
CELL = st.fixed_dictionaries({}, optional={
    "cell_type": st.sampled_from(["code", "markdown", "raw"]) | JSON,
    "metadata": METADATA | JSON,
    "source": st.text(max_size=40) | st.lists(st.text(max_size=20) | JSON, max_size=3) | JSON,
    "outputs": JSON})
NOTEBOOK = st.fixed_dictionaries({"cells": st.lists(CELL | JSON, max_size=5) | JSON},
                                 optional={"metadata": JSON, "nbformat": JSON}) | JSON


def _each_reader(path):
    """Run every reader of a student's notebook on ``path``; each must return or raise
    ``SubmissionError``."""
    assert isinstance(answered_cells(path), int)
    for read in (read_cells, code_of_notebook, assignment_of,
                 lambda p: code_of_notebook(p, given=True),
                 lambda p: _structure_notes(read_cells(p)),
                 lambda p: [cell_name(read_cells(p), i) for i in range(len(read_cells(p)))]):
        try:
            read(path)
        except SubmissionError as exc:
            assert str(exc).startswith(path), str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(NOTEBOOK)
def test_any_json_notebook_is_read_or_refused_with_the_kits_error(notebook):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "attention.ipynb")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(notebook, f)
        _each_reader(path)
        choice = choose_notebook(folder, "attention")
        assert choice.path == path


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode) |
       st.integers(1, 200_000).map(lambda n: b'{"cells": ' + b"[" * n))
def test_any_bytes_are_read_or_refused_with_the_kits_error(data):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "attention.ipynb")
        with open(path, "wb") as f:
            f.write(data)
        _each_reader(path)


# --- reading: the batch grades the class ------------------------------------------------


# ``course``: a course folder with `attention` released (tests/conftest.py).


def _class_with(course, name, files):
    """A fresh ``submitted/`` in ``course``: ``honest`` (a correct notebook) and ``name``
    (``files``: file name -> bytes, None for a correct notebook)."""
    submitted = course / "submitted"
    if submitted.exists():
        shutil.rmtree(submitted)
    for stale in ("batch_log.jsonl", "summary.json"):
        if (course / stale).exists():
            (course / stale).unlink()
    correct = json.dumps(correct_notebook(course)).encode("utf-8")
    (submitted / "honest" / "attention").mkdir(parents=True)
    (submitted / "honest" / "attention" / "attention.ipynb").write_bytes(correct)
    folder = submitted / name / "attention"
    folder.mkdir(parents=True)
    for file_name, data in files.items():
        (folder / file_name).write_bytes(correct if data is None else data)


def _batch(course):
    done = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                           "--workers", "1", "--summary-json", "summary.json"], cwd=course,
                          env=kit_env(), capture_output=True, text=True, timeout=1800)
    summary = course / "summary.json"
    rows = ({r["student"]: r for r in json.loads(summary.read_text())["students"]}
            if summary.exists() else {})
    return done, rows


@no_jail
@pytest.mark.slow
def test_a_notebook_nested_too_deep_for_the_json_parser_does_not_stop_the_batch(course):
    """``scratch.ipynb`` holding ``[`` * 100000 beside a correct notebook: the correct one
    is graded (the scratch file counts as no answered cell), and so is the class."""
    deep = b"[" * 100_000 + b"]" * 100_000
    _class_with(course, "mallory", {"attention.ipynb": None, "scratch.ipynb": deep})
    done, rows = _batch(course)
    assert "Traceback" not in done.stderr, done.stderr[-1500:]
    assert rows["honest"]["score"] == 100.0, (rows, done.stderr[-1500:])
    assert rows["mallory"]["score"] == 100.0, (rows, done.stderr[-1500:])


@no_jail
@pytest.mark.slow
def test_a_cell_whose_nbgrader_metadata_is_a_list_does_not_stop_the_batch(course):
    """One cell with ``"metadata": {"nbgrader": ["solution"]}``: that student is not
    graded, with the error naming the file and the cell; the class is graded."""
    nb = json.loads(json.dumps(correct_notebook(course)))
    nb["cells"].append({"cell_type": "code", "id": "odd", "execution_count": None,
                        "outputs": [], "metadata": {"nbgrader": ["solution"]},
                        "source": "x = 1"})
    _class_with(course, "mallory", {"attention.ipynb": json.dumps(nb).encode("utf-8")})
    done, rows = _batch(course)
    assert "Traceback" not in done.stderr, done.stderr[-1500:]
    assert rows["honest"]["score"] == 100.0, (rows, done.stderr[-1500:])
    log = {json.loads(line)["student"]: json.loads(line)
           for line in (course / "batch_log.jsonl").read_text().splitlines() if line.strip()}
    error = log["mallory"]["error"]
    assert f"mallory/attention/attention.ipynb: cell {len(nb['cells'])}: metadata.nbgrader " \
           f"is a list, not an object" in error, error
    # An unreadable notebook is not graded on either path (nbgrader's autograde fails on
    # it too): no score, and the error says why.
    assert rows["mallory"]["score"] is None, rows
    assert any(e.startswith("not graded: ") for e in rows["mallory"]["errors"]), rows


# --- disk: nothing writable on the host -------------------------------------------------


@no_jail
def test_the_jails_only_writable_place_is_its_own_capped_tmp():
    """A jailed process finds the host folder bound into its jail read-only, can write its
    own ``/tmp`` up to the jail's ``tmp_bytes`` and no further, and leaves nothing on the
    host's disk."""
    scratch = tempfile.mkdtemp(prefix="attention-kit-test-")
    try:
        host = os.path.join(scratch, "k")
        os.mkdir(host)
        program = (
            "import os\n"
            f"try:\n    open({host!r} + '/x', 'w')\nexcept OSError as e:\n"
            "    ro = e.errno\n"
            "n = 0\ntry:\n    for i in range(8):\n"
            "        with open(f'/tmp/fill{i}', 'wb', buffering=0) as f:\n"
            "            for _ in range(8):\n                n += f.write(b'x' * 2**20)\n"
            "except OSError:\n    pass\n"
            "print(ro, n)\n")
        command = jail.command([sys.executable, "-I", "-c", program],
                               readonly=[(host, host)],
                               limits=jail.Limits(tmp_bytes=32 * 2**20))
        done = subprocess.run(command.argv, preexec_fn=command.preexec, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        errno_ro, written = map(int, done.stdout.split())
        assert errno_ro == 30  # EROFS: the host folder is read-only in the jail
        assert 16 * 2**20 < written <= 32 * 2**20  # writable, up to the jail's /tmp size
        assert os.listdir(scratch) == ["k"] and os.listdir(host) == []  # nothing on the host
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@no_jail
def test_the_jailed_kernel_runs_and_cannot_write_beside_its_connection_file():
    from nbclient import NotebookClient

    from grader_tests.autograde import JailedKernelManager

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import os\nfrom ipykernel import get_connection_file\n"
        "d = os.path.dirname(get_connection_file())\n"
        "try:\n    open(os.path.join(d, 'fill'), 'wb')\n    print('WROTE')\n"
        "except OSError as exc:\n    print('REFUSED', exc.errno)\n"),
        nbformat.v4.new_code_cell("print(6 * 7)")]
    NotebookClient(nb, kernel_manager_class=JailedKernelManager, timeout=60,
                   kernel_name="python3").execute(cwd=tempfile.gettempdir())
    assert nb.cells[0].outputs[0]["text"] == "REFUSED 30\n"
    assert nb.cells[1].outputs[0]["text"] == "42\n"


@no_jail
@pytest.mark.slow
def test_the_kernel_writes_nothing_past_its_private_tmp(course):
    """200 MiB written into the kernel's connection-file folder under nbgrader's
    autograde: refused (the folder is read-only in the jail)."""
    nb = correct_notebook(course)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import os\n"
        "from ipykernel import get_connection_file\n"
        "d = os.path.dirname(get_connection_file())\n"
        "chunk, written = b'x' * 2**20, 0\n"
        "try:\n"
        "    for i in range(4):\n"
        "        with open(os.path.join(d, f'fill{i}'), 'wb') as f:\n"
        "            for _ in range(50):\n"
        "                f.write(chunk)\n"
        "                written += len(chunk)\n"
        "except OSError as exc:\n"
        "    print('stopped:', exc)\n"
        "print(f'KIT_WRITTEN {written // 2**20} MiB in {d}')\n"))
    _class_with(course, "disk", {"attention.ipynb": nbformat.writes(nb).encode("utf-8")})
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--create", "--force", "--student=disk"], cwd=course,
                          env=kit_env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    graded = nbformat.read(str(course / "autograded" / "disk" / "attention" /
                               "attention.ipynb"), 4)
    text = "".join(o.get("text", "") for o in graded.cells[-1].get("outputs", []))
    found = re.search(r"KIT_WRITTEN (\d+) MiB in (\S+)", text)
    assert found is not None, text  # the cell ran: the kernel works
    assert int(found.group(1)) < 128, (
        f"the kernel wrote {found.group(1)} MiB into {found.group(2)}, on the host's disk")
    assert "Read-only file system" in text, text


@settings(max_examples=200, deadline=None)
@given(st.lists(CELL, max_size=6))
def test_nbgraders_hooks_take_cells_of_any_metadata(cells):
    """What the kit's nbgrader preprocessors read of a cell's metadata, on cells whose
    metadata is any JSON: no exception (nbgrader's own steps judge the notebook)."""
    from grader_tests.autograde import JoinDuplicateCells, is_hidden_cell
    from grader_tests.submission import nbgrader_metadata

    nb = nbformat.from_dict({"cells": [{**c, "source": c["source"]
                                        if isinstance(c.get("source"), str) else ""}
                                       for c in cells],
                             "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    for cell in nb.cells:
        meta = nbgrader_metadata(cell)
        assert isinstance(meta, dict)
        assert isinstance(meta.get("grade_id", ""), str)
        assert is_hidden_cell(cell) in (True, False)
    kept, _ = JoinDuplicateCells().preprocess(nb, {})
    assert len(kept.cells) <= len(cells)
