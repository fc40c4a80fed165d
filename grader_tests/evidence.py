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
from .submission import (GATE_ID, MAGIC, SubmissionError, cell_name, code_of_notebook, keeps,
                         read_cells)

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


# Calls that name a module by a string (``importlib.import_module("socket")``).
_IMPORT_CALLS = (("importlib", "import_module"), ("__import__",))


def _constant_str(node: ast.AST) -> str | None:
    """The string ``node`` always evaluates to, when it is made of constants only: a
    constant, ``+`` of such strings, an f-string of them, ``"sep".join([...])``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _constant_str(node.left), _constant_str(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = [_constant_str(v.value if isinstance(v, ast.FormattedValue) else v)
                 for v in node.values]
        return None if any(p is None for p in parts) else "".join(parts)  # type: ignore[arg-type]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "join" and len(node.args) == 1 and not node.keywords and \
            isinstance(node.args[0], (ast.List, ast.Tuple)):
        sep = _constant_str(node.func.value)
        parts = [_constant_str(e) for e in node.args[0].elts]
        if sep is not None and all(p is not None for p in parts):
            return sep.join(parts)  # type: ignore[arg-type]
    return None


def _dotted(name: str, like: ast.AST) -> ast.AST:
    """``a.b.c`` as the expression that reads it (located like ``like``)."""
    parts = name.split(".")
    node: ast.expr = ast.Name(id=parts[0], ctx=ast.Load())
    for part in parts[1:]:
        node = ast.Attribute(value=node, attr=part, ctx=ast.Load())
    return ast.copy_location(node, like) if hasattr(like, "lineno") else node


class _Respelled(ast.NodeTransformer):
    """The plain spelling of a reach written dynamically: ``getattr(m, "x")`` and
    ``vars(m)["x"]`` / ``m.__dict__["x"]`` read ``m.x``; ``setattr(m, "x", v)`` and
    ``delattr(m, "x")`` write it; ``importlib.import_module("x")`` and ``__import__("x")``
    are the module ``x``; a name bound to a module or to an attribute of one (``import os as
    o``, ``o = os``, ``m = importlib.import_module("os")``) is what it is bound to; strings
    made of constants are constants."""

    def __init__(self, aliases: dict[str, str], imported: list[str]):
        self.aliases, self.imported = aliases, imported

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.aliases:
            return _dotted(self.aliases[node.id], node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = _chain(node.func)
        if func in _IMPORT_CALLS and node.args:
            module = _constant_str(node.args[0])
            if module and all(p.isidentifier() for p in module.split(".")):
                self.imported.append(module)
                return _dotted(module, node)
        if func in (("getattr",), ("setattr",), ("delattr",)) and len(node.args) >= 2:
            attr = _constant_str(node.args[1])
            if attr and attr.isidentifier():
                ctx = {"getattr": ast.Load(), "setattr": ast.Store(),
                       "delattr": ast.Del()}[func[0]]
                return ast.copy_location(ast.Attribute(value=node.args[0], attr=attr, ctx=ctx),
                                         node)
        text = _constant_str(node)
        if text is not None:
            return ast.copy_location(ast.Constant(value=text), node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        text = _constant_str(node)
        return ast.copy_location(ast.Constant(value=text), node) if text is not None else node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        text = _constant_str(node)
        return ast.copy_location(ast.Constant(value=text), node) if text is not None else node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        key = _constant_str(node.slice)
        value = node.value
        if key and key.isidentifier():
            if isinstance(value, ast.Call) and _chain(value.func) == ("vars",) and \
                    len(value.args) == 1:
                return ast.copy_location(ast.Attribute(value=value.args[0], attr=key,
                                                       ctx=node.ctx), node)
            if isinstance(value, ast.Attribute) and value.attr == "__dict__":
                return ast.copy_location(ast.Attribute(value=value.value, attr=key,
                                                       ctx=node.ctx), node)
        return node


# Modules whose names, bound to another name, stay evidence (``o = os``).
_ALIASED_MODULES = ("os", "sys", "builtins", "numpy", "importlib") + FORBIDDEN_MODULES


def _respelled(tree: ast.AST, imported: list[str]) -> ast.AST:
    """``tree`` with dynamic reaches in their plain spelling (``_Respelled``), names bound
    to modules resolved through assignments, to a fixed point; the modules imported by a
    call naming them by a string are appended to ``imported``."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name.split(".")[0] in _ALIASED_MODULES:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] in _ALIASED_MODULES:
            for a in node.names:
                if a.name != "*":
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    for _round in range(4):
        tree = ast.fix_missing_locations(_Respelled(dict(aliases), imported).visit(tree))
        before = dict(aliases)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.NamedExpr)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                chain = _chain(node.value) if isinstance(node.value, (ast.Name, ast.Attribute)) \
                    else ()
                if chain and chain[0] in _ALIASED_MODULES:
                    for t in targets:
                        if isinstance(t, ast.Name) and t.id not in chain:
                            aliases[t.id] = ".".join(chain)
        if aliases == before:
            break
    return tree


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
    skip = _docstrings(tree)  # before respelling: a docstring stays a docstring
    if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id ==
           "__import__" for n in ast.walk(tree)):
        found.append(_("calls __import__"))
    imported: list[str] = []
    tree = _respelled(tree, imported)  # type: ignore[assignment]
    for mod in imported:
        if mod.split(".")[0] in FORBIDDEN_MODULES:
            found.append(_("imports {module}").format(module=mod))
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


