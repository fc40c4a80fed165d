"""The course's rule for a due date: accepted only in a form that reads one way, stored in
UTC, refused with a message otherwise.

nbgrader reads a due date with ``nbgrader.utils.parse_utc`` (dateutil), which reads
``2025-03-14 17:00:00 +0100`` as 17:00 at an offset of 100 *seconds* and stores 16:58:20
UTC, 58 min 20 s later than meant, silently; and it stores a time with no zone as UTC,
whatever the course's timezone. Every due date reaches the gradebook through
``Gradebook.add_assignment`` or ``Gradebook.update_or_create_assignment`` (``nbgrader db
assignment add --duedate``, formgrader's *Manage Assignments*, ``nbgrader db assignment
import``, the kit's ``tools/demo.py``): ``install_due_date_rule`` (called by the course's
``nbgrader_config.py``) makes both read the text with ``parse_due_date`` first, so
nbgrader is handed a time it cannot misread.
"""

from __future__ import annotations

import datetime
import functools
import re
import zoneinfo

from .i18n import _

# date, then "T" or one space, then a time to the minute, second or microsecond, then an
# optional zone: "Z" or an offset (±HH:MM or ±HHMM) written against the time, or after one
# space "UTC", "GMT", "Z", an IANA zone name (Europe/Rome) or an offset.
_FORM = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})(?P<sep>[T ])"
    r"(?P<time>\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)"
    r"(?:(?P<offset>Z|[+-]\d{2}:?\d{2})"
    r"| (?P<spaced>[+-]\d{2}:?\d{2})"
    r"| (?P<name>UTC|GMT|Z|[A-Za-z_]+(?:/[A-Za-z0-9_+-]+)+))?")

EXAMPLES = "2025-03-14T17:00:00+01:00, 2025-03-14T16:00:00Z, 2025-03-14 16:00:00 UTC"


class DueDateError(ValueError):
    """A due date the course's rule refuses; the message says why and what to write."""


def _refuse(text: str, why: str, timezone: str) -> DueDateError:
    return DueDateError(_(
        "due date {text!r} refused: {why}. Write it as ISO 8601 with its offset or Z, or "
        "with a zone name ({examples}), or with no zone for the course's timezone "
        "({timezone}, c.NbGraderAPI.timezone)").format(
            text=text, why=why, examples=EXAMPLES, timezone=timezone))


def _offset(text: str) -> datetime.timezone:
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return datetime.timezone(sign * datetime.timedelta(hours=int(digits[:2]),
                                                       minutes=int(digits[2:])))


def parse_due_date(text: str | datetime.datetime, timezone: str = "UTC") -> datetime.datetime:
    """The due date ``text`` as a naive UTC ``datetime`` (what nbgrader stores).

    Accepted: ``YYYY-MM-DD`` then ``T`` or a space then ``HH:MM[:SS[.ffffff]]``, then
    ``Z`` or an offset ``±HH:MM``/``±HHMM`` against the time (ISO 8601), or after a space
    ``UTC``, ``GMT``, ``Z`` or an IANA zone name (nbgrader's own form, ``2025-03-14
    17:00:00 UTC``); formgrader's form, ``T`` then a space then an offset
    (``2025-03-14T17:00 +0100``); or no zone at all, read in ``timezone``. A
    ``datetime`` is taken as nbgrader takes it (naive: UTC).

    Args:
        text: the due date as written, or a ``datetime``.
        timezone: the course's timezone (an IANA name, ``c.NbGraderAPI.timezone``), for a
            time written with no zone.

    Raises:
        DueDateError: any other form, among them a space then an offset after a
            space-separated time (``2025-03-14 17:00:00 +0100``, which nbgrader reads as
            100 seconds), an impossible date, an unknown zone name, or a local time that
            a change of clocks makes happen twice or never in that zone.
    """
    if isinstance(text, datetime.datetime):
        if text.tzinfo is None:
            return text
        return text.astimezone(datetime.UTC).replace(tzinfo=None)
    if not isinstance(text, str):
        raise _refuse(repr(text), _("not a text"), timezone)
    written = text.strip()
    found = _FORM.fullmatch(written)
    if found is None:
        raise _refuse(text, _("not a date and time in a form the kit reads one way"), timezone)
    if found["spaced"] and found["sep"] == " ":
        raise _refuse(text, _("nbgrader reads an offset written after a space-separated time "
                              "as seconds ({offset} would be {seconds} s, not hours)").format(
                                  offset=found["spaced"],
                                  seconds=int(found["spaced"].replace(":", ""))), timezone)
    try:
        local = datetime.datetime.fromisoformat(f"{found['date']}T{found['time']}")
    except ValueError as exc:
        raise _refuse(text, str(exc), timezone) from None
    zone_text = found["offset"] or found["spaced"]
    if zone_text and zone_text != "Z":
        return (local.replace(tzinfo=_offset(zone_text)).astimezone(datetime.UTC)
                .replace(tzinfo=None))
    name = found["name"]
    if zone_text == "Z" or name in ("UTC", "GMT", "Z"):
        return local
    try:
        zone = _zone(name or timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise _refuse(text, _("no timezone named {name!r}").format(name=name or timezone),
                      timezone) from None
    first, second = local.replace(tzinfo=zone, fold=0), local.replace(tzinfo=zone, fold=1)
    if first.utcoffset() != second.utcoffset():
        raise _refuse(text, _("in {zone} that local time happens twice or never (a change "
                              "of clocks)").format(zone=name or timezone), timezone)
    return first.astimezone(datetime.UTC).replace(tzinfo=None)


@functools.lru_cache(maxsize=16)
def _zone(name: str) -> datetime.tzinfo:
    return datetime.UTC if name in ("UTC", "GMT", "Z") else zoneinfo.ZoneInfo(name)


def install_due_date_rule(timezone: str = "UTC") -> None:
    """Make nbgrader's ``Gradebook.add_assignment`` and ``update_or_create_assignment``
    read a ``duedate`` with ``parse_due_date`` (``timezone`` for a time with no zone), so
    that every path that records a due date follows the rule; called by the course's
    ``nbgrader_config.py``. Installing again replaces the timezone. On ``nbgrader db
    assignment add`` and ``import`` a refusal is one error line and exit status 1.

    Raises:
        zoneinfo.ZoneInfoNotFoundError: ``timezone`` is no known zone.
    """
    from nbgrader.api import Gradebook

    _zone(timezone)  # an unknown course timezone is the configuration's error, said now
    for method in ("add_assignment", "update_or_create_assignment"):
        original = getattr(Gradebook, method)
        original = getattr(original, "_kit_original", original)

        def ruled(self, name, *args, _original=original, **kwargs):
            if kwargs.get("duedate") is not None:
                kwargs["duedate"] = parse_due_date(kwargs["duedate"], timezone)
            return _original(self, name, *args, **kwargs)

        ruled._kit_original = original  # type: ignore[attr-defined]
        ruled.__doc__ = original.__doc__
        setattr(Gradebook, method, ruled)
    _refusal_on_the_command_line()


def _refusal_on_the_command_line() -> None:
    """``nbgrader db assignment add`` and ``import`` end on a refused due date with its
    message as one error line and exit status 1 (nbgrader's ``fail``), not a traceback."""
    from nbgrader.apps import dbapp

    for app in (dbapp.DbAssignmentAddApp, dbapp.DbAssignmentImportApp):
        start = getattr(app.start, "_kit_original", app.start)

        def refusing(self, _start=start):
            try:
                return _start(self)
            except DueDateError as exc:
                self.fail(str(exc))

        refusing._kit_original = start  # type: ignore[attr-defined]
        app.start = refusing
