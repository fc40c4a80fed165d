"""Fault isolation cannot be turned into a source of answers (issue 18).

While a graded name ``A`` is graded, every other graded name it reaches is the reference,
re-bound so that the reference's own uses of ``A`` reach the student's ``A``
(``core.callees``); ``A`` itself is identified by the graded name it is stored under,
never by ``__name__`` (``core.isolate(fn, namespace, name)``). So:

- a function that does nothing but call its own graded name (through an alias, a
  ``functools.partial``, a lambda, a callable object, a bound method, ``globals()``, a
  closure or a default argument) recurses into itself and scores 0, instead of being
  answered by the reference;
- ``softmax`` computed by a crafted call of ``scaled_dot_product_attention`` (whose
  reference calls ``softmax``) recurses into itself and scores 0, while
  ``scaled_dot_product_attention``, whose code is right given a right ``softmax``, keeps
  its points: a bug in one function costs only that function's points;
- correct functions written through those same indirections keep full marks, and the
  graded names they call are replaced through every one of them (a broken ``softmax``
  never costs ``scaled_dot_product_attention`` its points).
"""

import inspect
import re
import textwrap

import numpy as np
import pytest

from grader_tests import core
from grader_tests.core import POINTS, callees, grade_namespace, isolate
from solutions import attention as ref
from tests.catalogue import build_namespace

# Ways of writing a graded name NAME so that its code only calls NAME again: each
# scored full marks when isolation identified the function under test by __name__ (the
# reference stood in for the global NAME) or did not look into the object at all.
SELF_CALLS = {
    "alias": """
        def _impl(*args, **kwargs):
            return NAME(*args, **kwargs)
        NAME = _impl
    """,
    "partial": """
        import functools
        def _impl(*args, **kwargs):
            return NAME(*args, **kwargs)
        NAME = functools.partial(_impl)
    """,
    "lambda": """
        def _impl(*args, **kwargs):
            return NAME(*args, **kwargs)
        NAME = lambda *args, **kwargs: _impl(*args, **kwargs)
    """,
    "callable-object": """
        class _Impl:
            def __call__(self, *args, **kwargs):
                return NAME(*args, **kwargs)
        NAME = _Impl()
    """,
    "bound-method": """
        class _Ops:
            def run(self, *args, **kwargs):
                return globals()["NAME"](*args, **kwargs)
        _ops = _Ops()
        NAME = _ops.run
    """,
    "globals": """
        def _impl(*args, **kwargs):
            return globals()["NAME"](*args, **kwargs)
        NAME = _impl
    """,
    "closure": """
        def _make(lookup):
            def inner(*args, **kwargs):
                return lookup()["NAME"](*args, **kwargs)
            return inner
        NAME = _make(globals)
    """,
    "default-argument": """
        def _impl(*args, _scope=globals, **kwargs):
            return _scope()["NAME"](*args, **kwargs)
        NAME = _impl
    """,
}

# softmax computed by scaled_dot_product_attention with crafted queries, keys and values
# (K = V = I, no scale, masked where the scores are -inf: the weights are softmax(x));
# scaled_dot_product_attention stays the reference's code, which calls softmax. In the
# student's own notebook the two call each other forever; graded alone, each used to
# reach the other's reference and scored full marks.
SOFTMAX_THROUGH_ATTENTION = """
    def softmax(scores, axis=-1):
        x = np.asarray(scores)
        if not np.issubdtype(x.dtype, np.floating):
            x = x.astype(np.float64)
        x = np.moveaxis(x, axis, -1)
        eye = np.eye(x.shape[-1], dtype=x.dtype)
        finite = np.isfinite(x)
        _, weights = scaled_dot_product_attention(np.where(finite, x, 0)[..., None, :], eye,
                                                  eye, mask=finite[..., None, :], scale=False)
        return np.moveaxis(weights[..., 0, :], -1, axis)
"""

BROKEN_SOFTMAX = """
    def softmax(scores, axis=-1):
        raise RuntimeError("broken softmax")
"""


def renamed_reference(name, new_name):
    """The reference's code of ``name`` as the source of a function called ``new_name``."""
    source = textwrap.dedent(inspect.getsource(getattr(ref, name)))
    return re.sub(rf"^def {name}\(", f"def {new_name}(", source, count=1, flags=re.M)


