"""Assignment `training`: the reference, its graders, the notebook's gate, the unlock command.

Fast tests (seconds each). The long ones (a full training, the notebook end to end, the
nbgrader round trip) are in test_training_slow.py.
"""

import inspect
import json
import math
import shutil
import subprocess
import sys
import textwrap
import warnings

import nbformat
import numpy as np
import pytest

from grader_tests.checks_training import (
    POINTS_TRAINING,
    grade_function,
)
from grader_tests.core import CHECKS, grade_id
from grader_tests.faults import FAULTS
from solutions import attention as attention_ref
from solutions import training as tr
from tests.helpers import ATTENTION_SOURCE, ROOT, submission_namespace


# This model's matrices are tiny: several BLAS threads only wait for each other, and on a
# busy machine make a training many times slower.
tr.limit_blas_threads(1)
NOTEBOOK = ROOT / "source" / "training" / "training.ipynb"
ATTENTION_NOTEBOOK = ROOT / "source" / "attention" / "attention.ipynb"
TRAINING_SOURCE = inspect.getsource(tr)


def submission(*extra):
    """A namespace like a student's notebook: both references, exec'd as submission code
    (so they are not flagged as borrowed), then ``extra`` sources exec'd over them."""
    return submission_namespace(*extra, training=True)


# --- the reference ------------------------------------------------------------------------


def test_reference_configuration_has_27253_parameters():
    config = tr.ModelConfig()                      # d 32, 4 heads, 2 layers, d_ff 128, 13 rows
    params = tr.init_params(config, np.random.default_rng(0))
    assert sum(v.size for v in params.values()) == 27_253
    assert tr.model_param_count(21, 32, 2, 13, 128) == 27_253
    assert tr.model_param_count(21, 32, 2, 13) == 27_253          # d_ff defaults to 4 d


def test_initialisation_scales():
    params = tr.init_params(tr.ModelConfig(d=64, d_ff=256), np.random.default_rng(0))
    assert params["embedding"].std() == pytest.approx(0.1, rel=0.1)
    assert params["positions"].std() == pytest.approx(0.1, rel=0.15)
    assert params["block0.W_Q"].std() == pytest.approx(1 / 8, rel=0.05)      # 1/sqrt(fan_in)
    assert params["block1.W2"].std() == pytest.approx(1 / 16, rel=0.05)      # fan_in 256
    assert np.all(params["block0.ln1_gamma"] == 1) and np.all(params["block0.b1"] == 0)


def test_batch_layout_copy_and_sort():
    L, B = 5, 64
    inputs, targets, mask = tr.make_batch("sort", L, B, np.random.default_rng(0))
    assert inputs.shape == targets.shape == mask.shape == (B, 2 * L)
    sequence = np.concatenate([inputs[:, :1], targets], axis=1)
    assert np.array_equal(inputs[:, 1:], targets[:, :-1])
    assert np.all(sequence[:, L] == tr.SEP)
    assert np.array_equal(sequence[:, L + 1:], np.sort(sequence[:, :L], axis=1))
    assert mask.dtype == bool and mask.tolist() == [[False] * L + [True] * L] * B
    inputs, targets, _ = tr.make_batch("copy", L, B, np.random.default_rng(1))
    assert np.array_equal(targets[:, L:], inputs[:, :L])
    assert inputs[:, :L].max() < tr.N_SYMBOLS and inputs[:, :L].min() >= 0
    with pytest.raises(ValueError):
        tr.make_batch("reverse", L, B, np.random.default_rng(0))


def test_masked_cross_entropy_by_hand():
    logits = np.log(np.array([[[1.0, 3.0], [1.0, 1.0]]]))      # p = (0.25, 0.75) and (0.5, 0.5)
    loss, dlogits = tr.masked_cross_entropy(logits, np.array([[1, 0]]), np.array([[True, False]]))
    assert loss == pytest.approx(-math.log(0.75))
    assert np.allclose(dlogits[0, 0], [0.25, -0.25]) and np.all(dlogits[0, 1] == 0)


def _whole_model_gradient_errors(pre_ln, eps, seed=1):
    config = tr.ModelConfig(d=16, n_heads=4, n_layers=2, d_ff=64, max_len=9, pre_ln=pre_ln)
    rng = np.random.default_rng(seed)
    params = tr.init_params(config, rng)
    inputs, targets, mask = tr.make_batch("sort", 4, 3, rng)
    ops = tr.reference_ops()
    logits, cache = tr.model_forward(params, inputs, config, ops)
    _, dlogits = tr.masked_cross_entropy(logits, targets, mask)
    grads = tr.model_backward(dlogits, cache, ops)
    worst = 0.0
    for n, (name, value) in enumerate(params.items()):
        flat = np.random.default_rng(n).choice(value.size, size=min(value.size, 25), replace=False)
        indices = [np.unravel_index(f, value.shape) for f in flat]

        def loss(v, name=name):
            out, _ = tr.model_forward(dict(params, **{name: v}), inputs, config, ops)
            return tr.masked_cross_entropy(out, targets, mask)[0]

        numeric = np.empty(len(indices))
        for k, i in enumerate(indices):
            plus, minus = value.copy(), value.copy()
            plus[i] += eps
            minus[i] -= eps
            numeric[k] = (loss(plus) - loss(minus)) / (2 * eps)
        analytic = np.array([grads[name][i] for i in indices])
        scale = np.maximum(np.abs(analytic), np.abs(numeric))
        keep = scale > 1e-6
        if keep.any():
            worst = max(worst, float(np.max(np.abs(analytic - numeric)[keep] / scale[keep])))
    return worst


@pytest.mark.parametrize("pre_ln", [True, False], ids=["pre-LN", "post-LN"])
def test_whole_model_gradient_check_d16_two_layers(pre_ln):
    """Central differences at eps = 1e-6, float64, relative error over coordinates whose
    gradient exceeds 1e-6: the lesson saw 2.56e-6 and 4.90e-5."""
    assert _whole_model_gradient_errors(pre_ln, 1e-6) < 1e-4


def test_gradient_check_gets_worse_with_large_eps_pre_ln():
    """Trap 8: at eps = 1e-4 central differences cross ReLU kinks in the pre-LN model."""
    assert _whole_model_gradient_errors(True, 1e-4) > 10 * _whole_model_gradient_errors(True, 1e-6)


