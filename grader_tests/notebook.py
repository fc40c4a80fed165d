"""The one call a hidden autograder cell makes: ``grade("softmax", globals())``.

It runs the checks of one graded name (of any assignment: the graded names of the
assignments are distinct) on the notebook's own definitions, prints a plain-text report
for the student (it appears in nbgrader's feedback), publishes the machine-readable
result (``report.FunctionResult.to_json``) as a display output of MIME type
``RESULT_MIME`` (read by the class summary), and returns the score in points: the cell's
last expression, which nbgrader takes as the cell's partial credit.
"""

from .report import format_result
from .runner import grade_function

RESULT_MIME = "application/vnd.attention-kit.result+json"


def grade(name: str, namespace: dict) -> float:
    """Grade ``namespace[name]`` (or an exercise's variables) and return the points earned.

    Args:
        name: str, a graded name of an assignment (``assignments.ASSIGNMENTS``).
        namespace: dict, usually ``globals()`` of the notebook kernel.

    Returns:
        float, points in ``[0, points of name]``.

    Raises:
        KeyError: ``name`` is not graded in any assignment.
    """
    result = grade_function(name, namespace)
    print(format_result(result))
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            display({RESULT_MIME: result.to_json()}, raw=True)
    except ImportError:  # outside IPython the printed report is all there is
        pass
    return float(result.score)
