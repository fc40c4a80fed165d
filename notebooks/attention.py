# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false}
# # Assignment `attention`: scaled dot-product attention and the Transformer block, in NumPy
#
# In this assignment you write, in plain NumPy, every piece of the attention path of a
# Transformer: a softmax that cannot overflow, the causal and padding masks, scaled
# dot-product attention, the split and merge of heads, multi-head attention, sinusoidal
# positions, layer normalisation forward and backward, a self-attention layer with a
# backward pass written by hand, and the two formulas that size a model (parameters per
# block, memory of the KV cache). Two pen-and-paper exercises turn the formulas into numbers.
# Once this assignment passes, the `training` assignment opens: you will train a small
# decoder built from these functions to copy and to sort sequences.
#
# The assignment follows lesson 95 of an Italian machine-learning course, *L'attenzione,
# derivata per intero: query, chiave, valore e il blocco Transformer scritto da zero*
# ([federicocalo.dev](https://federicocalo.dev)): where a cell says "the lesson", it means
# that article, its figures and its notation.
#
# **Before you start**, install what this notebook and its checks use, in the environment
# Jupyter runs in: {{ student_install }} (JupyterLab, NumPy, matplotlib, nbgrader and
# rich, at the versions the graders use; the course's `requirements-student.txt` says the same), then
# start `jupyter lab`. nbgrader gives you the *Assignments* tab and the **Validate** button.
#
# ### Conventions
#
# Shape letters, used in every docstring and comment:
#
# | letter | meaning |
# |---|---|
# | `B` | batch size (number of sequences) |
# | `T` | sequence length; `T_q` queries, `T_k` keys (and values) |
# | `d` | model width |
# | `h` | number of heads (`n_heads`) |
# | `d_h` | head width, `d // h` |
# | `d_k`, `d_v` | key (and query) width, value width |
#
# * Vectors are **rows** and weights multiply on the right: a projection is `x @ W + b` with
#   `W` of shape `(d_in, d_out)`.
# * Masks are boolean arrays and **`True` means "may attend" / "real token"**. This is the
#   convention of the boolean `attn_mask` of `torch.nn.functional.scaled_dot_product_attention`;
#   the `key_padding_mask` of `torch.nn.MultiheadAttention` uses the opposite one, so be careful
#   when you compare with PyTorch code.
# * Your functions never modify their arguments, accept float32 and float64, and return the
#   result type of their floating inputs (float32 in, float32 out). Where a shape starts with
#   `...`, any number of leading batch axes must work.
# * NumPy and `math` are all you need; both are imported by the setup cell. Your notebook
#   is graded with Python's standard library and {{ allowed_modules }} only: a function that uses another
#   module (SciPy, PyTorch...) fails when graded, and Validate says so.
#
# ### How to work
#
# 1. Run the setup cell below first. It imports NumPy and defines `time_limit` (the tests use
#    it so that a loop that never ends stops with a `TimeoutError` instead of freezing the
#    notebook) and two helpers for gradient checks, `rel_error` and `numerical_gradient`.
# 2. For each function: read the text, replace the line `raise NotImplementedError()` in the
#    function's cell by your code (keep the signature and the docstring), run the cell, then
#    run the visible-test cell under it. It prints `<name>: visible checks passed`, or stops
#    with a message that says which property failed, on which input, what was expected and
#    which trap it looks like.
# 3. The visible tests are a sample. When your notebook is graded, hidden checks test more:
#    random shapes, float32 inputs, arguments left untouched, the traps listed below, and a
#    time limit of a few seconds per check. A bug costs only the points of the function that
#    has it: when a graded function calls another one (attention calls the softmax), the
#    graders give it the reference version of the function it calls. Each failed check names
#    a fault (for example `mask-after-softmax`) and explains it in the feedback.
# 4. Cells titled *The lesson, live* run your own functions to measure what the text claims.
#    They carry no points, and they stop with `NotImplementedError` until the functions they
#    use are written.
# 5. Do not edit the locked cells (they are graded in their original form anyway) and do not
#    rename the functions. Before you submit: *Kernel → Restart Kernel and Run All Cells*,
#    check that every visible test passes, then press **Validate** (or run
#    `nbgrader validate attention.ipynb`).
#
# ### The traps
#
# None of them raises an exception; each one produces plausible numbers. The visible tests
# and the graders name them when they see them.
#
# 1. No $1/\sqrt{d_k}$: the softmax saturates and gradients vanish at large $d_k$.
# 2. Mask applied after the softmax: rows of weights no longer sum to 1.
# 3. Reshape and transpose in the wrong order when splitting or merging heads: right shape, heads mixed up.
# 4. Padding left out of the softmax: results depend on how the batch was padded or ordered.
# 5. Causal and padding masks confused, transposed, or combined on the wrong axis.
# 6. Softmax over the query axis (`axis=-2`) instead of the keys.
# 7. No positional information: a model cannot tell where a token is (in the training assignment, the sequence accuracy on the copy task falls from 1.000 to 0.204).
# 8. A gradient check with too large an $\varepsilon$: the check gets worse as $\varepsilon$ grows.
# 9. Attention maps read as explanations: the weights are an internal variable of the model, not an account of why it answered.
#
# ### Points
#
# {{ points_table }}

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false} tags=["setup"]
"""Setup: imports and the helpers used by the tests. Run this cell first."""
import contextlib
import dis
import gettext
import io
import math
import signal
import sys
import textwrap
import threading
import time
import types
import warnings

import numpy as np


def rel_error(analytic, numeric, floor=1e-6):
    """Worst relative error ``|a - n| / max(|a|, |n|)`` over the coordinates where
    ``max(|a|, |n|) > floor``; 0.0 if there is none, inf if ``analytic`` is not finite."""
    a = np.asarray(analytic, dtype=np.float64)
    n = np.asarray(numeric, dtype=np.float64)
    if a.shape != n.shape:
        raise ValueError(f"gradient of shape {a.shape}, expected {n.shape}")
    if not np.all(np.isfinite(a)):
        return math.inf
    size = np.maximum(np.abs(a), np.abs(n))
    keep = size > floor
    if not np.any(keep):
        return 0.0
    return float(np.max(np.abs(a - n)[keep] / size[keep]))


# {{ validate_helpers }}


def numerical_gradient(loss, x, eps=1e-6):
    """Central differences ``(loss() at x + eps e_i - loss() at x - eps e_i) / (2 eps)`` for
    every coordinate i of the float64 array ``x``, which ``loss()`` reads; ``x`` is changed
    during the call and restored exactly."""
    grad = np.zeros(x.shape, dtype=np.float64)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + eps
        up = loss()
        x[i] = old - eps
        down = loss()
        x[i] = old
        grad[i] = (up - down) / (2 * eps)
    return grad


# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_figures_text", "locked": true, "schema_version": 3, "solution": false}
# ### Figures
#
# The cells of *The lesson, live* that draw figures use matplotlib through the function
# `show` defined below. Run this cell once, after the setup cell.

# %% nbgrader={"grade": false, "grade_id": "lesson_figures", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""The lesson, live: show(figure) draws a matplotlib figure as a PNG image under the cell."""
import matplotlib

matplotlib.use("Agg")  # drawn to PNG and displayed as an image: the same in JupyterLab, Validate and feedback
import matplotlib.pyplot as plt
from IPython.display import Image, display


def show(figure):
    """Display ``figure`` as a PNG image under the cell, then close it."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(figure)
    display(Image(data=buffer.getvalue(), format="png"))


# %% [markdown] nbgrader={"grade": false, "grade_id": "softmax_text", "locked": true, "schema_version": 3, "solution": false}
# ## 1. `softmax` ({{ points: softmax }})
#
# Attention compares one query with every key, gets one score per key, and turns the row of
# scores $s_1, \dots, s_n$ into weights that are positive and sum to 1:
#
# $$\operatorname{softmax}(s)_j = \frac{e^{s_j}}{\sum_{k=1}^{n} e^{s_k}}.$$
#
# **Stability.** Multiplying the numerator and the denominator by $e^{-m}$ changes nothing,
# so for any constant $m$
#
# $$\operatorname{softmax}(s)_j = \frac{e^{s_j - m}}{\sum_{k} e^{s_k - m}}.$$
#
# Choose $m = \max_k s_k$: every exponent is then at most 0, no term overflows, and the
# denominator is at least 1. Without it, `np.exp(1000.0)` is `inf` and the weights become
# `inf / inf = nan`, with nothing but a warning.
#
# **Masked scores.** A key that a query must not see gets the score $-\infty$; since
# $e^{-\infty} = 0$, its weight is exactly 0. When a whole row is $-\infty$ (a query that may
# attend to nothing, which padding can produce), the maximum itself is $-\infty$ and
# $s_j - m = -\infty - (-\infty)$ is NaN. The contract asks for a row of zeros instead: use 0
# in place of a maximum that is not finite, and divide only where the sum is positive
# (`np.divide` takes `out=` and `where=`).
#
# **The axis.** The weights of one query are normalised over the keys, which is the last axis
# of a score array of shape `(..., T_q, T_k)`. Normalising over `axis=-2` (the queries) runs
# and gives wrong weights (trap 6). Your function takes the axis as an argument; attention
# uses the default, `-1`.
#
# **Contract.** `softmax(scores, axis=-1)` accepts any shape and returns the same shape and
# dtype; finite scores of magnitude $10^4$ and more must not overflow.

# %% nbgrader={"grade": false, "grade_id": "softmax_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: softmax }}

# %% nbgrader={"grade": false, "grade_id": "softmax_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of softmax: a worked example, huge scores, -inf entries, the axis, the dtype."""
with visible_checks("softmax", 5):
    p = softmax(np.array([0.0, math.log(3.0)]))
    assert np.shape(p) == (2,), tr("softmax of 2 scores must return 2 weights (shape (2,)), got shape {shape}", shape=np.shape(p))
    assert np.allclose(p, [0.25, 0.75]), (
        tr("softmax([0, ln 3]) should be [0.25, 0.75] (e^0 = 1 and e^ln3 = 3, each divided by 1 + "
            "3), got {p}",
            p=p))

    p = softmax(np.array([1000.0, 1000.0 + math.log(3.0)]))
    assert np.all(np.isfinite(p)) and np.allclose(p, [0.25, 0.75]), (
        tr("softmax([1000, 1000 + ln 3]) should again be [0.25, 0.75], since adding the same number "
            "to every score changes nothing; got {p}. np.exp(1000.0) overflows to inf and inf / inf "
            "is nan: re-read *Stability* above.",
            p=p))

    p = softmax(np.array([0.0, -np.inf, math.log(3.0)]))
    assert np.allclose(p, [0.25, 0.0, 0.75]), (
        tr("softmax([0, -inf, ln 3]) should be [0.25, 0, 0.75]: a score of -inf (a masked key) gets "
            "weight exactly 0 and the others are unchanged; got {p}",
            p=p))

    S = np.array([[0.0, math.log(3.0)], [0.0, 0.0]])
    rows = softmax(S)
    assert np.allclose(rows, [[0.25, 0.75], [0.5, 0.5]]), (
        tr("softmax(S) must normalise each row (the last axis: the keys). For S = [[0, ln 3], [0, "
            "0]] the answer is [[0.25, 0.75], [0.5, 0.5]], got {rows}. If the columns sum to 1 "
            "instead, you normalised over axis 0, the queries (trap 6).",
            rows=np.asarray(rows).tolist()))
    cols = softmax(S, axis=0)
    assert np.allclose(cols, [[0.5, 0.75], [0.5, 0.25]]), (
        tr("softmax(S, axis=0) must normalise each column: for S = [[0, ln 3], [0, 0]] the answer "
            "is [[0.5, 0.75], [0.5, 0.25]], got {cols}. Is the axis argument ignored?",
            cols=np.asarray(cols).tolist()))

    p = softmax(np.array([[-np.inf, -np.inf, -np.inf], [0.0, 0.0, 0.0]]))
    assert not np.any(np.isnan(p)), (
        tr("a row of scores that are all -inf (a query that may attend to nothing) must give "
            "weights 0, not NaN; got {p}. The maximum of that row is -inf, and -inf - (-inf) is nan; "
            "with 0 in its place, the row's sum is 0, and 0 / 0 is nan too: re-read the rule for a "
            "row with no allowed key above.",
            p=p.tolist()))
    assert np.allclose(p, [[0.0, 0.0, 0.0], [1 / 3, 1 / 3, 1 / 3]]), (
        tr("softmax([[-inf, -inf, -inf], [0, 0, 0]]) should be [[0, 0, 0], [1/3, 1/3, 1/3]], got {p}", p=p.tolist()))

    p = softmax(np.zeros((2, 3, 4), dtype=np.float32))
    assert p.shape == (2, 3, 4), tr("scores of shape (2, 3, 4) must give weights of shape (2, 3, 4), got {shape}", shape=p.shape)
    assert p.dtype == np.float32, tr("float32 scores must give float32 weights, got {dtype}", dtype=p.dtype)
    assert np.allclose(p, 0.25), tr("equal scores over 4 keys must give weights 0.25 each")
print(tr("{name}: visible checks passed", name='softmax'))

