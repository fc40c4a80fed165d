"""Checks of ``greedy_generate`` and ``answer_accuracy``: real greedy decoding (the model
reads its own predictions, one full forward pass per new token) and the two accuracies of
docs/contract.md §3."""

import numpy as np

from solutions import training as ref

from ..checks._util import allclose, as_array, expect_shape, fmt, mutation_check, unpack
from ..guard import call
from ..i18n import N_, _
from ..registry import PROPERTY, Fail, check
from ._fixtures import TINY_L, reference_ops, student_ops, tiny_config

GEN, ACC = "greedy_generate", "answer_accuracy"


def _model(seed, **config):
    cfg = tiny_config(**config)
    params = ref.init_params(cfg, np.random.default_rng(seed))
    params["W_out"] = params["W_out"] * 4.0      # sharper logits: clear argmax, no near-ties
    prompts = ref.make_batch("copy", TINY_L, 6, np.random.default_rng(seed + 1))[0][:, :TINY_L + 1]
    return cfg, params, prompts


def _generate(fn, params, prompts, n_new, cfg, what):
    tokens, logits = unpack(call(fn, params, prompts, n_new, cfg, student_ops()), 2, what)
    tokens, logits = as_array(tokens, _("{what}: tokens").format(what=what)), as_array(logits, _("{what}: logits").format(what=what))
    expect_shape(tokens, (prompts.shape[0], n_new), _("{what}: tokens").format(what=what))
    expect_shape(logits, (prompts.shape[0], n_new, cfg.vocab_size), _("{what}: logits").format(
        what=what))
    return tokens, logits


def _explain(fn_tokens, params, prompts, n_new, cfg):
    """Name the likely mistake by what a wrong decoder would have produced."""
    ops = reference_ops()
    T0 = prompts.shape[1]
    logits, _unused = ref.model_forward(params, prompts, cfg, ops)
    first = np.argmax(logits[:, -1], axis=-1)
    if np.array_equal(fn_tokens[:, 0], np.argmax(logits[:, 0], axis=-1)):
        return _("the first token was taken from the logits of position 0, not the last position")
    if T0 >= 2 and np.array_equal(fn_tokens[:, 0], np.argmax(logits[:, -2], axis=-1)) \
            and not np.array_equal(first, np.argmax(logits[:, -2], axis=-1)):
        return _("the logits of the second-to-last position were used: take logits[:, -1]")
    if n_new > 1 and np.array_equal(fn_tokens[:, 0], first):
        return (_("the first token is right and a later one is not: append each new token to the "
                  "sequence and run the model again on the longer sequence"))
    return ""


@check(GEN, N_("matches greedy decoding of a pre-LN model, token by token and logit by logit"))
def generate_pre_ln(fn):
    cfg, params, prompts = _model(400)
    what = _("{GEN}(params, prompts of shape {shape}, n_new={TINY_L}, config, ops)").format(GEN=GEN,
               shape=prompts.shape, TINY_L=TINY_L)
    tokens, logits = _generate(fn, params, prompts, TINY_L, cfg, what)
    expected, expected_logits = ref.greedy_generate(params, prompts, TINY_L, cfg, reference_ops())
    if not np.array_equal(tokens, expected):
        b = int(np.argmax(np.any(tokens != expected, axis=1)))
        why = _explain(tokens, params, prompts, TINY_L, cfg)
        raise Fail("other", _("{what}: for prompt {prompts} the generated tokens are {tokens}, "
                              "greedy decoding gives {expected}.").format(what=what,
                                prompts=fmt(prompts[b]), tokens=fmt(tokens[b]),
                                expected=fmt(expected[b]))
                            + (_(" Likely cause: {why}.").format(why=why) if why else
                               _(" Each step: run the model on the whole sequence so far, take "
                                 "the argmax of the last position's logits, append it.")))
    if not allclose(logits, expected_logits, rtol=1e-6, atol=1e-9):
        raise Fail("other", _("{what}: the tokens are right but the returned logits are not the "
                              "logits each token was chosen from (logits[:, k] must be the last "
                              "position's logits at step k).").format(what=what))


