"""Assignment `training`, the unlock command (``tools/unlock_training.py``): who is released
the training notebook, once, at which threshold, and why the others are not."""

import json
import subprocess
import sys
import warnings

import pytest

from grader_tests import unlock
from tests.helpers import ROOT, release_folder, set_scores

NOTEBOOK = ROOT / "source" / "training" / "training.ipynb"


# --- the unlock command ----------------------------------------------------------------------


def test_unlock_releases_exactly_the_passing_students_once(tmp_path, gradebooks, capsys):
    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    full = unlock.parse_threshold("full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40), "bo": (60, 30), "cy": None, "di": (None, None)})
        newly, already, locked = unlock.unlock(gb, release, unlocked, full)
        assert [v["student"] for v in newly] == ["ada"] and already == []
        reasons = {v["student"]: v["reason"] for v in locked}
        assert reasons == {"bo": "attention scored 90.00 / 100, needs 100.00",
                           "cy": "no attention submission in the gradebook",
                           "di": "attention submitted but not graded: autograde has not run on it yet, or could not grade it (its log says why)"}
        copied = unlocked / "ada" / "training" / "training.ipynb"
        assert copied.read_bytes() == NOTEBOOK.read_bytes()
        ledger = json.loads((unlocked / "unlocked.json").read_text())
        assert list(ledger["students"]) == ["ada"]
        assert ledger["students"]["ada"]["attention_score"] == 100

        (unlocked / "ada" / "training" / "marker.txt").write_text("the student's own work")
        newly, already, _ = unlock.unlock(gb, release, unlocked, full)   # nothing new
        assert newly == [] and [v["student"] for v in already] == ["ada"]
        assert (unlocked / "ada" / "training" / "marker.txt").exists()   # not released twice
        assert json.loads((unlocked / "unlocked.json").read_text()) == ledger

        set_scores(gb, {"bo": (60, 40)})                                   # bo's regrade arrives
        newly, already, _ = unlock.unlock(gb, release, unlocked, full)
        assert [v["student"] for v in newly] == ["bo"] and [v["student"] for v in already] == ["ada"]
        gb.close()
    assert sorted(json.loads((unlocked / "unlocked.json").read_text())["students"]) == ["ada", "bo"]
    assert sorted(p.name for p in unlocked.iterdir() if p.is_dir()) == ["ada", "bo"]

    # the command line (in this process): it prints who is unlocked and who is not, and why
    assert unlock.main(["--db", f"sqlite:///{tmp_path / 'gradebook.db'}", "--root",
                        str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "unlocked now (0)" in out and "already unlocked, not released again (2)" in out
    assert "no attention submission in the gradebook" in out
    assert "attention submitted but not graded: autograde has not run on it yet" in out


def test_unlock_thresholds_and_dry_run(tmp_path, gradebooks):
    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40), "bo": (60, 30), "cy": (50, 10)})
        newly, _, _ = unlock.unlock(gb, release, unlocked, unlock.parse_threshold("90%"),
                                    dry_run=True)
        assert [v["student"] for v in newly] == ["ada", "bo"] and not unlocked.exists()
        newly, _, locked = unlock.unlock(gb, release, unlocked, unlock.parse_threshold("61"))
        assert [v["student"] for v in newly] == ["ada", "bo"]
        assert locked[0]["reason"] == "attention scored 60.00 / 100, needs 61.00"
        gb.close()
    with pytest.raises(ValueError):
        unlock.parse_threshold("lots")


