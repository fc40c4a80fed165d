"""Round 5 of attacks by a student: the training gate's unlock command and its inputs.

Each test asserts the secure behaviour; at the time of writing each one FAILS, showing
the attack works.

* A student id that names the unlock ledger's temporary file (``unlocked.json.tmp``, a
  name ``c.FileNameCollectorPlugin.named_regexp`` accepts, as does a folder of
  ``submitted/`` or a user name on the exchange): once that student is eligible,
  ``tools/unlock_training.py`` makes ``unlocked/unlocked.json.tmp/`` a folder, and every
  later ``save_ledger`` fails with ``IsADirectoryError``. The command crashes on that
  student and on every later run: no student after them in sort order, and no student
  graded later, is ever unlocked; a student released before the crash gets the training
  folder (and the exchange release) without a ledger record, so each later run deletes
  their folder and releases it again.
* The late penalty is not part of the unlock's score: ``decide`` reads nbgrader's
  ``SubmittedAssignment.score``, the raw points, while ``nbgrader export``, formgrader and
  the demo's table report the score after the penalty. A notebook handed in 10 days late
  (every point taken off: 0 in ``grades.csv``) opens the gate at "full marks".
"""

from __future__ import annotations

import json
import re
import warnings

from tests.helpers import ROOT, release_folder, set_scores, unlock_module


def _collector_regexp() -> str:
    text = (ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    found = re.search(r"named_regexp = \(\s*(r\".*?\")\s*(r\".*?\")\s*\)", text, re.S)
    assert found, "the zip_collect pattern moved"
    return eval(found.group(1)) + eval(found.group(2))  # two raw string literals


def test_a_student_id_naming_the_ledgers_temporary_file_does_not_lock_out_the_class(
        tmp_path, gradebooks):
    # zip_collect takes this id from a Canvas-style file name
    assert re.match(_collector_regexp(),
                    "/x/unlocked.json.tmp_48213_1190044_attention.ipynb")
    unlock = unlock_module()
    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    full = unlock.parse_threshold("full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40), "unlocked.json.tmp": (60, 40), "zoe": (60, 40)})
        outcome = []
        try:
            newly, _, _ = unlock.unlock(gb, release, unlocked, full)
            outcome = [v["student"] for v in newly]
        except OSError as exc:  # IsADirectoryError: the ledger cannot be written any more
            outcome = [f"crashed: {exc!r}"]
        set_scores(gb, {"bo": (60, 40)})  # an honest student graded later
        try:
            newly, _, _ = unlock.unlock(gb, release, unlocked, full)
            outcome += [v["student"] for v in newly]
        except OSError as exc:
            outcome += [f"crashed again: {exc!r}"]
        gb.close()
    assert not any(str(o).startswith("crashed") for o in outcome), outcome
    ledger = json.loads((unlocked / "unlocked.json").read_text())
    assert {"zoe", "bo"} <= set(ledger["students"]), ledger


def test_the_unlock_judges_the_score_after_the_late_penalty(tmp_path, gradebooks):
    unlock = unlock_module()
    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40), "late": (60, 40)})
        # 10 days late: the kit's LatePenaltyPerDay takes every point (grades.csv: 0)
        notebook = gb.find_submission_notebook("attention", "attention", "late")
        notebook.late_submission_penalty = 100.0
        gb.db.commit()
        submission = gb.find_submission("attention", "late")
        assert submission.score - submission.late_submission_penalty == 0.0
        newly, _, locked = unlock.unlock(gb, release, unlocked, unlock.parse_threshold("full"))
        gb.close()
    assert [v["student"] for v in newly] == ["ada"], (newly, locked)
    assert not (unlocked / "late").exists()
