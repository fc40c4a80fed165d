"""The cache a forward returns is opaque: any type, never judged as tampering, compared by
the arrays inside it. And what the graders do compare is still judged: an ndarray
subclass of the submission, an object posing as an array or a number, or one whose ``==``
is its own, returned where an array is compared, is tampering."""

import dataclasses
import functools
import types
from collections import namedtuple

import numpy as np
import pytest

from grader_tests import core, guard
from grader_tests.core import Fail, contents, same_value
from grader_tests.integrity import rigged_object
from grader_tests.wire import Handle
from tests.helpers import submission_namespace

# --- every shape a cache may take, each holding the same arrays -------------------------


@dataclasses.dataclass
class DataclassCache:
    xhat: np.ndarray
    inv: np.ndarray
    gamma: np.ndarray


@dataclasses.dataclass(frozen=True, slots=True)
class SlotsDataclassCache:
    xhat: np.ndarray
    inv: np.ndarray
    gamma: np.ndarray


class EqCache:
    """A class with its own ``==`` (identity-based, as an honest student may write)."""

    def __init__(self, **arrays):
        self.__dict__.update(arrays)

    def __eq__(self, other):
        return self is other

    __hash__ = object.__hash__


class PlainCache:
    """No ``==`` of its own: object identity."""

    def __init__(self, xhat, inv, gamma):
        self.xhat, self.inv, self.gamma = xhat, inv, gamma


class SlotsCache:
    """attrs-like: slots, no ``__dict__``."""

    __slots__ = ("xhat", "inv", "gamma")

    def __init__(self, xhat, inv, gamma):
        self.xhat, self.inv, self.gamma = xhat, inv, gamma


class DictCache(dict):
    pass


class ListCache(list):
    pass


NamedCache = namedtuple("NamedCache", "xhat inv gamma")


def closure_cache(xhat, inv, gamma):
    def cache():
        return xhat, inv, gamma
    return cache


def _arrays():
    rng = np.random.default_rng(0)
    return rng.normal(size=(2, 3)), rng.uniform(1, 2, size=(2, 1)), rng.normal(size=3)


MAKERS = {
    "dataclass": lambda x, i, g: DataclassCache(x, i, g),
    "slots-dataclass": lambda x, i, g: SlotsDataclassCache(x, i, g),
    "own-eq": lambda x, i, g: EqCache(xhat=x, inv=i, gamma=g),
    "plain-object": PlainCache,
    "slots": SlotsCache,
    "dict-subclass": lambda x, i, g: DictCache(xhat=x, inv=i, gamma=g),
    "list-subclass": lambda x, i, g: ListCache([x, i, g]),
    "namedtuple": NamedCache,
    "simplenamespace": lambda x, i, g: types.SimpleNamespace(xhat=x, inv=i, gamma=g),
    "closure": closure_cache,
    "partial": lambda x, i, g: functools.partial(np.multiply, x, extra=(i, g)),
    "tuple": lambda x, i, g: (x, i, g),
    "nested": lambda x, i, g: {"layer": [DataclassCache(x, i, g)], "meta": ("ln", 1e-5)},
}


def _first_array(obj):
    """The first array inside a cache, to modify in place."""
    return next(leaf for _, leaf in _leaves_live(obj))


