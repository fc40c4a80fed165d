"""Benchmark of the grader's memory against the submissions that amplify what they send:
the peak resident set of the grading process for an honest class, and for the same class
with one student of each amplifying kind in it.

    python bench/grader_memory_bench.py [--students N]

Each class is graded in a fresh process of its own (so one class's peak is not another's),
whose own peak resident set (``ru_maxrss``: the grader alone, not its jails) is printed,
with the ratio to the honest class on the same path (target: at most 1.5):

- the kernel's path (``autograde.JailedExecute``, nbgrader's autograde): notebooks run in
  the jailed kernel; the amplifying kind is the catalogue's IOPub flood (forty displays of
  15 MB). For scale, the same flood with the budget lifted (``output_bytes`` 1 TiB, as
  if nothing counted the bytes at the socket) is printed too;
- the worker's path (``sandbox.grade_isolated``, ``grade`` and ``batch``): the amplifying
  kinds are a reply of 18 MB of nested empty lists and a reply of 20 000 records of
  new names (``tests/test_wire_limits.py``).

Nothing is asserted: memory and time belong in a benchmark, not in the test suite.

Measured on 2 cores at a load of 6.5, a class of 3: kernel path 134 MiB honest, 137 MiB
with the flood (ratio 1.03; 347 MiB, ratio 2.60, with the budget lifted); worker path
162 MiB honest, 196 MiB with the nested reply (1.21), 177 MiB with the record names (1.09).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

HONEST_CELLS = ["import numpy as np\nx = np.arange(12.0).reshape(3, 4)\nprint(x.sum())",
                "print('honest output ' * 20)"]


def _kernel_class(students: int, odd: str | None, budget: int | None) -> None:
    import nbformat

    from grader_tests.autograde import JailedExecute
    from tests.catalogue.attacks import IOPUB_FLOOD

    for i in range(students):
        nb = nbformat.v4.new_notebook()
        cells = list(HONEST_CELLS)
        if odd == "flood" and i == 0:
            cells.insert(1, IOPUB_FLOOD)
        nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
        folder = tempfile.mkdtemp(prefix="attention-kit-bench-")
        kwargs = {} if budget is None else {"output_bytes": budget}
        execute = JailedExecute(timeout=60, startup_timeout=120, interrupt_on_timeout=True,
                                **kwargs)
        execute.preprocess(nb, {"metadata": {"path": folder}})


def _worker_class(students: int, odd: str | None) -> None:
    from grader_tests.sandbox import grade_isolated
    from tests.test_wire_limits import FORGER, HONEST, MAKE_FLOOD, MAKE_NESTED

    make = {"nested": MAKE_NESTED, "records": MAKE_FLOOD}.get(odd or "")
    folder = tempfile.mkdtemp(prefix="attention-kit-bench-")
    for i in range(students):
        path = os.path.join(folder, f"s{i}.py")
        with open(path, "w") as f:
            f.write(make + FORGER if make and i == 0 else HONEST)
        grade_isolated(path, names=["softmax"])


def run_class(path: str, students: int, odd: str | None, budget: int | None) -> None:
    """Grade one class in this process and print its peak resident set (bytes) as JSON."""
    started = time.monotonic()
    if path == "kernel":
        _kernel_class(students, odd, budget)
    else:
        _worker_class(students, odd)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"peak": peak, "seconds": time.monotonic() - started}))


def measure(path: str, students: int, odd: str | None, budget: int | None = None) -> dict:
    """Peak resident set (bytes) and seconds of a fresh process grading one class."""
    argv = [sys.executable, __file__, "--one", path, "--students", str(students),
            "--odd", odd or "", "--budget", str(budget or 0)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--odd", default="", help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        run_class(args.one, args.students, args.odd or None, args.budget or None)
        return
    MiB = 2**20
    print(f"grader's peak resident set, a class of {args.students} (one amplifying student "
          f"where named); load {os.getloadavg()[0]:.1f}")
    for path, kinds in (("kernel", ["flood"]), ("worker", ["nested", "records"])):
        honest = measure(path, args.students, None)
        print(f"  {path:6} honest class        {honest['peak'] / MiB:7.0f} MiB "
              f"({honest['seconds']:.1f} s)")
        for kind in kinds:
            got = measure(path, args.students, kind)
            print(f"  {path:6} with {kind:15} {got['peak'] / MiB:7.0f} MiB "
                  f"({got['seconds']:.1f} s)  ratio {got['peak'] / honest['peak']:.2f} "
                  f"(target <= 1.5)")
        if path == "kernel":
            got = measure(path, args.students, "flood", budget=2**40)
            print(f"  {path:6} flood, budget lifted {got['peak'] / MiB:7.0f} MiB "
                  f"({got['seconds']:.1f} s)  ratio {got['peak'] / honest['peak']:.2f} "
                  f"(what the socket's count saves)")


if __name__ == "__main__":
    main()