def test_adam_step_by_hand():
    params = {"w": np.array([1.0, -1.0]), "b": np.array([[0.5]], dtype=np.float32)}
    grads = {"w": np.array([0.5, 2.0]), "b": np.array([[-1.0]], dtype=np.float32)}
    new, state = tr.adam_step(params, grads, tr.adam_init(params), lr=0.1)
    # t = 1: m_hat = g, v_hat = g^2, the step is lr * g / (|g| + eps)
    assert np.allclose(new["w"], [1.0 - 0.1 * 0.5 / (0.5 + 1e-8), -1.0 - 0.1 * 2.0 / (2.0 + 1e-8)],
                       rtol=0, atol=1e-12)
    assert new["b"].dtype == np.float32 and np.allclose(new["b"], [[0.6]])
    assert state["t"] == 1 and np.allclose(state["m"]["w"], [0.05, 0.2])
    assert np.allclose(state["v"]["w"], [0.00025, 0.004])
    assert params["w"].tolist() == [1.0, -1.0]                      # inputs untouched
    new2, state2 = tr.adam_step(new, {"w": np.array([-0.5, 2.0]), "b": grads["b"]}, state, lr=0.1)
    m = 0.9 * 0.05 - 0.1 * 0.5
    v = 0.999 * 0.00025 + 0.001 * 0.25
    expected = new["w"][0] - 0.1 * (m / (1 - 0.81)) / (math.sqrt(v / (1 - 0.999 ** 2)) + 1e-8)
    assert new2["w"][0] == pytest.approx(expected, abs=1e-12) and state2["t"] == 2


def test_training_is_deterministic_given_a_seed():
    ops = tr.fast_ops()
    a = tr.train("sort", 3, 7, ops, steps=25, eval_size=20)
    b = tr.train("sort", 3, 7, ops, steps=25, eval_size=20)
    c = tr.train("sort", 3, 8, ops, steps=25, eval_size=20)
    assert np.array_equal(a["losses"], b["losses"])
    assert all(np.array_equal(a["params"][k], b["params"][k]) for k in a["params"])
    assert not np.array_equal(a["losses"], c["losses"])


def test_training_lays_out_its_random_numbers_as_the_lesson():
    """A seed names the lesson's run: Generator(seed) draws the weights then the batches,
    the test sequences come from Generator(999) whatever the seed (the lesson's 500 test
    sequences at L = 6 have 224 with six distinct symbols: 0.448)."""
    result = tr.train("sort", 3, 5, tr.reference_ops(), steps=1, eval_size=50,
                      dtype=np.float64)
    rng = np.random.default_rng(5)
    params = tr.init_params(tr.ModelConfig(max_len=7), rng)
    inputs, targets, mask = tr.make_batch("sort", 3, 32, rng)
    ops = tr.reference_ops()
    logits, _ = ops.model_forward(params, inputs, tr.ModelConfig(max_len=7), ops)
    assert result["losses"][0] == tr.masked_cross_entropy(logits, targets, mask)[0]
    expected = np.random.default_rng(tr.EVAL_SEED).integers(0, tr.N_SYMBOLS, size=(50, 3))
    assert np.array_equal(result["evaluation"]["source"], expected)
    lesson_test = np.random.default_rng(tr.EVAL_SEED).integers(0, tr.N_SYMBOLS, size=(500, 6))
    assert sum(len(set(row)) == 6 for row in lesson_test.tolist()) == 224
    # without positions the other weights are the same draws
    bare = tr.init_params(tr.ModelConfig(max_len=7, positions=False), np.random.default_rng(5))
    assert "positions" not in bare and np.array_equal(bare["W_out"], params["W_out"])


