"""The course's configuration as the kit reads it: ``nbgrader_config.py`` of the course
folder, loaded the way nbgrader loads it (traitlets' ``PyFileConfigLoader``)."""

from __future__ import annotations

import functools
import os

from .submission import DEFAULT_ALLOWED_MODULES, is_available  # noqa: F401  (re-exported)


def course_config(root: str, section: str = "CourseDirectory") -> dict:
    """``c.<section>`` of ``root/nbgrader_config.py`` as a dict (empty without the file),
    read the way nbgrader reads it, so that a value computed in it (the kit's absolute
    sqlite path) comes out as nbgrader sees it.

    Args:
        root: the course folder.
        section: a configurable class name (``"CourseDirectory"``, ``"AttentionKit"``).

    Raises:
        Whatever executing the configuration file raises (a syntax error in it).
    """
    if not os.path.isfile(os.path.join(root, "nbgrader_config.py")):
        return {}
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    return dict(config.get(section, {}))


@functools.lru_cache(maxsize=8)
def _allowed_in(root: str, stamp: float | None) -> tuple[str, ...]:
    try:
        listed = course_config(root, "AttentionKit").get("allowed_modules")
    except Exception:  # an unreadable configuration: nbgrader itself reports it
        listed = None
    if not listed:
        return DEFAULT_ALLOWED_MODULES
    return tuple(str(m).split(".")[0] for m in listed)


def allowed_modules(root: str | None = None) -> tuple[str, ...]:
    """Top-level names of the third-party modules graded code may import:
    ``c.AttentionKit.allowed_modules`` of the course in ``root`` (default: the current
    folder), else ``DEFAULT_ALLOWED_MODULES``. The standard library is always allowed
    (``is_available``)."""
    root = os.path.abspath(root or os.getcwd())
    try:  # read again when the file changes
        stamp = os.stat(os.path.join(root, "nbgrader_config.py")).st_mtime_ns
    except OSError:
        stamp = None
    return _allowed_in(root, stamp)
