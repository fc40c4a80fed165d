"""Checks of ``sinusoidal_positions(T, d)`` (Vaswani et al. 2017, section 3.5)."""

import numpy as np

from solutions import attention as ref

from ..guard import call
from ..i18n import N_, _
from ..registry import Fail, PROPERTY, check
from ._util import as_array, expect_shape, fmt

NAME = "sinusoidal_positions"


def _expect(fn, T, d, what=None):
    what = what or f"{NAME}({T}, {d})"
    got = as_array(call(fn, T, d), what)
    expect_shape(got, (T, d), what)
    expected = ref.sinusoidal_positions(T, d)
    if not np.allclose(got.astype(np.float64), expected, rtol=1e-6, atol=1e-6):
        index = tuple(int(i) for i in np.unravel_index(
            int(np.nanargmax(np.abs(np.nan_to_num(got.astype(np.float64), nan=9.0) - expected))),
            expected.shape))
        p, col = index
        kind = "sin" if col % 2 == 0 else "cos"
        raise Fail("positions-wrong",
                   _("{what}: PE[{p}, {col}] = {got:.6g}, expected {kind}({p} / "
                     "10000^({value}/{d})) = {expected:.6g}.\nRows 0-2 you "
                     "returned:\n{got2}\nexpected:\n{expected2}\nLikely cause: sine on even columns "
                     "and cosine on odd ones, both with frequency 1 / 10000^(2i/d) for the pair "
                     "(2i, 2i+1).").format(what=what, p=p, col=col, got=got[index], kind=kind,
                       value=col - col % 2, d=d, expected=expected[index], got2=fmt(got[:3]),
                       expected2=fmt(expected[:3])))
    return got


@check(NAME, N_("PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same), even d"))
def positions_even(fn):
    for T, d in ((6, 4), (50, 16)):
        _expect(fn, T, d)


@check(NAME, N_("odd d: the last column is a sine"))
def positions_odd(fn):
    for T, d in ((5, 5), (9, 7), (3, 1)):
        _expect(fn, T, d)


@check(NAME, N_("defined past any training length (T = 2048)"))
def positions_long(fn):
    _expect(fn, 2048, 8)


@check(NAME, N_("returns float64 of shape (T, d)"), kind=PROPERTY)
def positions_dtype(fn):
    got = as_array(call(fn, 4, 6), _("{NAME}(4, 6)").format(NAME=NAME))
    expect_shape(got, (4, 6), _("{NAME}(4, 6)").format(NAME=NAME))
    if got.dtype != np.float64:
        raise Fail("dtype-changed", _("{NAME}(4, 6) returned dtype {dtype}; the contract is "
                                      "float64.").format(NAME=NAME, dtype=got.dtype))
