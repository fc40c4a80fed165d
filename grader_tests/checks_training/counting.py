"""Checks of ``model_param_count``: 27,253 for the reference configuration of
docs/contract.md §3, and tensor-by-tensor counts of ``init_params`` for other configurations."""

import numbers

import numpy as np

from solutions import training as ref

from ..guard import call
from ..registry import Fail, check

NAME = "model_param_count"


def _as_int(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            raise Fail("dtype-changed", f"{what} returned {value!r} ({type(value).__name__}); "
                                        f"a count must be an int.")
        raise Fail("param-count", f"{what} returned {value!r} ({type(value).__name__}); "
                                  f"expected an int.")
    return int(value)


def tensor_count(vocab_size, d, n_layers, max_len, d_ff):
    """Scalars in the parameters that ``init_params`` actually creates."""
    config = ref.ModelConfig(vocab_size=vocab_size, d=d, n_heads=1, n_layers=n_layers,
                             d_ff=d_ff, max_len=max_len)
    params = ref.init_params(config, np.random.default_rng(0))
    return sum(int(v.size) for v in params.values())


@check(NAME, "27,253 parameters for V = 21, d = 32, 2 layers, 13 positions, d_ff = 128")
def count_reference(fn):
    what = f"{NAME}(vocab_size=21, d=32, n_layers=2, max_len=13, d_ff=128)"
    got = _as_int(call(fn, 21, 32, 2, 13, 128), what)
    if got != 27_253:
        hints = {27_253 - 21: "the output bias b_out (V) is missing",
                 27_253 - 64: "the final layer norm (2d) is missing",
                 27_253 - 13 * 32: "the position table (max_len x d) is missing",
                 27_253 - 21 * 32: "the token embedding (V x d) or W_out (d x V) is missing",
                 27_253 - 2 * 128: "the layer norms of the blocks (4d per block) are missing"}
        why = hints.get(got, "count every tensor: embedding, positions, per block "
                             "4 (d^2 + d) + 2 d d_ff + d_ff + d + 4 d, final LN 2d, "
                             "W_out d V + b_out V")
        raise Fail("param-count", f"{what} = {got:,}, expected 27,253 (docs/contract.md §3). "
                                  f"Likely cause: {why}.")


@check(NAME, "other configurations against a tensor-by-tensor count; d_ff defaults to 4 d")
def count_other(fn):
    for V, d, n_layers, max_len, d_ff in ((7, 8, 3, 5, 20), (21, 16, 1, 9, None),
                                          (5, 4, 0, 2, 3)):
        expected = tensor_count(V, d, n_layers, max_len, d_ff if d_ff is not None else 4 * d)
        args = (V, d, n_layers, max_len) if d_ff is None else (V, d, n_layers, max_len, d_ff)
        what = f"{NAME}{args}"
        got = _as_int(call(fn, *args), what)
        if got != expected:
            raise Fail("param-count", f"{what} = {got:,}, expected {expected:,} (counting the "
                                      f"tensors of the model one by one)."
                                      + (" d_ff=None means 4 * d." if d_ff is None else
                                         " Is d_ff used for both W1 (d x d_ff) and W2 "
                                         "(d_ff x d), and b1 (d_ff)?"))
