"""Hidden graders of assignment `training` (docs/contract.md §3), registered with
``registry.check`` under their own graded names.

The assignment (``assignments.TRAINING``) owns the points of those names; the one runner
(``runner.grade_function``) runs these checks exactly as it runs the checks of
`attention`: the same isolation, per-call time limit (only the student's own time
counts), tampering checks and input-lookup probe. The hidden cells of the training
notebook call ``grade(name, namespace)``, the kit's one entry point
(``grader_tests.notebook.grade``), importable from here too.

The checks hand the student's functions the reference of everything else through an
``ops`` namespace (``solutions.training.make_ops``), so a bug costs only the points of the
function that has it, including bugs in the student's `attention` functions.
"""

from ..assignments import POINTS_TRAINING, TRAINING  # noqa: F401  (POINTS_TRAINING: re-exported)
from ..guard import CALL_TIME_LIMIT
from ..notebook import grade  # noqa: F401  (the hidden cells' call)
from ..report import FunctionResult
from ..runner import grade_function as _grade_function
from ..runner import grade_namespace as _grade_namespace
from . import adam, batch, block, counting, generation, loss  # noqa: F401  (registers)


def grade_function(name: str, namespace: dict,
                   time_limit_s: float = CALL_TIME_LIMIT) -> FunctionResult:
    """``runner.grade_function`` for a graded name of `training`.

    Args:
        name: str, a key of ``POINTS_TRAINING``.
        namespace: dict of the student's definitions (a notebook's globals).
        time_limit_s: float, seconds one call of the student's function may run.

    Returns:
        ``report.FunctionResult``, score in points (partial credit: points times the share
        of checks passed).

    Raises:
        KeyError: if ``name`` is not a graded name of `training`.
    """
    if name not in TRAINING.points:
        raise KeyError(name)
    return _grade_function(name, namespace, time_limit_s, TRAINING)


def grade_namespace(namespace: dict, names: list[str] | None = None,
                    time_limit_s: float = CALL_TIME_LIMIT) -> dict[str, FunctionResult]:
    """Grade every name of `training` (or ``names``); dict name -> FunctionResult."""
    return _grade_namespace(namespace, names, time_limit_s, TRAINING)
