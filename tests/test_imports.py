"""The package ``grader_tests`` has no import circle: each module imports alone, in a fresh
interpreter, and the graph of the imports its modules write (at module level or inside a
function) has no cycle."""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import ROOT

PACKAGE = ROOT / "grader_tests"


def module_name(path: Path) -> str:
    """``grader_tests.checks.softmax`` for ``grader_tests/checks/softmax.py`` (a package's
    ``__init__.py`` is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def imports_of(name: str) -> set[str]:
    """The modules of ``grader_tests`` that module ``name`` imports, anywhere in its code."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    base = name.split(".") if is_package(name) else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                source = ".".join(anchor + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # ``from . import checks`` imports the module grader_tests.checks
            targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES
                       else source for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:  # grader_tests.core.POINTS -> .core
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_import_graph_of_grader_tests_has_no_cycle():
    graph = {name: imports_of(name) for name in MODULES}
    assert len(graph) > 30
    # the graph is read right: edges that are known to exist are found
    assert "grader_tests.registry" in graph["grader_tests.checks.softmax"]
    assert "grader_tests.guard" in graph["grader_tests.checks.softmax"]
    assert "grader_tests.job" in graph["grader_tests.dask_batch"]
    assert "grader_tests.checks_training.adam" in graph["grader_tests.checks_training"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


# Libraries outside the kit that its modules import at module level: loaded once in the
# parent of the forks below (they cannot take part in a circle of grader_tests).
THIRD_PARTY = ("numpy", "hypothesis", "nbformat", "traitlets", "jupyter_client", "nbclient",
               "nbconvert", "nbgrader.preprocessors", "bleach", "jinja2")

# One interpreter loads the libraries above, then forks once per module of the kit; each
# child imports its module with no module of the kit loaded yet, and says what happened.
IMPORT_EACH_ALONE = r"""
import importlib, json, os, sys, traceback
for lib in sys.argv[2].split(","):
    importlib.import_module(lib)
assert not [m for m in sys.modules if m.split(".")[0] in ("grader_tests", "solutions")]
results = {}
for name in sys.argv[1].split(","):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
            message = ""
        except BaseException:
            message = traceback.format_exc() or "failed"
        os.write(write, message.encode()[-3000:])
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    results[name] = message or ("" if status == 0 else f"exit status {status}")
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def alone():
    """For each module of the kit, the error its import alone raised ("" when none)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", IMPORT_EACH_ALONE, ",".join(sorted(MODULES)),
                           ",".join(THIRD_PARTY)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.xdist_group("imports-alone")
@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_module_imports_alone(alone, name):
    assert alone[name] == "", f"import {name} failed:\n{alone[name]}"


def test_the_fork_check_sees_a_circle(tmp_path):
    """The check above reports a module whose import fails, in a child of its own."""
    pkg = tmp_path / "circle"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from circle.b import B\nA = 1\n")
    (pkg / "b.py").write_text("from circle.a import A\nB = 1\n")
    done = subprocess.run([sys.executable, "-c", IMPORT_EACH_ALONE, "circle.a,json",
                           "numpy"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert "ImportError" in results["circle.a"] and results["json"] == ""


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODULES))
def test_each_module_imports_alone_in_a_fresh_interpreter(name):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"import {name} failed:\n{done.stderr[-3000:]}"


def test_the_worker_imports_the_kit_once_as_a_package():
    """Run as the jail runs it (a script, isolated mode), the worker imports wire, rebind
    and submission as modules of the package grader_tests, never as top-level modules, and
    nothing of the graders or the reference."""
    code = ("import runpy, sys; runpy.run_path(sys.argv[1], run_name='worker'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('grader_tests', 'wire', 'rebind', 'submission', 'solutions', 'integrity')))")
    done = subprocess.run([sys.executable, "-I", "-c", code, str(PACKAGE / "_worker.py")],
                          cwd="/", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = ast.literal_eval(done.stdout.strip())
    assert loaded == ["grader_tests", "grader_tests.assignments", "grader_tests.rebind",
                      "grader_tests.submission", "grader_tests.wire"]


def imported_modules(path: Path) -> set[str]:
    """Every module name that the file at ``path`` imports, anywhere in its code (``from X
    import Y`` gives ``X`` and ``X.Y``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


# Calls that load code from a file or a folder rather than run it as a command: a string of
# their arguments naming tools/ is a test loading a tool as a library.
PATH_LOADERS = {"spec_from_file_location", "SourceFileLoader", "run_path", "import_module",
                "__import__", "load_source"}


def _names_tools(node: ast.AST) -> bool:
    """Whether a string constant inside ``node`` names the folder ``tools`` (``"tools"``,
    ``"tools/x.py"``, ``"tools.x"``, ``"../tools"``, an f-string's ``"/tools/x.py"``)."""
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str)
               and re.search(r"(^|[/\\])tools($|[/\\.])", n.value)
               for n in ast.walk(node))


def tools_loads(path: Path) -> list[str]:
    """How the file at ``path`` loads code of ``tools/`` as a library, one entry a way:
    ``import tools...`` / ``from tools... import``, and, with the line, a call of a
    ``PATH_LOADERS`` function or a change of ``sys.path`` whose arguments name ``tools``."""
    found = [f"import {m}" for m in sorted(imported_modules(path)) if m.split(".")[0] == "tools"]
    calls = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        on_sys_path = (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                       and func.value.attr == "path"
                       and isinstance(func.value.value, ast.Name) and func.value.value.id == "sys")
        if (name in PATH_LOADERS or on_sys_path) and any(
                _names_tools(a) for a in [*node.args, *(k.value for k in node.keywords)]):
            calls.append((node.lineno, f"line {node.lineno}: "
                          f"{'sys.path.' if on_sys_path else ''}{name}(...tools...)"))
    return found + [text for _, text in sorted(calls)]


def test_no_test_imports_from_tools():
    """The tests run the tools as commands and import only the packages (``grader_tests``,
    ``authoring``), the reference and their own helpers: what a test needs of a tool lives in
    a package or in ``tests/helpers.py``. Neither an import of ``tools`` nor loading one of
    its files by path (``importlib.util.spec_from_file_location``, ``runpy``, ``tools/`` put
    on ``sys.path``)."""
    offenders = {str(p.relative_to(ROOT)): tools_loads(p)
                 for p in sorted((ROOT / "tests").rglob("*.py"))}
    assert len(offenders) > 40
    assert {p: m for p, m in offenders.items() if m} == {}


def test_imported_modules_sees_both_import_forms(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import tools.demo\ndef f():\n    from tools import services\n")
    assert {"tools.demo", "tools", "tools.services"} <= imported_modules(probe)


def test_tools_loads_sees_a_tool_loaded_by_path(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import importlib.util, os, runpy, sys\n"
        "from tools.demo import log\n"
        "def f(ROOT):\n"
        "    spec = importlib.util.spec_from_file_location(\n"
        "        'unlock', ROOT / 'tools' / 'unlock_training.py')\n"
        "    sys.path.insert(0, os.path.join(ROOT, 'tools'))\n"
        "    runpy.run_path(f'{ROOT}/tools/demo.py')\n"
        "    importlib.import_module('tools.ci_grade')\n"
        "    subprocess.run([sys.executable, str(ROOT / 'tools' / 'unlock_training.py')])\n"
        "    sys.path.insert(0, str(ROOT / 'authoring'))\n")
    assert tools_loads(probe) == [
        "import tools.demo", "import tools.demo.log",
        "line 4: spec_from_file_location(...tools...)", "line 6: sys.path.insert(...tools...)",
        "line 7: run_path(...tools...)", "line 8: import_module(...tools...)"]
