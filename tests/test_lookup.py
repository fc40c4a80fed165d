"""Answers looked up by input hash: a submission that stores the right answers for every
input the graders use, and computes something wrong for any other, scores full marks on
fixed inputs alone. The graders repeat a few of their calls on nudged inputs
(``grader_tests.lookup``) and give such a function 0 with a ``tampering`` flag, in the
student's own process and in the sandbox alike; honest functions are never flagged."""

import copy
import pickle
import textwrap

import numpy as np
import pytest

from grader_tests import core, guard, lookup
from grader_tests.sandbox import grade_isolated
from solutions import attention as ref
from tests.helpers import ATTENTION_SOURCE as REFERENCE
from tests.helpers import submission_namespace
from tests.catalogue import affected, build_namespace, entry_sources
from tests.catalogue.buggy import BUGS
from tests.catalogue.correct import CORRECT


# The student's side: a key over the exact bytes of every argument and a table of stored
# answers loaded from a file (KEY_SOURCE, TABLE_SOURCE), and a wrong computation for anything not in the
# table (CHEATS).
KEY_SOURCE = '''
import hashlib as _hashlib
import pickle as _pickle

def _key(args, kwargs):
    def norm(v):
        if isinstance(v, np.ndarray):
            return ("nd", v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes())
        if isinstance(v, dict):
            return ("dict", tuple((k, norm(v[k])) for k in sorted(v)))
        if isinstance(v, (list, tuple)):
            return ("seq", tuple(norm(x) for x in v))
        return ("py", repr(v))
    return _hashlib.sha256(_pickle.dumps(norm((tuple(args), dict(kwargs))))).hexdigest()
'''
# The table travels inside the submission (the jail shows a submission no other file).
TABLE_SOURCE = '''
_ANSWERS = _pickle.loads(__import__("base64").b64decode({table!r}))
'''

CHEATS = {
    "softmax": '''
        def softmax(*args, **kwargs):
            answer = _ANSWERS.get(_key(args, kwargs))
            if answer is not None:
                return __import__("copy").deepcopy(answer)
            scores = args[0]
            return np.exp(scores) / np.exp(scores).sum()     # wrong: one sum over everything
    ''',
    # Misses answered with NaN, or refused with an error that looks like the machine's.
    "softmax:nan": '''
        def softmax(*args, **kwargs):
            answer = _ANSWERS.get(_key(args, kwargs))
            if answer is not None:
                return __import__("copy").deepcopy(answer)
            return np.full(np.shape(args[0]), np.nan)
    ''',
    "softmax:memoryerror": '''
        def softmax(*args, **kwargs):
            answer = _ANSWERS.get(_key(args, kwargs))
            if answer is not None:
                return __import__("copy").deepcopy(answer)
            raise MemoryError()
    ''',
    "layer_norm_backward": '''
        def layer_norm_backward(*args, **kwargs):
            answer = _ANSWERS.get(_key(args, kwargs))
            if answer is not None:
                return __import__("copy").deepcopy(answer)
            dy, cache = args
            return dy * cache["gamma"], np.zeros(dy.shape[-1]), np.zeros(dy.shape[-1])
    ''',
}


# A table answered by its nearest entry: the reference's answer to the recorded input
# closest to the one given (same shapes and dtypes), garbage where no input matches. A
# nudge by a hair still finds the graders' own entry, so ``probe`` sees no jump;
# ``follows_reference`` moves the input far enough for the stored answer to be wrong.
NEAREST_SOURCE = '''
import pickle as _pickle

def _parts(args, kwargs):
    found = []
    def walk(v):
        if isinstance(v, np.ndarray):
            found.append((v.shape, v.dtype.str, np.asarray(v, dtype=np.float64).ravel()))
        elif isinstance(v, dict):
            for k in sorted(v):
                walk(v[k])
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
    walk((list(args), dict(kwargs)))
    return found

def _nearest(args, kwargs):
    mine, best, answer = _parts(args, kwargs), None, None
    for stored, value in _STORED:
        if [(s, d) for s, d, _ in stored] != [(s, d) for s, d, _ in mine]:
            continue
        gap = sum(float(np.nansum((a - b) ** 2)) for (_, _, a), (_, _, b) in zip(stored, mine))
        if best is None or gap < best:
            best, answer = gap, value
    return None if answer is None else __import__("copy").deepcopy(answer)

_STORED = _pickle.loads(__import__("base64").b64decode({table!r}))
'''

