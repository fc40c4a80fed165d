"""The wire between the grader and the sandboxed student process keeps what it carries:
shapes (0-d, empty, any strides), dtypes and byte orders, NumPy scalars as NumPy scalars,
containers as their own kind; and a student's exception is re-raised only as a class of
a fixed table, the most specific one its class names allow."""

import math
import warnings

import numpy as np
import pytest

from grader_tests import wire

PLAIN_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                np.uint32, np.uint64, np.float16, np.float32, np.float64, np.longdouble,
                np.complex64, np.complex128, np.clongdouble]
SWAPPED = [np.dtype(">i4"), np.dtype(">u2"), np.dtype(">f8"), np.dtype(">c16"),
           np.dtype("<f4").newbyteorder(">")]


def round_trip(value):
    """``value`` through ``dumps`` and ``loads``, as the grader receives it."""
    return wire.loads(wire.dumps(value))


def assert_same_array(back, sent):
    assert type(back) is np.ndarray, type(back)
    assert back.shape == sent.shape and back.dtype == sent.dtype, (back.shape, back.dtype)
    assert np.array_equal(back, sent, equal_nan=back.dtype.kind in "fc")
    assert back.flags.writeable and back.flags.c_contiguous


def _values(dtype, shape):
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    if dtype.kind == "b":
        flat = np.arange(n) % 3 == 0
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        flat = np.array([info.min, info.max, 0, 1, 7] * (n // 5 + 1), dtype=dtype)[:n]
    elif dtype.kind == "f":
        flat = np.array([np.nan, np.inf, -np.inf, -0.0, 1.5, np.finfo(dtype).tiny] * (n + 1))[:n]
    else:
        flat = np.array([complex(1.5, -2), complex(np.nan, 0), complex(0, np.inf)] * (n + 1))[:n]
    return flat.astype(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", PLAIN_DTYPES + SWAPPED, ids=str)
def test_zero_d_arrays_stay_zero_d_with_their_dtype(dtype):
    sent = _values(dtype, (1,)).reshape(())
    back = round_trip(sent)
    assert back.ndim == 0
    assert_same_array(back, sent)


@pytest.mark.parametrize("dtype", PLAIN_DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_scalars_stay_numpy_scalars_of_their_type(dtype):
    sent = _values(dtype, (1,))[0]
    assert isinstance(sent, np.generic)
    back = round_trip(sent)
    assert type(back) is type(sent) and back.dtype == sent.dtype
    assert np.array_equal(back, sent, equal_nan=back.dtype.kind in "fc")


@pytest.mark.parametrize("dtype", PLAIN_DTYPES + SWAPPED, ids=str)
@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 1, 3), (3, 0), (0,), (2, 0, 4)],
                         ids=str)
def test_arrays_of_every_plain_dtype_and_shape_round_trip(dtype, shape):
    sent = _values(dtype, shape)
    assert_same_array(round_trip(sent), sent)


@pytest.mark.parametrize("view", [
    lambda a: a[::2],
    lambda a: a[:, ::-1],
    lambda a: a.T,
    lambda a: np.asfortranarray(a),
    lambda a: a[1:, 1:3],
    lambda a: np.broadcast_to(a[:1], (4, 4)),
    lambda a: a[:, 2],
    lambda a: a[0, 0, ...],              # 0-d view into a bigger array
    lambda a: a[:0, ::2],                # empty and strided
], ids=["every-other-row", "reversed-columns", "transpose", "fortran", "window",
        "broadcast", "column", "0-d-view", "empty-strided"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.bool_, np.complex64],
                         ids=lambda d: np.dtype(d).name)
def test_non_contiguous_arrays_arrive_as_their_values(view, dtype):
    sent = view(_values(dtype, (4, 4)))
    assert_same_array(round_trip(sent), np.array(sent))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")   # np.matrix
def test_numpy_subclasses_travel_as_plain_arrays():
    sent = np.asmatrix(np.arange(6.0).reshape(2, 3))
    back = round_trip(sent)
    assert type(back) is np.ndarray and back.shape == (2, 3)
    assert np.array_equal(back, np.asarray(sent))


def test_nested_tuples_lists_and_dicts_keep_their_kinds():
    sent = {
        "tuple": (np.float32(1.5), (np.zeros((0, 2)), [np.array(2, dtype=np.int8)]), ()),
        "list": [[], [1, 2.5, None, True, "x"], (np.arange(3)[::-1],)],
        "dict": {"inner": {"0d": np.array(np.nan), "t": (1,)}, "empty": {}},
        "floats": [float("nan"), float("inf"), -float("inf"), -0.0, 1e308],
        "ints": [0, -1, 2**70, True, False],
    }
    back = round_trip(sent)
    assert set(back) == set(sent)
    t = back["tuple"]
    assert type(t) is tuple and type(t[0]) is np.float32 and t[0] == 1.5
    assert type(t[1]) is tuple and t[1][0].shape == (0, 2) and type(t[1][1]) is list
    assert t[1][1][0].shape == () and t[1][1][0].dtype == np.int8 and t[2] == ()
    lst = back["list"]
    assert type(lst) is list and lst[0] == [] and lst[1] == [1, 2.5, None, True, "x"]
    assert type(lst[1][3]) is bool and type(lst[1][0]) is int
    assert type(lst[2]) is tuple and lst[2][0].tolist() == [2, 1, 0]
    inner = back["dict"]["inner"]
    assert inner["0d"].shape == () and np.isnan(inner["0d"]) and inner["t"] == (1,)
    assert back["dict"]["empty"] == {}
    f = back["floats"]
    assert math.isnan(f[0]) and f[1] == math.inf and f[2] == -math.inf and f[4] == 1e308
    assert math.copysign(1.0, f[3]) == -1.0
    assert back["ints"] == [0, -1, 2**70, True, False]
    assert [type(v) for v in back["ints"]] == [int, int, int, bool, bool]


def test_malformed_arrays_and_scalars_are_refused():
    good = wire._encode(np.zeros((2, 2)), None, None)
    for shape in ([2, -2], [2.0, 2], "22", [3, 3]):
        with pytest.raises(ValueError):
            wire._decode(dict(good, shape=shape), None)
    with pytest.raises(ValueError):
        wire.loads(b'{"__np__": "<f8", "data": "AAAA"}')       # 3 bytes, not 8
    with pytest.raises(ValueError):
        wire.loads(b'{"__nd__": "|O", "shape": [], "data": ""}')
    with pytest.raises(ValueError):
        wire.loads(b'{"__nd__": "<M8[s]", "shape": [], "data": "AAAAAAAAAAA="}')


# --- exceptions -----------------------------------------------------------------------------


def mro_names(exc):
    """What the student's process sends for ``exc``: its classes' names, most specific first."""
    return [k.__name__ for k in type(exc).__mro__]


def _raised(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the point is to capture it
        return exc
    raise AssertionError("nothing was raised")


def test_numpy_axis_error_crosses_as_itself():
    exc = _raised(lambda: np.zeros((2, 3)).sum(axis=5))
    kind = wire.exception_class(mro_names(exc))
    assert kind is np.exceptions.AxisError
    again = kind(str(exc))
    assert isinstance(again, ValueError) and isinstance(again, IndexError)
    assert str(again) == str(exc)


@pytest.mark.parametrize("make, expected", [
    (lambda: [][1], IndexError),
    (lambda: {}["k"], KeyError),
    (lambda: 1 / 0, ZeroDivisionError),
    (lambda: np.zeros(2) @ np.zeros(3), ValueError),
    (lambda: np.linalg.inv(np.zeros((2, 2))), np.linalg.LinAlgError),
    (lambda: np.reshape(np.zeros(6), (4, 2)), ValueError),
    (lambda: None.shape, AttributeError),
    (lambda: len(5), TypeError),
    (lambda: undefined_name, NameError),  # noqa: F821
], ids=["index", "key", "zero-division", "matmul-shapes", "linalg", "reshape", "attribute",
        "type", "name"])
def test_the_exceptions_student_code_raises_cross_as_their_class(make, expected):
    exc = _raised(make)
    assert wire.exception_class(mro_names(exc)) is type(exc) is expected


def test_numpy_warnings_raised_as_errors_cross_as_themselves():
    def cast_complex():
        with warnings.catch_warnings():
            warnings.simplefilter("error", np.exceptions.ComplexWarning)
            np.zeros(2)[:] = np.array([1 + 1j, 2])

    exc = _raised(cast_complex)
    assert type(exc) is np.exceptions.ComplexWarning
    assert wire.exception_class(mro_names(exc)) is np.exceptions.ComplexWarning


def test_a_student_class_is_its_most_specific_known_base():
    class Mine(KeyError, ValueError):
        pass

    class Deeper(np.exceptions.AxisError):
        pass

    class Unknown(Exception):
        pass

    assert wire.exception_class(mro_names(Mine("x"))) is KeyError
    assert wire.exception_class(mro_names(Deeper("x"))) is np.exceptions.AxisError
    assert wire.exception_class(mro_names(Unknown("x"))) is None


def test_qualified_names_are_known_too():
    assert wire.exception_class(["numpy.exceptions.AxisError"]) is np.exceptions.AxisError
    assert wire.exception_class(["builtins.ValueError"]) is ValueError
    assert wire.exception_class(["numpy.linalg.LinAlgError"]) is np.linalg.LinAlgError


@pytest.mark.parametrize("names", [
    ["SystemExit", "BaseException", "object"],
    ["KeyboardInterrupt"],
    ["StopIteration", "Exception"],
    ["GeneratorExit"],
    ["Exception", "BaseException"],
    ["os.system"],
    ["builtins.eval", "eval", "exec", "__import__"],
    ["grader_tests.core.Fail", "Fail", "StubHit", "StudentTimeout"],
    ["OSError", "PermissionError", "ImportError"],
    [],
    "ValueError",                      # not a list: a string is not a list of names
    None,
    [1, None, ["ValueError"], b"ValueError"],
], ids=repr)
def test_nothing_outside_the_table_comes_back(names):
    assert wire.exception_class(names) is None


def test_only_the_first_names_are_read():
    assert wire.exception_class(["Nope"] * 64 + ["ValueError"]) is None
    assert wire.exception_class(["Nope"] * 63 + ["ValueError"]) is ValueError


def test_every_class_of_the_table_is_an_exception_that_takes_a_message():
    assert wire.EXCEPTIONS, "the table is empty"
    for name, kind in wire.EXCEPTIONS.items():
        assert isinstance(kind, type) and issubclass(kind, Exception), name
        assert not issubclass(kind, (StopIteration, StopAsyncIteration, OSError, ImportError))
        assert kind is not Exception
        assert name in (kind.__name__, f"{kind.__module__}.{kind.__qualname__}")
        instance = kind("the message")
        assert "the message" in str(instance), name


@pytest.mark.parametrize("spec", ['"|O"', '"<M8[s]"', '"V8"', '["<f8"]', '{"a": 1}', '"(2,)<f8"',
                                  '"no such dtype"', "8"])
def test_only_plain_dtypes_are_decoded(spec):
    with pytest.raises(ValueError):
        wire.loads(f'{{"__nd__": {spec}, "shape": [], "data": "AAAAAAAAAAA="}}'.encode())
    with pytest.raises(ValueError):
        wire.loads(f'{{"__np__": {spec}, "data": "AAAAAAAAAAA="}}'.encode())
