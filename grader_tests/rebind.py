"""Re-binding the names a function reaches: the one mechanism behind fault isolation.

``rebound(fn, replacements, name)`` returns a copy of the callable ``fn``, the function
graded as ``name``, in which every graded name of ``replacements`` resolves to its
replacement instead of the student's own definition, and ``name`` itself resolves to the
copy of ``fn``: the function under test is identified by the graded name it is stored
under, never by its ``__name__``, so an alias (``softmax = _softmax``), a lambda, a
``functools.partial`` or a callable object that calls ``softmax`` reaches itself, not a
stand-in.

What is copied is what the student's code can reach from ``fn`` inside the module it was
defined in (``home``, the notebook's or the submission's globals): the module's globals
(a copy of the dict, so ``globals()`` sees the same bindings), plain functions defined
there with their closures, default arguments and attributes, ``functools.partial``
objects, bound methods, instances of classes defined there (their attributes and the
methods of their class), and the lists, tuples, dicts, sets and
``types.SimpleNamespace`` objects holding any of those. An object stored under a
replaced graded name is replaced wherever it is reached that way (a closure, a default
argument, an attribute), not only through the global name. Objects from elsewhere
(NumPy, the standard library, modules) are shared, never copied; the original objects
and ``home`` are never modified.

In the grader the replacements come from ``core.callees`` (the reference functions,
themselves re-bound so that their uses of ``name`` reach the function under test); in
the sandbox worker they are callbacks to the grader.

This module imports only the standard library, so that the sandbox worker can use it
without importing the graders.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Collection, Mapping
from typing import Any

# Containers with more items than this are shared, not searched (a notebook's ``Out``,
# a long list of numbers): nothing a function needs for isolation hides in them.
MAX_CONTAINER = 10_000
# Nesting depth beyond which objects are shared as they are.
MAX_DEPTH = 100

_CONTAINERS = (list, tuple, dict, set, frozenset)
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class created by a class statement or type()


def rebound(fn: Callable, replacements: Mapping[str, Any], name: str | None = None,
            keep: Collection[str] = (), home: dict | None = None) -> Callable:
    """``fn`` with the graded names of ``replacements`` bound to their values.

    Args:
        fn: the callable graded as ``name``: a function, a ``functools.partial``, a bound
            method, or an instance of a class with ``__call__``. A callable with nothing
            of ``home`` in it (a builtin, a NumPy function, a proxy of the sandbox) is
            returned as is.
        replacements: dict graded name -> object (the replacement of that name).
        name: the graded name ``fn`` is stored under. It is never replaced: inside the
            copy it resolves to the copy of ``fn`` itself, whatever ``fn.__name__`` is.
            None when ``fn`` is not graded (a reference function re-bound for a callee):
            then every name of ``replacements`` is replaced.
        keep: graded names left bound as they are in ``home``.
        home: dict, the globals of the module ``fn``'s code was defined in (the
            notebook's namespace); default: the ``__globals__`` of the first plain
            function found in ``fn`` (its own, its ``func``, its ``__func__``, its
            class's ``__call__``).

    Returns:
        A callable of the same kind as ``fn``, or ``fn`` itself when there is nothing to
        re-bind. ``fn``, the objects it reaches and ``home`` are left untouched.
    """
    if home is None:
        home = _home_of(fn)
        if home is None:
            return fn
    binder = _Rebinder(home, replacements, name, keep)
    return binder.bind(fn)


def rebound_many(functions: Mapping[str, Callable], replacements: Mapping[str, Any],
                 home: dict) -> dict[str, Callable]:
    """``rebound`` for several functions of one module at once, sharing one copy of its
    globals (cheaper than one ``rebound`` each, and the copies call each other).

    Args:
        functions: dict key -> callable whose code was defined in ``home``.
        replacements: dict name -> object, replaced in every copy.
        home: dict, the module's globals.

    Returns:
        dict key -> the re-bound copy of ``functions[key]``.
    """
    binder = _Rebinder(home, replacements, None, ())
    return {key: binder.bind(fn) for key, fn in functions.items()}


def _home_of(fn: Any, depth: int = 0) -> dict | None:
    """The globals of the first plain function found in ``fn``, or None."""
    if depth > 8:
        return None
    if isinstance(fn, types.FunctionType):
        return fn.__globals__
    if isinstance(fn, functools.partial):
        return _home_of(fn.func, depth + 1)
    if isinstance(fn, types.MethodType):
        return _home_of(fn.__func__, depth + 1)
    call = _class_attribute(type(fn), "__call__")
    if isinstance(call, types.FunctionType):
        return call.__globals__
    return None


def _class_attribute(cls: type, attribute: str) -> Any:
    """``attribute`` looked up in the ``__dict__`` of the classes of ``cls``'s MRO, without
    running any descriptor or ``__getattr__`` (None if absent)."""
    for klass in getattr(cls, "__mro__", ()):
        namespace = type.__dict__["__dict__"].__get__(klass)
        if attribute in namespace:
            return namespace[attribute]
    return None


class _Rebinder:
    """One re-binding: the patched globals of ``home`` and a memo original -> copy.

    Every object it returns is the same for the same original (the memo), so aliases
    stay aliases and cycles (a function that reaches itself) terminate.
    """

    def __init__(self, home: dict, replacements: Mapping[str, Any], name: str | None,
                 keep: Collection[str]) -> None:
        self.home = home
        self.name = name
        self.replacing = {key: value for key, value in replacements.items()
                          if key not in keep and key != name}
        self.memo: dict[int, tuple[Any, Any]] = {}  # id(original) -> (original, copy)
        self.module_name = home.get("__name__")
        self.patched: dict = {}
        self.memo[id(home)] = (home, self.patched)
        self.classes: dict[type, bool] = {}
        self.filled = False

    # -- entry point ----------------------------------------------------------------------
    def bind(self, fn: Callable) -> Callable:
        """The copy of ``fn``, with ``home``'s globals patched around it."""
        for key, value in self.replacing.items():  # the objects stored under replaced names
            original = self.home.get(key)
            if original is not None and original is not fn and \
                    self._is_student_callable(original):
                self.memo.setdefault(id(original), (original, value))
        target = self.value(fn)
        if target is fn and not self._reaches_home(fn):
            return fn
        if self.filled:
            return target
        self.filled = True
        for key, value in self.home.items():
            if key == self.name:
                continue
            if key in self.replacing:
                self.patched[key] = self.replacing[key]
            elif key == "__builtins__":
                self.patched[key] = value
            else:
                self.patched[key] = self.value(value)
        self.patched.update(self.replacing)
        if self.name is not None:
            self.patched[self.name] = target
        return target

    def _reaches_home(self, fn: Any) -> bool:
        return _home_of(fn) is self.home

    # -- what counts as the student's ----------------------------------------------------
    def _is_home_function(self, obj: Any) -> bool:
        return isinstance(obj, types.FunctionType) and obj.__globals__ is self.home

    def _is_student_class(self, cls: Any) -> bool:
        """True for a class defined in ``home`` or with a method defined there."""
        if not isinstance(cls, type) or type(cls) is not type:
            return False
        known = self.classes.get(cls)
        if known is None:
            known = False
            for klass in cls.__mro__[:-1]:
                if not klass.__flags__ & _HEAPTYPE:  # a builtin or extension type
                    continue
                if self.module_name and klass.__dict__.get("__module__") == self.module_name:
                    known = True
                    break
                namespace = type.__dict__["__dict__"].__get__(klass)
                if any(self._is_home_function(_unwrap_descriptor(v))
                       for v in namespace.values()):
                    known = True
                    break
            self.classes[cls] = known
        return known

    def _is_student_callable(self, obj: Any) -> bool:
        return (self._is_home_function(obj) or isinstance(obj, (functools.partial,
                                                                 types.MethodType))
                or self._is_student_class(type(obj)))

    # -- copying --------------------------------------------------------------------------
    def value(self, obj: Any, depth: int = 0) -> Any:
        """The re-bound counterpart of ``obj`` (``obj`` itself when nothing in it changes)."""
        found = self.memo.get(id(obj))
        if found is not None and found[0] is obj:
            return found[1]
        if depth > MAX_DEPTH:
            return obj
        if isinstance(obj, types.FunctionType):
            return self._function(obj, depth) if obj.__globals__ is self.home else obj
        if isinstance(obj, functools.partial):
            return self._partial(obj, depth)
        if isinstance(obj, types.MethodType):
            copy = types.MethodType(self.value(obj.__func__, depth + 1),
                                    self.value(obj.__self__, depth + 1))
            return self._remember(obj, copy)
        if isinstance(obj, (staticmethod, classmethod)):
            return self._remember(obj, type(obj)(self.value(obj.__func__, depth + 1)))
        if isinstance(obj, property):
            fget, fset, fdel = (self.value(f, depth + 1) for f in (obj.fget, obj.fset, obj.fdel))
            return self._remember(obj, property(fget, fset, fdel, obj.__doc__))
        if type(obj) in _CONTAINERS or type(obj) is types.SimpleNamespace:
            return self._container(obj, depth)
        if isinstance(obj, type):
            return self._class(obj, depth) if self._is_student_class(obj) else obj
        if self._is_student_class(type(obj)):
            return self._instance(obj, depth)
        return obj

    def _remember(self, original: Any, copy: Any) -> Any:
        self.memo[id(original)] = (original, copy)
        return copy

    def _function(self, fn: types.FunctionType, depth: int) -> types.FunctionType:
        cells = None
        if fn.__closure__ is not None:
            cells = tuple(self._cell(cell) for cell in fn.__closure__)
        copy = types.FunctionType(fn.__code__, self.patched, fn.__name__, None, cells)
        self._remember(fn, copy)
        copy.__qualname__ = fn.__qualname__
        copy.__module__ = fn.__module__
        copy.__doc__ = fn.__doc__
        if fn.__defaults__ is not None:
            copy.__defaults__ = tuple(self.value(d, depth + 1) for d in fn.__defaults__)
        if fn.__kwdefaults__ is not None:
            copy.__kwdefaults__ = {k: self.value(v, depth + 1)
                                   for k, v in fn.__kwdefaults__.items()}
        copy.__dict__.update({k: self.value(v, depth + 1) for k, v in fn.__dict__.items()})
        for original, new in zip(fn.__closure__ or (), cells or ()):
            try:
                contents = original.cell_contents
            except ValueError:  # a free variable not assigned yet
                continue
            new.cell_contents = self.value(contents, depth + 1)
        return copy

    def _cell(self, cell: types.CellType) -> types.CellType:
        found = self.memo.get(id(cell))
        if found is not None and found[0] is cell:
            return found[1]
        return self._remember(cell, types.CellType())  # filled by the caller

    def _partial(self, obj: functools.partial, depth: int) -> functools.partial:
        func = self.value(obj.func, depth + 1)
        args = tuple(self.value(a, depth + 1) for a in obj.args)
        keywords = {k: self.value(v, depth + 1) for k, v in obj.keywords.items()}
        if type(obj) is functools.partial:
            return self._remember(obj, functools.partial(func, *args, **keywords))
        try:  # a subclass of partial: same class, state re-bound
            copy = type(obj).__new__(type(obj), func, *args, **keywords)
            state = getattr(obj, "__dict__", None)
            if state:
                copy.__dict__.update({k: self.value(v, depth + 1) for k, v in state.items()})
        except Exception:
            return obj
        return self._remember(obj, copy)

    def _container(self, obj: Any, depth: int) -> Any:
        kind = type(obj)
        items = vars(obj) if kind is types.SimpleNamespace else obj
        if len(items) > MAX_CONTAINER:
            return obj
        if kind is tuple or kind is frozenset:
            new = [self.value(v, depth + 1) for v in obj]
            if all(a is b for a, b in zip(new, obj)):
                return obj
            return self._remember(obj, kind(new))
        if kind is list:
            copy: Any = []
            self._remember(obj, copy)
            copy.extend(self.value(v, depth + 1) for v in obj)
        elif kind is set:
            copy = set()
            self._remember(obj, copy)
            copy.update(self.value(v, depth + 1) for v in obj)
        elif kind is dict:
            copy = {}
            self._remember(obj, copy)
            copy.update((k, self.value(v, depth + 1)) for k, v in obj.items())
        else:
            copy = types.SimpleNamespace()
            self._remember(obj, copy)
            vars(copy).update((k, self.value(v, depth + 1)) for k, v in items.items())
        new_values = vars(copy).values() if kind is types.SimpleNamespace else (
            copy.values() if kind is dict else copy)
        old_values = items.values() if kind in (dict, types.SimpleNamespace) else obj
        if kind is not set and all(a is b for a, b in zip(new_values, old_values)):
            self.memo[id(obj)] = (obj, obj)  # nothing changed: share the original
            return obj
        return copy

    def _class(self, cls: type, depth: int) -> type:
        """A copy of ``cls`` (same name, bases re-bound) whose attributes are re-bound, so
        that its methods, ``super()`` included, run on the patched globals; ``cls`` itself
        when that could run the student's code (``__init_subclass__``, ``__set_name__``)
        or cannot be done (``__slots__``)."""
        namespace = type.__dict__["__dict__"].__get__(cls)
        if any("__init_subclass__" in type.__dict__["__dict__"].__get__(k)
               or "__slots__" in type.__dict__["__dict__"].__get__(k)
               for k in cls.__mro__[:-1]) or any(
                _class_attribute(type(v), "__set_name__") is not None
                and self._is_student_class(type(v)) for v in namespace.values()):
            return self._remember(cls, cls)
        self._remember(cls, cls)  # while its bases are copied
        try:
            bases = tuple(self.value(b, depth + 1) for b in cls.__bases__)
            copy_cls = type(cls.__name__, bases, {"__module__": cls.__module__,
                                                  "__qualname__": cls.__qualname__,
                                                  "__doc__": cls.__doc__})
            self._remember(cls, copy_cls)
            for key, attribute in namespace.items():
                if key not in ("__dict__", "__weakref__", "__module__", "__qualname__",
                               "__doc__"):
                    setattr(copy_cls, key, self.value(attribute, depth + 1))
        except Exception:  # shared as it is: its methods reach the student's own names
            return self._remember(cls, cls)
        return copy_cls

    def _instance(self, obj: Any, depth: int) -> Any:
        cls = self.value(type(obj), depth + 1)
        try:
            state = object.__getattribute__(obj, "__dict__")
            copy = object.__new__(cls)
        except Exception:  # slots, a builtin base: shared as it is
            return obj
        self._remember(obj, copy)
        object.__getattribute__(copy, "__dict__").update(
            {k: self.value(v, depth + 1) for k, v in state.items()})
        return copy


def _unwrap_descriptor(obj: Any) -> Any:
    if isinstance(obj, (staticmethod, classmethod)):
        return obj.__func__
    if isinstance(obj, property):
        return obj.fget
    return obj
