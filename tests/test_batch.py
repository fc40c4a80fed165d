"""The batch grader on a class of broken notebooks, killed halfway and resumed.

Every student gets one grade and, where something was wrong with the file, a message;
the batch never stops on a bad submission; a killed run resumes without grading anyone
twice and without losing a grade already written to nbgrader's gradebook.
"""

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import nbformat
import pytest

from tests.helpers import ROOT, correct_notebook, kit_env

pytestmark = pytest.mark.slow


# ``course``: a course folder with `attention` released (tests/conftest.py).


def _correct_notebook(course):
    """The release notebook with every solution cell filled from the source notebook."""
    return correct_notebook(course)


def _cell_index(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells)
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _write(course, student, nb=None, name="attention.ipynb", raw=None):
    folder = course / "submitted" / student / "attention"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if raw is not None:
        path.write_bytes(raw)
    elif nb is not None:
        path.write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bad_class(course):
    good = _correct_notebook(course)
    _write(course, "s_correct", good)
    _write(course, "s_invalid_json", raw=b'{"cells": [ {"cell_type": "code", ')
    old = copy.deepcopy(good)
    old["nbformat_minor"] = 4
    for c in old["cells"]:
        c.pop("id", None)
    _write(course, "s_nbformat_44", old)
    deleted = copy.deepcopy(good)
    del deleted["cells"][_cell_index(deleted, "softmax_hidden_checks")]
    _write(course, "s_deleted_cell", deleted)
    dup = copy.deepcopy(good)
    i = _cell_index(dup, "causal_mask_solution")
    dup["cells"].insert(i + 1, copy.deepcopy(dup["cells"][i]))
    _write(course, "s_duplicated_cell", dup)
    split = copy.deepcopy(good)
    i = _cell_index(split, "kv_cache_bytes_solution")
    first, rest = split["cells"][i].source.split("### BEGIN SOLUTION", 1)
    tail = copy.deepcopy(split["cells"][i])
    tail.metadata = {}
    split["cells"][i].source = first + "### BEGIN SOLUTION\n    pass\n    ### END SOLUTION"
    tail.source = ("def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, "
                   "bytes_per_element):\n    return 2 * n_layers * n_kv_heads * d_head * "
                   "seq_len * batch * bytes_per_element\n")
    split["cells"].insert(i + 1, tail)
    _write(course, "s_split_cell", split)
    to_md = copy.deepcopy(good)
    i = _cell_index(to_md, "padding_mask_visible_test")
    to_md["cells"][i] = nbformat.v4.new_markdown_cell(to_md["cells"][i].source)
    _write(course, "s_test_cell_markdown", to_md)
    to_raw = copy.deepcopy(good)
    i = _cell_index(to_raw, "merge_heads_solution")
    cell = to_raw["cells"][i]
    to_raw["cells"][i] = nbformat.v4.new_raw_cell(cell.source, metadata=cell.metadata)
    _write(course, "s_solution_cell_raw", to_raw)
    _write(course, "s_renamed", good, name="attention (1).ipynb")
    accents = copy.deepcopy(good)
    i = _cell_index(accents, "softmax_solution")
    accents["cells"][i].source = "# Però l'attenzione è tutto — ✓ 注意\n" + \
        accents["cells"][i].source
    _write(course, "s_non_ascii", accents)
    big = copy.deepcopy(good)
    big["cells"][1]["outputs"] = [nbformat.v4.new_output("stream", name="stdout",
                                                         text="x" * (30 * 2**20))]
    _write(course, "s_huge_output", big)
    py = course / "submitted" / "s_python_file" / "attention"
    py.mkdir(parents=True)
    answers = "\n".join(c.source for c in good.cells if c.get("cell_type") == "code" and
                        c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_answer"))
    (py / "attention.py").write_text(open(os.path.join(ROOT, "solutions", "attention.py"))
                                     .read() + "\n" + answers)
    (course / "submitted" / "s_empty" / "attention").mkdir(parents=True)
    return course


def _batch(course, *extra):
    return subprocess.Popen([sys.executable, "-m", "grader_tests", "batch", "submitted",
                             "--workers", "2", "--summary-json", "summary.json", *extra],
                            cwd=course, env=kit_env(LANG="C", LC_ALL="C"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _log(course):
    path = course / "batch_log.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_killed_batch_resumes_without_grading_twice(bad_class):
    course = bad_class
    proc = _batch(course)
    deadline = time.time() + 300
    while time.time() < deadline and len([r for r in _log(course) if r.get("sha256")]) < 2:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _log(course)
    graded_before = {r["student"] for r in before if r.get("sha256")}
    assert graded_before, "the first run graded nobody before it was killed"
    students = sorted(os.listdir(course / "submitted"))
    assert len(graded_before) < len([s for s in students if s != "s_empty"]), \
        "the first run finished before it could be killed: nothing to resume"

    proc = _batch(course)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-3000:]
    after = _log(course)
    graded = [r["student"] for r in after if r.get("sha256")]
    assert sorted(graded) == sorted(set(graded)), "a student was graded twice"
    assert set(graded) | {"s_empty"} == set(students)

    from nbgrader.api import Gradebook

    summary = json.loads((course / "summary.json").read_text())
    rows = {r["student"]: r for r in summary["students"]}
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        for student in students:
            if student == "s_invalid_json":  # not graded: no grade in the gradebook
                continue
            sub = gb.find_submission("attention", student)
            assert sub.score == pytest.approx(rows[student]["score"]), student

    full = rows["s_correct"]["score"]
    assert full == pytest.approx(100.0), rows["s_correct"]
    for student in ("s_nbformat_44", "s_deleted_cell", "s_duplicated_cell", "s_split_cell",
                    "s_test_cell_markdown", "s_solution_cell_raw", "s_renamed", "s_non_ascii",
                    "s_huge_output", "s_python_file"):
        assert rows[student]["score"] == pytest.approx(full), (student, rows[student])
    assert rows["s_renamed"]["errors"] and "attention (1).ipynb" in rows["s_renamed"]["errors"][0]
    assert "python file" in " ".join(rows["s_python_file"]["errors"]).lower()
    for student, words, score in (("s_invalid_json", "not a readable notebook", None),
                                  ("s_empty", "empty", 0)):
        assert rows[student]["score"] == score, rows[student]
        assert any(words in e for e in rows[student]["errors"]), rows[student]
    assert summary["faults"], "the per-fault summary is empty"
    assert "students per fault id" in out


def test_training_class_is_graded_into_the_gradebook(tmp_path):
    """``batch --assignment training``: the training notebooks of a small class, graded in
    the sandbox with the training graders, land in the gradebook under `training`, with
    their own log (resuming `attention` never skips a `training` student)."""
    from nbgrader.api import Gradebook, MissingEntry

    from grader_tests.checks_training import POINTS_TRAINING

    root = tmp_path / "course"
    shutil.copytree(os.path.join(ROOT, "source", "training"), root / "source" / "training")
    shutil.copy(os.path.join(ROOT, "nbgrader_config.py"), root / "nbgrader_config.py")
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "training",
                           "--force"], cwd=root, env=kit_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    release = nbformat.read(str(root / "release" / "training" / "training.ipynb"), 4)
    source = nbformat.read(str(root / "source" / "training" / "training.ipynb"), 4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    correct = copy.deepcopy(release)
    for cell in correct.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            cell.source = answers[meta["grade_id"]]
    buggy = copy.deepcopy(correct)
    cell = buggy.cells[_cell_index(buggy, "answer_accuracy_solution")]
    assert "def answer_accuracy" in cell.source
    cell.source += "\n\n_aa = answer_accuracy\ndef answer_accuracy(generated, expected):\n" \
                   "    token, sequence = _aa(generated, expected)\n    return sequence, token\n"
    for student, nb in (("t_correct", correct), ("t_bug", buggy), ("t_stubs", release),
                        ("t_locked", correct)):
        folder = root / "submitted" / student / "training"
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / "training.ipynb"))
    # the instructor's decision: training released to every student but t_locked
    from grader_tests.unlock import LEDGER, save_ledger

    save_ledger(root / "unlocked" / LEDGER, {"assignment": "training", "students": {
        s: {"folder": f"{s}/training"} for s in ("t_correct", "t_bug", "t_stubs")}})

    (root / "submitted" / "t_absent" / "attention").mkdir(parents=True)  # no training folder
    proc = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                           "--assignment", "training", "--workers", "2", "--summary-json",
                           "summary.json"], cwd=root, env=kit_env(), capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (root / "batch_log_training.jsonl").exists() and not (root / "batch_log.jsonl").exists()
    rows = {r["student"]: r for r in json.loads((root / "summary.json").read_text())["students"]}
    assert rows["t_correct"]["score"] == pytest.approx(100.0), rows["t_correct"]
    with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb, pytest.raises(MissingEntry):
        gb.find_submission("training", "t_locked")
    assert rows["t_stubs"]["score"] == 0
    assert rows["t_bug"]["score"] == pytest.approx(100.0 - POINTS_TRAINING["answer_accuracy"]), \
        rows["t_bug"]
    assert rows["t_absent"]["not_submitted"] and rows["t_absent"]["score"] is None
    # t_locked's correct notebook is not graded: training was not released to them
    assert "t_locked" not in rows
    assert "not graded: 'submitted/t_locked/training': not released to this student" in proc.stderr
    with Gradebook("sqlite:///" + str(root / "gradebook.db")) as gb:
        for student, row in rows.items():
            if student in ("t_absent", "t_locked"):
                with pytest.raises(MissingEntry):
                    gb.find_submission("training", student)
                continue
            assert gb.find_submission("training", student).score == pytest.approx(row["score"])
        grade = gb.find_grade("answer_accuracy_hidden_checks", "training", "training", "t_bug")
        assert grade.auto_score == 0


