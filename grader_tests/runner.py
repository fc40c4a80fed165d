"""The runner: every check of one graded name against a student's function, and the score.

The runner turns every outcome of a check into a ``report.CheckResult``: a pass, a
``registry.Fail`` with its fault id, or the student's own exception (``not-implemented``,
``crash``, ``module-unavailable``) or a time-out (``timeout``). A function's score is
``points * passed / total`` over its checks (partial credit), with the points of the
graded name in its ``assignments.Assignment``, except that its property checks
(``registry.PROPERTY``: dtype, shape, no change to the inputs, an invariance a constant
has) count only when at least one of its value checks passes: a function that computes
the right values nowhere scores 0, its report naming why (``unscored_properties``); a bug in one function costs only that
function's points (``guard.isolate``). One runner serves every assignment.
"""

import contextlib
import io
import time
import types
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from solutions import attention as reference

from . import assignments, derivation, guard, lookup
from .assignments import Assignment
from .guard import (CALL_TIME_LIMIT, SPEC_FUNCTIONS, Session, StubHit, StudentTimeout,
                    WorkerDied, crash_fault, grading, isolate)
from .integrity import (borrowed_file, borrowed_reference, environment_problems,
                        is_protected_module)
from .i18n import _
from .registry import CHECKS, KIND, PROPERTY, VALUE, Fail
from .report import CheckResult, FunctionResult

try:  # Hypothesis's own "the test is not reproducible" errors
    from hypothesis.errors import Flaky as _Flaky
    _FLAKY: tuple[type[BaseException], ...] = (_Flaky,)
except ImportError:  # pragma: no cover
    _FLAKY = ()


