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
- returned values whose comparison is rigged (an ``__eq__`` or an array protocol defined
  outside NumPy and the standard library, an ndarray subclass from outside NumPy, a
  subclass of ``float`` or ``int``), judged only where the graders compare values: never
  on a cache the contract leaves opaque (``rigged_object``).

Answers stored for the graders' fixed inputs are found by ``lookup.py``.

A submission flagged here scores 0 for the function concerned and its report names what
was found. Detection in the student's own process is best effort by nature (code that ran
first can hide itself); the isolated batch grader of the kit re-checks in a fresh process.
"""

import builtins
import os
import sys
import sysconfig
import types
from collections.abc import Iterable

import numpy as np

from .i18n import _
from .wire import Handle

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
            problems.append(_("numpy.{name} was replaced").format(name=name))
    testing = sys.modules.get("numpy.testing")
    if testing is not None:
        for name in TESTING_NAMES:
            obj = getattr(testing, name, None)
            if obj is not None and not _numpy_object_ok(obj):
                problems.append(_("numpy.testing.{name} was replaced").format(name=name))
    for name in BUILTIN_NAMES:
        obj = getattr(builtins, name, None)
        if obj is not None and not (isinstance(obj, (types.BuiltinFunctionType, type))
                                    and getattr(obj, "__module__", None) == "builtins"):
            problems.append(_("builtins.{name} was replaced").format(name=name))
    assertion = getattr(builtins, "AssertionError", None)
    if not (isinstance(assertion, type) and assertion.__module__ == "builtins"
            and assertion.__name__ == "AssertionError" and issubclass(assertion, Exception)):
        problems.append(_("builtins.AssertionError was redefined"))
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
                problems.append(_("sys.modules['{key}'] is not the installed module").format(
                    key=key))
    return problems


def is_protected_module(module):
    """True if ``module`` is (part of) the kit's reference or graders."""
    filename = getattr(module, "__file__", None)
    name = getattr(module, "__name__", "")
    if filename and any(_in_dir(filename, d) for d in _PROTECTED_DIRS):
        return True
    return name.split(".")[0] in ("solutions", "grader_tests")


def borrowed_file(fn):
    """The file of the reference or the graders that ``fn`` (or what it wraps) comes from.

    Returns:
        str, the file relative to the kit, or None.
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
            return os.path.relpath(filename, _ROOT)
        for attr in ("__wrapped__", "func", "__func__"):
            try:  # a student's object may raise anything from __getattr__
                inner = getattr(obj, attr, None)
            except Exception:
                inner = None
            if inner is not None:
                stack.append(inner)
        try:
            closure = getattr(obj, "__closure__", None) or ()
        except Exception:
            closure = ()
        for cell in closure:
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if callable(value):
                stack.append(value)
    return None


# Special methods through which Python or NumPy hands a compared object the value it is
# compared with: defined by the submission, they can answer "equal" to anything.
COMPARISONS = {"__eq__": "==", "__ne__": "!=", "__lt__": "<", "__le__": "<=", "__gt__": ">",
               "__ge__": ">="}
ARRAY_PROTOCOL = ("__array__", "__array_interface__", "__array_struct__", "__array_ufunc__",
                  "__array_function__")
# How many objects ``rigged_object`` looks at in one result, and how deep.
RIGGED_MAX_OBJECTS = 100_000
RIGGED_MAX_DEPTH = 8
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type())



def borrowed_reference(fn):
    """If ``fn`` (or what it wraps) is code of the reference or the graders, say so.

    Returns:
        str or None.
    """
    path = borrowed_file(fn)
    if path is None:
        return None
    return _("its code comes from {path}, the kit's reference or graders, not from the "
             "submission").format(path=path)

def _stdlib_dirs():
    paths = sysconfig.get_paths()
    return tuple(dict.fromkeys(os.path.abspath(paths[k]) for k in ("stdlib", "platstdlib")
                               if paths.get(k)))


_STDLIB_DIRS = _stdlib_dirs()


def _trusted_file(filename):
    """True for a file of NumPy or of Python's standard library (not its site-packages)."""
    if not filename or _in_dir(filename, _NUMPY_DIR):
        return bool(filename)
    parts = os.path.abspath(filename).split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    return any(_in_dir(filename, d) for d in _STDLIB_DIRS)


def _code_of(attribute):
    """The code object behind a class attribute (function, property, static or class
    method), or None for anything else."""
    for inner in (attribute, getattr(attribute, "__func__", None),
                  getattr(attribute, "fget", None)):
        code = getattr(inner, "__code__", None) if inner is not None else None
        if isinstance(code, types.CodeType):
            return code
    return None


def _trusted_attribute(kind, name):
    """Whether the special method ``name`` of class ``kind``, wherever in its MRO it is
    defined, is the language's or NumPy's own: defined by a class written in C (a class
    NumPy or Python compiled, which no code can patch) or by Python code in NumPy's or the
    standard library's files. Returns True when no class of the MRO defines it."""
    for klass in kind.__mro__:
        if name in vars(klass):
            if not klass.__flags__ & _HEAPTYPE:
                return True
            code = _code_of(vars(klass)[name])
            return code is not None and _trusted_file(code.co_filename)
    return True


