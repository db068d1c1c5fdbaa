"""An MJCF file timed in convexsim and in MuJoCo, each reading the same published file.

``convexsim bench --vs mujoco --scenes robot/scene.xml [--keyframe home]``: convexsim imports the file
(``scene.mjcf``, from the keyframe if given) and runs it with ``run_model``; MuJoCo loads the very same file
with its own options (solver, integrator, contact parameters as published) at the same time step, starts from
the same keyframe (qpos, qvel, ctrl, mocap poses) and steps it. Nothing is translated, so the figures are
"this robot as its authors ship it" in both engines; the positions compared are the centres of mass of the
scene's moving bodies (a scene body carries the MuJoCo bodies merged into it: their mass-weighted mean).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from convexsim.model import Model, State
from convexsim.tools.compare_engines.engines import EngineRun, Stopwatch, require, run_convexsim


def mujoco_coms(m, d, members: list[list[int]]) -> np.ndarray:
    """(len(members), 3) world centres of mass [m] of groups of MuJoCo bodies in the data ``d``:
    Σ m_b x_b / Σ m_b over each group's ``xipos``."""
    out = np.empty((len(members), 3))
    for i, bodies in enumerate(members):
        w = m.body_mass[bodies]
        out[i] = w @ d.xipos[bodies] / w.sum()
    return out


def mujoco_start(m, keyframe: str | None):
    """MjData at the keyframe named ``keyframe`` (qpos, qvel, act, ctrl, mocap poses), or at qpos0; its
    kinematics computed (``mj_forward``). ValueError naming the file's keyframes when it has no such key."""
    import mujoco

    d = mujoco.MjData(m)
    if keyframe is not None:
        k = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, keyframe)
        if k < 0:
            keys = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_KEY, i) for i in range(m.nkey)]
            raise ValueError(f"no keyframe {keyframe!r}; the file's keyframes: {keys}")
        mujoco.mj_resetDataKeyframe(m, d, k)
    mujoco.mj_forward(m, d)
    return d


def run_mujoco_file(path: Path, keyframe: str | None, model: Model, state: State, n_steps: int) -> EngineRun:
    """Time n_steps of the MJCF file in MuJoCo after one untimed step, at ``model.time_step``; final centres of
    mass of ``model``'s moving bodies (fixed bodies keep ``state``'s positions)."""
    require("mujoco")
    import mujoco

    from convexsim.scene.mjcf import scene_body_members

    m = mujoco.MjModel.from_xml_path(str(path))
    m.opt.timestep = model.time_step
    members = scene_body_members(m)
    moving = np.flatnonzero(~np.asarray(model.body_fixed))
    groups = [members[model.body_names[b]] for b in moving]
    d = mujoco_start(m, keyframe)
    mujoco.mj_step(m, d)                      # warm-up, as the other engines
    with Stopwatch() as clock:
        for _ in range(n_steps):
            mujoco.mj_step(m, d)
    mujoco.mj_kinematics(m, d)                # mj_step leaves the poses of the step's start in d
    pos = np.asarray(state.q[:, :3], dtype=float).copy()
    pos[moving] = mujoco_coms(m, d, groups)
    return EngineRun("mujoco", n_steps, clock.wall_s, pos, clock.cpu_s)


def mjcf_side_by_side(path: Path, keyframe: str | None, duration: float | None):
    """(model, [convexsim run, MuJoCo run]) of an MJCF file over ``duration`` [s] (default: the scene's
    window), each engine from the keyframe; ``scene.mjcf.MjcfError`` if convexsim cannot import the file."""
    from convexsim.scene.mjcf import mjcf_to_scene
    from convexsim.simulate import prepare

    model, state, default_duration = prepare(mjcf_to_scene(path, keyframe=keyframe))
    n = max(1, int(round((duration or default_duration) / model.time_step)))
    return model, [run_convexsim(model, state, n), run_mujoco_file(path, keyframe, model, state, n)]


__all__ = ["mjcf_side_by_side", "mujoco_coms", "mujoco_start", "run_mujoco_file"]
