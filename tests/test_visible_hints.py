"""The visible tests of the mask functions give a likely cause only when the output is the
one that cause produces (the release notebook's own cells, run in this process): a
transposed causal mask is told it is the transpose (trap 5), an exact negation that True
and False are swapped, an off-by-one padding mask that ``<=`` lets in a pad token, and an
output no known mistake produces gets no cause at all."""

import nbformat
import numpy as np
import pytest

from tests.helpers import ROOT

RELEASE = ROOT / "release" / "attention" / "attention.ipynb"


def _cells():
    nb = nbformat.read(RELEASE, as_version=4)
    return {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in nb.cells
            if c.cell_type == "code"}


def _failure(part, fn):
    """The AssertionError message of ``<part>_visible_test`` run on ``fn``."""
    cells = _cells()
    namespace = {"__name__": "__main__"}
    exec(compile(cells["setup"], "setup", "exec"), namespace)
    namespace[part] = fn
    with pytest.raises(AssertionError) as failed:
        exec(compile(cells[f"{part}_visible_test"], part, "exec"), namespace)
    return str(failed.value)


SWAPPED = "True and False are swapped"
TRANSPOSED = "This is the transpose"


def test_a_transposed_causal_mask_is_named_as_such_and_nothing_else():
    message = _failure("causal_mask", lambda T: np.triu(np.ones((T, T), bool)))
    assert message.endswith("\nThis is the transpose: each query sees the future instead of "
                            "the past (trap 5).")
    assert SWAPPED not in message


def test_a_negated_causal_mask_is_told_true_and_false_are_swapped():
    message = _failure("causal_mask", lambda T: ~np.tril(np.ones((T, T), bool)))
    assert message.endswith("\nTrue and False are swapped: the mask was read as True = "
                            "blocked, while here True means 'may attend'.")
    assert TRANSPOSED not in message


def test_a_causal_mask_without_its_diagonal_is_told_so():
    message = _failure("causal_mask", lambda T: np.tril(np.ones((T, T), bool), -1))
    assert message.endswith("\nThe diagonal is False: a token must be allowed to attend to "
                            "itself.")


def test_an_unknown_wrong_causal_mask_gets_no_cause():
    message = _failure("causal_mask", lambda T: np.ones((T, T), bool))
    assert message.endswith("got\n[[ True  True  True]\n [ True  True  True]\n [ True  True  True]]")
    assert SWAPPED not in message and TRANSPOSED not in message and "trap" not in message


def _padding(compare):
    def padding_mask(lengths, T):
        return compare(np.arange(T)[None, :], np.asarray(lengths).reshape(-1, 1))
    return padding_mask


def test_an_off_by_one_padding_mask_is_not_told_true_and_false_are_swapped():
    message = _failure("padding_mask", _padding(np.less_equal))
    assert SWAPPED not in message
    assert message.endswith("\nt <= lengths[b] marks the first padded position as a real "
                            "token; the real tokens are t < lengths[b].")


def test_a_negated_padding_mask_is_told_true_and_false_are_swapped():
    message = _failure("padding_mask", _padding(np.greater_equal))
    assert message.endswith("\nTrue and False are swapped: the mask was read as True = "
                            "padded, while here True means 'real token'.")


def test_an_unknown_wrong_padding_mask_gets_no_cause():
    message = _failure("padding_mask", _padding(lambda t, n: t < n - 1))
    assert message.endswith("([b, t] True iff t < lengths[b]), got\n[[ True False False]\n "
                            "[False False False]\n [ True  True False]]")



def _sdpa_halving_longer_masks(Q, K, V, mask=None, scale=True):
    """Right without a mask and with a mask of two keys; with a longer mask, every weight
    halved: rows that sum to 0.5, a mistake no cause of the introduction produces."""
    scores = Q @ np.swapaxes(K, -1, -2)
    if scale:
        scores = scores / np.sqrt(Q.shape[-1]).astype(Q.dtype)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights = weights / weights.sum(axis=-1, keepdims=True)
    if mask is not None and np.shape(mask)[-1] > 2:
        weights = weights * np.asarray(0.5, weights.dtype)
    return weights @ V, weights


def test_causal_weights_that_do_not_sum_to_1_get_their_sums_and_no_cause():
    message = _failure("scaled_dot_product_attention", _sdpa_halving_longer_masks)
    assert message.endswith("with a causal mask every row must still sum to 1; got row sums "
                            "[0.5 0.5 0.5 0.5 0.5].")
    assert "trap" not in message
