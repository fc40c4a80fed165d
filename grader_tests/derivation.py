"""Whether a backward was derived by hand: its cost, counted in forward passes per input.

The contract (docs/contract.md §2, items 11 and 13) asks for the backward derived by hand:
the chain rule written out. A backward can also be had without deriving anything, by
differentiating the forward numerically: central differences, the complex step, a
Jacobian built one input at a time. Its values pass every check (they are a gradient's
values to within the checks' tolerance), so the checks cannot tell; its cost can. A
numerical derivative evaluates the forward once or twice *per input entry*: for ``N``
inputs it costs some ``N`` to ``2 N`` forward passes. A backward derived by hand costs a
small constant number of forward passes, whatever ``N`` (Griewank and Walther,
*Evaluating Derivatives*, 2nd ed., SIAM 2008, section 4.6 for reverse mode; section 1.1
for the ``n + 1`` or ``2 n`` evaluations of divided differences); one that builds each
row's Jacobian explicitly, or loops over rows, heads and queries in Python, costs more,
but per *row*, never per entry.

So the grader calls the student's forward and backward on one input chosen here
(``SIZES``: some 2000 entries, in rows of 32 or 16, so that a numerical derivative's 2000
forward passes are far from anything a loop over 64 rows costs), measures the processor
time each call costs, and counts the backward's cost beyond two calls of the student's own
forward (what a backward that recomputes its forward and the messages of the call cost) in
passes of the contract's forward (the reference's, timed in the grader's own thread on the
same input: a unit the student's code does not set). The processor time of a call is, in
the jail, that of the jailed process tree, read by the grader from ``/proc`` (nothing the
student's process says about itself), plus the grader's own thread's (the callbacks it
answers, the call's messages); in process, the thread's. The backward is flagged when
that count reaches ``PER_INPUT`` times the input's entries (one eighth of a forward pass
per entry). The margins are wide (on this machine kind the catalogues' hand-derived
backwards, Python loops over 64 rows with each row's Jacobian written out included, stay
at least 9 times below, and every numerical one at least 7 times above, in process and in
the jail; ``bench/derivation_costs.py`` prints them), so that neither the machine's speed
nor its load, which processor time does not count anyway, decides.

What it cannot tell: a backward derived by hand that builds the Jacobian of the whole
input at once (a matrix of ``N x N`` entries, where the row-by-row Jacobian has ``d x d``
per row) costs as much as a numerical derivative and is flagged too, as one that makes a
forward pass per entry for any other reason. The callbacks the grader answers are
counted (its own thread's time); work done in a child process that has ended before the
grader reads the clock is not (only live threads are read): a backward hiding its cost so
escapes this flag, and is left to the checks. A flag changes no points: the instructor
reads the backward and decides.
"""

from __future__ import annotations

import gc
import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .i18n import _

# A backward and the forward whose cache it takes (docs/contract.md §2, items 11 and 13).
FORWARD_OF = {"layer_norm_backward": "layer_norm_forward",
              "attention_backward": "attention_forward"}
# The flag: the backward's cost beyond two calls of the student's forward reaches this many
# passes of the contract's forward per input entry.
PER_INPUT = 1.0 / 8
# Calls of each function; the cheapest counts (a stray interruption costs more, never
# less). After MIN_REPEATS, a function whose cheapest call took EXPENSIVE_SECONDS already is
# not called again.
REPEATS = 3
MIN_REPEATS = 2
EXPENSIVE_SECONDS = 0.05


def _layer_norm_inputs(shape: tuple[int, ...], rng: np.random.Generator) -> tuple:
    d = shape[-1]
    x = rng.normal(size=shape)
    return (x, 1.0 + 0.1 * rng.normal(size=d), 0.1 * rng.normal(size=d)), {}


def _attention_inputs(shape: tuple[int, ...], rng: np.random.Generator) -> tuple:
    B, T, d, h = shape
    params = {}
    for n in "QKVO":
        params["W_" + n] = rng.normal(size=(d, d)) / math.sqrt(d)
        params["b_" + n] = 0.1 * rng.normal(size=d)
    return (rng.normal(size=(B, T, d)), params, h), {}


# backward -> (the forward's arguments at a size, the size): layer norm x (4, 16, 32), 2112
# input entries in 64 rows; attention (B, T, d, n_heads) (2, 16, 16, 2), 1600 entries (x and
# the eight parameters), 64 rows of scores.
SIZES = {"layer_norm_backward": (_layer_norm_inputs, (4, 16, 32)),
         "attention_backward": (_attention_inputs, (2, 16, 16, 2))}


def input_entries(args: Any, depth: int = 0) -> int:
    """How many float entries ``args`` holds (arrays in nested tuples, lists and dicts):
    the ``N`` of a numerical derivative, which perturbs each of them."""
    if isinstance(args, np.ndarray):
        return int(args.size) if args.dtype.kind == "f" else 0
    if depth < 4 and isinstance(args, (tuple, list)):
        return sum(input_entries(a, depth + 1) for a in args)
    if depth < 4 and isinstance(args, dict):
        return sum(input_entries(a, depth + 1) for a in args.values())
    return 0


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it (``/proc/<pid>/task/<tid>/children``)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue  # ended meanwhile
    return found


