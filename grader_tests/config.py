"""The course's configuration as the kit reads it: ``nbgrader_config.py`` of the course
folder, loaded the way nbgrader loads it (traitlets' ``PyFileConfigLoader``); and the
environment nbgrader's commands run in when the kit starts them."""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

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


def nbgrader_env() -> dict[str, str]:
    """The environment of nbgrader's commands and, through them, of the kernels: this
    process's environment with this interpreter's scripts first on ``PATH`` (nbgrader runs
    ``alembic`` when it creates a gradebook), one BLAS thread per kernel (one kernel per
    core), the virtual environment's kernel spec before any per-user one, and no debugger
    start-up warning on the kernels' stderr."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.update({
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "JUPYTER_PREFER_ENV_PATH": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    })
    return env


def nbgrader_config(root: str | os.PathLike[str]) -> Any:
    """The traitlets ``Config`` of ``root/nbgrader_config.py``, as nbgrader's command line
    reads it (an empty one without the file).

    Raises:
        Whatever executing the configuration file raises (a syntax error in it).
    """
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()


def course_directory(root: str | os.PathLike[str], config: Any = None) -> Any:
    """nbgrader's ``CourseDirectory`` as ``root/nbgrader_config.py`` (or the traitlets
    ``config`` given) configures it.

    Raises:
        Whatever executing the configuration file raises (a syntax error in it).
    """
    from nbgrader.coursedir import CourseDirectory

    return CourseDirectory(config=config or nbgrader_config(root))
