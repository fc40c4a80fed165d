"""The course's record around the grading: whose file is collected, which student ids are
accepted, and what ``grades.csv`` says.

The exchange tests run as a course runs on a shared machine: two unix users created for
the test (names with a random suffix, removed after) write in the exchange's inbound as
themselves, with the shell's own commands (``setpriv``), and the instructor (root)
collects with nbgrader and the kit's configuration.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from grader_tests.student_ids import student_id_problem
from tests.helpers import ROOT, kit_env

COURSE_ID = "attention-kit"
CORRECT = ROOT / "example" / "submitted" / "student_correct" / "attention" / "attention.ipynb"
STUB = ROOT / "release" / "attention" / "attention.ipynb"

needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None,
                                reason="creating unix users for the exchange needs root "
                                       "and useradd")


@pytest.fixture(scope="module")
def two_users():
    """Two unix users (``victim``, ``attacker``), removed after the module's tests."""
    suffix = secrets.token_hex(3)
    names = {"victim": f"kitv{suffix}", "attacker": f"kita{suffix}"}
    made = []
    try:
        for name in names.values():
            subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name],
                           check=True, capture_output=True)
            made.append(name)
        yield names
    finally:
        for name in made:
            subprocess.run(["userdel", name], check=False, capture_output=True)


def as_user(user: str, script: str, *args: str) -> None:
    """Run the shell ``script`` (with ``args`` as $1, $2, ...) as the unix user ``user``."""
    entry = pwd.getpwnam(user)
    subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                    "--clear-groups", "sh", "-c", script, "sh", *args],
                   check=True, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})


def stamp(when: datetime) -> str:
    """nbgrader's ``Exchange.timestamp_format`` of ``when``."""
    return when.strftime("%Y-%m-%d %H:%M:%S.%f %Z")


def hand_in(user: str, inbound: Path, claimed: str, when: datetime, notebook: Path) -> Path:
    """What ``nbgrader submit`` leaves in the inbound, written by ``user`` as ``claimed``."""
    folder = inbound / f"{claimed}+attention+{stamp(when)}"
    as_user(user, 'mkdir "$1" && cp "$2" "$1/attention.ipynb" && printf %s "$3" > '
                  '"$1/timestamp.txt"', str(folder), str(notebook), stamp(when))
    return folder


@pytest.fixture
def course():
    """A course folder with the kit's configuration and an exchange whose inbound is
    nbgrader's (mode 0733: every user may write, only the instructor may list), in a
    folder the test's users can reach (pytest's own temporary folders are root's only)."""
    top = Path(tempfile.mkdtemp(prefix="kit-exchange-", dir="/tmp"))
    try:
        top.chmod(0o755)
        course = top / "course"
        course.mkdir()
        shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
        inbound = top / "exchange" / COURSE_ID / "inbound"
        inbound.mkdir(parents=True)
        for folder in (top / "exchange", top / "exchange" / COURSE_ID):
            folder.chmod(0o755)
        inbound.chmod(0o733)
        yield course
    finally:
        shutil.rmtree(top, ignore_errors=True)


