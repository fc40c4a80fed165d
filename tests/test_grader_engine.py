"""The grading engine itself: points, the gradient-check formula, the submission loader,
the command line, time limits, fault isolation and the tampering flags."""

import json
import os
import re
import subprocess
import sys
import textwrap

import nbformat
import numpy as np
import pytest

from grader_tests import gradcheck
from grader_tests.core import CHECKS, POINTS, grade_function, grade_namespace, isolate
from grader_tests.faults import FAULTS
from grader_tests.submission import SubmissionError, load
from solutions import attention as ref
from tests.helpers import ATTENTION_SOURCE, ROOT, submission_namespace

SPEC_NAMES = list(ref.SPEC_FUNCTIONS)
EXERCISE_ANSWERS = textwrap.dedent("""
    import math
    weight_ratio_unscaled = math.exp(2 * math.sqrt(64))
    weight_ratio_scaled = math.exp(2)
    budget_block_params = 24 * (12 * 512**2 + 13 * 512)
    budget_weight_bytes_fp16 = 2 * budget_block_params
    budget_kv_cache_bytes = 2 * 24 * 8 * 64 * 8192 * 4 * 2
    budget_kv_to_weights = budget_kv_cache_bytes / budget_weight_bytes_fp16
    budget_kv_cache_bytes_mqa = budget_kv_cache_bytes // 8
""")


def test_points_sum_to_100_and_every_name_has_checks():
    from grader_tests import checks  # noqa: F401

    assert sum(POINTS.values()) == 100
    assert set(POINTS) == set(SPEC_NAMES) | {"exercise_weight_ratio", "exercise_decoder_budget"}
    for name in POINTS:
        assert len(CHECKS[name]) >= 2, name


def test_reference_gets_full_marks_everywhere():
    results = grade_namespace(submission_namespace(EXERCISE_ANSWERS))
    failed = {n: [(c.name, c.fault, c.message) for c in r.checks if not c.passed]
              for n, r in results.items() if r.score != r.max_score}
    assert failed == {}
    assert sum(r.score for r in results.values()) == pytest.approx(100.0)


def test_rel_error_follows_the_documented_formula():
    a = np.array([1.0, 2.0, 1e-7])
    n = np.array([1.1, 2.0, 3e-7])
    rel, abs_err, index = gradcheck.rel_error(a, n)
    assert rel == pytest.approx(0.1 / 1.1)
    assert abs_err == pytest.approx(2e-7)
    assert index == (0,)
    assert not gradcheck.gradient_ok(a, n)
    assert gradcheck.gradient_ok(n, n)
    assert gradcheck.rel_error(np.array([np.nan]), np.array([1.0]))[0] == float("inf")


def test_central_differences_of_a_cubic():
    x = np.array([0.5, -1.0, 2.0])
    grad = gradcheck.numerical_gradient(lambda v: float((v ** 3).sum()), x)
    np.testing.assert_allclose(grad, 3 * x ** 2, rtol=1e-8)


def test_isolation_binds_callees_to_the_reference():
    ns = submission_namespace("""
        def softmax(scores, axis=-1):
            raise RuntimeError("broken softmax")
        def _helper(S):
            return softmax(S)
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            S = Q @ np.swapaxes(K, -1, -2) / (math.sqrt(Q.shape[-1]) if scale else 1.0)
            if mask is not None:
                S = np.where(mask, S, -np.inf)
            P = _helper(S)
            return P @ V, P
    """)
    sdpa = isolate(ns["scaled_dot_product_attention"], ns, "scaled_dot_product_attention")
    Q = np.ones((2, 3))
    out, P = sdpa(Q, Q, Q)
    np.testing.assert_allclose(P.sum(-1), 1.0)
    assert ns["softmax"] is not ref.softmax  # the student's namespace is left untouched
    r = grade_function("scaled_dot_product_attention", ns)
    assert r.score == r.max_score
    assert grade_function("softmax", ns).faults == ["crash"]


