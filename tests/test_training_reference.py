"""Assignment `training`, the reference (``solutions/training.py``): the model's shapes and
initialisation, the loss, the gradients, Adam, the training's determinism, generation with
a KV cache, the fast kernels and the experiments' runtime. Fast tests; the long ones are in
test_training_slow.py."""

import math
import sys

import numpy as np
import pytest

from solutions import attention as attention_ref
from solutions import training as tr
from tests.helpers import ROOT, submission_namespace


# This model's matrices are tiny: several BLAS threads only wait for each other, and on a
# busy machine make a training many times slower.
tr.limit_blas_threads(1)


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


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adam_in_place_is_fast_adam_step_to_the_last_bit(dtype):
    """``train``'s in-place Adam (one flat vector, moments and parameters overwritten) gives
    the numbers of ``fast_adam_step`` exactly, step after step, and the new step count."""
    rng = np.random.default_rng(3)
    theta = rng.standard_normal(50).astype(dtype)
    state = tr.adam_init({"theta": theta})
    flat = theta.copy()
    m, v, work, t = np.zeros_like(flat), np.zeros_like(flat), np.empty_like(flat), 0
    for _ in range(4):
        g = (rng.standard_normal(50) * 10.0 ** rng.integers(-6, 2, size=50)).astype(dtype)
        new, state = tr.fast_adam_step({"theta": theta}, {"theta": g}, state, lr=0.01)
        theta = new["theta"]
        t = tr._adam_in_place(flat, g, m, v, t, work, lr=0.01)
        assert t == state["t"] and flat.dtype == dtype
        assert np.array_equal(flat, theta) and not np.array_equal(flat, g)
        assert np.array_equal(m, state["m"]["theta"]) and np.array_equal(v, state["v"]["theta"])


def test_training_with_in_place_adam_equals_the_adam_step_calls():
    """``train`` updates the parameters in place with ``fast_ops``' ``adam_in_place`` hook;
    with the same function behind another name (so ``ops.adam_step`` is called every step)
    the losses and the trained weights are the same to the last bit."""
    calls = []

    def adam_step(*args, **kwargs):
        calls.append(1)
        return tr.fast_adam_step(*args, **kwargs)

    a = tr.train("sort", 3, 5, tr.fast_ops(), steps=30, eval_size=20)
    b = tr.train("sort", 3, 5, tr.fast_ops(adam_step=adam_step), steps=30, eval_size=20)
    assert len(calls) == 30
    assert np.array_equal(a["losses"], b["losses"]) and a["losses"][-1] < a["losses"][0]
    assert all(np.array_equal(a["params"][k], b["params"][k]) for k in b["params"])
    assert a["seq_acc"] == b["seq_acc"]


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


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-12), (np.float32, 1e-5)],
                         ids=["float64", "float32"])
def test_fast_loss_and_grads_on_the_answer_rows_equals_the_full_path(dtype, tolerance):
    """The training-only path (``fast_ops().loss_and_grads``, which ``train`` calls) runs the
    last block's attention queries, FFN and layer norms, the final layer norm and the head
    on the answer positions only, never computing the logits before them; its loss and
    gradients are those of the full path (model_forward, masked_cross_entropy,
    model_backward) of the plain reference and of the fast kernels, and the logits it
    computes are the answer rows of the full logits."""
    plain, fast = tr.reference_ops(), tr.fast_ops()
    rng = np.random.default_rng(12)
    for task, L, n_layers in (("sort", 3, 1), ("copy", 6, 2), ("sort", 8, 3)):
        config = tr.ModelConfig(n_layers=n_layers, max_len=2 * L + 1)
        params = _random_params(config, rng, dtype)
        inputs, targets, mask = tr.make_batch(task, L, 16, rng)
        full = []
        for ops in (plain, fast):
            logits, cache = ops.model_forward(params, inputs, config, ops)
            loss, dlogits = ops.masked_cross_entropy(logits, targets, mask)
            full.append((logits, loss, ops.model_backward(dlogits, cache, ops)))
        late_logits, cache = tr.fast_model_forward(params, inputs, config, fast, start=L)
        assert late_logits.shape == (16, L, config.vocab_size)
        assert cache["hf"].shape == (16, L, config.d)           # the head ran on L rows
        assert cache["blocks"][-1]["ffn_hidden"].shape[1] == L  # so did the last FFN
        if n_layers > 1:
            assert cache["blocks"][0]["ffn_hidden"].shape[1] == 2 * L
        assert np.max(np.abs(late_logits - full[0][0][:, L:])) <= tolerance * 10
        loss, grads = fast.loss_and_grads(params, inputs, targets, mask, config, fast)
        scale = max(float(np.max(np.abs(g))) for g in full[0][2].values())
        for _, full_loss, full_grads in full:
            assert loss == pytest.approx(full_loss, rel=tolerance)
            for key in params:
                assert grads[key].dtype == dtype and grads[key].shape == params[key].shape
                assert np.max(np.abs(grads[key] - full_grads[key])) <= tolerance * scale, key
        assert np.max(np.abs(grads["block0.W_Q"])) > 0.01 * scale   # not a zero gradient


