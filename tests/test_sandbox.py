"""Isolated grading: a submission that hangs, exits, exhausts memory, floods its output,
fails at import or tampers loses only what it should, with the reason, and grading goes on."""

import inspect
import textwrap

import numpy as np
import pytest

from grader_tests import wire
from grader_tests.sandbox import grade_isolated
from solutions import attention as ref

REFERENCE = inspect.getsource(ref)
GRADED = ["softmax", "causal_mask", "padding_mask"]

# name -> (appended source, {function: expected fault or None for full marks}, flag substring)
CASES = {
    "never returns": ("""
        def softmax(scores, axis=-1):
            while True:
                pass
    """, {"softmax": "timeout", "causal_mask": None}, None),
    "calls sys.exit": ("""
        import sys
        def causal_mask(T):
            sys.exit(3)
    """, {"causal_mask": "crash", "softmax": None}, None),
    "calls os._exit": ("""
        import os
        def causal_mask(T):
            os._exit(0)
    """, {"causal_mask": "crash", "padding_mask": None}, None),
    "kills its process": ("""
        import os, signal
        def causal_mask(T):
            os.kill(os.getpid(), signal.SIGKILL)
    """, {"causal_mask": "crash", "padding_mask": None}, None),
    "exhausts memory": ("""
        def causal_mask(T):
            return np.ones((1 << 34,), dtype=np.uint8)
    """, {"causal_mask": "crash", "softmax": None}, None),
    "floods its output": ("""
        import sys
        _cm = causal_mask
        def causal_mask(T):
            for _ in range(20000):
                print("x" * 200)
                sys.stderr.write("y" * 200)
            return _cm(T)
    """, {"causal_mask": None}, None),
    "raises at import": ("""
        raise ImportError("a cell that fails")
    """, {"softmax": None, "causal_mask": None}, None),
    "patches numpy.allclose": ("""
        np.allclose = lambda *a, **k: True
        def softmax(scores, axis=-1):
            return np.zeros_like(scores)
    """, {"softmax": "tampering", "causal_mask": None}, "numpy.allclose"),
    "patches numpy.testing": ("""
        import numpy.testing
        numpy.testing.assert_allclose = lambda *a, **k: None
        def padding_mask(lengths, T):
            return None
    """, {"padding_mask": "tampering", "softmax": None}, "numpy.testing.assert_allclose"),
    "replaces builtins.__import__": ("""
        import builtins
        _imp = builtins.__import__
        builtins.__import__ = lambda *a, **k: _imp(*a, **k)
        def causal_mask(T):
            return np.ones((T, T), dtype=bool)
    """, {"causal_mask": "tampering", "softmax": None}, "builtins.__import__"),
    "fakes grader_tests": ("""
        import sys, types
        sys.modules["grader_tests"] = types.ModuleType("grader_tests")
        def softmax(scores, axis=-1):
            return scores
    """, {"softmax": "tampering", "causal_mask": None}, "grader_tests"),
    "redefines AssertionError": ("""
        import builtins
        class AssertionError(Exception):
            pass
        builtins.AssertionError = AssertionError
        def causal_mask(T):
            return np.zeros((T, T), dtype=bool)
    """, {"causal_mask": "tampering", "padding_mask": None}, "AssertionError"),
    "imports the reference": ("""
        def softmax(scores, axis=-1):
            return scores
        from solutions.attention import softmax
    """, {"softmax": "tampering", "causal_mask": None}, "import solutions"),
    "reads the graders' files": ("""
        import glob, os
        for _p in glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "*")):
            pass
        _src = open(__import__("os").path.join("{root}", "grader_tests", "checks",
                                                "softmax.py")).read()
        def softmax(scores, axis=-1):
            return np.ones_like(scores)
    """, {"softmax": "tampering", "causal_mask": None}, "opened grader_tests"),
    "returns an object equal to everything": ("""
        class _Yes:
            def __eq__(self, other):
                return True
        def causal_mask(T):
            return _Yes()
    """, {"causal_mask": "tampering", "softmax": None}, "causal_mask: it returned a _Yes"),
    "returns a lying ndarray subclass": ("""
        class _Liar(np.ndarray):
            def __eq__(self, other):
                return np.ones(np.shape(other), dtype=bool)
        def softmax(scores, axis=-1):
            return np.zeros(np.shape(scores)).view(_Liar)
    """, {"softmax": "tampering", "causal_mask": None}, "softmax: it returned an ndarray"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_isolated_grading_survives(case, tmp_path):
    import os

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    source, expected, flag = CASES[case]
    path = tmp_path / "attention.py"
    path.write_text(REFERENCE + "\n" + textwrap.dedent(source).replace("{root}", root))
    results, cell_errors, flags = grade_isolated(str(path), names=GRADED)
    for name, fault in expected.items():
        r = results[name]
        detail = [(c.name, c.fault, c.message) for c in r.checks if not c.passed]
        if fault is None:
            assert r.score == r.max_score, (case, name, detail)
        else:
            assert r.score == 0, (case, name, r.score, detail)
            assert fault in r.faults, (case, name, detail)
    if flag is None:
        assert flags == [], (case, flags)
    else:
        assert any(flag in f for f in flags), (case, flags)
    if case == "raises at import":
        assert cell_errors and "a cell that fails" in cell_errors[0]


def test_wire_refuses_objects_and_keeps_plain_data():
    value = {"a": (np.arange(6.0, dtype=np.float32).reshape(2, 3), [1, 2.5, None, True]),
             "b": np.float32(1.5), "c": float("-inf"), "m": np.tril(np.ones((2, 2), bool))}
    back = wire.loads(wire.dumps(value))
    assert back["a"][0].dtype == np.float32 and back["a"][0].shape == (2, 3)
    assert back["a"][1] == [1, 2.5, None, True] and isinstance(back["a"], tuple)
    assert back["b"].dtype == np.float32 and back["c"] == float("-inf")
    assert back["m"].dtype == bool
    with pytest.raises(TypeError):
        wire.dumps(object())
    table = {}
    data = wire.dumps([object()], table)
    handle = wire.loads(data)[0]
    assert isinstance(handle, wire.Handle) and handle.type_name == "builtins.object"
    with pytest.raises(ValueError):
        wire.loads(b'{"__nd__": "|O", "shape": [1], "data": ""}')
