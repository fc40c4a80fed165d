"""Evidence read from a submission's source, by the grader, without running it.

The jail makes reaching for the kit useless (the reference, the graders and the gradebook
are not there, the network is down); the checks make gamed values worthless. What is left
to tell the instructor is *that* a submission tried, so that its grade waits for review:
code that names the kit's files or modules, imports what an attention notebook has no use
for (sockets, processes, C calls), rewrites the interpreter's import machinery or
builtins, reads the environment, or signals other processes. Only code is read, never
comments or docstrings, and a flag changes no points: an instructor decides.
"""

from __future__ import annotations

import ast
import os
import re

from .i18n import N_, _
from .submission import SubmissionError, cell_name, code_of_notebook, read_cells

# Modules a submission has no use for: the kit's own, and ways out of the process.
# (Modules with honest uses in a notebook, such as gc, signal for a time limit, shutil or
# multiprocessing, are not evidence by themselves.)
FORBIDDEN_MODULES = ("solutions", "grader_tests", "nbgrader", "ctypes", "socket", "subprocess",
                     "pty", "wire", "rebind", "_worker")
# Attribute chains that reach the grading machinery or other processes.
FORBIDDEN_ATTRIBUTES = {
    ("sys", "modules"): N_("rewrites sys.modules"),
    ("sys", "path"): N_("searches the import path (sys.path)"),
    ("sys", "argv"): N_("reads the grading process's command line (sys.argv)"),
    ("os", "write"): N_("writes to a raw file descriptor"),
    ("os", "read"): N_("reads from a raw file descriptor"),
    ("os", "fdopen"): N_("opens a raw file descriptor"),
    ("os", "dup2"): N_("rewires a file descriptor"),
    ("sys", "meta_path"): N_("changes the import machinery (sys.meta_path)"),
    ("sys", "path_hooks"): N_("changes the import machinery (sys.path_hooks)"),
    ("sys", "settrace"): N_("installs a tracer"),
    ("sys", "setprofile"): N_("installs a profiler hook"),
    ("sys", "addaudithook"): N_("installs an audit hook"),
    ("os", "environ"): N_("reads environment variables"),
    ("os", "getenv"): N_("reads environment variables"),
    ("os", "kill"): N_("signals a process"),
    ("os", "killpg"): N_("signals a process group"),
    ("os", "fork"): N_("forks a process"),
    ("os", "system"): N_("runs a shell command"),
    ("os", "popen"): N_("runs a shell command"),
    ("os", "getppid"): N_("looks for its parent process"),
}
# File names of the kit and of credentials, in string constants.
# (A bare word such as "solutions" or "submitted" is no path: only a path that names one
# of the kit's folders is evidence.)
KIT_PATH = re.compile(r"(^|[/\\])(solutions|grader_tests|submitted|autograded)[/\\]"
                      r"|[/\\](solutions|grader_tests|submitted|autograded)($|\.)"
                      r"|gradebook\.db|nbgrader_config|\.pgpass|/etc/shadow|/proc/\d|\.git/")
# Methods through which code changes, rather than reads, ``os.environ`` or ``sys.path``
# (setting OMP_NUM_THREADS, putting one's own folder on the path: no evidence).
WRITES = ("append", "insert", "extend", "setdefault", "update", "pop", "remove", "clear")
# What code may do with ``sys.modules`` (or a name bound to it) and still only read it:
# these methods, reading an item, ``in``, comparing, iterating, and these builtins on it.
# Anything else (an assignment, ``del``, ``|=``, ``pop`` / ``update`` / ``__setitem__``...,
# handing it to any other function) counts as rewriting it.
MODULES_READS = ("get", "keys", "values", "items", "copy", "__contains__", "__getitem__",
                 "__len__", "__iter__")
MODULES_READERS = ("len", "list", "sorted", "set", "frozenset", "tuple", "dict", "iter",
                   "repr", "str", "print", "any", "all", "enumerate", "reversed", "id",
                   "type", "isinstance")