def test_fast_loss_and_grads_falls_back_to_the_three_calls():
    """With a kernel of ``fast_ops`` replaced (a student's ``block_backward``, say), a
    post-LN model or a mask that counts the first position, ``loss_and_grads`` runs the
    three functions of ``ops`` as ``train`` would, and ``start`` refuses what it cannot
    run."""
    calls = []

    def block_backward(dy, cache, ops):
        calls.append(dy.shape)
        return tr.block_backward(dy, cache, ops)

    rng = np.random.default_rng(13)
    config = tr.ModelConfig(max_len=13)
    params = _random_params(config, rng, np.float64)
    inputs, targets, mask = tr.make_batch("copy", 6, 4, rng)
    swapped = tr.fast_ops(block_backward=block_backward, block_forward=tr.block_forward)
    loss, grads = swapped.loss_and_grads(params, inputs, targets, mask, config, swapped)
    assert calls == [(4, 12, 32), (4, 12, 32)]                  # every position, twice
    plain = tr.reference_ops()
    logits, cache = plain.model_forward(params, inputs, config, plain)
    expected = plain.model_backward(plain.masked_cross_entropy(logits, targets, mask)[1],
                                    cache, plain)
    assert max(np.max(np.abs(grads[k] - expected[k])) for k in params) < 1e-12
    fast = tr.fast_ops()
    all_rows = np.ones_like(mask)
    loss_all, _ = fast.loss_and_grads(params, inputs, targets, all_rows, config, fast)
    assert loss_all == pytest.approx(plain.masked_cross_entropy(logits, targets, all_rows)[0],
                                     rel=1e-12)
    expected_loss, expected_dlogits = plain.masked_cross_entropy(logits, targets, all_rows)
    fast_loss, fast_dlogits = tr.fast_masked_cross_entropy(logits, targets, all_rows)
    assert fast_loss == pytest.approx(expected_loss, rel=1e-12)      # every row counts
    assert fast_dlogits.shape == logits.shape
    assert np.max(np.abs(fast_dlogits - expected_dlogits)) < 1e-15
    post = tr.ModelConfig(max_len=13, pre_ln=False)
    post_params = _random_params(post, rng, np.float64)
    loss_post, _ = fast.loss_and_grads(post_params, inputs, targets, mask, post, fast)
    logits, _ = plain.model_forward(post_params, inputs, post, plain)
    assert loss_post == pytest.approx(plain.masked_cross_entropy(logits, targets, mask)[0],
                                      rel=1e-12)
    for bad_start, bad_config in ((12, config), (3, post)):
        with pytest.raises(ValueError, match="start"):
            tr.fast_model_forward(params, inputs, bad_config, fast, start=bad_start)


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


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-13), (np.float32, 1e-5)],
                         ids=["float64", "float32"])
def test_row_sums_spread_and_softmax_rows(dtype, tolerance):
    """``_row_sum_spread`` writes each row's sum at every place of the row; ``_softmax_rows``
    built on it is the softmax (rows summing to 1, the causal mask's zeros exact), also
    when the scores are too large for ``exp`` without the row maximum."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 2, 5, 7)).astype(dtype)
    spread = tr._row_sum_spread(a)
    assert spread.shape == a.shape and spread.dtype == dtype
    assert np.allclose(spread, np.broadcast_to(a.sum(axis=-1, keepdims=True), a.shape),
                       rtol=0, atol=tolerance * 10)
    for shift in (0.0, 200.0):                         # exp(200) overflows: the stable form
        scores = a[..., :5] * 3.0 + shift + tr._causal_additive(5, dtype)
        expected = np.exp(scores - scores.max(axis=-1, keepdims=True))
        expected /= expected.sum(axis=-1, keepdims=True)
        with np.errstate(over="ignore"):               # the first exp's overflow, float32
            P = tr._softmax_rows(scores.copy())
        assert P.dtype == dtype and np.all(np.isfinite(P))
        assert np.max(np.abs(P - expected)) <= tolerance
        assert np.all(P[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0.0)
        assert np.allclose(P.sum(axis=-1), 1.0, rtol=0, atol=tolerance)


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
