"""What a student reads when the trouble is in how the notebook loads or runs
(``tests/catalogue/loading.py``): a cell that never finishes is skipped by name and the
rest graded; a cell that does not parse is a syntax error with its line and the grading's
Python, not a missing function; an output too large for a message is refused with its
size and the notebook goes on; a notebook whose cells lost their metadata gets its
restored cells beside their functions, and the kit's own cells are neither run as the
student's nor blamed. Each on the grader's path (jailed) and on nbgrader's, which agree
on the score."""

from __future__ import annotations

import shutil
import subprocess
import sys

import nbformat
import pytest

from grader_tests import evidence, jail, sandbox, submission
from grader_tests.assignments import ATTENTION
from tests.catalogue.loading import LOADING, correct
from tests.helpers import kit_env, release_course

needs_jail = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")
BY_ID = {entry.id: entry for entry in LOADING}


def _write(tmp_path, entry):
    path = tmp_path / "attention.ipynb"
    path.write_text(entry.text(), encoding="utf-8")
    return path


# --- the loader, the scan and the syntax reading, without the jail ---------------------


def test_the_catalogue_changes_the_correct_notebook_and_names_a_cause():
    base = nbformat.writes(correct())
    for entry in LOADING:
        assert entry.text() != base, entry.id
        assert entry.path in ("grade", "kernel")
        assert set(entry.lost) <= set(ATTENTION.points)


def test_a_cell_that_does_not_parse_is_named_with_its_line_and_the_python_version(tmp_path):
    path = _write(tmp_path, BY_ID["an f-string of Python 3.12"])
    why = submission.undefined_by_syntax(str(path))
    assert set(why) == {"layer_norm_forward"}, why  # its graded part, read from the lines too
    for phrase in BY_ID["an f-string of Python 3.12"].cause:
        assert phrase in why["layer_norm_forward"], why
    loaded = submission.load(str(path))
    assert "layer_norm_forward" not in loaded.namespace
    assert why["layer_norm_forward"] in loaded.cell_errors
    assert callable(loaded.namespace["layer_norm_backward"])  # the other cells ran


def test_undefined_by_syntax_reads_a_py_file_and_a_notebook_that_parses(tmp_path):
    good = tmp_path / "good.ipynb"
    good.write_text(nbformat.writes(correct()), encoding="utf-8")
    assert submission.undefined_by_syntax(str(good)) == {}
    bad = tmp_path / "bad.py"
    bad.write_text("def softmax(scores, axis=-1):\n    return (\n\nn_heads = 2\n",
                   encoding="utf-8")
    why = submission.undefined_by_syntax(str(bad))
    assert set(why) == {"softmax", "n_heads"} and why["softmax"].startswith("the file: ")


