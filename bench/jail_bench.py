"""Benchmark of the jail: what grading a submission in bubblewrap costs against the same
grading in a plain subprocess (the sandbox as it was before the jail), measured in one run.

    python bench/jail_bench.py [--repeat N] [SUBMISSION ...]

For each submission (default: the example class's ``example/submitted/student_correct``
and ``example/submitted/student_softmax_infinite_loop``), grades it ``N`` times (default 3) each way,
alternating, and prints the median wall seconds and the ratio jailed / unjailed (the
target: at most 1.10). Then times ``nbgrader autograde`` of the same students in a copy of
the course, as ``make demo`` runs it, and prints what the student whose function never
returns costs the class beyond a correct one (the target: at most 15 s). Nothing is
asserted: timing belongs in a benchmark, not in the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE_CLASS = os.path.join(ROOT, "example", "submitted")  # the example class
sys.path.insert(0, ROOT)

from grader_tests.sandbox import grade_isolated  # noqa: E402

DEFAULT = ("student_correct", "student_softmax_infinite_loop")


def seconds(path: str, jailed: bool) -> float:
    """Wall seconds to grade ``path`` in a fresh worker, jailed or not."""
    started = time.perf_counter()
    grade_isolated(path, jailed=jailed)
    return time.perf_counter() - started


def autograde_seconds(students: list[str]) -> dict[str, float]:
    """Wall seconds of ``nbgrader autograde`` per student, in a copy of the course."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="attention-kit-bench-") as course:
        # the kit's course, with the example class standing for the collected submissions
        for part, src in (("source", "source"), ("submitted", os.path.join("example", "submitted")),
                          ("nbgrader_config.py", "nbgrader_config.py")):
            src = os.path.join(ROOT, src)
            (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(course, part))
        env = dict(os.environ, PYTHONPATH=ROOT)
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        nbgrader = [sys.executable, "-m", "nbgrader"]
        subprocess.run(nbgrader + ["generate_assignment", "attention", "--force"], cwd=course,
                       env=env, capture_output=True, check=True)
        for student in students:
            started = time.perf_counter()
            subprocess.run(nbgrader + ["autograde", "attention", "--create", "--force",
                                       f"--student={student}"], cwd=course, env=env,
                           capture_output=True, check=True)
            out[student] = time.perf_counter() - started
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args(argv)
    paths = args.paths or [os.path.join(EXAMPLE_CLASS, s, "attention", "attention.ipynb")
                           for s in DEFAULT]
    seconds(paths[0], True)  # warm-up: imports, page cache
    print(f"{'submission':<40} {'unjailed s':>10} {'jailed s':>9} {'ratio':>6}")
    for path in paths:
        plain, jailed = [], []
        for _ in range(args.repeat):
            plain.append(seconds(path, False))
            jailed.append(seconds(path, True))
        a, b = statistics.median(plain), statistics.median(jailed)
        label = os.path.relpath(path, ROOT)
        print(f"{label[-40:]:<40} {a:10.2f} {b:9.2f} {b / a:6.2f}")
    times = autograde_seconds(list(DEFAULT))
    print("\nnbgrader autograde, one student at a time (kernel and grader in the jail):")
    for student, s in times.items():
        print(f"  {student:<40} {s:6.1f} s")
    extra = times[DEFAULT[1]] - times[DEFAULT[0]]
    print(f"a function that never returns costs the class {extra:.1f} s beyond a correct "
          f"submission (target: at most 15 s)")


if __name__ == "__main__":
    main()
