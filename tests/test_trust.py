"""The grade no student can forge: every attack of ``tests/catalogue/attacks.py`` through the
jailed grader, ``batch`` and nbgrader's ``autograde``.

Each attack gets less than full marks for the function it games (``softmax``), a flag where
it reaches for something a flag can name, and changes nothing outside its jail: the course
folder and the kit's own files hash the same before and after, no file appears in the
host's ``/tmp``, no connection reaches the host, no process is left, and the honest student
graded in the same batch keeps full marks. nbgrader's autograde and the batch agree
function by function.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import nbformat
import pytest

from grader_tests import jail
from grader_tests.core import POINTS
from grader_tests.sandbox import grade_isolated
from tests.catalogue import REFERENCE_SOURCE
from tests.catalogue.attacks import ATTACKS
from tests.helpers import ROOT, correct_notebook, kit_env

GRADED = ["softmax", "causal_mask"]
# Written by grading itself, not by a submission: left out of the course's checksum.
GRADING_OUTPUTS = ("gradebook.db", "autograded", "feedback", "batch_log.jsonl", ".hypothesis",
                   "__pycache__", "summary.json", "dashboard")

pytestmark = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")


def tree_digest(folder: str, skip: tuple[str, ...] = GRADING_OUTPUTS) -> str:
    """SHA-256 over every file's path and bytes under ``folder`` (``skip``: names left out)."""
    digest = hashlib.sha256()
    for base, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in skip and d != ".venv" and d != ".git")
        for name in sorted(files):
            if name in skip or name.startswith("gradebook.db"):
                continue
            path = os.path.join(base, name)
            digest.update(os.path.relpath(path, folder).encode())
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def kit_digest() -> str:
    """The kit's reference solutions, hashed (what an attack would most like to change;
    the graders' folder is hashed by the course digest of the class tests' copies)."""
    return tree_digest(os.path.join(ROOT, "solutions"))


class Listener:
    """A TCP server on the host's loopback that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self):
        self.running = False
        self.thread.join()
        self.sock.close()


@pytest.fixture(scope="module")
def listener():
    server = Listener()
    yield server
    server.close()


def attack_code(name: str, course: str, marker: str, port: int) -> str:
    """The attack's source with its placeholders filled in."""
    source = textwrap.dedent(ATTACKS[name]["source"])
    return (source.replace("{course}", course).replace("{kit}", str(ROOT))
            .replace("{marker}", marker).replace("{port}", str(port)))


def jail_processes() -> list[int]:
    """Processes still alive with the uid of the jails this process starts."""
    return jail.processes_of(jail.JAIL_UID_BASE + os.getpid() % jail.JAIL_UIDS)


def fake_course(folder) -> None:
    """A course folder with a gradebook, a README and another student's notebook."""
    (folder / "submitted" / "s_honest" / "attention").mkdir(parents=True)
    (folder / "submitted" / "s_honest" / "attention" / "attention.ipynb").write_text("{}")
    (folder / "gradebook.db").write_bytes(b"SQLite format 3\x00")
    (folder / "README.md").write_text("course\n")


@pytest.mark.slow  # one jail per attack
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_attack_in_the_jail_gains_nothing_and_changes_nothing(name, tmp_path, listener):
    course = tmp_path / "course"
    fake_course(course)
    marker = f"/tmp/attention-kit-escape-{uuid.uuid4().hex}"
    path = course / "submitted" / "s_attacker" / "attention.py"
    path.parent.mkdir(parents=True)
    path.write_text(REFERENCE_SOURCE + "\n" + attack_code(name, str(course), marker,
                                                          listener.port))
    before, kit_before, accepted = tree_digest(str(course)), kit_digest(), listener.accepted
    gradebook = (course / "gradebook.db").read_bytes()
    results, cell_errors, flags = grade_isolated(str(path), names=GRADED)
    if name == "leaves a process behind":
        time.sleep(5)  # past the moment the grandchild meant to write
    assert results["softmax"].score < results["softmax"].max_score, (name, flags)
    assert results["causal_mask"].score == results["causal_mask"].max_score, name
    expected = ATTACKS[name]["flag"]
    if expected is not None:
        assert any(expected in f for f in flags), (name, flags)
    assert tree_digest(str(course)) == before, name
    assert (course / "gradebook.db").read_bytes() == gradebook, name
    assert kit_digest() == kit_before, name
    assert not os.path.exists(marker), name
    assert listener.accepted == accepted, name
    assert jail_processes() == [], name