def _released(root: str) -> list[str]:
    """The notebooks the kit hands out (``release/*/*.ipynb`` under ``root``)."""
    release = os.path.join(root, "release")
    return [os.path.join(release, folder, name)
            for folder in (sorted(os.listdir(release)) if os.path.isdir(release) else ())
            if os.path.isdir(os.path.join(release, folder))
            for name in sorted(os.listdir(os.path.join(release, folder)))
            if name.endswith(".ipynb")]


def _as_loaded(source: str) -> str:
    """A cell's code as ``code_of_notebook`` gives it (IPython syntax commented out)."""
    return MAGIC.sub(r"\1pass  # \2", source)


def given_code(root: str) -> set[str]:
    """Sources of the code cells the kit itself hands out (``release/*/*.ipynb`` under
    ``root``), every one of them (lesson cells and visible tests too), as the loader reads
    them: a cell left as given is the kit's code, not evidence against a student, even
    in a notebook whose cells lost their metadata."""
    given: set[str] = set()
    for path in _released(root):
        try:
            given.update(code for _, code in code_of_notebook(path, True))
            given.update(_as_loaded(c["source"]) for c in read_cells(path)
                         if c["cell_type"] == "code")
        except SubmissionError:
            continue
    return given


def kit_cells(path: str, root: str | None = None) -> set[int]:
    """Cells of the notebook ``path`` that are the kit's own and that the loader does not
    run, but that lost the metadata saying so (a front end that strips it): code cells
    without nbgrader metadata or tags whose code is a released cell the loader leaves out
    (lesson cells, visible and hidden tests; not the training gate, whose definitions the
    graders need). Their indices go to ``submission.load``'s
    ``skip``, so that the kit's cells are not run as the student's, nor blamed for what
    they import.

    Args:
        path: str, a notebook (a ``.py`` file has no cells: empty).
        root: the kit's folder (default: this package's parent).

    Returns:
        set of int, indices in the notebook's cells; empty when it cannot be read.
    """
    if path.endswith(".py"):
        return set()
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    left_out: set[str] = set()
    for released in _released(root):
        try:
            left_out.update(_as_loaded(c["source"]) for c in read_cells(released)
                            if c["cell_type"] == "code" and not keeps(c, given=True)
                            and c["metadata"]["nbgrader"].get("grade_id") != GATE_ID)
        except SubmissionError:
            continue
    try:
        cells = read_cells(path)
    except SubmissionError:
        return set()
    return {i for i, c in enumerate(cells) if c["cell_type"] == "code" and
            not c["metadata"]["nbgrader"] and not c["metadata"]["tags"] and
            c["source"].strip() and _as_loaded(c["source"]) in left_out}


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