def test_missing_and_stub_functions_are_not_implemented():
    ns = submission_namespace("""
        del causal_mask
        def softmax(scores, axis=-1):
            raise NotImplementedError()
    """)
    for name in ("causal_mask", "softmax"):
        r = grade_function(name, ns)
        assert r.score == 0 and r.faults == ["not-implemented"], name
        assert all("NotImplementedError" in c.message or "not defined" in c.message
                   for c in r.checks)


def test_a_function_that_never_returns_is_stopped_and_only_it_loses_points():
    ns = submission_namespace("""
        def padding_mask(lengths, T):
            while True:
                pass
    """)
    r = grade_function("padding_mask", ns, time_limit_s=0.5)
    assert r.score == 0 and r.faults == ["timeout"]
    assert r.seconds < 3
    assert grade_function("combine_masks", ns).score == POINTS["combine_masks"]


def test_student_output_never_reaches_stderr(capfd):
    ns = submission_namespace("""
        import sys, warnings
        _softmax = softmax
        def softmax(scores, axis=-1):
            print("debug", file=sys.stderr)
            warnings.warn("student warning")
            np.log(np.zeros(1))
            return _softmax(scores, axis)
    """)
    r = grade_function("softmax", ns)
    assert r.score == r.max_score
    out, err = capfd.readouterr()
    assert err == "" and "debug" not in out


TAMPERING = {
    "imports the reference": ("softmax", """
        from solutions.attention import softmax
    """),
    "calls the reference through a module": ("causal_mask", """
        import solutions.attention as _S
        def causal_mask(T):
            return _S.causal_mask(T)
    """),
    "returns an object equal to everything": ("kv_cache_bytes", """
        class _Anything(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def kv_cache_bytes(*args):
            return _Anything(0)
    """),
    "returns an ndarray subclass that lies": ("split_heads", """
        class _Liar(np.ndarray):
            def __eq__(self, other):
                return np.ones(np.shape(other), dtype=bool)
        def split_heads(M, n_heads):
            return np.zeros((1,)).view(_Liar)
    """),
}


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_tampering_scores_zero_and_is_flagged(case):
    name, source = TAMPERING[case]
    r = grade_function(name, submission_namespace(source))
    assert r.score == 0, case
    assert "tampering" in r.faults, (case, [(c.fault, c.message) for c in r.checks])


