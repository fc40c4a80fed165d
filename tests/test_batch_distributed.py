"""The batch grader on a Dask cluster with a PostgreSQL gradebook (issue 7).

Real servers on loopback, started and stopped here (``tests/services.py``): Debian's
PostgreSQL in a temporary data directory, and ``dask scheduler`` with two single-threaded
``dask worker`` processes. Skipped only when PostgreSQL's ``initdb``/``pg_ctl`` are not
installed (``tools/ci_services.sh`` installs them for CI).

1. Part of the example class graded through the cluster into PostgreSQL gets, row for row
   (student, grade cell, score), the grades the local process pool writes into sqlite;
   ``nbgrader export`` from PostgreSQL gives the totals of the sqlite gradebook, and the
   unlock command of assignment ``training`` reads them.
2. A worker killed while it grades, and a submission over the task time limit: every
   student ends with exactly one grade or one recorded grading error (no grade written),
   and the same command run again grades only the student without a grade.
"""

import csv
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import nbformat
import pytest

from tests import services
from tests.helpers import EXPECTED, ROOT, example_notebook

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(services.postgres_bin() is None,
                       reason="PostgreSQL's initdb/pg_ctl are not installed (tools/ci_services.sh "
                              "installs Debian's postgresql)"),
]

# A few students of the example class (authoring/make_submissions.py), with different faults.
STUDENTS = ("student_correct", "student_mask_after_softmax", "student_heads_merged_wrong",
            "student_all_stubs", "student_softmax_infinite_loop")
RUN_LIMIT = 600  # seconds any one command of these tests may take


def _run(args, cwd, **kwargs):
    return subprocess.run([sys.executable, *args], cwd=cwd, env=services.kit_env(), check=False,
                          capture_output=True, text=True, timeout=RUN_LIMIT, **kwargs)


def _course(folder, db_url=None):
    """A course folder: the attention source and the kit's nbgrader config, with the
    gradebook at ``db_url`` (``c.CourseDirectory.db_url``) when given."""
    folder.mkdir()
    shutil.copytree(os.path.join(ROOT, "source", "attention"), folder / "source" / "attention")
    with open(os.path.join(ROOT, "nbgrader_config.py"), encoding="utf-8") as f:
        config = f.read()
    if db_url:
        config += f"\nc.CourseDirectory.db_url = {db_url!r}  # the test's PostgreSQL\n"
    (folder / "nbgrader_config.py").write_text(config, encoding="utf-8")
    return folder


def _write(submitted, notebooks):
    """``submitted/<student>/attention/attention.ipynb`` for each ``{student: text}``."""
    for student, text in notebooks.items():
        path = submitted / student / "attention" / "attention.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _grade_rows(db_url, students):
    """The automatic grades of ``students``: sorted ``(student, grade cell, score)``."""
    from nbgrader.api import Gradebook

    rows = []
    with Gradebook(db_url) as gb:
        for student in students:
            notebook = gb.find_submission_notebook("attention", "attention", student)
            rows += [(student, g.name, g.auto_score) for g in notebook.grades]
    return sorted(rows)


