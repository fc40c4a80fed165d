"""Example submissions for proving the hidden graders: buggy ones (one bug each, with the
fault id of docs/contract.md §5 the graders must report) and correct ones written differently
from the reference (which must get full marks).

A submission is built the way a student's notebook is: the reference module's source is
run in a fresh namespace (standing in for the cells the student got right), then the
entry's source is run in the *same* namespace, replacing one or more functions. The
replaced functions therefore call the other functions of that namespace, as they would in
a notebook.
"""

import inspect
import textwrap

from solutions import attention as _reference

# Compiled under a neutral file name: the graders flag code whose file is the reference's
# own (tampering), and a submission's code never is.
REFERENCE_SOURCE = inspect.getsource(_reference)
SPEC_FUNCTIONS = tuple(_reference.SPEC_FUNCTIONS)


def build_namespace(sources, label="entry"):
    """A fresh submission namespace: the reference source, then each of ``sources``.

    Args:
        sources: iterable of str, Python source run in order in the same namespace.
        label: str, used in the compiled file names (shown in tracebacks).

    Returns:
        dict, the namespace to grade.
    """
    namespace = {"__name__": "__submission__"}
    exec(compile(REFERENCE_SOURCE, "submission.py", "exec"), namespace)
    for i, source in enumerate(sources):
        exec(compile(textwrap.dedent(source), f"<{label}:{i}>", "exec"), namespace)
    return namespace