def _run_isolated(code):
    """Run ``code`` in a fresh interpreter (patches to numpy/builtins must not leak)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("patch", [
    "import numpy; numpy.allclose = lambda *a, **k: True",
    "import numpy.testing; numpy.testing.assert_allclose = lambda *a, **k: None",
    "import builtins; _i = builtins.__import__; builtins.__import__ = lambda *a, **k: _i(*a, **k)",
    "import sys, types; sys.modules['grader_tests.checks.fake'] = types.ModuleType('fake')",
    "import builtins; builtins.AssertionError = type('AssertionError', (Exception,), {})",
])
def test_altered_environment_is_flagged(patch):
    proc = _run_isolated(f"""
        import json
        from grader_tests.core import grade_function
        from solutions import attention
        ns = dict(vars(attention))
        {patch}
        r = grade_function("softmax", ns)
        print(json.dumps([r.score, r.faults, r.checks[0].message]))
    """)
    assert proc.returncode == 0, proc.stderr
    score, faults, message = json.loads(proc.stdout.strip().splitlines()[-1])
    assert score == 0 and faults == ["tampering"], message


def _notebook(path, cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nbformat.write(nb, str(path))
    return str(path)


def test_loader_runs_solution_setup_and_student_cells_only(tmp_path):
    from nbformat.v4 import new_code_cell, new_markdown_cell

    def cell(source, **nbgrader):
        c = new_code_cell(source)
        if nbgrader:
            c.metadata["nbgrader"] = dict(nbgrader, schema_version=3)
        return c

    setup = new_code_cell("import numpy as np\n%matplotlib inline")
    setup.metadata["tags"] = ["setup"]
    lesson = cell("raise SystemExit('lesson cells must not run')", locked=True,
                  grade=False, solution=False, grade_id="lesson")
    path = _notebook(tmp_path / "nb.ipynb", [
        new_markdown_cell("# title"), setup,
        cell("def causal_mask(T):\n    return np.tril(np.ones((T, T), dtype=bool))",
             solution=True, grade=False, locked=False, grade_id="causal_mask_solution"),
        lesson,
        cell("assert False, 'hidden test must not run'", grade=True, solution=False,
             locked=True, points=3, grade_id="causal_mask_hidden_checks"),
        new_code_cell("helper = 41 + 1\n1 / 0"),
    ])
    loaded = load(path)
    assert loaded.namespace["helper"] == 42
    assert loaded.namespace["causal_mask"](2).tolist() == [[True, False], [True, True]]
    assert len(loaded.cell_errors) == 1 and "ZeroDivisionError" in loaded.cell_errors[0]


def test_loader_refuses_what_is_not_a_notebook(tmp_path):
    bad = tmp_path / "attention.ipynb"
    bad.write_text("{ not json")
    with pytest.raises(SubmissionError, match="not a readable notebook"):
        load(str(bad))
    with pytest.raises(SubmissionError, match="no such file"):
        load(str(tmp_path / "missing.ipynb"))


@pytest.mark.slow  # grades a whole submission in a jail through the command line
def test_cli_json_report(tmp_path):
    sub = tmp_path / "submission.py"
    sub.write_text(ATTENTION_SOURCE + EXERCISE_ANSWERS + textwrap.dedent("""
        def merge_heads(M):
            B, h, T, d_h = M.shape
            return M.reshape(B, T, h * d_h)
    """))
    proc = subprocess.run([sys.executable, "-m", "grader_tests", "grade", str(sub), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) >= {"score", "max_score", "functions"}
    assert report["max_score"] == 100.0
    merge = report["functions"]["merge_heads"]
    assert merge["score"] < merge["max_score"]
    assert {c["fault"] for c in merge["checks"] if not c["passed"]} == {"head-order"}
    for name, f in report["functions"].items():
        assert set(f) == {"score", "max_score", "checks"}
        for c in f["checks"]:
            assert set(c) == {"name", "passed", "fault", "message"}
            assert (c["fault"] is None) == c["passed"]
            assert c["fault"] is None or c["fault"] in FAULTS
        if name != "merge_heads":
            assert f["score"] == f["max_score"], name
    assert report["score"] == pytest.approx(100 - merge["max_score"] + merge["score"])


@pytest.mark.slow  # the grading command in subprocesses, about 5 s
def test_cli_exit_status_2_on_unreadable_submission(tmp_path):
    bad = tmp_path / "attention.ipynb"
    bad.write_text("[]")
    proc = subprocess.run([sys.executable, "-m", "grader_tests", "grade", str(bad), "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2
    assert "not a notebook" in json.loads(proc.stdout)["error"]


def test_cli_explains_a_folder_given_as_path(tmp_path, capsys):
    from grader_tests.__main__ import main

    assert main(["grade", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is a folder" in err and "batch" in err


def test_loading_names_stub_cells_by_grade_id_and_part():
    """An untouched stub is reported as a stub, the cell named by its nbgrader id and the
    graded part it belongs to (what the feedback page shows; it numbers no cell), not as a
    bare NotImplementedError."""
    from grader_tests.submission import load

    loaded = load(os.path.join(ROOT, "release", "attention", "attention.ipynb"))
    stubs = [e for e in loaded.cell_errors if "still the stub" in e]
    assert stubs and len(stubs) == len(loaded.cell_errors), loaded.cell_errors
    assert "cell exercise_weight_ratio_answer (the part exercise_weight_ratio): still the " \
           "stub (it raises NotImplementedError)" in stubs, stubs
    assert "cell exercise_decoder_budget_answer (the part exercise_decoder_budget): still " \
           "the stub (it raises NotImplementedError)" in stubs, stubs
    assert not any(re.match(r"cell \d", e) for e in stubs), stubs


@pytest.mark.slow  # the batch command in subprocesses, about 5 s
def test_batch_refuses_to_start_without_submissions_or_assignment(tmp_path, capsys):
    """A folder that does not exist, or an assignment the gradebook does not know, stops
    the batch before anything is graded, with a message saying what to do (exit 2)."""
    from grader_tests.batch import main as batch_main

    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    assert batch_main([str(tmp_path / "no_such_folder"), "--db-url", db]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "submitted" / "s1" / "training").mkdir(parents=True)
    assert batch_main([str(tmp_path / "submitted"), "--db-url", db, "--assignment",
                       "training"]) == 2
    err = capsys.readouterr().err
    assert "nbgrader generate_assignment training --force" in err
    assert not (tmp_path / "batch_log_training.jsonl").exists()


def test_a_cell_is_named_as_the_feedback_page_shows_it():
    """``submission.cell_name``: by id and graded part, or, for a cell the student added,
    by its first line (printable, cut) and the nearest cell with an id before it; never by
    a number (the feedback page shows ``In [ ]:`` for every cell)."""
    import nbformat

    from grader_tests import i18n
    from grader_tests.submission import LINE_CHARS, cell_name

    def graded(grade_id, source=""):
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "grade": False}
        return cell

    cells = [nbformat.v4.new_code_cell("\n  \n"),
             nbformat.v4.new_code_cell("\n  x = 1\n"),
             graded("setup"),
             graded("merge_heads_hidden_checks"),
             nbformat.v4.new_code_cell(["while True:\x1b[2J", "\n    pass"]),
             nbformat.v4.new_code_cell(""),
             nbformat.v4.new_code_cell("y = '" + "z" * 100 + "'")]
    names = [cell_name(cells, i) for i in range(len(cells))]
    assert names[:4] == ["an empty cell before every cell with an id",
                         "the cell that starts with `x = 1`", "cell setup",
                         "cell merge_heads_hidden_checks (the part merge_heads)"]
    after = "the cell after cell merge_heads_hidden_checks (the part merge_heads)"
    assert names[4] == f"{after} that starts with `while True:?[2J`"
    assert names[5] == "an empty cell after cell merge_heads_hidden_checks (the part " \
                       "merge_heads)"
    line = "y = '" + "z" * (LINE_CHARS - 8) + "..."
    assert names[6] == f"{after} that starts with `{line}`" and len(line) == LINE_CHARS
    with i18n.use_language("it"):
        assert cell_name(cells, 3) == "la cella merge_heads_hidden_checks (parte merge_heads)"
        assert cell_name(cells, 4) == ("la cella dopo la cella merge_heads_hidden_checks "
                                       "(parte merge_heads) che inizia con `while True:?[2J`")


@pytest.mark.parametrize("language, expected", [
    ("en", "[not run: cell merge_heads_solution (the part merge_heads) ran out of time, so "
           "the cells after it were not run while grading]\n"),
    ("it", "[non eseguita: la cella merge_heads_solution (parte merge_heads) ha esaurito il "
           "tempo, quindi le celle successive non sono state eseguite durante la "
           "valutazione]\n"),
])
def test_the_cells_after_one_that_ran_out_of_time_name_it_by_its_id(language, expected):
    """nbgrader's execution in the kit (``JailedExecute``): once a cell ran out of time,
    each later cell says which one, by the id and part a reader finds on the page."""
    import nbformat

    from grader_tests.autograde import JailedExecute

    cells = [nbformat.v4.new_code_cell("x = 1") for _ in range(3)]
    cells[1].metadata["nbgrader"] = {"grade_id": "merge_heads_solution", "solution": True}
    execute = JailedExecute()
    execute._language, execute._cells, execute._stopped_at = language, cells, None
    execute._stop(1)
    cell, _ = execute.preprocess_cell(cells[2], {}, 2)
    assert cell.outputs == [nbformat.v4.new_output("stream", name="stdout", text=expected)]