# %% nbgrader={"grade": true, "grade_id": "softmax_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of softmax run when your notebook is graded.
problem = before_grading("softmax", np.zeros((2, 3)))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("softmax", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "causal_mask_text", "locked": true, "schema_version": 3, "solution": false}
# ## 2. `causal_mask` ({{ points: causal_mask }})
#
# A decoder predicts token $t + 1$ from tokens $0, \dots, t$. In training every position is
# computed at once, so something must stop position $i$ from reading the positions after it.
# That is the causal (look-ahead) mask:
#
# $$M_{ij} = \begin{cases} \text{True} & \text{if } j \le i \quad\text{(key } j \text{ is in the past of query } i \text{ or is } i\text{)}\\ \text{False} & \text{if } j > i. \end{cases}$$
#
# Rows are queries, columns are keys. For $T = 4$ (1 for True):
#
# $$M = \begin{pmatrix} 1 & 0 & 0 & 0 \\ 1 & 1 & 0 & 0 \\ 1 & 1 & 1 & 0 \\ 1 & 1 & 1 & 1 \end{pmatrix}$$
#
# It depends only on positions, never on the content, so one `(T, T)` array serves every
# sequence of a batch. Its transpose has the same shape and lets every query see the future
# and nothing of its past; nothing raises (trap 5). Return a boolean array.

# %% nbgrader={"grade": false, "grade_id": "causal_mask_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: causal_mask }}

# %% nbgrader={"grade": false, "grade_id": "causal_mask_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of causal_mask: dtype, shape and the lower triangle."""
with visible_checks("causal_mask", 5):
    m = causal_mask(3)
    expected = np.array([[True, False, False],
                         [True, True, False],
                         [True, True, True]])
    assert isinstance(m, np.ndarray), tr("causal_mask must return a NumPy array, got {type}", type=type(m).__name__)
    assert m.shape == (3, 3), tr("causal_mask(3) must have shape (3, 3), got {shape}", shape=m.shape)
    assert m.dtype == bool, tr("causal_mask must return a boolean array, got dtype {dtype}", dtype=m.dtype)
    if not np.array_equal(m, expected):
        if np.array_equal(m, expected.T):  # a hint only for the output it explains
            hint = tr("This is the transpose: each query sees the future instead of the past (trap 5).")
        elif np.array_equal(m, ~expected):
            hint = tr("True and False are swapped: the mask was read as True = blocked, while here "
                      "True means 'may attend'.")
        elif np.array_equal(m, np.tril(expected, -1)):
            hint = tr("The diagonal is False: a token must be allowed to attend to itself.")
        else:
            hint = ""
        raise AssertionError(
            tr("causal_mask(3) should be\n{expected}\n(row i = query i may see keys j <= i), got\n{m}",
               expected=expected, m=m) + ("\n" + hint if hint else ""))
    assert causal_mask(1).tolist() == [[True]], tr("causal_mask(1) should be [[True]]: a token sees itself")
print(tr("{name}: visible checks passed", name='causal_mask'))

# %% nbgrader={"grade": true, "grade_id": "causal_mask_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of causal_mask run when your notebook is graded.
problem = before_grading("causal_mask", 3)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("causal_mask", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "padding_mask_text", "locked": true, "schema_version": 3, "solution": false}
# ## 3. `padding_mask` ({{ points: padding_mask }})
#
# The sequences of a batch rarely have the same length: the shorter ones are padded to a
# common length $T$ with filler tokens, and the filler must not influence the real tokens.
# With $\ell_b$ the true length of sequence $b$,
#
# $$M_{bt} = (t < \ell_b), \qquad M \in \{\text{True}, \text{False}\}^{B \times T}.$$
#
# Unlike the causal mask, it depends on the content of the batch (its lengths), and it acts
# on the **keys**: no query may attend to a padded key. The outputs at padded query positions
# are computed anyway and ignored by the loss. If the padding is left out of the softmax, the
# output of a real token changes with whatever the filler contains and with how the batch
# was padded (trap 4).
#
# `lengths` may be a list or an array, and a length may be 0 (a sequence with no real token).

# %% nbgrader={"grade": false, "grade_id": "padding_mask_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: padding_mask }}

# %% nbgrader={"grade": false, "grade_id": "padding_mask_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of padding_mask: dtype, shape, lengths given as a list or an array."""
with visible_checks("padding_mask", 5):
    m = padding_mask([2, 0, 3], 3)
    expected = np.array([[True, True, False],
                         [False, False, False],
                         [True, True, True]])
    assert isinstance(m, np.ndarray), tr("padding_mask must return a NumPy array, got {type}", type=type(m).__name__)
    assert m.shape == (3, 3), tr("padding_mask([2, 0, 3], T=3) must have shape (B, T) = (3, 3), got {shape}", shape=m.shape)
    assert m.dtype == bool, tr("padding_mask must return a boolean array, got dtype {dtype}", dtype=m.dtype)
    if not np.array_equal(m, expected):
        if np.array_equal(m, ~expected):  # a hint only for the output it explains
            hint = tr("True and False are swapped: the mask was read as True = padded, while here "
                      "True means 'real token'.")
        elif np.array_equal(m, np.arange(3)[None, :] <= np.array([2, 0, 3])[:, None]):
            hint = tr("t <= lengths[b] marks the first padded position as a real token; the real "
                      "tokens are t < lengths[b].")
        else:
            hint = ""
        raise AssertionError(
            tr("padding_mask([2, 0, 3], 3) should be\n{expected}\n([b, t] True iff t < lengths[b]), "
               "got\n{m}", expected=expected, m=m) + ("\n" + hint if hint else ""))
    m = padding_mask(np.array([1, 4]), 4)
    assert np.array_equal(m, [[True, False, False, False], [True, True, True, True]]), (
        tr("padding_mask(np.array([1, 4]), 4) should be [[T, F, F, F], [T, T, T, T]], got\n{m}", m=m))
print(tr("{name}: visible checks passed", name='padding_mask'))

# %% nbgrader={"grade": true, "grade_id": "padding_mask_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of padding_mask run when your notebook is graded.
problem = before_grading("padding_mask", [1, 2], 3)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("padding_mask", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "combine_masks_text", "locked": true, "schema_version": 3, "solution": false}
# ## 4. `combine_masks` ({{ points: combine_masks }})
#
# A decoder trained on a padded batch needs both masks: query $i$ of sequence $b$ may attend
# to key $j$ if and only if $j \le i$ **and** key $j$ is a real token,
#
# $$M_{bij} = C_{ij} \wedge P_{bj}.$$
#
# The causal mask `(T, T)` and the padding mask `(B, T)` broadcast to `(B, T, T)` once the
# missing axes are inserted in the right places: the padding must line up with the **last**
# axis, the keys. Lining it up with the middle axis (the queries) gives the same shape and
# blocks the wrong entries (trap 5). For a sequence of length 0 every row of its mask is
# False: that is where the softmax's rule for rows that are all $-\infty$ is needed.

# %% nbgrader={"grade": false, "grade_id": "combine_masks_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: combine_masks }}

# %% nbgrader={"grade": false, "grade_id": "combine_masks_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of combine_masks: shape (B, T, T), AND, padding on the keys."""
with visible_checks("combine_masks", 5):
    causal = np.array([[True, False, False],
                       [True, True, False],
                       [True, True, True]])
    padding = np.array([[True, True, False],     # sequence 0: length 2
                        [True, True, True]])     # sequence 1: length 3
    m = combine_masks(causal, padding)
    expected = np.array([[[True, False, False],
                          [True, True, False],
                          [True, True, False]],   # key 2 of sequence 0 is padding: column 2 is False
                         causal])
    assert isinstance(m, np.ndarray) and m.shape == (2, 3, 3), (
        tr("combine_masks of a (3, 3) causal mask and a (2, 3) padding mask must have shape (B, T, "
            "T) = (2, 3, 3), got {shape}",
            shape=np.shape(m)))
    assert m.dtype == bool, tr("combine_masks must return a boolean array, got dtype {dtype}", dtype=m.dtype)
    if np.array_equal(m[0], [[True, False, False], [True, True, False], [False, False, False]]):
        raise AssertionError(
            tr("combine_masks applied the padding to the queries (row 2 of sequence 0 is all False) "
                "instead of the keys (column 2 should be False): insert the new axis so that the padding "
                "lines up with the last axis (trap 5)."))
    assert np.array_equal(m, expected), (
        tr("combine_masks should give, for sequence 0,\n{expected}\nand for sequence 1 the causal "
            "mask; got\n{m}\n[b, i, j] = causal[i, j] and padding[b, j].",
            expected=expected[0], m=m))
print(tr("{name}: visible checks passed", name='combine_masks'))

# %% nbgrader={"grade": true, "grade_id": "combine_masks_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of combine_masks run when your notebook is graded.
problem = before_grading("combine_masks", np.ones((3, 3), bool), np.ones((2, 3), bool))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("combine_masks", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "scaled_dot_product_attention_text", "locked": true, "schema_version": 3, "solution": false}
# ## 5. `scaled_dot_product_attention` ({{ points: scaled_dot_product_attention }})
#
# Queries $Q \in \mathbb{R}^{T_q \times d_k}$ are compared with keys
# $K \in \mathbb{R}^{T_k \times d_k}$, and the result mixes the values
# $V \in \mathbb{R}^{T_k \times d_v}$ (Vaswani et al., 2017):
#
# $$S = \frac{Q K^\top}{\sqrt{d_k}}, \qquad P = \operatorname{softmax}(S) \ \text{ row by row (over the keys)}, \qquad \text{out} = P V.$$
#
# Row $i$ of `out` is an average of the rows of $V$, weighted by how well query $i$ matches each
# key. The rows of $P$ sum to 1.
#
# **Why divide by $\sqrt{d_k}$.** Take the components of $q$ and $k$ independent, with mean 0
# and variance 1. The score $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$ is a sum of $d_k$ independent
# terms, each of mean $\mathbb{E}[q_i]\,\mathbb{E}[k_i] = 0$ and variance
# $\mathbb{E}[q_i^2]\,\mathbb{E}[k_i^2] = 1$, so
#
# $$\operatorname{Var}(q \cdot k) = d_k .$$
#
# The typical gap between two scores grows like $\sqrt{d_k}$, and the ratio of two weights is
# $p_a / p_b = e^{s_a - s_b}$: with wide vectors the softmax becomes nearly one-hot, it
# *saturates*. A saturated softmax stops learning, because $\partial p_j / \partial s_j =
# p_j (1 - p_j)$ is close to 0 when $p_j$ is close to 0 or 1. Dividing by $\sqrt{d_k}$ brings
# the variance back to 1 whatever the width. The lesson measured, over 400 draws of $T = 64$
# queries and keys: $\operatorname{Var}(q \cdot k)$ = 7.98, 63.99 and 512.59 for $d_k$ = 8, 64
# and 512. At $d_k = 512$ the largest weight of a row was 0.9303 on average without scaling
# and 0.1075 with it, and the softmax sensitivity $\sum_j p_j (1 - p_j)$ was 0.0998 without
# scaling and 0.9611 with it (the most it can be is $1 - 1/64 = 0.9844$, for uniform weights).
# Forgetting the factor raises nothing (trap 1). The argument `scale=False` drops it; the
# training assignment uses it for an ablation.
#
# **Masks go in before the softmax.** Where `mask` is False, set the score to $-\infty$, then
# take the softmax. Zeroing weights after the softmax leaves rows that sum to less than 1,
# and raises nothing either (trap 2).
#
# **Shapes.** Any leading batch axes `...` must work. Transpose only the last two axes of
# $K$ (`np.swapaxes(K, -1, -2)`); `K.T` reverses every axis of a batched array. The `@`
# operator broadcasts leading axes, and the mask broadcasts to `(..., T_q, T_k)`.
#
# **Cost.** $S$ has $T_q \times T_k$ entries, so time and memory grow as $T^2$. The lesson
# measured log-log slopes of time against $T$ between 1.97 and 2.06 for $T$ = 128, 512 and
# 2048 ($d_k = 64$, float64); at $T = 2048$ the $T \times T$ matrix takes 32 MiB against
# 3 MiB for $Q$, $K$ and $V$ together.
#
# Return `(out, weights)`.

# %% nbgrader={"grade": false, "grade_id": "scaled_dot_product_attention_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: scaled_dot_product_attention }}

