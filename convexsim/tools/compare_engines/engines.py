"""Scene translation to Drake and MuJoCo, timed runs, and their agreement with convexsim.

Parameter matching (docs/performance.md derives it):

* Drake: each geometry gets its material's point stiffness k [N/m], relaxation time τ_d [s]
  ("material", "relaxation_time"), Hunt–Crossley dissipation d [s/m] and Coulomb μ; Drake combines
  them exactly as convexsim does (k in series, τ_d summed, d weighted, μ harmonic), so every pair
  matches. Discrete solver with the scene's contact model (sap, lagged or similar), point contact,
  the scene's near-rigid threshold β and stiction tolerance. Drake's point contact reports one point
  per box–box pair (convexsim reports the manifold's corners), so box stacks differ.
* MuJoCo: soft constraints a₁ = (1 − d)·a₀ + d·a_ref with a_ref = −b·v − k·r, set through
  solref = (timeconst, dampratio) so that a body of mass m on fixed ground oscillates and damps like
  convexsim's linear contact (``mujoco_solref``), limited by MuJoCo's stability rule timeconst ≥ 2·dt
  (a_ref uses the velocity at the start of the step). The rest depth then differs: MuJoCo's
  impedance cannot match both. Pairs of two moving bodies see the stiffness scaled by m_eff/m.
  Fixed geometries get solmix ≈ 0 and friction 0, so a moving geometry's values decide its pairs
  (MuJoCo averages solref by solmix and takes the larger μ). Elliptic cones, Newton solver.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass, field

import numpy as np

from convexsim.errors import InputError
from convexsim.model import ContactModel, Contacts, GeomType, Model, State
from convexsim.stepping.contacts import combined_parameters
from convexsim.tools.compare_engines.drake_trees import DrakeTrees, link_bodies

MUJOCO_IMPEDANCE = 0.9
"""MuJoCo's impedance d (solimp = (d, d, 0.001, 0.5, 2)); MuJoCo's default range is 0.9–0.95."""

ENGINES = ("convexsim", "drake", "mujoco")


class MissingEngine(RuntimeError):
    """A comparison engine is not installed (the ``compare`` extra)."""


class UntranslatableScene(InputError):
    """The scene has something the Drake/MuJoCo translation cannot express (it would time another model)."""


def translation_problem(model: Model, engine: str = "mujoco") -> str:
    """Why ``engine`` cannot be given the same model ("" if it can). Drake gets kinematic trees too (joints,
    limits, PD actuators, couplers: ``drake_trees``); the MuJoCo translation builds free and fixed bodies
    with their shapes and materials only, and a tree's links built as free bodies would fall (a robot timed
    against a heap of loose links)."""
    constrained = bool(getattr(getattr(model, "forest", None), "constraints", None))
    if engine == "drake":
        from convexsim.tools.compare_engines.drake_trees import tree_problem

        return tree_problem(model)
    if model.has_trees:
        return (f"the scene has joints; the {engine} translation has free and fixed bodies "
                "only, so it is not compared (it would time loose links, not the robot)")
    if constrained:
        return f"the scene has body constraints (welds, distances, couplers), which the {engine} translation lacks"
    return ""


def available_engines() -> dict[str, bool]:
    """Which optional engines can be imported."""
    return {"drake": importlib.util.find_spec("pydrake") is not None,
            "mujoco": importlib.util.find_spec("mujoco") is not None}


def require(engine: str) -> None:
    """Raise MissingEngine with the install command when ``engine`` is not importable."""
    if not available_engines().get(engine, True):
        raise MissingEngine(f"{engine} is not installed: pip install -e '.[compare]' "
                            f"(the drake and mujoco wheels) to compare against it")


def _pair_parameters(model: Model, ga: int, gb: int):
    """Combined (μ, k, τ_d) of geometries ga and gb, by convexsim's own combination rules."""
    c = Contacts(geom_a=np.array([ga]), geom_b=np.array([gb]), body_a=np.array([0]), body_b=np.array([0]),
                 phi=np.zeros(1), point=np.zeros((1, 3)), normal=np.zeros((1, 3)))
    p = combined_parameters(model, c)
    return float(p.mu[0]), float(p.stiffness[0]), float(p.dissipation_time[0])


def _partner_geom(model: Model, g: int) -> int:
    """The geometry whose material g's MuJoCo parameters are matched against: the first fixed one."""
    fixed = np.flatnonzero(model.body_fixed[model.geom_body])
    return int(fixed[0]) if fixed.size else g