def _log(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class Courses:
    """Two released courses: ``local`` (the kit's config, sqlite) and ``remote`` (its
    ``nbgrader_config.py`` puts the gradebook on PostgreSQL, ``pg_url``); ``built``: the
    example class, ``{student: notebook text}``."""


@pytest.fixture(scope="module")
def courses(tmp_path_factory):
    with services.postgres() as server:
        found = Courses()
        found.pg_url = server.create_database("gradebook")
        top = tmp_path_factory.mktemp("courses")
        found.local = _course(top / "local")
        found.remote = _course(top / "remote", found.pg_url)
        procs = [subprocess.Popen([sys.executable, "-m", "nbgrader", "generate_assignment",
                                   "attention", "--force"], cwd=c, env=services.kit_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for c in (found.local, found.remote)]
        for proc in procs:
            out, _ = proc.communicate(timeout=RUN_LIMIT)
            assert proc.returncode == 0, out[-3000:]
        # the committed example class (tests/test_release.py proves the release it was
        # written from is what nbgrader generates here)
        found.built = {s: example_notebook(s) for s in EXPECTED}
        yield found


@pytest.fixture
def cluster():
    """A scheduler and 2 worker processes, for one test at a time on this machine (under
    pytest-xdist too): two clusters on 2 cores would slow the grading past its limits."""
    lock = os.path.join(tempfile.gettempdir(), "attention-kit-dask-tests.lock")
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # held until the other test's cluster has stopped
        with services.dask_cluster(2) as c:
            yield c


def test_cluster_and_postgres_grade_like_the_local_pool(courses, cluster):
    local, remote = courses.local, courses.remote
    for course in (local, remote):
        _write(course / "submitted", {s: courses.built[s] for s in STUDENTS})

    done = _run(["-m", "grader_tests", "batch", "submitted", "--workers", "2"], local)
    assert done.returncode == 0, done.stderr[-3000:]
    # No --db-url: the batch takes the course's c.CourseDirectory.db_url (PostgreSQL).
    done = _run(["-m", "grader_tests", "batch", "submitted", "--scheduler", cluster.address,
                 "--summary-json", "summary.json"], remote)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not (remote / "gradebook.db").exists(), "the batch wrote sqlite, not PostgreSQL"

    sqlite_url = "sqlite:///" + str(local / "gradebook.db")
    expected = _grade_rows(sqlite_url, STUDENTS)
    from grader_tests.core import POINTS

    assert len(expected) == len(STUDENTS) * len(POINTS)
    assert all(score is not None for _, _, score in expected)
    assert _grade_rows(courses.pg_url, STUDENTS) == expected

    summary = json.loads((remote / "summary.json").read_text())
    scores = {r["student"]: r["score"] for r in summary["students"]}
    assert scores["student_correct"] == pytest.approx(100.0)
    assert scores["student_all_stubs"] == 0.0
    assert 0 < scores["student_mask_after_softmax"] < 100
    records = _log(remote / "batch_log.jsonl")
    assert sorted(r["student"] for r in records) == sorted(STUDENTS)
    assert all(r["worker"].startswith("tcp://127.0.0.1:") for r in records)
    assert len({r["worker"] for r in records}) == 2, "one worker did all the grading"

    # nbgrader's own export, from PostgreSQL, gives the totals of the sqlite gradebook.
    done = _run(["-m", "nbgrader", "export", "--to", "grades.csv"], remote)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(remote / "grades.csv", newline="") as f:
        exported = {r["student_id"]: (round(float(r["score"]), 6), float(r["max_score"]))
                    for r in csv.DictReader(f) if r["student_id"] in STUDENTS}
    from nbgrader.api import Gradebook

    with Gradebook(sqlite_url) as gb:
        totals = {s: (round(gb.find_submission("attention", s).score, 6),
                      gb.find_submission("attention", s).max_score) for s in STUDENTS}
    assert exported == totals
    assert {s: score for s, (score, _) in exported.items()} == pytest.approx(scores)

    # The gate of assignment training (tools/unlock_training.py), run from the course,
    # reads the PostgreSQL gradebook of its nbgrader_config.py.
    release = remote / "training_release"
    release.mkdir()
    nbformat.write(nbformat.v4.new_notebook(), str(release / "training.ipynb"))
    done = _run([os.path.join(ROOT, "tools", "unlock_training.py"), "--threshold", "95",
                 "--release", str(release)], remote)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (remote / "unlocked" / "unlocked.json").is_file(), done.stdout[-3000:]
    ledger = json.loads((remote / "unlocked" / "unlocked.json").read_text())
    unlocked = {s for s in ledger["students"] if s in STUDENTS}
    assert unlocked == {s for s, (score, _) in totals.items() if score >= 95}
    assert "student_correct" in unlocked and "student_all_stubs" not in unlocked


def _slow_notebook(text, cells, seconds):
    """A correct notebook whose ``cells`` first cells each sleep ``seconds`` as it loads."""
    nb = nbformat.reads(text, 4)
    for _ in range(cells):
        nb.cells.insert(1, nbformat.v4.new_code_cell(f"import time\ntime.sleep({seconds})"))
    return nb


def _worker_executing(cluster, prefix):
    """``(address, pid)`` of the worker process executing a task whose key starts with
    ``prefix``, or None."""
    def executing(dask_worker):
        return [str(ts.key) for ts in dask_worker.state.executing]

    with cluster.client() as client:
        pids = client.run(os.getpid)
        for address, keys in client.run(executing).items():
            if any(k.startswith(prefix) for k in keys):
                return address, pids[address]
    return None


def test_killed_worker_and_time_limit_end_in_one_grade_or_one_error(courses, cluster):
    import psutil
    from nbgrader.api import Gradebook, MissingEntry

    # A class of its own (student ids of its own in the shared PostgreSQL gradebook).
    course, pg_url, built = courses.remote, courses.pg_url, courses.built
    class_ = {"fault_test_correct": built["student_correct"],
              "fault_test_all_stubs": built["student_all_stubs"],
              "fault_test_mask_after_softmax": built["student_mask_after_softmax"]}
    # Loading takes 24 s, two cells of 12 s: longer than the task time limit (15 s, some
    # five times what the others take), each cell within the sandbox's own limit per cell
    # (20 s), so that a second run with a larger limit grades it.
    slow = "a_student_slow_to_load"  # sorted first: its task starts at once
    class_[slow] = nbformat.writes(_slow_notebook(built["student_correct"], 2, 12))
    _write(course / "fault_class", class_)
    everyone = sorted(class_)
    log = course / "fault_log.jsonl"

    cmd = [sys.executable, "-m", "grader_tests", "batch", "fault_class", "--scheduler",
           cluster.address, "--task-time-limit", "15", "--log", str(log)]
    proc = subprocess.Popen(cmd, cwd=course, env=services.kit_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        target = None
        while target is None and time.monotonic() < deadline and proc.poll() is None:
            target = _worker_executing(cluster, f"grade-{slow}-")
            time.sleep(0.2)
        assert target is not None, "the slow student's task was never seen running"
        address, pid = target
        children = psutil.Process(pid).children(recursive=True)  # its grading process, sandbox
        assert children, "the worker started no grading process"
        time.sleep(1.0)  # well inside the 24 s load
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=RUN_LIMIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"processes of the killed worker outlived it: {alive}"
    assert proc.returncode == 3, (out[-2000:], err[-3000:])  # some student has no grade

    records = _log(log)
    assert sorted(r["student"] for r in records) == everyone, "a student graded twice or never"
    by_student = {r["student"]: r for r in records}
    failed = by_student[slow]
    assert failed["grading_error"] is True and failed["report"] is None
    assert len(failed["attempts"]) == 2, failed
    assert "died" in failed["attempts"][0] and address in failed["attempts"][0], failed
    assert "time limit of 15 s" in failed["attempts"][1], failed
    assert address not in failed["attempts"][1], "the retry ran on the worker that died"
    assert "ERROR" in out and "no grade written" in out

    with Gradebook(pg_url) as gb:
        for student in everyone:
            record = by_student[student]
            if record.get("grading_error"):
                with pytest.raises(MissingEntry):
                    gb.find_submission("attention", student)
            else:
                assert gb.find_submission("attention", student).score == \
                    pytest.approx(record["report"]["score"]), student
    assert by_student["fault_test_correct"]["report"]["score"] == pytest.approx(100.0)
    assert by_student["fault_test_all_stubs"]["report"]["score"] == 0.0

    # The same command again, with room for the slow load: only the student without a
    # grade is graded; nobody is graded twice.
    cmd[cmd.index("--task-time-limit") + 1] = "120"
    done = subprocess.run(cmd, cwd=course, env=services.kit_env(), capture_output=True,
                          text=True, timeout=RUN_LIMIT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    again = _log(log)[len(records):]
    assert [r["student"] for r in again] == [slow]
    assert again[0]["report"]["score"] == pytest.approx(100.0)
    with Gradebook(pg_url) as gb:
        assert gb.find_submission("attention", slow).score == pytest.approx(100.0)


def test_a_submission_on_a_dask_worker_cannot_reach_the_scheduler(courses, cluster, tmp_path):
    """A student whose softmax connects to the Dask scheduler (to rewrite its own record)
    finds no network in the jail: softmax loses its points, the submission is flagged and
    held for review, and the honest student graded beside it keeps full marks."""
    course = _course(tmp_path / "attack")
    done = _run(["-m", "nbgrader", "generate_assignment", "attention", "--force"], course)
    assert done.returncode == 0, done.stdout[-3000:]
    host, port = cluster.address.rsplit("//", 1)[1].rsplit(":", 1)
    nb = nbformat.reads(courses.built["student_correct"], 4)
    cell = next(c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_solution")
    cell.source = (f"import socket\n"
                   f"def softmax(scores, axis=-1):\n"
                   f"    socket.create_connection(({host!r}, {port}), timeout=2).close()\n"
                   f"    return scores\n")
    _write(course / "submitted", {"student_correct": courses.built["student_correct"],
                                  "student_dask_client": nbformat.writes(nb)})
    done = _run(["-m", "grader_tests", "batch", "submitted", "--scheduler", cluster.address,
                 "--summary-json", "summary.json"], course)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        honest = gb.find_submission("attention", "student_correct")
        assert honest.score == pytest.approx(100.0) and not honest.needs_manual_grade
        notebook = gb.find_submission_notebook("attention", "attention", "student_dask_client")
        softmax = next(g for g in notebook.grades if g.name == "softmax_hidden_checks")
        assert softmax.auto_score < 10 and notebook.flagged and softmax.needs_manual_grade
    rows = {r["student"]: r for r in json.loads((course / "summary.json").read_text())["students"]}
    assert any("socket" in f for f in rows["student_dask_client"]["flags"])