def test_reference_float64_training_follows_the_lessons_recipe():
    """The kit's float64 training and the lesson's recipe written independently
    (bench/training_lesson_recipe.py) take the same steps: same weights, batches, loss,
    gradients and Adam, to rounding (the recipe adds 1e-12 inside its log)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import training_lesson_recipe as recipe
    finally:
        sys.path.remove(str(ROOT / "bench"))
    for task in ("copy", "sort"):
        kit = tr.train(task, 4, 3, tr.reference_ops(), steps=30, eval_size=20, dtype=np.float64)
        lesson = recipe.train(task, 4, 3, steps=30, eval_size=20)
        assert np.max(np.abs(kit["losses"] - lesson["losses"])) < 1e-9
        assert np.max(np.abs(kit["params"]["W_out"] - lesson["params"]["Wout"])) < 1e-9


@pytest.mark.parametrize("config", [dict(), dict(pre_ln=False), dict(positions=False, scale=False)],
                         ids=["pre-LN", "post-LN", "no positions, no scaling"])
def test_kv_cache_generation_matches_plain_greedy(config):
    config = tr.ModelConfig(**config)
    params = tr.init_params(config, np.random.default_rng(3))
    prompts = tr.make_batch("copy", 6, 40, np.random.default_rng(4))[0][:, :7]
    ops = tr.reference_ops()
    tokens, logits = tr.greedy_generate(params, prompts, 6, config, ops)
    cached_tokens, cached_logits = tr.generate_with_cache(params, prompts, 6, config, ops)
    assert np.array_equal(tokens, cached_tokens)
    assert np.max(np.abs(logits - cached_logits)) < 1e-12


def test_fast_kernels_equal_the_plain_reference_in_float64():
    plain, fast = tr.reference_ops(), tr.fast_ops()
    for pre_ln, scale in ((True, True), (False, False)):
        config = tr.ModelConfig(pre_ln=pre_ln, scale=scale)
        params = tr.init_params(config, np.random.default_rng(0))
        inputs, targets, mask = tr.make_batch("sort", 6, 8, np.random.default_rng(1))
        out = []
        for ops in (plain, fast):
            logits, cache = ops.model_forward(params, inputs, config, ops)
            loss, dlogits = ops.masked_cross_entropy(logits, targets, mask)
            out.append((logits, loss, ops.model_backward(dlogits, cache, ops)))
        assert np.max(np.abs(out[0][0] - out[1][0])) < 1e-12
        assert out[0][1] == pytest.approx(out[1][1], abs=1e-12)
        assert max(np.max(np.abs(out[0][2][k] - out[1][2][k])) for k in params) < 1e-12
    state = tr.adam_init(params)
    grads = {k: np.full(v.shape, 0.3) for k, v in params.items()}
    a, _ = tr.adam_step(params, grads, state)
    b, _ = tr.fast_adam_step(params, grads, state)
    assert max(np.max(np.abs(a[k] - b[k])) for k in params) < 1e-15


def _random_params(config, rng, dtype):
    """Parameters of ``config`` moved off the initialisation (whose biases are 0 and
    layer-norm scales 1) by N(0, 0.1^2) noise, so every term of the gradient is exercised."""
    params = tr.init_params(config, rng)
    return {k: (v + 0.1 * rng.standard_normal(v.shape)).astype(dtype) for k, v in params.items()}


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-12), (np.float32, 1e-5)],
                         ids=["float64", "float32"])
def test_fast_backward_on_the_answer_rows_equals_the_full_backward(dtype, tolerance):
    """The loss reads the answer positions only, so the fast backward runs the head, the
    final layer norm and the last block's FFN, layer norms and attention queries on those
    rows only; on random parameters and batches its loss and gradients are those of the
    plain reference, which runs every row (tolerance relative to the largest gradient)."""
    plain, fast = tr.reference_ops(), tr.fast_ops()
    rng = np.random.default_rng(11)
    for task, L, n_layers in (("sort", 3, 1), ("copy", 6, 2), ("sort", 8, 3)):
        config = tr.ModelConfig(n_layers=n_layers, max_len=2 * L + 1)
        params = _random_params(config, rng, dtype)
        inputs, targets, mask = tr.make_batch(task, L, 16, rng)
        out = []
        for ops in (plain, fast):
            logits, cache = ops.model_forward(params, inputs, config, ops)
            loss, dlogits = ops.masked_cross_entropy(logits, targets, mask)
            out.append((loss, ops.model_backward(dlogits, cache, ops)))
        assert tr._zero_prefix(dlogits) == L                  # the row subset is taken
        assert out[1][0] == pytest.approx(out[0][0], rel=tolerance)
        scale = max(float(np.max(np.abs(g))) for g in out[0][1].values())
        for key in params:
            assert out[1][1][key].dtype == dtype
            assert np.max(np.abs(out[1][1][key] - out[0][1][key])) <= tolerance * scale, key


@pytest.mark.parametrize("s", [1, 5, 11])
def test_fast_block_backward_with_zero_leading_rows_equals_the_reference(s, monkeypatch):
    """A block's output gradient that is 0 at the first ``s`` positions of every sequence
    (and at some later rows too) takes the row-subset path and gives the reference's input
    and parameter gradients."""
    calls = []
    suffix = tr._block_backward_suffix
    monkeypatch.setattr(tr, "_block_backward_suffix",
                        lambda dy, cache, s: calls.append(s) or suffix(dy, cache, s))
    rng = np.random.default_rng(s)
    params = tr.block_params(_random_params(tr.ModelConfig(), rng, np.float64), 0)
    x = rng.standard_normal((5, 12, 32))
    dy = rng.standard_normal((5, 12, 32))
    dy[:, :s] = 0
    dy[2, -1] = 0                                             # a zero row after s
    plain, fast = tr.reference_ops(), tr.fast_ops()
    assert tr._zero_prefix(dy) == s
    _, cache_plain = plain.block_forward(x, params, 4, plain)
    _, cache_fast = fast.block_forward(x, params, 4, fast)
    dx_plain, grads_plain = plain.block_backward(dy, cache_plain, plain)
    dx_fast, grads_fast = fast.block_backward(dy, cache_fast, fast)
    assert calls == [s]
    assert dx_fast.shape == (5, 12, 32) and np.max(np.abs(dx_fast - dx_plain)) < 1e-12
    assert np.abs(dx_fast[:, :s]).max() > 0.01               # keys and values reach early rows
    for key in tr.BLOCK_KEYS:
        assert grads_fast[key].shape == params[key].shape
        assert np.max(np.abs(grads_fast[key] - grads_plain[key])) < 1e-12, key


def test_zero_prefix_counts_leading_zero_positions():
    dy = np.ones((3, 6, 4), dtype=np.float32)
    assert tr._zero_prefix(dy) == 0
    dy[:, :2] = 0
    assert tr._zero_prefix(dy) == 2
    dy[1, 2, 3] = 0                                           # one sequence is not enough
    assert tr._zero_prefix(dy) == 2
    dy[:, 2] = 0
    dy[0, 0, 1] = -1e-30                                      # a non-zero far in front
    assert tr._zero_prefix(dy) == 0
    assert tr._zero_prefix(np.zeros((2, 5, 3))) == 5


@pytest.mark.parametrize("name", ["layer_norm_forward", "layer_norm_backward",
                                  "attention_forward", "attention_backward"])
def test_fast_kernels_pass_the_attention_graders(name):
    """The fast kernels keep the contract (docs/contract.md, section 2): the attention graders give them
    full marks (exec'd as submission code, under the contract's names)."""
    from grader_tests.core import grade_function as grade_attention

    ns = submission("""
        layer_norm_forward, layer_norm_backward = fast_layer_norm_forward, fast_layer_norm_backward
        attention_forward, attention_backward = fast_attention_forward, fast_attention_backward
    """)
    result = grade_attention(name, ns)
    failed = [(c.name, c.fault, c.message) for c in result.checks if not c.passed]
    assert failed == [] and result.score == result.max_score


def test_run_experiments_in_processes_equals_direct_training():
    jobs = [dict(task="copy", L=3, seed=1, steps=20, eval_size=10),
            dict(task="sort", L=2, seed=2, steps=15, eval_size=10)]
    results = tr.run_experiments(jobs, tr.fast_ops, workers=2, progress=False)
    in_process = tr.run_experiments(jobs, tr.fast_ops, workers=1, progress=False)
    for job, result, sequential in zip(jobs, results, in_process):
        direct = tr.train(ops=tr.fast_ops(), **job)
        assert np.array_equal(result["losses"], direct["losses"])
        assert np.array_equal(sequential["losses"], direct["losses"])
        assert result["token_acc"] == direct["token_acc"] == sequential["token_acc"]


def test_attention_cost_fits_a_slope():
    cost = tr.attention_cost(attention_ref.scaled_dot_product_attention, attention_ref.causal_mask,
                             T_values=(64, 256), d_k=16, repeats=1)
    assert cost["matrix_bytes"] == [64 * 64 * 8, 256 * 256 * 8]
    assert cost["peak_bytes"][1] > 4 * cost["peak_bytes"][0]          # grows faster than T
    assert 1.0 < cost["memory_slope"] < 2.5


# --- the graders ----------------------------------------------------------------------------


def test_points_sum_to_100_and_every_name_has_checks():
    assert sum(POINTS_TRAINING.values()) == 100
    for name in POINTS_TRAINING:
        assert len(CHECKS[name]) >= 2, name


def test_reference_gets_full_marks():
    ns = submission()
    for name in POINTS_TRAINING:
        result = grade_function(name, ns)
        failed = [(c.name, c.fault, c.message) for c in result.checks if not c.passed]
        assert failed == [], name
        assert result.score == POINTS_TRAINING[name]


def test_full_marks_when_the_attention_functions_are_the_kits_reference():
    """On the instructor's side (no attention notebook beside the training one) the gate
    defines the attention functions as the kit's reference; a block_backward that calls
    them by name, or through ``ops``, is the student's own work all the same."""
    from solutions import attention as attention_reference

    ns = submission("""
        _ops_backward = block_backward
        def block_backward(dy, cache, ops):
            assert layer_norm_backward is not None      # reads a graded name as a global
            return _ops_backward(dy, cache, ops)
    """)
    ns.update({name: getattr(attention_reference, name)
               for name in attention_reference.SPEC_FUNCTIONS})
    for name in POINTS_TRAINING:
        result = grade_function(name, ns)
        assert [(c.name, c.message) for c in result.checks if not c.passed] == [], name