def test_a_newer_file_that_ends_in_a_grading_error_withdraws_the_older_grade(course, tmp_path):
    """The gradebook never shows a grade that belongs to an older file: after a grading
    error on a resubmission every hidden-check cell is "not graded" and the notebook is
    flagged. The batch opens the gradebook as the course's own (no course row added)."""
    from nbgrader.api import Gradebook

    from grader_tests import batch
    from grader_tests.core import POINTS

    db = tmp_path / "gradebook.db"
    shutil.copy(course / "gradebook.db", db)
    url = "sqlite:///" + str(db)
    course_id = batch.configured(str(course), "course_id")
    assert course_id == "attention-kit"
    from nbgrader.api import Course

    with Gradebook(url, course_id) as gb:
        courses = sorted(c.id for c in gb.db.query(Course).all())
    record = {"student": "s_resubmits", "report": batch.zero_report("test"), "flags": []}
    record["report"]["functions"]["softmax"]["score"] = 7.0
    batch.write_gradebook(url, "attention", record, course_id)
    with Gradebook(url, course_id) as gb:
        assert gb.find_grade("softmax_hidden_checks", "attention", "attention",
                             "s_resubmits").auto_score == 7.0
    assert batch.withdraw_grade(url, "attention", "s_resubmits", course_id)
    assert not batch.withdraw_grade(url, "attention", "nobody", course_id)
    with Gradebook(url, course_id) as gb:
        for name in POINTS:
            grade = gb.find_grade(f"{name}_hidden_checks", "attention", "attention", "s_resubmits")
            assert grade.auto_score is None and grade.needs_manual_grade
        assert gb.find_submission_notebook("attention", "attention", "s_resubmits").flagged
        assert sorted(c.id for c in gb.db.query(Course).all()) == courses