def honest_variant(name, kind):
    """Source defining graded ``name`` as a correct function written through ``kind``."""
    impl = renamed_reference(name, "_impl_" + name)
    signature = str(inspect.signature(getattr(ref, name)))
    wrappers = {
        "alias": f"{name} = _impl_{name}\n",
        "partial": f"import functools\n{name} = functools.partial(_impl_{name})\n",
        "lambda": f"{name} = lambda *args, **kwargs: _impl_{name}(*args, **kwargs)\n",
        "callable-object": (f"class _Graded_{name}:\n"
                            f"    def __call__(self, *args, **kwargs):\n"
                            f"        return _impl_{name}(*args, **kwargs)\n"
                            f"{name} = _Graded_{name}()\n"),
        "bound-method": (f"class _Ops_{name}:\n"
                         f"    def run(self, *args, **kwargs):\n"
                         f"        return _impl_{name}(*args, **kwargs)\n"
                         f"{name} = _Ops_{name}().run\n"),
    }
    assert signature.startswith("(")
    return impl + "\n" + wrappers[kind]


def scores(results):
    return {name: r.score for name, r in results.items()}


@pytest.mark.parametrize("kind", sorted(SELF_CALLS))
@pytest.mark.parametrize("name", ["softmax", "scaled_dot_product_attention",
                                  "layer_norm_forward"])
def test_a_function_that_only_calls_its_own_graded_name_scores_zero(name, kind):
    ns = build_namespace([SELF_CALLS[kind].replace("NAME", name)], label=f"{kind}-{name}")
    results = grade_namespace(ns, [name])
    assert results[name].score == 0, (kind, results[name].faults)
    assert not any(c.passed for c in results[name].checks)
    assert "crash" in results[name].faults  # RecursionError


def test_softmax_through_attention_scores_zero_and_attention_keeps_its_points():
    ns = build_namespace([SOFTMAX_THROUGH_ATTENTION], label="mutual")
    results = grade_namespace(ns, ["softmax", "scaled_dot_product_attention",
                                   "multi_head_attention", "attention_forward"])
    assert results["softmax"].score == 0, results["softmax"].faults
    assert "crash" in results["softmax"].faults  # RecursionError
    # the reference's scaled_dot_product_attention code, right given a right softmax
    for name in ("scaled_dot_product_attention", "multi_head_attention", "attention_forward"):
        assert results[name].score == POINTS[name], (name, results[name].faults)


@pytest.mark.parametrize("kind", ["alias", "partial", "lambda", "callable-object"])
def test_softmax_through_attention_written_through_an_indirection_scores_zero(kind):
    cheat = textwrap.dedent(SOFTMAX_THROUGH_ATTENTION).replace("def softmax(", "def _cheat(")
    wrapper = {"alias": "softmax = _cheat\n",
               "partial": "import functools\nsoftmax = functools.partial(_cheat)\n",
               "lambda": "softmax = lambda scores, axis=-1: _cheat(scores, axis)\n",
               "callable-object": ("class _Softmax:\n"
                                   "    def __call__(self, scores, axis=-1):\n"
                                   "        return _cheat(scores, axis)\n"
                                   "softmax = _Softmax()\n")}[kind]
    ns = build_namespace([cheat + wrapper], label=f"mutual-{kind}")
    results = grade_namespace(ns, ["softmax"])
    assert results["softmax"].score == 0, results["softmax"].faults


@pytest.mark.parametrize("kind", ["alias", "partial", "lambda", "callable-object",
                                  "bound-method"])
def test_correct_functions_written_through_an_indirection_get_full_marks(kind):
    names = ["softmax", "scaled_dot_product_attention", "layer_norm_forward",
             "layer_norm_backward"]
    ns = build_namespace([honest_variant(n, kind) for n in names], label=f"honest-{kind}")
    results = grade_namespace(ns, names + ["multi_head_attention"])
    assert scores(results) == {n: float(POINTS[n]) for n in results}, {
        n: r.faults for n, r in results.items()}


@pytest.mark.parametrize("kind", ["alias", "partial", "lambda", "callable-object",
                                  "bound-method"])
def test_isolation_reaches_callees_through_every_indirection(kind):
    """A broken softmax costs only softmax, however scaled_dot_product_attention is
    written."""
    ns = build_namespace([BROKEN_SOFTMAX, honest_variant("scaled_dot_product_attention", kind)],
                         label=f"isolated-{kind}")
    results = grade_namespace(ns, ["softmax", "scaled_dot_product_attention"])
    assert results["softmax"].score == 0
    assert results["scaled_dot_product_attention"].score == POINTS[
        "scaled_dot_product_attention"], results["scaled_dot_product_attention"].faults


