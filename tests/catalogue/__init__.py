"""Example submissions for proving the hidden graders: buggy ones (one bug each, with the
fault id of docs/contract.md §5 the graders must report) and correct ones written differently
from the reference (which must get full marks).

A submission is built the way a student's notebook is: the reference module's source is
run in a fresh namespace (standing in for the cells the student got right), then the
entry's source is run in the *same* namespace, replacing one or more functions. The
replaced functions therefore call the other functions of that namespace, as they would in
a notebook.
"""

import functools
import types

from solutions import attention as _reference
from tests.helpers import ATTENTION_SOURCE, submission_namespace

# Compiled under a neutral file name: the graders flag code whose file is the reference's
# own (tampering), and a submission's code never is.
REFERENCE_SOURCE = ATTENTION_SOURCE
SPEC_FUNCTIONS = tuple(_reference.SPEC_FUNCTIONS)


def build_namespace(sources, label="entry"):
    """A fresh submission namespace: the reference source, then each of ``sources``
    (``tests.helpers.submission_namespace``).

    Args:
        sources: iterable of str, Python source run in order in the same namespace.
        label: str, used in the compiled file names (``<label:i>``, shown in tracebacks).

    Returns:
        dict, the namespace to grade.
    """
    return submission_namespace(*sources, label=label)


# A backward is graded with the cache of the submission's own forward
# (grader_tests.checks.layer_norm.student_cache / core.peer).
PEERS = {"layer_norm_backward": "layer_norm_forward", "attention_backward": "attention_forward"}


@functools.lru_cache(maxsize=None)
def reference_namespace():
    """The reference run as a submission (not to be modified)."""
    return build_namespace([], label="reference")


def _spec_names_used(name):
    """contract names the reference function ``name`` refers to (nested code included)."""
    stack, used = [reference_namespace()[name].__code__], set()
    while stack:
        code = stack.pop()
        used.update(n for n in code.co_names if n in SPEC_FUNCTIONS)
        stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    if name in PEERS:
        used.add(PEERS[name])
    return used - {name}


@functools.lru_cache(maxsize=None)
def uses():
    """dict contract name -> the contract names its reference uses (``_spec_names_used``)."""
    return {name: _spec_names_used(name) for name in SPEC_FUNCTIONS}


def affected(replaced):
    """The contract functions whose grading can run code of ``replaced``: those names and,
    transitively, every function that uses one of them (calls it in the reference, or is
    its backward). In the contract order."""
    used_by = uses()
    found = set(replaced)
    while True:
        more = {n for n, used in used_by.items() if used & found} - found
        if not more:
            return [n for n in SPEC_FUNCTIONS if n in found]
        found |= more


def entry_sources(kind, entry_id):
    """The sources of a catalogue entry and the contract names they replace.

    Args:
        kind: ``"bug"`` (``buggy.BUGS``) or ``"correct"`` (``correct.CORRECT``).
        entry_id: the entry's id.

    Returns:
        (list of str, set of str): the sources, run in order, and the names replaced.
    """
    if kind == "bug":
        from tests.catalogue.buggy import BUGS

        bug = next(b for b in BUGS if b.id == entry_id)
        return [bug.source], {bug.function}
    from tests.catalogue.correct import CORRECT

    entry = next(c for c in CORRECT if c.id == entry_id)
    return list(entry.sources.values()), set(entry.sources)
