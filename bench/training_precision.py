"""How far float32 gradients are from float64's, tensor by tensor, at one point of training.

Not a timed test: it prints numbers to read. Run from the repository root::

    python bench/training_precision.py                      # sort, L = 6, seed 0, 800 steps
    python bench/training_precision.py --task copy --steps 1500

It trains the decoder in float64 (``solutions.training.train`` on ``reference_ops``) for
``--steps`` steps, draws one batch of 32 from seed 123, and computes the loss gradient on
it four ways: the reference functions and the fast kernels (``fast_ops``), each in float64
and in float32 (the float64 weights rounded to float32). For every parameter tensor it
prints the norm of the float64 reference gradient and the relative error
``||g - g_ref64|| / ||g_ref64||`` of the three others. A relative error near 1e-7 .. 1e-4 is
float32 rounding; a tensor whose true gradient is 0 shows its rounding noise as a huge
relative error (the key bias ``b_K``: see the notes above the fast kernels in
``solutions/training.py``).
"""

import argparse
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads its BLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np

from solutions import training


def gradients(params, config, batch, ops, dtype):
    """Loss (float) and gradient dict of ``params`` cast to ``dtype`` on ``batch``
    ``(inputs, targets, loss_mask)``, through ``ops``."""
    inputs, targets, mask = batch
    cast = {k: v.astype(dtype) for k, v in params.items()}
    logits, cache = ops.model_forward(cast, inputs, config, ops)
    loss, dlogits = ops.masked_cross_entropy(logits, targets, mask)
    return loss, ops.model_backward(dlogits, cache, ops)


def main(argv=None) -> int:
    """Command line; returns the exit status (0)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="sort", choices=training.TASKS)
    parser.add_argument("--L", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=800)
    args = parser.parse_args(argv)
    training.limit_blas_threads(1)
    reference, fast = training.reference_ops(), training.fast_ops()
    trained = training.train(args.task, args.L, args.seed, reference, steps=args.steps,
                             dtype=np.float64, eval_size=10)
    params, config = trained["params"], trained["config"]
    batch = training.make_batch(args.task, args.L, 32, np.random.default_rng(123))
    runs = {"ref64": (reference, np.float64), "ref32": (reference, np.float32),
            "fast64": (fast, np.float64), "fast32": (fast, np.float32)}
    results = {name: gradients(params, config, batch, ops, dtype)
               for name, (ops, dtype) in runs.items()}
    print(f"{args.task}, L = {args.L}, seed {args.seed}, after {args.steps} float64 steps; "
          f"batch loss: " + ", ".join(f"{n} {loss:.6g}" for n, (loss, _) in results.items()))
    print(f"{'tensor':22s} {'|g| ref64':>10s}   relative error: " +
          "  ".join(f"{n:>8s}" for n in runs if n != "ref64"))
    exact = results["ref64"][1]
    for key, g in exact.items():
        norm = float(np.linalg.norm(g))
        errors = []
        for name in runs:
            if name == "ref64":
                continue
            other = results[name][1][key].astype(np.float64)
            errors.append(float(np.linalg.norm(other - g)) / max(norm, 1e-300))
        print(f"{key:22s} {norm:10.2e}   " + "                " +
              "  ".join(f"{e:8.1e}" for e in errors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
