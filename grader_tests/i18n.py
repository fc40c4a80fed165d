"""The language of the messages the kit's code writes: reports, teaching messages, the
gate's and the unlock report's lines, the dashboard's labels.

One setting per course, ``c.AttentionKit.language`` of the course's ``nbgrader_config.py``
(``"en"``, the default, or ``"it"``), chooses it. English is the text of the code itself
(the msgids); another language comes from a gettext catalogue of this package,
``grader_tests/locale/<lang>/LC_MESSAGES/attention_kit.mo``, compiled from its ``.po`` with
Babel (``python -m tools.i18n``) and committed, so that a fresh clone grades in Italian
without Babel. A missing catalogue is an error (``gettext.translation(...,
fallback=False)``), never English left in its place.

The language is per grading, not per process: ``use_language(lang)`` sets it for the
code running inside (a ``contextvars`` variable, so threads and the grading of another
course are unaffected), and ``_()`` / ``ngettext()`` translate with it. Strings defined at
import time (fault explanations, check titles) are marked with ``N_()`` and translated
where they are shown, with ``_()``.

A command's own help and usage errors are an ``ArgumentParser`` of this module: argparse's
parser with its own words (the usage line, the section titles, the help option, the error
line) in the current language; the messages argparse composes itself for a usage error (an
invalid choice, a missing argument) stay argparse's.

The language is read from the course folder the grading runs in, by the grader, never
inside the jail: code that runs where the student's files are (the jailed worker, a
kernel) is handed the language explicitly.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import functools
import gettext
import os
import sys
from collections.abc import Iterator
from typing import Any

DOMAIN = "attention_kit"
LOCALE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "locale")
# The languages of the kit: English (the code's own text) first.
LANGUAGES = ("en", "it")
DEFAULT_LANGUAGE = "en"

_current: contextvars.ContextVar[str] = contextvars.ContextVar(
    "attention_kit_language", default=DEFAULT_LANGUAGE)


def check_language(lang: object) -> str:
    """``lang`` if it is a language of the kit.

    Args:
        lang: the value of a setting or option (``"en"``, ``"it"``).

    Returns:
        str, ``lang`` lower-cased.

    Raises:
        ValueError: ``lang`` is not one of ``LANGUAGES``.
    """
    text = str(lang).strip().lower()
    if text not in LANGUAGES:
        raise ValueError(f"c.AttentionKit.language = {lang!r}: the kit speaks "
                         f"{', '.join(repr(x) for x in LANGUAGES)}")
    return text


def config_language(config: Any) -> str:
    """The course's language, ``c.AttentionKit.language`` of the configuration nbgrader
    loaded for the course (never read from the submission's folder); ``"en"`` unset.

    Raises:
        ValueError: the setting names a language the kit does not have.
    """
    return check_language(config.get("AttentionKit", {}).get("language") or DEFAULT_LANGUAGE)


def course_language(root: str | None = None) -> str:
    """The language of the course in ``root`` (default: the current folder):
    ``c.AttentionKit.language`` of its ``nbgrader_config.py``, else ``"en"``.

    Call it in the grader's process, on the instructor's course folder, never on a folder
    a student could write to.

    Args:
        root: the course folder.

    Returns:
        str, one of ``LANGUAGES``.

    Raises:
        ValueError: the setting names a language the kit does not have.
        Whatever executing the configuration file raises (a syntax error in it).
    """
    from .config import course_config

    value = course_config(os.path.abspath(root or os.getcwd()), "AttentionKit").get("language")
    return DEFAULT_LANGUAGE if value in (None, "") else check_language(value)


@functools.lru_cache(maxsize=None)
def translation(lang: str) -> gettext.NullTranslations:
    """The gettext translation of ``lang``: English is the code's own text (no catalogue),
    any other language its compiled catalogue.

    Args:
        lang: one of ``LANGUAGES``.

    Raises:
        ValueError: ``lang`` is not one of ``LANGUAGES``.
        FileNotFoundError: the catalogue of ``lang`` is not compiled (``python -m
            tools.i18n compile``).
    """
    lang = check_language(lang)
    if lang == "en":
        return gettext.NullTranslations()
    return gettext.translation(DOMAIN, LOCALE_DIR, [lang], fallback=False)


def current_language() -> str:
    """The language ``_()`` translates into here (``"en"`` outside ``use_language``)."""
    return _current.get()


def set_language(lang: str) -> None:
    """Make ``lang`` the language of the current context from now on (a process that
    grades one course: the jailed worker, a command).

    Raises:
        ValueError, FileNotFoundError: as ``translation``.
    """
    translation(lang)
    _current.set(check_language(lang))


@contextlib.contextmanager
def use_language(lang: str) -> Iterator[str]:
    """Inside, ``_()`` translates into ``lang``; the language before is restored after.

    Yields:
        str, the language.

    Raises:
        ValueError, FileNotFoundError: as ``translation``.
    """
    translation(lang)
    token = _current.set(check_language(lang))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def _(message: str) -> str:
    """``message`` (an English msgid) in the current language (the empty string stays
    empty: gettext would answer the catalogue's header)."""
    if not message:
        return message
    return translation(_current.get()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """``singular`` or ``plural`` (English msgids) for the count ``n``, in the current
    language, with that language's plural rule."""
    return translation(_current.get()).ngettext(singular, plural, n)


def N_(message: str) -> str:
    """Mark ``message`` for extraction without translating it (a constant defined at
    import time, translated where it is shown with ``_()``)."""
    return message


def folder_language(root: str | None = None) -> str:
    """``course_language(root)``, or ``"en"`` where the folder's setting cannot be read (a
    command's help and usage errors are shown even from a folder with a broken
    configuration, which the command itself then reports).

    Args:
        root: the course folder (default: the current folder).

    Returns:
        str, one of ``LANGUAGES``.
    """
    try:
        return course_language(root)
    except Exception:  # noqa: BLE001  (the setting is reported by the command, not here)
        return DEFAULT_LANGUAGE


def not_a_course(root: str | os.PathLike[str]) -> str | None:
    """Why the folder ``root`` cannot be used as a course by the instructor's commands, in
    the current language (``i18n.use_language``), or None when it can: it must be a folder
    holding its own ``nbgrader_config.py``.

    Args:
        root: the folder given as the course (``--root``, or the current folder).

    Returns:
        str, one sentence naming the folder and what it needs (the example class's
        ``example/nbgrader_config.py`` as the model); None for a course folder.
    """
    root = os.path.abspath(os.fspath(root))
    model = _("A course folder needs its own nbgrader_config.py: the example class's "
              "example/nbgrader_config.py loads the kit's configuration with "
              "load_subconfig(...) and sets its own CourseDirectory.root, course_id and "
              "db_url.")
    if not os.path.isdir(root):
        return _("{root} is not a folder. {model}").format(root=root, model=model)
    if not os.path.isfile(os.path.join(root, "nbgrader_config.py")):
        return _("{root} is not a course: it has no nbgrader_config.py. {model}").format(
            root=root, model=model)
    return None


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with the usage line's prefix in the current language."""

    def add_usage(self, usage, actions, groups, prefix=None):  # type: ignore[override]
        super().add_usage(usage, actions, groups, _("usage: ") if prefix is None else prefix)


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose own words are in the current language (build it
    inside ``use_language``): the usage line's prefix, the titles of the argument sections,
    the ``-h`` option's help and the ``PROG: error: MESSAGE`` line of a usage error (exit
    status 2, as argparse's). Sub-commands' parsers are of this class too. The message of
    a usage error argparse composes itself (an invalid choice, a missing argument) stays
    its English.

    Args and raises: as ``argparse.ArgumentParser``.
    """

    def __init__(self, *args, **kwargs) -> None:
        add_help = kwargs.pop("add_help", True)
        kwargs.setdefault("formatter_class", _HelpFormatter)
        kwargs["add_help"] = False  # added below, its help translated
        super().__init__(*args, **kwargs)
        self._positionals.title = _("positional arguments")
        self._optionals.title = _("options")
        if add_help:
            self.add_argument("-h", "--help", action="help", default=argparse.SUPPRESS,
                              help=_("show this help message and exit"))

    def error(self, message: str):  # type: ignore[override]
        """Print the usage and ``PROG: error: MESSAGE`` on standard error; exit with 2.

        Raises:
            SystemExit: always, with status 2.
        """
        self.print_usage(sys.stderr)
        self.exit(2, _("{prog}: error: {message}").format(prog=self.prog, message=message)
                  + "\n")