def test_reference_module_itself_is_flagged_as_borrowed():
    result = grade_function("adam_step", dict(vars(tr)))
    assert result.score == 0 and {c.fault for c in result.checks} == {"tampering"}


def test_stubs_score_zero_without_crashing():
    stubs = "\n".join(f"def {name}(*args, **kwargs):\n    raise NotImplementedError()\n"
                      for name in POINTS_TRAINING)
    ns = submission(stubs)
    for name in POINTS_TRAINING:
        result = grade_function(name, ns)
        assert result.score == 0 and {c.fault for c in result.checks} == {"not-implemented"}


# One bug each: (name, source appended to the reference, fault that must be reported).
BUGGY = {
    "targets not shifted": ("make_batch", """
        _mb = make_batch
        def make_batch(task, L, batch_size, rng):
            inputs, targets, mask = _mb(task, L, batch_size, rng)
            return inputs, inputs.copy(), mask
    """, "other"),
    "loss mask includes the SEP prediction": ("make_batch", """
        _mb = make_batch
        def make_batch(task, L, batch_size, rng):
            inputs, targets, mask = _mb(task, L, batch_size, rng)
            mask = mask.copy()
            mask[:, L - 1] = True
            return inputs, targets, mask
    """, "other"),
    "loss mask inverted": ("make_batch", """
        _mb = make_batch
        def make_batch(task, L, batch_size, rng):
            inputs, targets, mask = _mb(task, L, batch_size, rng)
            return inputs, targets, ~mask
    """, "mask-inverted"),
    "sort descending": ("make_batch", """
        def make_batch(task, L, batch_size, rng):
            source = rng.integers(0, N_SYMBOLS, size=(batch_size, L))
            answer = source if task == "copy" else -np.sort(-source, axis=1)
            if task not in TASKS:
                raise ValueError(task)
            seq = np.concatenate([source, np.full((batch_size, 1), SEP), answer], axis=1)
            mask = np.zeros((batch_size, 2 * L), bool)
            mask[:, L:] = True
            return seq[:, :-1], seq[:, 1:], mask
    """, "other"),
    "symbols without repeats": ("make_batch", """
        def make_batch(task, L, batch_size, rng):
            if task not in TASKS:
                raise ValueError(task)
            source = np.stack([rng.permutation(N_SYMBOLS)[:L] for _ in range(batch_size)])
            answer = source if task == "copy" else np.sort(source, axis=1)
            seq = np.concatenate([source, np.full((batch_size, 1), SEP), answer], axis=1)
            mask = np.zeros((batch_size, 2 * L), bool)
            mask[:, L:] = True
            return seq[:, :-1], seq[:, 1:], mask
    """, "other"),
    "loss over every position": ("masked_cross_entropy", """
        _ce = masked_cross_entropy
        def masked_cross_entropy(logits, targets, loss_mask):
            return _ce(logits, targets, np.ones_like(loss_mask, dtype=bool))
    """, "other"),
    "loss divided by B*T": ("masked_cross_entropy", """
        _ce = masked_cross_entropy
        def masked_cross_entropy(logits, targets, loss_mask):
            loss, d = _ce(logits, targets, loss_mask)
            n = loss_mask.sum()
            return loss * n / loss_mask.size, d * n / loss_mask.size
    """, "other"),
    "loss without max subtraction": ("masked_cross_entropy", """
        def masked_cross_entropy(logits, targets, loss_mask):
            p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
            n = loss_mask.sum()
            picked = np.take_along_axis(p, targets[..., None], -1)[..., 0]
            onehot = np.eye(logits.shape[-1], dtype=logits.dtype)[targets]
            return float(-np.log(picked[loss_mask]).sum() / n), (p - onehot) * loss_mask[..., None] / n
    """, "unstable-softmax"),
    "loss gradient upcast to float64": ("masked_cross_entropy", """
        _ce = masked_cross_entropy
        def masked_cross_entropy(logits, targets, loss_mask):
            loss, d = _ce(logits.astype(np.float64), targets, loss_mask)
            return loss, d
    """, "dtype-changed"),
    "pre-LN: residual gradient of x1 dropped": ("block_backward", """
        def block_backward(dy, cache, ops):
            if not cache["pre_ln"]:
                return _reference_block_backward(dy, cache, ops)
            grads = {}
            u, pre, hidden = cache["ffn_in"], cache["ffn_pre"], cache["ffn_hidden"]
            d, d_ff = u.shape[-1], hidden.shape[-1]
            df = dy.reshape(-1, d)
            grads["W2"], grads["b2"] = hidden.reshape(-1, d_ff).T @ df, df.sum(0)
            dpre = (df @ cache["W2"].T) * (pre.reshape(-1, d_ff) > 0)
            grads["W1"], grads["b1"] = u.reshape(-1, d).T @ dpre, dpre.sum(0)
            du = (dpre @ cache["W1"].T).reshape(dy.shape)
            dx1, grads["ln2_gamma"], grads["ln2_beta"] = ops.layer_norm_backward(du, cache["ln2"])
            da, attn = ops.attention_backward(dx1, cache["attn"])       # bug: dx1 misses + dy
            dln1, grads["ln1_gamma"], grads["ln1_beta"] = ops.layer_norm_backward(da, cache["ln1"])
            grads.update(attn)
            return dx1 + dln1, grads
    """, "other"),
    "ReLU mask missing": ("block_backward", """
        def block_backward(dy, cache, ops):
            everything_positive = dict(cache, ffn_pre=np.abs(cache["ffn_pre"]) + 1.0)
            return _reference_block_backward(dy, everything_positive, ops)
    """, "weight-grad-wrong"),
    "bias gradients summed over the batch axis only": ("block_backward", """
        def block_backward(dy, cache, ops):
            dx, grads = _reference_block_backward(dy, cache, ops)
            grads = dict(grads)
            grads["b2"] = np.broadcast_to(grads["b2"] / dy.shape[1], dy.shape[1:]).copy()
            return dx, grads
    """, "param-grad-axes"),
    "W1 gradient transposed": ("block_backward", """
        def block_backward(dy, cache, ops):
            dx, grads = _reference_block_backward(dy, cache, ops)
            return dx, dict(grads, W1=grads["W1"].T.copy())
    """, "weight-grad-wrong"),
    "dy modified in place": ("block_backward", """
        def block_backward(dy, cache, ops):
            dx, grads = _reference_block_backward(dy, cache, ops)
            dy *= 1.0
            dy += 0.0
            dy[...] = 0.0
            return dx, grads
    """, "input-mutated"),
    "Adam without bias correction": ("adam_step", """
        def adam_step(params, grads, state, lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8):
            t = state["t"] + 1
            out, m_new, v_new = {}, {}, {}
            for k, p in params.items():
                m = beta1 * state["m"][k] + (1 - beta1) * grads[k]
                v = beta2 * state["v"][k] + (1 - beta2) * grads[k] ** 2
                out[k], m_new[k], v_new[k] = p - lr * m / (np.sqrt(v) + eps), m, v
            return out, {"t": t, "m": m_new, "v": v_new}
    """, "other"),
    "Adam updates in place": ("adam_step", """
        _as = adam_step
        def adam_step(params, grads, state, lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8):
            new, st = _as(params, grads, state, lr, beta1, beta2, eps)
            for k in params:
                params[k][...] = new[k]
            return params, st
    """, "input-mutated"),
    "Adam upcasts float32": ("adam_step", """
        _as = adam_step
        def adam_step(params, grads, state, lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8):
            new, st = _as(params, grads, state, lr, beta1, beta2, eps)
            return {k: v.astype(np.float64) for k, v in new.items()}, st
    """, "dtype-changed"),
    "greedy reads position 0": ("greedy_generate", """
        def greedy_generate(params, prompts, n_new, config, ops):
            seq = np.array(prompts, dtype=np.int64)
            out, logs = [], []
            for _ in range(n_new):
                logits, _ = ops.model_forward(params, seq, config, ops)
                logs.append(logits[:, 0])
                nxt = np.argmax(logits[:, 0], -1)
                out.append(nxt)
                seq = np.concatenate([seq, nxt[:, None]], 1)
            return np.stack(out, 1), np.stack(logs, 1)
    """, "other"),
    "greedy without feeding back its tokens": ("greedy_generate", """
        def greedy_generate(params, prompts, n_new, config, ops):
            seq = np.array(prompts, dtype=np.int64)
            padded = np.concatenate([seq, np.zeros((seq.shape[0], n_new - 1), np.int64)], 1)
            logits, _ = ops.model_forward(params, padded, config, ops)
            chosen = logits[:, seq.shape[1] - 1:]
            return np.argmax(chosen, -1), chosen
    """, "other"),
    "accuracies swapped": ("answer_accuracy", """
        _aa = answer_accuracy
        def answer_accuracy(generated, expected):
            a, b = _aa(generated, expected)
            return b, a
    """, "other"),
    "count without b_out": ("model_param_count", """
        _mc = model_param_count
        def model_param_count(vocab_size, d, n_layers, max_len, d_ff=None):
            return _mc(vocab_size, d, n_layers, max_len, d_ff) - vocab_size
    """, "param-count"),
    "count ignores d_ff": ("model_param_count", """
        _mc = model_param_count
        def model_param_count(vocab_size, d, n_layers, max_len, d_ff=None):
            return _mc(vocab_size, d, n_layers, max_len)
    """, "param-count"),
}


