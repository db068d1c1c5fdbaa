"""convexsim.learn: learn hybrid (stick / slide / flight) dynamics from the simulator's own trajectories.

A mixture of affine experts with a linear-softmax gate over the state (docs/learn.md):

* ``fit(X, Y, n_experts, seed, objective="em" | "seed") -> MixtureOfExperts`` with
  ``predict(X) -> (y_hat, mode, gate_probs)``, ``rollout(x0, U)``, ``expert_params()``, ``gate_params()``
  (convexsim.learn.moe)
* data: ``make_block_data``, ``make_particle_data``, ``save_data``, ``load_data`` (convexsim.learn.data)
* metrics and the report: convexsim.learn.metrics, convexsim.learn.report; ``convexsim learn`` (cli)
"""

_LAZY = {
    name: "convexsim.learn.data"
    for name in (
        "BLOCK_MODES",
        "PARTICLE_MODES",
        "LearnData",
        "LearnDataError",
        "load_data",
        "make_block_data",
        "make_particle_data",
        "save_data",
    )
}
_LAZY.update(
    {
        name: "convexsim.learn.moe"
        for name in ("AffineExpert", "Expert", "LinearSoftmaxGate", "MixtureOfExperts", "fit", "fit_affine")
    }
)


def __getattr__(name):  # lazy: `convexsim --help` imports convexsim.learn.cli without numba or scipy
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'convexsim.learn' has no attribute {name!r}")


__all__ = list(_LAZY)