# ----------------------------------------------------------------------------------------- Drake
def drake_system(model: Model, state: State, duration: float = 1.0):
    """(diagram, plant, bodies, trees) of the scene in Drake: MultibodyPlant, discrete SAP, point contact.

    ``bodies[b]`` is the Drake body of convexsim free body b (None for fixed bodies, welded to the world,
    and for tree links); ``trees`` the :class:`DrakeTrees` of the scene's kinematic trees (None without),
    whose actuator targets are laid out for ``duration`` [s].
    """
    require("drake")
    from pydrake.geometry import (AddContactMaterial, Box, Capsule, Convex, Cylinder, HalfSpace,
                                  ProximityProperties, Sphere)
    from pydrake.math import RigidTransform
    from pydrake.common.eigen_geometry import Quaternion
    from pydrake.multibody.plant import AddMultibodyPlant, CoulombFriction, MultibodyPlantConfig
    from pydrake.multibody.tree import SpatialInertia, UnitInertia, default_model_instance
    from pydrake.systems.framework import DiagramBuilder

    builder = DiagramBuilder()
    approximation = ContactModel(model.contact_model).name.lower()  # "sap", "lagged" or "similar"
    cfg = MultibodyPlantConfig(time_step=model.time_step, discrete_contact_approximation=approximation,
                               contact_model="point", sap_near_rigid_threshold=model.solver.beta,
                               stiction_tolerance=model.solver.stiction_tolerance)
    plant, scene_graph = AddMultibodyPlant(cfg, builder)
    plant.mutable_gravity_field().set_gravity_vector(np.asarray(model.gravity, float))
    trees = DrakeTrees(plant, model) if model.has_trees else None
    links = link_bodies(model)
    bodies = []
    geometry_ids = []
    for b in range(model.nbody):
        if model.body_fixed[b] or b in links:
            bodies.append(None)
            continue
        m = float(model.body_mass[b])
        I = np.asarray(model.body_inertia[b], float)
        G = UnitInertia(I[0, 0] / m, I[1, 1] / m, I[2, 2] / m, I[0, 1] / m, I[0, 2] / m, I[1, 2] / m)
        bodies.append(plant.AddRigidBody(model.body_names[b], default_model_instance(),
                                         SpatialInertia(m, np.zeros(3), G)))
    for g in range(model.ngeom):
        b = int(model.geom_body[g])
        X_BG = RigidTransform(Quaternion(np.asarray(model.geom_quat[g], float)), model.geom_pos[g])
        if model.body_fixed[b]:
            X_WB = RigidTransform(Quaternion(state.q[b, 3:7] / np.linalg.norm(state.q[b, 3:7])), state.q[b, :3])
            X_BG = X_WB @ X_BG
            frame_body = plant.world_body()
        elif b in links:
            frame_body, X_link_com = trees.geometry_frame(b)
            X_BG = X_link_com @ X_BG
        else:
            frame_body = bodies[b]
        t = GeomType(int(model.geom_type[g]))
        size = model.geom_size[g]
        shape = {GeomType.SPHERE: lambda: Sphere(size[0]), GeomType.BOX: lambda: Box(*(2 * size)),
                 GeomType.CAPSULE: lambda: Capsule(size[0], 2 * size[1]), GeomType.HALFSPACE: HalfSpace,
                 GeomType.CYLINDER: lambda: Cylinder(size[0], 2 * size[1]),
                 GeomType.MESH: lambda: Convex(_hull_obj(model, g))}[t]()
        mat = int(model.geom_material[g])
        props = ProximityProperties()
        mu = float(model.material_friction[mat])
        AddContactMaterial(properties=props, point_stiffness=float(model.material_stiffness[mat]),
                           dissipation=float(model.material_hc_dissipation[mat]), friction=CoulombFriction(mu, mu))
        props.AddProperty("material", "relaxation_time", float(model.material_dissipation_time[mat]))
        geometry_ids.append(plant.RegisterCollisionGeometry(frame_body, X_BG, shape, f"g{g}", props))
    plant.Finalize()
    if trees is not None:
        _filter_tree_pairs(model, scene_graph, geometry_ids)
    if trees is not None:
        trees.connect_targets(builder, duration)
    return builder.Build(), plant, bodies, trees


