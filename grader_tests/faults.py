"""The fault ids of the kit (docs/contract.md §5) and what each tells a student.

Every failed check reports exactly one of these ids, so that a student reads what went
wrong and an instructor can count misconceptions across a class. The ids are identifiers,
the same in every language; their explanations and the traps' titles are English msgids
(``N_``), shown in the course's language by ``explain`` and ``trap_line``.
"""

from .i18n import N_, _

FAULTS = {
    "missing-scale": N_("the scores are not divided by sqrt(d_k): not divided at all, divided "
    "by d_k, or by sqrt(d) instead of sqrt(d_h) with heads"),
    "unstable-softmax": N_("the softmax does not subtract the maximum: exp overflows to inf/NaN "
    "on large scores"),
    "softmax-wrong-axis": N_("the softmax normalises over the wrong axis (the queries instead "
    "of the keys)"),
    "mask-after-softmax": N_("the mask zeroes weights after the softmax instead of setting "
    "scores to -inf before it, so rows no longer sum to 1"),
    "mask-inverted": N_("the mask is read as True = blocked; in this kit True means "
    "'may attend' / 'real token'"),
    "mask-wrong-axis": N_("the mask acts on the wrong axis: causal mask transposed, or padding "
    "applied to queries instead of keys"),
    "padding-ignored": N_("the padding mask is not applied, or marks the wrong positions (off "
    "by one): the output depends on what sits in the padded positions"),
    "nan-on-empty-row": N_("a fully masked row gives NaN or non-zero weights instead of zeros"),
    "head-order": N_("reshape and transpose are done in the wrong order: shapes are right but "
    "the heads are mixed up"),
    "head-count-unchecked": N_("a head count that does not divide d is not refused with "
    "ValueError (returned a result, or raised another error)"),
    "input-mutated": N_("an argument was modified in place"),
    "dtype-changed": N_("the result dtype differs from the inputs' (float32 in must give "
    "float32 out)"),
    "wrong-shape": N_("the output shape differs from the contract"),
    "layer-norm-variance": N_("wrong normalisation: unbiased variance, variance not centred, or "
    "eps added outside the square root"),
    "layer-norm-backward-terms": N_("a term of the closed-form layer-norm backward is missing"),
    "param-grad-axes": N_("a parameter gradient is not summed over every leading axis"),
    "softmax-backward": N_("the softmax backward misses the row-sum term"),
    "backward-missing-scale": N_("the forward pass is scaled but the backward is not (or the "
    "reverse)"),
    "weight-grad-wrong": N_("a weight gradient is transposed, mis-shaped or uses the wrong "
    "activation"),
    "param-count": N_("the block parameter count is off (biases or layer norms left out, d_ff "
    "mis-used)"),
    "kv-cache-formula": N_("the KV-cache memory formula is off (factor 2, layers, heads or "
    "bytes missing)"),
    "positions-wrong": N_("the sinusoid frequencies or the sin/cos interleaving are wrong"),
    "not-implemented": N_("the function still raises NotImplementedError, or is missing"),
    "timeout": N_("the function did not return within its time limit"),
    "crash": N_("the function raised an exception, exited, or killed its process"),
    "module-unavailable": N_("the code imports a module the grading environment does not "
    "provide (it provides Python's standard library and the course's list, NumPy by "
    "default)"),
    "tampering": N_("the submission altered the grading environment"),
    "other": N_("a check failed for a reason the graders could not name"),
}

# The traps of the assignments' introductions behind some faults: the number and title a
# student re-reads (the feedback names the trap; it does not write the fix). Each title is
# the start of its trap in the list "The traps" of notebooks/attention.py (and its Italian
# translation the start of the same trap in notebooks/it/attention.py); a test holds them
# together.
TRAPS = {
    "missing-scale": (1, N_("no 1/sqrt(d_k)")),
    "backward-missing-scale": (1, N_("no 1/sqrt(d_k)")),
    "mask-after-softmax": (2, N_("mask applied after the softmax")),
    "head-order": (3, N_("reshape and transpose in the wrong order")),
    "padding-ignored": (4, N_("padding left out of the softmax")),
    "mask-wrong-axis": (5, N_("causal and padding masks confused, transposed, or combined on "
                              "the wrong axis")),
    "softmax-wrong-axis": (6, N_("softmax over the query axis")),
}


def trap_line(fault: str | None) -> str | None:
    """The sentence pointing a student to the trap behind ``fault``, or None.

    Args:
        fault: str, a key of ``FAULTS``.

    Returns:
        str such as ``"Re-read trap 2 (mask applied after the softmax)."``, or None when
        no trap of the introduction is behind ``fault``.
    """
    if fault not in TRAPS:
        return None
    number, title = TRAPS[fault]
    return _("Re-read trap {number} of the introduction ({title}).").format(
        number=number, title=_(title))


def explain(fault: str) -> str:
    """What ``fault`` tells a student, in the current language (``i18n.use_language``).

    Args:
        fault: str, a fault id.

    Returns:
        str, its explanation of ``FAULTS``, or a sentence saying the kit does not know it.
    """
    if fault not in FAULTS:
        return _("a fault id the kit does not know")
    return _(FAULTS[fault])
