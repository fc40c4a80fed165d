"""Speed of the reference training on one core: copy, L = 6, 1500 steps, seed 0.

Not a timed test: it prints numbers to read. Run from the repository root::

    python bench/training_bench.py [--repeats 3] [--steps 1500] [--pin CPU] [--paths ...]

Every training runs in a fresh Python process of its own (this script, ``--child``), with
one BLAS thread (``--pin`` also binds it to one CPU with ``os.sched_setaffinity``, which
helps on an idle machine and hurts when other processes load that CPU). The child measures
the CPU time of the training and its evaluation, not its start-up, and prints it. The
paths alternate, ``--repeats`` times, so that a machine whose load changes slows them
alike; a fresh process gives each the memory state a training run by itself has (the
lesson's listing is run that way). The paths (``--paths``, comma-separated; default:
``reference``, ``reference (default allocator)``, ``lesson recipe``, ``lesson recipe (allocator
kept)``):

* ``reference``: ``solutions.training.train`` as the kit runs it, float32 arithmetic and
  the fused kernels of ``fast_ops`` (one (d, 3d) projection for Q, K, V, reductions as
  BLAS products, and in training (``fast_loss_and_grads``) the last block's queries and
  FFN, the final layer norm and the head, forward and backward, on the answer rows only).
  ``train`` first calls ``keep_freed_memory`` (glibc keeps freed memory for reuse);
* ``reference (default allocator)``: the same without ``keep_freed_memory``, to show what
  the allocator's setting gives apart from the code;
* ``plain float32``, ``plain float64``: the same loop on the plain reference functions of
  both assignments (``reference_ops``): what the training notebook runs on the
  instructor's side;
* ``lesson recipe``: ``bench/training_lesson_recipe.py``, the lesson's recipe written
  independently of the kit in float64, one NumPy operation per formula, in a process with
  the C library's default allocator, as the lesson's listing runs: **the baseline**;
* ``lesson recipe (allocator kept)``: the same after ``keep_freed_memory``, to show that
  the baseline does not gain from the setting the kit's training makes.

For each it prints the best wall time and CPU time over the repeats, steps per second,
the final loss and the accuracies of greedy generation on 500 test sequences, then the
CPU-time ratio of the lesson recipe to the reference (the speed-up; the target is at least
3). The lesson's own float64 run took about 9.5 s on one core of this machine class. Wall
time includes evaluation (greedy generation of 500 answers). Accuracy over many seeds is
``bench/training_accuracy.py``'s business: one seed's figures differ between paths by
chance.
"""

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads its BLAS

import json
import subprocess
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


NAMES = ("reference", "reference (default allocator)", "plain float32", "plain float64",
         "lesson recipe", "lesson recipe (allocator kept)")
DEFAULT = ("reference", "reference (default allocator)", "lesson recipe",
           "lesson recipe (allocator kept)")


def run(name: str, steps: int) -> dict:
    """One training of copy, L = 6, seed 0 by path ``name`` (one of ``NAMES``), in this
    process (the child's side).

    Returns:
        dict: ``wall`` and ``cpu`` (seconds, training and evaluation), ``final_loss``,
        ``token_acc``, ``seq_acc``, ``allocator_kept`` (bool).
    """
    kept = False
    if name == "reference (default allocator)":
        training.keep_freed_memory = lambda *args, **kwargs: False   # train calls it
    elif name == "lesson recipe (allocator kept)":
        kept = training.keep_freed_memory()
    wall, cpu = time.perf_counter(), time.process_time()
    if name.startswith("lesson recipe"):
        result = training_lesson_recipe.train("copy", 6, 0, steps=steps)
    else:
        ops, dtype = {
            "reference": (training.fast_ops(), np.float32),
            "reference (default allocator)": (training.fast_ops(), np.float32),
            "plain float32": (training.reference_ops(), np.float32),
            "plain float64": (training.reference_ops(), np.float64),
        }[name]
        kept = name == "reference" or name.startswith("plain")
        result = training.train("copy", 6, 0, ops, steps=steps, dtype=dtype)
    return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
            "final_loss": float(result["final_loss"]), "token_acc": result["token_acc"],
            "seq_acc": result["seq_acc"], "allocator_kept": bool(kept)}