def test_secrets_of_the_grader_never_reach_the_report(tmp_path, monkeypatch):
    """The grader's environment (credentials in CI) is not the jail's."""
    monkeypatch.setenv("PGPASSWORD", "secret-of-the-grader")
    path = tmp_path / "attention.py"
    path.write_text(REFERENCE_SOURCE + "\n" + attack_code("reads credentials", str(tmp_path),
                                                          "/tmp/none", 9))
    results, _, _ = grade_isolated(str(path), names=["softmax"])
    text = json.dumps([c.message for c in results["softmax"].checks])
    assert "secret-of-the-grader" not in text
    assert "PGPASSWORD" not in text and "root:" not in text


def test_honest_code_that_names_nothing_is_not_flagged(tmp_path):
    path = tmp_path / "attention.py"
    path.write_text(REFERENCE_SOURCE)
    results, cell_errors, flags = grade_isolated(str(path), names=GRADED)
    assert flags == [] and all(r.score == r.max_score for r in results.values())


# ---------------------------------------------------------------------------------------
# A class with every attack, through `batch` and through nbgrader's autograde.


def _env():
    return kit_env(PGPASSWORD="secret-of-the-grader")


@pytest.fixture(scope="module")
def attacked_class(tmp_path_factory, listener):
    """A course with one honest student and one student per attack, graded by batch."""
    import shutil

    course = tmp_path_factory.mktemp("course")
    shutil.copytree(os.path.join(ROOT, "source"), course / "source",
                    ignore=shutil.ignore_patterns("training"))
    shutil.copy(os.path.join(ROOT, "nbgrader_config.py"), course / "nbgrader_config.py")
    (course / "README.md").write_text("course\n")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "attention",
                           "--force"], cwd=course, env=_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    markers = {}
    students = {"s_honest": None, "s_honest_logging": None}
    for i, name in enumerate(sorted(ATTACKS)):
        students[f"s_attack_{i:02d}"] = name
    for student, name in students.items():
        nb = correct_notebook(course)
        if student == "s_honest_logging":  # logs at INFO to the kernel's stderr
            cell = next(c for c in nb.cells
                        if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_solution")
            cell.source = ("import logging\nlogging.basicConfig(level=logging.INFO)\n"
                           "_log = logging.getLogger('attention')\n" + cell.source.replace(
                               "def softmax(scores, axis=-1):\n",
                               "def softmax(scores, axis=-1):\n    _log.info('softmax %s', "
                               "getattr(scores, 'shape', None))\n", 1))
            assert "_log.info" in cell.source
        if name is not None:
            markers[student] = f"/tmp/attention-kit-escape-{uuid.uuid4().hex}"
            cell = next(c for c in nb.cells
                        if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_solution")
            cell.source = attack_code(name, str(course), markers[student], listener.port)
        folder = course / "submitted" / student / "attention"
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / "attention.ipynb"))
    return course, students, markers


def _scores(course, student):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook("attention", "attention", student)
        scores = {g.name[: -len("_hidden_checks")]: g.auto_score for g in notebook.grades
                  if g.name.endswith("_hidden_checks")}
        review = any(g.needs_manual_grade for g in notebook.grades
                     if g.name.endswith("_hidden_checks"))
        return scores, notebook.flagged, review


def _check_class(course, students, markers, listener, accepted_before):
    for student, name in students.items():
        scores, flagged, review = _scores(course, student)
        if name is None:
            assert scores == {k: float(v) for k, v in POINTS.items()}, scores
            assert not flagged and not review, student
            continue
        assert scores["softmax"] < POINTS["softmax"], (name, scores["softmax"])
        others = {k: v for k, v in scores.items() if k != "softmax"}
        assert all(v == POINTS[k] for k, v in others.items()), (name, others)
        if ATTACKS[name]["flag"] is not None:
            assert flagged and review, name
        assert not os.path.exists(markers[student]), name
    assert listener.accepted == accepted_before
    assert jail_processes() == []


