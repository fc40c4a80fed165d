"""Hidden graders of the attention course kit.

Installed in the grading environment only; students never receive this package.
Entry points: ``grade(name, namespace)`` for the notebooks' hidden cells,
``python -m grader_tests`` for the command line.

Importing the package itself loads nothing of the engine: the names below are found on
first use (PEP 562), so the jailed worker (``_worker.py``), which has only ``wire``,
``rebind`` and ``submission`` beside it, imports its modules as this package.
"""

import importlib as _importlib
import os as _os
import tempfile as _tempfile

# Hypothesis keeps caches in ./.hypothesis of the working directory, which for a notebook is
# the student's folder (and nbgrader would copy it into the release): keep them in /tmp.
_os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                       _os.path.join(_tempfile.gettempdir(), "attention-kit-hypothesis"))

# public name -> the module that defines it
_PUBLIC = {"POINTS": "assignments", "grade_id": "assignments", "report_dict": "report",
           "grade_function": "runner", "grade_namespace": "runner", "grade": "notebook"}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> object:
    """The public name ``name``, imported from its module on first use.

    Raises:
        AttributeError: ``name`` is not a public name of the package (nor a submodule).
    """
    if name in _PUBLIC:
        value = getattr(_importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