# %% nbgrader={"grade": false, "grade_id": "scaled_dot_product_attention_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of scaled_dot_product_attention: a worked example, scale, mask, batch axes, dtype."""
with visible_checks("scaled_dot_product_attention", 5):
    r = math.log(3.0) / 2
    Q = np.array([[1.0, 1.0, 1.0, 1.0]])                 # (T_q, d_k) = (1, 4)
    K = np.array([[0.0, 0.0, 0.0, 0.0], [r, r, r, r]])   # (T_k, d_k) = (2, 4): q.k = 0 and 2 ln 3
    V = np.array([[0.0, 4.0], [4.0, 0.0]])               # (T_k, d_v) = (2, 2)
    out, w = returned(scaled_dot_product_attention(Q, K, V),
                      "scaled_dot_product_attention", "out", "weights")
    assert np.shape(out) == (1, 2) and np.shape(w) == (1, 2), (
        tr("Q (1, 4), K (2, 4), V (2, 2) must give out (T_q, d_v) = (1, 2) and weights (T_q, T_k) = "
            "(1, 2), got {shape} and {shape2}",
            shape=np.shape(out), shape2=np.shape(w)))
    if np.allclose(w, [[1.0, 1.0]]):
        raise AssertionError(
            tr("the weights of the single query are [[1, 1]]: the softmax normalised over the queries "
                "(axis -2) instead of the keys (the last axis), trap 6. Each row of weights must sum to "
                "1."))
    if np.allclose(w, [[0.1, 0.9]]):
        raise AssertionError(
            tr("the weights are [[0.1, 0.9]]: the scores 0 and 2 ln 3 were not divided by sqrt(d_k) = 2 "
                "(trap 1: missing 1/sqrt(d_k)). Scaled, they are 0 and ln 3, giving [[0.25, 0.75]]."))
    assert np.allclose(w, [[0.25, 0.75]]), (
        tr("the scores are q.k / sqrt(4) = [0, ln 3], so the weights should be [[0.25, 0.75]]; got "
            "{w}",
            w=w))
    assert np.allclose(out, [[3.0, 1.0]]), (
        tr("out = weights @ V = 0.25 * [0, 4] + 0.75 * [4, 0] = [[3, 1]]; got {out}", out=out))

    _, w = returned(scaled_dot_product_attention(Q, K, V, scale=False),
                    "scaled_dot_product_attention", "out", "weights")
    assert np.allclose(w, [[0.1, 0.9]]), (
        tr("with scale=False the scores are [0, 2 ln 3] and the weights [[0.1, 0.9]]; got {w}", w=w))

    out, w = returned(scaled_dot_product_attention(Q, K, V, mask=np.array([[True, False]])),
                      "scaled_dot_product_attention", "out", "weights")
    if np.allclose(w, [[0.25, 0.0]]):
        raise AssertionError(
            tr("with mask [[True, False]] the weights are [[0.25, 0]]: the masked weight was zeroed "
                "after the softmax, so the row sums to 0.25 (trap 2 of the introduction)."))
    if np.allclose(w, [[0.0, 1.0]]):
        raise AssertionError(
            tr("with mask [[True, False]] the weights are [[0, 1]]: the mask was read as True = "
                "blocked. Here True means 'may attend', so key 0 keeps all the weight."))
    assert np.allclose(w, [[1.0, 0.0]]) and np.allclose(out, [[0.0, 4.0]]), (
        tr("with mask [[True, False]] only key 0 may be attended: weights [[1, 0]], out [[0, 4]]; "
            "got {w} and {out}",
            w=w, out=out))

    rng = np.random.default_rng(0)
    Q = rng.standard_normal((2, 3, 4, 8))                # (B, h, T_q, d_k)
    K = rng.standard_normal((2, 3, 5, 8))                # (B, h, T_k, d_k)
    V = rng.standard_normal((2, 3, 5, 6))                # (B, h, T_k, d_v)
    out, w = returned(scaled_dot_product_attention(Q, K, V),
                      "scaled_dot_product_attention", "out", "weights")
    assert out.shape == (2, 3, 4, 6) and w.shape == (2, 3, 4, 5), (
        tr("Q (2, 3, 4, 8), K (2, 3, 5, 8), V (2, 3, 5, 6) must give out (2, 3, 4, 6) and weights "
            "(2, 3, 4, 5), got {shape} and {shape2}. With batch axes, K.T reverses every axis, not "
            "only the last two (re-read *Shapes* above).",
            shape=out.shape, shape2=w.shape))
    assert np.allclose(w.sum(axis=-1), 1.0), (
        tr("every row of weights (over the keys, the last axis) must sum to 1; got row sums {w}. "
            "Sums over the queries equal to 1 mean trap 6 (softmax over axis -2).",
            w=np.round(w.sum(axis=-1)[0, 0], 4)))

    causal = np.tril(np.ones((5, 5), dtype=bool))
    _, w = returned(scaled_dot_product_attention(K, K, V, mask=causal),
                    "scaled_dot_product_attention", "out", "weights")   # T_q = T_k = 5
    assert np.all(w[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0), (
        tr("with a causal mask, weights above the diagonal (keys in the future) must be exactly 0"))
    sums = w.sum(axis=-1)
    assert np.allclose(sums, 1.0), (
        tr("with a causal mask every row must still sum to 1; got row sums {w}.",
           w=np.round(sums.reshape(-1, 5)[0], 4)))

    out, w = returned(scaled_dot_product_attention(Q.astype(np.float32), K.astype(np.float32), V.astype(np.float32)),
                      "scaled_dot_product_attention", "out", "weights")
    assert out.dtype == np.float32 and w.dtype == np.float32, (
        tr("float32 inputs must give float32 outputs, got {dtype} and {dtype2}", dtype=out.dtype, dtype2=w.dtype))
print(tr("{name}: visible checks passed", name='scaled_dot_product_attention'))

# %% nbgrader={"grade": true, "grade_id": "scaled_dot_product_attention_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of scaled_dot_product_attention run when your notebook is graded.
problem = before_grading("scaled_dot_product_attention", np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 2)))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("scaled_dot_product_attention", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_scaling_text", "locked": true, "schema_version": 3, "solution": false}
# ### The lesson, live: what $1/\sqrt{d_k}$ does
#
# The next cell draws 400 random sets of $T = 64$ queries and keys with standard normal
# components (a seeded generator) and measures $\operatorname{Var}(q \cdot k)$ for three widths
# (the smaller widths use the first $d_k$ components of the same draws). It then applies your
# `softmax` to the $d_k = 512$ scores, with and without the factor $1/\sqrt{d_k}$. Its random draws are not the lesson's, so expect agreement with the lesson's
# figures to within a few percent, not digit for digit.

# %% nbgrader={"grade": false, "grade_id": "lesson_scaling", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""The lesson, live: Var(q.k) = d_k, and the softmax saturation at d_k = 512 with and without scaling."""
with time_limit(30, lesson=True):
    rng = np.random.default_rng(0)
    n_draws, T = 400, 64
    Q = rng.standard_normal((n_draws, T, 512))                  # (draws, T, d_k): the first d_k columns
    K = rng.standard_normal((n_draws, T, 512))                  # serve each of the three widths
    lesson_var = {8: 7.98, 64: 63.99, 512: 512.59}
    print("  d_k   Var(q.k) here   lesson")
    for d_k in (8, 64, 512):
        S = np.einsum("bqd,bkd->bqk", Q[..., :d_k], K[..., :d_k])   # every q.k of a draw: (400, T, T)
        print(f"{d_k:5d}   {S.var():13.2f}   {lesson_var[d_k]:6.2f}")

    # S now holds the unscaled d_k = 512 scores.
    print(f"\nd_k = 512, T = {T}: mean over rows of")
    print("                        largest weight       sum p(1 - p)")
    print("                        here     lesson      here     lesson")
    lesson_sat = {False: (0.9303, 0.0998), True: (0.1075, 0.9611)}
    for scale in (False, True):
        P = softmax(S / math.sqrt(512) if scale else S)
        top = P.max(axis=-1).mean()
        sensitivity = (P * (1 - P)).sum(axis=-1).mean()
        label = "with 1/sqrt(d_k)   " if scale else "without scaling    "
        print(f"{label}     {top:.4f}   {lesson_sat[scale][0]:.4f}      {sensitivity:.4f}   {lesson_sat[scale][1]:.4f}")
    print(f"uniform weights (the most sum p(1 - p) can be):          {1 - 1 / T:.4f}")
    del Q, K, S, P

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_saturation_text", "locked": true, "schema_version": 3, "solution": false}
# ### The lesson, live: saturation as $d_k$ grows
#
# The same measurement for every width from $d_k = 4$ to $512$, as a figure: the largest
# weight of a row and the sensitivity $\sum_j p_j (1 - p_j)$, averaged over 100 draws of
# $T = 64$ queries and keys, with and without the factor $1/\sqrt{d_k}$, computed with your
# `softmax`. Without the factor the largest weight climbs towards 1 and the sensitivity falls
# towards 0 as $d_k$ grows; with it both stay where they are at $d_k = 4$.

# %% nbgrader={"grade": false, "grade_id": "lesson_saturation", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""The lesson, live: the largest weight and sum p(1 - p) against d_k, with and without 1/sqrt(d_k)."""
with time_limit(8, lesson=True):
    rng = np.random.default_rng(2)
    n_draws, T = 100, 64
    widths = [4, 8, 16, 32, 64, 128, 256, 512]
    Q = rng.standard_normal((n_draws, T, widths[-1]))         # (draws, T, d_k): the first d_k
    K = rng.standard_normal((n_draws, T, widths[-1]))         # columns serve each width
    curves = {False: ([], []), True: ([], [])}                # scale -> (largest weight, sensitivity)
    for d_k in widths:
        S = np.einsum("bqd,bkd->bqk", Q[..., :d_k], K[..., :d_k])   # (draws, T, T)
        for scale in (False, True):
            P = softmax(S / math.sqrt(d_k) if scale else S)
            curves[scale][0].append(P.max(axis=-1).mean())
            curves[scale][1].append((P * (1 - P)).sum(axis=-1).mean())
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")
    for scale, style, label in ((False, "o-", "scores q.k"), (True, "s-", "scores q.k / sqrt(d_k)")):
        left.plot(widths, curves[scale][0], style, label=label)
        right.plot(widths, curves[scale][1], style, label=label)
    right.axhline(1 - 1 / T, color="grey", linestyle=":", label="uniform weights, 1 - 1/T")
    for axis, title in ((left, "largest weight of a row"), (right, "sensitivity: sum p (1 - p)")):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("d_k")
        axis.set_title(title)
        axis.set_ylim(0, 1.02)
        axis.grid(alpha=0.3)
    left.legend(loc="center left")
    figure.suptitle(f"Your softmax on T = {T} random queries and keys, mean of {n_draws} draws")
    show(figure)
    print("  d_k   largest weight (unscaled, scaled)   sum p(1 - p) (unscaled, scaled)")
    for i, d_k in enumerate(widths):
        print(f"{d_k:5d}        {curves[False][0][i]:.4f}   {curves[True][0][i]:.4f}"
              f"                   {curves[False][1][i]:.4f}   {curves[True][1][i]:.4f}")
    del Q, K, S, P

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_mask_order_text", "locked": true, "schema_version": 3, "solution": false}
# ### The lesson, live: mask before the softmax, not after
#
# A 5×5 causal example with random scores. The cell compares the weights of your
# `scaled_dot_product_attention` with `causal_mask(5)` against the trap: the softmax of the
# unmasked scores, with the future positions multiplied by 0 afterwards. Look at the row
# sums. In the lesson's own example the second row of the trap summed to 0.031; the scores
# here are different, so the sums are too, but the pattern is the same: only the last row,
# which masks nothing, still sums to 1, and no error is raised.

# %% nbgrader={"grade": false, "grade_id": "lesson_mask_order", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""The lesson, live: masking before the softmax (-inf) against zeroing weights after it."""
with time_limit(10, lesson=True):
    rng = np.random.default_rng(1)
    Q5 = rng.standard_normal((5, 4))
    K5 = rng.standard_normal((5, 4))
    V5 = rng.standard_normal((5, 3))
    mask5 = causal_mask(5)
    _, before = scaled_dot_product_attention(Q5, K5, V5, mask=mask5)
    after = softmax(Q5 @ K5.T / math.sqrt(4)) * mask5          # trap 2: zero the future after the softmax
    with np.printoptions(precision=3, suppress=True):
        print("weights, masked before the softmax:\n", before)
        print("weights, zeroed after the softmax:\n", after)
        print("row sums, before:", before.sum(axis=-1))
        print("row sums, after: ", after.sum(axis=-1))

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_mask_figure_text", "locked": true, "schema_version": 3, "solution": false}
# The same two weight matrices as pictures: each row is a query, each column a key, and the
# number in a cell is its weight. Masked before the softmax, every row spreads a total weight
# of 1 over the keys it may see; zeroed after it, the rows lose what the future keys held.

# %% nbgrader={"grade": false, "grade_id": "lesson_mask_figure", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""The lesson, live: the weights of the causal example above, masked before and zeroed after the softmax."""
with time_limit(10, lesson=True):
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for axis, weights, title in ((axes[0], before, "masked before the softmax"),
                                 (axes[1], after, "zeroed after the softmax (trap 2)")):
        axis.imshow(weights, cmap="Blues", vmin=0, vmax=1)
        for i in range(weights.shape[0]):
            for j in range(weights.shape[1]):
                axis.text(j, i, f"{weights[i, j]:.2f}", ha="center", va="center",
                          color="white" if weights[i, j] > 0.6 else "black", fontsize=9)
        axis.set_xticks(range(weights.shape[1]))
        axis.set_yticks(range(weights.shape[0]),
                        [f"query {i} (sum {s:.2f})" for i, s in enumerate(weights.sum(axis=-1))])
        axis.set_xlabel("key")
        axis.set_title(title)
    show(figure)

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_cost_text", "locked": true, "schema_version": 3, "solution": false}
# ### The lesson, live: the $T^2$ cost
#
# The next cell times your `scaled_dot_product_attention` with a causal mask, one sequence,
# $d_k = 64$, float64, for $T$ from 128 to 2048, and keeps the fastest of a few runs of each
# (the machine's other work can only make a run slower). It fits a straight line to
# $\log(\text{time})$ against $\log T$: a cost that grows as $T^2$ has slope 2, and each
# doubling of $T$ multiplies the time by 4. The lesson measured slopes between 1.97 and 2.06
# on $T$ = 128, 512 and 2048. Your times depend on your machine, and so can the slope: once
# the $T \times T$ arrays outgrow the processor's cache (8 MiB each at $T = 1024$), every
# entry costs more than while they fit, and the doublings past that point cost more than 4
# times (a slope of about 2.5 is common). A slope far below 2 means the small sizes were
# slowed by something else: the machine was busy, or NumPy ran its products on several
# threads; run the cell again.

# %% nbgrader={"grade": false, "grade_id": "lesson_cost", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""The lesson, live: time of scaled_dot_product_attention against T, and the slope of the log-log fit."""
import time

with time_limit(8, lesson=True):
    rng = np.random.default_rng(3)
    d_k = 64
    lengths, repeats, best = [128, 256, 512, 1024, 2048], [50, 30, 15, 6, 3], []
    print("    T   runs   fastest (ms)   T x T weights (MiB)")
    for T, runs in zip(lengths, repeats):
        Q, K, V = (rng.standard_normal((T, d_k)) for _ in range(3))
        mask = causal_mask(T)
        scaled_dot_product_attention(Q, K, V, mask=mask)          # a first run, not timed
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            scaled_dot_product_attention(Q, K, V, mask=mask)
            times.append(time.perf_counter() - start)
        best.append(min(times))
        print(f"{T:5d}   {runs:4d}   {1000 * best[-1]:12.2f}   {T * T * 8 / 2**20:19.2f}")
    slope, intercept = np.polyfit(np.log(lengths), np.log(best), 1)
    print(f"slope of log(time) against log(T): {slope:.2f}   (T^2: 2; the lesson: 1.97 to 2.06)")
    for shorter, longer, t0, t1 in zip(lengths, lengths[1:], best, best[1:]):
        print(f"  T {shorter} -> {longer}: time x {t1 / t0:.1f}   (T^2: x 4)")
    figure, axis = plt.subplots(figsize=(6, 4), layout="constrained")
    axis.loglog(lengths, [1000 * t for t in best], "o", label="your function (fastest run)")
    fitted = np.exp(intercept) * np.array(lengths, dtype=float) ** slope
    axis.loglog(lengths, 1000 * fitted, "-", label=f"fitted line, slope {slope:.2f}")
    axis.loglog(lengths, 1000 * best[0] * (np.array(lengths) / lengths[0]) ** 2, ":",
                color="grey", label="slope 2 (T^2)")
    axis.minorticks_off()
    axis.set_xticks(lengths, [str(T) for T in lengths])
    axis.set_xlabel("T (tokens)")
    axis.set_ylabel("time (ms)")
    axis.set_title(f"scaled_dot_product_attention, causal mask, d_k = {d_k}, float64")
    axis.legend()
    axis.grid(alpha=0.3, which="both")
    show(figure)
    del Q, K, V, mask

# %% [markdown] nbgrader={"grade": false, "grade_id": "exercise_weight_ratio_text", "locked": true, "schema_version": 3, "solution": false}
# ## Exercise 1: how far apart are two weights? ({{ points: exercise_weight_ratio }})
#
# Take $d_k = 64$ and $q$, $k$ with independent components of mean 0 and variance 1. Two keys
# $k_a$ and $k_b$ have scores $q \cdot k_a$ and $q \cdot k_b$ that differ by two standard
# deviations of the score distribution (the distribution of $q \cdot k$ derived above). What
# is the ratio of their attention weights, the larger over the smaller,
#
# 1. without scaling, when the scores are $q \cdot k$? Assign it to `weight_ratio_unscaled`.
# 2. with scaling, when the scores are $q \cdot k / \sqrt{d_k}$? Assign it to `weight_ratio_scaled`.
#
# The other keys do not matter: the ratio of two softmax weights depends only on the
# difference of their two scores. Assign numbers (use `math` rather than rounding by hand).
# The feedback shows the worked solution.

# %% nbgrader={"grade": false, "grade_id": "exercise_weight_ratio_answer", "locked": false, "schema_version": 3, "solution": true}
# Exercise 1: assign your two answers (numbers).
# weight_ratio_unscaled = ...
# weight_ratio_scaled = ...
### BEGIN SOLUTION
# The ratio of two softmax weights is exp(difference of their scores). Unscaled, q.k has
# variance d_k = 64, so its standard deviation is 8 and two of them make a gap of 16.
weight_ratio_unscaled = math.exp(16.0)   # 8,886,110.5
# Divided by sqrt(d_k) = 8, the scores have standard deviation 1 and the gap is 2.
weight_ratio_scaled = math.exp(2.0)      # 7.389
### END SOLUTION

# %% nbgrader={"grade": false, "grade_id": "exercise_weight_ratio_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of Exercise 1: both answers are defined and are numbers (their values are checked when graded)."""
with visible_checks("exercise_weight_ratio"):
    for name in ("weight_ratio_unscaled", "weight_ratio_scaled"):
        if name not in globals():
            raise NotAnswered(tr("assign your answer to the variable {name} in the cell above", name=name))
        value = globals()[name]
        assert isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool), (
            tr("{name} should be a number (int or float), got {type}", name=name, type=type(value).__name__))
        assert math.isfinite(value) and value > 0, tr("{name} is a ratio of two positive weights: got {value}", name=name, value=value)
    print(tr("exercise_weight_ratio: visible checks passed (the values are checked when graded)"))

