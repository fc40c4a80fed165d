"""Benchmark of each jail's fair share of the machine (its own cgroup: ``cgroup.py``).

    python bench/fair_share_bench.py [--repeat N] [--burners N]

Prints, measured in one run:

- the wall seconds of grading an honest student (``grade_isolated``, the reference's
  code) alone, and beside a classmate whose code burns CPU in ``--burners`` processes
  (graded at the same time, in its own jail), with the jails' cgroups and, for
  comparison, without them (``ATTENTION_KIT_CGROUPS=off``); the ratio beside / alone
  with cgroups is the figure (target: at most 1.2);
- the jail's overhead: the median wall seconds of grading the honest student alone with
  cgroups against without, and of a jailed ``python -c "import numpy"`` (the start of
  every worker) with against without (alternating; target: at most 1.10).

Nothing is asserted: timing belongs in a benchmark, not in the test suite. Under load
(other people's processes on the same cores) the figures spread; the ratios are what to
read.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from grader_tests import jail  # noqa: E402
from grader_tests.sandbox import grade_isolated  # noqa: E402
from tests.catalogue import REFERENCE_SOURCE  # noqa: E402

GRADED = ["softmax", "causal_mask", "scaled_dot_product_attention"]
# ``softmax`` replaced by many processes burning CPU until the check's time limit ends
# them (then a wrong answer); the burn lasts at least as long as an honest grading.
BURNER = '''
import os, time
def softmax(scores, axis=-1):
    for _ in range({burners} - 1):
        if os.fork() == 0:
            while True:
                pass
    end = time.monotonic() + 600
    while time.monotonic() < end:
        pass
    return scores
'''


def _write(folder: str, name: str, source: str) -> str:
    os.makedirs(os.path.join(folder, name))
    path = os.path.join(folder, name, "attention.py")
    with open(path, "w") as f:
        f.write(source)
    return path


def _cgroups(on: bool) -> None:
    if on:
        os.environ.pop(jail.CGROUPS_ENV, None)
    else:
        os.environ[jail.CGROUPS_ENV] = "off"


LOST: list[str] = []  # gradings of the honest student that did not give full marks


def graded_seconds(path: str, label: str = "") -> float:
    """Wall seconds of grading ``path``; a grading short of full marks is counted in
    ``LOST`` (checks that ran out of time when the machine was starved)."""
    started = time.perf_counter()
    results, _, flags = grade_isolated(path, names=GRADED)
    took = time.perf_counter() - started
    if flags or any(r.score != r.max_score for r in results.values()):
        LOST.append(label)
    return took


@contextlib.contextmanager
def burning(burner: str) -> Iterator[None]:
    """While inside, ``burner`` is graded again and again in a thread of its own (each
    grading of it ends at its check's time limit), its processes running."""
    stop = threading.Event()

    def burn() -> None:
        while not stop.is_set():
            grade_isolated(burner, names=["softmax"])

    box = threading.Thread(target=burn, daemon=True)
    box.start()
    time.sleep(3.0)  # the burner's processes running
    try:
        yield
    finally:
        stop.set()
        box.join()


def started_seconds() -> float:
    """Wall seconds of a jailed ``python -c "import numpy"``, its group removed after."""
    import subprocess

    cmd = jail.command([sys.executable, "-I", "-c", "import numpy"])
    started = time.perf_counter()
    subprocess.run(cmd.argv, preexec_fn=cmd.preexec, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    jail.reap(cmd.uid, group=cmd.group)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--burners", type=int, default=8)
    args = parser.parse_args(argv)
    jail.require()
    folder = tempfile.mkdtemp(prefix="fair-share-bench-")
    honest = _write(folder, "s_honest", REFERENCE_SOURCE)
    burner = _write(folder, "s_burner", REFERENCE_SOURCE + "\n" +
                    BURNER.replace("{burners}", str(args.burners)))
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    graded_seconds(honest)  # warm the page cache
    on, off = [], []
    for _ in range(args.repeat):
        _cgroups(True)
        on.append(graded_seconds(honest))
        _cgroups(False)
        off.append(graded_seconds(honest))
    figures = {}
    for label, wanted in (("with cgroups", True), ("without cgroups", False)):
        _cgroups(wanted)
        alone, beside = [], []
        for _ in range(args.repeat):  # alternating: alone, then beside a burner
            alone.append(graded_seconds(honest, label))
            with burning(burner):
                beside.append(graded_seconds(honest, label))
        figures[label] = (statistics.median(alone), statistics.median(beside))
        print(f"honest grading {label}: alone {figures[label][0]:.2f} s, beside a burner "
              f"of {args.burners} processes {figures[label][1]:.2f} s, ratio "
              f"{figures[label][1] / figures[label][0]:.2f} (median of {args.repeat}); "
              f"gradings short of full marks: {LOST.count(label)} of {2 * args.repeat}")
    starts_on, starts_off = [], []
    for _ in range(5 * args.repeat):
        _cgroups(True)
        starts_on.append(started_seconds())
        _cgroups(False)
        starts_off.append(started_seconds())
    _cgroups(True)
    alone, beside = figures["with cgroups"]
    print(f"ratio beside / alone, with cgroups: {beside / alone:.2f} (target <= 1.2)")
    a, b = statistics.median(on), statistics.median(off)
    print(f"jail overhead, honest grading with cgroups {a:.2f} s / without {b:.2f} s: "
          f"{a / b:.2f} (target <= 1.10; median of {args.repeat}, alternating)")
    a, b = statistics.median(starts_on), statistics.median(starts_off)
    print(f"jail overhead, jailed start with cgroups {a:.3f} s / without {b:.3f} s: "
          f"{a / b:.2f} (target <= 1.10; median of {5 * args.repeat}, alternating)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
