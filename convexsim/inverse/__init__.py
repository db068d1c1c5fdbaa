"""convexsim.inverse: derivatives of SAP steps and trajectories, and the Berard–Trinkle particle.

* ``gradients``: dv/dθ of one SAP step by implicit differentiation (θ: previous velocity, gap, μ, k,
  τ_d, d, σ, dt), analytic ∂γ/∂θ of every contact model;
* ``rollout``: SAP rollouts of a scene with per-material-pair parameters, forward (tangent) and reverse
  (adjoint) derivatives through the trajectory;
* ``berard_trinkle``: the seed particle of Berard & Trinkle (2008): forward LCP model, noisy data,
  shooting and MPEC identification of μ.

See docs/identify.md.
"""

from convexsim.inverse.gradients import PHYSICAL, StepSensitivity, impulse_partials, step_sensitivity

__all__ = ["PHYSICAL", "StepSensitivity", "impulse_partials", "step_sensitivity"]