def test_the_loader_announces_each_cell_and_runs_none_it_is_told_to_skip(tmp_path):
    path = tmp_path / "attention.ipynb"
    path.write_text(nbformat.writes(correct()), encoding="utf-8")
    announced = []
    at = next(i for i, c in enumerate(correct().cells)
              if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_solution")
    loaded = submission.load(str(path), on_cell=announced.append, skip={at})
    kept = [i for i, _ in submission.code_of_notebook(str(path))]
    assert announced == [i for i in kept if i != at] and announced == sorted(announced)
    assert "softmax" not in loaded.namespace and "causal_mask" in loaded.namespace


def test_the_kits_own_cells_without_metadata_are_recognised_and_never_flagged(tmp_path):
    path = _write(tmp_path, BY_ID["cells without their nbgrader metadata"])
    cells = submission.read_cells(str(path))
    kit = evidence.kit_cells(str(path))
    original = correct().cells
    role = {i: (c.metadata.get("nbgrader", {}).get("grade_id") or "", c.metadata.get("tags"))
            for i, c in enumerate(original)}
    # the lesson's cells and the visible and hidden tests: the kit's, left out of the load
    expected = {i for i, (grade_id, tags) in role.items() if original[i].cell_type == "code"
                and (grade_id.startswith("lesson_") or grade_id.endswith(("_visible_test",
                                                                         "_hidden_checks"))
                     or grade_id == "visible_checks_summary")}
    assert kit == expected, (sorted(kit - expected), sorted(expected - kit))
    assert not any(cells[i]["metadata"]["nbgrader"] for i in kit)
    assert evidence.kit_references(str(path)) == []
    loaded = submission.load(str(path), skip=kit)
    assert loaded.cell_errors == [], loaded.cell_errors
    # a cell the student wrote is still read, whatever the metadata
    nb = BY_ID["cells without their nbgrader metadata"].notebook()
    nb.cells.append(nbformat.v4.new_code_cell("import socket\n"))
    path.write_text(nbformat.writes(nb), encoding="utf-8")
    assert len(nb.cells) - 1 not in evidence.kit_cells(str(path))
    assert [f for f in evidence.kit_references(str(path)) if "socket" in f]


# --- the grader's path, in the jail ----------------------------------------------------


def _graded(path):
    results, cell_errors, flags = sandbox.grade_isolated(str(path))
    return results, cell_errors, flags


def _check_grade(entry, results, cell_errors, flags):
    for name, result in results.items():
        if name in entry.lost:
            assert result.score == 0.0, (name, result.score)
            assert {c.fault for c in result.checks} == {entry.lost[name]}, result.checks
            for phrase in entry.cause:
                assert all(phrase in c.message or phrase in " ".join(cell_errors)
                           for c in result.checks), (phrase, result.checks[0].message)
        else:
            assert result.score == result.max_score, (name, result.checks)
    notes = " ".join(cell_errors)
    if entry.path == "grade":
        for phrase in entry.cause:
            assert phrase in notes, (phrase, cell_errors)
    assert flags == [], flags
    assert "lesson" not in notes and "Visible checks" not in notes, cell_errors


@pytest.mark.slow
@needs_jail
@pytest.mark.parametrize("entry", [e for e in LOADING if e.path == "grade" or not e.cause],
                         ids=lambda e: e.id)
def test_the_grader_gives_each_loading_message_its_cause(tmp_path, monkeypatch, entry):
    # a shorter loading time-out than the kit's 60 s (the same rule: a cell may run a
    # third of it), so that the loop is stopped in seconds
    monkeypatch.setattr(sandbox, "LOAD_TIME_LIMIT", 15.0)
    path = _write(tmp_path, entry)
    results, cell_errors, flags = _graded(path)
    _check_grade(entry, results, cell_errors, flags)
    if entry.id.startswith("a top-level loop"):
        assert len(cell_errors) == 1, cell_errors  # named once, however often it reloads


@needs_jail
def test_a_worker_that_announces_a_cell_twice_or_backwards_is_stopped(tmp_path):
    path = tmp_path / "attention.ipynb"
    path.write_text(nbformat.writes(correct()), encoding="utf-8")
    box = sandbox.Sandbox(str(path))
    replies = iter([{"op": "cell", "index": 5}, {"op": "cell", "index": 5}])
    box._send = lambda message: None
    box._receive = lambda deadline: next(replies)
    stopped = []
    box.stop = lambda: stopped.append(True)
    with pytest.raises(sandbox.WorkerDied):
        box._load({"op": "load"})
    assert stopped == [True]


# --- nbgrader's path -------------------------------------------------------------------


@pytest.fixture(scope="module")
def autograded(tmp_path_factory):
    """A course with one student per entry of the catalogue (and ``honest``, the correct
    notebook), autograded once: ``{student: (autograded notebook, score)}``."""
    course = release_course(tmp_path_factory.mktemp("loading"))
    students = {"honest": correct()} | {f"s{i}": e.notebook() for i, e in enumerate(LOADING)}
    for student, nb in students.items():
        folder = course / "submitted" / student / "attention"
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / "attention.ipynb"))
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--create", "--force"], cwd=course, env=kit_env(),
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in students:
            nb = nbformat.read(str(course / "autograded" / student / "attention" /
                                   "attention.ipynb"), 4)
            scores = {g.name: float(g.score) for g in
                      gb.find_submission_notebook("attention", "attention", student).grades}
            out[student] = (nb, scores, gb.find_submission_notebook(
                "attention", "attention", student).flagged)
    yield out
    shutil.rmtree(course, ignore_errors=True)


def _expected_scores(entry):
    return {f"{name}_hidden_checks": 0.0 if name in entry.lost else float(points)
            for name, points in ATTENTION.points.items()}


@pytest.mark.slow
@needs_jail
@pytest.mark.parametrize("index", range(len(LOADING)), ids=[e.id for e in LOADING])
def test_nbgraders_path_agrees_and_says_the_same_cause(autograded, index):
    entry = LOADING[index]
    nb, scores, flagged = autograded[f"s{index}"]
    assert scores == _expected_scores(entry), scores
    assert not flagged
    text = nbformat.writes(nb)
    for phrase in entry.cause:  # in the hidden cells' reports, or the kernel's outputs
        assert phrase in text, phrase
    if entry.path == "kernel" or not entry.cause:
        # no cell reports a kernel that stopped, and none was left unrun
        assert "the kernel stopped responding" not in text
        assert "[not run:" not in text
    if entry.path == "kernel":
        image = next(c for c in nb.cells if "the image cell ran to its end" in c.source)
        shown = "".join(o.get("text", "") for o in image.outputs)
        assert "was refused" in shown and "the image cell ran to its end" in shown, shown
        visible = [c for c in nb.cells if c.source.startswith('"""Visible checks of')]
        assert visible and all(c.outputs for c in visible)


@pytest.mark.slow
@needs_jail
def test_restored_hidden_cells_go_back_beside_their_functions(autograded):
    index = next(i for i, e in enumerate(LOADING) if e.id.startswith("cells without"))
    nb, _scores, _flagged = autograded[f"s{index}"]
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    for name in ATTENTION.points:
        at = ids.index(f"{name}_hidden_checks")
        before = nb.cells[at - 1].source
        # right after the part's visible test, as in the released notebook
        assert before == next(c.source for c in correct().cells if c.metadata.get(
            "nbgrader", {}).get("grade_id") == f"{name}_visible_test"), (name, before[:80])


@pytest.mark.slow
@needs_jail
def test_both_paths_give_the_same_points(autograded, tmp_path, monkeypatch):
    for index, entry in enumerate(LOADING):
        _nb, scores, _flagged = autograded[f"s{index}"]
        results, _errors, _flags = _graded(_write(tmp_path, entry))
        assert {f"{n}_hidden_checks": r.score for n, r in results.items()} == scores, entry.id
    assert autograded["honest"][1] == {f"{name}_hidden_checks": float(points)
                                       for name, points in ATTENTION.points.items()}
