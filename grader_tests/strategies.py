"""Hypothesis strategies of the graders, bounded, in one place.

Shapes are small (sides 1..5, at most 4 axes), floats finite and moderate, so that every
example runs in microseconds and a failure shrinks to an input a student can read.
``SETTINGS`` is derandomized: the notebook's hidden cells and the command line see the
same examples and so reach the same verdicts.
"""

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.internal.conjecture import engine as _engine
from hypothesis.internal.conjecture import providers as _providers
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

# Shrinking a failing example to the smallest one stops after this many seconds (the
# engine's default is 300): a failure is reported with the smallest input found by then.
_engine.MAX_SHRINKING_SECONDS = 3

# Hypothesis mixes into its draws the literal constants of every "local" module a process
# has imported (outside the standard library and site-packages: the kit's own modules,
# installed editable, the script that started the process, a student's code), found by
# ``hypothesis.internal.conjecture.providers._get_local_constants``. Those differ from one
# grading process to another (the notebook's kernel, the command line, a batch worker), so
# the same derandomized settings would draw different examples on different paths, and a
# student's own constants would steer the graders' inputs. The graders draw with
# Hypothesis' global constants only.
_NO_LOCAL_CONSTANTS = _providers.Constants(
    integers=_providers.SortedSet(),
    floats=_providers.SortedSet(key=_providers.float_to_int),
    bytes=_providers.SortedSet(),
    strings=_providers.SortedSet(),
)
_providers._get_local_constants = lambda: _NO_LOCAL_CONSTANTS

# No ``explain`` phase: after shrinking, Hypothesis would vary the failing example's parts
# again (up to hundreds of calls of the student's function) only to write notes on the
# exception that the graders never show; the verdict and the shrunk example are the same.
SETTINGS = settings(
    max_examples=30,
    phases=[p for p in Phase if p is not Phase.explain],
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    verbosity=Verbosity.quiet,
    report_multiple_bugs=False,
    print_blob=False,
)



def array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5):
    """Shapes with ``min_dims..max_dims`` axes of ``min_side..max_side`` each."""
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def float_arrays(shape, dtype=np.float64, bound=20.0):
    """Arrays of ``shape`` with finite entries in ``[-bound, bound]``.

    Args:
        shape: tuple or a strategy of tuples.
        dtype: float32 or float64 (or a strategy of them).
        bound: float, largest magnitude.
    """
    if isinstance(dtype, type) or isinstance(dtype, np.dtype):
        width = 32 if np.dtype(dtype) == np.float32 else 64
        elements = st.floats(-bound, bound, allow_nan=False, allow_infinity=False, width=width)
        return hnp.arrays(dtype, shape, elements=elements)
    return dtype.flatmap(lambda dt: float_arrays(shape, dt, bound))


@st.composite
def attention_shapes(draw, max_batch_dims=2):
    """``(batch, T_q, T_k, d_k, d_v)``: a batch shape of 0..2 axes and independent sizes."""
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=max_batch_dims)))
    T_q, T_k = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return batch, T_q, T_k, d_k, d_v


@st.composite
def head_shapes(draw):
    """``(B, T, h, d_h)`` with h in 1..4 and B in 1..3."""
    return (draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 4)),
            draw(st.integers(1, 3)))
