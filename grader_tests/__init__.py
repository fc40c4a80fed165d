"""Hidden graders of the attention course kit.

Installed in the grading environment only; students never receive this package.
Entry points: ``grade(name, namespace)`` for the notebooks' hidden cells,
``python -m grader_tests`` for the command line.
"""

from .core import POINTS, grade_function, grade_id, grade_namespace, report_dict
from .notebook import grade

__all__ = ["POINTS", "grade", "grade_function", "grade_id", "grade_namespace", "report_dict"]
