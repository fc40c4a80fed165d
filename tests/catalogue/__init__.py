"""Example submissions for proving the hidden graders: buggy ones (one bug each, with the
fault id of docs/contract.md §5 the graders must report) and correct ones written differently
from the reference (which must get full marks).

A submission is built the way a student's notebook is: the reference module's source is
run in a fresh namespace (standing in for the cells the student got right), then the
entry's source is run in the *same* namespace, replacing one or more functions. The
replaced functions therefore call the other functions of that namespace, as they would in
a notebook.
"""

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
