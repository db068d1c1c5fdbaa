"""The stiction-predicted direction of the SAP Newton loop (SapParameters.stiction_prediction, docs/sap.md).

After an exact-Hessian step damped to α < ½, the solver factors once more with the sliding contacts that the
full step would bring into stiction (or through it) linearized as sticking. The cost, the line search and the
stopping rule are untouched, so the optimum must be the one of the plain solver (the cost is strictly convex);
what changes is the number of factorizations on piles.
"""

from __future__ import annotations

import numpy as np

from convexsim.sap import SapParameters, solve
from convexsim.sap.friction_cone import (STICTION, cone_hessian, cone_impulse_and_cost,
                                         stiction_linearization, stiction_predicted)
from tests.sap.sap_testproblems import assert_same_optimum, scene_step_problems

# one contact: μ = 0.5, Rt = 1e-3 s/kg, Rn = 0.25 s/kg, bias v̂ = (0, 0, 0.01) m/s. At vn = 0 the unprojected
# normal impulse is yn = 0.04 N·s, so the stiction disc is ‖yt‖ ≤ 0.02 N·s, i.e. a slip ‖vt‖ ≤ 2e-5 m/s.
MU, RT, RN, VH = 0.5, 1e-3, 0.25, (0.0, 0.0, 0.01)
SLIDING_VC = (1e-3, 0.0, 0.0)


def _predicted(vc, dvc):
    return stiction_predicted(MU, RT, RN, *VH, *vc, *dvc)


def test_prediction_flags_a_sliding_contact_stopped_or_reversed_by_the_step():
    assert _predicted(SLIDING_VC, (-1e-3 + 1e-6, 0.0, 0.0))      # stops it: slip 1e-6 m/s, in the disc
    assert _predicted(SLIDING_VC, (-2e-3, 0.0, 0.0))             # the step reverses its slip
    assert _predicted(SLIDING_VC, (-2e-3, 1e-3, 0.0))            # turns by 135° (t̂ᵀt̂' < 0)
    assert not _predicted(SLIDING_VC, (-1e-3, 1e-3, 0.0))        # turns by exactly 90° (t̂ᵀt̂' = 0)
    assert not _predicted(SLIDING_VC, (1e-3, 0.0, 0.0))          # keeps sliding the same way
    assert not _predicted(SLIDING_VC, (-5e-4, 5e-4, 0.0))        # turns by 45°, still sliding
    assert not _predicted(SLIDING_VC, (0.0, 0.0, 0.1))           # separates (no contact at the end)
    assert not _predicted((1e-6, 0.0, 0.0), (-2e-6, 0.0, 0.0))   # sticks already
    assert not _predicted((0.0, 0.0, 0.1), (0.0, 0.0, -0.1))     # not in contact at the start


def test_stiction_linearization_is_the_stiction_branch():
    """Inside the disc the linear model is the exact impulse and block; outside it continues γ = R⁻¹(v̂ − vc)
    linearly (so γ(vc + δ) = γ(vc) − G δ exactly) with the stiction block, not the sliding one."""
    gamma_lin, G_lin = np.empty(3), np.empty((3, 3))
    gamma, G = np.empty(3), np.empty((3, 3))
    inside = (1e-5, -5e-6, 0.0)
    _, region = cone_impulse_and_cost(MU, RT, RN, *VH, *inside, gamma)
    assert region == STICTION
    cone_hessian(MU, RT, RN, *VH, *inside, G)
    stiction_linearization(RT, RN, *VH, *inside, gamma_lin, G_lin)
    np.testing.assert_allclose(gamma_lin, gamma, rtol=1e-15, atol=0.0)
    np.testing.assert_allclose(G_lin, G, rtol=1e-15, atol=0.0)
    stiction_linearization(RT, RN, *VH, *SLIDING_VC, gamma_lin, G_lin)
    delta = np.array(inside) - np.array(SLIDING_VC)
    np.testing.assert_allclose(gamma_lin - G_lin @ delta, gamma, rtol=1e-12, atol=1e-15)


def _two_factorization_records(result):
    """Iterations recorded as α = 0 with the cost unchanged: the first of two factorizations at one
    iterate."""
    a, c = np.asarray(result.alpha), np.asarray(result.cost_history)
    return int(np.sum((a[1:] == 0.0) & (c[1:] == c[:-1])))


def test_same_optimum_and_fewer_factorizations_on_pile_landing_steps():
    """pile_100 while it lands (steps 3-30, every third): the prediction is taken on these recorded states
    (deterministic: the branch is asserted, not assumed), the optimum is the plain solver's within the
    stopping rule's bound, and the factorizations (iterations) are fewer in total."""
    total = {True: 0, False: 0}
    taken = 0
    for problem, v0 in scene_step_problems("pile_100", 30, 3):
        res = {}
        for on in total:
            res[on] = solve(problem, v0, params=SapParameters(stiction_prediction=on, on_failure="raise"))
            total[on] += res[on].iterations
        assert _two_factorization_records(res[False]) == 0
        taken += _two_factorization_records(res[True])
        assert_same_optimum(problem, res[False], res[True])
    assert taken >= 3, taken
    assert total[True] < total[False], total


def test_off_is_the_plain_solver_and_backtracking_is_untouched():
    """The iterates with and without the prediction are the same bit for bit up to the first damped step it
    acts on; with the backtracking line search (where it is off) they are the same throughout."""
    problem, v0 = scene_step_problems("pile_100", 21, 21)[0]
    res = {}
    for line_search in ("exact", "backtracking"):
        for on in (True, False):
            res[line_search, on] = solve(problem, v0, params=SapParameters(
                line_search=line_search, stiction_prediction=on, on_failure="raise"))
            assert res[line_search, on].converged
    on, off = res["exact", True], res["exact", False]
    first = next(i for i, a in enumerate(on.alpha) if a == 0.0 and i > 0)
    np.testing.assert_array_equal(on.cost_history[:first], off.cost_history[:first])
    back_on, back_off = res["backtracking", True], res["backtracking", False]
    np.testing.assert_array_equal(back_on.v, back_off.v)
    np.testing.assert_array_equal(back_on.cost_history, back_off.cost_history)