@check(GEN, N_("post-LN and no-positions models, and n_new = 1"))
def generate_variants(fn):
    for seed, config, n_new in ((410, {"pre_ln": False}, TINY_L), (420, {"positions": False}, 3),
                                (430, {}, 1)):
        cfg, params, prompts = _model(seed, **config)
        what = f"{GEN} with {config or 'the default config'}, n_new={n_new}"
        tokens, logits = _generate(fn, params, prompts, n_new, cfg, what)
        expected, expected_logits = ref.greedy_generate(params, prompts, n_new, cfg,
                                                        reference_ops())
        if not np.array_equal(tokens, expected) or not allclose(logits, expected_logits,
                                                                rtol=1e-6, atol=1e-9):
            raise Fail("other", _("{what}: generated {tokens} from prompt {prompts}, expected "
                                  "{expected}. Pass config and ops through to ops.model_forward "
                                  "unchanged.").format(what=what, tokens=fmt(tokens[0]),
                                    prompts=fmt(prompts[0]), expected=fmt(expected[0])))


@check(GEN, N_("does not modify the prompts or the parameters"), kind=PROPERTY)
def generate_no_mutation(fn):
    cfg, params, prompts = _model(440)
    mutation_check(fn, (params, prompts, 2, cfg, student_ops()), {}, GEN,
                   ["params", "prompts", "n_new", "config", "ops"])


@check(ACC, N_("a worked example: 5 of 6 tokens right, 1 of 2 sequences"))
def accuracy_example(fn):
    generated = np.array([[1, 2, 3], [1, 2, 4]])
    expected = np.array([[1, 2, 3], [1, 2, 3]])
    what = f"{ACC}({generated.tolist()}, {expected.tolist()})"
    token, sequence = unpack(call(fn, generated, expected), 2, what)
    if not (np.isclose(token, 5 / 6) and np.isclose(sequence, 0.5)):
        swapped = np.isclose(token, 0.5) and np.isclose(sequence, 5 / 6)
        raise Fail("other", _("{what} returned ({token}, {sequence}), expected (5/6, 0.5): "
                              "per-token accuracy = share of answer tokens that are right, "
                              "per-sequence = share of sequences with every token right.").format(
                                  what=what,
                                token=token, sequence=sequence)
                            + (_(" The two values are in the wrong order.") if swapped else ""))


@check(ACC, N_("random answers against the definitions; a shape mismatch raises ValueError"))
def accuracy_random(fn):
    r = np.random.default_rng(450)
    expected = r.integers(0, 20, size=(300, 6))
    generated = np.where(r.random((300, 6)) < 0.9, expected, r.integers(0, 20, size=(300, 6)))
    what = _("{ACC} on 300 answers of 6 tokens").format(ACC=ACC)
    token, sequence = unpack(call(fn, generated, expected), 2, what)
    right = generated == expected
    want = (float(right.mean()), float(right.all(axis=1).mean()))
    if not (np.isclose(token, want[0]) and np.isclose(sequence, want[1])):
        raise Fail("other", _("{what}: returned ({token:.4f}, {sequence:.4f}), expected "
                              "({want:.4f}, {want2:.4f}).").format(what=what, token=token,
                                sequence=sequence, want=want[0], want2=want[1]))
    try:
        call(fn, generated[:, :5], expected)
    except ValueError:
        return
    except Fail:
        raise
    except Exception as exc:  # noqa: BLE001
        raise Fail("other", _("{ACC} with shapes (300, 5) and (300, 6) raised {kind}; raise "
                              "ValueError.").format(ACC=ACC, kind=type(exc).__name__))
    raise Fail("other", _("{ACC} with shapes (300, 5) and (300, 6) returned a result; raise "
                          "ValueError when the shapes differ (a broadcast would compare the "
                          "wrong tokens).").format(ACC=ACC))
