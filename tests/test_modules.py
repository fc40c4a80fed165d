"""Modules the grading environment does not provide: one list in the course configuration
(``c.AttentionKit.allowed_modules``), said before submission (the notebook's intro and its
Validate check) and in the feedback, reported as its own fault id ``module-unavailable``
while the rest of the notebook is graded."""

import json
import shutil
import subprocess
import sys
import textwrap

import nbformat
import pytest

from grader_tests import config, jail
from grader_tests.core import grade_namespace
from grader_tests.submission import UnavailableModule, load
from tests.helpers import ROOT, correct_notebook, kit_env

SOURCE = ROOT / "source" / "attention" / "attention.ipynb"


def _with_cells(tmp_path, edits):
    nb = correct_notebook(ROOT)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in edits:
            cell.source = edits[grade_id](cell.source)
    path = tmp_path / "attention.ipynb"
    nbformat.write(nb, str(path))
    return str(path)


SCIPY_SOFTMAX = textwrap.dedent('''
    import scipy.special as sps
    from scipy.special import log_softmax


    def softmax(scores, axis=-1):
        return sps.softmax(scores, axis=axis)
''')
TORCH_FALLBACK = "try:\n    import torch\nexcept ImportError:\n    torch = None\n"


@pytest.fixture
def scipy_student(tmp_path):
    return _with_cells(tmp_path, {
        "softmax_solution": lambda src: src + "\n" + SCIPY_SOFTMAX,
        "causal_mask_solution": lambda src: TORCH_FALLBACK + src,
    })


def test_a_top_level_import_is_said_once_and_the_rest_of_the_cell_runs(scipy_student):
    loaded = load(scipy_student)
    said = [e for e in loaded.cell_errors if "module-unavailable" in e]
    assert len(said) == 1 and "softmax_solution" in said[0] and "scipy.special" in said[0]
    assert isinstance(loaded.namespace["sps"], UnavailableModule)
    assert callable(loaded.namespace["softmax"])          # defined after the import
    assert loaded.namespace["torch"] is None              # the student's own fallback ran


def test_only_the_function_that_uses_it_loses_points(scipy_student):
    results = grade_namespace(load(scipy_student).namespace,
                              names=["softmax", "causal_mask", "scaled_dot_product_attention"])
    by_name = results
    assert by_name["softmax"].score == 0
    assert {c.fault for c in by_name["softmax"].checks} == {"module-unavailable"}
    assert "scipy" in by_name["softmax"].checks[0].message
    assert by_name["causal_mask"].score == by_name["causal_mask"].max_score
    assert by_name["scaled_dot_product_attention"].score == \
        by_name["scaled_dot_product_attention"].max_score   # graded with the reference softmax


@pytest.mark.skipif(jail.problem() is not None, reason="no jail here")
def test_the_jailed_grader_says_the_same(scipy_student):
    from grader_tests.sandbox import grade_isolated

    results, cell_errors, flags = grade_isolated(scipy_student,
                                                 names=["softmax", "causal_mask"])
    by_name = results
    assert {c.fault for c in by_name["softmax"].checks} == {"module-unavailable"}
    assert by_name["causal_mask"].score == by_name["causal_mask"].max_score
    assert any("module-unavailable" in e for e in cell_errors) and flags == []


def test_an_import_in_a_function_body_fails_there_as_module_unavailable(tmp_path):
    path = _with_cells(tmp_path, {"layer_norm_forward_solution": lambda src: src.replace(
        '    """Layer', '    import dask.array  # installed here, not on the list\n    """Layer', 1)})
    loaded = load(path)
    result = grade_namespace(loaded.namespace, names=["layer_norm_forward",
                                                     "layer_norm_backward"])
    assert all(c.fault == "module-unavailable" for r in result.values() for c in r.checks), \
        [(r.name, [c.fault for c in r.checks]) for r in result.values()]


def test_the_list_is_the_course_configuration(tmp_path):
    assert config.allowed_modules(str(tmp_path)) == config.DEFAULT_ALLOWED_MODULES
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.AttentionKit.allowed_modules = ['numpy', 'scipy.special']\n")
    assert config.allowed_modules(str(tmp_path)) == ("numpy", "scipy")
    loaded = load(_with_cells(tmp_path, {}), allowed_modules=("numpy", "scipy"))
    assert not [e for e in loaded.cell_errors if "module-unavailable" in e]


