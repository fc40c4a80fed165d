"""Hidden graders of assignment `training` (SPEC section 3), registered with
``core.check`` under their own graded names.

``POINTS_TRAINING`` holds the points of those names (they sum to 100). ``core.POINTS``
belongs to assignment `attention` and ``core.grade_function`` reads only that table, so
this package carries its own small runner, ``grade_function``, which uses the engine's
pieces (``call``, ``isolate``, time limits, tampering checks, ``FunctionResult``) in the
same way. ``grade(name, namespace)`` is the one call of a hidden cell of the training
notebook.

The checks hand the student's functions the reference of everything else through an
``ops`` namespace (``solutions.training.make_ops``), so a bug costs only the points of the
function that has it, including bugs in the student's `attention` functions.
"""

import contextlib
import io
import time
import warnings

from .. import core
from ..core import CheckResult, FunctionResult, StubHit, StudentTimeout, format_result

# Points of the graded names of `training`; they sum to 100 and are the nbgrader points of
# the hidden cells of source/training/training.ipynb.
POINTS_TRAINING = {
    "make_batch": 15,
    "masked_cross_entropy": 15,
    "block_backward": 25,
    "adam_step": 15,
    "greedy_generate": 12,
    "answer_accuracy": 6,
    "model_param_count": 12,
}

# Seconds one check may run in all (the gradient checks run a few hundred forward passes
# of a tiny model in the grader's own code, around one call of the student's function).
CHECK_TIME_LIMIT = 20.0

from ..notebook import RESULT_MIME
from . import adam, batch, block, counting, generation, loss  # noqa: F401  (registers)


def grade_function(name, namespace, time_limit_s=CHECK_TIME_LIMIT):
    """Run every check registered for the training name ``name`` on ``namespace[name]``.

    Args:
        name: str, a key of ``POINTS_TRAINING``.
        namespace: dict of the student's definitions (a notebook's globals).
        time_limit_s: float, seconds each check may run; after a time-out the remaining
            checks fail with ``timeout`` without running.

    Returns:
        ``core.FunctionResult``, score in points (partial credit: points times the share of
        checks passed).

    Raises:
        KeyError: if ``name`` is not a graded name of `training`.
    """
    max_score = float(POINTS_TRAINING[name])
    registered = core.CHECKS[name]
    started = time.perf_counter()
    target = namespace.get(name)
    if not callable(target):
        return _all_failed(name, registered, "not-implemented",
                           f"{name} is not defined in the submission: define a function named "
                           f"{name} (names are case-sensitive).", max_score, started)
    borrowed = core._borrowed(target, namespace)
    if borrowed:
        return _all_failed(name, registered, "tampering", f"{name}: {borrowed}.", max_score,
                           started)
    problems = core.environment_problems()
    if problems:
        return _all_failed(name, registered, "tampering",
                           f"the grading environment was altered before {name} was graded: "
                           f"{'; '.join(problems)}.", max_score, started)
    target = core.isolate(target, namespace)
    results, timed_out = [], False
    for title, check_fn in registered:
        if timed_out:
            results.append(CheckResult(title, False, "timeout",
                                       f"not run: {name} already exceeded its time limit of "
                                       f"{time_limit_s:g} s in an earlier check."))
            continue
        sink = io.StringIO()
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                    warnings.catch_warnings(), core.time_limit(time_limit_s):
                warnings.simplefilter("ignore")
                check_fn(target)
        except core.Fail as failure:
            results.append(CheckResult(title, False, failure.fault, failure.message))
        except StudentTimeout:
            timed_out = True
            results.append(CheckResult(title, False, "timeout",
                                       f"{name} did not return within {time_limit_s:g} s: look "
                                       f"for a loop that never ends."))
        except (NotImplementedError, StubHit):
            results.append(CheckResult(title, False, "not-implemented",
                                       f"{name} still raises NotImplementedError: replace the "
                                       f"`raise NotImplementedError()` line with your code."))
        except Exception as exc:  # the student's own error, reported as a crash
            results.append(CheckResult(title, False, "crash",
                                       core._student_error_message(name, exc)))
        else:
            results.append(CheckResult(title, True, None, ""))
    problems = core.environment_problems()
    if problems:
        return _all_failed(name, registered, "tampering",
                           f"grading {name} altered the grading environment: "
                           f"{'; '.join(problems)}.", max_score, started)
    passed = sum(r.passed for r in results)
    return FunctionResult(name, max_score * passed / len(results), max_score, results,
                          time.perf_counter() - started)


def _all_failed(name, registered, fault, message, max_score, started):
    return FunctionResult(name, 0.0, max_score,
                          [CheckResult(title, False, fault, message) for title, _ in registered],
                          time.perf_counter() - started)


def grade_namespace(namespace, names=None, time_limit_s=CHECK_TIME_LIMIT):
    """Grade every name of ``POINTS_TRAINING`` (or ``names``); dict name -> FunctionResult."""
    names = list(POINTS_TRAINING) if names is None else list(names)
    return {n: grade_function(n, namespace, time_limit_s) for n in names}


def grade(name, namespace):
    """The hidden cell's call: grade ``namespace[name]``, print the report, publish the
    machine-readable result (MIME type ``RESULT_MIME``, as ``grader_tests.notebook`` does)
    and return the points earned (the cell's partial credit)."""
    result = grade_function(name, namespace)
    print(format_result(result))
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            display({RESULT_MIME: result.to_dict()}, raw=True)
    except ImportError:
        pass
    return float(result.score)