def _leaves_live(obj):
    """``contents`` returns copies; find the live arrays by walking the same way."""
    if isinstance(obj, np.ndarray):
        yield "", obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _leaves_live(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _leaves_live(v)
    elif isinstance(obj, functools.partial):
        yield from _leaves_live(obj.args)
    elif isinstance(obj, types.FunctionType):
        for cell in obj.__closure__ or ():
            yield from _leaves_live(cell.cell_contents)
    elif hasattr(obj, "__slots__") and not hasattr(obj, "__dict__"):
        for name in type(obj).__slots__:
            yield from _leaves_live(getattr(obj, name))
    else:
        for v in vars(obj).values():
            yield from _leaves_live(v)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_contents_finds_the_arrays_of_every_cache_shape(kind):
    x, i, g = _arrays()
    found = [leaf for _, leaf in contents(MAKERS[kind](x, i, g)) if isinstance(leaf, np.ndarray)]
    assert len(found) == 3
    assert {a.tobytes() for a in found} == {x.tobytes(), i.tobytes(), g.tobytes()}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_an_untouched_cache_is_the_same_value_as_its_copy(kind):
    import copy

    cache = MAKERS[kind](*_arrays())
    assert same_value(cache, copy.deepcopy(cache))
    assert same_value(cache, cache)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_cache_modified_in_place_is_seen(kind):
    cache = MAKERS[kind](*_arrays())
    before = contents(cache)
    _first_array(cache)[...] += 1.0
    assert not core.same_contents(before, contents(cache))


def test_an_eq_that_says_equal_to_anything_hides_no_change():
    class Yes(EqCache):
        def __eq__(self, other):
            return True

    x, i, g = _arrays()
    a, b = Yes(xhat=x, inv=i, gamma=g), Yes(xhat=x + 1, inv=i, gamma=g)
    assert a == b and not same_value(a, b)


def test_contents_is_bounded_and_survives_cycles():
    loop = []
    loop.append(loop)
    ns = types.SimpleNamespace()
    ns.me = ns
    assert same_value(loop, loop) and same_value(ns, ns)
    deep = current = []
    for _ in range(core.CONTENTS_MAX_DEPTH * 3):
        current.append([])
        current = current[0]
    assert len(contents(deep)) <= core.CONTENTS_MAX_DEPTH + 2
    wide = list(range(core.CONTENTS_MAX_OBJECTS * 2))
    assert len(contents(wide)) <= core.CONTENTS_MAX_OBJECTS + 2


def test_contents_runs_no_code_of_the_object():
    class Trap:
        def __getattribute__(self, name):
            raise AssertionError(f"the walk asked for {name}")

        def __eq__(self, other):
            raise AssertionError("the walk compared")

        def __hash__(self):
            return 0

    assert len(contents({"t": Trap(), "l": [Trap()]})) >= 3


def test_same_value_keeps_dtypes_shapes_and_nan():
    assert same_value(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))
    assert not same_value(np.zeros(2), np.zeros(2, dtype=np.float32))
    assert not same_value(np.zeros(2), np.zeros((1, 2)))
    assert not same_value({"a": 1}, {"a": 1, "b": 2})
    assert not same_value(1, 1.0) and not same_value((1,), [1])
    assert same_value({"b": 1, "a": 2}, {"a": 2, "b": 1})


# --- tampering is judged only where values are compared ------------------------------------


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_no_cache_shape_is_called_rigged_in_the_cache_position(kind):
    y = np.zeros((2, 3))
    assert rigged_object((y, MAKERS[kind](*_arrays())), opaque=(1,)) is None


class LyingArray(np.ndarray):
    def __eq__(self, other):
        return np.ones(np.shape(other), dtype=bool)


class QuietSubclass(np.ndarray):
    pass


class PosesAsArray:
    def __array__(self, dtype=None, copy=None):
        return np.zeros(3)


class InterceptsUfuncs:
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return True


class InterceptsFunctions:
    def __array_function__(self, func, types, args, kwargs):
        return True


class Float(float):
    pass


class Int(int):
    pass


class Float64(np.float64):
    pass


class Yes:
    def __eq__(self, other):
        return True


RIGGED = {
    "lying ndarray subclass": lambda: np.zeros(3).view(LyingArray),
    "quiet ndarray subclass": lambda: np.zeros(3).view(QuietSubclass),
    "__array__": PosesAsArray,
    "__array_ufunc__": InterceptsUfuncs,
    "__array_function__": InterceptsFunctions,
    "float subclass": lambda: Float(1.0),
    "int subclass": lambda: Int(1),
    "numpy scalar subclass": lambda: Float64(1.0),
    "own ==": Yes,
    "dataclass": lambda: DataclassCache(*_arrays()),
}


@pytest.mark.parametrize("case", sorted(RIGGED))
def test_a_rigged_value_where_an_array_is_compared_is_still_tampering(case):
    value = RIGGED[case]()
    assert rigged_object(value)                                   # the whole result
    assert rigged_object((np.zeros(3), value))                    # one of several
    assert rigged_object((np.zeros(3), value), opaque=(1,)) is None   # as a cache: not judged
    assert rigged_object((value, {}), opaque=(1,))                # y of a forward
    assert rigged_object((np.zeros(3), {"W_Q": value}))           # inside a grads dict
    assert rigged_object([np.zeros(3), [value]])                  # inside a list
    assert rigged_object(np.array([1.0, value], dtype=object))    # in an object array


