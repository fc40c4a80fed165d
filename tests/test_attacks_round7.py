"""Round 7 of attacks by a student: value checks an answer computed from the mask alone
passes, memory no cap counts, a training notebook that computes nothing.

* Attention that computes no score: ``scaled_dot_product_attention`` returning weights
  uniform over the keys the mask allows (``1 / n`` on each allowed key, 0 elsewhere) and
  ``out = weights @ V``, never reading Q or K. Its rows sum to 1, ``out`` is
  ``weights @ V``, padded keys change nothing and the real keys' values move the output:
  the two value checks "every row sums to 1 ... out = weights @ V" and "padding
  invariance" passed, so the property checks counted as well: 4.8 of 12 points, unflagged.
  Both checks now also ask that other queries give other weights (the weights are the
  softmax of the scores ``Q K^T``).
* Memory held in anonymous files and System V segments, outside the jail's address-space
  cap, at the expense of the students graded at the same time (section 2).
* A `training` submission of zeros earned 26.17 points from checks a constant passes
  (section 3).
"""

from __future__ import annotations

import textwrap

import pytest

from grader_tests import jail

needs_jail = pytest.mark.skipif(jail.problem() is not None, reason=f"no jail: {jail.problem()}")


# --- 1. attention weights from the mask alone ------------------------------------------------

UNIFORM_ATTENTION = textwrap.dedent('''
    import numpy as np


    def scaled_dot_product_attention(Q, K, V, mask=None, scale=True):
        Q, K, V = np.asarray(Q), np.asarray(K), np.asarray(V)
        shape = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2]) + (Q.shape[-2], K.shape[-2])
        allowed = np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)
        count = np.maximum(allowed.sum(-1, keepdims=True), 1)
        dtype = np.result_type(Q, K, V)
        weights = np.where(allowed, 1.0 / count, 0.0).astype(dtype)
        return (weights @ V).astype(dtype), weights
''')


@pytest.mark.slow  # grades one function in the jail
@needs_jail
def test_attention_weights_that_ignore_the_queries_earn_nothing(tmp_path):
    from grader_tests.sandbox import grade_isolated

    path = tmp_path / "uniform.py"
    path.write_text(UNIFORM_ATTENTION, encoding="utf-8")
    name = "scaled_dot_product_attention"
    results, cell_errors, _flags = grade_isolated(str(path), names=[name])
    assert cell_errors == []
    result = results[name]
    # The attack: 4.8 / 12 (rows sum to 1, padding invariance, float32, no mutation).
    assert result.score == 0.0, [(c.name, c.passed) for c in result.checks]
    failed = {c.name: c for c in result.checks if not c.passed}
    rows = next(c for name_, c in failed.items() if name_.startswith("weights: every row"))
    assert "other queries Q gave the same weights" in rows.message
    assert any(name_.startswith("padding invariance") for name_ in failed)
    # the property checks still pass, and earn nothing beside no passing value check
    passed = {c.name for c in result.checks if c.passed}
    assert passed == {"float32 in, float32 out", "does not modify Q, K, V or the mask"}


# --- 2. memory past the worker's cap, in anonymous files ----------------------------------------
#
# The jailed worker's memory bound is an address-space cap (``RLIMIT_AS``, ``memory_mb``
# after start-up; the autograde kernel's jail: 8 GiB). Memory written into anonymous files
# (``os.memfd_create``, a plain ``open(fd, "wb")`` on it: no raw descriptor call the evidence
# names) is never mapped, so no cap counted it: each such file could grow to the jail's
# largest file (``Limits.file_bytes``, 64 MiB) and the jail could hold ``open_files`` (256)
# of them, 16 GiB, for as long as the submission's process lives (the whole grading). The
# machine's memory is the whole class's: the other students graded at the same time (two
# at once in the demo, the batch's workers) are the ones the out-of-memory killer picks
# from. System V shared memory and message queues (``shmget``, ``msgget`` through ctypes,
# which a flag names but does not stop) the same. Every jailed program now starts behind a
# seccomp filter that refuses those system calls (``jail.DENIED_SYSCALLS``).

MEMFD_HOARD = textwrap.dedent('''
    import os

    _HELD = []
    try:
        for _i in range(4):
            _f = open(os.memfd_create("cache"), "wb", buffering=0)
            for _j in range(48):
                _f.write(b"x" * 2**20)
            _HELD.append(_f)
    except OSError:
        pass


    def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, bytes_per_element):
        return sum(os.fstat(f.fileno()).st_size for f in _HELD) // 2**20
''')