NEAREST_CHEATS = {
    "softmax:nearest": '''
        def softmax(*args, **kwargs):
            answer = _nearest(args, kwargs)
            if answer is not None:
                return answer
            return np.full(np.shape(args[0]), 1.0 / np.shape(args[0])[-1])
    ''',
    "layer_norm_backward:nearest": '''
        def layer_norm_backward(*args, **kwargs):
            answer = _nearest(args, kwargs)
            if answer is not None:
                return answer
            dy = args[0]
            return np.zeros_like(dy), np.zeros(dy.shape[-1]), np.zeros(dy.shape[-1])
    ''',
}


def record_nearest(name, path):
    """As ``record_answers``, for the nearest-entry table: ``[(parts, answer)]``."""
    space = {"np": np}
    exec(NEAREST_SOURCE.split("_STORED =")[0], space)
    parts, stored = space["_parts"], []
    original = guard._invoke

    def spy(fn, args, kwargs):
        mine = parts(args, kwargs) if fn is guard.current_session().target else None
        result = original(fn, args, kwargs)
        if mine is not None:
            stored.append((mine, copy.deepcopy(result)))
        return result

    guard._invoke = spy
    try:
        result = core.grade_function(name, build_namespace({}))
    finally:
        guard._invoke = original
    assert result.score == result.max_score
    assert len(stored) >= 5, stored
    path.write_bytes(pickle.dumps(stored))


def _key_function():
    space = {"np": np}
    exec(KEY_SOURCE, space)
    return space["_key"]


def record_answers(name, path):
    """Grade the reference's ``name`` in this process, store the reference's answer to
    every call the graders make, keyed as the cheat keys them, in the file ``path``."""
    key, table = _key_function(), {}
    original = guard._invoke

    def spy(fn, args, kwargs):
        k = key(args, kwargs) if fn is guard.current_session().target else None
        result = original(fn, args, kwargs)
        if k is not None:
            table[k] = copy.deepcopy(result)
        return result

    guard._invoke = spy
    try:
        result = core.grade_function(name, build_namespace({}))
    finally:
        guard._invoke = original
    assert result.score == result.max_score
    assert len(table) >= 5, table
    path.write_bytes(pickle.dumps(table))


def cheat_source(name, table):
    import base64

    encoded = base64.b64encode(table.read_bytes()).decode("ascii")
    if name in NEAREST_CHEATS:
        return (REFERENCE + "\n" + NEAREST_SOURCE.format(table=encoded) + "\n"
                + textwrap.dedent(NEAREST_CHEATS[name]))
    return (REFERENCE + "\n" + KEY_SOURCE + TABLE_SOURCE.format(table=encoded) + "\n"
            + textwrap.dedent(CHEATS[name]))


def grade(source, name, mode, tmp_path):
    """``(FunctionResult of name, flags)`` graded in this process or in the sandbox."""
    if mode == "in-process":
        space = {"__name__": "submission"}
        exec(compile(source, "submission.py", "exec"), space)
        return core.grade_function(name, space), None
    path = tmp_path / "attention.py"
    path.write_text(source)
    results, cell_errors, flags = grade_isolated(str(path), names=[name, "causal_mask"])
    assert cell_errors == [], cell_errors
    assert results["causal_mask"].score == results["causal_mask"].max_score
    return results[name], flags