def tree_cpu_seconds(pid: int) -> float | None:
    """Processor seconds the live threads of ``pid`` and of its descendants have run
    (``/proc/<pid>/task/<tid>/schedstat``, first field, nanoseconds), or None when
    ``/proc`` does not tell (not Linux, or not readable)."""
    total, seen = 0, False
    for p in _tree(pid):
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
                    seen = True
            except (OSError, ValueError, IndexError):
                continue
    return total / 1e9 if seen else None


def cost_clock(namespace: dict) -> Callable[[], float | None]:
    """A clock of the processor time the student's code costs, as the grader sees it.

    Args:
        namespace: the namespace being graded (the sandbox's proxies hold it under
            ``"__sandbox__"``).

    Returns:
        a function returning seconds (float) or None (no reading: no verdict); for a
        sandboxed submission, the jailed process tree's processor time plus this
        thread's (the callbacks the grader answers); otherwise this thread's.
    """
    sandbox = namespace.get("__sandbox__")
    if sandbox is None:
        return time.thread_time

    def clock() -> float | None:
        proc = getattr(sandbox, "proc", None)
        if proc is None:
            return None
        jailed = tree_cpu_seconds(proc.pid)
        return None if jailed is None else jailed + time.thread_time()

    return clock


def _cost(clock: Callable[[], float | None], call: Callable[[], Any]) -> tuple[float | None, Any]:
    """``(seconds, result)`` of the cheapest of ``MIN_REPEATS`` to ``REPEATS`` calls of
    ``call`` (more only while the cheapest is below ``EXPENSIVE_SECONDS``), with this
    process's garbage collector paused (a collection of the grader's heap is no cost of
    the student's code)."""
    best, result = None, None
    paused = gc.isenabled()
    gc.disable()
    try:
        for attempt in range(REPEATS):
            before = clock()
            result = call()
            after = clock()
            if before is None or after is None:
                return None, result
            spent = max(after - before, 1e-7)
            best = spent if best is None else min(best, spent)
            if attempt + 1 >= MIN_REPEATS and best > EXPENSIVE_SECONDS:
                break
    finally:
        if paused:
            gc.enable()
    return best, result


def forward_passes(name: str, backward: Callable, forward: Callable, invoke: Callable,
                   clock: Callable[[], float | None], reference: Callable,
                   rng: np.random.Generator | None = None) -> tuple[int, float] | None:
    """What ``backward`` costs beyond two calls of ``forward``, in passes of ``reference``.

    Args:
        name: the backward's graded name (a key of ``FORWARD_OF``).
        backward, forward: the student's functions as graded (isolated, maybe proxies).
        invoke: ``invoke(fn, args, kwargs) -> result``, the engine's guarded call (time
            limit, silenced output); raises what the student's code raises.
        clock: ``cost_clock``'s clock.
        reference: the contract's forward (``solutions.attention``), timed in this
            thread on the same input.
        rng: numpy Generator for the inputs (default: seeded, the same every run).

    Returns:
        ``(input entries, passes)``, or None when a cost could not be read or the forward
        returned no ``(y, cache)``.

    Raises:
        whatever ``invoke`` raises (the caller treats it as no verdict).
    """
    rng = np.random.default_rng(20170612) if rng is None else rng
    make, shape = SIZES[name]
    args, kwargs = make(shape, rng)
    unit, _unused = _cost(time.thread_time, lambda: reference(*args, **kwargs))
    forward_cost, out = _cost(clock, lambda: invoke(forward, list(args), dict(kwargs)))
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        return None
    y, cache = out
    dy = rng.normal(size=np.shape(y))
    backward_cost, _unused = _cost(clock, lambda: invoke(backward, [dy, cache], {}))
    if forward_cost is None or backward_cost is None or unit is None:
        return None
    entries = input_entries(list(args)) + input_entries(kwargs)
    return entries, max(0.0, backward_cost - 2 * forward_cost) / unit


def flagged(entries: int, passes: float) -> bool:
    """Whether a backward costing ``passes`` passes of the contract's forward (beyond two
    of its own forward) on an input of ``entries`` entries is flagged: at least
    ``PER_INPUT`` passes per entry."""
    return passes >= PER_INPUT * entries


def numerically_differentiated(name: str, backward: Callable, forward: Callable,
                               invoke: Callable, clock: Callable[[], float | None],
                               reference: Callable,
                               rng: np.random.Generator | None = None) -> str | None:
    """Why ``backward`` looks like a numerical derivative of ``forward``, or None.

    Args:
        name, backward, forward, invoke, clock, reference, rng: as for ``forward_passes``.

    Returns:
        None (no verdict, or a cost like a hand-derived backward's), or the sentence for
        the flag, naming the cost measured and the contract's reason.

    Raises:
        whatever ``invoke`` raises (the caller treats it as no verdict).
    """
    found = forward_passes(name, backward, forward, invoke, clock, reference, rng)
    if found is None or not flagged(*found):
        return None
    entries, passes = found
    return _("on an input of {entries} entries it cost as much processor time as {passes:.0f} "
             "forward passes (beyond two calls of your {forward}): a cost that grows with the "
             "number of inputs, one or two forward passes per input, is a numerical "
             "derivative's (finite differences, the complex step), while a backward derived "
             "by hand costs a few forward passes whatever the size. docs/contract.md §2 asks "
             "for the backward derived by hand (the chain rule): its points wait for the "
             "instructor's review").format(entries=entries, passes=passes,
                                           forward=FORWARD_OF[name])
