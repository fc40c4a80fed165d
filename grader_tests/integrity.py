"""Signs that a submission altered the grading environment or borrowed the reference.

These checks run in whatever process grades (the notebook kernel or the command line) and
look for what a gamed submission leaves behind:

- NumPy functions the graders compare with, replaced by Python code from elsewhere
  (``numpy.allclose = lambda *a, **k: True``);
- builtins the graders rely on replaced by Python functions (``builtins.__import__``,
  ``isinstance``, ``getattr``, ``len``, ``abs``, ``max``, ``min``, ``sum``, ``float``...);
- ``grader_tests``, ``solutions`` or ``numpy`` modules in ``sys.modules`` that are not the
  installed files (a faked package);
- a graded function whose code *is* the reference's or the graders' (imported from
  ``solutions`` instead of written);
- returned objects whose comparison is rigged (an ``__eq__`` defined outside NumPy and the
  standard library, or an ndarray subclass from outside NumPy).

Answers stored for the graders' fixed inputs are found by ``lookup.py``.

A submission flagged here scores 0 for the function concerned and its report names what
was found. Detection in the student's own process is best effort by nature (code that ran
first can hide itself); the isolated batch grader of the kit re-checks in a fresh process.
"""

import builtins
import os
import sys
import types

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_HERE)
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__))
_PROTECTED_DIRS = (os.path.join(_ROOT, "grader_tests"), os.path.join(_ROOT, "solutions"))

# NumPy functions the graders use to compare and test values.
NUMPY_NAMES = ("allclose", "array_equal", "isclose", "isfinite", "isnan", "abs", "asarray",
               "array", "where", "max", "sum", "all", "any", "broadcast_shapes", "nan_to_num",
               "issubdtype", "errstate", "zeros", "ones", "concatenate", "swapaxes")
TESTING_NAMES = ("assert_allclose", "assert_array_equal", "assert_array_almost_equal",
                 "assert_equal")
BUILTIN_NAMES = ("__import__", "isinstance", "issubclass", "getattr", "hasattr", "len", "abs",
                 "max", "min", "sum", "float", "int", "bool", "callable", "type", "repr",
                 "print", "compile", "exec", "all", "any", "round")


def _in_dir(path, directory):
    try:
        return os.path.commonpath([os.path.abspath(path), directory]) == directory
    except ValueError:
        return False


def _python_code_file(obj):
    code = getattr(obj, "__code__", None)
    return getattr(code, "co_filename", None) if code is not None else None


def _numpy_object_ok(obj):
    """A NumPy callable is genuine if it is a ufunc, a compiled NumPy function, a NumPy
    class, or Python code (possibly behind NumPy's dispatcher) from NumPy's own files."""
    if isinstance(obj, np.ufunc):
        return True
    if isinstance(obj, (types.BuiltinFunctionType, type)):
        return str(getattr(obj, "__module__", "")).startswith("numpy")
    target = obj
    if type(obj).__module__ == "numpy" and hasattr(obj, "__wrapped__"):
        target = obj.__wrapped__
        if isinstance(target, types.BuiltinFunctionType):  # NumPy's compiled core
            return True
    filename = _python_code_file(target)
    return filename is not None and _in_dir(filename, _NUMPY_DIR)


def environment_problems():
    """What in the current process looks tampered with.

    Returns:
        list of str, one sentence per finding (empty when nothing was found).
    """
    problems = []
    for name in NUMPY_NAMES:
        obj = getattr(np, name, None)
        if obj is not None and not _numpy_object_ok(obj):
            problems.append(f"numpy.{name} was replaced")
    testing = sys.modules.get("numpy.testing")
    if testing is not None:
        for name in TESTING_NAMES:
            obj = getattr(testing, name, None)
            if obj is not None and not _numpy_object_ok(obj):
                problems.append(f"numpy.testing.{name} was replaced")
    for name in BUILTIN_NAMES:
        obj = getattr(builtins, name, None)
        if obj is not None and not (isinstance(obj, (types.BuiltinFunctionType, type))
                                    and getattr(obj, "__module__", None) == "builtins"):
            problems.append(f"builtins.{name} was replaced")
    assertion = getattr(builtins, "AssertionError", None)
    if not (isinstance(assertion, type) and assertion.__module__ == "builtins"
            and assertion.__name__ == "AssertionError" and issubclass(assertion, Exception)):
        problems.append("builtins.AssertionError was redefined")
    for modname, directory in (("grader_tests", _PROTECTED_DIRS[0]),
                               ("solutions", _PROTECTED_DIRS[1]), ("numpy", _NUMPY_DIR)):
        for key, module in list(sys.modules.items()):
            if key != modname and not key.startswith(modname + "."):
                continue
            if module is None:
                continue
            filename = getattr(module, "__file__", None)
            if filename is None or not _in_dir(filename, directory):
                # compiled extension modules of numpy live in its dir too; a namespace
                # module with no file is not one of ours
                if modname == "numpy" and filename is None:
                    continue
                problems.append(f"sys.modules['{key}'] is not the installed module")
    return problems


def is_protected_module(module):
    """True if ``module`` is (part of) the kit's reference or graders."""
    filename = getattr(module, "__file__", None)
    name = getattr(module, "__name__", "")
    if filename and any(_in_dir(filename, d) for d in _PROTECTED_DIRS):
        return True
    return name.split(".")[0] in ("solutions", "grader_tests")


def borrowed_reference(fn):
    """If ``fn`` (or what it wraps) is code of the reference or the graders, say so.

    Returns:
        str or None.
    """
    seen = set()
    stack = [fn]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        filename = _python_code_file(obj)
        if filename and any(_in_dir(filename, d) for d in _PROTECTED_DIRS):
            return (f"its code comes from {os.path.relpath(filename, _ROOT)}, the kit's "
                    f"reference or graders, not from the submission")
        for attr in ("__wrapped__", "func", "__func__"):
            inner = getattr(obj, attr, None)
            if inner is not None:
                stack.append(inner)
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if callable(value):
                stack.append(value)
    return None


def rigged_object(value):
    """If ``value`` (a function's output) is built to lie about comparisons, say how.

    Returns:
        str or None.
    """
    for item in (value if isinstance(value, (tuple, list)) else (value,)):
        kind = type(item)
        if kind.__name__ == "Handle" and hasattr(item, "rigged"):  # from the sandbox
            if item.rigged:
                return item.rigged
            continue
        if isinstance(item, np.ndarray):
            if kind is not np.ndarray and not kind.__module__.startswith("numpy"):
                return (f"it returned an ndarray subclass {kind.__module__}.{kind.__name__} "
                        f"defined by the submission")
            continue
        if isinstance(item, (int, float, complex, bool, str, bytes, dict, type(None),
                             np.generic)) and kind.__module__ in ("builtins", "numpy"):
            continue
        if isinstance(item, (tuple, list)):
            continue
        eq = getattr(kind, "__eq__", None)
        if eq is not None and _python_code_file(eq) and not kind.__module__.startswith("numpy"):
            return (f"it returned a {kind.__name__} object whose == is defined by the "
                    f"submission")
    return None
