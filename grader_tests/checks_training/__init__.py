"""Hidden graders of assignment `training` (docs/contract.md §3), registered with
``core.check`` under their own graded names.

``POINTS_TRAINING`` holds the points of those names (they sum to 100); the engine's runner
(``core.grade_function`` with ``points=POINTS_TRAINING``) runs them exactly as it runs the
checks of `attention`: the same isolation, per-call time limit (only the student's own
time counts), tampering checks and input-lookup probe. ``grade(name, namespace)`` is the
one call of a hidden cell of the training notebook.

The checks hand the student's functions the reference of everything else through an
``ops`` namespace (``solutions.training.make_ops``), so a bug costs only the points of the
function that has it, including bugs in the student's `attention` functions.
"""

from .. import core
from ..core import CALL_TIME_LIMIT, format_result

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

from ..notebook import RESULT_MIME
from . import adam, batch, block, counting, generation, loss  # noqa: F401  (registers)


def grade_function(name, namespace, time_limit_s=CALL_TIME_LIMIT):
    """``core.grade_function`` for a graded name of `training`.

    Args:
        name: str, a key of ``POINTS_TRAINING``.
        namespace: dict of the student's definitions (a notebook's globals).
        time_limit_s: float, seconds one call of the student's function may run.

    Returns:
        ``core.FunctionResult``, score in points (partial credit: points times the share of
        checks passed).

    Raises:
        KeyError: if ``name`` is not a graded name of `training`.
    """
    return core.grade_function(name, namespace, time_limit_s, points=POINTS_TRAINING)


def grade_namespace(namespace, names=None, time_limit_s=CALL_TIME_LIMIT):
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