@pytest.mark.slow
def test_the_class_of_attacks_through_batch_and_autograde(attacked_class, listener):
    course, students, markers = attacked_class
    before, kit_before, accepted = tree_digest(str(course)), kit_digest(), listener.accepted
    done = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                           "--workers", "2", "--summary-json", "summary.json"], cwd=course,
                          env=_env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "secret-of-the-grader" not in done.stdout + done.stderr
    time.sleep(5)
    _check_class(course, students, markers, listener, accepted)
    assert tree_digest(str(course)) == before and kit_digest() == kit_before
    summary = json.loads((course / "summary.json").read_text())
    rows = {r["student"]: r for r in summary["students"]}
    for student, name in students.items():
        if name is not None and ATTACKS[name]["flag"] is not None:
            assert rows[student]["flags"], (name, rows[student])
    batch_scores = {s: _scores(course, s)[0] for s in students}

    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention", "--create",
                           "--force"], cwd=course, env=_env(), capture_output=True, text=True,
                          timeout=3000)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    time.sleep(5)
    _check_class(course, students, markers, listener, accepted)
    assert tree_digest(str(course)) == before and kit_digest() == kit_before
    for student in students:  # the two paths agree, function by function
        assert _scores(course, student)[0] == pytest.approx(batch_scores[student]), student
        autograded = (course / "autograded" / student / "attention" /
                      "attention.ipynb").read_text()
        assert "secret-of-the-grader" not in autograded, student


@pytest.mark.slow  # one jail per name
@pytest.mark.parametrize("asked", ["softmax", "__setattr__", "f1", "layer_norm_forward"])
def test_the_channel_answers_only_what_the_grader_offered(asked, tmp_path):
    """A submission that speaks the worker's protocol itself and asks the grader for a
    function gets nothing it was not offered (the function under test, a method of the
    grader, an unknown key), is flagged, and leaves the grader's process as it was: the
    reference graded next in the same process keeps full marks."""
    from tests.catalogue.attacks import CHANNEL_ATTACK
    from solutions import attention as reference

    path = tmp_path / "attention.py"
    path.write_text(REFERENCE_SOURCE + "\n" + textwrap.dedent(CHANNEL_ATTACK.format(name=asked)))
    before = {n: getattr(reference, n) for n in reference.SPEC_FUNCTIONS}
    results, _, flags = grade_isolated(str(path), names=["softmax"])
    assert results["softmax"].score < results["softmax"].max_score
    assert flags, "the submission spoke the grader's protocol and was not flagged"
    if asked in ("softmax", "__setattr__", "f1"):  # never offered while softmax is graded
        assert any(f"asked the grader for {asked!r}" in f for f in flags), flags
    assert {n: getattr(reference, n) for n in reference.SPEC_FUNCTIONS} == before
    honest = tmp_path / "honest.py"
    honest.write_text(REFERENCE_SOURCE)
    results, _, flags = grade_isolated(str(honest), names=["softmax", "causal_mask"])
    assert flags == [] and all(r.score == r.max_score for r in results.values())


# the isolated half: one jail per case
@pytest.mark.parametrize("mode", ["in-process", pytest.param("isolated", marks=pytest.mark.slow)])
@pytest.mark.parametrize("case", sorted(__import__("tests.catalogue.machinery",
                                                   fromlist=["GAMED"]).GAMED))
def test_the_graders_machinery_does_no_students_work(case, mode):
    """A function never gets its work done by a reference it is not built from: a forward
    called for a backward's cache cannot reach the backward's reference, a function cannot
    reach the reference of one built above it, and a backward is the gradient of the
    contract's forward, not of the student's own."""
    from grader_tests.core import grade_namespace
    from tests.catalogue.machinery import GAMED, path_of

    path = path_of(case)
    names = list(GAMED[case])
    if mode == "in-process":
        namespace = {"__name__": "__submission__"}
        with open(path) as f:
            exec(compile(f.read(), "submission.py", "exec"), namespace)
        results = grade_namespace(namespace, names)
    else:
        results, _, _ = grade_isolated(path, names=names)
    for name in names:
        assert results[name].score == 0, (case, name, [
            (c.name, c.fault) for c in results[name].checks if c.passed])


@pytest.mark.slow  # one jail per case
@pytest.mark.parametrize("case", ["announces a message and never sends it",
                                  "announces a message of gigabytes"])
def test_the_framing_of_the_socket_cannot_hold_or_flood_the_grader(case, tmp_path):
    """The grader reads the worker's messages within the call's deadline and at most
    MAX_MESSAGE_BYTES of them: the function loses its points, the grading ends in
    seconds, the submission is flagged, and the grader's memory stays small."""
    import resource

    from grader_tests.sandbox import MAX_MESSAGE_BYTES
    from tests.catalogue.attacks import FRAMING_ATTACKS

    path = tmp_path / "attention.py"
    path.write_text(REFERENCE_SOURCE + "\n" + textwrap.dedent(FRAMING_ATTACKS[case]))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    started = time.monotonic()
    results, _, flags = grade_isolated(str(path), names=["softmax", "causal_mask"])
    assert time.monotonic() - started < 120
    assert results["softmax"].score < results["softmax"].max_score
    assert results["causal_mask"].score == results["causal_mask"].max_score
    assert any("raw file descriptor" in f for f in flags), flags
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert grown < 2 * MAX_MESSAGE_BYTES + 256 * 2**20, grown


