"""One grader at a time per course (``grader_tests/course_lock.py``): a second
``nbgrader autograde`` or ``batch`` on a course waits for the first, saying who holds
it, and neither removes what the other wrote; a run's own children share its lock."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader_tests.course_lock import ENV, LOCK_NAME, course_lock, inherit_fds
from tests.helpers import ROOT, kit_env

CORRECT = ROOT / "example" / "submitted" / "student_correct" / "attention" / "attention.ipynb"
BUGGY = ROOT / "example" / "submitted" / "student_mask_after_softmax" / "attention" / \
    "attention.ipynb"

# A grader of its own: takes the course's lock, says so on stdout, holds it until its
# stdin closes, and writes the times it held it.
HOLDER = """
import sys, time
from grader_tests.course_lock import course_lock
with course_lock(sys.argv[1], sys.argv[2]):
    start = time.time()
    print("held", flush=True)
    sys.stdin.read()
    print(start, time.time(), flush=True)
"""


def holder(course: Path, command: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(course), command],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=kit_env())


def test_a_second_grader_waits_saying_who_holds_the_course(tmp_path):
    first = holder(tmp_path, "nbgrader autograde attention")
    assert first.stdout.readline() == "held\n"
    second = holder(tmp_path, "python -m grader_tests batch")
    time.sleep(1.0)
    assert second.poll() is None
    first.stdin.close()
    start1, end1 = map(float, first.stdout.readline().split())
    assert first.wait(30) == 0
    assert second.stdout.readline() == "held\n"
    second.stdin.close()
    start2, _ = map(float, second.stdout.readline().split())
    assert second.wait(30) == 0
    assert start2 >= end1 > start1  # never held together
    (line,) = [line for line in second.stderr.read().splitlines() if line]
    assert line.startswith("Waiting: another grader is grading this course")
    assert "nbgrader autograde attention" in line and str(tmp_path / LOCK_NAME) in line
    assert not (tmp_path / LOCK_NAME).exists()  # removed by the last holder


def test_a_killed_holder_frees_the_course(tmp_path):
    first = holder(tmp_path, "nbgrader autograde attention")
    assert first.stdout.readline() == "held\n"
    first.kill()
    first.wait(30)
    with course_lock(tmp_path, "test", say=pytest.fail):  # no wait: the kernel let go
        assert (tmp_path / LOCK_NAME).read_text().startswith("pid ")


def test_a_runs_children_share_its_lock_and_others_wait(tmp_path):
    script = ("import sys; from grader_tests.course_lock import course_lock\n"
              "with course_lock(sys.argv[1], 'child', say=lambda l: print(l, flush=True)):\n"
              "    print('child held', flush=True)\n")
    with course_lock(tmp_path, "parent"):
        with course_lock(tmp_path, "again", say=pytest.fail):  # the same process
            pass
        assert ENV in __import__("os").environ
        # a child handed the lock (the demo's retries) runs at once ...
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=kit_env(),
                              pass_fds=inherit_fds(), capture_output=True, text=True,
                              timeout=60)
        assert done.stdout == "child held\n", done.stdout + done.stderr
        # ... one that was not (the variable without the descriptor) waits
        other = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)],
                                 env=kit_env(), stdout=subprocess.PIPE, text=True)
        line = other.stdout.readline()
        assert line.startswith("Waiting: another grader") and "parent" in line
        assert other.poll() is None
    assert other.stdout.readline() == "child held\n"
    assert other.wait(30) == 0


def nbgrader(course: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "nbgrader", *args], cwd=course,
                            env=kit_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def class_of(course: Path, students: dict[str, Path]) -> None:
    for student, notebook in students.items():
        folder = course / "submitted" / student / "attention"
        folder.mkdir(parents=True)
        shutil.copy(notebook, folder / "attention.ipynb")


FILE_ERRORS = re.compile(r"FileNotFoundError|No such file|Traceback|\| ERROR\]")


@pytest.mark.slow  # two nbgrader autogrades of three students
def test_two_autogrades_started_together_both_end_cleanly(tmp_path):
    from grader_tests.gradebook import gradebook_has
    from tests.helpers import release_course

    course = release_course(tmp_path / "course")
    students = {"ada": CORRECT, "bob": BUGGY, "cy": CORRECT}
    class_of(course, students)
    runs = [nbgrader(course, "autograde", "attention", "--create") for _ in range(2)]
    outputs = [run.communicate(timeout=900)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    text = "\n".join(outputs)
    assert not FILE_ERRORS.search(text), text
    assert "Removing existing" not in text
    # one run waited for the other, then found every student graded
    assert sum("Waiting: another grader is grading this course" in o for o in outputs) == 1
    for student in students:  # graded once, by one of the two runs
        assert len(re.findall(rf"Autograding \S*/autograded/{student}/attention/", text)) == 1, text
        assert (course / "autograded" / student / "attention" / "attention.ipynb").is_file()
        assert gradebook_has(f"sqlite:///{course / 'gradebook.db'}", "attention", student,
                             "attention-kit")
    skipped = re.findall(r"Skipping existing assignment: \S*autograded/(\w+)/attention", text)
    assert sorted(skipped) == sorted(students)  # the second run graded nobody again
    assert not (course / LOCK_NAME).exists()


@pytest.mark.slow  # an nbgrader autograde and a batch of two students
def test_an_autograde_and_a_batch_at_once_agree(tmp_path):
    from tests.helpers import release_course

    course = release_course(tmp_path / "course")
    students = {"ada": CORRECT, "bob": BUGGY}
    class_of(course, students)
    autograde = nbgrader(course, "autograde", "attention", "--create", "--force")
    time.sleep(2)  # the autograde first: the batch then reads a finished autograded/
    batch = subprocess.Popen([sys.executable, "-m", "grader_tests", "batch", "submitted",
                              "--workers", "1", "--summary-json", "summary.json"],
                             cwd=course, env=kit_env(LANG="C", LC_ALL="C"),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    outputs = [autograde.communicate(timeout=900)[0], batch.communicate(timeout=900)[0]]
    assert [autograde.returncode, batch.returncode] == [0, 0], outputs
    assert not FILE_ERRORS.search(outputs[0]), outputs[0]
    assert "Waiting: another grader is grading this course" in outputs[1]
    rows = {r["student"]: r for r in
            json.loads((course / "summary.json").read_text())["students"]}
    assert sorted(rows) == sorted(students)
    assert rows["ada"]["score"] == 100.0 and rows["bob"]["score"] < 100.0
    assert all(not r.get("disagreements") and not r["errors"] for r in rows.values()), rows
    for student in students:
        assert (course / "autograded" / student / "attention" / "attention.ipynb").is_file()
