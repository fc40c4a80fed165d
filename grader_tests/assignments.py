"""The assignments the kit grades, each one ``Assignment``: its notebook, its graded names
with their points, and the package of its checks.

``ATTENTION`` (docs/contract.md §2) and ``TRAINING`` (§3) are the two of the course; a
third is one more ``Assignment`` in ``ASSIGNMENTS`` with its own checks package. Every
part of the kit that needs to know "which assignment" (the runner, the sandbox, the
command line, the batch, nbgrader's hooks) takes an ``Assignment`` or its name and asks
it, instead of branching on the name.
"""

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

# Points per graded name of `attention`; they sum to 100 and are the nbgrader points of the
# hidden cells of source/attention/attention.ipynb.
POINTS = {
    "softmax": 10,
    "causal_mask": 3,
    "padding_mask": 3,
    "combine_masks": 4,
    "scaled_dot_product_attention": 12,
    "split_heads": 5,
    "merge_heads": 5,
    "multi_head_attention": 10,
    "sinusoidal_positions": 5,
    "layer_norm_forward": 6,
    "layer_norm_backward": 10,
    "attention_forward": 7,
    "attention_backward": 10,
    "block_param_count": 3,
    "kv_cache_bytes": 2,
    "exercise_weight_ratio": 2,
    "exercise_decoder_budget": 3,
}


# Points of the graded names of `training`; they sum to 100 and are the nbgrader points of
# the hidden cells of source/training/training.ipynb.
POINTS_TRAINING = {
    "make_batch": 15,
    "masked_cross_entropy": 15,
    "block_backward": 25,
    "adam_step": 15,
    "greedy_generate": 12,
    "answer_accuracy": 6,
    "model_param_count": 12,
}

# Variables the pen-and-paper exercises of `attention` assign (graded as values, not calls).
EXERCISE_VARIABLES = ("weight_ratio_unscaled", "weight_ratio_scaled", "budget_block_params",
                      "budget_weight_bytes_fp16", "budget_kv_cache_bytes",
                      "budget_kv_to_weights", "budget_kv_cache_bytes_mqa")


def grade_id(name: str) -> str:
    """nbgrader grade id of the hidden cell grading ``name`` (``softmax_hidden_checks``)."""
    return f"{name}_hidden_checks"


@dataclass(frozen=True, eq=False)
class Assignment:
    """One graded assignment.

    Attributes:
        name: str, nbgrader's assignment id; its notebook is ``<name>.ipynb``.
        points: mapping graded name -> points (int), in the notebook's order; the
            nbgrader points of the hidden cells.
        checks_package: str, the module whose import registers the checks of every
            graded name (``registry.check``).
        variables: names of the variables the submission's exercises assign (sent by the
            sandbox with the functions).
        given_cells: bool, the notebook's given cells (a gate, helpers) run before the
            student's cells when it is loaded.
        gate_cell: str or None, the grade id of the code cell that marks a notebook as
            this assignment's (its gate); when loaded for grading, the gate's checks are
            no-ops.
    """

    name: str
    points: Mapping[str, int]
    checks_package: str
    variables: tuple[str, ...] = ()
    given_cells: bool = False
    gate_cell: str | None = None

    @property
    def notebook(self) -> str:
        """File name of the assignment's notebook (``attention.ipynb``)."""
        return f"{self.name}.ipynb"

    @property
    def graded_names(self) -> tuple[str, ...]:
        """The graded names, in the notebook's order."""
        return tuple(self.points)

    @property
    def max_score(self) -> float:
        """Points of the whole assignment."""
        return float(sum(self.points.values()))

    def points_of(self, name: str) -> float:
        """Points of graded name ``name``.

        Raises:
            KeyError: ``name`` is not graded in this assignment.
        """
        return float(self.points[name])

    def grade_ids(self) -> dict[str, str]:
        """graded name -> nbgrader grade id of its hidden cell."""
        return {n: grade_id(n) for n in self.points}

    def load_checks(self) -> ModuleType:
        """Import the checks package (registering its checks once) and return it."""
        return importlib.import_module(self.checks_package)


ATTENTION = Assignment("attention", POINTS, "grader_tests.checks",
                       variables=EXERCISE_VARIABLES)
TRAINING = Assignment("training", POINTS_TRAINING, "grader_tests.checks_training",
                      given_cells=True, gate_cell="gate")
ASSIGNMENTS: dict[str, Assignment] = {a.name: a for a in (ATTENTION, TRAINING)}
DEFAULT = ATTENTION


def get(assignment: "str | Assignment | None") -> Assignment:
    """The ``Assignment`` named ``assignment`` (an ``Assignment`` is returned as is; None is
    ``DEFAULT``).

    Raises:
        ValueError: no assignment has that name.
    """
    if assignment is None:
        return DEFAULT
    if isinstance(assignment, Assignment):
        return assignment
    try:
        return ASSIGNMENTS[assignment]
    except (KeyError, TypeError):
        raise ValueError(f"unknown assignment {assignment!r}: the kit grades "
                         f"{', '.join(ASSIGNMENTS)}") from None


def owning(name: str) -> Assignment:
    """The assignment that grades the graded name ``name``.

    Raises:
        KeyError: no assignment grades ``name``.
    """
    for a in ASSIGNMENTS.values():
        if name in a.points:
            return a
    raise KeyError(f"{name!r} is not a graded name of any assignment "
                   f"({', '.join(ASSIGNMENTS)})")
