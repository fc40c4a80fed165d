"""Accuracy of the kit's training paths over many seeds, against the lesson's recipe.

Not a timed test: it prints numbers to read. Run from the repository root, on one core::

    nice -n 19 python bench/training_accuracy.py                      # 20 seeds, everything
    python bench/training_accuracy.py --seeds 5 --tasks sort --lengths 6 --paths lesson64,fast32
    python bench/training_accuracy.py --jsonl runs.jsonl ...          # keep every run; resume
    python bench/training_accuracy.py --jsonl runs.jsonl --report     # the tables only
    python bench/training_accuracy.py --kv-cache                      # the KV cache's speed-up

For each task (copy, sort), length ``L`` (4, 6, 8) and seed (0 .. N-1) it trains the
decoder of the `training` assignment (docs/contract.md, section 3; 1500 steps of batch 32,
Adam at 3e-3) with each path:

* ``lesson64``: ``bench/training_lesson_recipe.py``, the lesson's recipe written
  independently of the kit, float64 (one generator for the weights, then the batches;
  test sequences from seed 999);
* ``ref64``, ``ref32``: ``solutions.training.train`` on the plain reference functions
  (``reference_ops``) in float64 and float32;
* ``fast32``: ``train`` on ``fast_ops`` in float32, what the kit benchmarks and runs;
* ``fast64`` (only when asked for): ``fast_ops`` in float64, to separate the kernels from
  the precision;

and evaluates greedy generation of the ``L`` answers of 500 test sequences. The runs go
seed by seed, every path for a seed before the next, so that a change of machine load
falls on every path alike. Per task, ``L`` and path it prints:

* mean, minimum and the **95 % t-interval of the mean** over the seeds
  (``mean +- t(0.975, n-1) s / sqrt(n)``, ``s`` the sample standard deviation) of token
  and sequence accuracy;
* for a kit path, the difference of its mean sequence accuracy from ``lesson64``'s with
  the 95 % Welch interval of that difference (unequal variances, Satterthwaite degrees of
  freedom): an interval that holds 0 means the seeds do not tell the two apart;
* mean CPU seconds per run (``time.process_time``) and its ratio to ``lesson64``'s in
  this process.

Each seed's accuracy is one draw of a chaotic process: a rounding difference of 1e-16 in
the first step (float32 against float64, or two ways of summing) sends a training down
another path, and the sequence accuracy of one seed moves by several points. Only the
distribution over seeds compares two paths.

``--kv-cache`` times greedy generation with and without the KV cache where the lesson
timed it (an untrained model of 4 layers, 8 heads, d = 256, a prompt of 32 tokens and 128
generated ones, T = 160, float64, batch 1) and at the trained decoder's size (2 layers,
d = 32, a prompt of L + 1 = 7 tokens and 6 generated ones, batch 500).
"""

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads its BLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT, ROOT / "bench"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import numpy as np

import training_lesson_recipe as lesson_recipe
from solutions import training

PATHS = ("lesson64", "ref64", "ref32", "fast32")
EXTRA_PATHS = ("fast64",)   # on request only: the fast kernels in float64 (an ablation)
BASELINE = "lesson64"

# Student's t quantile t(0.975, df) for df = 1 .. 30 (standard tables); above 30 the
# Cornish-Fisher series of Abramowitz & Stegun 26.7.5 (error below 1e-4 there).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: float) -> float:
    """Two-sided 95 % quantile of Student's t with ``df`` degrees of freedom.

    Args:
        df: degrees of freedom, > 0 (a Welch ``df`` may be fractional: below 30 the table
            value at ``floor(df)`` is used, which errs on the wide side).

    Returns:
        float, ``t`` with ``P(|T| <= t) = 0.95``.

    Raises:
        ValueError: if ``df < 1``.
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if df < 31:
        return _T975[int(df) - 1]
    z = 1.959963984540054
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4


def mean_interval(values) -> tuple:
    """``(mean, low, high)``: the mean of ``values`` (a sequence of floats, n >= 1) and its
    95 % t-interval (``low = high = mean`` when n = 1)."""
    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean())
    if x.size < 2:
        return mean, mean, mean
    half = t975(x.size - 1) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return mean, mean - half, mean + half


def welch_interval(a, b) -> tuple:
    """``(difference, low, high)``: ``mean(a) - mean(b)`` and its 95 % Welch interval
    (standard error ``sqrt(s_a^2/n_a + s_b^2/n_b)``, Satterthwaite degrees of freedom).
    Both samples need n >= 2; a zero standard error gives a zero-width interval."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    diff = float(a.mean() - b.mean())
    if va + vb == 0:
        return diff, diff, diff
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    half = t975(df) * math.sqrt(va + vb)
    return diff, diff - half, diff + half