def test_unlock_keeps_a_flagged_student_locked_at_full_marks(tmp_path, gradebooks, capsys):
    """A notebook flagged in the gradebook, or a hidden-check cell waiting for a manual
    grade, keeps the gate closed at 100 / 100 and the report says why (a submission not
    graded at all is still "submitted but not graded")."""
    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    full = unlock.parse_threshold("full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        gb.add_grade_cell("softmax_hidden_checks", "attention", "attention", max_score=0,
                          cell_type="code")
        set_scores(gb, {"ada": (60, 40), "eve": (60, 40), "fay": (60, 40), "gus": (None, None)})
        gb.find_submission_notebook("attention", "attention", "eve").flagged = True
        hidden = gb.find_grade("softmax_hidden_checks", "attention", "attention", "fay")
        hidden.auto_score, hidden.needs_manual_grade = 0.0, True
        for student in ("ada", "eve"):
            grade = gb.find_grade("softmax_hidden_checks", "attention", "attention", student)
            grade.auto_score, grade.needs_manual_grade = 0.0, False
        gb.db.commit()
        newly, already, locked = unlock.unlock(gb, release, unlocked, full)
        assert [v["student"] for v in newly] == ["ada"] and already == []
        reasons = {v["student"]: v["reason"] for v in locked}
        assert reasons.pop("gus") == "attention submitted but not graded: autograde has not run on it yet, or could not grade it (its log says why)"
        assert sorted(reasons) == ["eve", "fay"]
        assert {v["student"]: v["score"] for v in locked if v["student"] in reasons} == {
            "eve": 100.0, "fay": 100.0}
        assert reasons["eve"].startswith("flagged for review: notebook attention flagged in "
                                         "the gradebook"), reasons["eve"]
        assert reasons["fay"].startswith("flagged for review: 1 hidden-check cell needs a "
                                         "manual grade (softmax_hidden_checks)"), reasons["fay"]
        assert all("attention scored 100.00 / 100 so far" in r for r in reasons.values())
        gb.close()
    assert not (unlocked / "eve").exists() and not (unlocked / "fay").exists()
    assert list(json.loads((unlocked / "unlocked.json").read_text())["students"]) == ["ada"]
    assert unlock.main(["--db", f"sqlite:///{tmp_path / 'gradebook.db'}", "--root",
                        str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "not unlocked (3)" in out and out.count("flagged for review: ") == 2


def test_unlock_refuses_without_a_release(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "unlock_training.py"), "--db",
                             f"sqlite:///{tmp_path / 'gradebook.db'}", "--root", str(tmp_path)],
                            capture_output=True, text=True, check=False, cwd=tmp_path)
    assert result.returncode == 2 and "generate_assignment training" in result.stderr


def test_an_unsafe_student_id_is_reported_and_one_failure_stops_no_one(tmp_path, gradebooks):
    """Ids that are no plain folder name (``..``, ``.``, a separator, a control character,
    the ledger's own name) are reported and never used as a path; a student whose folder
    cannot be written is reported, and the students after them are still released."""
    release, unlocked = release_folder(tmp_path), tmp_path / "course" / "unlocked"
    unsafe = ["..", ".", "a/b", "a\\b", "x\ry", "=HYPERLINK(0)", "a,b", "unlocked.json"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {s: (60, 40) for s in unsafe + ["ada", "blocked", "zoe"]})
        unlocked.mkdir(parents=True)
        (unlocked / "blocked").write_text("a file where the student's folder would go")
        newly, _, locked = unlock.unlock(gb, release, unlocked, unlock.parse_threshold("full"))
        gb.close()
    assert [v["student"] for v in newly] == ["ada", "zoe"]
    reasons = {v["student"]: v["reason"] for v in locked}
    assert sorted(reasons) == sorted(unsafe + ["blocked"])
    for student in unsafe[:-1]:
        assert ", but not released: the student id is refused: a student id " in \
            reasons[student], reasons
    assert reasons["unlocked.json"].endswith("the name of the ledger unlocked.json")
    assert "but the release failed" in reasons["blocked"]
    ledger = json.loads((unlocked / "unlocked.json").read_text())
    assert sorted(ledger["students"]) == ["ada", "zoe"]
    assert sorted(p.name for p in unlocked.parent.iterdir()) == ["unlocked"]  # nothing beside
    assert sorted(p.name for p in unlocked.iterdir()) == ["ada", "blocked", "unlocked.json", "zoe"]


def test_unlock_prints_scores_with_two_decimals(tmp_path, gradebooks):
    """A score that is not a whole number reads as the demo's table prints it (87.75), in
    every reason and in the threshold; the ledger keeps the full score."""
    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 27.7464), "bo": (60, 34.125)})
        threshold = unlock.parse_threshold("90.5%")
        newly, _, locked = unlock.unlock(gb, release, unlocked, threshold)
        assert [v["student"] for v in newly] == ["bo"]
        assert locked[0]["reason"] == "attention scored 87.75 / 100, needs 90.50"
        assert newly[0]["reason"] == "attention scored 94.12 / 100"
        assert unlock.describe_threshold(threshold, 100.0) == "90.5 % of 100 = 90.50 points"
        gb.close()
    ledger = json.loads((unlocked / "unlocked.json").read_text())
    assert ledger["students"]["bo"]["attention_score"] == pytest.approx(94.125)


