"""Re-binding the names a function reaches: the one mechanism behind fault isolation.

``rebound(fn, replacements, keep)`` returns a copy of ``fn`` whose global names listed in
``replacements`` resolve to the replacement objects instead of the function's own module
globals; the other plain functions defined in the same module (the student's helpers) are
copied the same way, so a name reached through a helper is replaced too. In the grader
the replacements are the reference functions (``core.isolate``); in the sandbox worker
they are callbacks to the grader (``_worker.isolated``).

This module imports only the standard library, so that the sandbox worker can use it
without importing the graders.
"""

import copy
import types


def rebound(fn, replacements, keep=()):
    """``fn`` with the global names of ``replacements`` bound to their values.

    Args:
        fn: a function; anything else (a builtin, a callable object) is returned as is.
        replacements: dict name -> object. ``fn``'s own name and the names in ``keep``
            are never replaced.
        keep: names to leave bound as they are.

    Returns:
        A new function (the original and its module are left untouched).
    """
    if not isinstance(fn, types.FunctionType):
        return fn
    home = fn.__globals__
    patched = dict(home)
    patched.update({name: value for name, value in replacements.items()
                    if name not in keep and name != fn.__name__})

    def copy_of(f):
        g = types.FunctionType(f.__code__, patched, f.__name__, f.__defaults__, f.__closure__)
        g.__kwdefaults__ = copy.copy(f.__kwdefaults__)
        g.__dict__.update(f.__dict__)
        return g

    for key, value in list(home.items()):
        if (isinstance(value, types.FunctionType) and value.__globals__ is home
                and key not in replacements and not key.startswith("__")):
            patched[key] = copy_of(value)
    isolated = copy_of(fn)
    patched[fn.__name__] = isolated
    return isolated
