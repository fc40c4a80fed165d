"""Benchmark of the hidden graders: wall time per submission and per graded function.

    python bench/grading_bench.py [SUBMISSION ...]

Grades the reference solution first (the baseline, in this same process), then every
submission given (default: every notebook of the example class, ``example/submitted/``),
and prints for each the seconds per graded name, the total, its ratio to the baseline and
to the target of 10 s for the whole assignment (issue 3). Nothing here is asserted: timing belongs in a
benchmark, not in the test suite.
"""

import glob
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE_CLASS = os.path.join(ROOT, "example", "submitted")  # the example class
sys.path.insert(0, ROOT)

from grader_tests.core import POINTS, grade_namespace  # noqa: E402
from grader_tests.submission import load  # noqa: E402

TARGET_S = 10.0


def time_grading(path):
    """Grade ``path``; return (seconds to load, {name: seconds}, total seconds, score)."""
    start = time.perf_counter()
    loaded = load(path)
    loaded_at = time.perf_counter()
    results = grade_namespace(loaded.namespace)
    end = time.perf_counter()
    per = {name: r.seconds for name, r in results.items()}
    return loaded_at - start, per, end - start, sum(r.score for r in results.values())


def main(argv):
    paths = argv or sorted(glob.glob(os.path.join(EXAMPLE_CLASS, "*", "attention", "*.ipynb")))
    baseline_path = os.path.join(ROOT, "solutions", "attention.py")
    time_grading(baseline_path)  # warm-up: imports, Hypothesis strategies
    _, base_per, base_total, _ = time_grading(baseline_path)
    print(f"cores: {os.cpu_count()}; target: whole assignment under {TARGET_S:g} s per submission")
    print(f"baseline (reference solution): {base_total:.2f} s")
    width = max(len(n) for n in POINTS)
    rows = [("reference", baseline_path, base_per, base_total, None)]
    for path in paths:
        load_s, per, total, score = time_grading(path)
        rows.append((os.path.relpath(path, EXAMPLE_CLASS).split(os.sep)[0] if path.startswith(
            EXAMPLE_CLASS) else os.path.basename(path), path, per, total, score))
    for label, _, per, total, score in rows:
        print(f"\n{label}: {total:.2f} s, {total / base_total:.2f}x baseline, "
              f"{total / TARGET_S:.2f} of the target" + ("" if score is None else
                                                         f", score {score:.2f}"))
        for name in POINTS:
            print(f"  {name:<{width}}  {per[name]:6.3f} s  ({per[name] / max(base_per[name], 1e-9):5.2f}x)")


if __name__ == "__main__":
    main(sys.argv[1:])
