"""Checks of ``block_param_count`` and ``kv_cache_bytes`` against the formulas of
docs/contract.md §2 (items 14 and 15) and against independent counts of a block's tensors."""

import numbers

from ..guard import call
from ..i18n import N_, _
from ..registry import Fail, PROPERTY, check

PARAMS, KV = "block_param_count", "kv_cache_bytes"


def block_tensor_shapes(d, d_ff):
    """Every tensor of one pre-LN block with biases, by name: shape tuples."""
    shapes = {f"W_{k}": (d, d) for k in "QKVO"}
    shapes.update({f"b_{k}": (d,) for k in "QKVO"})
    shapes.update({"W1": (d, d_ff), "b1": (d_ff,), "W2": (d_ff, d), "b2": (d,),
                   "ln1_gamma": (d,), "ln1_beta": (d,), "ln2_gamma": (d,), "ln2_beta": (d,)})
    return shapes


def count_tensors(shapes):
    """Number of scalars in a dict of shapes."""
    total = 0
    for shape in shapes.values():
        n = 1
        for side in shape:
            n *= side
        total += n
    return total


def _as_int(value, what, fault):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer():
            raise Fail("dtype-changed", _("{what} returned {value!r} ({kind}); a count must be "
                                          "an int.").format(what=what, value=value,
                                            kind=type(value).__name__))
        raise Fail(fault, _("{what} returned {value!r} ({kind}); expected an int.").format(
            what=what,
                              value=value, kind=type(value).__name__))
    return int(value)


@check(PARAMS, N_("12 d^2 + 13 d: 49,984 (d=64), 789,760 (d=256), 3,152,384 (d=512)"))
def params_lesson_figures(fn):
    for d, expected in ((64, 49_984), (256, 789_760), (512, 3_152_384)):
        got = _as_int(call(fn, d), f"{PARAMS}({d})", "param-count")
        if got != expected:
            raise Fail("param-count", _("{PARAMS}({d}) = {got:,}, expected {expected:,} (12 d^2 "
                                        "+ 13 d). Count: 4 projections (d x d) with biases, the "
                                        "FFN W1 (d x 4d), b1, W2 (4d x d), b2, and two layer "
                                        "norms (gamma and beta each).").format(PARAMS=PARAMS, d=d,
                                          got=got, expected=expected))


@check(PARAMS, N_("explicit d_ff against a tensor-by-tensor count"))
def params_explicit_dff(fn):
    for d, d_ff in ((32, 128), (10, 7), (48, 100), (1, 1)):
        expected = count_tensors(block_tensor_shapes(d, d_ff))
        got = _as_int(call(fn, d, d_ff), f"{PARAMS}({d}, d_ff={d_ff})", "param-count")
        if got != expected:
            raise Fail("param-count", _("{PARAMS}({d}, d_ff={d_ff}) = {got:,}, expected "
                                        "{expected:,} from counting every tensor of the block. "
                                        "Likely cause: d_ff ignored or used as 4 * d_ff, or a "
                                        "bias or layer norm left out.").format(PARAMS=PARAMS, d=d,
                                          d_ff=d_ff, got=got, expected=expected))


@check(PARAMS, N_("returns an int"), kind=PROPERTY)
def params_int(fn):
    _as_int(call(fn, 16), f"{PARAMS}(16)", "param-count")


@check(KV, N_("the lesson's figures: 2 GiB with 32 KV heads, 0.0625 GiB with 1, 1.5 GiB exercise"))
def kv_lesson_figures(fn):
    cases = [((32, 32, 128, 4096, 1, 2), 2 * 2**30), ((32, 1, 128, 4096, 1, 2), 2**26),
             ((24, 8, 64, 8192, 4, 2), 1_610_612_736)]
    for args, expected in cases:
        got = _as_int(call(fn, *args), f"{KV}{args}", "kv-cache-formula")
        if got != expected:
            raise Fail("kv-cache-formula", _("{KV}(n_layers, n_kv_heads, d_head, seq_len, batch, "
                                             "bytes) = {KV}{args} = {got:,}, expected "
                                             "{expected:,}. Keys and values (factor 2) for every "
                                             "layer, KV head, position and sequence, times bytes "
                                             "per element.").format(KV=KV, args=args, got=got,
                                               expected=expected))


@check(KV, N_("each argument enters linearly (independent products)"))
def kv_linear(fn):
    base = (3, 5, 7, 11, 2, 4)
    for i, (factor) in enumerate((2, 3, 5, 2, 3, 2)):
        args = list(base)
        args[i] *= factor
        expected = 2
        for a in args:
            expected *= a
        got = _as_int(call(fn, *args), f"{KV}{tuple(args)}", "kv-cache-formula")
        if got != expected:
            names = ("n_layers", "n_kv_heads", "d_head", "seq_len", "batch", "bytes_per_element")
            raise Fail("kv-cache-formula", _("{KV}{args} = {got:,}, expected {expected:,}: "
                                             "scaling {names} by {factor} must scale the bytes "
                                             "by {factor}.").format(KV=KV, args=tuple(args),
                                               got=got, expected=expected, names=names[i],
                                               factor=factor))
