"""convexsim.inverse: derivatives of SAP steps and trajectories.

* ``gradients``: dv/dθ of one SAP step by implicit differentiation (θ: previous velocity, gap, μ, k,
  τ_d, d, σ, dt), analytic ∂γ/∂θ of every contact model;
* ``rollout``: SAP rollouts of a scene with per-material-pair parameters, forward (tangent) and reverse
  (adjoint) derivatives through the trajectory;
* ``trees``: the same for models with kinematic trees, on the tree step's own solution: PD targets, joint
  damping, actuator gains, a link's mass, a material's friction (docs/identify.md, "Robots").

Identification from data (which uses these) is in ``convexsim.identify``.

See docs/identify.md.
"""

from convexsim.inverse.gradients import PHYSICAL, StepSensitivity, impulse_partials, step_sensitivity

__all__ = ["PHYSICAL", "StepSensitivity", "impulse_partials", "step_sensitivity"]