# %% nbgrader={"grade": true, "grade_id": "exercise_weight_ratio_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of exercise_weight_ratio run when your notebook is graded.
problem = before_grading("exercise_weight_ratio", answers=("weight_ratio_unscaled", "weight_ratio_scaled"))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("exercise_weight_ratio", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "split_heads_text", "locked": true, "schema_version": 3, "solution": false}
# ## 6. `split_heads` ({{ points: split_heads }})
#
# One attention gives each pair of tokens one similarity. Multi-head attention runs $h$
# attentions side by side, each on its own slice of width $d_h = d / h$ of the projected
# queries, keys and values, so that different heads can attend to different positions for
# different reasons. The projections $W_Q, W_K, W_V, W_O$ stay $d \times d$: $h$ heads of
# width $d/h$ cost the same $4d^2$ projection parameters as one head of width $d$.
#
# Head $k$ receives columns $k\,d_h, \dots, (k+1)\,d_h - 1$ of every token. For `M` of shape
# `(B, T, d)`:
#
# 1. reshape to `(B, T, h, d_h)`: this cuts the last axis of every token into $h$
#    consecutive slices;
# 2. swap axes 1 and 2 (`transpose(0, 2, 1, 3)`) to get `(B, h, T, d_h)`, so that the head
#    axis becomes a batch axis for `@`.
#
# Reshaping straight to `(B, h, T, d_h)` gives the same shape and the wrong content: NumPy
# fills the new shape in memory order, so "head 0" would receive the first $T \cdot d_h$
# numbers of the sequence, which are whole tokens rather than a slice of each token (trap 3).
# With $h = 1$ both orders give the same array, which is why every test in this part uses
# $h > 1$ (and $B > 1$).
#
# Raise `ValueError` when $d$ is not divisible by $h$.

# %% nbgrader={"grade": false, "grade_id": "split_heads_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: split_heads }}

# %% nbgrader={"grade": false, "grade_id": "split_heads_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of split_heads: shape, which columns each head gets (h = 2, B = 2), ValueError."""
with visible_checks("split_heads", 5):
    M = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)   # (B, T, d) = (2, 3, 4); M[0, 0] = [0, 1, 2, 3]
    S = split_heads(M, 2)
    assert np.shape(S) == (2, 2, 3, 2), (
        tr("split_heads of (B, T, d) = (2, 3, 4) with h = 2 must have shape (B, h, T, d_h) = (2, 2, "
            "3, 2), got {shape}",
            shape=np.shape(S)))
    if np.array_equal(S[0, 1, 0], [6.0, 7.0]):
        raise AssertionError(
            tr("head 1 of token 0 is [6, 7], numbers that belong to token 1: M was reshaped straight to "
                "(B, h, T, d_h). Reshape to (B, T, h, d_h) first, then swap axes 1 and 2 (trap 3)."))
    assert np.array_equal(S[0, 1, 0], [2.0, 3.0]), (
        tr("head 1 of token 0 of sequence 0 is columns 2..3 of M[0, 0] = [0, 1, 2, 3], i.e. [2, 3]; "
            "got {S}",
            S=S[0, 1, 0]))
    for k in range(2):
        assert np.array_equal(S[:, k], M[:, :, 2 * k: 2 * k + 2]), (
            tr("head {k} must hold columns {k2}..{k3} of every token", k=k, k2=2 * k, k3=2 * k + 1))
    try:
        split_heads(M, 3)
    except ValueError:
        pass
    else:
        raise AssertionError(tr("split_heads(M, 3) with d = 4 must raise ValueError: 4 is not divisible by 3"))
print(tr("{name}: visible checks passed", name='split_heads'))

# %% nbgrader={"grade": true, "grade_id": "split_heads_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of split_heads run when your notebook is graded.
problem = before_grading("split_heads", np.ones((1, 2, 4)), 2)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("split_heads", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "merge_heads_text", "locked": true, "schema_version": 3, "solution": false}
# ## 7. `merge_heads` ({{ points: merge_heads }})
#
# The way back: from `(B, h, T, d_h)`, swap axes 1 and 2 back to `(B, T, h, d_h)`, then
# reshape to `(B, T, h \cdot d_h)`. For every token the outputs of the heads end up side by
# side, head 0 first. The order matters as much as in the split: reshaping before swapping
# keeps the shape and mixes tokens with heads (trap 3). `merge_heads(split_heads(M, h))` must
# give back `M` exactly.

# %% nbgrader={"grade": false, "grade_id": "merge_heads_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: merge_heads }}

# %% nbgrader={"grade": false, "grade_id": "merge_heads_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of merge_heads: shape, which head goes where (h = 2, B = 2), the round trip."""
with visible_checks("merge_heads", 5):
    H = np.arange(2 * 2 * 3 * 2, dtype=np.float64).reshape(2, 2, 3, 2)   # (B, h, T, d_h)
    # H[0, 0, 0] = [0, 1] (head 0 of token 0) and H[0, 1, 0] = [6, 7] (head 1 of token 0)
    out = merge_heads(H)
    assert np.shape(out) == (2, 3, 4), (
        tr("merge_heads of (B, h, T, d_h) = (2, 2, 3, 2) must have shape (B, T, h * d_h) = (2, 3, "
            "4), got {shape}",
            shape=np.shape(out)))
    if np.array_equal(out[0, 0], [0.0, 1.0, 2.0, 3.0]):
        raise AssertionError(
            tr("token 0 of sequence 0 is [0, 1, 2, 3]: the reshape ran before the transpose, so token 0 "
                "got tokens 0 and 1 of head 0. Swap axes 1 and 2 back first, then reshape (trap 3)."))
    assert np.array_equal(out[0, 0], [0.0, 1.0, 6.0, 7.0]), (
        tr("token 0 of sequence 0 is head 0 of token 0, [0, 1], then head 1 of token 0, [6, 7]: [0, "
            "1, 6, 7]; got {out}",
            out=out[0, 0]))
    M = np.random.default_rng(0).standard_normal((2, 5, 6))
    uses_checked("split_heads", "merge_heads")
    back = merge_heads(split_heads(M, 3))
    assert back.shape == M.shape and np.array_equal(back, M), (
        tr("merge_heads(split_heads(M, 3)) must give back M exactly (this uses your split_heads too)"))
print(tr("{name}: visible checks passed", name='merge_heads'))

# %% nbgrader={"grade": true, "grade_id": "merge_heads_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of merge_heads run when your notebook is graded.
problem = before_grading("merge_heads", np.ones((1, 2, 3, 2)))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("merge_heads", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "multi_head_attention_text", "locked": true, "schema_version": 3, "solution": false}
# ## 8. `multi_head_attention` ({{ points: multi_head_attention }})
#
# Put the pieces together. With $X$ of shape `(B, T, d)`:
#
# $$Q = X W_Q, \quad K = X W_K, \quad V = X W_V \qquad \text{(each } (B, T, d)\text{, split into heads } (B, h, T, d_h)\text{)},$$
#
# $$\text{head}_k = \operatorname{softmax}\!\left(\frac{Q_k K_k^\top}{\sqrt{d_h}}\right) V_k, \qquad Y = \operatorname{merge}(\text{head}_1, \dots, \text{head}_h)\, W_O .$$
#
# No biases here (they come with `attention_forward`). Return $Y$ `(B, T, d)` and the weights
# `(B, h, T, T)`. Reuse `split_heads`, `scaled_dot_product_attention` and `merge_heads`.
#
# Scale by $\sqrt{d_h}$, the width of the vectors whose dot products are taken, not by
# $\sqrt{d}$: the latter is the fault the graders call `missing-scale`.
#
# The mask applies to every head. A `(T, T)` mask broadcasts against scores of shape
# `(B, h, T, T)` on its own. A `(B, T, T)` mask needs the head axis inserted,
# `mask[:, None]` of shape `(B, 1, T, T)`. Without it NumPy aligns the shapes from the right,
# so the batch axis of the mask meets the head axis of the scores: an error when $B \ne h$,
# and worse, a silent mix-up (the mask of sequence $b$ applied to head $b$) when $B = h$.

# %% nbgrader={"grade": false, "grade_id": "multi_head_attention_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: multi_head_attention }}