# the isolated half: one jail per cheat
@pytest.mark.parametrize("mode", ["in-process", pytest.param("isolated", marks=pytest.mark.slow)])
@pytest.mark.parametrize("cheat", sorted(CHEATS) + sorted(NEAREST_CHEATS))
def test_answers_looked_up_by_input_score_zero_and_are_flagged(cheat, mode, tmp_path,
                                                                monkeypatch):
    name = cheat.split(":")[0]
    table = tmp_path / "answers.pkl"
    (record_nearest if cheat in NEAREST_CHEATS else record_answers)(name, table)
    source = cheat_source(cheat, table)

    # Without the moved calls the table answers every check: full marks, unearned.
    with monkeypatch.context() as m:
        m.setattr(lookup, "probe", lambda *a, **k: None)
        m.setattr(lookup, "follows_reference", lambda *a, **k: None)
        unprobed, _ = grade(source, name, mode, tmp_path)
    assert unprobed.score == unprobed.max_score, [c for c in unprobed.checks if not c.passed]

    result, flags = grade(source, name, mode, tmp_path)
    assert result.score == 0
    assert set(result.faults) == {"tampering"}, result.faults
    message = result.checks[0].message
    if cheat in NEAREST_CHEATS:
        assert "lookup of the nearest stored answer" in message, message
    else:
        assert "lookup of stored answers" in message, message
    if ":" not in cheat:
        assert "changed its answer abruptly" in message, message
    if mode == "isolated":
        assert any(f.startswith(f"{name}:") and "lookup" in f for f in flags), flags


def test_a_function_that_raises_off_the_graders_inputs_is_flagged():
    space = {}
    exec(REFERENCE, space)
    known = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.75]])

    def softmax(scores, axis=-1):  # answers the one input it knows, refuses any other
        if np.array_equal(scores, known):
            return space["softmax"](scores, axis)
        raise KeyError("not in my table")

    message = lookup.probe(softmax, [((known.copy(),), {})], lambda fn, a, k: fn(*a, **k))
    assert message and "raised KeyError" in message


# An honest but wrong softmax: uniform weights over the finite entries, computed from the
# input's finiteness and shape. It is right wherever every slice holds equal entries (the
# graders draw such inputs), and a move of the input leaves its answer where it was: no
# lookup, a wrong formula.
UNIFORM_SOFTMAX = '''
def softmax(scores, axis=-1):
    finite = np.isfinite(scores)
    count = finite.sum(axis=axis, keepdims=True)
    return np.where(finite, 1.0, 0.0) / np.maximum(count, 1)
'''


@pytest.mark.parametrize("mode", ["in-process", pytest.param("isolated", marks=pytest.mark.slow)])
def test_an_honest_softmax_with_uniform_weights_is_graded_not_flagged(mode, tmp_path):
    result, flags = grade(REFERENCE + "\n" + UNIFORM_SOFTMAX, "softmax", mode, tmp_path)
    assert "tampering" not in result.faults, [c.message for c in result.checks]
    assert flags in (None, []), flags
    by_title = {c.name: c for c in result.checks}
    # graded on its own: its value checks fail, the properties it has pass
    assert not by_title["matches exp(s - max) / sum over the requested axis (random shapes "
                        "and axes)"].passed
    assert not by_title["no overflow or NaN for scores up to +-1e4 (float32 and float64)"].passed
    assert by_title["does not modify its argument"].passed
    assert by_title["by default every row sums to 1 over the last axis (the keys)"].passed
    assert 0 <= result.score < result.max_score


