"""Round 6 of attacks by a student: the backward passes, checks a constant passes, the
feedback page's Content-Security-Policy, the training unlock's exchange courses and the
submission time kept from the exchange.

Each test asserts the secure behaviour and is marked ``xfail(strict=True)``: at the time of
writing each one FAILS, showing the attack works (a strict xfail turns into a failure the
day the kit closes it, so that the mark is then removed).

* A backward pass nobody derived: ``layer_norm_backward`` and ``attention_backward`` that
  differentiate the student's own forward by complex steps (``f(x + i h)``, ``h = 1e-30``,
  one step per input element, through a private copy of the forward that is no graded
  name, so that no callback to the reference is ever asked for). The result is the
  gradient to machine precision, so every backward check passes and the lookup probes see
  a smooth function: 20 points, no flag, for the two parts whose point is the
  hand-written backward (docs/contract.md, "in closed form"; the course's "backward pass
  of an attention layer written by hand").
* The feedback page's Content-Security-Policy is skipped when the page already contains
  the text ``attention-kit-feedback`` (``feedback.MARK``, the kit's mark of a finished
  page): a student who writes those words in a markdown cell or a comment gets a page
  with no CSP (nor the kit's style sheet and part names); the relative image a student's
  markdown may keep (``![p](pixel.png)``) is then fetched whenever the page is served.
* Functions that compute nothing earn points: ``attention_forward`` returning zeros passes
  "the output at t does not depend on later tokens", "permutation equivariance", the
  dtype and the no-mutation checks (3.5 of 7 points); ``layer_norm_forward`` returning
  zeros 2.4 of 6, ``np.ones`` masks 2 of 3 (and 2 of 4), ``block_param_count`` returning
  0 one point, all zeros ``sinusoidal_positions`` 1.25 of 5: 14.15 points, unflagged, for
  a file of constants (the lookup probes flag a constant only where the graders' inputs
  give it one right answer).
* A classmate squats an unlocked student's exchange course: the unlock releases
  ``training`` to ``<exchange>/<course>-training-<student>``, a name anyone can compute, in
  an exchange root every user may write (nbgrader makes it 0777). A folder of that name
  made beforehand by another user makes nbgrader's release fail ("You don't own the
  directory"), so the student stays locked out of the exchange release on every run, until
  the instructor finds and removes the folder.
* The same name as a symbolic link: a locked student links
  ``<exchange>/<course>-training-<classmate>`` to the class's own exchange course
  (``<exchange>/<course>``, the instructor's). When that classmate is unlocked, nbgrader's
  release follows the link (the target is the instructor's, so its owner check passes)
  and writes ``training`` into the class's course: ``nbgrader fetch_assignment training
  --course <course>`` then hands it to every student, locked or not (and the link can
  point anywhere the instructor may write: a course folder gets an ``outbound/`` and a
  world-writable ``inbound/``).
* The late penalty rests on ``timestamp.txt``, a file of the student's own submission
  folder in the exchange's ``inbound/``: a student who submits after the due date and
  then rewrites that file (the folder is theirs) is collected, and graded, as on time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from datetime import datetime, timezone

import nbformat
import pytest

from grader_tests import jail
from tests.helpers import ATTENTION_SOURCE, ROOT, correct_notebook, kit_env

needs_jail = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")


# --- 1. backward passes by complex-step differentiation ------------------------------------

NUMERICAL_BACKWARDS = textwrap.dedent('''

    # The backward passes, derived by nobody: complex-step differentiation of a private copy
    # of each forward (no graded name is called, so no callback is asked for).
    _H = 1e-30


    def _ln_c(x, gamma, beta, eps):
        mean = x.mean(axis=-1, keepdims=True)
        c = x - mean
        var = (c * c).mean(axis=-1, keepdims=True)
        return c / np.sqrt(var + eps) * gamma + beta


    def _attn_c(x, p, h, causal, scale):
        B, T, d = x.shape
        dh = d // h

        def sp(M):
            return M.reshape(B, T, h, dh).transpose(0, 2, 1, 3)

        Q, K, V = (sp(x @ p["W_" + n] + p["b_" + n]) for n in "QKV")
        S = Q @ np.swapaxes(K, -1, -2)
        if scale:
            S = S / np.sqrt(dh)
        keep = np.tril(np.ones((T, T), bool)) if causal else np.ones((T, T), bool)
        m = np.where(keep, S.real, -np.inf).max(axis=-1, keepdims=True)
        E = np.where(keep, np.exp(np.where(keep, S, 0) - m), 0)
        P = E / E.sum(axis=-1, keepdims=True)
        O = (P @ V).transpose(0, 2, 1, 3).reshape(B, T, d)
        return O @ p["W_O"] + p["b_O"]


    def _vjp(f, arrays, dy):
        out = []
        for k, a in enumerate(arrays):
            g = np.zeros(a.shape)
            for idx in np.ndindex(*a.shape):
                args = [np.asarray(b, dtype=complex) for b in arrays]
                args[k][idx] += 1j * _H
                g[idx] = np.sum(dy * f(*args).imag) / _H
            out.append(g)
        return out


    def layer_norm_backward(dy, cache):
        x, gamma, beta, eps = cache["_in"]
        dt = np.result_type(dy, x)
        dy64, x64 = np.asarray(dy, np.float64), np.asarray(x, np.float64)
        g64, b64 = np.asarray(gamma, np.float64), np.asarray(beta, np.float64)
        dx = np.zeros(x64.shape)
        for j in range(x64.shape[-1]):
            xc = x64.astype(complex)
            xc[..., j] += 1j * _H
            dx[..., j] = (dy64 * _ln_c(xc, g64, b64, eps).imag).sum(axis=-1) / _H
        dg, db = _vjp(lambda g, b: _ln_c(x64, g, b, eps), [g64, b64], dy64)
        return dx.astype(dt), dg.astype(dt), db.astype(dt)


    _KEYS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")


    def attention_backward(dy, cache):
        x, params, h, causal, scale = cache["_in"]
        dt = np.result_type(dy, x)
        arrays = [np.asarray(x, np.float64)] + [np.asarray(params[k], np.float64)
                                                for k in _KEYS]
        grads = _vjp(lambda x, *ps: _attn_c(x, dict(zip(_KEYS, ps)), h, causal, scale),
                     arrays, np.asarray(dy, np.float64))
        return grads[0].astype(dt), {k: g.astype(dt) for k, g in zip(_KEYS, grads[1:])}
''')


def _without_function(source: str, name: str) -> str:
    start = source.index(f"\ndef {name}(")
    end = source.index("\ndef ", start + 1)
    return source[:start] + source[end:]


def numerical_backward_submission() -> str:
    """The reference's forwards (the student's own, right), each keeping its inputs in its
    cache, and the two backwards replaced by ``NUMERICAL_BACKWARDS``."""
    source = re.sub(r"(?m)^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n", "", ATTENTION_SOURCE)
    for name in ("layer_norm_backward", "attention_backward"):
        source = _without_function(source, name)
    ln = 'cache = {"xhat": xhat, "inv": inv, "gamma": gamma}'
    attn = '"n_heads": n_heads, "params": params}'
    assert ln in source and attn in source, "the reference's forwards changed"
    source = source.replace(ln, ln[:-1] + ', "_in": (x, gamma, beta, eps)}')
    source = source.replace(attn, attn[:-1] + ', "_in": (x, params, n_heads, causal, scale)}')
    return source + NUMERICAL_BACKWARDS


@pytest.mark.slow  # grades two functions in the jail (about 30 s)
@needs_jail
def test_a_backward_nobody_derived_does_not_earn_the_backward_points(tmp_path):
    from grader_tests.sandbox import grade_isolated

    path = tmp_path / "numerical.py"
    path.write_text(numerical_backward_submission(), encoding="utf-8")
    names = ["layer_norm_backward", "attention_backward"]
    results, cell_errors, flags = grade_isolated(str(path), names=names)
    assert cell_errors == []
    scores = {name: (results[name].score, results[name].max_score) for name in names}
    # The attack earned {'layer_norm_backward': (10.0, 10.0), 'attention_backward':
    # (10.0, 10.0)} with no flag. Now the attention backward (about 1900 forward passes on
    # 1600 entries) never keeps full marks unreviewed: it is flagged for review, its points
    # kept for the instructor (grader_tests/derivation.py), or its answers are refused.
    # (The layer-norm one costs some 0.06 passes per entry here, under derivation's
    # threshold: not asserted.)
    attention = results["attention_backward"]
    assert attention.review or attention.score < attention.max_score, scores
    assert flags, scores


# --- 2. the mark of a finished feedback page, written by the student ------------------------

def test_a_page_holding_the_kits_mark_as_student_text_still_gets_its_policy():
    """``finish_page`` takes any page containing ``feedback.MARK`` for one it finished."""
    from grader_tests.feedback import CSP_META, MARK, finish_page

    page = ("<!DOCTYPE html><html><head><title>attention</title></head><body>"
            f"<div class=\"text_cell_render\"><p>My notes: {MARK}</p>"
            "<p><img alt=\"p\" src=\"pixel.png\"/></p></div></body></html>")
    assert CSP_META in finish_page(page)


@pytest.mark.slow  # runs nbgrader generate_assignment, autograde, generate_feedback
@needs_jail
def test_a_students_words_cannot_remove_the_feedback_pages_policy(tmp_path):
    from grader_tests.feedback import CSP_META, MARK

    course = tmp_path / "course"
    for part in ("source/attention", "release/attention"):
        shutil.copytree(ROOT / part, course / part)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    nb = correct_notebook(course)
    nb.cells.append(nbformat.v4.new_markdown_cell(f"My notes: {MARK}\n\n![p](pixel.png)"))
    folder = course / "submitted" / "mallory" / "attention"
    folder.mkdir(parents=True)
    nbformat.write(nb, str(folder / "attention.ipynb"))
    for args in (["generate_assignment", "attention", "--force"],
                 ["autograde", "attention", "--create", "--force", "--student=mallory"],
                 ["generate_feedback", "attention", "--force", "--student=mallory"]):
        done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course,
                              env=kit_env(), capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    page = (course / "feedback" / "mallory" / "attention" / "attention.html").read_text(
        encoding="utf-8")
    assert 'src="pixel.png"' in page  # the student's relative image, kept by design
    assert CSP_META in page, "the feedback page has no Content-Security-Policy"


# --- 3. the submission time is a file of the student's --------------------------------------

@pytest.mark.slow  # runs nbgrader's exchange (release, fetch, submit, collect)
def test_a_student_cannot_backdate_a_late_submission_in_the_inbound(tmp_path):
    from nbgrader.utils import parse_utc

    from tests.test_exchange import COURSE_ID, make_course, make_home, nbgrader

    course = make_course(tmp_path)
    exchange = course / "exchange"
    home, env = make_home(tmp_path, "alice", exchange)
    due = "2025-03-14 17:00:00 UTC"
    nbgrader(["generate_assignment", "attention", "--force"], course)
    nbgrader(["db", "assignment", "add", "attention", f"--duedate={due}"], course)
    nbgrader(["release_assignment", "attention"], course)
    nbgrader(["fetch_assignment", "attention", "--course", COURSE_ID], home, env)
    shutil.copy(ROOT / "example" / "submitted" / "student_correct" / "attention" /
                "attention.ipynb", home / "attention" / "attention.ipynb")
    nbgrader(["submit", "attention", "--course", COURSE_ID], home, env)  # long after the due date
    submitted_at = datetime.now(timezone.utc)
    # The student's own folder in the inbound: they rewrite the time nbgrader wrote there.
    (mine,) = (exchange / COURSE_ID / "inbound").iterdir()
    (mine / "timestamp.txt").write_text("2025-03-14 16:59:00.000000 UTC", encoding="utf-8")

    nbgrader(["collect", "attention"], course)
    kept = (course / "submitted" / "alice" / "attention" / "timestamp.txt").read_text(
        encoding="utf-8")
    collected_as = parse_utc(kept)
    if collected_as.tzinfo is None:
        collected_as = collected_as.replace(tzinfo=timezone.utc)
    assert collected_as > parse_utc(due).replace(tzinfo=timezone.utc), (
        f"submitted at {submitted_at:%Y-%m-%d %H:%M} UTC, after the due date {due}; "
        f"collected as submitted at {kept}: no late penalty")


# --- 4. constants that pass the property checks ---------------------------------------------

CONSTANTS = textwrap.dedent('''
    import numpy as np


    def causal_mask(T):
        return np.ones((T, T), bool)


    def padding_mask(lengths, T):
        return np.ones((len(lengths), T), bool)


    def combine_masks(causal, padding):
        return np.ones((padding.shape[0],) + causal.shape, bool)


    def sinusoidal_positions(T, d):
        return np.zeros((T, d))


    def layer_norm_forward(x, gamma, beta, eps=1e-5):
        return np.zeros_like(x), {}


    def attention_forward(x, params, n_heads, causal=True, scale=True):
        return np.zeros_like(x), {}


    def block_param_count(d, d_ff=None):
        return 0
''')


@pytest.mark.slow  # grades seven functions in the jail
@needs_jail
def test_functions_that_ignore_their_inputs_earn_nothing(tmp_path):
    from grader_tests.sandbox import grade_isolated

    path = tmp_path / "constants.py"
    path.write_text(CONSTANTS, encoding="utf-8")
    names = ["causal_mask", "padding_mask", "combine_masks", "sinusoidal_positions",
             "layer_norm_forward", "attention_forward", "block_param_count"]
    results, cell_errors, flags = grade_isolated(str(path), names=names)
    assert cell_errors == []
    earned = {name: results[name].score for name in names if results[name].score > 0}
    # The attack: {'causal_mask': 2.0, 'padding_mask': 2.0, 'combine_masks': 2.0,
    # 'sinusoidal_positions': 1.25, 'layer_norm_forward': 2.4, 'attention_forward': 3.5,
    # 'block_param_count': 1.0}, no flag.
    assert flags or not earned, earned


# --- 5. a classmate's folder in place of a student's exchange course ------------------------

@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="needs root to make a folder owned by another user (the classmate)")
def test_a_classmate_cannot_keep_a_student_from_their_training_release(tmp_path, gradebooks):
    import pwd
    import warnings

    from grader_tests import unlock
    from tests.helpers import release_folder, set_scores

    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    os.chmod(exchange, 0o777)  # as nbgrader keeps an exchange root
    squat = exchange / unlock.exchange_course("course", "ada")  # the classmate's mkdir
    squat.mkdir()
    classmate = pwd.getpwnam("nobody")  # any other user of the machine
    os.chown(squat, classmate.pw_uid, classmate.pw_gid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40)})
        for _run in range(2):  # and it stays so on the next run
            newly, _already, locked = unlock.unlock(gb, release, unlocked,
                                                    unlock.parse_threshold("full"),
                                                    exchange=exchange, course_id="course")
        gb.close()
    # The attack: ada, at full marks, is locked: "... the release to the exchange failed:
    # You don't own the directory: .../course-training-ada".
    assert [v["student"] for v in locked] == [], [v["reason"] for v in locked]


def test_a_link_at_a_students_exchange_course_does_not_release_training_to_the_class(
        tmp_path, gradebooks):
    import warnings

    from grader_tests import unlock
    from tests.helpers import release_folder, set_scores

    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    exchange = tmp_path / "exchange"
    (exchange / "course" / "outbound" / "attention").mkdir(parents=True)  # the class's course
    os.chmod(exchange, 0o777)
    # mallory, locked, links ada's future course (a name anyone computes) to the class's
    (exchange / unlock.exchange_course("course", "ada")).symlink_to(exchange / "course")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40), "mallory": (10, 0)})
        unlock.unlock(gb, release, unlocked, unlock.parse_threshold("full"),
                      exchange=exchange, course_id="course")
        gb.close()
    # The attack: training is now an assignment of the class's own course, for everyone.
    assert not (exchange / "course" / "outbound" / "training").exists()
