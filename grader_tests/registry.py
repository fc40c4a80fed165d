"""The registry of checks: what a check is, how it says a property failed, and where it is
recorded.

A *check* is a function ``check(fn) -> None`` registered for one graded name with
``@check(name, title)``; it raises ``Fail(fault, message)`` when a property of the contract
(docs/contract.md) does not hold. The runner (``runner.grade_function``) runs the checks
of a graded name in the order they were registered. This module imports nothing of the
kit but the fault ids, so every check module can import it without a circle.
"""

from collections.abc import Callable

from .faults import FAULTS

# graded name -> [(title, check)], in registration order.
CHECKS: dict[str, list[tuple[str, Callable[[object], None]]]] = {}

# Text printed after a graded name's report (the exercises' worked solutions): feedback only.
NOTES: dict[str, str] = {}


class Fail(Exception):
    """Raised by a check when a property fails.

    Args:
        fault: str, a fault id of ``faults.FAULTS``.
        message: str, for the student: the property, the smallest input where it broke,
            received versus expected, and the likely cause.

    Raises:
        ValueError: if ``fault`` is not a known fault id.
    """

    def __init__(self, fault: str, message: str) -> None:
        if fault not in FAULTS:
            raise ValueError(f"unknown fault id {fault!r}")
        super().__init__(message)
        self.fault = fault
        self.message = message


def check(name: str, title: str) -> Callable[[Callable], Callable]:
    """Decorator: register a check for graded name ``name``.

    Args:
        name: str, the graded name the check judges (``"softmax"``).
        title: str, the property it checks, as the student's report names it.

    Returns:
        the decorator, which records ``(title, fn)`` in ``CHECKS[name]`` and returns
        ``fn`` unchanged.
    """

    def register(fn: Callable) -> Callable:
        CHECKS.setdefault(name, []).append((title, fn))
        return fn

    return register