@needs_jail
def test_a_submission_holds_no_more_memory_than_its_cap(tmp_path):
    from grader_tests.sandbox import Sandbox

    path = tmp_path / "hoard.py"
    path.write_text(MEMFD_HOARD, encoding="utf-8")
    with Sandbox(str(path), memory_mb=64) as box:
        held_mib, _args, _kwargs = box.call("kv_cache_bytes", (1, 1, 1, 1, 1, 1), {})
    # The attack: 192 MiB held by a worker capped at 64 MiB past its start-up.
    assert held_mib == 0, held_mib


SHARED_MEMORY = textwrap.dedent('''
    import ctypes
    import os

    libc = ctypes.CDLL(None, use_errno=True)
    made = {"shmget": libc.shmget(0, 64 * 2**20, 0o1600),  # IPC_PRIVATE, IPC_CREAT | 0600
            "msgget": libc.msgget(0, 0o1600)}
    print(sorted(name for name, key in made.items() if key != -1))
    try:
        os.memfd_create("cache")
        print("memfd_create")
    except OSError as exc:
        print(exc.errno)
''')


@needs_jail
def test_a_jailed_program_makes_no_shared_memory_segment_or_anonymous_file():
    import subprocess
    import sys

    jailed = jail.command([sys.executable, "-I", "-c", SHARED_MEMORY])
    done = subprocess.run(jailed.argv, preexec_fn=jailed.preexec, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "1"], done.stdout  # 1: EPERM


# --- 3. a training notebook that computes nothing ----------------------------------------------
#
# The checks of `training` had no kind, so the scoring rule (property checks count only
# beside a passing value check) did not apply there: a submission of stubs that return
# zeros of the right shapes (and ``make_batch`` raising ValueError for an unknown task)
# earned 26.17 of 100 points, unflagged: "does not modify ..." and "float32 ... stays
# float32" of block_backward, adam_step, greedy_generate and masked_cross_entropy, and
# make_batch's copy and sort checks, which a batch of zeros passes (zeros are their own
# copy and their own sort). The property checks of `training` now have their kind
# (docs/contract.md §2), and copy and sort ask for sources that are not all one symbol.

TRAINING_OF_ZEROS = textwrap.dedent('''
    import numpy as np


    def make_batch(task, L, batch_size, rng):
        if task not in ("copy", "sort"):
            raise ValueError(task)
        tokens = np.zeros((batch_size, 2 * L), int)
        return tokens, tokens, np.zeros((batch_size, 2 * L), bool)


    def block_backward(dy, cache, ops):
        return np.zeros_like(np.asarray(dy)), {}


    def greedy_generate(params, prompts, n_new, config, ops):
        B = np.asarray(prompts).shape[0]
        return np.zeros((B, n_new), int), np.zeros((B, n_new, 21))


    def adam_step(params, grads, state, lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        return dict(params), {"t": state.get("t", 0) + 1, "m": dict(state.get("m", {})),
                              "v": dict(state.get("v", {}))}


    def masked_cross_entropy(logits, targets, loss_mask):
        return 0.0, np.zeros_like(np.asarray(logits))
''')


@pytest.mark.slow  # grades five functions in the jail
@needs_jail
def test_a_training_notebook_of_zeros_earns_nothing(tmp_path):
    from grader_tests.sandbox import grade_isolated

    path = tmp_path / "zeros.py"
    path.write_text(TRAINING_OF_ZEROS, encoding="utf-8")
    names = ["make_batch", "block_backward", "greedy_generate", "adam_step",
             "masked_cross_entropy"]
    results, cell_errors, _flags = grade_isolated(str(path), names=names, assignment="training")
    assert cell_errors == []
    earned = {name: results[name].score for name in names if results[name].score > 0}
    # The attack: {'make_batch': 7.5, 'block_backward': 4.17, 'greedy_generate': 4.0,
    # 'adam_step': 7.5, 'masked_cross_entropy': 3.0}.
    assert earned == {}, earned
    copy = next(c for c in results["make_batch"].checks if c.name.startswith("copy:"))
    assert not copy.passed and "every source symbol of the batch is 0" in copy.message