def _student_error_message(name: str, exc: BaseException) -> str:
    if isinstance(exc, WorkerDied) and exc.memory_bytes:
        return _("the processes running {name} reached the jail's memory limit ({mib} MiB for "
                 "all of them and /tmp together) and the kernel ended them").format(
                     name=name, mib=exc.memory_bytes // 2**20)
    if isinstance(exc, WorkerDied):
        return _("the process running {name} ended during the call (sys.exit, os._exit, a "
                 "signal, or memory exhausted)").format(name=name)
    kind = getattr(exc, "type_name", type(exc).__name__)
    text = f"{kind}: {exc}".strip()
    if len(text) > 300:
        text = text[:300] + "..."
    return _("calling {name} raised {error}").format(name=name, error=text)


def _assignment_of(name: str, assignment: "str | Assignment | None") -> Assignment:
    if assignment is not None:
        found = assignments.get(assignment)
        if name in found.points:
            return found
    return assignments.owning(name)


def grade_function(name: str, namespace: dict, time_limit_s: float = CALL_TIME_LIMIT,
                   assignment: "str | Assignment | None" = None,
                   undefined: "dict[str, str] | None" = None) -> FunctionResult:
    """Run every check registered for ``name`` against ``namespace[name]``.

    Args:
        name: str, a graded name of ``assignment``.
        namespace: dict of the student's definitions (a notebook's globals or a module's
            ``vars``; the sandbox's proxies for an isolated submission).
        time_limit_s: float, seconds one call of the student's function may run; after
            one time-out (or once ``guard.FUNCTION_TIME_BUDGET`` is spent) the remaining
            checks are not run and fail with ``timeout``.
        assignment: the ``Assignment`` (or its name) whose points apply; None: the one
            that grades ``name``.
        undefined: dict name -> why the submission does not define it, read by the grader
            from the file (``submission.undefined_by_syntax``: its cell does not parse);
            said instead of "not defined" when ``name`` is missing.

    Returns:
        FunctionResult, score in points.

    Raises:
        KeyError: if ``name`` is not a graded name of any assignment.
    """
    owner = _assignment_of(name, assignment)
    owner.load_checks()  # registers the checks (once)
    max_score = owner.points_of(name)
    registered = CHECKS[name]
    started = time.perf_counter()
    results: list[CheckResult] = []
    target: Any
    why = (undefined or {}).get(name)
    if name.startswith("exercise_"):
        target = namespace  # exercises are graded on the variables the student assigned
        if why and any((undefined or {}).get(v) == why and v not in namespace
                       for v in owner.variables):  # its answers' cell did not parse
            return _all_failed(name, registered, "not-implemented", _(
                "{name} is not defined in the submission: {why}").format(name=name, why=why),
                max_score, started)
    else:
        target = namespace.get(name)
        if not callable(target):
            message = _("{name} is not defined in the submission: {why}").format(
                name=name, why=why) if why else _(
                "{name} is not defined in the submission: define a function named {name} "
                "(names are case-sensitive).").format(name=name)
            results = [CheckResult(title, False, "not-implemented", message)
                       for title, _check in registered]
            return FunctionResult(name, 0.0, max_score, results, time.perf_counter() - started)
        borrowed = _borrowed(target, namespace)
        if borrowed:
            return _all_failed(name, registered, "tampering", f"{name}: {borrowed}.",
                               max_score, started)
        target = isolate(target, namespace, name)
    problems = environment_problems()
    if problems:
        return _all_failed(name, registered, "tampering",
                           _("the grading environment was altered before {name} was graded: "
                             "{problems}.").format(name=name, problems="; ".join(problems)),
                           max_score, started)
    timed_out = False
    session = Session(namespace=namespace, call_limit=time_limit_s, target=target,
                      roles={id(target): (target, name)})
    with grading(session):
        for title, fn in registered:
            if timed_out:
                results.append(CheckResult(title, False, "timeout",
                                           _("not run: {name} already exceeded its time limit "
                                             "of {seconds:g} s in an earlier check.").format(
                                                 name=name, seconds=time_limit_s)))
                continue
            result, timed_out = _run_check(name, title, fn, target, time_limit_s)
            results.append(result)
        recorded = session.recorded
        session.recorded = []  # the calls below are the grader's own, not the checks'
        # (only where it earns points: a backward that scores 0 withholds nothing)
        review = _derived_numerically(name, target, session.namespace) \
            if not timed_out and _score(registered, results, max_score)[0] > 0 else None
        session.namespace, session.target, session.recorded = None, None, []
        problems = environment_problems()
        if problems:
            return _all_failed(name, registered, "tampering",
                               _("grading {name} altered the grading environment: "
                                 "{problems}.").format(name=name, problems="; ".join(problems)),
                               max_score, started)
        probing = bool(recorded) and not timed_out and any(r.passed for r in results)
        looked_up = None
        if probing:
            try:
                with contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    looked_up = lookup.probe(target, recorded, guard._invoke)
            except (StudentTimeout, StubHit, Fail):  # out of time, or nothing to compare
                looked_up = None
        if probing and not looked_up and name in SPEC_FUNCTIONS:
            # where it is right, is it right because it computes, or because it knows the
            # graders' inputs? (a table answered by its nearest entry, which ``probe``
            # cannot see)
            try:
                with contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    looked_up = lookup.follows_reference(target, recorded, guard._invoke,
                                                         getattr(reference, name))
            except (StudentTimeout, StubHit, Fail):
                looked_up = None
        if looked_up:
            return _all_failed(name, registered, "tampering", f"{name}: {looked_up}.",
                               max_score, started)
        if probing and name in SPEC_FUNCTIONS and not all(r.passed for r in results):
            try:
                with contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    constant = lookup.ignores_its_input(target, recorded, guard._invoke,
                                                        getattr(reference, name))
            except (StudentTimeout, StubHit, Fail):
                constant = None
            if constant:
                return _all_failed(name, registered, "not-implemented",
                                   f"{name}: {constant}.", max_score, started)
    score, note = _score(registered, results, max_score)
    return FunctionResult(name, score, max_score, results, time.perf_counter() - started,
                          note, review or "")


def _derived_numerically(name: str, target: Any, namespace: dict | None) -> str | None:
    """Why the backward ``target`` (graded as ``name``) is flagged as a numerical
    derivative of its forward (``derivation.numerically_differentiated``), or None: not a
    backward, no forward to compare with, or any failure of the student's code while it is
    measured (no verdict)."""
    if namespace is None or name not in derivation.FORWARD_OF or not callable(namespace.get(
            derivation.FORWARD_OF[name])):
        return None
    try:
        forward = guard.peer(derivation.FORWARD_OF[name])
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = derivation.numerically_differentiated(
                name, target, forward, guard._invoke, derivation.cost_clock(namespace),
                getattr(reference, derivation.FORWARD_OF[name]))
    except (Exception, SystemExit, StudentTimeout, StubHit):  # the student's error, a
        return None                                               # time-out: no verdict
    return f"{name}: {found}." if found else None


def unscored_properties(kinds: list[str], passed: list[bool]) -> bool:
    """Whether the property checks of a graded name score nothing: it has value checks
    and every one of them failed, while a property check passed (the passes a function
    that computes nothing from its input can earn).

    Args:
        kinds: the kind of each check (``registry.VALUE`` or ``registry.PROPERTY``).
        passed: whether each check passed, in the same order.

    Returns:
        bool.
    """
    value = [ok for kind, ok in zip(kinds, passed) if kind == VALUE]
    prop = [ok for kind, ok in zip(kinds, passed) if kind == PROPERTY]
    return bool(value) and not any(value) and any(prop)


def _score(registered: list, results: list[CheckResult],
           max_score: float) -> tuple[float, str]:
    """The points of a graded name's results, and the report's note on them ("" or why
    the passed property checks score nothing)."""
    if not results:
        return 0.0, ""
    kinds = [KIND.get(fn, VALUE) for _title, fn in registered]
    passed = [r.passed for r in results]
    if unscored_properties(kinds, passed):
        return 0.0, _("the checks of its shape, dtype, side effects and invariances score only "
                      "when the function computes the right values somewhere: every value "
                      "check failed, so they earn nothing")
    return max_score * sum(passed) / len(results), ""


def _run_check(name: str, title: str, check: Callable, target: object,
               time_limit_s: float) -> tuple[CheckResult, bool]:
    """One check on ``target``: its outcome as a ``CheckResult``, and whether the
    student's code ran out of time."""
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check(target)
    except Fail as failure:
        return CheckResult(title, False, failure.fault, failure.message), False
    except StudentTimeout:
        return CheckResult(title, False, "timeout",
                           _("{name} did not return within {seconds:g} s: look for a "
                             "loop that never ends.").format(name=name, seconds=time_limit_s)), True
    except (NotImplementedError, StubHit):
        return CheckResult(title, False, "not-implemented",
                           _("{name} still raises NotImplementedError: replace the `raise "
                             "NotImplementedError()` line with your code.").format(
                                 name=name)), False
    except _FLAKY as exc:
        return CheckResult(title, False, "other",
                           _("{name} gave different results for the same input when it was "
                             "called again ({error}); does it depend on global "
                             "state, randomness or time?").format(name=name,
                                                                   error=type(exc).__name__)), False
    except (Exception, SystemExit) as exc:  # the student's own error, reported as a crash
        return CheckResult(title, False, crash_fault(exc),
                           _student_error_message(name, exc)), False
    return CheckResult(title, True, None, ""), False


def _all_failed(name: str, registered: list, fault: str, message: str, max_score: float,
                started: float) -> FunctionResult:
    results = [CheckResult(title, False, fault, message) for title, _check in registered]
    return FunctionResult(name, 0.0, max_score, results, time.perf_counter() - started)


def _borrowed(fn: Callable, namespace: dict) -> str | None:
    """Why ``fn`` is the kit's own code rather than the student's, or None.

    Looks at ``fn`` itself and at every global name its code (and nested code) reads:
    a module or function of ``solutions`` / ``grader_tests`` reached that way is flagged.
    The graded names of docs/contract.md §2 are left out: ``isolate`` binds them to the
    reference for the checks anyway, and they legitimately are the reference where the
    reference stands in for them (the training notebook on the instructor's side).
    """
    found = borrowed_reference(fn)
    if found:
        return found
    code = getattr(fn, "__code__", None)
    names, stack = set(), [code] if code is not None else []
    while stack:
        c = stack.pop()
        names.update(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    home = getattr(fn, "__globals__", namespace)
    for n in sorted(names - set(SPEC_FUNCTIONS)):
        value = home.get(n)
        module = value if isinstance(value, types.ModuleType) else None
        if module is not None:
            if is_protected_module(module):
                return _("it uses the module {module}, the kit's reference or graders").format(
                    module=module.__name__)
        elif value is not None and callable(value):
            path = borrowed_file(value)
            if path:
                return _("it calls {name}, whose code comes from {path}").format(name=n, path=path)
    return None


def grade_namespace(namespace: dict, names: Iterable[str] | None = None,
                    time_limit_s: float = CALL_TIME_LIMIT,
                    assignment: "str | Assignment | None" = None,
                    undefined: "dict[str, str] | None" = None) -> dict[str, FunctionResult]:
    """Grade every graded name of ``assignment`` (or only ``names``) in ``namespace``.

    Args:
        namespace: dict of the student's definitions.
        names: graded names to grade, or None for all of the assignment's.
        time_limit_s: float, seconds one call of student code may run.
        assignment: the ``Assignment`` or its name (default ``assignments.DEFAULT``).
        undefined: dict name -> why the submission does not define it (``grade_function``).

    Returns:
        dict name -> FunctionResult, in the order of ``names`` (the assignment's order
        by default).

    Raises:
        KeyError: a name is not graded in any assignment.
        ValueError: ``assignment`` is not a known assignment.
    """
    owner = assignments.get(assignment)
    names = list(owner.points) if names is None else list(names)
    return {n: grade_function(n, namespace, time_limit_s, owner, undefined) for n in names}