def _sources(path: str) -> list[tuple[str, str]]:
    """``(where, code)`` of the student's code in ``path`` (cells of a notebook, or the
    ``.py`` file); empty when the file cannot be read."""
    if path.endswith(".py"):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return [(_("the file"), f.read())]
        except OSError:
            return []
    try:
        cells = read_cells(path)
        return [(cell_name(cells, i), code) for i, code in code_of_notebook(path)]
    except SubmissionError:
        return []


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _chain(node: ast.AST) -> tuple[str, ...]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return tuple(reversed(parts))


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    """``id(node) -> parent node`` for every node of ``tree`` but its root."""
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _modules_aliases(tree: ast.AST) -> set[str]:
    """Names bound to ``sys.modules`` in ``tree``: ``m = sys.modules``, ``(m := ...)``,
    ``from sys import modules [as m]``, and names bound to such a name, transitively."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "sys":
            names.update(a.asname or a.name for a in node.names if a.name == "modules")
    while True:
        before = len(names)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and \
                    node.value is not None and _is_modules(node.value, names):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
        if len(names) == before:
            return names


def _is_modules(node: ast.AST, aliases: set[str]) -> bool:
    """Whether ``node`` is ``sys.modules`` or a name bound to it, read."""
    if isinstance(node, ast.Attribute):
        return _chain(node) == ("sys", "modules")
    return isinstance(node, ast.Name) and node.id in aliases and isinstance(node.ctx, ast.Load)


def _modules_written(node: ast.AST, parents: dict[int, ast.AST], aliases: set[str]) -> bool:
    """Whether the use ``node`` of ``sys.modules`` (or of an alias) may change it: every
    use but the reads ``MODULES_READS`` / ``MODULES_READERS`` name, an item read, ``in``, a
    comparison, an iteration or binding it to a name (whose own uses are judged alike)."""
    if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
        return True  # sys.modules = ..., del sys.modules, sys.modules |= ...
    parent = parents.get(id(node))
    if isinstance(parent, ast.Attribute):
        return parent.attr not in MODULES_READS
    if isinstance(parent, ast.Subscript) and parent.value is node:
        # an item read, unless written through: sys.modules["numpy"].allclose = ...
        while isinstance(parent, (ast.Subscript, ast.Attribute)):
            if not isinstance(parent.ctx, ast.Load):
                return True
            above = parents.get(id(parent))
            if not (isinstance(above, (ast.Subscript, ast.Attribute)) and above.value is parent):
                return False
            parent = above
        return False
    if isinstance(parent, ast.Compare):
        return False
    if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)) and parent.iter is node:
        return False
    if isinstance(parent, ast.Call) and node in parent.args and \
            isinstance(parent.func, ast.Name) and parent.func.id in MODULES_READERS:
        return False
    if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and parent.value is node:
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        return not all(isinstance(t, ast.Name) for t in targets)  # an alias: judged by its uses
    if isinstance(parent, ast.Expr):
        return False  # the bare expression, evaluated for nothing
    return True


def findings(code: str, course_root: str | None = None) -> list[str]:
    """What one piece of code reaches for, one phrase each, in order, without repeats.

    Args:
        code: Python source (IPython magics already commented out).
        course_root: absolute path of the course; a string naming it is evidence too.

    Returns:
        list of str such as ``"imports socket"`` (empty when the code does not parse), in
        the current language (``i18n.use_language``).
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    found = []
    skip = _docstrings(tree)
    written = set()  # os.environ / sys.path nodes that are only written to
    parents, aliases = _parents(tree), _modules_aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)):
            written.add(id(node.value))
        if isinstance(node, ast.Attribute) and node.attr in WRITES:
            written.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mods = [node.module or ""]
        else:
            mods = []
        for mod in mods:
            if mod.split(".")[0] in FORBIDDEN_MODULES:
                found.append(_("imports {module}").format(module=mod))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "__import__":
            found.append(_("calls __import__"))
        if isinstance(node, ast.Attribute):
            chain = _chain(node)
            for key, what in FORBIDDEN_ATTRIBUTES.items():
                if key == ("sys", "modules"):  # evidence when written to, not when read
                    continue
                if chain == key and not (key in (("os", "environ"), ("sys", "path"))
                                         and id(node) in written):
                    found.append(_(what))
            if chain and chain[0] in ("builtins", "__builtins__") and \
                    isinstance(node.ctx, (ast.Store, ast.Del)):
                found.append(_("replaces a builtin"))
            if chain and chain[0] in ("np", "numpy") and \
                    isinstance(node.ctx, (ast.Store, ast.Del)):
                found.append(_("replaces {name}").format(name=".".join(("numpy",) + chain[1:])))
        if _is_modules(node, aliases) and _modules_written(node, parents, aliases):
            found.append(_(FORBIDDEN_ATTRIBUTES[("sys", "modules")]))
        if isinstance(node, ast.Name) and node.id == "__builtins__":
            found.append(_("touches __builtins__"))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                id(node) not in skip:
            text = node.value
            if KIT_PATH.search(text) or (course_root and course_root in text):
                shown = text if len(text) <= 80 else text[:30] + "..." + text[-45:]
                found.append(_("names the file or folder {path!r}").format(path=shown))
    return list(dict.fromkeys(found))


def given_code(root: str) -> set[str]:
    """Sources of the code cells the kit itself hands out (``release/*/*.ipynb`` under
    ``root``): a cell left as given is the kit's code, not evidence against a student."""
    given: set[str] = set()
    release = os.path.join(root, "release")
    for folder in sorted(os.listdir(release)) if os.path.isdir(release) else ():
        for name in sorted(os.listdir(os.path.join(release, folder))):
            if name.endswith(".ipynb"):
                try:
                    given.update(code for _, code in
                                 code_of_notebook(os.path.join(release, folder, name), True))
                except SubmissionError:
                    continue
    return given


def kit_references(path: str) -> list[str]:
    """Evidence in the submission ``path`` that it reaches for the kit or the machine,
    one line per finding and place (``"imports socket (cell 12)"``). Cells exactly as the
    kit released them are not read.

    Returns:
        list of str (empty for a submission that only computes), in the current language
        (``i18n.use_language``): ``"importa socket (cella 12)"`` in Italian.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    given = given_code(root)
    lines = []
    for where, code in _sources(path):
        if code in given:
            continue
        for finding in findings(code, root):
            lines.append(_("{finding} ({where})").format(finding=finding, where=where))
    return lines
