"""Two attacks by a student who has the kit's clone and writes their own submission folder.

* A callback answered in the grader's process (``sandbox.Sandbox._answer_callback``): a
  graded function may call the graded names it builds on (``guard.CALLEES``), answered by
  the reference in the grader, on whatever arguments the student passes. ``combine_masks``
  calling ``causal_mask(12000)`` once took the grader's peak memory from about 130 MB to
  about 820 MB (``causal_mask(60000)`` would ask for about 18 GB); the answer was sent back
  with no bound on its size, and a long reference call held the grader past the call's
  time limit. A callback is now bounded before the reference runs
  (``guard.check_callee_size``), on the wire (``MAX_MESSAGE_BYTES``) and in time (the
  call's own deadline); a refused one is the student's ``MemoryError`` in that function.
* A resubmission taken for the kit's own copy (``notebook_choice``): the pre-convert hook
  remembered the digest of every copy it wrote, forever, so a student's later
  ``attention.ipynb`` with the bytes of an earlier copy was left out by ``batch``: 'the
  submission folder is empty', 0 points. The copy is now known by the file itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from grader_tests import jail
from grader_tests.core import POINTS
from grader_tests.guard import CALLBACK_MAX_ELEMENTS, CalleeTooLarge, callee_elements, \
    check_callee_size
from tests.helpers import ROOT, correct_notebook, kit_env

needs_jail = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")


# --- the size of a callback, read from its arguments ------------------------------------

def test_callee_elements_follows_the_contracts_output_shapes():
    assert callee_elements("causal_mask", [12000], {}) == 144_000_000
    assert callee_elements("causal_mask", [], {"T": 7}) == 49
    assert callee_elements("padding_mask", [[1, 2, 3], 5], {}) == 15
    causal, padding = np.ones((4, 4), bool), np.ones((3, 4), bool)
    assert callee_elements("combine_masks", [causal, padding], {}) == 3 * 4 * 4
    q, k = np.ones((2, 3, 5, 4)), np.ones((2, 3, 6, 4))
    # the scores (2, 3, 5, 6) are smaller than the inputs: the inputs count
    assert callee_elements("scaled_dot_product_attention", [q, k, k], {}) == 120 + 144 + 144
    wide_q, wide_k = np.ones((1, 100, 2)), np.ones((1, 300, 2))
    assert callee_elements("scaled_dot_product_attention", [wide_q, wide_k, wide_k],
                           {}) == 100 * 300
    x = np.ones((2, 50, 8))
    weights = [np.ones((8, 8))] * 4
    assert callee_elements("multi_head_attention", [x, *weights, 4], {}) == 2 * 4 * 50 * 50
    assert callee_elements("softmax", [np.ones((3, 4))], {}) == 12
    assert callee_elements("sinusoidal_positions", [10, 6], {}) == 60
    # a string is no size: one element (the reference raises on it)
    assert callee_elements("causal_mask", ["12000"], {}) == 1


def test_a_callback_past_the_bound_is_refused_with_a_message_for_the_student():
    check_callee_size("causal_mask", [2**11], {})  # 4 Mi elements: allowed
    with pytest.raises(CalleeTooLarge, match=r"causal_mask .* 144000000 elements"):
        check_callee_size("causal_mask", [12000], {})
    assert issubclass(CalleeTooLarge, MemoryError)
    assert CALLBACK_MAX_ELEMENTS == 2**22


# --- the grader's memory and time at the student's command --------------------------------

MEMORY_PROBE = textwrap.dedent('''
    import json, resource, sys
    from grader_tests.sandbox import grade_isolated

    results, _, flags = grade_isolated(sys.argv[1], names=["combine_masks"])
    result = results["combine_masks"]
    print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                      "score": result.score, "flags": flags,
                      "messages": [c.message for c in result.checks if not c.passed]}))
''')

HONEST_COMBINE = """import numpy as np


def combine_masks(causal, padding):
    return np.asarray(causal) & np.asarray(padding)[..., None, :]
"""

GREEDY_COMBINE = """import numpy as np


def combine_masks(causal, padding):
    causal_mask(12000)  # answered by the reference, in the grader's process
    return np.asarray(causal) & np.asarray(padding)[..., None, :]
"""

# a callee the student calls within bounds, but many times over: the grader's time spent
# answering counts against the call's own limit
SLOW_COMBINE = """import numpy as np