# %% nbgrader={"grade": false, "grade_id": "multi_head_attention_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of multi_head_attention: a worked example (uniform weights), then head by head (h = 2, B = 2)."""
with visible_checks("multi_head_attention", 5):
    uses_checked("scaled_dot_product_attention", "multi_head_attention")
    uses_checked("split_heads", "multi_head_attention")
    uses_checked("merge_heads", "multi_head_attention")
    B, T, d, h = 2, 3, 4, 2
    X = np.arange(B * T * d, dtype=np.float64).reshape(B, T, d)   # X[0] = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    Z, I = np.zeros((d, d)), np.eye(d)
    causal = np.tril(np.ones((T, T), dtype=bool))
    # W_Q = W_K = 0: every score is 0, so each query spreads its weight evenly over the keys it may see.
    # W_V = W_O = I: Y is then the average of the tokens each query sees, a running mean with the causal mask.
    Y, w = returned(multi_head_attention(X, Z, Z, I, I, n_heads=h, mask=causal),
                    "multi_head_attention", "Y", "weights")
    assert np.shape(Y) == (B, T, d) and np.shape(w) == (B, h, T, T), (
        tr("X (2, 3, 4) with 2 heads must give Y (B, T, d) = (2, 3, 4) and weights (B, h, T, T) = "
            "(2, 2, 3, 3), got {shape} and {shape2}",
            shape=np.shape(Y), shape2=np.shape(w)))
    assert np.allclose(w[1, 1, 2], [1 / 3, 1 / 3, 1 / 3]) and np.allclose(w[1, 0, 0], [1.0, 0.0, 0.0]), (
        tr("with all scores 0 and a causal mask, query 0 puts weight 1 on key 0 and query 2 puts "
            "1/3 on each of keys 0, 1, 2, in every head; got {w} and {w2}",
            w=w[1, 0, 0], w2=w[1, 1, 2]))
    assert np.allclose(Y[0], [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7]]), (
        tr("with W_Q = W_K = 0, W_V = W_O = I and a causal mask, Y[0] is the running mean of the "
            "tokens of X[0]: [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7]]; got\n{Y}",
            Y=Y[0]))
    Y, _ = returned(multi_head_attention(X, Z, Z, I, I, n_heads=h),
                    "multi_head_attention", "Y", "weights")
    assert np.allclose(Y[0], [[4, 5, 6, 7]] * 3), (
        tr("without a mask every token of Y[0] is the mean of X[0], [4, 5, 6, 7]; got\n{Y}", Y=Y[0]))

    rng = np.random.default_rng(0)
    B, T, d, h = 2, 5, 8, 2
    X = rng.standard_normal((B, T, d))
    W_Q, W_K, W_V, W_O = (rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4))
    lengths = np.array([5, 3])
    padding = np.arange(T)[None, :] < lengths[:, None]                                # (B, T)
    mask = np.tril(np.ones((T, T), dtype=bool))[None] & padding[:, None, :]            # (B, T, T)
    Y, w = returned(multi_head_attention(X, W_Q, W_K, W_V, W_O, n_heads=h, mask=mask),
                    "multi_head_attention", "Y", "weights")
    d_h = d // h
    heads = []
    for k in range(h):            # head k: columns k*d_h .. (k+1)*d_h - 1 of the projections
        cols = slice(k * d_h, (k + 1) * d_h)
        out_k, _ = returned(scaled_dot_product_attention((X @ W_Q)[..., cols], (X @ W_K)[..., cols], (X @ W_V)[..., cols],
                                                         mask=mask),
                            "scaled_dot_product_attention", "out", "weights")
        heads.append(out_k)
    expected = np.concatenate(heads, axis=-1) @ W_O
    assert np.allclose(Y, expected), (
        tr("with random weights, 2 heads and a (B, T, T) mask, Y differs from running "
            "scaled_dot_product_attention head by head (largest difference {Y:.3g}). Likely causes: "
            "reshape/transpose in the wrong order (trap 3), sqrt(d) instead of sqrt(d_h), or a (B, "
            "T, T) mask used without inserting the head axis.",
            Y=np.max(np.abs(Y - expected))))
print(tr("{name}: visible checks passed", name='multi_head_attention'))

# %% nbgrader={"grade": true, "grade_id": "multi_head_attention_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of multi_head_attention run when your notebook is graded.
problem = before_grading("multi_head_attention", np.ones((1, 2, 4)), np.eye(4), np.eye(4), np.eye(4), np.eye(4), 2)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("multi_head_attention", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_permutation_text", "locked": true, "schema_version": 3, "solution": false}
# ### The lesson, live: attention has no sense of order
#
# Nothing in the formulas above looks at positions. Reorder the tokens with a permutation
# matrix $\Pi$: the projections follow ($(\Pi X) W = \Pi (X W)$), the scores are permuted on
# both axes ($\Pi S \Pi^\top$), the softmax of each row moves with its row, and since
# $\Pi^\top \Pi = I$ the outputs come out permuted the same way:
#
# $$\operatorname{attn}(\Pi X) = \Pi \operatorname{softmax}(S) \Pi^\top \Pi V = \Pi \operatorname{attn}(X).$$
#
# Self-attention is *permutation-equivariant* (the lesson measured the identity to 4.4e-16 in
# float64), while $\operatorname{attn}(\Pi X) \ne \operatorname{attn}(X)$: a sequence and any
# shuffle of it give the same set of outputs, in shuffled order. A causal mask breaks the
# symmetry, since what a query may see then depends on its position; but a model still needs
# to know where each token is, which is the subject of the next part. The cell measures both
# with your `multi_head_attention`.

# %% nbgrader={"grade": false, "grade_id": "lesson_permutation", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""The lesson, live: attn(Pi X) = Pi attn(X) without a mask; a causal mask breaks it."""
with time_limit(10, lesson=True):
    rng = np.random.default_rng(2)
    B, T, d, h = 2, 6, 8, 2
    X = rng.standard_normal((B, T, d))
    W = [rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4)]   # W_Q, W_K, W_V, W_O
    perm = np.array([3, 0, 5, 1, 4, 2])                                   # Pi X = X[:, perm]
    Y, _ = multi_head_attention(X, *W, n_heads=h)
    Y_perm, _ = multi_head_attention(X[:, perm], *W, n_heads=h)
    print(f"no mask:     max |attn(Pi X) - Pi attn(X)| = {np.max(np.abs(Y_perm - Y[:, perm])):.1e}")
    print(f"             max |attn(Pi X) - attn(X)|    = {np.max(np.abs(Y_perm - Y)):.1e}")
    mask = causal_mask(T)
    Y, _ = multi_head_attention(X, *W, n_heads=h, mask=mask)
    Y_perm, _ = multi_head_attention(X[:, perm], *W, n_heads=h, mask=mask)
    print(f"causal mask: max |attn(Pi X) - Pi attn(X)| = {np.max(np.abs(Y_perm - Y[:, perm])):.1e}")

# %% [markdown] nbgrader={"grade": false, "grade_id": "sinusoidal_positions_text", "locked": true, "schema_version": 3, "solution": false}
# ## 9. `sinusoidal_positions` ({{ points: sinusoidal_positions }})
#
# To tell positions apart, add to each token's vector a vector that depends only on its
# position $p$. Vaswani et al. use sines and cosines at geometrically spaced frequencies:
#
# $$PE_{p,\,2i} = \sin\!\left(\frac{p}{10000^{2i/d}}\right), \qquad PE_{p,\,2i+1} = \cos\!\left(\frac{p}{10000^{2i/d}}\right).$$
#
# The column pair $(2i, 2i+1)$ turns with angular frequency $\omega_i = 10000^{-2i/d}$: the first
# pair moves a full radian per position, the last ones very slowly (wavelengths from $2\pi$ to
# almost $2\pi \cdot 10000$). Because $(\sin \omega(p+k), \cos \omega(p+k))$ is
# $(\sin \omega p, \cos \omega p)$ rotated by the angle $\omega k$, a shift by $k$ positions is
# the same linear map at every $p$, and
#
# $$PE_p \cdot PE_{p+k} = \sum_i \cos(\omega_i k)$$
#
# (for even $d$) depends on the offset $k$ only.
#
# These vectors need no parameters and exist for every position, including positions past
# the longest training sequence; a learned table of shape `(T_max, d)` has no row for
# $p \ge T_{\max}$. RoPE (Su et al., 2021) goes one step further: instead of adding a vector
# to the token, it rotates each pair of components of $q$ and $k$ by an angle proportional to
# the position, so that $q_m \cdot k_n$ depends on $m - n$ only.
#
# Interleave: even columns hold sines, odd columns cosines (not all the sines and then all
# the cosines). For odd $d$ the last column, index $d - 1$, is even and holds a sine. Return
# float64.

# %% nbgrader={"grade": false, "grade_id": "sinusoidal_positions_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: sinusoidal_positions }}

# %% nbgrader={"grade": false, "grade_id": "sinusoidal_positions_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of sinusoidal_positions: shape, dtype, a worked example, odd d."""
with visible_checks("sinusoidal_positions", 5):
    PE = sinusoidal_positions(3, 4)
    assert np.shape(PE) == (3, 4), tr("sinusoidal_positions(3, 4) must have shape (T, d) = (3, 4), got {shape}", shape=np.shape(PE))
    assert PE.dtype == np.float64, tr("sinusoidal_positions must return float64, got {dtype}", dtype=PE.dtype)
    # d = 4: the frequencies are 1 / 10000^(0/4) = 1 and 1 / 10000^(2/4) = 1/100.
    expected = [0.8414709848, 0.5403023059, 0.0099998333, 0.9999500004]   # sin 1, cos 1, sin 0.01, cos 0.01
    halves = [expected[0], expected[2], expected[1], expected[3]]                # all the sines, then the cosines
    if np.allclose(PE[0], [0.0, 0.0, 1.0, 1.0]) or np.allclose(PE[1], halves):
        raise AssertionError(
            tr("position 0 is [0, 0, 1, 1] or position 1 is [sin 1, sin 0.01, cos 1, cos 0.01]: the "
                "sines fill the first half of the columns and the cosines the second. They alternate: "
                "column 2i holds a sine, column 2i + 1 the cosine of the same angle."))
    assert np.allclose(PE[0], [0.0, 1.0, 0.0, 1.0]), (
        tr("position 0: sin 0 = 0 and cos 0 = 1 alternate, [0, 1, 0, 1]; got {PE}", PE=PE[0]))
    assert np.allclose(PE[1], expected), (
        tr("position 1 with d = 4 should be [sin 1, cos 1, sin 0.01, cos 0.01] = {expected}; got "
            "{PE}. The angle of columns 2i and 2i + 1 is p / 10000^(2i / d).",
            expected=expected, PE=PE[1]))
    assert np.allclose(PE[2], [0.9092974268, -0.4161468365, 0.0199986667, 0.9998000067]), (
        tr("position 2 with d = 4 should be [sin 2, cos 2, sin 0.02, cos 0.02]; got {PE}", PE=PE[2]))
    PE = sinusoidal_positions(2, 3)
    assert np.shape(PE) == (2, 3), tr("sinusoidal_positions(2, 3) must have shape (2, 3), got {shape}", shape=np.shape(PE))
    assert np.allclose(PE[1], [0.8414709848, 0.5403023059, 0.0021544330]), (
        tr("with odd d = 3 the last column is a sine: position 1 is [sin 1, cos 1, sin(1 / "
            "10000^(2/3))] = [0.8415, 0.5403, 0.0021544]; got {PE}",
            PE=PE[1]))
print(tr("{name}: visible checks passed", name='sinusoidal_positions'))