def collect(course: Path, *args: str) -> subprocess.CompletedProcess:
    exchange = course.parent / "exchange"
    done = subprocess.run([sys.executable, "-m", "nbgrader", "collect", "attention",
                           f"--Exchange.root={exchange}", *args], cwd=course, env=kit_env(),
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@needs_root
def test_a_folder_handed_in_under_a_classmates_name_is_refused_and_reported(course, two_users):
    victim, attacker = two_users["victim"], two_users["attacker"]
    inbound = course.parent / "exchange" / COURSE_ID / "inbound"
    now = datetime.now(timezone.utc)
    own = hand_in(victim, inbound, victim, now, CORRECT)
    first = collect(course)
    submitted = course / "submitted" / victim / "attention"
    assert (submitted / "attention.ipynb").read_bytes() == CORRECT.read_bytes()

    # The classmate's stub under the victim's name, stamped far in the future so that it
    # would win over every later submission of the victim's.
    forged = hand_in(attacker, inbound, victim, datetime(2099, 1, 1, tzinfo=timezone.utc), STUB)
    before = tree(forged)
    done = collect(course, "--update")
    output = done.stdout + done.stderr
    assert (submitted / "attention.ipynb").read_bytes() == CORRECT.read_bytes()
    assert f"No newer submission to collect: {victim} attention" in output
    # reported, naming both users, in the collect's output ...
    refusal = next(line for line in output.splitlines() if "Refused" in line)
    assert victim in refusal and attacker in refusal and forged.name in refusal
    # ... and in the record the dashboard lists, with a copy kept for review
    (record,) = [json.loads(line) for line in
                 (course / "refused" / "attention" / "refused.jsonl").read_text().splitlines()]
    assert (record["claimed"], record["owner"], record["folder"]) == (victim, attacker, forged.name)
    assert tree(course / record["kept"]) == before
    # the folder stays in the inbound as the attacker left it, and the victim's own too
    assert tree(forged) == before and own.is_dir()
    assert "Refused" not in first.stdout + first.stderr

    # A file of the attacker's slipped into a folder the victim made writable is refused
    # too, and the victim's own older folder is still the one collected.
    as_user(victim, 'mkdir "$1" && chmod 777 "$1"',
            str(inbound / f"{victim}+attention+{stamp(datetime.now(timezone.utc))}"))
    shared = next(p for p in inbound.iterdir() if p.name.startswith(f"{victim}+") and p != own
                  and p != forged)
    as_user(attacker, 'cp "$1" "$2/attention.ipynb"', str(STUB), str(shared))
    done = collect(course, "--update")
    output = done.stdout + done.stderr
    assert any(shared.name in line and attacker in line for line in output.splitlines()
               if "Refused" in line), output
    assert (submitted / "attention.ipynb").read_bytes() == CORRECT.read_bytes()


@needs_root
def test_a_students_own_later_folder_is_collected(course, two_users):
    victim = two_users["victim"]
    inbound = course.parent / "exchange" / COURSE_ID / "inbound"
    hand_in(victim, inbound, victim, datetime(2025, 1, 1, tzinfo=timezone.utc), STUB)
    hand_in(victim, inbound, victim, datetime.now(timezone.utc), CORRECT)
    done = collect(course)
    assert "Refused" not in done.stdout + done.stderr
    assert (course / "submitted" / victim / "attention" / "attention.ipynb").read_bytes() == \
        CORRECT.read_bytes()
    assert not (course / "refused").exists()


@pytest.mark.parametrize("student_id", [
    "name,,,,100.0,0.0,100.0,100.0,", "a;b", "a\tb", "a|b", 'a"b', "a'b", "a`b",
    "a\nb", "a\rb", "a\x1b[2K", "a\u200bb", "a\u2028b", "=1+1", "+1", "-1", "@SUM(A1)",
    "a/b", "a\\b", "a:b", "a*", "a?", "a[1]", ".", "..", ".hidden", "", " a", "a ",
    "x" * 256, None])
def test_the_student_id_rule_refuses(student_id):
    assert student_id_problem(student_id) is not None


@pytest.mark.parametrize("student_id", [
    "jdoe", "jane.doe", "o.brien-2", "s1234567", "jane@uni.it", "doejane", "a+b", "Zoë"])
def test_the_student_id_rule_accepts(student_id):
    assert student_id_problem(student_id) is None


def test_the_dashboard_lists_what_the_collect_refused(tmp_path):
    from grader_tests.dashboard import FIGURES, ClassResults, page_html
    from grader_tests.exchange import read_refused

    records = tmp_path / "refused.jsonl"
    records.write_text(json.dumps({"folder": "ada+attention+2099-01-01 00:00:00 UTC",
                                   "claimed": "ada", "owner": "mallory", "reason": "<b>x</b>",
                                   "kept": "refused/attention/ada+attention+2099"}) + "\n"
                       + "not json\n", encoding="utf-8")
    refused = read_refused(records)
    assert [r["owner"] for r in refused] == ["mallory"]
    data = ClassResults(course_id=COURSE_ID, assignment="attention", parts={}, students=[],
                        absent=[], refused=refused)
    page = page_html(data, {stem: b"<svg/>" for stem in FIGURES}, tmp_path, "now")
    table = page[page.index('id="refused-table"'):]
    assert "<td>ada</td><td>mallory</td><td>&lt;b&gt;x&lt;/b&gt;</td>" in table
    assert 'href="#refused"' in page


# Ids a gradebook may hold from before the rule (or a roster import), each an attack on
# the spreadsheet: extra columns, an extra row, formulas.
FORGED_IDS = ["name,,,,100.0,0.0,100.0,100.0,", "=1+1", "+SUM(A1)", "-2", "@cmd",
              "a\nb,x,,,,100.0,0.0,100.0,100.0", 'q"uote', "\tTAB"]


def test_grades_csv_is_one_quoted_row_per_student_with_no_formula(tmp_path):
    import csv

    from grader_tests.gradebook import session

    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    with session(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gb:
        gb.add_assignment("attention")
        gb.add_student("ada", last_name='=HYPERLINK("http://x","y")', first_name="Ada",
                       email="@ada")
        for student in FORGED_IDS:
            gb.add_student(student)
        gb.add_submission("attention", "ada")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "export"], cwd=course,
                          env=kit_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "CourseCsvExport" in done.stderr
    with (course / "grades.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 + len(FORGED_IDS)
    assert all(None not in row and len(row) == 11 for row in rows)  # no extra column
    by_id = {row["student_id"]: row for row in rows}
    assert by_id["ada"]["last_name"] == '\'=HYPERLINK("http://x","y")'
    assert by_id["ada"]["email"] == "'@ada" and by_id["ada"]["first_name"] == "Ada"
    for student in FORGED_IDS:
        shown = "'" + student if student[0] in "=+-@\t" else student
        assert by_id[shown]["score"] == "0.0" and by_id[shown]["assignment"] == "attention"
    assert all(not row[key].startswith(("=", "+", "-", "@", "\t")) for row in rows
               for key in ("student_id", "last_name", "first_name", "email"))


def test_grades_csv_has_no_training_row_for_a_student_it_was_never_released_to(tmp_path):
    """`training` is released student by student (the unlock ledger): a student it was
    never released to has no row in grades.csv, where nbgrader's plugin wrote 0.0; one it
    was released to who did not hand in keeps the 0.0 row, and a submission always has
    its row. `attention`, released to the class, keeps a row per student."""
    import csv

    from grader_tests.gradebook import session
    from grader_tests.unlock import LEDGER, save_ledger

    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    with session(f"sqlite:///{course / 'gradebook.db'}", COURSE_ID) as gb:
        gb.add_assignment("attention")
        gb.add_assignment("training")
        for student in ("ada", "bob", "cy"):
            gb.add_student(student)
            gb.add_submission("attention", student)
        gb.add_submission("training", "cy")  # handed in without a ledger entry
    save_ledger(course / "unlocked" / LEDGER,
                {"assignment": "training", "students": {"ada": {"released": "now"}}})
    done = subprocess.run([sys.executable, "-m", "nbgrader", "export"], cwd=course,
                          env=kit_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with (course / "grades.csv").open(newline="", encoding="utf-8") as f:
        rows = sorted((row["assignment"], row["student_id"], row["score"])
                      for row in csv.DictReader(f))
    assert rows == [("attention", "ada", "0.0"), ("attention", "bob", "0.0"),
                    ("attention", "cy", "0.0"), ("training", "ada", "0.0"),
                    ("training", "cy", "0.0")]
    assert "training: no row for 1 student(s) it was never released to" in done.stderr


@pytest.mark.slow  # runs nbgrader autograde on one notebook
def test_refused_ids_do_not_stop_nbgrader_autograde_and_the_class_is_graded(tmp_path):
    import csv

    from tests.helpers import release_course

    course = release_course(tmp_path / "course")
    refused = ["a\nb", "name,,,,100.0,0.0,100.0,100.0,", "=1+1"]
    for student in [*refused, "zed"]:  # every refused id sorts before zed
        folder = course / "submitted" / student / "attention"
        folder.mkdir(parents=True)
        shutil.copy(CORRECT, folder / "attention.ipynb")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--create"], cwd=course, env=kit_env(), capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    for student in refused:
        assert any(line for line in done.stderr.splitlines()
                   if "Not graded" in line and repr(str(course / "submitted" / student
                                                        / "attention")) in line), done.stderr
    assert (course / "autograded" / "zed" / "attention" / "attention.ipynb").is_file()
    export = subprocess.run([sys.executable, "-m", "nbgrader", "export"], cwd=course,
                            env=kit_env(), capture_output=True, text=True, timeout=300)
    assert export.returncode == 0, export.stderr
    with (course / "grades.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["student_id"], float(r["score"])) for r in rows] == [("zed", 100.0)]

    # zed resubmits a file cut off mid-save: the regrade fails, and the earlier file's 100
    # is withdrawn, so the gate does not open on it.
    from grader_tests import unlock
    from grader_tests.gradebook import gradebook_has, session

    notebook = course / "submitted" / "zed" / "attention" / "attention.ipynb"
    notebook.write_bytes(CORRECT.read_bytes()[:5000])
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--force"], cwd=course, env=kit_env(), capture_output=True,
                          text=True, timeout=900)
    assert done.returncode != 0  # nbgrader reports the failure ...
    assert "Grade withdrawn: 'zed'" in done.stderr, done.stderr  # ... and the kit withdraws
    url = f"sqlite:///{course / 'gradebook.db'}"
    assert not gradebook_has(url, "attention", "zed", COURSE_ID)
    with session(url, COURSE_ID) as gb:
        (verdict,) = unlock.decide(gb, unlock.parse_threshold("full"))
    assert verdict["student"] == "zed" and not verdict["eligible"], verdict
    assert "submitted but not graded" in verdict["reason"]


@needs_root
def test_a_far_future_name_never_wins_over_a_later_submission(course, two_users):
    import time

    victim = two_users["victim"]
    inbound = course.parent / "exchange" / COURSE_ID / "inbound"
    hand_in(victim, inbound, victim, datetime(2099, 1, 1, tzinfo=timezone.utc), STUB)
    time.sleep(1.5)
    hand_in(victim, inbound, victim, datetime.now(timezone.utc), CORRECT)
    done = collect(course, "--ExchangeCollect.timestamp_tolerance=0.5")
    assert "claims a time after its files were last changed" in done.stdout + done.stderr
    submitted = course / "submitted" / victim / "attention"
    assert (submitted / "attention.ipynb").read_bytes() == CORRECT.read_bytes()


def test_a_failed_batch_regrade_withdraws_the_earlier_grade(tmp_path):
    """The batch, on a resubmitted file cut off mid-save, withdraws the earlier file's
    grade as nbgrader's autograde path does: not graded (and why) in the summary, in
    the gradebook and so in the gate; never a 0 on one path and "not graded" on the other."""
    from grader_tests import unlock
    from grader_tests.assignments import DEFAULT
    from grader_tests.gradebook import gradebook_has, session, write_gradebook
    from tests.helpers import release_course

    course = release_course(tmp_path / "course")
    url = f"sqlite:///{course / 'gradebook.db'}"
    full = {"name": DEFAULT.name, "functions": {
        name: {"score": float(points)} for name, points in DEFAULT.points.items()}}
    write_gradebook(url, "attention", {"student": "zed", "report": full, "flags": []},
                    COURSE_ID)
    assert gradebook_has(url, "attention", "zed", COURSE_ID)  # the earlier file's 100
    folder = course / "submitted" / "zed" / "attention"
    folder.mkdir(parents=True)
    (folder / "attention.ipynb").write_bytes(CORRECT.read_bytes()[:5000])
    for _ in range(2):  # a second run, the same file: still not graded, nothing written
        done = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                               "--workers", "1", "--summary-json", "summary.json"],
                              cwd=course, env=kit_env(LANG="C", LC_ALL="C"),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        (row,) = json.loads((course / "summary.json").read_text())["students"]
        assert row["student"] == "zed" and row["score"] is None, row
        assert row["errors"][0].startswith("not graded: ") and "zed" in row["errors"][0]
        assert not gradebook_has(url, "attention", "zed", COURSE_ID)
        with session(url, COURSE_ID) as gb:
            (verdict,) = unlock.decide(gb, unlock.parse_threshold("full"))
            assert gb.find_submission("attention", "zed").score == 0  # no auto_score left
        assert not verdict["eligible"] and "submitted but not graded" in verdict["reason"]


@needs_root
def test_training_is_reachable_only_by_the_student_it_was_released_to(course, two_users):
    """On the README's exchange, with two unix users: the student unlocked at a threshold
    below full marks reads and copies (fetches) `training`; the student held back can
    neither list, open nor copy it, and a `training` submission of theirs is not graded,
    on nbgrader's path and the batch's."""
    from grader_tests.assignments import DEFAULT
    from grader_tests.gradebook import write_gradebook
    from grader_tests.unlock import exchange_course, not_released
    from tests.helpers import release_course

    unlocked, locked = two_users["victim"], two_users["attacker"]
    release_course(course)
    shutil.copytree(ROOT / "release" / "training", course / "release" / "training")
    url = f"sqlite:///{course / 'gradebook.db'}"
    for student, short in ((unlocked, 3.0), (locked, 10.0)):  # 97 and 90 points
        functions = {name: {"score": float(points)} for name, points in DEFAULT.points.items()}
        functions["softmax"]["score"] -= short
        write_gradebook(url, "attention", {"student": student, "report": {
            "name": DEFAULT.name, "functions": functions}, "flags": []}, COURSE_ID)
    exchange = course.parent / "exchange"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "unlock_training.py"),
                           "--threshold", "95", "--exchange", str(exchange)], cwd=course,
                          env=kit_env(LANG="C", LC_ALL="C"), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "unlocked now (1)" in done.stdout, done.stdout
    theirs = exchange / exchange_course(COURSE_ID, unlocked)
    assert not (exchange / exchange_course(COURSE_ID, locked)).exists()
    info = theirs.stat()
    assert (info.st_mode & 0o777, info.st_gid) == (0o750, pwd.getpwnam(unlocked).pw_gid)

    released = course / "release" / "training" / "training.ipynb"
    notebook = theirs / "outbound" / "training" / "training.ipynb"
    for user in (unlocked, locked):  # a folder of each student's own to fetch into
        home = course.parent / f"home-{user}"
        home.mkdir()
        os.chown(home, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    # the unlocked student fetches it (nbgrader's fetch: a copy with the student's rights)
    as_user(unlocked, 'cp -r "$1" "$2/training"', str(notebook.parent),
            str(course.parent / f"home-{unlocked}"))
    fetched = course.parent / f"home-{unlocked}" / "training"
    assert (fetched / "training.ipynb").read_bytes() == released.read_bytes()
    # ... and starts it: beside an attention notebook whose softmax still fails a visible
    # check (97 points, the threshold 95), the gate opens on the instructor's decision
    attention = nbformat.read(CORRECT, as_version=4)
    for cell in attention.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "softmax_solution":
            cell.source += "\n\ndef softmax(scores, axis=-1):\n    return scores\n"
    (fetched.parent / "attention").mkdir()
    nbformat.write(attention, str(fetched.parent / "attention" / "attention.ipynb"))
    gate = nbformat.read(fetched / "training.ipynb", as_version=4).cells[0].source
    here, told = os.getcwd(), os.environ.pop("ATTENTION_NOTEBOOK", None)
    try:
        os.chdir(fetched)
        namespace: dict = {"__name__": "__main__"}
        exec(compile(gate, "gate", "exec"), namespace)
    finally:
        os.chdir(here)
        if told is not None:
            os.environ["ATTENTION_NOTEBOOK"] = told
    report = namespace["_gate"].report
    assert namespace["_gate"].open and f"released training to {unlocked}" in report
    assert "(attention at 95.00 / 100 points)" in report, report
    assert "  - softmax: " in report
    # the locked one lists nothing of it (nbgrader's list globs */outbound/*), and cannot
    # open or copy it
    listing = subprocess.run(
        ["setpriv", f"--reuid={pwd.getpwnam(locked).pw_uid}",
         f"--regid={pwd.getpwnam(locked).pw_gid}", "--clear-groups", "sh", "-c",
         'ls -d "$1"/*/outbound/* 2>/dev/null; true', "sh", str(exchange)],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, check=True)
    assert theirs.name not in listing.stdout
    for script in ('cat "$1" > /dev/null', 'cp -r "$2" "$3/training"', 'ls "$4"'):
        with pytest.raises(subprocess.CalledProcessError):
            as_user(locked, script, str(notebook), str(notebook.parent),
                    str(course.parent / f"home-{locked}"), str(theirs))
    assert not (course.parent / f"home-{locked}" / "training").exists()

    # A `training` handed in by the locked student (a copy passed on) is not graded.
    assert not_released(course, unlocked) is None
    assert not_released(course, locked).startswith("not released to this student")
    folder = course / "submitted" / locked / "training"
    folder.mkdir(parents=True)
    shutil.copy(released, folder / "training.ipynb")
    for command in (["-m", "nbgrader", "autograde", "training", "--create"],
                    ["-m", "grader_tests", "batch", "submitted", "--assignment", "training"]):
        done = subprocess.run([sys.executable, *command], cwd=course,
                              env=kit_env(LANG="C", LC_ALL="C"), capture_output=True,
                              text=True, timeout=300)
        (line,) = [line for line in done.stderr.splitlines() if "not released" in line]
        assert f"submitted/{locked}" in line and "not released to this student" in line, line
    assert not (course / "autograded").exists()