@pytest.mark.parametrize("value", [
    np.zeros(3), np.float32(1), np.array(2.0), 3, 2.5, 1 + 2j, True, None, "s",
    np.ma.masked_array([1.0, 2.0]), np.zeros(4).reshape(2, 2)[:, 0],
    {"W_Q": np.zeros(2), "b_Q": np.zeros(1)}, (np.zeros(2), [np.ones(1)]),
    namedtuple("Pair", "out weights")(np.zeros(2), np.ones(2)),
], ids=repr)
def test_plain_values_are_not_rigged(value):
    assert rigged_object(value) is None


def test_a_sandbox_handle_is_judged_by_the_sandbox_s_verdict_only_where_compared():
    marked = Handle(7, "submission.Yes", rigged="it returned a Yes object whose == is defined")
    assert rigged_object((np.zeros(2), marked))
    assert rigged_object((np.zeros(2), marked), opaque=(1,)) is None
    assert rigged_object((np.zeros(2), Handle(8, "submission.Cache"))) is None


def test_a_fake_handle_of_the_submission_is_judged_like_any_object():
    class Handle(Yes):                       # named like the kit's, not the kit's
        rigged = None

    assert rigged_object(Handle())


# --- through the engine: the forward's cache position, by the graded name ------------------


def test_the_engine_leaves_a_forward_s_cache_alone_but_judges_its_output():
    honest = submission_namespace("""
        class Cache:
            def __init__(self, d):
                self.d = d
            def __eq__(self, other):
                return True            # never asked: a cache is not compared
            __hash__ = object.__hash__
        _f = layer_norm_forward
        def layer_norm_forward(x, gamma, beta, eps=1e-5):
            y, c = _f(x, gamma, beta, eps)
            return y, Cache(c)
        _b = layer_norm_backward
        def layer_norm_backward(dy, cache):
            return _b(dy, cache.d)
    """)
    for name in ("layer_norm_forward", "layer_norm_backward"):
        r = core.grade_function(name, honest)
        assert r.score == r.max_score, [(c.name, c.fault, c.message) for c in r.checks
                                        if not c.passed]
    rigged = submission_namespace("""
        class Yes(np.ndarray):
            def __eq__(self, other):
                return np.ones(np.shape(other), dtype=bool)
        _f = layer_norm_forward
        def layer_norm_forward(x, gamma, beta, eps=1e-5):
            y, c = _f(x, gamma, beta, eps)
            return np.zeros_like(y).view(Yes), c
    """)
    r = core.grade_function("layer_norm_forward", rigged)
    assert r.score == 0 and "tampering" in r.faults


def test_a_backward_that_modifies_an_object_cache_is_caught():
    ns = submission_namespace("""
        from dataclasses import dataclass
        @dataclass
        class Cache:
            xhat: object
            inv: object
            gamma: object
        _f = layer_norm_forward
        def layer_norm_forward(x, gamma, beta, eps=1e-5):
            y, c = _f(x, gamma, beta, eps)
            return y, Cache(c["xhat"], c["inv"], c["gamma"])
        def layer_norm_backward(dy, cache):
            g = dy * cache.gamma
            n = dy.shape[-1]
            cache.xhat *= 1.0                       # in place, and harmless ...
            cache.inv += 0.0
            cache.xhat[...] = cache.xhat * 1.0 + 0.0 * g   # ... but still writes
            cache.gamma[...] = cache.gamma + 1e-3   # this one changes the cache
            lead = tuple(range(dy.ndim - 1))
            xhat, inv = cache.xhat, cache.inv
            dx = inv * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
            return dx, (dy * xhat).sum(axis=lead), dy.sum(axis=lead)
    """)
    r = core.grade_function("layer_norm_backward", ns)
    failed = {c.name: c.fault for c in r.checks if not c.passed}
    assert failed.get("does not modify dy or the cache") == "input-mutated", failed


def test_opaque_results_name_only_forwards_with_caches():
    from solutions import attention as ref

    assert set(core.OPAQUE_RESULTS) == {"layer_norm_forward", "attention_forward"}
    assert all(name in ref.SPEC_FUNCTIONS for name in core.OPAQUE_RESULTS)


def test_fail_is_tampering_for_a_rigged_result():
    with pytest.raises(Fail) as info:
        guard._refuse_rigged((np.zeros(2), Yes()))
    assert info.value.fault == "tampering"
    guard._refuse_rigged((np.zeros(2), Yes()), (1,))