# %% nbgrader={"grade": true, "grade_id": "sinusoidal_positions_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of sinusoidal_positions run when your notebook is graded.
problem = before_grading("sinusoidal_positions", 3, 4)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("sinusoidal_positions", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_positions_text", "locked": true, "schema_version": 3, "solution": false}
# ### The lesson, live: positions break the symmetry
#
# The cell repeats the permutation test after adding your `sinusoidal_positions` to the
# tokens, then prints $PE_p \cdot PE_{p+k}$ at a fixed offset $k$ for several $p$.

# %% nbgrader={"grade": false, "grade_id": "lesson_positions", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""The lesson, live: with positions added, attention sees order; PE_p . PE_(p+k) depends on k only."""
with time_limit(10, lesson=True):
    rng = np.random.default_rng(2)
    B, T, d, h = 2, 6, 8, 2
    X = rng.standard_normal((B, T, d))
    W = [rng.standard_normal((d, d)) / math.sqrt(d) for _ in range(4)]
    perm = np.array([3, 0, 5, 1, 4, 2])
    PE = sinusoidal_positions(T, d)
    Y, _ = multi_head_attention(X + PE, *W, n_heads=h)
    Y_perm, _ = multi_head_attention(X[:, perm] + PE, *W, n_heads=h)   # the tokens move, the positions stay
    print(f"with positions: max |attn(Pi X + PE) - Pi attn(X + PE)| = {np.max(np.abs(Y_perm - Y[:, perm])):.1e}")
    PE = sinusoidal_positions(40, 16)
    k = 3
    dots = [PE[p] @ PE[p + k] for p in (0, 5, 17, 30)]
    print(f"PE_p . PE_(p+{k}) for p = 0, 5, 17, 30 (d = 16):", np.round(dots, 12))

# %% [markdown] nbgrader={"grade": false, "grade_id": "layer_norm_forward_text", "locked": true, "schema_version": 3, "solution": false}
# ## 10. `layer_norm_forward` ({{ points: layer_norm_forward }})
#
# Layer normalisation (Ba, Kiros and Hinton, 2016) rescales each token vector on its own,
# over its $d$ features:
#
# $$\mu = \frac{1}{d} \sum_{j} x_j, \qquad \sigma^2 = \frac{1}{d} \sum_{j} (x_j - \mu)^2, \qquad \hat x_j = \frac{x_j - \mu}{\sqrt{\sigma^2 + \varepsilon}}, \qquad y_j = \gamma_j \hat x_j + \beta_j .$$
#
# The variance is the biased one (divide by $d$: `np.var` with its default `ddof=0`), and
# $\varepsilon$ sits inside the square root. Both mistakes (the unbiased variance, or
# $\sqrt{\sigma^2} + \varepsilon$) give numbers close to the right ones; the graders look for
# them (fault `layer-norm-variance`).
#
# In a Transformer block layer norm appears twice. This kit uses the pre-LN block:
#
# $$x_1 = x + \operatorname{MHA}(\operatorname{LN}_1(x)), \qquad x_2 = x_1 + \operatorname{FFN}(\operatorname{LN}_2(x_1)), \qquad \operatorname{FFN}(x) = \operatorname{ReLU}(x W_1 + b_1) W_2 + b_2,$$
#
# with $d_{ff} = 4d$. The original post-LN block normalises after each residual sum instead:
# $x_1 = \operatorname{LN}_1(x + \operatorname{MHA}(x))$, $x_2 = \operatorname{LN}_2(x_1 + \operatorname{FFN}(x_1))$. In
# the pre-LN block the residual path from the input to the output goes through no
# normalisation at all (Xiong et al., 2020 compare the two).
#
# Return `(y, cache)`. The cache holds whatever your backward pass will need (for instance
# $\hat x$, $1/\sqrt{\sigma^2 + \varepsilon}$ and $\gamma$): its content is yours to choose.

# %% nbgrader={"grade": false, "grade_id": "layer_norm_forward_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: layer_norm_forward }}

# %% nbgrader={"grade": false, "grade_id": "layer_norm_forward_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of layer_norm_forward: a worked example, gamma and beta, batch axes, float32."""
with visible_checks("layer_norm_forward", 5):
    x = np.array([[1.0, 2.0, 3.0, 4.0]])   # mean 2.5, biased variance 1.25
    y, cache = returned(layer_norm_forward(x, np.ones(4), np.zeros(4), eps=0.0),
                        "layer_norm_forward", "y", "cache")
    assert np.shape(y) == (1, 4), tr("x of shape (1, 4) must give y of shape (1, 4), got {shape}", shape=np.shape(y))
    expected = np.array([[-1.3416407865, -0.4472135955, 0.4472135955, 1.3416407865]])   # (x - 2.5) / sqrt(1.25)
    if np.allclose(y, [[-1.1618950039, -0.3872983346, 0.3872983346, 1.1618950039]]):
        raise AssertionError(
            tr("layer_norm_forward([[1, 2, 3, 4]]) matches the unbiased variance 5/3 (a division by d - "
                "1); the variance in the definition above is 1.25."))
    assert np.allclose(y, expected), (
        tr("layer_norm_forward([[1, 2, 3, 4]], gamma = 1, beta = 0, eps = 0) should be (x - 2.5) / "
            "sqrt(1.25) = {expected}; got {y}",
            expected=expected, y=y))
    y, _ = returned(layer_norm_forward(x, np.full(4, 2.0), np.full(4, 1.0), eps=0.0),
                    "layer_norm_forward", "y", "cache")
    assert np.allclose(y, 2 * expected + 1), (
        tr("with gamma = 2 and beta = 1, y = 2 x_hat + 1 = {expected}; got {y}", expected=2 * expected + 1, y=y))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)   # (B, T, d)
    y, _ = returned(layer_norm_forward(x, np.ones(5, dtype=np.float32), np.zeros(5, dtype=np.float32)),
                    "layer_norm_forward", "y", "cache")
    assert y.shape == (2, 3, 5), tr("x of shape (2, 3, 5) must give y of shape (2, 3, 5), got {shape}", shape=y.shape)
    assert y.dtype == np.float32, tr("float32 inputs must give a float32 output, got {dtype}", dtype=y.dtype)
    assert np.allclose(y.mean(axis=-1), 0, atol=1e-5) and np.allclose(y.var(axis=-1), 1, atol=1e-3), (
        tr("with gamma = 1 and beta = 0 every token of y must have mean 0 and variance about 1 over "
            "its last axis (normalise each token over its d features, not over the batch)"))
    y, _ = returned(layer_norm_forward(np.full((1, 4), 5.0), np.ones(4), np.zeros(4)),
                    "layer_norm_forward", "y", "cache")
    assert np.all(np.isfinite(y)) and np.allclose(y, 0), (
        tr("a constant token has variance 0: with eps = 1e-5 inside the square root y must be 0, "
            "got {y}",
            y=y))
print(tr("{name}: visible checks passed", name='layer_norm_forward'))

# %% nbgrader={"grade": true, "grade_id": "layer_norm_forward_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of layer_norm_forward run when your notebook is graded.
problem = before_grading("layer_norm_forward", np.ones((2, 4)), np.ones(4), np.zeros(4))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("layer_norm_forward", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "layer_norm_backward_text", "locked": true, "schema_version": 3, "solution": false}
# ## 11. `layer_norm_backward` ({{ points: layer_norm_backward }})
#
# Given $dy = \partial L / \partial y$, find $dx$, $d\gamma$ and $d\beta$. The parameters first:
# $y = \gamma \odot \hat x + \beta$ for every token, and the same $\gamma$, $\beta$ serve every
# token, so their gradients are summed over all tokens, that is over **every** leading axis
# (not only the first):
#
# $$d\gamma = \sum_{\text{tokens}} dy \odot \hat x, \qquad d\beta = \sum_{\text{tokens}} dy .$$
#
# For $x$, work on one token. Write $g = dy \odot \gamma$ (the gradient with respect to $\hat x$)
# and $r = 1/\sqrt{\sigma^2 + \varepsilon}$, so that $\hat x_j = (x_j - \mu)\, r$. Since
# $\sum_j (x_j - \mu) = 0$,
#
# $$\frac{\partial \mu}{\partial x_k} = \frac{1}{d}, \qquad \frac{\partial \sigma^2}{\partial x_k} = \frac{2 (x_k - \mu)}{d}, \qquad \frac{\partial r}{\partial x_k} = -\frac{1}{2} (\sigma^2 + \varepsilon)^{-3/2} \frac{2 (x_k - \mu)}{d} = -\frac{r^2 \hat x_k}{d},$$
#
# $$\frac{\partial \hat x_j}{\partial x_k} = r \left(\delta_{jk} - \frac{1}{d}\right) + (x_j - \mu) \frac{\partial r}{\partial x_k} = r \left(\delta_{jk} - \frac{1}{d} - \frac{\hat x_j \hat x_k}{d}\right).$$
#
# Summing $g_j\, \partial \hat x_j / \partial x_k$ over $j$:
#
# $$dx = r \,\big(g - \operatorname{mean}(g) - \hat x \odot \operatorname{mean}(g \odot \hat x)\big),$$
#
# with the means over the last axis. The three terms are the direct path, the path through
# the mean and the path through the variance. Dropping one still gives an array of the right
# shape (fault `layer-norm-backward-terms`), but two properties give it away: for every token
# $\sum_j dx_j = 0$ (adding a constant to a token does not change its normalised value) and,
# when $\varepsilon = 0$, $\sum_j dx_j \hat x_j = 0$ (nor does scaling it).
#
# Do not modify the cache: a training loop may use it again.

# %% nbgrader={"grade": false, "grade_id": "layer_norm_backward_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: layer_norm_backward }}

# %% nbgrader={"grade": false, "grade_id": "layer_norm_backward_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of layer_norm_backward: a worked example, sums over every leading axis, a gradient check."""
with visible_checks("layer_norm_backward", 5):
    uses_checked("layer_norm_forward", "layer_norm_backward")
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    xhat = (x - 2.5) / math.sqrt(1.25)                     # mean 2.5, biased variance 1.25
    _, cache = returned(layer_norm_forward(x, np.ones(4), np.zeros(4), eps=0.0),
                        "layer_norm_forward", "y", "cache")
    dx, dgamma, dbeta = returned(layer_norm_backward(np.array([[1.0, 0.0, 0.0, 0.0]]), cache),
                                 "layer_norm_backward", "dx", "dgamma", "dbeta")
    assert np.shape(dx) == (1, 4) and np.shape(dgamma) == (4,) and np.shape(dbeta) == (4,), (
        tr("dy of shape (1, 4) must give dx (1, 4), dgamma (4,), dbeta (4,); got {shape}, {shape2}, "
            "{shape3}",
            shape=np.shape(dx), shape2=np.shape(dgamma), shape3=np.shape(dbeta)))
    expected = [0.2683281573, -0.3577708764, -0.0894427191, 0.1788854382]
    assert np.allclose(dx, [expected]), (
        tr("for x = [[1, 2, 3, 4]], gamma = 1, eps = 0 and dy = [[1, 0, 0, 0]], dx should be "
            "{expected}; got {dx}. Two sums are 0 for the true dx here: the row sum of dx (yours: "
            "{dx2:.3g}), because shifting x does not change y, and the sum of dx * x_hat (yours: "
            "{dx3:.3g}), because scaling x does not change y at eps = 0. Re-read the derivation "
            "above for the term that carries each.",
            expected=expected, dx=dx, dx2=np.sum(dx), dx3=np.sum(dx * xhat)))
    assert np.allclose(dgamma, [-1.3416407865, 0, 0, 0]) and np.allclose(dbeta, [1.0, 0, 0, 0]), (
        tr("with dy = [[1, 0, 0, 0]], dgamma should be [-1.3416, 0, 0, 0] and dbeta [1, 0, 0, 0]; "
            "got {dgamma} and {dbeta}",
            dgamma=dgamma, dbeta=dbeta))

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5))                     # (B, T, d)
    gamma = 1 + 0.1 * rng.standard_normal(5)
    beta = 0.1 * rng.standard_normal(5)
    G = rng.standard_normal((2, 3, 5))                     # the loss is L = sum(G * y), so dy = G
    _, cache = returned(layer_norm_forward(x, gamma, beta),
                        "layer_norm_forward", "y", "cache")
    dx, dgamma, dbeta = returned(layer_norm_backward(G, cache),
                                 "layer_norm_backward", "dx", "dgamma", "dbeta")
    assert np.shape(dx) == (2, 3, 5) and np.shape(dgamma) == (5,) and np.shape(dbeta) == (5,), (
        tr("dy of shape (2, 3, 5) must give dx (2, 3, 5), dgamma (5,) and dbeta (5,), summed over "
            "both leading axes; got {shape}, {shape2}, {shape3}",
            shape=np.shape(dx), shape2=np.shape(dgamma), shape3=np.shape(dbeta)))

    def ln_loss():
        return float(np.sum(G * layer_norm_forward(x, gamma, beta)[0]))

    for label, analytic, wrt in (("dx", dx, x), ("dgamma", dgamma, gamma), ("dbeta", dbeta, beta)):
        numeric = numerical_gradient(ln_loss, wrt, eps=1e-6)
        err = rel_error(analytic, numeric)
        if not err < 1e-5:
            i = tuple(int(j) for j in np.unravel_index(np.argmax(np.abs(analytic - numeric)), numeric.shape))
            raise AssertionError(
                tr("{label} disagrees with central differences (eps = 1e-6): worst relative error {err:.2e} "
                    "(expected below 1e-5); at index {i} yours is {analytic:.6g}, the numerical gradient "
                    "{numeric:.6g}. For dgamma and dbeta sum over every leading axis; for dx keep all three "
                    "terms.",
                    label=label, err=err, i=i, analytic=analytic[i], numeric=numeric[i]))
print(tr("{name}: visible checks passed", name='layer_norm_backward'))

# %% nbgrader={"grade": true, "grade_id": "layer_norm_backward_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of layer_norm_backward run when your notebook is graded.
problem = before_grading("layer_norm_backward", np.ones((2, 4)), None)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("layer_norm_backward", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "attention_forward_text", "locked": true, "schema_version": 3, "solution": false}
# ## 12. `attention_forward` ({{ points: attention_forward }})
#
# The self-attention layer of a block, now with biases, and with a cache for the backward
# pass. With $x$ of shape `(B, T, d)`:
#
# $$Q = x W_Q + b_Q, \qquad K = x W_K + b_K, \qquad V = x W_V + b_V \qquad \text{(split into } h \text{ heads)},$$
#
# $$P_k = \operatorname{softmax}\!\left(\frac{Q_k K_k^\top}{\sqrt{d_h}} \ \text{with } -\infty \text{ above the diagonal}\right), \qquad O = \operatorname{merge}(P_1 V_1, \dots, P_h V_h), \qquad y = O W_O + b_O .$$
#
# `params` is a dict with the keys `W_Q, W_K, W_V, W_O` (each `(d, d)`) and
# `b_Q, b_K, b_V, b_O` (each `(d,)`). `causal=False` drops the mask; `scale=False` drops the
# $1/\sqrt{d_h}$. Return `(y, cache)`: the cache holds what the backward needs, for example
# $x$, the per-head $Q$, $K$, $V$, the weights $P$, the merged $O$, the scale factor, $h$ and
# the parameters. Reuse your `split_heads`, `merge_heads`, `softmax` and `causal_mask`.

# %% nbgrader={"grade": false, "grade_id": "attention_forward_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: attention_forward }}