def _filter_tree_pairs(model: Model, scene_graph, geometry_ids: list) -> None:
    """Give Drake convexsim's tree-pair filter: no contact between two links of one tree, nor between a link
    and the fixed body its tree hangs from (Drake by default filters only the pairs a joint connects, so a
    linkage modelled as a tree with couplers would collide with itself in Drake and not in convexsim)."""
    from pydrake.geometry import CollisionFilterDeclaration, GeometrySet

    geom_body = np.asarray(model.geom_body)
    manager = scene_graph.collision_filter_manager()
    for tree in model.forest.trees:
        members = set(int(b) for b in tree.bodies)
        if tree.base_body >= 0:
            members.add(int(tree.base_body))
        ids = [geometry_ids[g] for g in range(model.ngeom) if int(geom_body[g]) in members]
        if len(ids) > 1:
            manager.Apply(CollisionFilterDeclaration().ExcludeWithin(GeometrySet(ids)))


_HULL_FILES: dict[tuple, str] = {}


def _hull_obj(model: Model, g: int) -> str:
    """Path of an OBJ file (a temporary folder, one per distinct hull and process) holding mesh geometry g's
    hull, for Drake's ``Convex`` (it reads meshes from files)."""
    import os
    import tempfile

    verts, faces = model.mesh_of(g)
    key = (verts.tobytes(), faces.tobytes())
    if key not in _HULL_FILES:
        folder = _HULL_FILES.setdefault(("dir",), tempfile.mkdtemp(prefix="convexsim_hulls_"))
        path = os.path.join(folder, f"hull{len(_HULL_FILES)}.obj")
        with open(path, "w", encoding="ascii") as f:
            f.writelines(f"v {x:.17g} {y:.17g} {z:.17g}\n" for x, y, z in verts)
            f.writelines(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in faces)
        _HULL_FILES[key] = path
    return _HULL_FILES[key]


def _drake_set_state(plant, ctx, bodies, state: State) -> None:
    from pydrake.common.eigen_geometry import Quaternion
    from pydrake.math import RigidTransform
    from pydrake.multibody.math import SpatialVelocity

    for b, body in enumerate(bodies):
        if body is None:
            continue
        q = state.q[b]
        plant.SetFreeBodyPose(ctx, body, RigidTransform(Quaternion(q[3:7] / np.linalg.norm(q[3:7])), q[:3]))
        plant.SetFreeBodySpatialVelocity(ctx, body, SpatialVelocity(state.v[b, :3], state.v[b, 3:]))


def run_drake(model: Model, state: State, n_steps: int) -> "EngineRun":
    """Time n_steps of the scene in Drake; positions of every body at the end."""
    from pydrake.systems.analysis import Simulator

    diagram, plant, bodies, trees = drake_system(model, state, (n_steps + 1) * model.time_step)
    sim = Simulator(diagram)
    ctx = sim.get_mutable_context()
    pctx = plant.GetMyMutableContextFromRoot(ctx)
    _drake_set_state(plant, pctx, bodies, state)
    if trees is not None:
        trees.set_state(pctx, state)
    sim.Initialize()
    dt = model.time_step
    sim.AdvanceTo(dt)  # warm-up: the first step allocates
    with Stopwatch() as clock:
        sim.AdvanceTo(dt * (n_steps + 1))
    pos = state.q[:, :3].copy()
    for b, body in enumerate(bodies):
        if body is not None:
            pos[b] = plant.EvalBodyPoseInWorld(pctx, body).translation()
        elif trees is not None and b in trees.body_of:
            pos[b] = trees.com_position(pctx, b)
    return EngineRun("drake", n_steps, clock.wall_s, pos, clock.cpu_s)


# ----------------------------------------------------------------------------------------- MuJoCo
def mujoco_solref(k: float, tau_d: float, mass: float, dt: float) -> tuple[float, float]:
    """MuJoCo (timeconst [s], dampratio) of convexsim's linear contact k [N/m], τ_d [s] on a body of mass m.

    The contact is the oscillator m·r̈ + k·τ_d·ṙ + k·r = 0: ω = √(k/m), ζ = τ_d·ω/2. MuJoCo's
    (timeconst, dampratio) give stiffness ω² = 1/(timeconst·dampratio)² and damping 2/timeconst per unit
    mass, so timeconst = 1/(ζ·ω), dampratio = ζ. MuJoCo's reference acceleration uses the position and
    velocity at the start of the step, so it is stable only while both rates stay below 1/(2·dt):
    timeconst ≥ 2·dt and timeconst·dampratio = 1/ω ≥ 2·dt. A contact outside that range (stiff light
    bodies at a coarse step: 0.1 kg on 1e5 N/m is ω = 1000 rad/s, ω·dt = 10 at dt = 10 ms) cannot be
    represented in MuJoCo at this step; it gets MuJoCo's own stable choice, timeconst = 2·dt, critical
    damping (dampratio = 1), which is softer than convexsim's: rest depths then differ, and the table's
    |Δp| column shows it. Undamped contacts (τ_d = 0) get ζ = 0.01.
    """
    omega = float(np.sqrt(k / mass))
    zeta = max(0.5 * tau_d * omega, 0.01)
    tc = 1.0 / (zeta * omega)
    if tc < 2.0 * dt or 1.0 / omega < 2.0 * dt:
        return 2.0 * dt, 1.0
    return float(tc), float(zeta)


