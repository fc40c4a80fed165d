"""No false accusation: every honest submission of ``tests/catalogue/honest.py`` (caches of
any type, helper classes, partials, aliases, lambdas, callable objects, ufunc methods,
float32 kept float32) gets full marks, with no ``tampering`` fault and no flag, graded in
process (``core.grade_namespace``) and through the isolated grader
(``sandbox.grade_isolated``, in the jail)."""

import ast
import dataclasses
import functools
import types

import numpy as np
import pytest

from grader_tests.core import POINTS, grade_namespace
from grader_tests.sandbox import EXERCISE_VARIABLES, grade_isolated
from tests.catalogue.honest import BASE, HONEST, Honest, namespace, source


def problems(results):
    """Every check below full marks or carrying a tampering fault, and every review the
    grader asks for (``FunctionResult.review``), by graded name."""
    return {name: [(c.name, c.fault, c.message) for c in r.checks
                   if not c.passed or c.fault == "tampering"] + ([r.review] if r.review else [])
            for name, r in results.items()
            if r.score != r.max_score or any(c.fault == "tampering" for c in r.checks)
            or r.review}


def _params(isolated=False):
    params = []
    for entry in HONEST:
        marks = []
        if isolated and entry.isolated_gap:
            marks.append(pytest.mark.xfail(strict=True, reason=entry.isolated_gap))
        params.append(pytest.param(entry, id=entry.id, marks=marks))
    return params


# --- the catalogue itself --------------------------------------------------------------


def test_at_least_12_entries_with_unique_ids():
    ids = [e.id for e in HONEST]
    assert len(ids) >= 12 and len(set(ids)) == len(ids)


@pytest.mark.parametrize("entry", [Honest("base")] + HONEST, ids=lambda e: e.id)
def test_every_entry_is_a_complete_submission(entry):
    tree = ast.parse(source(entry))
    bound = {t.id for node in tree.body if isinstance(node, ast.Assign)
             for t in node.targets if isinstance(t, ast.Name)}
    bound |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    graded = [n for n in POINTS if not n.startswith("exercise_")]
    assert len(graded) == 15
    assert set(graded) | set(EXERCISE_VARIABLES) <= bound
    space = namespace(entry)
    assert all(callable(space[n]) for n in graded)
    assert "solutions" not in source(entry) and "grader_tests" not in source(entry)


def _forward_caches(space):
    x = np.random.default_rng(0).normal(size=(2, 3, 4))
    d = 4
    params = {f"{kind}_{k}": np.random.default_rng(1).normal(size=(d, d) if kind == "W" else d)
              for kind in "Wb" for k in "QKVO"}
    _, ln = space["layer_norm_forward"](x, np.ones(d), np.zeros(d))
    _, att = space["attention_forward"](x, params, 2)
    return ln, att


def _both(predicate):
    return lambda space: all(predicate(c) for c in _forward_caches(space))


def _entry(entry_id):
    return next(e for e in HONEST if e.id == entry_id)


def _float32_everywhere(space):
    """A float32 forward keeps its output and every cached array float32, the score
    scale included."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    params = {f"{kind}_{k}": rng.normal(size=(4, 4) if kind == "W" else 4).astype(np.float32)
              for kind in "Wb" for k in "QKVO"}
    y, cache = space["attention_forward"](x, params, 2)
    arrays = [v for v in cache.values() if isinstance(v, np.ndarray)]
    return y.dtype == np.float32 and all(a.dtype == np.float32 for a in arrays) and \
        np.asarray(cache["c"]).dtype == np.float32


# What makes each entry unusual, checked on the running submission, so that the catalogue
# cannot drift back to plain code.
STRUCTURE = {
    "dataclass-cache": _both(lambda c: dataclasses.is_dataclass(c)),
    "class-with-own-eq-cache": _both(lambda c: "__eq__" in vars(type(c))
                                     and not isinstance(c, (dict, list, tuple))),
    "dict-subclass-cache": _both(lambda c: isinstance(c, dict) and type(c) is not dict),
    "list-subclass-cache": _both(lambda c: isinstance(c, list) and type(c) is not list),
    "namedtuple-cache": _both(lambda c: isinstance(c, tuple) and hasattr(c, "_fields")),
    "simplenamespace-cache": _both(lambda c: type(c) is types.SimpleNamespace),
    "closure-cache": _both(lambda c: isinstance(c, types.FunctionType) and c.__closure__),
    "attrs-like-slots-cache": _both(lambda c: not hasattr(c, "__dict__")
                                    and "__eq__" in vars(type(c).__mro__[1])),
    "layer-objects": _both(lambda c: type(c).__eq__ is object.__eq__
                           and not isinstance(c, (dict, list, tuple))),
    "partial-bound-names": lambda s: all(isinstance(s[n], functools.partial) for n in (
        "softmax", "causal_mask", "split_heads", "merge_heads", "kv_cache_bytes")),
    "aliases": lambda s: all(s[n].__name__ != n and isinstance(s[n], types.FunctionType)
                             for n in ("softmax", "scaled_dot_product_attention",
                                       "merge_heads", "layer_norm_forward")),
    "lambdas": lambda s: all(s[n].__name__ == "<lambda>" for n in (
        "causal_mask", "padding_mask", "combine_masks", "merge_heads", "layer_norm_backward",
        "block_param_count", "kv_cache_bytes")),
    "callable-objects": lambda s: all(not isinstance(s[n], types.FunctionType)
                                      and callable(type(s[n]).__call__) for n in (
        "softmax", "scaled_dot_product_attention", "layer_norm_forward", "block_param_count")),
    "ufunc-methods-and-einsum": lambda s: all(
        t in source(_entry("ufunc-methods-and-einsum")) for t in (".reduce(", ".outer(",
                                                                  "einsum(")),
    "float32-throughout": _float32_everywhere,
}


def test_every_entry_has_its_structure_checked():
    assert set(STRUCTURE) == {e.id for e in HONEST}


@pytest.mark.parametrize("entry", _params(), ids=lambda e: e.id)
def test_entry_has_the_structure_it_claims(entry):
    assert STRUCTURE[entry.id](namespace(entry)), entry.note


def test_base_blocks_are_in_file_order_with_every_graded_name():
    graded = [n for n in POINTS if not n.startswith("exercise_")]
    assert [n for n in BASE if n in graded] == graded


# --- grading ---------------------------------------------------------------------------


def test_the_base_submission_gets_full_marks():
    results = grade_namespace(namespace(Honest("base")))
    assert problems(results) == {}
    assert sum(r.score for r in results.values()) == pytest.approx(100.0)


@pytest.mark.parametrize("entry", _params(), ids=lambda e: e.id)
def test_full_marks_and_no_tampering_in_process(entry):
    results = grade_namespace(namespace(entry))
    assert set(results) == set(POINTS)
    assert problems(results) == {}, entry.note
    assert sum(r.score for r in results.values()) == pytest.approx(100.0)


@pytest.mark.slow  # one jail per entry, each grading a whole submission
@pytest.mark.parametrize("entry", _params(isolated=True), ids=lambda e: e.id)
def test_full_marks_no_tampering_and_no_flag_isolated(entry, tmp_path):
    path = tmp_path / entry.id / "attention.py"
    path.parent.mkdir()
    path.write_text(source(entry))
    results, cell_errors, flags = grade_isolated(str(path))
    assert cell_errors == [], cell_errors
    assert flags == [], flags
    assert set(results) == set(POINTS)
    assert problems(results) == {}, entry.note
    assert sum(r.score for r in results.values()) == pytest.approx(100.0)