def test_autograde_grades_the_assignment_nbgrader_grades_whatever_the_notebook_says():
    """A training notebook with its gate cell deleted is still graded as training by
    nbgrader's autograde (the assignment comes from nbgrader, not from the notebook), and
    a hidden cell the grader has no result for earns nothing."""
    from nbgrader.utils import determine_grade

    from grader_tests.autograde import TrustedGrades

    nb = nbformat.read(os.path.join(ROOT, "release", "training", "training.ipynb"), 4)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "gate"]
    for cell in nb.cells:  # nbgrader's own step puts the hidden cells back before grading
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade") and meta.get("grade_id", "").endswith("_hidden_checks"):
            cell.outputs = []
    hidden = [c for c in nb.cells
              if c.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_hidden_checks")]
    assert hidden
    resources = {"nbgrader": {"assignment": "training"}, "unique_key": "training"}
    nb, resources = TrustedGrades().preprocess(nb, resources)
    assert resources["attention_kit"]["assignment"] == "training"
    for cell in hidden:
        assert determine_grade(cell)[0] == 0, cell.metadata["nbgrader"]["grade_id"]


def test_what_the_grader_offers_one_function_answers_nothing_for_another(tmp_path):
    """Training functions that keep the ``ops`` handed to one graded function, hoping to
    hand their work to the reference inside it, get nothing: the ops handed to a student's
    function never hold a graded function's reference, and what the grader offered for
    one call answers nothing afterwards (flagged)."""
    from tests.catalogue.attacks import OPS_PASSTHROUGH

    path = tmp_path / "training.py"
    path.write_text(textwrap.dedent(OPS_PASSTHROUGH))
    results, _, flags = grade_isolated(str(path), assignment="training")
    for name in ("block_backward", "greedy_generate", "adam_step", "answer_accuracy"):
        assert results[name].score == 0, (name, results[name].score)


def test_honest_code_that_looks_around_is_not_evidence():
    """Setting an environment variable, putting one's own folder on the import path, the
    words "solutions" or "submitted" in a dictionary, gc, signal, shutil: honest code, no
    flag; reading the environment, searching the import path, a path into the kit: flag."""
    from grader_tests.evidence import findings

    honest = ('import os, gc, signal, shutil, sys\nos.environ["OMP_NUM_THREADS"] = "1"\n'
              'os.environ.setdefault("MPLBACKEND", "Agg")\nsys.path.append("..")\n'
              'progress = {"solutions": 5, "state": "submitted"}\ngc.collect()\n')
    assert findings(honest) == []
    reaching = ('import os, sys\nsecret = os.environ.get("PGPASSWORD")\n'
                'for p in sys.path: pass\nopen("../solutions/attention.py")\n')
    found = findings(reaching)
    assert "reads environment variables" in found
    assert "searches the import path (sys.path)" in found
    assert any("solutions/attention.py" in f for f in found)


def test_honest_code_that_reads_sys_modules_is_not_evidence_and_writing_it_is():
    """Reading ``sys.modules`` (``in``, ``get``, an item, iterating it, through a name bound
    to it) is no evidence; every way of changing it is, through a name bound to it too."""
    from grader_tests.evidence import findings

    reads = ["'numpy' in sys.modules", "sys.modules.get('numpy')", "sys.modules['numpy']",
             "sorted(m for m in sys.modules if m)", "for m in sys.modules: pass",
             "len(sys.modules)", "mods = sys.modules\nprint('numpy' in mods, mods.get('x'))"]
    writes = ["sys.modules['grader_tests'] = None", "del sys.modules['numpy']",
              "sys.modules.pop('numpy')", "sys.modules.popitem()", "sys.modules.update({})",
              "sys.modules.clear()", "sys.modules.setdefault('x', None)",
              "sys.modules.__setitem__('x', None)", "sys.modules.__delitem__('x')",
              "sys.modules = {}", "sys.modules |= {}", "sys.modules['numpy'].allclose = max",
              "mods = sys.modules\nmods['x'] = None", "m = sys.modules\nn = m\nn.clear()",
              "dict.__setitem__(sys.modules, 'x', None)"]
    for code in reads:
        assert findings("import sys\n" + code) == [], code
    for code in writes:
        assert findings("import sys\n" + code) == ["rewrites sys.modules"], code
    assert findings("from sys import modules as m\nm['x'] = None") == ["rewrites sys.modules"]