def _numpy_or_builtin_class(kind):
    """True if ``kind`` is a class of Python's or NumPy's own (not a submission's subclass of
    one): written in C, or a Python class (``numpy.matrix``, ``numpy.recarray`` ...) each of
    whose Python classes defines methods, all in NumPy's files."""
    for klass in kind.__mro__:
        if not klass.__flags__ & _HEAPTYPE:
            continue
        codes = [_code_of(value) for value in vars(klass).values()
                 if (callable(value) and not isinstance(value, type))
                 or _code_of(value) is not None]
        if not codes or not all(c is not None and _in_dir(c.co_filename, _NUMPY_DIR)
                                for c in codes):
            return False
    return True


def _rigged_kind(kind):
    """Why objects of class ``kind`` cannot be trusted where a value is compared, or None."""
    if issubclass(kind, np.ndarray) and not _numpy_or_builtin_class(kind):
        return _("an ndarray subclass {module}.{name} defined by the submission").format(
            module=kind.__module__, name=kind.__qualname__)
    if issubclass(kind, (int, float, complex, np.generic)) and not _numpy_or_builtin_class(kind):
        base = next(b for b in kind.__mro__ if not b.__flags__ & _HEAPTYPE)
        base_name = f"{base.__module__}.{base.__qualname__}".replace("builtins.", "")
        return _("a {kind} object, a subclass of {base} defined by the submission").format(
            kind=kind.__qualname__, base=base_name)
    for name in ARRAY_PROTOCOL:
        if not _trusted_attribute(kind, name):
            return (_("a {kind} object that poses as an array (its {name} is defined by the "
                      "submission)").format(kind=kind.__qualname__, name=name))
    for name, operator in COMPARISONS.items():
        if not _trusted_attribute(kind, name):
            return _("a {kind} object whose {operator} is defined by the submission").format(
                kind=kind.__qualname__, operator=operator)
    return None


def rigged_object(value: object, opaque: Iterable[int] = ()) -> str | None:
    """If ``value`` (a function's output) is built to lie about comparisons, say how.

    Only what the graders compare is judged. ``value`` is a function's whole result; when
    it is a tuple or list (several results), the items at the positions in ``opaque`` are
    left out: a cache the contract leaves opaque (``layer_norm_forward``'s and
    ``attention_forward``'s second result) may be an object of any class, with its own
    ``==`` or none, since the graders only hand it back to the student's backward. Every
    other value is judged, and inside it, recursively, the items of tuples and lists, the
    keys and values of dicts and the elements of object arrays. A value is rigged when
    it is:

    - an ndarray subclass, or a subclass of ``int``, ``float``, ``complex`` or a NumPy
      scalar type, defined by the submission;
    - an object whose array protocol (``__array__``, ``__array_interface__``,
      ``__array_struct__``, ``__array_ufunc__``, ``__array_function__``) or comparisons
      (``__eq__``, ``__ne__``, ``<`` ...) are defined by the submission (anywhere in its
      class's MRO): a class of its own, a ``@dataclass`` (its generated ``==``), or a
      NumPy or standard-library class it patched;
    - a ``wire.Handle`` (an object that stayed in the sandboxed process) the sandbox
      marked as rigged.

    Containers of the standard library with their own comparison (a namedtuple, a
    ``dict`` or ``list`` subclass that overrides none) are judged by their items. At most
    ``RIGGED_MAX_OBJECTS`` objects, ``RIGGED_MAX_DEPTH`` levels deep, are looked at.

    Args:
        value: any object, a function's result.
        opaque: indices of items of a tuple or list ``value`` that are not compared.

    Returns:
        str, a clause for the student ("it returned ... defined by the submission"), or
        None when nothing compared is rigged.
    """
    if isinstance(value, (tuple, list)) and opaque:
        skip = set(opaque)
        items = [v for i, v in enumerate(value) if i not in skip]
        found = _rigged_kind(type(value))
        if found:
            return _("it returned {found}").format(found=found)
    else:
        items = [value]
    budget = [RIGGED_MAX_OBJECTS]
    kinds: dict = {}
    for item in items:
        found = _rigged_value(item, 0, budget, kinds)
        if found:
            return _("it returned {found}").format(found=found)
    return None


def _rigged_value(item, depth, budget, kinds):
    """``rigged_object``'s walk over one compared value (``kinds``: verdicts per class)."""
    if budget[0] <= 0:
        return None
    budget[0] -= 1
    kind = type(item)
    if kind is Handle:  # from the sandbox
        return item.rigged or None
    if kind not in kinds:
        kinds[kind] = _rigged_kind(kind)
    if kinds[kind]:
        return kinds[kind]
    if depth >= RIGGED_MAX_DEPTH:
        return None
    if isinstance(item, np.ndarray):
        if item.dtype.hasobject:
            for element in item.flat:
                found = _rigged_value(element, depth + 1, budget, kinds)
                if found or budget[0] <= 0:
                    return found
        return None
    if isinstance(item, dict):
        children = [x for pair in dict.items(item) for x in pair]
    elif isinstance(item, tuple):
        children = tuple.__iter__(item)
    elif isinstance(item, list):
        children = list.__iter__(item)
    else:
        return None
    for child in children:
        found = _rigged_value(child, depth + 1, budget, kinds)
        if found or budget[0] <= 0:
            return found
    return None
