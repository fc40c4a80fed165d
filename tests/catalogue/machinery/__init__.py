"""Submissions that turn the graders' own machinery against them (each file stands alone:
only the functions it defines are the student's).

- ``layer_norm_backward_from_the_forward.py`` / ``attention_backward_from_the_forward.py``:
  the forward, called by the backward's checks for its cache, asks the backward for one
  answer per unit ``dy`` (hoping the grader answers with its reference) and hides them in
  the cache; the backward only sums them.
- ``sdpa_by_the_reference_attention_forward.py`` / ``mha_by_the_reference_attention_forward.py``:
  the function hands its work to ``attention_forward`` with crafted weights, hoping the
  grader answers with its reference.
- ``zero_forwards_zero_backwards.py``: forwards that return zeros and backwards that are
  the exact gradients of those forwards (zeros).
- ``zeros_everywhere.py``: every function returns zeros (or False) of the right shape and
  dtype, hoping for the points of the shape, dtype and side-effect checks.

``GAMED``: file -> the graded names that must score 0.
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))

GAMED = {
    "layer_norm_backward_from_the_forward.py": ("layer_norm_backward",),
    "attention_backward_from_the_forward.py": ("attention_backward",),
    "sdpa_by_the_reference_attention_forward.py": ("scaled_dot_product_attention",),
    "mha_by_the_reference_attention_forward.py": ("multi_head_attention",),
    "zero_forwards_zero_backwards.py": ("layer_norm_backward", "attention_backward"),
    "zeros_everywhere.py": ("softmax", "scaled_dot_product_attention", "split_heads",
                            "merge_heads", "multi_head_attention", "layer_norm_forward",
                            "layer_norm_backward", "attention_forward", "attention_backward"),
}


def path_of(name: str) -> str:
    """Absolute path of the catalogue file ``name``."""
    return os.path.join(HERE, name)