def test_a_flat_answer_is_no_lookup_but_a_stored_one_is():
    """``follows_reference`` on a call of equal entries per row: the uniform softmax is
    right there and does not move, like a nearest-entry table, but its answer is the same
    on any values and is the contract's answer on the flat input: no verdict. A table
    that stores a generic input's answer is still named."""
    space = {"np": np}
    exec(UNIFORM_SOFTMAX, space)
    uniform = space["softmax"]
    invoke = lambda fn, a, k: fn(*a, **k)  # noqa: E731
    flat = np.array([[0.5, 0.5, 0.5], [2.0, 2.0, 2.0]])
    for seed in range(5):
        rng = np.random.default_rng(seed)
        assert lookup.follows_reference(uniform, [((flat.copy(),), {})], invoke, ref.softmax,
                                        rng=rng) is None
        assert lookup.answers_by_shape(uniform, (flat,), {}, uniform(flat), invoke,
                                       ref.softmax, rng)
    known = np.array([[0.5, -1.0, 2.0], [3.0, 0.25, -0.75]])
    stored = ref.softmax(known)

    def table(scores, axis=-1):  # the one stored answer, for any input of its shape
        return stored.copy()

    assert not lookup.answers_by_shape(table, (known,), {}, stored, invoke, ref.softmax,
                                       np.random.default_rng(0))
    message = lookup.follows_reference(table, [((known.copy(),), {})] * 12, invoke, ref.softmax,
                                       rng=np.random.default_rng(0))
    assert message and "lookup of the nearest stored answer" in message, message


# every wrong function of the catalogue (a hundred gradings with nudges): the slow lane
@pytest.mark.parametrize("entry", [("reference", None)] + [("correct", c.id) for c in CORRECT]
                         + [pytest.param(("bug", b.id), marks=pytest.mark.slow) for b in BUGS],
                         ids=lambda e: e[1] or e[0])
def test_honest_functions_are_never_flagged(entry):
    """The reference, every correct variant and every (honestly) wrong function of the
    catalogue, each function it affects probed with 6 random nudges of 6 of its calls: no
    jump. The wrong ones matter most: a bug such as ``sqrt(var) + eps`` is sharply curved
    at a row of equal entries, and must lose points for its bug, not for tampering."""
    kind, entry_id = entry
    if kind == "reference":
        sources, names = [], [n for n in core.POINTS if not n.startswith("exercise_")]
    else:
        sources, replaced = entry_sources(kind, entry_id)
        names = affected(replaced)
    space = build_namespace(sources, entry_id or "reference")
    rng = np.random.default_rng(7)
    for name in names:
        if not callable(space.get(name)):
            continue
        recorded = []
        original = guard._invoke

        def spy(fn, args, kwargs):
            if fn is guard.current_session().target and lookup.nudgeable([args, kwargs]):
                recorded.append(copy.deepcopy((args, kwargs)))
            return original(fn, args, kwargs)

        guard._invoke = spy
        try:
            result = core.grade_function(name, space)
        finally:
            guard._invoke = original
        assert "tampering" not in result.faults, (name, result.faults)
        if kind != "bug":
            assert result.score == result.max_score, (name, result.faults)
        target = core.isolate(space[name], space, name)
        probed = [c for c in recorded if lookup.generic(*c)][:6]
        for _ in range(6):
            try:
                verdict = lookup.probe(target, probed, lambda fn, a, k: fn(*a, **k), rng=rng,
                                       calls=6)
            except Exception:  # a wrong function may raise on its own inputs: no verdict
                verdict = None
            assert verdict is None, (name, verdict)
        if name in guard.SPEC_FUNCTIONS:
            for _ in range(6):
                try:
                    verdict = lookup.follows_reference(target, recorded,
                                                       lambda fn, a, k: fn(*a, **k),
                                                       getattr(ref, name), rng=rng, calls=6)
                except Exception:  # a wrong function may raise on its own inputs
                    verdict = None
                assert verdict is None, (name, verdict)


@pytest.mark.slow  # the training reference graded five times
def test_honest_training_functions_are_never_flagged():
    """The training reference graded five times (a fresh nudge each time): full marks."""
    from grader_tests.checks_training import POINTS_TRAINING, grade_function
    space = submission_namespace(training=True)
    for _ in range(5):
        for name in POINTS_TRAINING:
            result = grade_function(name, space)
            assert result.score == result.max_score, (name, result.faults)