@pytest.mark.parametrize("case", sorted(BUGGY))
def test_each_bug_is_caught_with_its_fault(case):
    name, source, fault = BUGGY[case]
    assert fault in FAULTS
    ns = submission("_reference_block_backward = block_backward", source)
    result = grade_function(name, ns)
    faults = {c.fault for c in result.checks if not c.passed}
    assert result.score < result.max_score, case
    assert fault in faults, (case, [(c.name, c.fault, c.message) for c in result.checks
                                    if not c.passed])


CORRECT = {
    "loss with logsumexp written out": ("masked_cross_entropy", """
        def masked_cross_entropy(logits, targets, loss_mask):
            m = logits.max(-1, keepdims=True)
            lse = m + np.log(np.exp(logits - m).sum(-1, keepdims=True))
            logp = logits - lse
            n = int(np.count_nonzero(loss_mask))
            if n == 0:
                raise ValueError("empty mask")
            rows, cols = np.nonzero(loss_mask)
            loss = -logp[rows, cols, targets[rows, cols]].sum() / n
            d = np.zeros_like(logits)
            d[rows, cols] = np.exp(logp[rows, cols])
            d[rows, cols, targets[rows, cols]] -= 1
            return float(loss), d / np.asarray(n, dtype=logits.dtype)
    """),
    "greedy with the KV cache": ("greedy_generate", """
        greedy_generate = generate_with_cache
    """),
    "block backward, fast kernel": ("block_backward", """
        block_backward = fast_block_backward
    """),
    "Adam, fast kernel": ("adam_step", """
        adam_step = fast_adam_step
    """),
    "batch with rng.integers(20, ...)": ("make_batch", """
        def make_batch(task, L, batch_size, rng):
            if task not in ("copy", "sort"):
                raise ValueError("task")
            s = rng.integers(20, size=(batch_size, L))
            a = np.sort(s, 1) if task == "sort" else s
            seq = np.hstack([s, np.full((batch_size, 1), 20), a])
            return seq[:, :-1], seq[:, 1:], np.arange(2 * L)[None].repeat(batch_size, 0) >= L
    """),
}


