"""The one rule for which notebook of a submission folder is graded (both paths use it):
most answered solution cells; on a tie the assignment's own name, then sort order; a file
that is not a notebook counts as none answered; the kit's own staged copy never counts."""

import json
import os
import re

from grader_tests.notebook_choice import (answered_cells, choose_notebook, note_cell,
                                          read_note, stage_chosen_notebook)


def _nb(answered, stubs):
    cells = [{"cell_type": "code", "metadata": {"nbgrader": {"solution": True}},
              "source": "def f():\n    return 1\n", "outputs": [], "execution_count": None}
             for _ in range(answered)]
    cells += [{"cell_type": "code", "metadata": {"nbgrader": {"solution": True}},
               "source": "def g():\n    # YOUR CODE HERE\n    raise NotImplementedError()",
               "outputs": [], "execution_count": None} for _ in range(stubs)]
    cells.append({"cell_type": "code", "metadata": {"nbgrader": {"grade": True}},
                  "source": "assert True", "outputs": [], "execution_count": None})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _write(folder, name, nb):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(nb if isinstance(nb, str) else json.dumps(nb), encoding="utf-8")
    return path


def test_answered_cells_counts_solution_cells_without_the_stub(tmp_path):
    assert answered_cells(str(_write(tmp_path, "a.ipynb", _nb(3, 2)))) == 3
    assert answered_cells(str(_write(tmp_path, "b.ipynb", "{not json"))) == -1


def test_the_expected_notebook_alone_is_graded_without_a_note(tmp_path):
    _write(tmp_path, "attention.ipynb", _nb(0, 5))
    choice = choose_notebook(str(tmp_path), "attention")
    assert choice.path.endswith("attention.ipynb") and choice.note is None


def test_the_most_answered_notebook_wins_and_the_others_are_named(tmp_path):
    _write(tmp_path, "attention.ipynb", _nb(0, 5))
    _write(tmp_path, "attention (1).ipynb", _nb(2, 3))
    _write(tmp_path, "attention_final.ipynb", _nb(5, 0))
    _write(tmp_path, "broken.ipynb", "{")
    choice = choose_notebook(str(tmp_path), "attention")
    assert choice.path.endswith("attention_final.ipynb") and choice.answered == 5
    assert [name for name, _ in choice.others] == ["attention (1).ipynb", "attention.ipynb",
                                                   "broken.ipynb"]
    assert "graded attention_final.ipynb as attention.ipynb" in choice.note
    assert "attention (1).ipynb (2 answered)" in choice.note
    assert "broken.ipynb (0 answered)" in choice.note


def test_a_tie_goes_to_the_expected_name_then_to_sort_order(tmp_path):
    _write(tmp_path, "b.ipynb", _nb(4, 1))
    _write(tmp_path, "a.ipynb", _nb(4, 1))
    assert choose_notebook(str(tmp_path), "attention").path.endswith("a.ipynb")
    _write(tmp_path, "attention.ipynb", _nb(4, 1))
    assert choose_notebook(str(tmp_path), "attention").path.endswith("attention.ipynb")


def test_an_empty_folder_has_nothing_to_grade(tmp_path):
    assert choose_notebook(str(tmp_path), "attention").path is None


def test_nbgraders_hook_grades_the_same_notebook_and_loses_no_file(tmp_path):
    folder = tmp_path / "submitted" / "s1" / "attention"
    stub = _write(folder, "attention.ipynb", _nb(0, 5))
    original = stub.read_text(encoding="utf-8")
    work = _write(folder, "attention_work.ipynb", _nb(5, 0))
    notebooks = [str(folder / "attention.ipynb"), str(folder / "attention_work.ipynb")]
    stage_chosen_notebook("attention", "*", notebooks)
    assert notebooks == [str(folder / "attention.ipynb")]
    # the graded file is the work, byte for byte; the note waits for the autograded copy
    assert (folder / "attention.ipynb").read_bytes() == work.read_bytes()
    note = read_note(str(folder))
    assert "graded attention_work.ipynb as attention.ipynb" in note
    kept = tmp_path / ".grading_chosen" / "s1" / "attention" / "attention.ipynb"
    assert kept.read_text(encoding="utf-8") == original
    assert ".grading_chosen/s1/attention/attention.ipynb" in note
    # run again (a re-grade): the same notebook; the kit's copy is never a candidate
    for _ in range(2):
        notebooks = [str(folder / "attention.ipynb"), str(folder / "attention_work.ipynb")]
        stage_chosen_notebook("attention", "*", notebooks)
        assert answered_cells(notebooks[0]) == 5
        assert choose_notebook(str(folder), "attention").path.endswith("attention_work.ipynb")
    assert kept.read_text(encoding="utf-8") == original


