"""Answers looked up by input: a graded function that is right on the graders' inputs only.

The graders' inputs are fixed (derandomized Hypothesis, seeded generators), so that a
notebook's hidden cells and the command line reach the same verdicts. A submission could
exploit that: store the correct answers for those inputs, keyed by a hash of the
arguments, and return anything at all for every other input.

Every graded function with floating-point inputs is, by the contract of docs/contract.md §2, a
smooth function of them away from ties: softmax, attention, layer norm, their gradients,
positional encodings of given positions. (Masks are boolean and integers are sizes; they
are never touched here.) For a smooth ``f`` and a small step ``delta`` the second
difference

    f(x + 2 delta) - 2 f(x + delta) + f(x)  =  O(|delta|^2)

is tiny; it is the one-dimensional central second difference of ``f`` along ``delta``
(any numerical-analysis text, e.g. Nocedal and Wright, *Numerical Optimization*, 2nd ed.,
section 8.1). A lookup table answers ``f(x)`` from the table and the two others from
whatever it falls back to, so the second difference shows the full gap between the stored
answer and the fallback, and that gap does not shrink with the step. A wrong but honest
function can be sharply curved at a degenerate input (``sqrt(var) + eps`` at a row of
equal entries, where ``var = 0``): its second difference shrinks like ``delta^2`` (or
like ``sqrt(delta)`` at a square root's kink). So a jump counts only when it is there at
the step ``delta`` and still at least half as large at ``delta / 64``; output that turns
non-finite, or integers that change (an argmax at a near-tie), give no verdict. The direction ``delta`` is drawn from the operating system's
entropy at every run, so no table can hold the nudged inputs; for an honest function the
verdict does not depend on the draw, which keeps the notebook's and the command line's
grades equal.

What it cannot see: a table keyed by inputs rounded coarsely enough that the nudge (a
relative ``1e-8`` in float64, ``1e-5`` in float32) keeps the key, and a fallback that is
itself right to within the tolerance, which earns its points honestly anyway.
"""

import copy
import math
import re

import numpy as np

from .i18n import _

# Relative size of the nudge, per input dtype, and the largest second difference, relative
# to (1 + the largest output entry), that a smooth function may show, per output dtype.
NUDGE = {np.dtype(np.float64): 1e-8, np.dtype(np.float32): 1e-5}
TOLERANCE = {np.dtype(np.float64): 1e-4, np.dtype(np.float32): 3e-3}
MAX_DEPTH = 4
# The second, smaller step, as a fraction of the first: a jump must persist there.
SHRINK = 1.0 / 64


def nudgeable(value, depth=0):
    """True if ``value`` holds a finite float64/float32 array entry this module would nudge
    (in itself or in nested tuples, lists and dicts)."""
    if isinstance(value, np.ndarray):
        return value.dtype in NUDGE and value.size > 0 and bool(np.isfinite(value).any())
    if depth < MAX_DEPTH and isinstance(value, (tuple, list)):
        return any(nudgeable(v, depth + 1) for v in value)
    if depth < MAX_DEPTH and isinstance(value, dict):
        return any(nudgeable(v, depth + 1) for v in value.values())
    return False


def generic(args, kwargs):
    """True if the first float array among the arguments has at least two distinct finite
    values: a call on all-zero or constant inputs (Hypothesis starts with those) may be
    one where the stored answer and the fallback agree, so it is not worth probing."""
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, np.ndarray) and value.dtype in NUDGE:
            finite = value[np.isfinite(value)]
            return finite.size > 1 and float(finite.max()) > float(finite.min())
    return False


def _direction(value, rng, depth=0, relative=None):
    """A random step of the same structure as ``value``: arrays of the nudged dtypes get
    ``relative * max(1, max |finite entry|) * U(-1, 1)`` on their finite entries (``relative``
    defaults to the dtype's ``NUDGE``), zero elsewhere; every other leaf gets None."""
    if isinstance(value, np.ndarray):
        if value.dtype not in NUDGE or value.size == 0:
            return None
        finite = np.isfinite(value)
        if not finite.any():
            return None
        scale = NUDGE[value.dtype] if relative is None else relative
        size = scale * max(1.0, float(np.abs(value[finite]).max()))
        return np.where(finite, rng.uniform(-size, size, value.shape), 0.0)
    if depth < MAX_DEPTH and isinstance(value, (tuple, list)):
        return [_direction(v, rng, depth + 1, relative) for v in value]
    if depth < MAX_DEPTH and isinstance(value, dict):
        return {k: _direction(v, rng, depth + 1, relative) for k, v in value.items()}
    return None