@pytest.mark.parametrize("case", sorted(CORRECT))
def test_differently_written_correct_implementations_get_full_marks(case):
    name, source = CORRECT[case]
    result = grade_function(name, submission(source))
    assert [(c.name, c.message) for c in result.checks if not c.passed] == []


STUBS = "\n".join(f"def {name}(*args, **kwargs):\n    raise NotImplementedError()\n"
                  for name in POINTS_TRAINING)
SANDBOXED = dict(
    [(f"bug: {case}", (name, ["_reference_block_backward = block_backward", source]))
     for case, (name, source, _) in BUGGY.items()]
    + [(f"correct: {case}", (name, [source])) for case, (name, source) in CORRECT.items()]
    + [(f"stub: {name}", (name, [STUBS])) for name in POINTS_TRAINING])


@pytest.mark.slow  # one jail per case
@pytest.mark.parametrize("case", sorted(SANDBOXED))
def test_sandbox_gives_the_verdicts_of_in_process_grading(case, tmp_path):
    """Every planted bug, correct variant and stub, graded with its code in the sandbox
    (the reference model answering through callbacks, generators crossing as states,
    configurations as records): check for check the verdicts of in-process grading."""
    from grader_tests.sandbox import grade_isolated

    name, extra = SANDBOXED[case]
    path = tmp_path / "training_submission.py"
    path.write_text("\n".join([ATTENTION_SOURCE, TRAINING_SOURCE]
                              + [textwrap.dedent(x) for x in extra]))
    here = grade_function(name, submission(*extra))
    results, cell_errors, flags = grade_isolated(str(path), names=[name], assignment="training")
    there = results[name]
    # The source here is the kit's own reference (it imports solutions, multiprocessing,
    # ctypes): what the source scan says of it is not a verdict of the checks.
    verdicts = [f for f in flags if not f.startswith("the submission ")]
    assert cell_errors == [] and verdicts == [], (cell_errors, flags)
    assert [(c.name, c.passed, c.fault) for c in there.checks] == \
        [(c.name, c.passed, c.fault) for c in here.checks], \
        [(c.name, c.fault, c.message) for c in there.checks if not c.passed]
    assert there.score == here.score


# --- the notebook ---------------------------------------------------------------------------


@pytest.mark.slow  # the fast lane runs the same command in test_build.py
def test_notebook_is_current():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "build_training_notebook.py"),
                             "--check"], capture_output=True, text=True, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_notebook_structure():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert nb.cells[0].id == "gate" and nb.cells[0].cell_type == "code"
    graded = {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"] for c in nb.cells
              if c.metadata.nbgrader.get("grade")}
    assert graded == {grade_id(n): p for n, p in POINTS_TRAINING.items()}
    for cell in nb.cells:
        meta = cell.metadata.nbgrader
        assert meta["schema_version"] == 3
        if cell.cell_type != "code" or cell.id == "gate":
            continue
        if meta["grade"]:
            assert "### BEGIN HIDDEN TESTS" in cell.source
        elif meta["solution"]:
            assert cell.source.count("### BEGIN SOLUTION") == 1
        else:  # every locked code cell after the gate starts with the gate's check
            first = next(line for line in cell.source.split("\n") if not line.startswith('"""'))
            assert first == "require_gate()", cell.id
    for name in POINTS_TRAINING:
        solution = next(c for c in nb.cells if c.id == f"{name}_solution")
        assert solution.source == inspect.getsource(getattr(tr, name)).rstrip("\n")


# --- the gate -------------------------------------------------------------------------------


def gate_source():
    return nbformat.read(NOTEBOOK, as_version=4).cells[0].source


def make_course(tmp_path, edit=None):
    """tmp/attention/attention.ipynb (the instructor's, optionally edited) and tmp/training."""
    nb = nbformat.read(ATTENTION_NOTEBOOK, as_version=4)
    if edit:
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") in edit:
                cell.source = edit[cell.metadata.nbgrader["grade_id"]](cell.source)
    (tmp_path / "attention").mkdir()
    nbformat.write(nb, tmp_path / "attention" / "attention.ipynb")
    (tmp_path / "training").mkdir()
    return tmp_path / "training"


def run_gate(namespace=None):
    namespace = {"__name__": "__main__"} if namespace is None else namespace
    exec(compile(gate_source(), "gate", "exec"), namespace)
    return namespace


