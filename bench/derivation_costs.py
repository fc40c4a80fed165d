"""What each catalogue backward costs, counted in passes of the contract's forward, at the two sizes
``grader_tests/derivation.py`` measures: the margins behind its flag.

    python bench/derivation_costs.py

For the reference, every honest submission (``tests/catalogue/honest.py``), every correct
variant that replaces a forward or a backward (``tests/catalogue/correct.py``) and every
numerically differentiated backward (``tests/catalogue/numerical.py``), in this process
(processor time of this thread), prints per backward: the input entries, the backward's
cost beyond two calls of its own forward in passes of the contract's forward, that cost
over the flag's threshold, and whether it is flagged. Nothing is asserted: the suite asserts the verdicts
(``tests/test_derivation.py``), this prints the numbers.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from grader_tests import derivation  # noqa: E402
from solutions import attention as reference  # noqa: E402
from tests.catalogue import build_namespace  # noqa: E402
from tests.catalogue.correct import CORRECT  # noqa: E402
from tests.catalogue.honest import HONEST, namespace  # noqa: E402
from tests.catalogue.numerical import NUMERICAL  # noqa: E402


def invoke(fn, args, kwargs):
    """A plain call (no time limit: trusted catalogue code)."""
    return fn(*args, **kwargs)


def row(label, ns, backward):
    """Print one backward's cost."""
    forward = derivation.FORWARD_OF[backward]
    entries, passes = derivation.forward_passes(backward, ns[backward], ns[forward], invoke,
                                                derivation.cost_clock(ns),
                                                getattr(reference, forward))
    threshold = derivation.PER_INPUT * entries
    print(f"{label:38s} {backward:20s} {entries:6d} {passes:9.1f} {passes / threshold:8.3f}   "
          f"{'FLAGGED' if derivation.flagged(entries, passes) else '-'}")


def main():
    print(f"flag: passes >= {derivation.PER_INPUT:g} x input entries (passes of the contract's "
          "forward beyond two calls of the submission's own)")
    print(f"{'submission':38s} {'backward':20s} {'N':>6s} {'passes':>9s} {'/ flag':>8s}")
    ns = build_namespace([], label="reference")
    for backward in derivation.FORWARD_OF:
        row("reference", ns, backward)
    for entry in HONEST:
        ns = namespace(entry)
        for backward in derivation.FORWARD_OF:
            row(f"honest:{entry.id}", ns, backward)
    for entry in CORRECT:
        touched = [b for b, f in derivation.FORWARD_OF.items()
                   if b in entry.sources or f in entry.sources]
        if touched:
            ns = build_namespace(list(entry.sources.values()), label=entry.id)
            for backward in touched:
                row(f"correct:{entry.id}", ns, backward)
    for entry in NUMERICAL:
        ns = build_namespace(list(entry.sources.values()), label=entry.id)
        row(f"numerical:{entry.id}", ns, entry.backward)


if __name__ == "__main__":
    main()