def run_one(path: str, task: str, L: int, seed: int, steps: int) -> dict:
    """Train and evaluate one path on one seed.

    Returns:
        dict: ``path, task, L, seed, steps``, ``token_acc``, ``seq_acc``, ``final_loss``
        (floats), ``cpu`` (CPU seconds of this process for training and evaluation) and
        ``wall`` (seconds).
    """
    cpu, wall = time.process_time(), time.perf_counter()
    if path == "lesson64":
        result = lesson_recipe.train(task, L, seed, steps=steps)
    else:
        ops = training.fast_ops() if path.startswith("fast") else training.reference_ops()
        dtype = np.float64 if path.endswith("64") else np.float32
        result = training.train(task, L, seed, ops, steps=steps, dtype=dtype)
    return {"path": path, "task": task, "L": L, "seed": seed, "steps": steps,
            "token_acc": result["token_acc"], "seq_acc": result["seq_acc"],
            "final_loss": result["final_loss"], "cpu": time.process_time() - cpu,
            "wall": time.perf_counter() - wall}


def report(records: list, paths=PATHS) -> str:
    """The tables of ``records`` (dicts of ``run_one``), per task and L, as text."""
    lines = []
    groups = sorted({(r["task"], r["L"]) for r in records})
    for task, L in groups:
        by_path = {p: sorted((r for r in records if (r["task"], r["L"], r["path"]) == (task, L, p)),
                             key=lambda r: r["seed"]) for p in paths}
        seeds = sorted({r["seed"] for p in paths for r in by_path[p]})
        lines.append(f"\n{task}, L = {L}, seeds {_seed_span(seeds)}: mean, minimum and 95 % t-interval "
                     f"of the mean over the seeds; CPU seconds per run and ratio to {BASELINE}")
        lines.append(f"{'':14s}{'token accuracy':^28s}  {'sequence accuracy':^28s}  "
                     f"{'sequence, minus ' + BASELINE:^26s}")
        lines.append(f"{'path':9s} {'n':>3s}  {'mean':>6s} {'min':>6s} {'95 % interval':>14s}  "
                     f"{'mean':>6s} {'min':>6s} {'95 % interval':>14s}  {'difference, 95 % Welch':>26s}  "
                     f"{'cpu s':>6s} {'ratio':>6s}")
        base = by_path.get(BASELINE) or []
        base_cpu = np.mean([r["cpu"] for r in base]) if base else float("nan")
        for p in paths:
            runs = by_path[p]
            if not runs:
                continue
            token = [r["token_acc"] for r in runs]
            seq = [r["seq_acc"] for r in runs]
            tm, tl, th = mean_interval(token)
            sm, sl, sh = mean_interval(seq)
            versus = ""
            if p != BASELINE and len(base) >= 2 and len(runs) >= 2:
                diff, low, high = welch_interval(seq, [r["seq_acc"] for r in base])
                versus = f"{diff:+.3f} [{low:+.3f}, {high:+.3f}]"
            cpu = np.mean([r["cpu"] for r in runs])
            lines.append(f"{p:9s} {len(runs):3d}  {tm:6.3f} {min(token):6.3f} [{tl:.3f}, {th:.3f}]  "
                         f"{sm:6.3f} {min(seq):6.3f} [{sl:.3f}, {sh:.3f}]  {versus:>26s}  "
                         f"{cpu:6.1f} {cpu / base_cpu:6.2f}")
    return "\n".join(lines)


def _seed_span(seeds):
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