def _fmt(x) -> str:
    return " ".join(f"{float(v):.17g}" for v in np.atleast_1d(x))


def mujoco_xml(model: Model, state: State, impedance: float = MUJOCO_IMPEDANCE) -> str:
    """MJCF text of the scene (module docstring for the contact parameters)."""
    from convexsim.spatial import quat_multiply, quat_to_matrix

    d = float(impedance)
    lines = ["<mujoco model=\"%s\">" % model.name,
             f"  <option timestep=\"{model.time_step!r}\" gravity=\"{_fmt(model.gravity)}\" cone=\"elliptic\" "
             "solver=\"Newton\"/>",
             "  <worldbody>"]

    def geom_xml(g: int, pos, quat, indent: str) -> str:
        t = GeomType(int(model.geom_type[g]))
        s = model.geom_size[g]
        kind, size = {GeomType.SPHERE: ("sphere", s[:1]), GeomType.BOX: ("box", s),
                      GeomType.CAPSULE: ("capsule", s[:2]), GeomType.HALFSPACE: ("plane", [0, 0, 1])}[t]
        b = int(model.geom_body[g])
        if model.body_fixed[b]:
            contact = 'friction="0 0 0" solmix="1e-9"'
        else:
            mu, k, tau = _pair_parameters(model, g, _partner_geom(model, g))
            tc, zeta = mujoco_solref(k, tau, float(model.body_mass[b]), model.time_step)
            contact = (f'friction="{mu!r} 0 0" solref="{tc!r} {zeta!r}" '
                       f'solimp="{d!r} {d!r} 0.001 0.5 2" solmix="1"')
        return (f'{indent}<geom name="g{g}" type="{kind}" size="{_fmt(size)}" pos="{_fmt(pos)}" '
                f'quat="{_fmt(quat)}" condim="3" {contact}/>')

    for g in range(model.ngeom):
        b = int(model.geom_body[g])
        if model.body_fixed[b]:
            R = quat_to_matrix(state.q[b, 3:7])
            pos = state.q[b, :3] + R @ model.geom_pos[g]
            lines.append(geom_xml(g, pos, quat_multiply(state.q[b, 3:7], model.geom_quat[g]), "    "))
    for b in range(model.nbody):
        if model.body_fixed[b]:
            continue
        I = np.asarray(model.body_inertia[b], float)
        lines.append(f'    <body name="{model.body_names[b]}" pos="{_fmt(state.q[b, :3])}" '
                     f'quat="{_fmt(state.q[b, 3:7])}">')
        lines.append("      <freejoint/>")
        lines.append(f'      <inertial pos="0 0 0" mass="{float(model.body_mass[b])!r}" '
                     f'fullinertia="{_fmt([I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]])}"/>')
        for g in np.flatnonzero(model.geom_body == b):
            lines.append(geom_xml(int(g), model.geom_pos[g], model.geom_quat[g], "      "))
        lines.append("    </body>")
    lines += ["  </worldbody>", "</mujoco>"]
    return "\n".join(lines)


def run_mujoco(model: Model, state: State, n_steps: int) -> "EngineRun":
    """Time n_steps of the scene in MuJoCo; positions of every body at the end."""
    require("mujoco")
    import mujoco

    from convexsim.spatial import quat_to_matrix

    m = mujoco.MjModel.from_xml_string(mujoco_xml(model, state))
    data = mujoco.MjData(m)
    moving = np.flatnonzero(~np.asarray(model.body_fixed))
    for j, b in enumerate(moving):  # free joints in body order: qvel = (v_W, ω_B) per body
        R = quat_to_matrix(state.q[b, 3:7])
        data.qvel[6 * j:6 * j + 3] = state.v[b, 3:]
        data.qvel[6 * j + 3:6 * j + 6] = R.T @ state.v[b, :3]
    mujoco.mj_step(m, data)  # warm-up
    with Stopwatch() as clock:
        for _ in range(n_steps):
            mujoco.mj_step(m, data)
    pos = state.q[:, :3].copy()
    for j, b in enumerate(moving):
        pos[b] = data.qpos[7 * j:7 * j + 3]
    return EngineRun("mujoco", n_steps, clock.wall_s, pos, clock.cpu_s)


