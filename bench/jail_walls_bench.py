"""Benchmark of the jail's walls: what starting a jailed program costs with the seccomp
filter compiled by libseccomp and handed to bubblewrap (``--seccomp``, today's jail),
against the jail as it was before: the same bubblewrap command with no ``--seccomp``,
and a Python interpreter started inside the jail before the program to install the
filter (the step the previous jail ran, ``-I -S``, here without its ``prctl``, so the
baseline is if anything a little cheap). Measured in one run, alternating.

    python bench/jail_walls_bench.py [--repeat N]

Prints the median wall seconds of each way of running ``python -c "import numpy"`` (the
start of every sandbox worker) and the ratio today / before (target: at most 1.10).
Nothing is asserted: timing belongs in a benchmark, not in the test suite. Under load
(other people's tests on the same cores) the figures spread; the ratio is what to read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from grader_tests import jail  # noqa: E402

PROGRAM = [sys.executable, "-I", "-c", "import numpy"]
# The previous jail's first step inside: an interpreter that then execs the program.
BOOT = [sys.executable, "-I", "-S", "-c", "import os, sys; os.execvp(sys.argv[1], sys.argv[1:])"]


def today() -> jail.Command:
    """Today's jail for ``PROGRAM``."""
    return jail.command(PROGRAM)


def before() -> jail.Command:
    """The jail without bubblewrap's ``--seccomp`` and with the boot interpreter."""
    cmd = jail.command(PROGRAM)
    argv = cmd.argv[4:]  # past the shell that opens the filter's descriptor
    at = argv.index("--seccomp")
    del argv[at:at + 2]
    split = len(argv) - len(PROGRAM)
    return jail.Command(argv[:split] + BOOT + argv[split:], cmd.preexec, cmd.uid, cmd.group)


def seconds(cmd: jail.Command) -> float:
    """Wall seconds from start to end of the jailed program."""
    started = time.perf_counter()
    subprocess.run(cmd.argv, preexec_fn=cmd.preexec, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    jail.reap(cmd.uid, group=cmd.group)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    jail.require()
    jail._seccomp_bpf.cache_clear()
    started = time.perf_counter()
    jail.seccomp_bpf()
    built = time.perf_counter() - started
    now, then = [], []
    seconds(today())  # warm the page cache
    for _ in range(args.repeat):
        now.append(seconds(today()))
        then.append(seconds(before()))
    a, b = statistics.median(now), statistics.median(then)
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"filter: {len(jail.seccomp_bpf()) // 8} BPF instructions (built once per process, "
          f"{built * 1e3:.1f} ms)")
    print(f"jailed start, today (libseccomp, --seccomp): {a:.3f} s (median of {args.repeat})")
    print(f"jailed start, before (boot interpreter):      {b:.3f} s")
    print(f"ratio today / before: {a / b:.2f} (target <= 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