def _moved(value, step, times, depth=0):
    """``value + times * step`` in the structure and dtypes of ``value`` (a new object)."""
    if step is None:
        return value
    if isinstance(value, np.ndarray):
        moved = (value.astype(np.float64) + times * step).astype(value.dtype)
        return np.where(np.isfinite(value), moved, value)
    if isinstance(value, (tuple, list)):
        items = [_moved(v, s, times, depth + 1) for v, s in zip(value, step)]
        return type(value)(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {k: _moved(v, step[k], times, depth + 1) for k, v in value.items()}
    return value


def _refilled(value, fill, depth=0):
    """``value`` (a new object, same structure and dtypes) with the finite entries of its
    float64/float32 arrays replaced by ``fill(array) -> array of the same shape``; the
    non-finite entries (a mask's ``-inf``) and every other leaf kept."""
    if isinstance(value, np.ndarray):
        if value.dtype not in NUDGE or value.size == 0:
            return value
        return np.where(np.isfinite(value), fill(value).astype(value.dtype), value)
    if depth < MAX_DEPTH and isinstance(value, (tuple, list)):
        items = [_refilled(v, fill, depth + 1) for v in value]
        return type(value)(items) if isinstance(value, tuple) else items
    if depth < MAX_DEPTH and isinstance(value, dict):
        return {k: _refilled(v, fill, depth + 1) for k, v in value.items()}
    return value


def answers_by_shape(fn, args, kwargs, mine, invoke, reference, rng):
    """Whether ``fn``'s answer ``mine`` on the graders' call ``(args, kwargs)`` is the one
    it gives whatever the input's values, and the contract's answer on the input whose
    values are all equal (zeros): a function that computes its answer from the shape
    alone (uniform weights over the finite entries, say), honest if wrong, right on the
    graders' input only because that input is degenerate (rows of equal entries), where
    the contract's answer is the flat one too. It is no lookup of the graders' answers: a
    stored answer of a graders' input that is not degenerate is not the contract's answer
    on the flat input. The checks grade such a function; ``follows_reference`` does not
    flag it.

    Args:
        fn, invoke, reference: as for ``follows_reference``.
        args, kwargs: one recorded call of the graders.
        mine: ``fn``'s answer on it.
        rng: numpy Generator for the fresh values.

    Returns:
        bool.
    """
    def fresh(a):
        finite = a[np.isfinite(a)]
        size = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
        return rng.normal(0.0, size, a.shape)

    flat_args = _refilled(list(args), np.zeros_like)
    flat_kwargs = _refilled(dict(kwargs), np.zeros_like)
    try:
        flat = reference(*copy.deepcopy(flat_args), **copy.deepcopy(flat_kwargs))
    except Exception:
        return False
    flat_error = _error(mine, flat)
    if flat_error is None or flat_error > RIGHT:
        return False
    for _draw in range(2):
        try:
            other = invoke(fn, _refilled(list(args), fresh), _refilled(dict(kwargs), fresh))
        except Exception:
            return False
        same = _error(other, mine)
        if same is None or same > RIGHT:
            return False
    return True


def _leaves(value, path="result", depth=0):
    """``[(path, array)]`` of the float arrays in a result, and its structure as a string
    (types, shapes, dtypes and dict keys, and the values of integer and boolean leaves
    after a colon): a smooth function keeps its structure."""
    if isinstance(value, float) or (isinstance(value, (np.ndarray, np.generic))
                                    and np.asarray(value).dtype.kind == "f"):
        arr = np.asarray(value)
        return [(path, arr)], f"{arr.dtype}{arr.shape}"
    if depth < MAX_DEPTH and isinstance(value, (tuple, list)):
        found, parts = [], []
        for i, v in enumerate(value):
            f, s = _leaves(v, f"{path}[{i}]", depth + 1)
            found += f
            parts.append(s)
        return found, f"{type(value).__name__}({', '.join(parts)})"
    if depth < MAX_DEPTH and isinstance(value, dict):
        found, parts = [], []
        for k in sorted(value, key=repr):
            f, s = _leaves(value[k], f"{path}[{k!r}]", depth + 1)
            found += f
            parts.append(f"{k!r}: {s}")
        return found, "{" + ", ".join(parts) + "}"
    if isinstance(value, (np.ndarray, np.generic)):  # integers, booleans: compared exactly
        arr = np.asarray(value)
        return [], f"{arr.dtype}{arr.shape}:{hash(arr.tobytes())}"
    if isinstance(value, (bool, int)):
        return [], f"{type(value).__name__}:{value}"
    return [], type(value).__name__


def _without_values(structure):
    """A structure string of ``_leaves`` with the integer and boolean values left out."""
    return re.sub(r":[-0-9a-zA-Z]+", "", structure)


def jump(results):
    """How far three results ``f(x), f(x + d), f(x + 2d)`` are from a smooth function.

    Returns:
        None if their second difference is within ``TOLERANCE`` everywhere (or they hold
        no float arrays, or give no verdict: integer entries or non-finite entries
        changed), else ``(size, sentence)``: the largest second difference in units of its
        tolerance (``inf`` when the result's structure changed) and a sentence naming it.
    """
    (leaves0, shape0), (leaves1, shape1), (leaves2, shape2) = (_leaves(r) for r in results)
    if not shape0 == shape1 == shape2:
        if _without_values(shape0) == _without_values(shape1) == _without_values(shape2):
            return None  # only integer or boolean entries changed (an argmax flipped at a
            #              near-tie, say): the function is discrete here, no verdict
        return math.inf, _("the structure of its result changed: {shape0} became {shape1}").format(
            shape0=shape0,
                             shape1=shape1)
    worst = None
    for (path, a0), (_unused, a1), (_unused, a2) in zip(leaves0, leaves1, leaves2):
        finite = np.isfinite(a0) & np.isfinite(a1) & np.isfinite(a2)
        if not (np.array_equal(finite, np.isfinite(a0)) and np.array_equal(
                np.isfinite(a0), np.isfinite(a1))):
            if np.isfinite(a0).all() and a0.size:
                # finite everywhere on the graders' input, NaN or infinite a hair away:
                # no computation of the contract does that (the probe asks it of two
                # step sizes before it says so)
                return math.inf, _("{path} became NaN or infinite when the input moved").format(
                    path=path)
            return None  # undefined here (a division by a zero variance, say): no verdict
        if not finite.any():
            continue
        second = (a2[finite].astype(np.float64) - 2 * a1[finite].astype(np.float64)
                  + a0[finite].astype(np.float64))
        scale = 1.0 + float(np.abs(a0[finite]).max())
        size = float(np.abs(second).max()) / scale
        tolerance = TOLERANCE.get(a0.dtype, TOLERANCE[np.dtype(np.float32)])
        if size > tolerance and (worst is None or size / tolerance > worst[0]):
            worst = (size / tolerance,
                     _("{path} jumped by {size:.3g} (relative to 1 + its largest entry; a smooth "
                       "function stays below {tolerance:g})").format(path=path, size=size,
                         tolerance=tolerance))
    return worst


def probe(fn, recorded, invoke, rng=None, calls=3):
    """Call ``fn`` on nudged copies of recorded calls and say whether it jumps.

    Args:
        fn: the student's function (as graded: isolated, maybe sandboxed).
        recorded: list of ``(args, kwargs)`` the graders called ``fn`` with (private
            copies, taken before the call); the first ``calls`` of them that are
            ``generic`` are probed.
        invoke: ``invoke(fn, args, kwargs) -> result``, the engine's guarded call (time
            limit, silenced output); it raises what the student's code raises.
        rng: numpy Generator for the directions (default: fresh OS entropy).

    Returns:
        None, or a sentence saying which call showed answers that follow the identity of
        the inputs rather than their values.
    """
    rng = np.random.default_rng() if rng is None else rng
    for args, kwargs in [call for call in recorded if generic(*call)][:calls]:
        step_args, step_kwargs = _direction(list(args), rng), _direction(dict(kwargs), rng)

        def at(times):
            return invoke(fn, list(_moved(list(args), step_args, times)),
                          _moved(dict(kwargs), step_kwargs, times))

        try:
            base = at(0)
        except Exception:  # it fails on the graders' own input too: nothing to compare
            continue
        gaps = []
        for unit in (1.0, SHRINK):
            try:
                results = [base, at(unit), at(2 * unit)]
            except Exception as exc:
                return (_("it returned on one of the graders' inputs but raised {kind} when that "
                          "input was moved by a relative 1e-5 or less: its answers follow the "
                          "exact input (a lookup of stored answers?), not a computation").format(
                              kind=type(exc).__name__))
            gap = jump(results)
            if gap is None:
                break
            gaps.append(gap)
        if len(gaps) == 2 and gaps[1][0] >= 0.5 * gaps[0][0]:
            return (_("moving one of the graders' inputs by a relative 1e-5 or less changed its "
                      "answer abruptly ({gaps}; as much for a step 64 times smaller), which no "
                      "computation of this contract does: its answers follow the exact input (a "
                      "lookup of stored answers?), not a computation").format(gaps=gaps[1][1]))
    return None



def _masked(value, depth=0, done=None):
    """``value`` (a new object) with every other finite entry of its first float array of
    two or more entries set to ``-inf``, the way a mask hides scores; the rest kept."""
    done = [False] if done is None else done
    if isinstance(value, np.ndarray):
        if done[0] or value.dtype not in NUDGE or int(np.isfinite(value).sum()) < 2:
            return value
        done[0] = True
        flat = value.astype(value.dtype, copy=True).reshape(-1)
        finite = np.flatnonzero(np.isfinite(flat))
        flat[finite[1::2]] = -np.inf
        return flat.reshape(value.shape)
    if depth < MAX_DEPTH and isinstance(value, (tuple, list)):
        items = [_masked(v, depth + 1, done) for v in value]
        return type(value)(items) if isinstance(value, tuple) else items
    if depth < MAX_DEPTH and isinstance(value, dict):
        return {k: _masked(v, depth + 1, done) for k, v in value.items()}
    return value


def _varies(invoke, fn, args, kwargs):
    """True if ``fn(*args, **kwargs)`` returns a float array holding two different values
    (non-finite entries read as numbers); False if it raises or holds none."""
    try:
        result = invoke(fn, args, kwargs)
    except Exception:
        return False
    return any(a.size > 1 and np.ptp(np.nan_to_num(a.astype(np.float64))) > 0
               for _unused, a in _leaves(result)[0])


def ignores_its_input(fn, recorded, invoke, reference, calls=12):
    """Whether ``fn`` computes nothing from its input: on every recorded call of the
    graders, each float array it returns holds one value repeated (zeros, a constant),
    while the contract's answer to at least one of those calls does not. Such a function
    would otherwise earn the points of its shape, dtype and side-effect checks. A function
    that varies its answer anywhere, however wrongly, is left to the other checks: on the
    graders' calls, or on the first of them with a float array of two or more finite entries,
    every other entry of that array set to ``-inf`` (where a mask hides scores: uniform weights over the finite
    entries, a wrong formula, answer with weights that vary there).

    Args:
        fn: the student's function as graded.
        recorded: ``(args, kwargs)`` of the graders' calls (as for ``probe``).
        invoke: ``core._invoke``.
        reference: the reference function of the same graded name.
        calls: how many recorded calls to look at.

    Returns:
        str (what was seen) or None.
    """
    seen, varied, tried_masked = 0, False, False
    for args, kwargs in recorded[:calls]:
        try:
            mine = invoke(fn, copy.deepcopy(list(args)), copy.deepcopy(dict(kwargs)))
            theirs = reference(*copy.deepcopy(list(args)), **copy.deepcopy(dict(kwargs)))
        except Exception:
            continue
        mine_leaves, _unused = _leaves(mine)
        if not mine_leaves:
            return None
        if any(a.size > 1 and np.ptp(np.nan_to_num(a.astype(np.float64))) > 0
               for _unused, a in mine_leaves):
            return None  # it answers with values that vary: it computes something
        seen += 1
        if not tried_masked:
            done = [False]
            masked_args, masked_kwargs = _masked(list(args), done=done), _masked(dict(kwargs),
                                                                                   done=done)
            if done[0]:
                tried_masked = True
                if _varies(invoke, fn, masked_args, masked_kwargs):
                    return None  # its answer follows where the input is -inf: it computes
        varied = varied or any(a.size > 1 and np.ptp(np.nan_to_num(a.astype(np.float64))) > 0
                               for _unused, a in _leaves(theirs)[0])
    if seen >= 2 and varied:
        return (_("on {seen} of the graders' inputs it returned arrays that hold one value "
                  "repeated, where the correct answers vary: it computes nothing from its input, "
                  "so the checks of its shape, dtype and side effects earn nothing").format(
                      seen=seen))
    return None


# ``follows_reference``: the size of the move (relative to the largest entry of each float64
# input, drawn log-uniformly in this range at every run), the largest error of an answer
# that counts as right on the graders' own input, and the smallest error that counts as
# wrong on the moved one (both relative to 1 + the largest entry of the contract's answer).
MOVE = (3e-3, 5e-2)
# The second, smaller step along the same direction, as a fraction of the first.
SMALLER = 1.0 / 8
RIGHT = 1e-6
WRONG = 1e-4


def _error(mine, theirs):
    """How far ``mine`` is from ``theirs``: the largest difference of their float entries
    relative to ``1 + the largest entry of theirs``, ``inf`` where their structure, their
    integer or boolean entries or where they are finite differ; None when ``theirs`` holds
    no float entry (nothing to measure)."""
    (mine_leaves, mine_shape), (their_leaves, their_shape) = _leaves(mine), _leaves(theirs)
    if not their_leaves:
        return None
    if mine_shape != their_shape:
        return math.inf
    worst = 0.0
    for (_unused, a), (_unused, b) in zip(mine_leaves, their_leaves):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        finite = np.isfinite(b)
        if not np.array_equal(np.isfinite(a), finite):
            return math.inf
        if finite.any():
            worst = max(worst, float(np.abs(a[finite] - b[finite]).max())
                        / (1.0 + float(np.abs(b[finite]).max())))
    return worst


def follows_reference(fn, recorded, invoke, reference, rng=None, calls=3):
    """Whether ``fn``, right on the graders' own inputs, stays right when they move.

    ``probe`` catches a table of stored answers whose misses fall back to something else:
    the answer jumps where the input leaves the table. A table answered by its *nearest*
    entry does not jump: nudged by a hair, the input still finds the graders' own entry,
    and the answer does not move at all. This check moves a float64 input of the graders
    by much more than ``probe`` does (a relative ``MOVE``, at least 100 times the rounding a
    right answer is allowed) and compares ``fn``'s answer there with the contract's
    (``reference``'s). A function that computes its answer follows the input: if it is
    right at the graders' input to within ``RIGHT``, it is right at the moved input too
    (the contract's functions are smooth, docs/contract.md §2). A function right at the
    graders' input and wrong by more than ``WRONG`` (100 times ``RIGHT``) a step away,
    where its answer moved less than a tenth as much as the contract's, answers from the
    input's identity, not its value. (A wrong but honest function can be right on a
    degenerate input, a zero query or a row of equal entries, where its mistake happens
    to vanish; a step away it is wrong too, but its answer moves with the input.) The
    move is made twice along one direction, the second step ``SMALLER`` times the first:
    a table whose misses fall back to anything else is wrong by as much at both steps,
    while an honest function's error, where its mistake vanishes at the graders' input,
    shrinks with the step; that counts too. Calls where ``fn`` is not right on
    the graders' input are left to the checks; calls where the contract's answer hardly
    moves (a flat spot), or where the reference itself fails on the moved input, give no
    verdict. The move is drawn from the operating system's entropy at every run; an
    honest function gets the same verdict whatever the draw.

    Args:
        fn: the student's function as graded.
        recorded: ``(args, kwargs)`` of the graders' calls (as for ``probe``); of the first
            ``4 * calls`` that are ``generic`` and whose float arrays are float64, the first
            ``calls`` on which the contract's answer moves with the input are used.
        invoke: ``invoke(fn, args, kwargs) -> result``, the engine's guarded call.
        reference: the contract's function of the same graded name.
        rng: numpy Generator for the moves (default: fresh OS entropy).
        calls: how many recorded calls to move (where the contract's answer moves).

    Returns:
        None, or a sentence saying on which input the answer failed to follow.
    """
    rng = np.random.default_rng() if rng is None else rng

    def float64_only(args, kwargs):
        found = []

        def walk(value, depth=0):
            if isinstance(value, np.ndarray):
                found.append(value.dtype)
            elif depth < MAX_DEPTH and isinstance(value, (tuple, list)):
                for v in value:
                    walk(v, depth + 1)
            elif depth < MAX_DEPTH and isinstance(value, dict):
                for v in value.values():
                    walk(v, depth + 1)

        walk([list(args), dict(kwargs)])
        floats = [d for d in found if d.kind == "f"]
        return bool(floats) and all(d == np.float64 for d in floats)

    # Up to `calls` inputs on which the contract's answer moves with the input: an input
    # where it hardly does (saturated scores, say) tells nothing and is not counted, so
    # which inputs the graders drew first does not decide whether a lookup is seen.
    candidates = [c for c in recorded if generic(*c) and float64_only(*c)][:4 * calls]
    telling = 0
    for args, kwargs in candidates:
        if telling >= calls:
            break
        try:
            theirs = reference(*copy.deepcopy(list(args)), **copy.deepcopy(dict(kwargs)))
        except Exception:
            continue
        try:
            mine = invoke(fn, copy.deepcopy(list(args)), copy.deepcopy(dict(kwargs)))
        except Exception:
            continue  # it fails on the graders' own input: the checks say so
        here = _error(mine, theirs)
        if here is None or here > RIGHT:
            continue
        relative = float(np.exp(rng.uniform(np.log(MOVE[0]), np.log(MOVE[1]))))
        step_args = _direction(list(args), rng, relative=relative)
        step_kwargs = _direction(dict(kwargs), rng, relative=relative)
        seen = {}
        for scale in (1.0, SMALLER):  # the same direction, two step sizes
            moved_args = _moved(list(args), step_args, scale)
            moved_kwargs = _moved(dict(kwargs), step_kwargs, scale)
            try:
                theirs_moved = reference(*copy.deepcopy(moved_args),
                                         **copy.deepcopy(moved_kwargs))
            except Exception:
                break
            moved_by = _error(theirs_moved, theirs)
            if moved_by is None or not math.isfinite(moved_by) \
                    or moved_by < 10 * WRONG * scale:
                break  # the contract's answer hardly moves here (or leaves its domain)
            try:
                mine_moved = invoke(fn, copy.deepcopy(moved_args), copy.deepcopy(moved_kwargs))
            except Exception as exc:
                return (_("it gave the right answer on one of the graders' inputs but raised "
                          "{kind} when that input was moved by a relative {value:.1g}, where the "
                          "correct answer exists: its answers follow the exact input (a lookup "
                          "of stored answers?), not a computation").format(kind=type(exc).__name__,
                            value=relative * scale))
            there = _error(mine_moved, theirs_moved)
            followed = _error(mine_moved, mine)
            seen[scale] = (there, moved_by)
            if scale == 1.0:
                telling += 1
            # Wrong there, and its answer hardly moved while the contract's did. (A wrong
            # but honest function that happens to be right on a degenerate input, a zero
            # query or a row of equal entries, is wrong a step away too, but its answer
            # moves with the input as the contract's does.)
            if there is not None and there > WRONG and followed is not None \
                    and math.isfinite(followed) and followed < 0.1 * moved_by:
                if answers_by_shape(fn, args, kwargs, mine, invoke, reference, rng):
                    telling -= 1  # a degenerate input, where a flat answer is right: no verdict
                    break
                return (_("it gave the right answer on one of the graders' inputs (error "
                          "{here:.1g}) but a wrong one (error {there:.2g}, relative to 1 + the "
                          "largest entry) on the same input moved by a relative {value:.1g}, "
                          "where the correct answer moved by {moved_by:.2g} and its own hardly "
                          "at all: its answers follow the exact input (a lookup of the nearest "
                          "stored answer?), not a computation").format(here=here, there=there,
                            value=relative * scale, moved_by=moved_by))
        if len(seen) == 2:
            (far, _unused), (near, _unused) = seen[1.0], seen[SMALLER]
            # Wrong at both steps by as much at the smaller: the error does not shrink with
            # the step, as an honest function's does where its mistake vanishes at the
            # graders' input (like the step, or like its square root at a kink).
            if far is not None and near is not None and far > WRONG and near > WRONG \
                    and near >= 0.5 * far:
                return (_("it gave the right answer on one of the graders' inputs (error "
                          "{here:.1g}) but wrong ones on the same input moved by a relative "
                          "{relative:.1g} (error {far:.2g}) and {value:.1g} (error {near:.2g}): "
                          "an error that does not shrink with the step means its answers follow "
                          "the exact input (a lookup of stored answers?), not a computation").format(here=here,
                            relative=relative, far=far, value=relative * SMALLER, near=near))
    return None