# %% nbgrader={"grade": false, "grade_id": "attention_forward_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of attention_forward: a worked example, then agreement with multi_head_attention (h = 2, B = 2)."""
with visible_checks("attention_forward", 5):
    B, T, d, h = 2, 3, 4, 2
    x = np.arange(B * T * d, dtype=np.float64).reshape(B, T, d)   # x[0] = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    params = {"W_Q": np.zeros((d, d)), "W_K": np.zeros((d, d)), "W_V": np.eye(d), "W_O": np.eye(d),
              "b_Q": np.zeros(d), "b_K": np.zeros(d), "b_V": np.zeros(d), "b_O": np.array([0.5, 0.5, 0.5, 0.5])}
    y, cache = returned(attention_forward(x, params, n_heads=h),
                        "attention_forward", "y", "cache")             # causal by default
    assert np.shape(y) == (B, T, d), tr("x (2, 3, 4) must give y (B, T, d) = (2, 3, 4), got {shape}", shape=np.shape(y))
    assert np.allclose(y[0], [[0.5, 1.5, 2.5, 3.5], [2.5, 3.5, 4.5, 5.5], [4.5, 5.5, 6.5, 7.5]]), (
        tr("with W_Q = W_K = 0 (all scores 0), W_V = W_O = I, the causal mask and b_O = 0.5, y[0] "
            "is the running mean of x[0] plus 0.5: [[0.5, 1.5, 2.5, 3.5], [2.5, 3.5, 4.5, 5.5], "
            "[4.5, 5.5, 6.5, 7.5]]; got\n{y}\nIf every row is [4.5, 5.5, 6.5, 7.5], the causal mask "
            "(on by default, causal=True) was not applied.",
            y=y[0]))
    y, _ = returned(attention_forward(x, params, n_heads=h, causal=False),
                    "attention_forward", "y", "cache")
    assert np.allclose(y[0], [[4.5, 5.5, 6.5, 7.5]] * 3), (
        tr("with causal=False every token of y[0] is the mean of x[0] plus 0.5, [4.5, 5.5, 6.5, "
            "7.5]; got\n{y}",
            y=y[0]))

    rng = np.random.default_rng(0)
    B, T, d, h = 2, 5, 8, 2
    x = rng.standard_normal((B, T, d))
    params = {}
    for name in ("Q", "K", "V", "O"):
        params["W_" + name] = rng.standard_normal((d, d)) / math.sqrt(d)
        params["b_" + name] = np.zeros(d)
    y, _ = returned(attention_forward(x, params, n_heads=h),
                    "attention_forward", "y", "cache")
    uses_checked("multi_head_attention", "attention_forward")
    expected, _ = returned(multi_head_attention(x, params["W_Q"], params["W_K"], params["W_V"], params["W_O"],
                                                n_heads=h, mask=np.tril(np.ones((T, T), dtype=bool))),
                           "multi_head_attention", "Y", "weights")
    assert np.allclose(y, expected), (
        tr("with zero biases attention_forward must agree with your multi_head_attention, which "
            "passes its own visible checks, under a causal mask (largest difference {y:.3g}); check "
            "the scale 1/sqrt(d_h) and the mask of attention_forward",
            y=np.max(np.abs(y - expected))))
    y_unscaled, _ = returned(attention_forward(x, params, n_heads=h, scale=False),
                             "attention_forward", "y", "cache")
    assert not np.allclose(y_unscaled, y), tr("scale=False must drop the 1/sqrt(d_h): the output should change")
print(tr("{name}: visible checks passed", name='attention_forward'))

# %% nbgrader={"grade": true, "grade_id": "attention_forward_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of attention_forward run when your notebook is graded.
problem = before_grading("attention_forward", np.ones((1, 2, 4)), {}, 2)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("attention_forward", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "attention_backward_text", "locked": true, "schema_version": 3, "solution": false}
# ## 13. `attention_backward` ({{ points: attention_backward }})
#
# Walk the forward pass backwards. Flatten the tokens of the batch into rows, `(B·T, d)`,
# wherever a weight is involved.
#
# * **Output projection.** $y = O W_O + b_O$ gives $dW_O = O^\top dy$, $db_O = \sum dy$ (over
#   batch and time) and $dO = dy\, W_O^\top$. $dW_O$ has the shape of $W_O$, `(d, d)`; the
#   transposed product $dy^\top O$ has that shape too and is wrong (fault `weight-grad-wrong`).
# * **Values and weights, per head.** Split $dO$ into heads. $O_k = P_k V_k$ gives
#   $dP = dO\, V^\top$ and $dV = P^\top dO$.
# * **Softmax, row by row.** From $\partial p_j / \partial s_l = p_j (\delta_{jl} - p_l)$,
#
#   $$dS_l = \sum_j dP_j\, p_j (\delta_{jl} - p_l) = p_l \Big(dP_l - \sum_j dP_j\, p_j\Big), \qquad dS = P \odot \big(dP - \operatorname{rowsum}(dP \odot P)\big).$$
#
#   Masked positions have $P = 0$ and get zero gradient with no extra step. Without the
#   row-sum term the result has the right shape and is wrong (fault `softmax-backward`).
# * **Scores.** $S = c\, Q K^\top$ with $c = 1/\sqrt{d_h}$ (or 1 when `scale=False`) gives
#   $dQ = c\, dS\, K$ and $dK = c\, dS^\top Q$. The factor that scaled the forward pass scales
#   the backward (fault `backward-missing-scale`).
# * **Input projections.** Merge $dQ$, $dK$, $dV$ back to `(B, T, d)`. For each
#   $Z \in \{Q, K, V\}$: $dW_Z = x^\top dZ$, $db_Z = \sum dZ$, and $x$ receives from all three,
#   $dx = dQ\, W_Q^\top + dK\, W_K^\top + dV\, W_V^\top$.
#
# Return `(dx, grads)`, where `grads` has the same keys and shapes as `params`. Bias
# gradients are summed over batch and time (fault `param-grad-axes` otherwise). Do not
# modify the cache.

# %% nbgrader={"grade": false, "grade_id": "attention_backward_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: attention_backward }}

# %% nbgrader={"grade": false, "grade_id": "attention_backward_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of attention_backward: shapes and keys, db_O, a gradient check of every tensor (h = 2, B = 2)."""
with visible_checks("attention_backward", 5):
    uses_checked("attention_forward", "attention_backward")
    rng = np.random.default_rng(0)
    B, T, d, h = 2, 3, 4, 2
    x = rng.standard_normal((B, T, d))
    params = {}
    for name in ("Q", "K", "V", "O"):
        params["W_" + name] = rng.standard_normal((d, d)) / math.sqrt(d)
        params["b_" + name] = 0.1 * rng.standard_normal(d)
    _, cache = returned(attention_forward(x, params, n_heads=h),
                        "attention_forward", "y", "cache")
    dx, grads = returned(attention_backward(np.ones((B, T, d)), cache),
                         "attention_backward", "dx", "grads")
    assert np.shape(dx) == (B, T, d), tr("dy of shape (2, 3, 4) must give dx of shape (2, 3, 4), got {shape}", shape=np.shape(dx))
    assert isinstance(grads, dict) and set(grads) == set(params), (
        tr("grads must be a dict with the keys of params, {params}; got {isinstance}", params=sorted(params), isinstance=sorted(grads) if isinstance(grads, dict) else type(grads).__name__))
    for key in params:
        assert np.shape(grads[key]) == params[key].shape, (
            tr("grads['{key}'] must have the shape of params['{key}'], {shape}; got {shape2}", key=key, shape=params[key].shape, shape2=np.shape(grads[key])))
    assert np.allclose(grads["b_O"], [6.0, 6.0, 6.0, 6.0]), (
        tr("with dy = ones of shape (2, 3, 4), grads['b_O'] is dy summed over batch and time, [6, "
            "6, 6, 6]; got {grads}",
            grads=grads['b_O']))

    G = rng.standard_normal((B, T, d))                     # the loss is L = sum(G * y), so dy = G
    _, cache = returned(attention_forward(x, params, n_heads=h),
                        "attention_forward", "y", "cache")
    dx, grads = returned(attention_backward(G, cache),
                         "attention_backward", "dx", "grads")

    def attention_loss():
        return float(np.sum(G * attention_forward(x, params, n_heads=h)[0]))

    hints = {"W_O": tr("the output projection, the first step back; compare the shapes of the product"),
             "b_O": tr("a bias is added at every position of every sequence"),
             "W_V": tr("the path through the values and the weights P, head by head"),
             "b_V": tr("a bias is added at every position of every sequence"),
             "W_Q": tr("the path through the softmax and the scale (re-read its backward above, and trap 1)"),
             "W_K": tr("the path through the softmax and the scale, seen from the keys"),
             "b_Q": tr("a bias is added at every position of every sequence"),
             "b_K": tr("a bias is added at every position of every sequence"),
             "x": tr("x reaches the output through three projections")}
    order = ["W_O", "b_O", "W_V", "b_V", "W_Q", "b_Q", "W_K", "b_K"]    # the order of the backward pass
    for key, analytic, wrt in [(k, grads[k], params[k]) for k in order] + [("x", dx, x)]:
        numeric = numerical_gradient(attention_loss, wrt, eps=1e-6)
        err = rel_error(analytic, numeric)
        if not err < 1e-5:
            i = tuple(int(j) for j in np.unravel_index(np.argmax(np.abs(analytic - numeric)), numeric.shape))
            raise AssertionError(
                tr("the gradient of {key} disagrees with central differences (eps = 1e-6): worst relative "
                    "error {err:.2e} (expected below 1e-5); at index {i} yours is {analytic:.6g}, the "
                    "numerical gradient {numeric:.6g}. Hint: {hints}.",
                    key=key, err=err, i=i, analytic=analytic[i], numeric=numeric[i], hints=hints[key]))
print(tr("{name}: visible checks passed", name='attention_backward'))

