"""Checks of ``make_batch``: the layout ``[s1 .. sL, SEP, a1 .. aL]`` shifted into inputs
(positions 0 .. 2L-1) and targets (positions 1 .. 2L), the loss mask on the L answer
predictions only, copy against sort, and the draw of the symbols (docs/contract.md §3)."""

import numpy as np

from solutions import training as ref

from ..checks._util import as_array, expect_shape, fmt, unpack
from ..guard import call
from ..i18n import N_, _
from ..registry import PROPERTY, Fail, check

NAME = "make_batch"
SEP, N_SYMBOLS = ref.SEP, ref.N_SYMBOLS


def _batch(fn, task, L, B, seed):
    what = f"{NAME}({task!r}, L={L}, batch_size={B}, rng)"
    inputs, targets, loss_mask = unpack(call(fn, task, L, B, np.random.default_rng(seed)), 3,
                                        what)
    inputs = as_array(inputs, _("{what}: inputs").format(what=what))
    targets = as_array(targets, _("{what}: targets").format(what=what))
    loss_mask = as_array(loss_mask, _("{what}: loss_mask").format(what=what))
    for label, arr in (("inputs", inputs), ("targets", targets), ("loss_mask", loss_mask)):
        expect_shape(arr, (B, 2 * L), _("{what}: {label} (the model reads 2L = {value} positions "
                                        "of a sequence of length 2L + 1)").format(what=what,
                                          label=label, value=2 * L))
    for label, arr in (("inputs", inputs), ("targets", targets)):
        if arr.dtype.kind not in "iu":
            raise Fail("dtype-changed", _("{what}: {label} has dtype {dtype}; token ids must be "
                                          "integers (they index the embedding table).").format(
                                              what=what,
                                            label=label, dtype=arr.dtype))
    if loss_mask.dtype != bool:
        raise Fail("dtype-changed", _("{what}: loss_mask has dtype {dtype}; it must be boolean "
                                      "(True = this prediction counts in the loss).").format(
                                          what=what,
                                        dtype=loss_mask.dtype))
    return what, inputs, targets, loss_mask


def _sequence(what, inputs, targets):
    """The full sequences ``(B, 2L+1)`` after checking that targets are inputs shifted."""
    if not np.array_equal(inputs[:, 1:], targets[:, :-1]):
        b = int(np.argmax(np.any(inputs[:, 1:] != targets[:, :-1], axis=1)))
        raise Fail("other", _("{what}: targets must be the inputs shifted by one (input position "
                              "t predicts the token at position t + 1), so targets[:, :-1] == "
                              "inputs[:, 1:]. Row {b}: inputs {inputs}, targets {targets}. Both "
                              "are cut from one sequence [s1 .. sL, SEP, a1 .. aL]: inputs = "
                              "sequence[:, :-1], targets = sequence[:, 1:].").format(what=what,
                                b=b, inputs=fmt(inputs[b]), targets=fmt(targets[b])))
    return np.concatenate([inputs[:, :1], targets], axis=1)


def _drawn(what, seq, L):
    """``Fail('other')`` when every source symbol of the batch is the same one: sources
    drawn at random never are (a constant batch is trivially its own copy and its own sort)."""
    if seq[:, :L].size > 1 and np.all(seq[:, :L] == seq[0, 0]):
        raise Fail("other", _("{what}: every source symbol of the batch is {symbol}; the "
                              "sources are drawn at random (rng.integers(0, {N_SYMBOLS}, size=(B, "
                              "L))).").format(what=what, symbol=int(seq[0, 0]),
                                               N_SYMBOLS=N_SYMBOLS))


@check(NAME, N_("layout: inputs = positions 0..2L-1 and targets = positions 1..2L of [s1..sL, "
                "SEP, a1..aL]"))
def batch_layout(fn):
    for L, B in ((1, 3), (4, 16), (7, 5)):
        what, inputs, targets, _unused = _batch(fn, "copy", L, B, 100 + L)
        seq = _sequence(what, inputs, targets)
        if not np.all(seq[:, L] == SEP):
            raise Fail("other", _("{what}: position L = {L} of every sequence must be the "
                                  "separator SEP = {SEP}; the first sequence is {seq}. Layout: "
                                  "[s1 .. sL, SEP, a1 .. aL].").format(what=what, L=L, SEP=SEP,
                                    seq=fmt(seq[0])))
        if np.any(seq[:, :L] == SEP) or seq[:, :L].min() < 0 or seq[:, :L].max() >= N_SYMBOLS:
            raise Fail("other", _("{what}: the L source symbols must lie in 0 .. {value} (SEP = "
                                  "{SEP} is not a symbol); the first sequence is {seq}.").format(
                                      what=what,
                                    value=N_SYMBOLS - 1, SEP=SEP, seq=fmt(seq[0])))


@check(NAME, N_("copy: the answer a1..aL equals the source s1..sL"))
def batch_copy(fn):
    for L, B in ((1, 4), (5, 12)):
        what, inputs, targets, _unused = _batch(fn, "copy", L, B, 110 + L)
        seq = _sequence(what, inputs, targets)
        if L * B > 20:  # a draw of this size is never constant
            _drawn(what, seq, L)
        if not np.array_equal(seq[:, L + 1:], seq[:, :L]):
            b = int(np.argmax(np.any(seq[:, L + 1:] != seq[:, :L], axis=1)))
            raise Fail("other", _("{what}: for copy the answer must repeat the source; sequence "
                                  "{b} is {seq}.").format(what=what, b=b, seq=fmt(seq[b])))