# ----------------------------------------------------------------------------------------- convexsim
def run_convexsim(model: Model, state: State, n_steps: int) -> "EngineRun":
    """Time convexsim's run loop (``run_model``, what ``convexsim run`` uses) over the other engines' window:
    their warm-up step plus n_steps, so that the final positions are at the same time; only the last frame is
    recorded. An untimed run of the same window comes first, so that every numba kernel the scene needs is
    compiled (or loaded from the cache) before timing: the figure is the steady cost per step.
    """
    from convexsim.simulate import run_model

    window = (n_steps + 1) * model.time_step
    run_model(model, state, duration=window, record_every=n_steps + 1)
    with Stopwatch() as clock:
        traj, _ = run_model(model, state, duration=window, record_every=n_steps + 1)
    return EngineRun("convexsim", n_steps + 1, clock.wall_s, traj.position[-1].copy(), clock.cpu_s)


RUNNERS = {"convexsim": run_convexsim, "drake": run_drake, "mujoco": run_mujoco}


@dataclass
class EngineRun:
    """One engine's timed run: ``steps`` steps after one warm-up step, final body positions [m], the wall
    time and this process's CPU time (user + system, all threads) of the timed steps [s]."""

    engine: str
    steps: int
    wall_s: float
    position: np.ndarray = field(repr=False)
    cpu_s: float = float("nan")

    @property
    def ms_per_step(self) -> float:
        return 1e3 * self.wall_s / max(self.steps, 1)

    @property
    def cpu_ms_per_step(self) -> float:
        """CPU ms/step: on a shared machine the wall time grows with other jobs' load, the CPU time of a
        single-threaded engine much less, so this is the fairer figure there (both are printed)."""
        return 1e3 * self.cpu_s / max(self.steps, 1)


class Stopwatch:
    """Context manager measuring wall time (perf_counter) and process CPU time (process_time) [s]."""

    def __enter__(self) -> "Stopwatch":
        self._w, self._c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall_s = time.perf_counter() - self._w
        self.cpu_s = time.process_time() - self._c


def run_side_by_side(model: Model, state: State, duration: float,
                     engines=("convexsim", "drake", "mujoco")) -> list[EngineRun]:
    """Each engine from the same initial state for the same simulated window, in this process."""
    for e in engines:
        if e not in RUNNERS:
            raise ValueError(f"unknown engine {e!r}; choose from {', '.join(RUNNERS)}")
    for e in engines:
        why = translation_problem(model, e) if e != "convexsim" else ""
        if why:
            raise UntranslatableScene(f"{e}: {why}")
    for e in engines:
        if e != "convexsim":
            require(e)
    n = max(1, int(round(duration / model.time_step)))
    return [RUNNERS[e](model, state, n) for e in engines]


def _ms(x: float) -> str:
    """ms/step to four significant digits (a one-sphere step is a few µs, a 500-body pile's tens of ms)."""
    return f"{x:.4g}" if 1e-4 <= abs(x) < 1e5 else f"{x:.3e}"


def format_side_by_side(scene: str, model: Model, runs: list[EngineRun]) -> list[str]:
    """Table rows: engine, ms/step, ratio to convexsim, the largest final-position difference to convexsim
    and the difference of the bodies' mean final height (a pile's settled statistic: individual balls of a
    pile end centimetres apart between any two engines, the pile's mean height does not)."""
    ref = next((r for r in runs if r.engine == "convexsim"), runs[0])
    moving = ~np.asarray(model.body_fixed)
    rows = []
    for r in runs:
        dp = np.linalg.norm(r.position[moving] - ref.position[moving], axis=1)
        dz = r.position[moving, 2].mean() - ref.position[moving, 2].mean() if dp.size else 0.0
        ratio = r.ms_per_step / ref.ms_per_step if ref.ms_per_step > 0 else float("nan")
        cpu_ratio = r.cpu_ms_per_step / ref.cpu_ms_per_step if ref.cpu_ms_per_step > 0 else float("nan")
        rows.append(f"{scene:<20}{r.engine:<11}{r.steps:>7}{_ms(r.ms_per_step):>10}{ratio:>10.2f}"
                    f"{_ms(r.cpu_ms_per_step):>10}{cpu_ratio:>10.2f}"
                    f"{(dp.max() if dp.size else 0.0) * 1e3:>14.3f}{dz * 1e3:>16.3f}")
    return rows


HEADER = (f"{'scene':<20}{'engine':<11}{'steps':>7}{'ms/step':>10}{'vs ours':>10}{'cpu ms':>10}{'cpu vs':>10}"
          f"{'max |Δp| [mm]':>14}{'Δ mean z [mm]':>16}")