def combine_masks(causal, padding):
    for _ in range(10**6):
        causal_mask(2000)
    return np.asarray(causal) & np.asarray(padding)[..., None, :]
"""


def _grade_combine(tmp_path, source, name):
    probe = tmp_path / "probe.py"
    probe.write_text(MEMORY_PROBE, encoding="utf-8")
    submission = tmp_path / name
    submission.write_text(source, encoding="utf-8")
    done = subprocess.run([sys.executable, str(probe), str(submission)], cwd=ROOT,
                          env=kit_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@needs_jail
@pytest.mark.slow
def test_a_callback_cannot_make_the_grader_allocate_what_the_worker_may_not(tmp_path):
    """One call of ``causal_mask(12000)`` from the student's ``combine_masks`` grew the
    grader's own peak memory by several hundred MB; now it is refused, and the student's
    function fails with the reason."""
    honest = _grade_combine(tmp_path, HONEST_COMBINE, "honest.py")
    greedy = _grade_combine(tmp_path, GREEDY_COMBINE, "greedy.py")
    assert honest["score"] == POINTS["combine_masks"] and not honest["messages"], honest
    assert greedy["peak_mb"] - honest["peak_mb"] < 256, (
        f"the grader's peak memory went from {honest['peak_mb']} MB (honest combine_masks) "
        f"to {greedy['peak_mb']} MB: a callback of the student's made the grader allocate")
    assert greedy["score"] == 0.0, greedy
    assert any("MemoryError: causal_mask" in m and "144000000 elements" in m
               for m in greedy["messages"]), greedy


@needs_jail
@pytest.mark.slow
def test_time_spent_answering_callbacks_counts_against_the_call_limit(tmp_path):
    """A million callbacks, each within bounds: the call times out at its own limit, the
    grading goes on and ends."""
    slow = _grade_combine(tmp_path, SLOW_COMBINE, "slow.py")
    assert slow["score"] == 0.0, slow
    assert slow["messages"], slow


# --- a resubmission taken for the kit's own copy -----------------------------------------

def test_a_resubmitted_notebook_equal_to_an_old_copy_is_still_graded(tmp_path):
    """The work handed in as ``attention (1).ipynb``, copied by the hook, then handed in
    again as ``attention.ipynb`` alone: the batch grades it."""
    from grader_tests.batch import find_submission
    from grader_tests.notebook_choice import answered_cells, stage_chosen_notebook

    folder = tmp_path / "course" / "submitted" / "bob" / "attention"
    folder.mkdir(parents=True)
    work = json.dumps(correct_notebook(Path(ROOT))).encode("utf-8")
    (folder / "attention (1).ipynb").write_bytes(work)
    notebooks = sorted(str(p) for p in folder.glob("*.ipynb"))
    stage_chosen_notebook(assignment="attention", student="*", notebooks=notebooks)
    assert [os.path.basename(p) for p in notebooks] == ["attention.ipynb"]
    # the resubmission replaces the folder: the same work, under the expected name
    shutil.rmtree(folder)
    folder.mkdir()
    (folder / "attention.ipynb").write_bytes(work)
    path, note = find_submission(str(folder), "attention")
    assert path == str(folder / "attention.ipynb"), note
    assert answered_cells(path) > 0


def test_the_copy_rewritten_in_place_with_its_own_bytes_is_the_students(tmp_path):
    """The kit's copy overwritten in place (same inode) by a resubmission of the very same
    bytes is a new write: the student's, left in the choice."""
    from grader_tests.notebook_choice import is_grading_copy, notebooks_in, \
        stage_chosen_notebook

    folder = tmp_path / "course" / "submitted" / "dora" / "attention"
    folder.mkdir(parents=True)
    work = json.dumps(correct_notebook(Path(ROOT))).encode("utf-8")
    (folder / "work.ipynb").write_bytes(work)
    notebooks = [str(folder / "work.ipynb")]
    stage_chosen_notebook(assignment="attention", student="*", notebooks=notebooks)
    copy = folder / "attention.ipynb"
    assert is_grading_copy(str(copy)) and notebooks_in(str(folder)) == [
        str(folder / "work.ipynb")]
    with open(copy, "r+b") as f:  # the same bytes, written again
        f.write(work)
    assert not is_grading_copy(str(copy))
    assert str(copy) in notebooks_in(str(folder))