CAPTURED_SOFTMAX = {
    "closure": """
        def _make(sm):
            def attention(Q, K, V, mask=None, scale=True):
                S = Q @ np.swapaxes(K, -1, -2) * (1.0 / math.sqrt(Q.shape[-1]) if scale else 1.0)
                if mask is not None:
                    S = np.where(np.asarray(mask, dtype=bool), S, -np.inf)
                P = sm(S)
                return P @ V, P
            return attention
        scaled_dot_product_attention = _make(softmax)
    """,
    "default-argument": """
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True, _sm=softmax):
            S = Q @ np.swapaxes(K, -1, -2) * (1.0 / math.sqrt(Q.shape[-1]) if scale else 1.0)
            if mask is not None:
                S = np.where(np.asarray(mask, dtype=bool), S, -np.inf)
            P = _sm(S)
            return P @ V, P
    """,
    "object-attribute": """
        import types as _types
        _ops = _types.SimpleNamespace(normalise=softmax)
        def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
            S = Q @ np.swapaxes(K, -1, -2) * (1.0 / math.sqrt(Q.shape[-1]) if scale else 1.0)
            if mask is not None:
                S = np.where(np.asarray(mask, dtype=bool), S, -np.inf)
            P = _ops.normalise(S)
            return P @ V, P
    """,
    "instance-attribute": """
        class _Attention:
            def __init__(self, normalise):
                self.normalise = normalise
            def __call__(self, Q, K, V, mask=None, scale=True):
                S = Q @ np.swapaxes(K, -1, -2) * (1.0 / math.sqrt(Q.shape[-1]) if scale else 1.0)
                if mask is not None:
                    S = np.where(np.asarray(mask, dtype=bool), S, -np.inf)
                P = self.normalise(S)
                return P @ V, P
        scaled_dot_product_attention = _Attention(softmax)
    """,
}


@pytest.mark.parametrize("kind", sorted(CAPTURED_SOFTMAX))
def test_a_callee_captured_by_value_is_replaced_too(kind):
    ns = build_namespace([BROKEN_SOFTMAX, CAPTURED_SOFTMAX[kind]], label=f"captured-{kind}")
    results = grade_namespace(ns, ["scaled_dot_product_attention"])
    r = results["scaled_dot_product_attention"]
    assert r.score == r.max_score, r.faults


def test_callees_are_the_functions_a_graded_function_is_built_from():
    """While X is graded, only the graded functions X is built from (core.CALLEES) are
    answered by the reference, and they never call the function under test's reference:
    softmax is built from nothing, multi_head_attention from the attention parts below it,
    the backwards never from their own reference."""
    from grader_tests.core import CALLEES

    calls = []

    def target(*args, **kwargs):
        calls.append(len(args))
        return ref.multi_head_attention(*args, **kwargs)

    assert callees("softmax", target) == {}
    assert "layer_norm_backward" not in callees("layer_norm_forward", target)
    assert "attention_backward" not in callees("attention_forward", target)
    assert "attention_forward" not in callees("scaled_dot_product_attention", target)
    replacements = callees("multi_head_attention", target)
    assert set(replacements) == set(CALLEES["multi_head_attention"])
    Q = np.ones((1, 3, 4))
    out, weights = replacements["scaled_dot_product_attention"](Q, Q, Q)
    np.testing.assert_allclose(weights.sum(-1), 1.0)
    np.testing.assert_array_equal(replacements["causal_mask"](3), ref.causal_mask(3))
    assert calls == []  # nothing below multi_head_attention calls it
    assert ref.scaled_dot_product_attention.__globals__["softmax"] is ref.softmax  # untouched


def test_isolate_leaves_the_namespace_and_non_python_callables_alone():
    ns = build_namespace([SELF_CALLS["alias"].replace("NAME", "softmax")], label="untouched")
    before = dict(ns)
    isolated = isolate(ns["softmax"], ns, "softmax")
    assert isolated is not ns["softmax"]
    assert isolated.__globals__["softmax"] is isolated  # the graded name is the copy itself
    assert isolated.__globals__["_impl"] is isolated     # and so is its alias
    assert ns == before and all(ns[k] is before[k] for k in ns)
    assert isolate(np.exp, ns, "softmax") is np.exp
    sdpa = isolate(ns["scaled_dot_product_attention"], ns, "scaled_dot_product_attention")
    assert sdpa.__globals__["softmax"] is not ns["softmax"]  # the reference stands in


def test_peer_is_isolated_as_its_own_graded_name():
    """A backward's checks use the student's forward isolated as the forward: a forward
    that only calls its own graded name recurses, whatever the function under test."""
    ns = build_namespace([SELF_CALLS["alias"].replace("NAME", "layer_norm_forward")],
                         label="peer")
    with core.grading(core.Session(namespace=ns)):
        forward = core.peer("layer_norm_forward")
    with pytest.raises(RecursionError):
        forward(np.ones((2, 3)), np.ones(3), np.zeros(3))
