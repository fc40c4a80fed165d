"""Checks of ``model_param_count``: 27,253 for the reference configuration of
docs/contract.md §3, and tensor-by-tensor counts of ``init_params`` for other configurations."""

import numbers

import numpy as np

from solutions import training as ref

from ..guard import call
from ..i18n import N_, _
from ..registry import Fail, check

NAME = "model_param_count"


def _as_int(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            raise Fail("dtype-changed", _("{what} returned {value!r} ({kind}); a count must be "
                                          "an int.").format(what=what, value=value,
                                            kind=type(value).__name__))
        raise Fail("param-count", _("{what} returned {value!r} ({kind}); expected an int.").format(
            what=what,
                                      value=value, kind=type(value).__name__))
    return int(value)


def tensor_count(vocab_size, d, n_layers, max_len, d_ff):
    """Scalars in the parameters that ``init_params`` actually creates."""
    config = ref.ModelConfig(vocab_size=vocab_size, d=d, n_heads=1, n_layers=n_layers,
                             d_ff=d_ff, max_len=max_len)
    params = ref.init_params(config, np.random.default_rng(0))
    return sum(int(v.size) for v in params.values())


@check(NAME, N_("27,253 parameters for V = 21, d = 32, 2 layers, 13 positions, d_ff = 128"))
def count_reference(fn):
    what = f"{NAME}(vocab_size=21, d=32, n_layers=2, max_len=13, d_ff=128)"
    got = _as_int(call(fn, 21, 32, 2, 13, 128), what)
    if got != 27_253:
        hints = {27_253 - 21: _("the output bias b_out (V) is missing"),
                 27_253 - 64: _("the final layer norm (2d) is missing"),
                 27_253 - 13 * 32: _("the position table (max_len x d) is missing"),
                 27_253 - 21 * 32: _("the token embedding (V x d) or W_out (d x V) is missing"),
                 27_253 - 2 * 128: _("the layer norms of the blocks (4d per block) are missing")}
        why = hints.get(got, _("count every tensor: embedding, positions, per block 4 (d^2 + d) "
                               "+ 2 d d_ff + d_ff + d + 4 d, final LN 2d, W_out d V + b_out V"))
        raise Fail("param-count", _("{what} = {got:,}, expected 27,253 (docs/contract.md §3). "
                                    "Likely cause: {why}.").format(what=what, got=got, why=why))


@check(NAME, N_("other configurations against a tensor-by-tensor count; d_ff defaults to 4 d"))
def count_other(fn):
    for V, d, n_layers, max_len, d_ff in ((7, 8, 3, 5, 20), (21, 16, 1, 9, None),
                                          (5, 4, 0, 2, 3)):
        expected = tensor_count(V, d, n_layers, max_len, d_ff if d_ff is not None else 4 * d)
        args = (V, d, n_layers, max_len) if d_ff is None else (V, d, n_layers, max_len, d_ff)
        what = f"{NAME}{args}"
        got = _as_int(call(fn, *args), what)
        if got != expected:
            raise Fail("param-count", _("{what} = {got:,}, expected {expected:,} (counting the "
                                        "tensors of the model one by one).").format(what=what,
                                          got=got, expected=expected)
                                      + (_(" d_ff=None means 4 * d.") if d_ff is None else
                                         _(" Is d_ff used for both W1 (d x d_ff) and W2 (d_ff x "
                                           "d), and b1 (d_ff)?")))