# %% nbgrader={"grade": true, "grade_id": "attention_backward_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of attention_backward run when your notebook is graded.
problem = before_grading("attention_backward", np.ones((1, 2, 4)), None)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("attention_backward", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_gradient_check_text", "locked": true, "schema_version": 3, "solution": false}
# ### The lesson, live: checking gradients, and what $\varepsilon$ does
#
# A gradient check compares the analytic gradient $a$ with central differences
#
# $$n_i = \frac{L(\theta + \varepsilon e_i) - L(\theta - \varepsilon e_i)}{2 \varepsilon}$$
#
# through the relative error $|a - n| / \max(|a|, |n|)$, on the coordinates where the
# gradient exceeds 1e-6, in float64 (`rel_error` and `numerical_gradient` of the setup cell).
# The cell checks your two backward passes on the loss $L = \sum G \odot y$ for a fixed random
# $G$, at $\varepsilon$ = 1e-6 and at a large $\varepsilon$ = 1e-2.
#
# How to read the table: central differences make an error of order $\varepsilon^2$ times a
# third derivative, plus a rounding error of order (machine epsilon)$/\varepsilon$. Where the
# output depends on a tensor nonlinearly (the input $x$ of both functions, and $W_Q$, $W_K$,
# $b_Q$ through the softmax), the large $\varepsilon$ gives the larger error. That is the
# pattern to recognise: a check that gets worse as $\varepsilon$ grows is telling you about
# $\varepsilon$, not about your backward pass, whereas a wrong backward pass is wrong at every
# $\varepsilon$. Where the output is linear in the tensor ($\gamma$, $\beta$, $W_V$, $b_V$, $W_O$,
# $b_O$), the third derivative is 0, only rounding is left, and the large $\varepsilon$ does as
# well or better. The row of $b_K$ should read 0 because there is nothing to compare: adding $b_K$
# to every key adds the same $q \cdot b_K$ to every score of a row, which the softmax ignores,
# so that gradient is exactly 0 and every coordinate falls under the 1e-6 threshold.
#
# The lesson met a sharper version of the $\varepsilon$ story on a tiny 2-layer model
# ($d = 16$, 3 sequences): the worst relative error was 2.56e-6 (pre-LN) and 4.90e-5
# (post-LN) at $\varepsilon$ = 1e-6, but 9.94e-2 and 6.60e-3 at $\varepsilon$ = 1e-4, because steps of that
# size cross the kinks of the ReLU, where the loss has no derivative (trap 8).

# %% nbgrader={"grade": false, "grade_id": "lesson_gradient_check", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""The lesson, live: gradient checks of layer_norm_backward and attention_backward at eps = 1e-6 and 1e-2."""
with time_limit(30, lesson=True):
    rng = np.random.default_rng(4)
    x_ln = rng.standard_normal((2, 3, 6))
    ln_params = {"gamma": 1 + 0.1 * rng.standard_normal(6), "beta": 0.1 * rng.standard_normal(6)}
    G_ln = rng.standard_normal(x_ln.shape)
    _, cache = layer_norm_forward(x_ln, ln_params["gamma"], ln_params["beta"])
    dx, dgamma, dbeta = layer_norm_backward(G_ln, cache)
    ln_analytic = {"x": (dx, x_ln), "gamma": (dgamma, ln_params["gamma"]), "beta": (dbeta, ln_params["beta"])}

    def ln_loss():
        return float(np.sum(G_ln * layer_norm_forward(x_ln, ln_params["gamma"], ln_params["beta"])[0]))

    B, T, d, h = 2, 4, 8, 2
    x_att = rng.standard_normal((B, T, d))
    att_params = {}
    for name in ("Q", "K", "V", "O"):
        att_params["W_" + name] = rng.standard_normal((d, d)) / math.sqrt(d)
        att_params["b_" + name] = 0.1 * rng.standard_normal(d)
    G_att = rng.standard_normal((B, T, d))
    _, cache = attention_forward(x_att, att_params, n_heads=h)
    dx, grads = attention_backward(G_att, cache)
    att_analytic = {"x": (dx, x_att)}
    att_analytic.update({k: (grads[k], att_params[k]) for k in att_params})

    def att_loss():
        return float(np.sum(G_att * attention_forward(x_att, att_params, n_heads=h)[0]))

    print("worst relative error            eps = 1e-6    eps = 1e-2")
    for label, loss, analytic in (("layer_norm_backward", ln_loss, ln_analytic),
                                  ("attention_backward", att_loss, att_analytic)):
        for key, (a, wrt) in analytic.items():
            errors = [rel_error(a, numerical_gradient(loss, wrt, eps)) for eps in (1e-6, 1e-2)]
            print(f"{label:20s} {key:8s}   {errors[0]:10.2e}    {errors[1]:10.2e}")

# %% [markdown] nbgrader={"grade": false, "grade_id": "block_param_count_text", "locked": true, "schema_version": 3, "solution": false}
# ## 14. `block_param_count` ({{ points: block_param_count }})
#
# Count the parameters of one pre-LN block with biases:
#
# * attention: four $d \times d$ projections, each with a bias: $4(d^2 + d)$;
# * FFN: $W_1$ `(d, d_ff)`, $b_1$ `(d_ff,)`, $W_2$ `(d_ff, d)`, $b_2$ `(d,)`: $2\, d\, d_{ff} + d_{ff} + d$;
# * two layer norms, each with $\gamma$ and $\beta$: $4d$.
#
# With $d_{ff} = 4d$ the total is $4d^2 + 4d + 8d^2 + 5d + 4d = 12d^2 + 13d$. It does not depend
# on the number of heads. The lesson's figures: 49,984 for $d = 64$, 789,760 for $d = 256$,
# 3,152,384 for $d = 512$. At $d = 512$ three groups of 1,048,576 parameters (the four attention
# projections, $W_1$, $W_2$) make up almost all of it: the biases and the layer-norm
# parameters are 6,656, 0.21 %. `d_ff=None` means $4d$. Return a Python `int`.

# %% nbgrader={"grade": false, "grade_id": "block_param_count_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: block_param_count }}

# %% nbgrader={"grade": false, "grade_id": "block_param_count_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of block_param_count: the lesson's d = 64 figure and an explicit d_ff."""
with visible_checks("block_param_count", 5):
    n = block_param_count(64)
    assert isinstance(n, (int, np.integer)) and not isinstance(n, bool), (
        tr("block_param_count must return an int, got {type}", type=type(n).__name__))
    assert n == 49_984, (
        tr("block_param_count(64) = 12 * 64^2 + 13 * 64 = 49,984; got {n:,}. Count 4 (d^2 + d) for "
            "attention, 2 d d_ff + d_ff + d for the FFN and 4 d for the two layer norms.",
            n=n))
    n = block_param_count(4, d_ff=8)
    assert n == 172, (
        tr("block_param_count(4, d_ff=8) = 4 (16 + 4) + (4*8 + 8 + 8*4 + 4) + 4*4 = 80 + 76 + 16 = "
            "172; got {n:,}. Is d_ff ignored, or used in place of 4 d only in one of the two FFN "
            "matrices?",
            n=n))
print(tr("{name}: visible checks passed", name='block_param_count'))

# %% nbgrader={"grade": true, "grade_id": "block_param_count_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of block_param_count run when your notebook is graded.
problem = before_grading("block_param_count", 8)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("block_param_count", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "lesson_param_count_text", "locked": true, "schema_version": 3, "solution": false}
# ### The lesson, live: $12d^2 + 13d$, tensor by tensor
#
# The cell writes the shape of every tensor of a pre-LN block into a dict, counts them one by
# one, and puts the total beside the formula, your `block_param_count` and the lesson's
# figures.

# %% nbgrader={"grade": false, "grade_id": "lesson_param_count", "locked": true, "schema_version": 3, "solution": false} tags=["lesson"]
"""The lesson, live: the parameters of a pre-LN block, counted tensor by tensor."""
with time_limit(10, lesson=True):
    def block_shapes(d, d_ff):
        """Shape of every parameter tensor of one pre-LN block with biases."""
        shapes = {"ln1.gamma": (d,), "ln1.beta": (d,)}
        for name in ("Q", "K", "V", "O"):
            shapes["W_" + name] = (d, d)
            shapes["b_" + name] = (d,)
        shapes.update({"ln2.gamma": (d,), "ln2.beta": (d,),
                       "W1": (d, d_ff), "b1": (d_ff,), "W2": (d_ff, d), "b2": (d,)})
        return shapes

    lesson_counts = {64: 49_984, 256: 789_760, 512: 3_152_384}
    print("    d   tensor by tensor   12d^2 + 13d        yours       lesson")
    for d in (64, 256, 512):
        counted = sum(math.prod(shape) for shape in block_shapes(d, 4 * d).values())
        print(f"{d:5d}   {counted:16,d}   {12 * d * d + 13 * d:11,d}   {block_param_count(d):10,d}   {lesson_counts[d]:10,d}")

    shapes = block_shapes(512, 2048)
    total = sum(math.prod(s) for s in shapes.values())
    projections = sum(math.prod(shapes["W_" + n]) for n in "QKVO")
    small = total - projections - math.prod(shapes["W1"]) - math.prod(shapes["W2"])
    print(f"\nd = 512: attention projections {projections:,d}, W1 {math.prod(shapes['W1']):,d}, "
          f"W2 {math.prod(shapes['W2']):,d}, biases and layer norms {small:,d} ({100 * small / total:.2f} %)")

# %% [markdown] nbgrader={"grade": false, "grade_id": "kv_cache_bytes_text", "locked": true, "schema_version": 3, "solution": false}
# ## 15. `kv_cache_bytes` ({{ points: kv_cache_bytes }})
#
# A decoder generates one token at a time. At each step only the new token's query, key and
# value are new: the keys and values of the earlier positions depend only on the tokens
# before them (that is what the causal mask guarantees), so they never change. Keeping them
# in a cache turns each step from a pass over the whole prefix into one new row per layer.
# In the lesson's NumPy decoder (4 layers, 8 heads, $d = 256$, a prompt of 32 tokens and 128
# generated ones), generation with and without the cache agreed to 6.9e-15, and the cache
# made it 40 to 110 times faster.
#
# The price is memory: for every layer, key/value head, position and sequence, one key and
# one value vector of $d_{head}$ numbers,
#
# $$\text{bytes} = 2 \cdot n_{\text{layers}} \cdot n_{\text{kv heads}} \cdot d_{\text{head}} \cdot T \cdot B \cdot \text{bytes per element}.$$
#
# The lesson's example: 32 layers, $d_{head} = 128$, $T = 4096$, float16 (2 bytes), batch 1 take
# 2 GiB with 32 KV heads. Multi-query attention (Shazeer, 2019) shares one key/value head
# among all the query heads: 0.0625 GiB. The cache grows linearly with $T$ and $B$ while the
# weights stay the same size, so with long contexts and large batches it can outweigh the
# model (Exercise 2 measures by how much). Return a Python `int`.

# %% nbgrader={"grade": false, "grade_id": "kv_cache_bytes_solution", "locked": false, "schema_version": 3, "solution": true}
# {{ solution: kv_cache_bytes }}

# %% nbgrader={"grade": false, "grade_id": "kv_cache_bytes_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of kv_cache_bytes: the lesson's 2 GiB and 0.0625 GiB examples."""
with visible_checks("kv_cache_bytes", 5):
    n = kv_cache_bytes(n_layers=32, n_kv_heads=32, d_head=128, seq_len=4096, batch=1, bytes_per_element=2)
    assert isinstance(n, (int, np.integer)) and not isinstance(n, bool), (
        tr("kv_cache_bytes must return an int, got {type}", type=type(n).__name__))
    assert n == 2_147_483_648, (
        tr("32 layers, 32 KV heads, d_head 128, T = 4096, batch 1, float16: 2 * 32 * 32 * 128 * "
            "4096 * 1 * 2 = 2,147,483,648 bytes (2 GiB); got {n:,}. Did you forget the 2 (keys and "
            "values) or a factor?",
            n=n))
    n = kv_cache_bytes(n_layers=32, n_kv_heads=1, d_head=128, seq_len=4096, batch=1, bytes_per_element=2)
    assert n == 67_108_864, tr("the same with one KV head (multi-query) is 67,108,864 bytes (0.0625 GiB); got {n:,}", n=n)
    n = kv_cache_bytes(2, 3, 5, 7, 11, 4)
    assert n == 2 * 2 * 3 * 5 * 7 * 11 * 4, (
        tr("kv_cache_bytes(2, 3, 5, 7, 11, 4) = 2 * 2 * 3 * 5 * 7 * 11 * 4 = 18,480; got {n:,}", n=n))
print(tr("{name}: visible checks passed", name='kv_cache_bytes'))

# %% nbgrader={"grade": true, "grade_id": "kv_cache_bytes_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of kv_cache_bytes run when your notebook is graded.
problem = before_grading("kv_cache_bytes", 1, 1, 1, 1, 1, 2)
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("kv_cache_bytes", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "exercise_decoder_budget_text", "locked": true, "schema_version": 3, "solution": false}
# ## Exercise 2: the memory budget of a decoder ({{ points: exercise_decoder_budget }})
#
# A decoder has 24 pre-LN blocks with $d = 512$, 8 heads of $d_{head} = 64$ and
# $d_{ff} = 4d$. Count the blocks only (no embeddings, no final layer norm) and compute:
#
# 1. `budget_block_params`: the number of parameters of the 24 blocks;
# 2. `budget_weight_bytes_fp16`: the bytes needed to store them in float16;
# 3. `budget_kv_cache_bytes`: the bytes of the KV cache when generating with $T = 8192$,
#    batch 4, in float16, with 8 KV heads per layer (one per query head);
# 4. `budget_kv_to_weights`: the KV cache divided by the weights (item 3 over item 2);
# 5. `budget_kv_cache_bytes_mqa`: the KV cache of item 3 with multi-query attention
#    (1 KV head per layer).
#
# Items 1, 2, 3 and 5 are exact integers, item 4 a float. You may call your
# `block_param_count` and `kv_cache_bytes`. The feedback shows the worked solution.

# %% nbgrader={"grade": false, "grade_id": "exercise_decoder_budget_answer", "locked": false, "schema_version": 3, "solution": true}
# Exercise 2: assign your five answers (numbers).
# budget_block_params = ...
# budget_weight_bytes_fp16 = ...
# budget_kv_cache_bytes = ...
# budget_kv_to_weights = ...
# budget_kv_cache_bytes_mqa = ...
### BEGIN SOLUTION
d, n_layers, d_head = 512, 24, 64
budget_block_params = n_layers * (12 * d * d + 13 * d)                        # 24 * 3,152,384 = 75,657,216
budget_weight_bytes_fp16 = 2 * budget_block_params                            # 151,314,432 bytes = 144.3 MiB
budget_kv_cache_bytes = 2 * n_layers * 8 * d_head * 8192 * 4 * 2              # 1,610,612,736 bytes = 1.5 GiB
budget_kv_to_weights = budget_kv_cache_bytes / budget_weight_bytes_fp16       # about 10.64
budget_kv_cache_bytes_mqa = 2 * n_layers * 1 * d_head * 8192 * 4 * 2          # 201,326,592 bytes = 0.1875 GiB
### END SOLUTION

# %% nbgrader={"grade": false, "grade_id": "exercise_decoder_budget_visible_test", "locked": true, "schema_version": 3, "solution": false} tags=["visible-test"]
"""Visible checks of Exercise 2: the five answers are defined and are numbers (values are checked when graded)."""
with visible_checks("exercise_decoder_budget"):
    for name in ("budget_block_params", "budget_weight_bytes_fp16", "budget_kv_cache_bytes",
                 "budget_kv_to_weights", "budget_kv_cache_bytes_mqa"):
        if name not in globals():
            raise NotAnswered(tr("assign your answer to the variable {name} in the cell above", name=name))
        value = globals()[name]
        assert isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool), (
            tr("{name} should be a number, got {type}", name=name, type=type(value).__name__))
        assert math.isfinite(value) and value > 0, tr("{name} should be a positive number, got {value}", name=name, value=value)
    print(tr("exercise_decoder_budget: visible checks passed (the values are checked when graded)"))

# %% nbgrader={"grade": true, "grade_id": "exercise_decoder_budget_hidden_checks", "locked": true, "schema_version": 3, "solution": false}
# Hidden checks of exercise_decoder_budget run when your notebook is graded.
problem = before_grading("exercise_decoder_budget", answers=("budget_block_params", "budget_weight_bytes_fp16", "budget_kv_cache_bytes", "budget_kv_to_weights", "budget_kv_cache_bytes_mqa"))
assert problem is None, problem
### BEGIN HIDDEN TESTS
from grader_tests import grade
grade("exercise_decoder_budget", globals())
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "closing", "locked": true, "schema_version": 3, "solution": false}
# ## Before you submit
#
# * *Kernel → Restart Kernel and Run All Cells*: every visible test should print
#   `... visible checks passed`, and the cells of *The lesson, live* should print their
#   tables. A visible test that passes does not guarantee full points: the hidden checks use
#   random shapes, float32 inputs, fully masked rows, and check that your functions leave
#   their arguments untouched.
# * The cell below lists, part by part, which visible checks passed, which fail, which parts
#   are still stubs, which exercises are not answered yet and which were not run.
# * Press **Validate** (or run `nbgrader validate attention.ipynb`). It runs the whole
#   notebook and lists every part that is still a stub or whose visible checks fail, with
#   the message of the check; it says *Success* only when every part is written and every
#   visible check passes.
# * Your feedback lists, for every function, each check that ran, and for a failed check the
#   fault it found (for example `head-order` or `softmax-backward`) with the input where it
#   showed up.

# %% nbgrader={"grade": false, "grade_id": "visible_checks_summary", "locked": true, "schema_version": 3, "solution": false} tags=["summary"]
"""Where you stand: the visible checks of every graded part, as they last ran."""
visible_checks_summary()
