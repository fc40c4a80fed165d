"""The registry of checks: what a check is, how it says a property failed, and where it is
recorded.

A *check* is a function ``check(fn) -> None`` registered for one graded name with
``@check(name, title)``; it raises ``Fail(fault, message)`` when a property of the contract
(docs/contract.md) does not hold. Each check is of one kind (``KINDS``): a *value* check
compares what the function computes with the mathematics (the reference's values, the
lesson's figures); a *property* check tests a property that an answer computed from
nothing may have too (a dtype, a shape, no change to the inputs, float32 kept, causality
or an invariance that a zero output satisfies, an error raised): the runner counts the
property checks of a graded name only when one of its value checks passes. The runner (``runner.grade_function``) runs the checks
of a graded name in the order they were registered. This module imports nothing of the
kit but the fault ids, so every check module can import it without a circle.
"""

from collections.abc import Callable

from .faults import FAULTS

# graded name -> [(title, check)], in registration order.
CHECKS: dict[str, list[tuple[str, Callable[[object], None]]]] = {}

# The kinds of check; a check's kind is ``KIND[fn]`` (``"value"`` unless registered otherwise).
VALUE, PROPERTY = "value", "property"
KINDS = (VALUE, PROPERTY)
KIND: dict[Callable, str] = {}

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


def check(name: str, title: str, kind: str = VALUE) -> Callable[[Callable], Callable]:
    """Decorator: register a check for graded name ``name``.

    Args:
        name: str, the graded name the check judges (``"softmax"``).
        title: str, the property it checks, as the student's report names it.
        kind: ``"value"`` (it compares the function's values with the mathematics) or
            ``"property"`` (a property an input-independent answer of the right shape and
            dtype may have: scored only when a value check of ``name`` passes).

    Returns:
        the decorator, which records ``(title, fn)`` in ``CHECKS[name]`` and ``kind`` in
        ``KIND[fn]``, and returns ``fn`` unchanged.

    Raises:
        ValueError: ``kind`` is not one of ``KINDS``.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind of check {kind!r}")

    def register(fn: Callable) -> Callable:
        CHECKS.setdefault(name, []).append((title, fn))
        KIND[fn] = kind
        return fn

    return register
