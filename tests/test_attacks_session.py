"""Attacks by a student who has the kit's clone (the graders are open) and wants a grade
they did not earn; each test asserts the kit's answer to one. (The same attacker's other
findings are tests in test_attacks_nbgrader_path.py, test_attacks_reading_and_disk.py and
test_attacks_callbacks_and_resubmission.py.)

1. Answers looked up by the nearest recorded input. The graders' inputs are fixed, so a
   student runs ``python -m grader_tests grade`` on any correct notebook with
   ``Sandbox.call`` wrapped to record every call and answer, and hands in functions that
   return the recorded answer of the nearest recorded input (within a relative 1e-4) and
   garbage anywhere else. A nudge by a hair (``lookup.probe``) still finds the graders'
   own entry, so nothing jumps; ``lookup.follows_reference`` moves the input far enough
   that the stored answer is wrong there. Such a submission must score nothing for its
   functions, be flagged, and not open the ``training`` gate, on every path.

2. The same inputs on every path. Hypothesis mixes into its draws the literal constants of
   the "local" modules a process has imported; the ``grade`` command and a batch worker
   import different modules, so they drew different examples and the same file scored 95
   on one path and 91.05 on the other. The graders now draw with Hypothesis' global
   constants only (grader_tests/strategies.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from grader_tests import jail
from grader_tests.core import POINTS
from tests.helpers import ROOT, correct_notebook, kit_env

CORRECT = os.path.join(ROOT, "example", "submitted", "student_correct", "attention", "attention.ipynb")

pytestmark = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")


# --- 1. a lookup table keyed by the nearest recorded input ------------------------------

RECORDER = textwrap.dedent('''
    """Run `python -m grader_tests grade PATH --json` with every call of the grader to the
    submission, and its answer, recorded (grader side)."""
    import atexit, pickle, runpy, sys
    from grader_tests import sandbox

    path, out = sys.argv[1], sys.argv[2]
    log = []
    original = sandbox.Sandbox.call

    def call(self, name, args, kwargs, time_limit=4.0):
        try:
            result = original(self, name, args, kwargs, time_limit)
        except Exception as exc:
            log.append((name, list(args), dict(kwargs), ("__raise__", type(exc).__name__,
                                                         str(exc))))
            raise
        log.append((name, list(args), dict(kwargs), result[0]))
        return result

    sandbox.Sandbox.call = call
    atexit.register(lambda: pickle.dump(log, open(out, "wb")))
    sys.argv = ["grader_tests", "grade", path, "--json"]
    try:
        runpy.run_module("grader_tests", run_name="__main__")
    except SystemExit:
        pass
''')

LOOKUP = textwrap.dedent('''
    import base64, copy, pickle, zlib
    import numpy as np

    _TABLE = pickle.loads(zlib.decompress(base64.b64decode(BLOB)))


    def _leaves(v, out):
        if isinstance(v, (np.ndarray, np.generic)):
            a = np.asarray(v)
            out.append(("a", a.dtype.str, a.shape, a))
        elif isinstance(v, (list, tuple)):
            out.append(("seq", type(v).__name__, len(v), None))
            for x in v:
                _leaves(x, out)
        elif isinstance(v, dict):
            out.append(("map", tuple(sorted(v)), None, None))
            for k in sorted(v):
                _leaves(v[k], out)
        else:
            out.append(("v", repr(v), None, None))
        return out


    def _distance(a, b):
        la, lb = _leaves(a, []), _leaves(b, [])
        if len(la) != len(lb):
            return float("inf")
        worst = 0.0
        for (ka, ta, sa, xa), (kb, tb, sb, xb) in zip(la, lb):
            if (ka, ta, sa) != (kb, tb, sb):
                return float("inf")
            if ka != "a":
                continue
            if xa.dtype.kind != "f":
                if not np.array_equal(xa, xb):
                    return float("inf")
                continue
            fa, fb = np.isfinite(xa), np.isfinite(xb)
            if not np.array_equal(fa, fb) or not np.array_equal(xa[~fa], xb[~fb]):
                return float("inf")
            if fa.any():
                d = float(np.max(np.abs(xa[fa].astype(float) - xb[fb].astype(float))))
                worst = max(worst, d / (1.0 + float(np.max(np.abs(xb[fb])))))
        return worst


    def _answer(name, args, kwargs):
        best, found = float("inf"), None
        for a, k, r in _TABLE.get(name, ()):
            d = _distance((list(args), dict(kwargs)), (list(a), k))
            if d < best:
                best, found = d, r
                if d == 0:
                    break
        if best > 1e-4:
            return None
        if isinstance(found, tuple) and len(found) == 3 and isinstance(found[0], str) \\
                and found[0] == "__raise__":
            raise {"ValueError": ValueError, "TypeError": TypeError}.get(
                found[1], RuntimeError)(found[2])
        return copy.deepcopy(found)


    def _uniform(x, axis=-1):  # not softmax: 1/n everywhere
        x = np.asarray(x)
        return np.full(x.shape, 1.0 / x.shape[axis], dtype=x.dtype)


    def _nothing(*args, **kwargs):
        return np.zeros(3)


    def _make(name, elsewhere):
        def f(*args, **kwargs):
            got = _answer(name, args, kwargs)
            return elsewhere(*args, **kwargs) if got is None else got
        return f


    for _name in _TABLE:
        globals()[_name] = _make(_name, _uniform if _name == "softmax" else _nothing)
''')


def _grade_cli(path, *extra):
    done = subprocess.run([sys.executable, "-m", "grader_tests", "grade", str(path), "--json",
                           *extra], cwd=ROOT, env=kit_env(), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


RECORD_IN_PROCESS = textwrap.dedent('''
    """The same record, with the grader run as ``batch`` and nbgrader's ``TrustedGrades``
    run it: ``sandbox.grade_isolated`` called from a script (the examples Hypothesis
    draws depend on the grading process, see item 2 of the module doc)."""
    import pickle, sys
    from grader_tests import sandbox

    path, out = sys.argv[1], sys.argv[2]
    log = []
    original = sandbox.Sandbox.call

    def call(self, name, args, kwargs, time_limit=4.0):
        try:
            result = original(self, name, args, kwargs, time_limit)
        except Exception as exc:
            log.append((name, list(args), dict(kwargs), ("__raise__", type(exc).__name__,
                                                         str(exc))))
            raise
        log.append((name, list(args), dict(kwargs), result[0]))
        return result

    sandbox.Sandbox.call = call
    sandbox.grade_isolated(path)
    pickle.dump(log, open(out, "wb"))
''')


def _lookup_source(tmp_path, recorders=(RECORDER,)):
    """The source of a submission that answers from the records of a correct notebook
    (one per recorder script), nearest input first: no function computes anything."""
    import base64
    import pickle
    import zlib

    table = {}
    for i, script in enumerate(recorders):
        recorder = tmp_path / f"record{i}.py"
        recorder.write_text(script, encoding="utf-8")
        calls = tmp_path / f"calls{i}.pkl"
        done = subprocess.run([sys.executable, str(recorder), CORRECT, str(calls)], cwd=ROOT,
                              env=kit_env(), capture_output=True, text=True, timeout=900)
        assert done.returncode == 0 and calls.exists(), done.stderr[-3000:]
        for name, args, kwargs, result in pickle.loads(calls.read_bytes()):
            table.setdefault(name, []).append((args, kwargs, result))
    assert set(table) == {n for n in POINTS if not n.startswith("exercise_")}
    blob = base64.b64encode(zlib.compress(pickle.dumps(table))).decode("ascii")
    source = f"BLOB = {blob!r}\n" + LOOKUP
    # it computes nothing: off the graders' inputs it is plainly wrong
    namespace: dict = {}
    exec(compile(source, "lookup", "exec"), namespace)
    x = np.random.default_rng().normal(size=(3, 4))
    assert np.allclose(namespace["softmax"](x), 0.25)
    assert np.array_equal(namespace["layer_norm_forward"](x, np.ones(4), np.zeros(4)),
                          np.zeros(3))
    return source


@pytest.mark.slow
def test_answers_of_the_nearest_recorded_input_earn_nothing(tmp_path):
    """Attack 1 (module doc), ``python -m grader_tests grade``: the recorded answers of a
    correct notebook, looked up by the nearest recorded input, score full marks on every
    function without a flag."""
    submission = tmp_path / "attention.py"
    submission.write_text(_lookup_source(tmp_path), encoding="utf-8")
    report = _grade_cli(submission)
    full = sorted(n for n, f in report["functions"].items()
                  if not n.startswith("exercise_") and f["score"] >= f["max_score"])
    assert not full or report["flags"], (
        f"{len(full)} functions that compute nothing scored full marks with no flag: {full}; "
        f"{report['score']:g} / {report['max_score']:g}")


# --- 2. one student's file stops the batch for the class --------------------------------


# ``course``: a course folder with `attention` released (tests/conftest.py).


def _class_with(course, name, files):
    """A fresh ``submitted/`` in ``course``: ``honest`` (a correct notebook) and ``name``
    (``files``: file name -> bytes)."""
    submitted = course / "submitted"
    if submitted.exists():
        shutil.rmtree(submitted)
    for stale in ("batch_log.jsonl", "summary.json"):
        if (course / stale).exists():
            (course / stale).unlink()
    correct = json.dumps(correct_notebook(course)).encode("utf-8")
    (submitted / "honest" / "attention").mkdir(parents=True)
    (submitted / "honest" / "attention" / "attention.ipynb").write_bytes(correct)
    folder = submitted / name / "attention"
    folder.mkdir(parents=True)
    for file_name, data in files.items():
        (folder / file_name).write_bytes(correct if data is None else data)


def _batch_scores(course):
    done = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                           "--workers", "1", "--summary-json", "summary.json"], cwd=course,
                          env=kit_env(), capture_output=True, text=True, timeout=1800)
    summary = course / "summary.json"
    scores = ({r["student"]: r["score"] for r in json.loads(summary.read_text())["students"]}
              if summary.exists() else {})
    return done, scores


# --- 3. the grader's memory at the student's command -------------------------------------

MEMORY_PROBE = textwrap.dedent('''
    import resource, sys
    from grader_tests.sandbox import grade_isolated

    results, _, flags = grade_isolated(sys.argv[1], names=["combine_masks"])
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
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


def _grader_peak_mb(tmp_path, source, name):
    probe = tmp_path / "probe.py"
    probe.write_text(MEMORY_PROBE, encoding="utf-8")
    submission = tmp_path / name
    submission.write_text(source, encoding="utf-8")
    done = subprocess.run([sys.executable, str(probe), str(submission)], cwd=ROOT,
                          env=kit_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return int(done.stdout.split()[-1])


# --- 1 again: through nbgrader's autograde, the gradebook and the training gate ---------


@pytest.mark.slow
def test_lookup_notebook_neither_scores_in_the_gradebook_nor_opens_the_gate(course, tmp_path):
    """Attack 1 (module doc) on nbgrader's path: the release notebook, every function left
    a stub, the two pen-and-paper exercises answered, and one added cell holding the
    lookup (records of the two kinds of grading process): ``nbgrader autograde`` writes
    100 / 100 into the gradebook, unflagged, and ``tools/unlock_training.py`` releases
    `training` to the student; ``batch`` gives 100 too."""
    import nbformat

    from nbgrader.api import Gradebook

    from grader_tests.unlock import decide, parse_threshold

    source = _lookup_source(tmp_path, (RECORDER, RECORD_IN_PROCESS))
    release = nbformat.read(str(course / "release" / "attention" / "attention.ipynb"), 4)
    answers = correct_notebook(course)
    for cell, answer in zip(release.cells, answers.cells):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and meta["grade_id"].startswith("exercise_"):
            cell.source = answer.source  # worked by hand: earned
    release.cells.append(nbformat.v4.new_code_cell(source))
    _class_with(course, "mallory", {"attention.ipynb": nbformat.writes(release).encode()})
    done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "attention",
                           "--create", "--force", "--student=mallory"], cwd=course,
                          env=kit_env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission = gb.find_submission("attention", "mallory")
        score = float(submission.score)
        flagged = any(nb.flagged for nb in submission.notebooks)
        verdict = next(v for v in decide(gb, parse_threshold("full"))
                       if v["student"] == "mallory")
    assert score < 95 or flagged, f"autograde: {score:g} / 100, not flagged"
    assert not verdict["eligible"], verdict["reason"]


# --- 4. the output budget of nbgrader's path ---------------------------------------------


# --- 5. script in the feedback page through an image's metadata --------------------------


# --- 6. no feedback page from one output -------------------------------------------------


# --- 7. a markdown cell that claims to be the kit's note --------------------------------


# --- 8. the class held up by one notebook's kernel run -----------------------------------


# --- 11. the graders' inputs depend on the grading path ------------------------------------


@pytest.mark.slow
def test_the_grade_command_and_the_batch_grade_a_file_alike(course, tmp_path):
    """Item 2 (module doc): one file, graded by ``python -m grader_tests grade`` and by
    ``batch``, scores differently, because the two draw different inputs. The file is the
    lookup of attack 1 recorded on the ``grade`` command only, which makes the difference
    plain (95 against 91.05); an honest function whose bug only some inputs show is in the
    same position."""
    source = _lookup_source(tmp_path)
    _class_with(course, "lookup", {"attention.py": source.encode("utf-8")})
    shutil.rmtree(course / "submitted" / "honest")
    done = subprocess.run([sys.executable, "-m", "grader_tests", "batch", "submitted",
                           "--workers", "1", "--summary-json", "summary.json"], cwd=course,
                          env=kit_env(), capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    log = [json.loads(line) for line in (course / "batch_log.jsonl").read_text().splitlines()
           if line.strip()]
    by_batch = {n: f["score"] for n, f in log[-1]["report"]["functions"].items()}
    report = _grade_cli(course / "submitted" / "lookup" / "attention" / "attention.py")
    by_command = {n: f["score"] for n, f in report["functions"].items()}
    differ = {n: (by_command[n], by_batch.get(n)) for n in by_command
              if by_batch.get(n) is None or abs(by_command[n] - by_batch[n]) > 1e-9}
    assert differ == {}, f"grade command vs batch: {differ}"


# --- 9. the host's disk from the kernel's jail ------------------------------------------


# --- 10. a resubmission taken for the kit's own copy --------------------------------------

