"""Hidden graders of the attention course kit.

Installed in the grading environment only; students never receive this package.
Entry points: ``grade(name, namespace)`` for the notebooks' hidden cells,
``python -m grader_tests`` for the command line.
"""

import os as _os
import tempfile as _tempfile

# Hypothesis keeps caches in ./.hypothesis of the working directory, which for a notebook is
# the student's folder (and nbgrader would copy it into the release): keep them in /tmp.
_os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                       _os.path.join(_tempfile.gettempdir(), "attention-kit-hypothesis"))

from .assignments import POINTS, grade_id  # noqa: E402
from .report import report_dict  # noqa: E402
from .runner import grade_function, grade_namespace  # noqa: E402
from .notebook import grade  # noqa: E402

__all__ = ["POINTS", "grade", "grade_function", "grade_id", "grade_namespace", "report_dict"]
