"""The lesson's two pen-and-paper exercises, graded on the variables the student assigns.

Each check's message and the worked solution (``WORKED``) are printed in the feedback only:
the released notebook has neither.
"""

import math
import numbers

from ..i18n import N_, _
from ..registry import NOTES, Fail, check

RATIO, BUDGET = "exercise_weight_ratio", "exercise_decoder_budget"

WORKED = {
    RATIO: (
        N_("Worked solution. With q, k components iid mean 0, variance 1, the score q.k has "
           "variance d_k = 64, so one standard deviation is sqrt(64) = 8. Two keys two standard "
           "deviations apart have unscaled scores differing by 16; the softmax turns a score "
           "difference D into a weight ratio exp(D): exp(16) = 8,886,110.5. After dividing by "
           "sqrt(d_k) the scores have variance 1, the difference is 2, and the ratio is exp(2) = "
           "7.389: the softmax no longer saturates.")
    ),
    BUDGET: (
        N_("Worked solution. One block: 12 d^2 + 13 d = 12 * 262,144 + 6,656 = 3,152,384; 24 "
           "blocks: 75,657,216 parameters, 151,314,432 bytes in float16 (144.3 MiB). KV cache: 2 "
           "* 24 layers * 8 heads * 64 * 8192 positions * 4 sequences * 2 bytes = 1,610,612,736 "
           "bytes (1.5 GiB), 10.64 times the weights. Multi-query attention keeps one KV head: "
           "1,610,612,736 / 8 = 201,326,592 bytes (0.1875 GiB).")
    ),
}
NOTES.update(WORKED)


def _number(namespace, name, exercise):
    if name not in namespace:
        raise Fail("not-implemented", _("{exercise}: the variable {name} is not defined; assign "
                                        "your answer to it.").format(exercise=exercise, name=name))
    value = namespace[name]
    if value is Ellipsis or value is None:  # the released placeholder `name = ...`
        raise Fail("not-implemented", _("{exercise}: {name} has no answer yet (it is still "
                                        "{value!r}); assign your answer, a number, to it.").format(
                                            exercise=exercise,
                                          name=name, value=value))
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        try:
            value = float(value)
        except Exception:
            raise Fail("other", _("{exercise}: {name} should be a number, got {kind}.").format(
                exercise=exercise,
                                    name=name, kind=type(value).__name__)) from None
    if isinstance(value, float) and math.isnan(value):
        raise Fail("not-implemented", _("{exercise}: {name} has no answer yet.").format(
            exercise=exercise,
                                          name=name))
    return float(value)


def _expect(namespace, name, expected, exercise, rel=1e-3, hint=""):
    got = _number(namespace, name, exercise)
    if not math.isclose(got, expected, rel_tol=rel):
        raise Fail("other", _("{exercise}: {name} = {got:,.6g}, expected {expected:,.6g} (within "
                              "{rel:.1%}). {hint}").format(exercise=exercise, name=name, got=got,
                                expected=expected, rel=rel, hint=hint).strip())


@check(RATIO, N_("weight ratio without scaling: exp(2 sqrt(d_k)) at d_k = 64"))
def ratio_unscaled(ns):
    _expect(ns, "weight_ratio_unscaled", math.exp(16.0), RATIO,
            hint=_("The unscaled scores have standard deviation sqrt(d_k)."))


@check(RATIO, N_("weight ratio with 1/sqrt(d_k) scaling: exp(2)"))
def ratio_scaled(ns):
    _expect(ns, "weight_ratio_scaled", math.exp(2.0), RATIO,
            hint=_("The scaled scores have standard deviation 1."))


@check(BUDGET, N_("block parameters of the 24-block decoder: 75,657,216"))
def budget_params(ns):
    _expect(ns, "budget_block_params", 75_657_216, BUDGET, rel=1e-9)


@check(BUDGET, N_("their size in float16: 151,314,432 bytes"))
def budget_weight_bytes(ns):
    _expect(ns, "budget_weight_bytes_fp16", 151_314_432, BUDGET, rel=1e-9)


@check(BUDGET, N_("KV cache at T = 8192, batch 4, float16, 8 KV heads: 1,610,612,736 bytes"))
def budget_kv(ns):
    _expect(ns, "budget_kv_cache_bytes", 1_610_612_736, BUDGET, rel=1e-9)


@check(BUDGET, N_("KV cache over weights: about 10.64"))
def budget_ratio(ns):
    _expect(ns, "budget_kv_to_weights", 1_610_612_736 / 151_314_432, BUDGET, rel=5e-3)


@check(BUDGET, N_("multi-query KV cache (1 KV head): 201,326,592 bytes"))
def budget_mqa(ns):
    _expect(ns, "budget_kv_cache_bytes_mqa", 201_326_592, BUDGET, rel=1e-9)