def test_validate_names_a_function_that_uses_a_module_not_provided():
    with open(SOURCE, encoding="utf-8") as f:
        nb = json.load(f)
    setup = next(c for c in nb["cells"] if c["metadata"]["nbgrader"]["grade_id"] == "setup")
    namespace = {}
    exec("".join(setup["source"]), namespace)
    assert namespace["GRADING_MODULES"] == config.allowed_modules(str(ROOT))
    exec("import nbformat as nbf\n"
         "def uses_global(x):\n    return nbf.v4\n"
         "def imports_inside(x):\n    import dask\n    return x\n"
         "def plain(x):\n    return np.exp(x) + math.pi\n", namespace)
    namespace["VISIBLE_CHECKS"].update(uses_global=None, imports_inside=None, plain=None)
    said = namespace["before_grading"]("uses_global", 1)
    assert said and "uses nbformat" in said
    said = namespace["before_grading"]("imports_inside", 1)
    assert said and "uses dask" in said
    assert namespace["before_grading"]("plain", 1.0) is None
    said = namespace["before_grading"]("deleted_function", 1.0)
    assert said and "deleted_function is not defined" in said


# A module installed in the grading environment but not on the default list: a course
# that wants it adds it to c.AttentionKit.allowed_modules.
RICH_SOFTMAX = textwrap.dedent('''
    import rich.text as rich_text

    _softmax_without_rich = softmax


    def softmax(scores, axis=-1):
        rich_text.Text("softmax")  # uses the module; the values are the function's above
        return _softmax_without_rich(scores, axis=axis)
''')
WIDER = "\nc.AttentionKit.allowed_modules = ['numpy', 'matplotlib', 'rich']\n"


def _softmax_faults(record):
    functions = record["report"]["functions"]
    return functions["softmax"]["score"], {c["fault"] for c in functions["softmax"]["checks"]}


@pytest.mark.slow
@pytest.mark.skipif(jail.problem() is not None, reason="no jail here")
def test_the_batch_grades_with_the_courses_list_wherever_it_runs(course, tmp_path):
    """The batch reads the list from the course it grades, once, and hands it to every
    grading process: a pool process started from another folder (and a Dask worker, which
    has no course at all) grades with the course's list, not the default one."""
    wide = tmp_path / "wide"
    shutil.copytree(course, wide)
    (wide / "nbgrader_config.py").write_text(
        (wide / "nbgrader_config.py").read_text(encoding="utf-8") + WIDER, encoding="utf-8")
    student = wide / "submitted" / "s_rich" / "attention"
    student.mkdir(parents=True)
    shutil.copy(_with_cells(tmp_path, {"softmax_solution": lambda src: src + RICH_SOFTMAX}),
                student / "attention.ipynb")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(  # from a folder with no course: the default list would apply
        [sys.executable, "-m", "grader_tests", "batch", str(wide / "submitted"), "--workers", "1"],
        cwd=elsewhere, env=kit_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads((wide / "batch_log.jsonl").read_text().splitlines()[-1])
    assert record["student"] == "s_rich" and record["flags"] == []
    score, faults = _softmax_faults(record)
    assert score == record["report"]["functions"]["softmax"]["max_score"], faults


@pytest.mark.slow  # two jailed gradings of a whole notebook
@pytest.mark.skipif(jail.problem() is not None, reason="no jail here")
def test_a_dask_task_grades_with_the_list_the_coordinator_sends(tmp_path, monkeypatch):
    """A Dask task's grading process reads no course configuration: the list is the one
    the coordinator read from its course (sent with the task), whatever folder the
    worker runs in; none sent means the default list."""
    pytest.importorskip("distributed")
    from grader_tests.dask_batch import grade_bytes

    path = _with_cells(tmp_path, {"softmax_solution": lambda src: src + RICH_SOFTMAX})
    data = open(path, "rb").read()
    worker_folder = tmp_path / "worker"
    worker_folder.mkdir()
    (worker_folder / "nbgrader_config.py").write_text("c = get_config()" + WIDER)
    monkeypatch.chdir(worker_folder)  # a worker's folder that happens to hold a course
    sent = grade_bytes("s_rich", "attention.ipynb", data, time_limit=300,
                       allowed_modules=("numpy", "matplotlib", "rich"))
    score, faults = _softmax_faults(sent)
    assert score == sent["report"]["functions"]["softmax"]["max_score"], faults
    unsent = grade_bytes("s_rich", "attention.ipynb", data, time_limit=300)
    score, faults = _softmax_faults(unsent)
    assert score == 0 and faults == {"module-unavailable"}
