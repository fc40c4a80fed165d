"""The one rule for a student id, wherever the kit takes one from a folder or file name.

A student id reaches the course's record from names a student can choose: an inbound
folder of the exchange (``<student>+<assignment>+<time>``), a learning platform's file
name (``zip_collect``), a folder of ``submitted/`` (``nbgrader autograde``, the batch), the
gradebook (the gate, ``nbgrader export``). It then names folders, rows of ``grades.csv``
and lines of reports. :func:`student_id_problem` is the rule, used by all of them
(``exchange.ExchangeCollect``, ``exchange.CanvasCollector``, ``batch``, ``unlock``,
``gradebook.write_gradebook``, the course's autograde); an id it refuses is reported with
the folder it came from and skipped, and the rest of the class is graded.

An id is refused when it is empty, longer than 255 bytes (a folder name), or holds:

* a path character (``/``, ``\\``, ``:``) or a glob character (``*``, ``?``, ``[``,
  ``]``), or begins with ``.`` (``.``, ``..``, a hidden folder nbgrader does not list);
* a separator of a CSV or a spreadsheet (``,``, ``;``, a tab, ``|``) or a quote
  (``"``, ``'``, `````);
* a control, format or line/paragraph separator character (a newline, a carriage
  return, a zero-width or a direction mark), or whitespace at either end;
* as its first character, ``=``, ``+``, ``-`` or ``@``: a spreadsheet reads such a cell
  as a formula.

Login names (``jdoe``, ``jane.doe``, ``s1234567``), e-mail-style ids (``jane@uni.it``)
and Canvas's sortable names pass.
"""

from __future__ import annotations

import unicodedata

__all__ = ["FORMULA_STARTS", "student_id_problem", "valid_student_id"]

# A cell a spreadsheet reads as a formula begins with one of these (OWASP, "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@")
_PATH = frozenset("/\\:*?[]")
_SEPARATORS = frozenset(",;\t|")
_QUOTES = frozenset("\"'`")
_CONTROL = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))
MAX_BYTES = 255


def student_id_problem(student_id: object) -> str | None:
    """Why ``student_id`` is no student id the kit accepts, or None when it is one.

    Args:
        student_id: the id as read from a folder or file name (any object: a non-str is
            refused).

    Returns:
        None, or the reason (str, English: the instructor's logs) naming the offending
        character.
    """
    if not isinstance(student_id, str) or not student_id:
        return "an empty student id"
    if len(student_id.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        return "a student id longer than {n} bytes".format(n=MAX_BYTES)
    if student_id.startswith("."):
        return "a student id that begins with '.'"
    if student_id[0] in FORMULA_STARTS:
        return "a student id that begins with {char!r} (a spreadsheet formula)".format(
            char=student_id[0])
    if student_id != student_id.strip():
        return "a student id with whitespace at one end"
    for ch in student_id:
        if unicodedata.category(ch) in _CONTROL:
            return "a student id with the control character U+{code:04X}".format(
                code=ord(ch))
        if ch in _PATH:
            return "a student id with the path character {char!r}".format(char=ch)
        if ch in _SEPARATORS:
            return "a student id with the separator {char!r}".format(char=ch)
        if ch in _QUOTES:
            return "a student id with the quote {char!r}".format(char=ch)
    return None


def valid_student_id(student_id: object) -> bool:
    """True when :func:`student_id_problem` finds nothing wrong with ``student_id``."""
    return student_id_problem(student_id) is None

