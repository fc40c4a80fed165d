"""The typed result of grading, its one JSON form, and the student-facing text.

``CheckResult`` (one check), ``FunctionResult`` (every check of one graded name) and
``GradeReport`` (a whole submission: its functions, the cells that failed while loading,
the flags) are what the runner returns and what the notebook call, the command line, the
batch log and the class summary read. Each is serialised one way: ``to_json`` gives a
JSON-ready dict and ``from_json`` reads it back.
"""

import textwrap
import unicodedata
from dataclasses import dataclass, field

from .faults import trap_line
from .i18n import _
from .registry import NOTES

# Unicode categories of characters that print nothing visible of their own and can move
# the cursor, erase or reorder text in a terminal: control (Cc: ``\r``, ``\x1b``, ...),
# format (Cf: bidirectional overrides, zero-width characters), line and paragraph
# separators, surrogates.
_INVISIBLE = ("Cc", "Cf", "Zl", "Zp", "Cs")


def visible(text: object) -> str:
    """``text`` (a file name, a student id: anything a student chose) with every control,
    format or separator character written as its Python escape (``"\\r"``, ``"\\x1b"``,
    ``"\\u202e"``), so that printing it cannot erase, move or hide other text.

    Args:
        text: any object; ``str(text)`` is shown.

    Returns:
        str with only printable characters and plain spaces (same as ``str(text)`` when it
        has none of those characters).
    """
    text = str(text)
    if all(unicodedata.category(ch) not in _INVISIBLE for ch in text):
        return text
    return "".join(ch.encode("unicode_escape").decode("ascii")
                   if unicodedata.category(ch) in _INVISIBLE else ch for ch in text)


# Characters of a report's message line before it is wrapped (after an 8-space indent).
REPORT_WIDTH = 88
# Decimal places a score keeps in the JSON form (points).
SCORE_DIGITS = 6


@dataclass
class CheckResult:
    """Outcome of one check: ``fault`` (a fault id of ``faults.FAULTS``) is None exactly
    when ``passed``; ``message`` is the student-facing explanation of a failure."""

    name: str
    passed: bool
    fault: str | None = None
    message: str = ""

    def to_json(self) -> dict:
        """JSON-ready dict: ``{"name", "passed", "fault", "message"}``."""
        return {"name": self.name, "passed": self.passed, "fault": self.fault,
                "message": self.message}

    @classmethod
    def from_json(cls, data: dict) -> "CheckResult":
        """The result ``to_json`` wrote.

        Raises:
            KeyError: ``name`` or ``passed`` is missing.
        """
        return cls(str(data["name"]), bool(data["passed"]), data.get("fault"),
                   str(data.get("message", "")))


@dataclass
class FunctionResult:
    """Outcome of every check of one graded name.

    Attributes:
        name: the graded name.
        score: float, points earned (``max_score`` times the share of checks passed; 0
            when every value check failed, see ``runner.unscored_properties``).
        max_score: float, the graded name's points in its assignment.
        checks: list of ``CheckResult``, in registration order.
        seconds: float, wall-clock seconds the grading of this name took.
        note: str, why the score is not the share of checks passed ("" when it is), in
            the language it was graded in.
        review: str, why the grader withholds this function's points for the
            instructor's review while the checks passed ("" when it does not: e.g. a
            backward differentiated numerically, ``derivation``), starting with the name.
    """

    name: str
    score: float
    max_score: float
    checks: list[CheckResult] = field(default_factory=list)
    seconds: float = 0.0
    note: str = ""
    review: str = ""

    @property
    def faults(self) -> list[str]:
        """Distinct fault ids of the failed checks, in order of first appearance."""
        seen: list[str] = []
        for c in self.checks:
            if not c.passed and c.fault is not None and c.fault not in seen:
                seen.append(c.fault)
        return seen

    def to_json(self) -> dict:
        """JSON-ready dict: ``{"score", "max_score", "checks": [CheckResult dicts]}`` (the
        score rounded to ``SCORE_DIGITS`` places), and ``"note"`` and ``"review"`` when
        there are. The
        graded name is the key the dict is stored under (``GradeReport``) or the cell it is
        published by; the seconds are not part of the result a reader gets."""
        data = {"score": round(float(self.score), SCORE_DIGITS),
                "max_score": float(self.max_score),
                "checks": [c.to_json() for c in self.checks]}
        if self.note:
            data["note"] = self.note
        if self.review:
            data["review"] = self.review
        return data

    @classmethod
    def from_json(cls, data: dict, name: str) -> "FunctionResult":
        """The result ``to_json`` wrote for the graded name ``name``.

        Raises:
            KeyError: ``score`` or ``max_score`` is missing.
        """
        return cls(name, float(data["score"]), float(data["max_score"]),
                   [CheckResult.from_json(c) for c in data.get("checks", [])],
                   note=str(data.get("note", "")), review=str(data.get("review", "")))