def test_gate_opens_on_working_functions(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(make_course(tmp_path))
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    ns = run_gate()
    assert "Gate open" in capsys.readouterr().out
    ns["require_gate"]()
    for name in attention_ref.SPEC_FUNCTIONS:
        assert callable(ns[name])
    x = np.array([[0.0, math.log(3.0)]])
    assert np.allclose(ns["softmax"](x), [[0.25, 0.75]])


def test_gate_closes_and_names_the_failing_function(tmp_path, monkeypatch):
    def drop_mean_term(src):
        assert "- dxhat.mean(axis=-1, keepdims=True)" in src
        return src.replace("- dxhat.mean(axis=-1, keepdims=True)", "")

    broken = {"layer_norm_backward_solution": drop_mean_term}
    monkeypatch.chdir(make_course(tmp_path, broken))
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    ns = {"__name__": "__main__"}
    with pytest.raises(Exception) as info:
        run_gate(ns)
    assert type(info.value).__name__ == "GateClosed"
    message = str(info.value)
    assert "layer_norm_backward" in message and "1 of 15" in message
    with pytest.raises(Exception, match="run the first cell"):  # later cells stop too
        ns["require_gate"]()


def test_gate_refuses_an_edited_visible_test(tmp_path, monkeypatch):
    weakened = {"softmax_visible_test": lambda src: 'print("softmax: visible checks passed")'}
    monkeypatch.chdir(make_course(tmp_path, weakened))
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    with pytest.raises(Exception, match="softmax_visible_test"):
        run_gate()


def test_gate_cannot_be_skipped_by_redefining_a_function(tmp_path, monkeypatch):
    monkeypatch.chdir(make_course(tmp_path))
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    ns = run_gate()
    ns["softmax"] = lambda scores, axis=-1: scores       # a later cell redefines it
    with pytest.raises(Exception, match="softmax changed after the gate"):
        ns["require_gate"]()


def test_gate_without_a_notebook_explains_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTENTION_NOTEBOOK", str(tmp_path / "nowhere" / "attention.ipynb"))
    with pytest.raises(Exception, match="could not find your attention notebook"):
        run_gate()


def test_gate_never_falls_back_to_the_reference_when_the_notebook_is_missing(tmp_path, monkeypatch):
    """Where the kit is installed (``solutions`` importable, as here) a training folder with
    no attention folder beside it keeps the gate closed, says where it looked and how to
    give the path, and defines none of the attention functions."""
    import solutions.attention  # noqa: F401  (importable: the case that used to open the gate)

    monkeypatch.chdir(make_course(tmp_path))
    (tmp_path / "attention" / "attention.ipynb").unlink()         # fetched training only
    monkeypatch.delenv("ATTENTION_NOTEBOOK", raising=False)
    ns = {"__name__": "__main__"}
    with pytest.raises(Exception) as info:
        run_gate(ns)
    assert type(info.value).__name__ == "GateClosed"
    message = str(info.value)
    assert "The gate is closed: it could not find your attention notebook" in message
    assert str(tmp_path / "attention" / "attention.ipynb") in message
    assert "%env ATTENTION_NOTEBOOK=" in message
    assert not any(name in ns for name in attention_ref.SPEC_FUNCTIONS)
    with pytest.raises(Exception, match="run the first cell"):
        ns["require_gate"]()


def test_gate_finds_the_notebook_given_by_path(tmp_path, monkeypatch, capsys):
    """The path the closed gate asks for (ATTENTION_NOTEBOOK, set in the kernel) opens it on
    that notebook's functions, not the kit's."""
    make_course(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)                                  # no ../attention here
    monkeypatch.setenv("ATTENTION_NOTEBOOK", str(tmp_path / "attention" / "attention.ipynb"))
    ns = run_gate()
    assert "Gate open" in capsys.readouterr().out
    assert ns["softmax"] is not attention_ref.softmax
    assert ns["softmax"].__code__.co_filename.endswith("softmax_solution")


# --- the unlock command ----------------------------------------------------------------------


def unlock_module():
    """tools/unlock_training.py as a module (tools/ is not an installed package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("unlock_training",
                                                  ROOT / "tools" / "unlock_training.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def gradebooks(new_gradebooks):
    """Open nbgrader gradebooks quickly (see ``new_gradebooks`` in conftest.py)."""
    return open_gradebook


def open_gradebook(path):
    """An nbgrader gradebook at ``path`` with assignment `attention` of 60 + 40 points."""
    from nbgrader.api import Gradebook

    gb = Gradebook(f"sqlite:///{path}")
    gb.add_assignment("attention")
    gb.add_notebook("attention", "attention")
    gb.add_grade_cell("part_a", "attention", "attention", max_score=60, cell_type="code")
    gb.add_grade_cell("part_b", "attention", "attention", max_score=40, cell_type="code")
    return gb


def set_scores(gb, scores):
    """One student per entry: None = no submission, (a, b) = the two cells' auto scores
    (None, None: submitted, not graded yet)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy's notes on nbgrader's own session use
        for student, pair in scores.items():
            gb.update_or_create_student(student)
            if pair is None:
                continue
            if not any(s.student.id == student for s in gb.assignment_submissions("attention")):
                gb.add_submission("attention", student)
            for cell, score in zip(("part_a", "part_b"), pair):
                grade = gb.find_grade(cell, "attention", "attention", student)
                grade.auto_score = score
                grade.needs_manual_grade = score is None
        gb.db.commit()


def release_folder(tmp_path):
    release = tmp_path / "release" / "training"
    release.mkdir(parents=True)
    shutil.copy(NOTEBOOK, release / "training.ipynb")
    return release


def test_unlock_releases_exactly_the_passing_students_once(tmp_path, gradebooks, capsys):
    unlock = unlock_module()
    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    full = unlock.parse_threshold("full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40), "bo": (60, 30), "cy": None, "di": (None, None)})
        newly, already, locked = unlock.unlock(gb, release, unlocked, full)
        assert [v["student"] for v in newly] == ["ada"] and already == []
        reasons = {v["student"]: v["reason"] for v in locked}
        assert reasons == {"bo": "attention scored 90 / 100, needs 100",
                           "cy": "no attention submission in the gradebook",
                           "di": "attention submitted but not graded yet"}
        copied = unlocked / "ada" / "training" / "training.ipynb"
        assert copied.read_bytes() == NOTEBOOK.read_bytes()
        ledger = json.loads((unlocked / "unlocked.json").read_text())
        assert list(ledger["students"]) == ["ada"]
        assert ledger["students"]["ada"]["attention_score"] == 100

        (unlocked / "ada" / "training" / "marker.txt").write_text("the student's own work")
        newly, already, _ = unlock.unlock(gb, release, unlocked, full)   # nothing new
        assert newly == [] and [v["student"] for v in already] == ["ada"]
        assert (unlocked / "ada" / "training" / "marker.txt").exists()   # not released twice
        assert json.loads((unlocked / "unlocked.json").read_text()) == ledger

        set_scores(gb, {"bo": (60, 40)})                                   # bo's regrade arrives
        newly, already, _ = unlock.unlock(gb, release, unlocked, full)
        assert [v["student"] for v in newly] == ["bo"] and [v["student"] for v in already] == ["ada"]
        gb.close()
    assert sorted(json.loads((unlocked / "unlocked.json").read_text())["students"]) == ["ada", "bo"]
    assert sorted(p.name for p in unlocked.iterdir() if p.is_dir()) == ["ada", "bo"]

    # the command line (in this process): it prints who is unlocked and who is not, and why
    assert unlock.main(["--db", f"sqlite:///{tmp_path / 'gradebook.db'}", "--root",
                        str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "unlocked now (0)" in out and "already unlocked, not released again (2)" in out
    assert "no attention submission in the gradebook" in out and "not graded yet" in out


def test_unlock_thresholds_and_dry_run(tmp_path, gradebooks):
    unlock = unlock_module()
    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        set_scores(gb, {"ada": (60, 40), "bo": (60, 30), "cy": (50, 10)})
        newly, _, _ = unlock.unlock(gb, release, unlocked, unlock.parse_threshold("90%"),
                                    dry_run=True)
        assert [v["student"] for v in newly] == ["ada", "bo"] and not unlocked.exists()
        newly, _, locked = unlock.unlock(gb, release, unlocked, unlock.parse_threshold("61"))
        assert [v["student"] for v in newly] == ["ada", "bo"]
        assert locked[0]["reason"] == "attention scored 60 / 100, needs 61"
        gb.close()
    with pytest.raises(ValueError):
        unlock.parse_threshold("lots")


def test_unlock_keeps_a_flagged_student_locked_at_full_marks(tmp_path, gradebooks, capsys):
    """A notebook flagged in the gradebook, or a hidden-check cell waiting for a manual
    grade, keeps the gate closed at 100 / 100 and the report says why (a submission not
    graded at all is still "not graded yet")."""
    unlock = unlock_module()
    release, unlocked = release_folder(tmp_path), tmp_path / "unlocked"
    full = unlock.parse_threshold("full")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gb = gradebooks(tmp_path / "gradebook.db")
        gb.add_grade_cell("softmax_hidden_checks", "attention", "attention", max_score=0,
                          cell_type="code")
        set_scores(gb, {"ada": (60, 40), "eve": (60, 40), "fay": (60, 40), "gus": (None, None)})
        gb.find_submission_notebook("attention", "attention", "eve").flagged = True
        hidden = gb.find_grade("softmax_hidden_checks", "attention", "attention", "fay")
        hidden.auto_score, hidden.needs_manual_grade = 0.0, True
        for student in ("ada", "eve"):
            grade = gb.find_grade("softmax_hidden_checks", "attention", "attention", student)
            grade.auto_score, grade.needs_manual_grade = 0.0, False
        gb.db.commit()
        newly, already, locked = unlock.unlock(gb, release, unlocked, full)
        assert [v["student"] for v in newly] == ["ada"] and already == []
        reasons = {v["student"]: v["reason"] for v in locked}
        assert reasons.pop("gus") == "attention submitted but not graded yet"
        assert sorted(reasons) == ["eve", "fay"]
        assert {v["student"]: v["score"] for v in locked if v["student"] in reasons} == {
            "eve": 100.0, "fay": 100.0}
        assert reasons["eve"].startswith("flagged for review: notebook attention flagged in "
                                         "the gradebook"), reasons["eve"]
        assert reasons["fay"].startswith("flagged for review: 1 hidden-check cell needs a "
                                         "manual grade (softmax_hidden_checks)"), reasons["fay"]
        assert all("attention scored 100 / 100 so far" in r for r in reasons.values())
        gb.close()
    assert not (unlocked / "eve").exists() and not (unlocked / "fay").exists()
    assert list(json.loads((unlocked / "unlocked.json").read_text())["students"]) == ["ada"]
    assert unlock.main(["--db", f"sqlite:///{tmp_path / 'gradebook.db'}", "--root",
                        str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "not unlocked (3)" in out and out.count("flagged for review: ") == 2


def test_unlock_refuses_without_a_release(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "unlock_training.py"), "--db",
                             f"sqlite:///{tmp_path / 'gradebook.db'}", "--root", str(tmp_path)],
                            capture_output=True, text=True, check=False, cwd=tmp_path)
    assert result.returncode == 2 and "generate_assignment training" in result.stderr


# --- the command line ---------------------------------------------------------------------


def _cli(path, capsys, *extra):
    from grader_tests.__main__ import main

    assert main(["grade", str(path), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


# the isolated half grades the whole notebook in a jail: the slow lane
MODES = pytest.mark.parametrize("mode", [pytest.param([], marks=pytest.mark.slow), ["--in-process"]],
                                ids=["isolated", "in-process"])


@MODES
def test_command_line_grades_the_instructor_notebook_full_marks(tmp_path, capsys, mode):
    shutil.copy(ROOT / "source" / "training" / "training.ipynb", tmp_path / "training.ipynb")
    report = _cli(tmp_path / "training.ipynb", capsys, *mode)
    assert report["assignment"] == "training" and report["isolated"] is (mode == [])
    assert report["cell_errors"] == [] and report["flags"] == []
    assert set(report["functions"]) == set(POINTS_TRAINING)
    assert report["score"] == report["max_score"] == 100


@MODES
def test_command_line_grades_the_release_zero_with_every_check_not_implemented(tmp_path, capsys,
                                                                              mode):
    shutil.copy(ROOT / "release" / "training" / "training.ipynb", tmp_path / "training.ipynb")
    report = _cli(tmp_path / "training.ipynb", capsys, *mode)
    assert report["score"] == 0 and report["cell_errors"] == []
    faults = {c["fault"] for f in report["functions"].values() for c in f["checks"]}
    assert faults == {"not-implemented"}, faults


@MODES
def test_command_line_costs_a_bug_only_its_function(tmp_path, capsys, mode):
    nb = nbformat.read(str(ROOT / "source" / "training" / "training.ipynb"), as_version=4)
    cell = next(c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == "adam_step_solution")
    assert cell.source.count("1.0 - beta2 ** t") + cell.source.count("1 - beta2 ** t") >= 1
    cell.source = cell.source.replace("1.0 - beta2 ** t", "1.0").replace("1 - beta2 ** t", "1")
    nbformat.write(nb, str(tmp_path / "training.ipynb"))
    report = _cli(tmp_path / "training.ipynb", capsys, "--only", "adam_step", "make_batch", *mode)
    assert report["functions"]["make_batch"]["score"] == POINTS_TRAINING["make_batch"]
    adam = report["functions"]["adam_step"]
    assert adam["score"] < adam["max_score"]
    assert {c["fault"] for c in adam["checks"] if not c["passed"]} <= set(FAULTS)