def test_the_students_own_best_notebook_is_graded_in_place_run_after_run(tmp_path):
    folder = tmp_path / "submitted" / "s2" / "attention"
    best = _write(folder, "attention.ipynb", _nb(3, 0))
    before = best.read_bytes()
    _write(folder, "attention (1).ipynb", _nb(0, 3))
    for _ in range(3):
        notebooks = [str(folder / "attention.ipynb"), str(folder / "attention (1).ipynb")]
        stage_chosen_notebook("attention", "*", notebooks)
        assert notebooks == [str(folder / "attention.ipynb")]
        assert best.read_bytes() == before
    assert "not graded: attention (1).ipynb (0 answered)" in read_note(str(folder))


def test_a_note_shows_file_names_as_text():
    cell = note_cell("not graded: <img src=x onerror=alert(1)>.ipynb (0 answered).")
    assert "<img" not in cell["source"] and "&lt;img" in cell["source"]
    assert cell["metadata"]["grading_note"] is True


def test_a_symbolic_link_is_never_chosen(tmp_path):
    secret = _write(tmp_path / "instructor", "solution.ipynb", _nb(9, 0))
    folder = tmp_path / "submitted" / "s1" / "attention"
    _write(folder, "attention.ipynb", _nb(1, 8))
    (folder / "attention_final.ipynb").symlink_to(secret)
    choice = choose_notebook(str(folder), "attention")
    assert choice.path.endswith("attention.ipynb") and choice.note is None


def test_nbgraders_hook_drops_a_symbolic_link_from_what_it_grades(tmp_path):
    secret = _write(tmp_path / "instructor", "solution.ipynb", _nb(9, 0))
    folder = tmp_path / "submitted" / "s1" / "attention"
    folder.mkdir(parents=True)
    (folder / "attention.ipynb").symlink_to(secret)
    notebooks = [str(folder / "attention.ipynb")]
    stage_chosen_notebook("attention", "*", notebooks)
    assert notebooks == []
    # the link itself is set aside (nbgrader would copy what it points at), the target kept
    assert not os.path.lexists(folder / "attention.ipynb")
    assert os.path.islink(tmp_path / ".grading_chosen" / "s1" / "attention" / "links" /
                          "attention.ipynb")
    assert answered_cells(str(secret)) == 9


def test_nbgraders_hook_writes_nothing_for_a_plain_submission(tmp_path):
    folder = tmp_path / "submitted" / "s1" / "attention"
    _write(folder, "attention.ipynb", _nb(2, 3))
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    notebooks = [str(folder / "attention.ipynb")]
    stage_chosen_notebook("attention", "*", notebooks)
    assert notebooks == [str(folder / "attention.ipynb")]
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before


def test_the_note_shows_a_file_name_as_text():
    """Markdown and HTML in a file name render as the characters they are; a newline or an
    escape character is shown written out."""
    from grader_tests.feedback import markdown_to_html
    from grader_tests.report import visible

    note = "graded *a*_[b](c)_`d`\n# e <b>&amp;\x1b $x$.ipynb as attention.ipynb."
    cell = note_cell(note)
    assert "<" not in cell["source"] and ">" not in cell["source"] and "\n" not in cell["source"]
    html = markdown_to_html({"cell": cell}, cell["source"])
    text = re.sub(r"<[^>]+>", "", html).strip()
    assert text == ("[grading] Graded *a*_[b](c)_`d`\\n# e &lt;b&gt;&amp;amp;\\x1b $x$.ipynb "
                    "as attention.ipynb."), html
    assert visible("a\r\x1b[2K\u202eb\tc") == "a\\r\\x1b[2K\\u202eb\\tc"
    assert visible("attention (1) é.ipynb") == "attention (1) é.ipynb"