@dataclass
class GradeReport:
    """A graded submission.

    Attributes:
        assignment: str, the assignment's name (``"attention"``, ``"training"``).
        functions: dict graded name -> ``FunctionResult``, in the assignment's order.
        cell_errors: list of str, the submission's cells that failed while it loaded.
        flags: list of str, what the grader saw that withholds the grade for review.
    """

    assignment: str
    functions: dict[str, FunctionResult] = field(default_factory=dict)
    cell_errors: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        """Points earned over every graded name."""
        return round(sum(float(f.score) for f in self.functions.values()), SCORE_DIGITS)

    @property
    def max_score(self) -> float:
        """Points available over every graded name."""
        return float(sum(f.max_score for f in self.functions.values()))

    def to_json(self) -> dict:
        """JSON-ready dict: ``{"assignment", "score", "max_score", "functions": {name:
        FunctionResult dict}, "cell_errors", "flags"}``."""
        return {"assignment": self.assignment, "score": self.score,
                "max_score": self.max_score,
                "functions": {n: f.to_json() for n, f in self.functions.items()},
                "cell_errors": list(self.cell_errors), "flags": list(self.flags)}

    @classmethod
    def from_json(cls, data: dict) -> "GradeReport":
        """The report ``to_json`` wrote.

        Raises:
            KeyError: a function entry lacks ``score`` or ``max_score``.
        """
        return cls(str(data.get("assignment", "")),
                   {n: FunctionResult.from_json(f, n) for n, f in data.get("functions",
                                                                           {}).items()},
                   [str(e) for e in data.get("cell_errors", [])],
                   [str(f) for f in data.get("flags", [])])


def report_dict(results: dict[str, FunctionResult]) -> dict:
    """JSON form of the results of a grading, without assignment, cell errors or flags:
    ``{"score", "max_score", "functions": {name: FunctionResult dict}}``."""
    full = GradeReport("", dict(results)).to_json()
    return {k: full[k] for k in ("score", "max_score", "functions")}


def tampering_flags(results: dict[str, FunctionResult]) -> list[str]:
    """One line per function a check found gamed (fault ``tampering``): a rigged result,
    answers looked up by input, reference code, an altered environment; and one per
    function the grader holds for review with its points kept (``FunctionResult.review``:
    a backward differentiated numerically).

    Args:
        results: dict name -> FunctionResult.

    Returns:
        list of str, ``"<name>: <first tampering message>"`` or the review's reason.
    """
    found = []
    for name, r in results.items():
        messages = [c.message for c in r.checks if c.fault == "tampering"]
        if messages:
            text = messages[0]
            found.append(text if text.startswith(name + ":") else f"{name}: {text}")
        elif r.review:
            found.append(r.review)
    return found


def format_result(r: FunctionResult) -> str:
    """Plain-ASCII, student-facing text of one ``FunctionResult``: a line with the score,
    one per check (PASS / FAIL and its fault id), each failure's message wrapped at
    ``REPORT_WIDTH`` with the trap of the introduction behind its fault id, and the graded
    name's note (the exercises' worked solutions); in the current language
    (``i18n.use_language``), the check's title (an English msgid) translated here."""
    passed = sum(c.passed for c in r.checks)
    lines = [_("{name}: {score:.2f} / {max_score:g} points ({passed} of {total} checks "
               "passed)").format(name=r.name, score=r.score, max_score=r.max_score,
                                 passed=passed, total=len(r.checks))]
    if r.note:
        wrapped = textwrap.wrap(_("Note: {note}.").format(note=r.note), REPORT_WIDTH,
                                break_long_words=False, break_on_hyphens=False)
        lines.extend(f"  {w}" for w in wrapped)
    for c in r.checks:
        if c.passed:
            lines.append(_("  PASS  {check}").format(check=_(c.name)))
        else:
            lines.append(_("  FAIL  {check}  [{fault}]").format(check=_(c.name), fault=c.fault))
            trap = trap_line(c.fault)
            parts = c.message.splitlines() + ([trap] if trap and trap not in c.message else [])
            for part in parts:
                # long lines wrapped: a report line never runs past a page's or a
                # terminal's right edge (short lines, such as printed arrays, kept as they are)
                wrapped = [part] if len(part) <= REPORT_WIDTH else textwrap.wrap(
                    part, REPORT_WIDTH, break_long_words=False, break_on_hyphens=False)
                lines.extend(f"        {w}" for w in wrapped)
    if r.name in NOTES:
        lines.append(_(NOTES[r.name]))
    return "\n".join(lines)
