"""Isolated grading: a submission that hangs, exits, exhausts memory, floods its output,
fails at import or tampers loses only what it should, with the reason, and grading goes on."""

import inspect
import textwrap

import numpy as np
import pytest

from grader_tests import wire
from grader_tests.sandbox import grade_isolated
from tests.helpers import ATTENTION_SOURCE as REFERENCE
from solutions import training as training_ref

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
    """, {"causal_mask": "crash", "padding_mask": None}, "signals a process"),
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
    """, {"softmax": "tampering", "causal_mask": None}, "replaces numpy.allclose"),
    "patches numpy.testing": ("""
        import numpy.testing
        numpy.testing.assert_allclose = lambda *a, **k: None
        def padding_mask(lengths, T):
            return None
    """, {"padding_mask": "tampering", "softmax": None}, "replaces numpy.testing.assert_allclose"),
    "replaces builtins.__import__": ("""
        import builtins
        _imp = builtins.__import__
        builtins.__import__ = lambda *a, **k: _imp(*a, **k)
        def causal_mask(T):
            return np.ones((T, T), dtype=bool)
    """, {"causal_mask": "tampering", "softmax": None}, "replaces a builtin"),
    "fakes grader_tests": ("""
        import sys, types
        sys.modules["grader_tests"] = types.ModuleType("grader_tests")
        def softmax(scores, axis=-1):
            return scores
    """, {"softmax": "tampering", "causal_mask": None}, "rewrites sys.modules"),
    "redefines AssertionError": ("""
        import builtins
        class AssertionError(Exception):
            pass
        builtins.AssertionError = AssertionError
        def causal_mask(T):
            return np.zeros((T, T), dtype=bool)
    """, {"causal_mask": "tampering", "padding_mask": None}, "replaces a builtin"),
    "imports the reference": ("""
        def softmax(scores, axis=-1):
            return scores
        from solutions.attention import softmax
    """, {"softmax": "tampering", "causal_mask": None}, "imports solutions.attention"),
    "reads the graders' files": ("""
        import glob, os
        for _p in glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "*")):
            pass
        try:
            _src = open(__import__("os").path.join("{root}", "grader_tests", "checks",
                                                    "softmax.py")).read()
        except OSError:  # the jail has no such file: the submission's own code must do
            pass
        def softmax(scores, axis=-1):
            return np.ones_like(scores)
    """, {"softmax": "tampering", "causal_mask": None}, "names the file or folder"),
    "returns an object equal to everything": ("""
        class _Yes:
            def __eq__(self, other):
                return True
        def causal_mask(T):
            return _Yes()
    """, {"causal_mask": "tampering", "softmax": None}, None),
    "returns a lying ndarray subclass": ("""
        class _Liar(np.ndarray):
            def __eq__(self, other):
                return np.ones(np.shape(other), dtype=bool)
        def softmax(scores, axis=-1):
            return np.zeros(np.shape(scores)).view(_Liar)
    """, {"softmax": "tampering", "causal_mask": None}, None),
}


@pytest.mark.slow  # one jail per case
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
        elif fault == "tampering":  # in the jail the attack changes nothing here: the
            # function keeps only the points its own behaviour earns, and the flag says why
            assert r.score < r.max_score, (case, name, detail)
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


def test_wire_carries_generators_records_and_function_references():
    from types import SimpleNamespace

    from solutions.training import ModelConfig

    generator = np.random.default_rng(5)
    back = wire.loads(wire.dumps(generator))
    assert back.bit_generator.state == generator.bit_generator.state
    assert back.integers(1000, size=5).tolist() == generator.integers(1000, size=5).tolist()

    config = ModelConfig(d=16, n_heads=4)          # registered by grader_tests.sandbox
    assert wire.loads(wire.dumps(config)) == config
    lookalike = wire._record("SomeConfig", {"d": 8}, lookalikes=True)  # the worker's side
    assert lookalike.d == 8 and type(lookalike).__name__ == "SomeConfig"
    with pytest.raises(Exception):                  # frozen: the student cannot alter it
        lookalike.d = 9
    assert wire.loads(wire.dumps(lookalike), lookalikes=True) == lookalike
    with pytest.raises(wire.Refused):               # the grader's: a fixed table of records
        wire.loads(wire.dumps(lookalike))

    keys = {}

    def callable_of(fn):
        keys["k1"] = fn
        return {"__callable__": "k1"}

    ops = SimpleNamespace(softmax=np.exp, width=3)
    data = wire.dumps(ops, callable_of=callable_of)
    with pytest.raises(ValueError):                 # no resolver: a function is refused
        wire.loads(data)
    back = wire.loads(data, resolve=lambda ref: keys[ref["__callable__"]])
    assert back.softmax is np.exp and back.width == 3
    with pytest.raises(ValueError):
        wire.loads(b'{"__rng__": "MT19937x", "state": {}}')


TRAINING_PARTS = REFERENCE + "\n" + inspect.getsource(training_ref)


@pytest.mark.slow  # a sandboxed worker that hangs, about 6 s
def test_training_functions_in_the_sandbox_hang_return_functions_and_call_back(tmp_path):
    """A block_backward that calls the grader's ops and then never returns loses its points
    to a time-out (the nested calls share the outer call's deadline) and the next function
    is graded normally; a function the submission returns can be called from here."""
    from grader_tests.sandbox import Sandbox

    path = tmp_path / "training_submission.py"
    path.write_text(TRAINING_PARTS + textwrap.dedent("""
        def block_backward(dy, cache, ops):
            ops.layer_norm_backward(dy, cache["ln2"])
            while True:
                pass

        def make_scaler(k):
            return lambda x: k * x
    """))
    results, cell_errors, flags = grade_isolated(str(path), names=["block_backward", "adam_step"],
                                                 assignment="training")
    assert results["block_backward"].score == 0
    assert "timeout" in results["block_backward"].faults
    assert results["adam_step"].score == results["adam_step"].max_score
    with Sandbox(str(path), assignment="training") as box:
        box.names["make_scaler"] = {"kind": "function"}
        from grader_tests.sandbox import RemoteFunction

        scaler = RemoteFunction(box, "make_scaler")(3.0)
        assert scaler(np.arange(3.0)).tolist() == [0.0, 3.0, 6.0]
