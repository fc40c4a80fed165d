"""Speed of the reference training on one core: copy, L = 6, 1500 steps, seed 0.

Not a timed test: it prints numbers to read. Run from the repository root::

    python bench/training_bench.py [--repeats 3] [--steps 1500] [--pin CPU]

It runs on one core (one BLAS thread; ``--pin`` also binds the process to one CPU with
``os.sched_setaffinity``, which helps on an idle machine and hurts when other processes
load that CPU), then alternates, ``--repeats`` times, four trainings of the same model on
the same batches:

* **reference**: ``solutions.training.train`` as the kit runs it, float32 arithmetic and
  the fused kernels of ``fast_ops`` (one (d, 3d) projection for Q, K, V, reductions as
  BLAS products, and in training (``fast_loss_and_grads``) the last block's queries and
  FFN, the final layer norm and the head, forward and backward, on the answer rows only);
* **plain float32**: the same loop on the plain reference functions of both assignments
  (``reference_ops``), float32: what the training notebook runs on the instructor's side;
* **plain float64**: the same plain functions in float64;
* **lesson recipe**: ``bench/training_lesson_recipe.py``, the lesson's recipe written
  independently of the kit in float64, one NumPy operation per formula: the baseline.

For each it prints the best wall time and CPU time over the repeats, steps per second,
the final loss and the accuracies of greedy generation on 500 test sequences, then the
CPU-time ratio of the lesson recipe to the reference (the speed-up; the target is at least
3) measured here, in the same process, since a loaded machine slows every run alike. The
lesson's own float64 run took about 9.5 s on one core of this machine class. Wall time
includes evaluation (greedy generation of 500 answers). Accuracy over many seeds is
``bench/training_accuracy.py``'s business: one seed's figures differ between paths by chance.
"""

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads its BLAS

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "bench"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import numpy as np

import training_lesson_recipe
from solutions import training

LESSON_SECONDS = 9.5   # the lesson's float64 implementation, one core (issue 5)


NAMES = ("reference", "plain float32", "plain float64", "lesson recipe")


def run(name: str, steps: int) -> tuple:
    """One training of copy, L = 6, seed 0 by path ``name`` (one of ``NAMES``).

    Returns:
        ``(wall seconds, CPU seconds, result)``; ``result`` has ``final_loss``,
        ``token_acc`` and ``seq_acc``.
    """
    wall, cpu = time.perf_counter(), time.process_time()
    if name == "lesson recipe":
        result = training_lesson_recipe.train("copy", 6, 0, steps=steps)
    else:
        ops, dtype = {
            "reference": (training.fast_ops(), np.float32),
            "plain float32": (training.reference_ops(), np.float32),
            "plain float64": (training.reference_ops(), np.float64),
        }[name]
        result = training.train("copy", 6, 0, ops, steps=steps, dtype=dtype)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="alternations (best is kept)")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--pin", type=int, default=None, metavar="CPU",
                        help="bind the process to this CPU (default: let the OS choose)")
    args = parser.parse_args(argv)

    training.limit_blas_threads(1)  # in case NumPy was loaded before the variable was set
    where = "not pinned"
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
        where = f"pinned to CPU {args.pin}"
    print(f"copy, L = 6, {args.steps} steps, seed 0, batch 32; one BLAS thread, {where}; "
          f"best of {args.repeats}")
    try:
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    except OSError:
        pass

    runs = {n: [] for n in NAMES}
    for _ in range(args.repeats):
        for name in NAMES:
            runs[name].append(run(name, args.steps))
    # best wall time, best CPU time; the result (deterministic) of the first run
    best = {n: (min(r[0] for r in runs[n]), min(r[1] for r in runs[n]), runs[n][0][2])
            for n in NAMES}

    print(f"\n{'':14s} {'wall s':>7s} {'cpu s':>7s} {'steps/s':>8s} {'final loss':>11s} "
          f"{'token acc':>9s} {'seq acc':>8s}")
    for name in NAMES:
        wall, cpu, result = best[name]
        print(f"{name:14s} {wall:7.2f} {cpu:7.2f} {args.steps / wall:8.1f} "
              f"{result['final_loss']:11.6f} {result['token_acc']:9.3f} {result['seq_acc']:8.3f}")
    ref_cpu, base_cpu = best["reference"][1], best["lesson recipe"][1]
    print(f"\nlesson recipe / reference, CPU time (same process, same machine load): "
          f"{base_cpu / ref_cpu:.2f}x (target at least 3); wall time "
          f"{best['lesson recipe'][0] / best['reference'][0]:.2f}x")
    scale = args.steps / 1500
    print(f"the lesson's 9.5 s divided by the measured speed-up: "
          f"{LESSON_SECONDS * scale * ref_cpu / base_cpu:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