@check(NAME, N_("sort: the answer is the source sorted in increasing order (repeats kept)"))
def batch_sort(fn):
    for L, B in ((2, 6), (6, 40)):
        what, inputs, targets, _unused = _batch(fn, "sort", L, B, 120 + L)
        seq = _sequence(what, inputs, targets)
        if L * B > 20:
            _drawn(what, seq, L)
        expected = np.sort(seq[:, :L], axis=1)
        if not np.array_equal(seq[:, L + 1:], expected):
            b = int(np.argmax(np.any(seq[:, L + 1:] != expected, axis=1)))
            hint = ""
            if np.array_equal(seq[b, L + 1:], expected[b, ::-1]):
                hint = _(" It is sorted in decreasing order: the task sorts increasingly.")
            elif np.array_equal(seq[b, L + 1:], seq[b, :L]):
                hint = _(" It is a copy: the sort task was not applied.")
            raise Fail("other", _("{what}: for sort the answer must be sorted(s1..sL); sequence "
                                  "{b} is {seq}, expected answer {expected}.{hint}").format(
                                      what=what,
                                    b=b, seq=fmt(seq[b]), expected=fmt(expected[b]), hint=hint))


@check(NAME, N_("loss mask: True exactly at the L predictions of a1..aL (input positions L..2L-1)"))
def batch_loss_mask(fn):
    for task, L, B in (("copy", 1, 2), ("sort", 4, 3), ("copy", 6, 2)):
        what, _unused, _unused, loss_mask = _batch(fn, task, L, B, 130 + L)
        expected = np.zeros((B, 2 * L), dtype=bool)
        expected[:, L:] = True
        if np.array_equal(loss_mask, expected):
            continue
        row = loss_mask[0].astype(int)
        if np.array_equal(loss_mask, ~expected):
            raise Fail("mask-inverted", _("{what}: loss_mask row is {row}, the negation of the "
                                          "expected {astype}: True means 'this prediction "
                                          "counts'.").format(what=what, row=fmt(row),
                                            astype=fmt(expected[0].astype(int))))
        shifted = np.zeros_like(expected)
        shifted[:, L - 1:2 * L - 1] = True
        if np.array_equal(loss_mask, shifted) or (L > 1 and loss_mask[:, L - 1].all()):
            why = (_(" Input position L - 1 holds sL and predicts SEP, which is not part of the "
                     "answer; input position L holds SEP and predicts a1."))
        elif np.array_equal(loss_mask, np.ones_like(expected)):
            why = (_(" Every position counts: the model would also be trained to predict the "
                     "random source symbols, which no model can."))
        else:
            why = ""
        raise Fail("other", _("{what}: loss_mask row is {row}, expected {astype} (True at input "
                              "positions {L} .. {value}, whose targets are a1 .. aL).{why}").format(
                                  what=what,
                                row=fmt(row), astype=fmt(expected[0].astype(int)), L=L,
                                value=2 * L - 1, why=why))


@check(NAME, N_("symbols uniform over 0..19 with repeats, drawn from the rng passed in (same "
                "seed, same batch; a fresh batch every call)"))
def batch_draws(fn):
    L, B = 6, 200
    what, inputs, _unused, _unused = _batch(fn, "copy", L, B, 140)
    _unused, again, _unused, _unused = _batch(fn, "copy", L, B, 140)
    if not np.array_equal(inputs, again):
        raise Fail("other", _("{what}: two calls with generators of the same seed gave different "
                              "batches. Draw every random number from the rng argument "
                              "(rng.integers), not from np.random or a new generator.").format(
                                  what=what))
    generator = np.random.default_rng(141)
    # One call of ``call`` around both, so that both batches come from the same generator
    # (``call`` passes copies of its arguments).
    first, second = call(lambda: (unpack(fn("copy", L, B, generator), 3, what)[0],
                                  unpack(fn("copy", L, B, generator), 3, what)[0]))
    first, second = as_array(first, _("inputs")), as_array(second, _("inputs"))
    if np.array_equal(first, second):
        raise Fail("other", _("{what}: two calls with the same generator gave the same batch; "
                              "every training step needs a fresh random batch.").format(what=what))
    symbols = inputs[:, :L].ravel()
    counts = np.bincount(symbols, minlength=N_SYMBOLS)[:N_SYMBOLS]
    expected = symbols.size / N_SYMBOLS
    if counts.min() < 0.5 * expected or counts.max() > 1.5 * expected:
        raise Fail("other", _("{what}: over {size} drawn symbols the counts of 0 .. {value} are "
                              "{counts}; each should be near {expected:.0f} (uniform over the "
                              "{N_SYMBOLS} symbols).").format(what=what, size=symbols.size,
                                value=N_SYMBOLS - 1, counts=fmt(counts), expected=expected,
                                N_SYMBOLS=N_SYMBOLS))
    distinct = np.mean([len(set(row)) == L for row in inputs[:, :L].tolist()])
    if distinct > 0.8:
        raise Fail("other", _("{what}: {distinct:.0%} of the sequences have {L} distinct "
                              "symbols; drawn independently (with repeats) about 44% do. Draw "
                              "each symbol independently, rng.integers(0, 20, size=(B, L)).").format(what=what,
                                distinct=distinct, L=L))


@check(NAME, N_("an unknown task raises ValueError"), kind=PROPERTY)
def batch_unknown_task(fn):
    try:
        call(fn, "reverse", 3, 2, np.random.default_rng(150))
    except ValueError:
        return
    except Fail:
        raise
    except Exception as exc:  # noqa: BLE001  (a different error is reported as such)
        raise Fail("other", _("{NAME}('reverse', 3, 2, rng) raised {kind}; raise ValueError for "
                              "a task other than 'copy' or 'sort'.").format(NAME=NAME,
                                kind=type(exc).__name__))
    raise Fail("other", _("{NAME}('reverse', 3, 2, rng) returned without an error; raise "
                          "ValueError for a task other than 'copy' or 'sort'.").format(NAME=NAME))