def run_in_child(name: str, steps: int, pin) -> dict:
    """``run(name, steps)`` in a fresh Python process (this script with ``--child``).

    Raises:
        RuntimeError: if the child fails or prints no result.
    """
    command = [sys.executable, str(Path(__file__).resolve()), "--child", name,
               "--steps", str(steps)]
    if pin is not None:
        command += ["--pin", str(pin)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"{name}: the child exited with {done.returncode}\n{done.stderr}")
    return json.loads(lines[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="alternations (best is kept)")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--pin", type=int, default=None, metavar="CPU",
                        help="bind the processes to this CPU (default: let the OS choose)")
    parser.add_argument("--paths", default=",".join(DEFAULT),
                        help=f"comma-separated, among: {', '.join(NAMES)}")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
    if args.child is not None:
        training.limit_blas_threads(1)
        print(json.dumps(run(args.child, args.steps)))
        return 0

    names = [n.strip() for n in args.paths.split(",") if n.strip()]
    unknown = [n for n in names if n not in NAMES]
    if unknown or "reference" not in names or "lesson recipe" not in names:
        parser.error(f"--paths: unknown {unknown}; 'reference' and 'lesson recipe' are "
                     f"needed, among {NAMES}")
    where = f"pinned to CPU {args.pin}" if args.pin is not None else "not pinned"
    print(f"copy, L = 6, {args.steps} steps, seed 0, batch 32; one BLAS thread, {where}; "
          f"one fresh process per training, best of {args.repeats}")
    try:
        print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    except OSError:
        pass

    runs = {n: [] for n in names}
    for _ in range(args.repeats):
        for name in names:
            runs[name].append(run_in_child(name, args.steps, args.pin))
    best = {n: (min(r["wall"] for r in runs[n]), min(r["cpu"] for r in runs[n]), runs[n][0])
            for n in names}

    width = max(len(n) for n in names)
    print(f"\n{'':{width}s} {'wall s':>7s} {'cpu s':>7s} {'steps/s':>8s} {'final loss':>11s} "
          f"{'token acc':>9s} {'seq acc':>8s}  cpu s of each run")
    for name in names:
        wall, cpu, result = best[name]
        every = " ".join(f"{r['cpu']:.2f}" for r in runs[name])
        print(f"{name:{width}s} {wall:7.2f} {cpu:7.2f} {args.steps / wall:8.1f} "
              f"{result['final_loss']:11.6f} {result['token_acc']:9.3f} "
              f"{result['seq_acc']:8.3f}  {every}")
    ref_cpu, base_cpu = best["reference"][1], best["lesson recipe"][1]
    print(f"\nlesson recipe / reference, CPU time (best of each, alternated): "
          f"{base_cpu / ref_cpu:.2f}x (target at least 3); wall time "
          f"{best['lesson recipe'][0] / best['reference'][0]:.2f}x")
    pairs = [r["cpu"] / f["cpu"] for r, f in zip(runs["lesson recipe"], runs["reference"])]
    print("round by round: " + ", ".join(f"{p:.2f}x" for p in pairs))
    for other in ("reference (default allocator)", "lesson recipe (allocator kept)"):
        if other in best:
            base = "reference" if other.startswith("reference") else "lesson recipe"
            print(f"{other} / {base}, CPU time: {best[other][1] / best[base][1]:.2f}")
    scale = args.steps / 1500
    print(f"the lesson's 9.5 s divided by the measured speed-up: "
          f"{LESSON_SECONDS * scale * ref_cpu / base_cpu:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
