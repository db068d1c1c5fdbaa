"""The iiwa pushing its box: a payload on the last link and the box's friction identified together from
noisy joint angles and box positions (docs/identify.md, "Robots").

Data: scenes/iiwa_push.yaml with a 1 kg payload on iiwa_link_7 (2.2 kg instead of 1.2 kg) and the box's
material friction 0.4 instead of 0.5 (box/floor pair μ = 2·0.4·0.5/0.9 = 0.444), simulated to t = 1.2 s
(the push started at 1 s), then WINDOW steps recorded with Gaussian noise EPS on the 7 joint angles [rad]
and the box's position [m]. The fit starts from the scene's values (1.2 kg, 0.5).

    python docs/examples/iiwa_payload_friction.py [WINDOW] [EPS] [SEED]
"""

from __future__ import annotations

import sys
import time

import numpy as np

from convexsim import dynamics
from convexsim.identify.robot import RobotData, fit_robot, parse_parameters
from convexsim.inverse.trees import gradient_model, tree_rollout, with_robot_parameters
from convexsim.multibody.forest import write_link_rows
from convexsim.simulate import prepare
from convexsim.stepping import StepContext, step


def main(window: int = 40, eps: float = 1e-5, seed: int = 0) -> None:
    model, state, _ = prepare("scenes/iiwa_push.yaml")
    params = parse_parameters(model, ["mass:iiwa_link_7", "mu:box"])
    truth = dict(zip(params, (2.2, 0.4)))
    true_model = with_robot_parameters(model, truth)
    ctx = StepContext()
    for _ in range(1200):
        state, _ = step(true_model, state, ctx)
    ro = tree_rollout(gradient_model(true_model), state, window)
    rng = np.random.default_rng(seed)
    joints = ro.q + rng.normal(scale=eps, size=ro.q.shape)
    pos = ro.positions() + rng.normal(scale=eps, size=ro.positions().shape)
    s0 = state.copy()                       # start: the first noisy frame, finite-difference velocities
    s0.tree_q, s0.tree_v = joints[0].copy(), (joints[1] - joints[0]) / model.time_step
    free = dynamics.moving_bodies(model)
    s0.q[free, :3] = pos[0]
    s0.v[free, 3:] = (pos[1] - pos[0]) / model.time_step
    write_link_rows(model.forest, s0.q, s0.v, s0.tree_q, s0.tree_v)
    data = RobotData(model, s0, joints, pos, np.array([s.t for s in ro.states]))
    t0 = time.process_time()
    fit = fit_robot(data, params)
    cpu = time.process_time() - t0
    print(f"window {window} steps ({window + 1} frames) from t = {state.t:.3f} s, noise {eps:g}, "
          f"seed {seed}: {fit.result.evaluations} evaluations, {cpu:.1f} s CPU")
    for e in fit.result.estimates:
        true = truth[next(p for p in params if p.label() == e.parameter)]
        z = (e.value - true) / e.std
        print(f"  {e.parameter:18s} {e.value:.5f} ± {e.std:.2g} (true {true:g}, {z:+.2f} σ, start {e.initial:g})")
    print(f"  rms residual {np.sqrt(fit.result.objective / fit.observations):.3g} (noise {eps:g})")


if __name__ == "__main__":
    main(*(f(a) for f, a in zip((int, float, int), sys.argv[1:])))