def kv_cache_speedup(repeats: int = 3) -> str:
    """Time greedy generation without and with the KV cache (reference functions, float64,
    best of ``repeats``) in the lesson's setting and at the trained decoder's size; text."""
    ops = training.reference_ops()
    settings = (("lesson: 4 layers, 8 heads, d = 256, prompt 32, 128 new, T = 160, batch 1",
                 training.ModelConfig(d=256, n_heads=8, n_layers=4, d_ff=1024, max_len=160), 1, 32, 128),
                ("trained decoder: 2 layers, 4 heads, d = 32, prompt 7, 6 new, T = 13, batch 500",
                 training.ModelConfig(max_len=13), 500, 7, 6))
    lines = []
    for label, config, batch, prompt_len, n_new in settings:
        params = training.init_params(config, np.random.default_rng(0))
        prompt = np.random.default_rng(1).integers(0, config.vocab_size, size=(batch, prompt_len))
        times = {}
        for name, generate in (("without", training.greedy_generate),
                               ("with", training.generate_with_cache)):
            best = math.inf
            for _ in range(repeats):
                started = time.process_time()
                tokens, logits = generate(params, prompt, n_new, config, ops)
                best = min(best, time.process_time() - started)
            times[name] = (best, tokens, logits)
        same = np.array_equal(times["without"][1], times["with"][1])
        gap = float(np.max(np.abs(times["without"][2] - times["with"][2])))
        lines.append(f"{label}\n  without cache {times['without'][0]:.3f} s, with cache "
                     f"{times['with'][0]:.3f} s (CPU, best of {repeats}): "
                     f"{times['without'][0] / times['with'][0]:.1f}x; tokens identical: {same}, "
                     f"largest logit difference {gap:.1e}")
    return "\n".join(lines)


def main(argv=None) -> int:
    """Command line; returns the exit status (0)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per task, L and path")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--tasks", default="copy,sort")
    parser.add_argument("--lengths", default="4,6,8")
    parser.add_argument("--paths", default=",".join(PATHS),
                        help=f"any of {','.join(PATHS + EXTRA_PATHS)}")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--jsonl", type=Path, default=None,
                        help="append every run to this file; runs already in it are not repeated")
    parser.add_argument("--report", action="store_true", help="print the tables of --jsonl and stop")
    parser.add_argument("--kv-cache", action="store_true", help="time the KV cache and stop")
    args = parser.parse_args(argv)
    training.limit_blas_threads(1)  # in case NumPy was loaded before the variable was set
    if args.kv_cache:
        print(kv_cache_speedup())
        return 0

    tasks = args.tasks.split(",")
    lengths = [int(x) for x in args.lengths.split(",")]
    paths = [p for p in PATHS + EXTRA_PATHS if p in args.paths.split(",")]
    unknown = set(args.paths.split(",")) - set(PATHS + EXTRA_PATHS)
    if unknown:
        parser.error(f"unknown path(s) {sorted(unknown)}: choose among "
                     f"{','.join(PATHS + EXTRA_PATHS)}")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    records = []
    if args.jsonl is not None and args.jsonl.exists():
        records = [json.loads(line) for line in args.jsonl.read_text().splitlines() if line.strip()]
        records = [r for r in records if r.get("steps", 1500) == args.steps]
    if args.report:
        wanted = [r for r in records if r["task"] in tasks and r["L"] in lengths]
        print(report(wanted, paths))
        return 0
    done = {(r["path"], r["task"], r["L"], r["seed"]) for r in records}
    print(f"{args.steps} steps, batch 32, one BLAS thread; tasks {tasks}, L {lengths}, "
          f"seeds {seeds.start}-{seeds.stop - 1}, paths {paths}", flush=True)
    mine = []
    for task in tasks:
        for L in lengths:
            for seed in seeds:
                for path in paths:
                    if (path, task, L, seed) in done:
                        continue
                    record = run_one(path, task, L, seed, args.steps)
                    mine.append(record)
                    print(f"  {task} L={L} seed {seed:2d} {path:9s} token {record['token_acc']:.3f} "
                          f"sequence {record['seq_acc']:.3f} loss {record['final_loss']:.4f} "
                          f"cpu {record['cpu']:5.1f} s", flush=True)
                    if args.jsonl is not None:
                        with args.jsonl.open("a") as out:
                            out.write(json.dumps(record) + "\n")
    wanted = [r for r in records + mine if r["task"] in tasks and r["L"] in lengths
              and r["seed"] in seeds]
    print(report(wanted, paths))
    if records:
        print("\n(runs read from --jsonl were timed in other processes: compare CPU ratios "
              "only within one invocation)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
