"""The grading engine's public names in one place, for code outside the engine (the tools,
the benches, the tests).

The engine itself is split by job, and nothing inside ``grader_tests`` imports this
module: ``registry`` (checks and ``Fail``), ``guard`` (the guarded call of student code,
fault isolation, time limits), ``runner`` (the checks of a graded name and its score),
``report`` (the typed results and their JSON form) and ``assignments`` (each assignment's
graded names and points).
"""

from .assignments import POINTS, POINTS_TRAINING, grade_id
from .guard import (CALL_TIME_LIMIT, CALLEES, CHECK_TIME_LIMIT, CONTENTS_MAX_DEPTH,
                    CONTENTS_MAX_OBJECTS, FUNCTION_TIME_BUDGET, OPAQUE_RESULTS, PROBED_CALLS,
                    SPEC_FUNCTIONS, STUDENT_RECURSION, Session, StubHit, StudentTimeout,
                    allowed_callees, call, call_watching_inputs, callees, contents,
                    crash_fault, current_session, grading, isolate, peer, same_contents,
                    same_value, shallow_recursion, time_limit)
from .registry import CHECKS, NOTES, Fail, check
from .report import (REPORT_WIDTH, CheckResult, FunctionResult, GradeReport, format_result,
                     report_dict)
from .runner import grade_function, grade_namespace

__all__ = [
    "CALLEES", "CALL_TIME_LIMIT", "CHECKS", "CHECK_TIME_LIMIT", "CONTENTS_MAX_DEPTH",
    "CONTENTS_MAX_OBJECTS", "FUNCTION_TIME_BUDGET", "NOTES", "OPAQUE_RESULTS", "POINTS",
    "POINTS_TRAINING", "PROBED_CALLS", "REPORT_WIDTH", "SPEC_FUNCTIONS", "STUDENT_RECURSION",
    "CheckResult", "Fail", "FunctionResult", "GradeReport", "Session", "StubHit",
    "StudentTimeout", "allowed_callees", "call", "call_watching_inputs", "callees", "check",
    "contents", "crash_fault", "current_session", "format_result", "grade_function",
    "grade_id", "grade_namespace", "grading", "isolate", "peer", "report_dict",
    "same_contents", "same_value", "shallow_recursion", "time_limit",
]