def test_unlock_names_a_root_that_is_not_a_folder(tmp_path, capsys):
    missing = tmp_path / "no-such-course"
    assert unlock.main(["--root", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{missing} is not a folder. A course folder needs its own "
                          "nbgrader_config.py: the example class's example/nbgrader_config.py")
    assert "Traceback" not in err and not missing.exists()


def test_unlock_outside_a_course_says_what_a_course_needs(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "unlock_training.py")],
                            capture_output=True, text=True, check=False, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("no gradebook: pass --db or run from the course root")
    assert f"{tmp_path} is not a course: it has no nbgrader_config.py." in result.stderr


# --- the students' exchange courses, in an exchange root every user may write --------------


def test_what_another_user_put_at_a_students_exchange_course_is_set_aside(tmp_path, gradebooks,
                                                                           monkeypatch):
    """A link (or a file) at a student's exchange course name, or at a folder under it, is
    renamed to ``<name>.refused-<time>`` and a fresh folder of the instructor's made: the
    release goes there, never through the link, and the instructor reads why in the
    report and the ledger. When it cannot be set aside, that student alone is refused
    (the path named) and the next run tries again."""
    import os
    import stat

    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    exchange = tmp_path / "exchange"
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "outbound").mkdir(parents=True)
    exchange.mkdir()
    os.chmod(exchange, 0o777)
    (exchange / unlock.exchange_course("course", "ada")).symlink_to(elsewhere)
    bo = exchange / unlock.exchange_course("course", "bo")  # the instructor's, from before
    (bo / "inbound").mkdir(parents=True)
    os.chmod(bo / "inbound", 0o2733)
    (bo / "outbound").symlink_to(elsewhere / "outbound")
    (exchange / unlock.exchange_course("course", "cy")).write_text("a file")
    full = unlock.parse_threshold("full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40), "bo": (60, 40), "cy": (60, 40), "di": (60, 40)})

        def no_rename(*args, **kwargs):
            raise PermissionError(1, "Operation not permitted")

        with monkeypatch.context() as patched:  # an exchange root that forbids the rename
            patched.setattr(os, "rename", no_rename)
            newly, _, locked = unlock.unlock(gb, release, unlocked, full, exchange=exchange,
                                             course_id="course")
        assert [v["student"] for v in newly] == ["di"]
        reasons = {v["student"]: v["reason"] for v in locked}
        assert sorted(reasons) == ["ada", "bo", "cy"]
        link = exchange / "course-training-ada"
        assert f"not released to ada: {link} is a symbolic link of " in reasons["ada"]
        assert "could not be set aside" in reasons["ada"]
        assert f"{bo / 'outbound'} is a symbolic link" in reasons["bo"]
        assert "a file of" in reasons["cy"]

        newly, already, locked = unlock.unlock(gb, release, unlocked, full, exchange=exchange,
                                               course_id="course")
        gb.close()
    assert [v["student"] for v in newly] == ["ada", "bo", "cy"] and locked == []
    assert list(elsewhere.rglob("*")) == [elsewhere / "outbound"]  # nothing written through
    names = sorted(p.name for p in exchange.iterdir())
    assert [n.split(".refused-")[0] for n in names if ".refused-" in n] == \
        ["course-training-ada", "course-training-cy"]
    assert (exchange / names[names.index("course-training-ada") + 1]).is_symlink()
    ledger = json.loads((unlocked / "unlocked.json").read_text())["students"]
    for student in ("ada", "bo", "cy"):
        course = exchange / unlock.exchange_course("course", student)
        assert not course.is_symlink() and stat.S_IMODE(course.stat().st_mode) == 0o755
        assert course.stat().st_uid == os.geteuid()
        assert (course / "outbound" / "training" / "training.ipynb").read_bytes() == \
            (release / "training.ipynb").read_bytes()
        assert stat.S_IMODE((course / "inbound").stat().st_mode) == 0o2733
        (note,) = ledger[student]["exchange_notes"]
        assert "set aside as" in note and "not a folder of the instructor's" in note
        assert note in {v["student"]: v["reason"] for v in newly}[student]
    assert "exchange_notes" not in ledger["di"]
    assert (bo / "outbound").is_dir() and not (bo / "outbound").is_symlink()
    assert unlock.exchange_course_problem(exchange, "course-training-ada") is None
    assert "not a folder of the instructor's" in unlock.exchange_course_problem(
        exchange, names[names.index("course-training-ada") + 1])
