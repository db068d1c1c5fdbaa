"""MJCF import: a MuJoCo model file → a convexsim scene (a dict validated as any scene file).

The file is compiled by the ``mujoco`` package (the optional extra ``convexsim[mjcf]``), so default
classes, ``<include>``, ``<compiler angle/meshdir>``, inertias computed from geoms and mesh assets are
resolved exactly as MuJoCo resolves them; the scene is built from the compiled ``MjModel`` at its
reference configuration ``qpos0`` and needs no MuJoCo to run. The mapping:

* **bodies**: a body with one joint becomes a scene body (a link) with MuJoCo's mass and its inertia
  rotated from the inertial frame into the body's axes; its frame is at the centre of mass with the
  MuJoCo body's axes. A body without joints is welded to its parent: it is merged into it (masses, centres
  of mass and inertias combined by the parallel-axis theorem, geoms carried over), or, hanging from the
  world, becomes a **fixed** body at its pose (the world body's own geoms go on a fixed body
  ``worldbody``). A ``mocap`` body becomes a **kinematic** body at the keyframe's (or the file's) mocap pose,
  at rest until a script moves it (``Simulation.set_body_pose`` / ``set_body_velocity``). A body with several
  joints is refused (nest one body per joint);
* **joints**: hinge → revolute, slide → prismatic, ball → ball, free → free (its ``initial_position`` the
  body's pose); the joint frame sits at the joint's anchor with the child body's axes, the axis in them;
  ``range`` of limited hinge/slide joints → lower/upper, damping and armature carried over. Refused: a
  non-zero ``ref``, a joint spring (``stiffness``), ``frictionloss``, ``actuatorfrcrange``, limits,
  damping or armature on ball/free joints;
* **geoms** that collide (``contype`` or ``conaffinity`` non-zero; purely visual geoms are skipped):
  plane → halfspace (fixed bodies only), sphere, capsule (``length`` = distance between cap centres),
  box (full edges), cylinder (``length`` = full height), mesh → a convex mesh given by the vertices of the
  convex hull of MuJoCo's scaled mesh, in the mesh file's own frame (MuJoCo's recentring undone), posed
  where MuJoCo puts it; the sliding friction becomes a material
  ``friction_<μ>``; contype/conaffinity other than 1/1 become the geometry's ``collision_group`` /
  ``collision_mask`` (the same bit rule). Ellipsoids, height fields and SDFs are refused with a recipe;
* **actuators**: position servos on a hinge or slide joint (``<position kp kv>`` or an equivalent
  ``<general>``: gain kp, bias −kp·q − kv·q̇, no activation dynamics) → PD actuators with kp·g², kv·g²
  (g the gear), the target ``clamp(0, ctrlrange)/g`` (MuJoCo's ctrl starts at 0) and the effort limit
  g·forcerange (symmetric only); velocity servos likewise (kp = 0); servos on a fixed tendon through a
  coupler; ``<motor>`` → a scene motor (a torque input: the start's ctrl·gain·g as its constant torque, the
  effort min(g·forcerange, g·gain·ctrlrange)); site transmissions and activation dynamics are refused;
* **equality constraints**: ``weld`` between bodies → a weld (keeping the relative pose of qpos0; one with
  another ``relpose`` is refused), ``joint`` with a linear polynomial q1 = c0 + c1·q2 → a coupler.
  connect, tendon and flex equalities, inactive ones, site welds are refused;
* ``<option timestep gravity>`` → time_step and gravity. Tendons, explicit contact ``<pair>``\\ s and
  ``<exclude>`` between bodies of different trees are refused; contact parameters other than the sliding
  friction (solref, solimp, condim, margins, contype/conaffinity bit masks) are not represented.

Every problem names the file and the element (``gripper.xml: joint 'finger' (body 'left'): ...``).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np

from convexsim.errors import SceneWarning
from convexsim.scene.urdf import UrdfError, matrix_to_quaternion
from convexsim.spatial import quat_to_matrix

WORLD_GEOMS_BODY = "worldbody"
"""Name of the fixed body that carries the MuJoCo world body's own geoms."""

ELLIPSOID_RECIPE = ("ellipsoids are not a convexsim shape; replace the geom with a sphere or capsule of similar "
                    "size, or with a mesh geom (the convex hull of points on the ellipsoid's surface)")
MULTI_JOINT_RECIPE = ("convexsim gives a body one joint; split the body into a chain of bodies with one joint "
                      "each (the intermediate bodies light: a small mass and inertia)")
ACTUATOR_HELP = ("only motors (<motor>: gain, no bias), position servos (<position kp kv> or a <general> with bias "
                 "0 -kp -kv) and velocity servos (<velocity kv>: bias 0 0 -kv) without activation dynamics are "
                 "imported; replace it with one of those or drive the joint from a controller")
AGREE = 1e-9
"""Relative tolerance of the consistency checks on the compiled model (weld relpose against qpos0)."""


class MjcfError(UrdfError):
    """An MJCF file cannot be imported; ``problems`` lists every problem (file and element named).
    ``convexsim.scene.load`` reports it as a SceneError."""


def load_mjcf_model(path: str | Path):
    """Compile an MJCF file with MuJoCo: ``mujoco.MjModel``. MjcfError when mujoco is missing or refuses; what
    MuJoCo warns while compiling (e.g. an inertia matrix singular at qpos0) becomes a SceneWarning naming the file,
    instead of MuJoCo's log file in the working folder."""
    source = str(path)
    try:
        import mujoco
    except ImportError:
        raise MjcfError([f"{source}: reading MJCF needs the mujoco package: pip install 'convexsim[mjcf]' "
                         "(the scene it writes runs without it)"], source) from None
    if not Path(path).is_file():
        raise MjcfError([f"{source}: no such file"], source)
    warned: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(warned.append)    # not MuJoCo's default: a MUJOCO_LOG.TXT in the working folder
    try:
        model = mujoco.MjModel.from_xml_path(str(path))
    except ValueError as err:           # MuJoCo's compiler errors name the element and line
        said = "; ".join(part.strip() for part in str(err).splitlines() if part.strip())   # its lines in one
        raise MjcfError([f"{source}: MuJoCo cannot compile the file: {said}"], source) from None
    finally:
        mujoco.set_mju_user_warning(previous)
    for text in dict.fromkeys(warned):
        warnings.warn(f"{source}: MuJoCo warned while compiling it: {text}", SceneWarning, stacklevel=2)
    return model


def mjcf_to_scene(path: str | Path, keyframe: str | None = None) -> dict:
    """The scene mapping of an MJCF file (module docstring), starting from ``keyframe`` (a ``<key>`` name) if
    given; MjcfError listing every problem."""
    path = Path(path)
    return model_to_scene(load_mjcf_model(path), str(path), name=path.stem, keyframe=keyframe)


class _Model:
    """The compiled model at qpos0 with names, enums and the problem list."""

    def __init__(self, m, source: str, keyframe: str | None = None):
        import mujoco
        self.mj, self.m, self.source = mujoco, m, source
        self.d = mujoco.MjData(m)
        mujoco.mj_kinematics(m, self.d)      # at qpos0: body, inertial, geom frames and joint anchors in W
        self.problems: list[str] = []
        self.key = -1                        # the keyframe's index, or −1: start at qpos0 with qvel = ctrl = 0
        self.ctrl = np.zeros(m.nu)
        self.dk = self.d                     # kinematics at the start configuration (the keyframe's qpos)
        if keyframe is not None:
            k = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, keyframe)
            if k < 0:
                known = [self.name("key", i) or f"#{i}" for i in range(m.nkey)]
                self.add(f"keyframe {keyframe!r}", f"no <key> of that name; the file's keyframes: {known or 'none'}")
                return
            self.key = k
            self.ctrl = np.array(m.key_ctrl[k], dtype=float)
            self.dk = mujoco.MjData(m)
            self.dk.qpos[:] = m.key_qpos[k]
            self.dk.qvel[:] = m.key_qvel[k]
            if m.nmocap:
                self.dk.mocap_pos[:] = m.key_mpos[k].reshape(-1, 3)
                self.dk.mocap_quat[:] = m.key_mquat[k].reshape(-1, 4)
            mujoco.mj_kinematics(m, self.dk)

    def name(self, obj: str, i: int) -> str:
        kind = getattr(self.mj.mjtObj, f"mjOBJ_{obj.upper()}")
        return self.mj.mj_id2name(self.m, kind, i) or ""

    def where(self, obj: str, i: int) -> str:
        n = self.name(obj, i)
        return f"{obj} {n!r}" if n else f"{obj} #{i}"

    def add(self, where: str, msg: str) -> None:
        self.problems.append(f"{self.source}: {where}: {msg}")


def _scene_name(raw: str, fallback: str, taken: set) -> str:
    """A valid, unique scene name (no '.', '=', '[', ']' or whitespace) for a MuJoCo name."""
    base = "".join(c if c.isalnum() or c in "_-" else "_" for c in raw) or fallback
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def model_to_scene(m, source: str = "<mjcf>", name: str = "mjcf", keyframe: str | None = None) -> dict:
    """The scene mapping of a compiled ``mujoco.MjModel`` (module docstring), starting from the keyframe named
    ``keyframe`` if given; MjcfError otherwise."""
    M = _Model(m, source, keyframe)
    _check_model_level(M)
    host = _hosts(M)
    names = _scene_body_names(M, host)
    moving = {b for b in names if b and m.body_jntnum[b] == 1}
    frames = {b: _host_frame(M, b, host, b in moving) for b in names}
    materials: dict = {}
    bodies = []
    for b in sorted(names):
        geoms = _geoms(M, b, host, frames[b], materials)
        if b == 0 and not geoms:
            continue
        body: dict = {"name": names[b], "geometries": geoms}
        o, R = frames[b][0], frames[b][1]
        if b in moving:
            mass, inertia = frames[b][2], frames[b][3]
            body["mass"] = mass
            body["inertia"] = [[float(x) for x in row] for row in inertia]
        elif b and m.body_mocapid[b] >= 0:          # a mocap body: kinematic, at the keyframe's (or the file's) pose
            body["kinematic"] = True
            o, R = M.dk.xpos[b], M.dk.xmat[b].reshape(3, 3)
            body["position"] = [float(x) for x in o]
            body["quaternion"] = matrix_to_quaternion(R)
        else:
            body["fixed"] = True
            if b:
                body["position"] = [float(x) for x in o]
                body["quaternion"] = matrix_to_quaternion(R)
        bodies.append(body)
    jnames: dict[int, str] = {}
    joints = []
    for b in sorted(moving):
        j = int(m.body_jntadr[b])
        jnames[j] = _scene_name(M.name("joint", j), f"joint{j}", set(jnames.values()))
        p = host[int(m.body_parentid[b])]
        joints.append(_joint(M, j, jnames[j], names[b], names[p] if p else "world", frames[b], frames[p] if p else None))
    constraints = _equalities(M, host, names, moving, jnames)
    actuators, motors = _actuators(M, jnames, constraints)
    if M.key >= 0:
        _start_from_keyframe(M, joints, frames, moving, jnames)
    if M.problems:
        raise MjcfError(M.problems, source)
    start = f", keyframe {M.name('key', M.key)!r}" if M.key >= 0 else ""
    scene = {"name": _scene_name(name, "mjcf", set()), "description": f"imported from {Path(source).name}{start}",
             "time_step": float(m.opt.timestep), "gravity": [float(x) for x in m.opt.gravity],
             "materials": materials, "bodies": bodies, "joints": joints}
    if actuators:
        scene["actuators"] = actuators
    if motors:
        scene["motors"] = motors
    if constraints:
        scene["constraints"] = constraints
    return _tidy(scene)


def _tidy(value):
    """The scene with round-off dust (|x| < 1e-15, e.g. quaternion parts of exact quarter turns) set to 0."""
    if isinstance(value, dict):
        return {k: _tidy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    if isinstance(value, float) and abs(value) < 1e-15:
        return 0.0
    return value


def _check_model_level(M: _Model) -> None:
    """Refuse model-wide features with no convexsim counterpart: tendons, explicit contact pairs, exclusions
    between bodies of different trees (within one tree convexsim never collides), flexes, gravcomp."""
    m, mj = M.m, M.mj
    for t in range(m.ntendon):
        where = M.where("tendon", t)
        adr, num = int(m.tendon_adr[t]), int(m.tendon_num[t])
        if any(int(m.wrap_type[adr + i]) != mj.mjtWrap.mjWRAP_JOINT for i in range(num)):
            M.add(where, "spatial tendons are not imported (convexsim has no cables); drive the joints with "
                  "actuators or couple them with <equality> <joint>")
            continue
        extras = [what for what, on in (("range", m.tendon_limited[t]), ("stiffness", m.tendon_stiffness[t]),
                                        ("damping", m.tendon_damping[t]), ("frictionloss", m.tendon_frictionloss[t]))
                  if on]
        if extras:
            M.add(where, f"{', '.join(extras)} on a fixed tendon are not imported (a fixed tendon maps only through "
                  "the actuators on it); put them on the joints")
    if m.npair:
        M.add("<contact> <pair>", "explicit contact pairs are not imported (convexsim collides every pair of "
              "bodies except links of one tree); remove the <pair> elements")
    for e in range(m.nexclude):              # signature = body1 << 16 | body2
        b1, b2 = int(m.exclude_signature[e]) >> 16, int(m.exclude_signature[e]) & 0xFFFF
        if m.body_rootid[b1] != m.body_rootid[b2] and 0 not in (b1, b2):
            M.add(f"<contact> <exclude> (bodies {M.name('body', b1)!r}, {M.name('body', b2)!r})",
                  "contact exclusions between different trees are not imported (convexsim collides every pair "
                  "of bodies except links of one tree and the body the tree hangs from); remove it")
    if getattr(m, "nflex", 0):
        M.add("<flex>", "deformable flexes are not imported; convexsim simulates rigid bodies")
    for b in range(1, m.nbody):
        if m.body_gravcomp[b] != 0:
            M.add(M.where("body", b), "gravcomp is not imported; remove it or add the compensating torques from "
                  "a controller")


def _scene_body_names(M: _Model, host: dict[int, int]) -> dict[int, str]:
    """The scene name of each host body (``_hosts``): its MuJoCo name made valid and unique; the world's geoms
    go to the fixed body WORLD_GEOMS_BODY."""
    taken: set = {"world"}
    names = {}
    for b in sorted(set(host.values())):
        names[b] = _scene_name(M.name("body", b), f"body{b}", taken) if b else _scene_name(WORLD_GEOMS_BODY, "w", taken)
    return names


def scene_body_members(m) -> dict[str, list[int]]:
    """Scene body name -> the MuJoCo body ids it carries (the body itself and the joint-less bodies merged into
    it), for a compiled ``mujoco.MjModel``: how to compare a MuJoCo run with the imported scene's bodies (a
    scene body's centre of mass is the mass-weighted mean of its members' ``xipos``)."""
    M = _Model(m, "<mjcf>")
    host = _hosts(M)
    names = _scene_body_names(M, host)
    members: dict[str, list[int]] = {}
    for b, h in sorted(host.items()):
        members.setdefault(names[h], []).append(b)
    return members


def _hosts(M: _Model) -> dict[int, int]:
    """host[b]: the scene body that carries MuJoCo body b. A body with a joint hosts itself; a body without
    joints is merged into its parent's host, or hosts itself as a fixed body when it hangs from the world
    (body 0, the world, hosts the world body's geoms)."""
    m = M.m
    host = {0: 0}
    for b in range(1, m.nbody):                 # parents come before children in MuJoCo's body order
        nj, p = int(m.body_jntnum[b]), int(m.body_parentid[b])
        if nj > 1:
            M.add(M.where("body", b), f"{nj} joints in one body: {MULTI_JOINT_RECIPE}")
        host[b] = b if nj >= 1 or p == 0 else host[p]
    return host


def _host_frame(M: _Model, h: int, host: dict, moving: bool):
    """(origin o [m], axes R, mass [kg], inertia about the COM in R's axes [kg·m²]) of scene body h in W at
    qpos0. Moving: o is the composite centre of mass of the MuJoCo bodies it hosts (parallel-axis theorem,
    I = Σ R_i diag(I_i) R_iᵀ + m_i (|d_i|² E − d_i d_iᵀ)), R the MuJoCo body's axes. Fixed: its frame."""
    m, d = M.m, M.d
    R = d.xmat[h].reshape(3, 3).copy()
    if not moving:
        return d.xpos[h].copy(), R, 0.0, None
    members = [b for b, hb in host.items() if hb == h]
    masses = np.array([m.body_mass[b] for b in members])
    coms = np.array([d.xipos[b] for b in members])
    mass = float(masses.sum())
    com = masses @ coms / mass
    I = np.zeros((3, 3))
    for b, mb, c in zip(members, masses, coms):
        Ri = d.ximat[b].reshape(3, 3)
        dv = c - com
        I += Ri @ np.diag(m.body_inertia[b]) @ Ri.T + mb * (dv @ dv * np.eye(3) - np.outer(dv, dv))
    I_body = R.T @ I @ R
    return com, R, mass, 0.5 * (I_body + I_body.T)


def _material(materials: dict, mu: float) -> str:
    """The material of sliding friction μ (named ``friction_<μ>``, '.' written 'p')."""
    name = "friction_" + f"{mu:g}".replace(".", "p").replace("-", "m").replace("+", "")
    materials.setdefault(name, {"friction": float(mu)})
    return name


def _geoms(M: _Model, h: int, host: dict, frame, materials: dict) -> list[dict]:
    """The colliding geoms of the MuJoCo bodies hosted by h, posed in h's scene frame."""
    m, d, mj = M.m, M.d, M.mj
    o, R = frame[0], frame[1]
    T = mj.mjtGeom
    out = []
    for g in range(m.ngeom):
        if host.get(int(m.geom_bodyid[g])) != h or (m.geom_contype[g] == 0 and m.geom_conaffinity[g] == 0):
            continue
        where = f"{M.where('geom', g)} (body {M.name('body', int(m.geom_bodyid[g]))!r})"
        t, s = int(m.geom_type[g]), m.geom_size[g]
        Rg = d.geom_xmat[g].reshape(3, 3)
        spec = {"position": [float(x) for x in R.T @ (d.geom_xpos[g] - o)],
                "quaternion": matrix_to_quaternion(R.T @ Rg),
                "material": _material(materials, float(m.geom_friction[g][0]))}
        if (int(m.geom_contype[g]), int(m.geom_conaffinity[g])) != (1, 1):
            spec["collision_group"], spec["collision_mask"] = int(m.geom_contype[g]), int(m.geom_conaffinity[g])
        if t == T.mjGEOM_PLANE:                     # MuJoCo allows planes in static bodies only
            out.append({"shape": "halfspace", **spec})
        elif t == T.mjGEOM_SPHERE:
            out.append({"shape": "sphere", "radius": float(s[0]), **spec})
        elif t == T.mjGEOM_CAPSULE:
            out.append({"shape": "capsule", "radius": float(s[0]), "length": float(2 * s[1]), **spec})
        elif t == T.mjGEOM_CYLINDER:
            out.append({"shape": "cylinder", "radius": float(s[0]), "length": float(2 * s[1]), **spec})
        elif t == T.mjGEOM_BOX:
            out.append({"shape": "box", "size": [float(2 * x) for x in s], **spec})
        elif t == T.mjGEOM_MESH:
            k = int(m.geom_dataid[g])
            if hasattr(m, "mesh_quat"):
                R_m, p_m = quat_to_matrix(m.mesh_quat[k]), np.asarray(m.mesh_pos[k], dtype=float)
            else:                                    # older MuJoCo: the vertices stay in the geom frame
                R_m, p_m = np.eye(3), np.zeros(3)
            R_bf = R.T @ Rg @ R_m.T                  # the file's frame: MuJoCo moved the vertices by (R_m, p_m)
            p_bf = np.asarray(spec["position"]) - R_bf @ p_m
            out.append({"shape": "mesh", "vertices": hull_vertices(_mesh_vertices(m, k) @ R_m.T + p_m),
                        **spec, "position": [float(x) for x in p_bf], "quaternion": matrix_to_quaternion(R_bf)})
        elif t == T.mjGEOM_ELLIPSOID:
            M.add(where, ELLIPSOID_RECIPE)
        else:
            M.add(where, f"geom type {T(t).name.removeprefix('mjGEOM_').lower()} is not imported; use a "
                  "plane, sphere, capsule, box, cylinder or mesh")
    return out


def _mesh_vertices(m, k: int) -> np.ndarray:
    """Vertices of compiled mesh k in MuJoCo's mesh frame [m] (scaled, moved to the mesh's centroid and
    principal axes: v_file = R(mesh_quat)·v + mesh_pos)."""
    a, n = int(m.mesh_vertadr[k]), int(m.mesh_vertnum[k])
    return np.asarray(m.mesh_vert[a:a + n], dtype=float)


def hull_vertices(points: np.ndarray) -> list[list[float]]:
    """The vertices of the convex hull of ``points`` (n, 3) [m], in input order (scipy's Qhull), each
    coordinate the shortest decimal of its float32 value (MuJoCo keeps mesh vertices in float32, so 0.03
    reads back as 0.03, not 0.029999999329447746)."""
    from scipy.spatial import ConvexHull
    idx = np.sort(ConvexHull(points).vertices)
    dust = 1e-7 * float(np.abs(points).max())        # float32 round-off of a coordinate that is 0 in the file
    return [[0.0 if abs(x) < dust else float(str(np.float32(x))) for x in points[i]] for i in idx]


def _joint(M: _Model, j: int, name: str, child: str, parent: str, cf, pf) -> dict:
    """The scene joint of MuJoCo joint j: frame J at the anchor with the child's axes, in the parent frame."""
    m, d, mj = M.m, M.d, M.mj
    T = mj.mjtJoint
    t = int(m.jnt_type[j])
    where = f"joint {M.name('joint', j) or j!r} (body {child!r})"
    com, R = cf[0], cf[1]
    if t == T.mjJNT_FREE:
        return {"name": name, "type": "free", "parent": "world", "child": child,
                "initial_position": [float(x) for x in com] + matrix_to_quaternion(R)}
    o_p, R_p = (np.zeros(3), np.eye(3)) if pf is None else (pf[0], pf[1])
    anchor = d.xanchor[j]
    spec = {"name": name, "type": {T.mjJNT_HINGE: "revolute", T.mjJNT_SLIDE: "prismatic", T.mjJNT_BALL: "ball"}[t],
            "parent": parent, "child": child,
            "position": [float(x) for x in R_p.T @ (anchor - o_p)],
            "quaternion": matrix_to_quaternion(R_p.T @ R),
            "child_offset": [float(x) for x in R.T @ (com - anchor)]}
    dof = int(m.jnt_dofadr[j])
    one_dof = t in (T.mjJNT_HINGE, T.mjJNT_SLIDE)
    if m.jnt_stiffness[j] != 0:
        M.add(where, "joint springs (stiffness) are not imported; remove stiffness or add the spring torque from "
              "a controller")
    if m.dof_frictionloss[dof] != 0:
        if one_dof:
            spec["friction"] = float(m.dof_frictionloss[dof])
        else:
            M.add(where, "frictionloss on a ball or free joint is not imported (convexsim's joint friction acts on "
                  "hinge and slide joints); remove it")
    if getattr(m, "jnt_actfrclimited", np.zeros(m.njnt))[j]:
        M.add(where, "actuatorfrcrange is not imported; put the limit on the actuator (forcerange)")
    if one_dof:
        q0 = float(m.qpos0[m.jnt_qposadr[j]])
        if q0 != 0.0:
            M.add(where, f"ref = {q0:g}: convexsim measures q from the pose in the file; remove ref (and shift "
                  "range, actuator targets and couplings by it)")
        spec["axis"] = [float(x) for x in R.T @ d.xaxis[j]]
        if m.jnt_limited[j]:
            spec["lower"], spec["upper"] = float(m.jnt_range[j][0]), float(m.jnt_range[j][1])
        if m.dof_damping[dof]:
            spec["damping"] = float(m.dof_damping[dof])
        if m.dof_armature[dof]:
            spec["armature"] = float(m.dof_armature[dof])
    else:
        if m.jnt_limited[j]:
            M.add(where, "a ball joint's range is not imported (convexsim limits the swing of an axis, MuJoCo the "
                  "rotation angle); remove range")
        if np.any(m.dof_damping[dof:dof + 3]) or np.any(m.dof_armature[dof:dof + 3]):
            M.add(where, "damping and armature on a ball joint are not imported; remove them")
    return spec


def _servo_kind(M: _Model, a: int):
    """How actuator a's force F = g0·ctrl + b0 + b1·L + b2·L̇ (fixed gain, affine or no bias, no activation
    dynamics) maps: ("position", kp = −b1, kv = −b2), ("velocity", 0, kv = −b2) with b1 = 0, ("motor", 0, 0)
    with no bias; None for anything else."""
    m, mj = M.m, M.mj
    gain, bias = m.actuator_gainprm[a], m.actuator_biasprm[a]
    if (int(m.actuator_dyntype[a]) != mj.mjtDyn.mjDYN_NONE or int(m.actuator_gaintype[a]) != mj.mjtGain.mjGAIN_FIXED
            or np.any(gain[1:3]) or gain[0] == 0):
        return None
    bt = int(m.actuator_biastype[a])
    if bt == mj.mjtBias.mjBIAS_NONE or (bt == mj.mjtBias.mjBIAS_AFFINE and not np.any(bias[:3])):
        return "motor", 0.0, 0.0
    if bt != mj.mjtBias.mjBIAS_AFFINE:
        return None
    kp, kv = float(-bias[1]), float(-bias[2])
    if kp > 0 and kv >= 0:
        return "position", kp, kv
    if kp == 0 and kv > 0:
        return "velocity", 0.0, kv
    return None


def _transmission(M: _Model, a: int, jnames: dict[int, str], couplers: list[dict]):
    """(joint name, g, L0): actuator a's length L = g·q + L0 on one imported hinge or slide joint q. A joint
    transmission has g = gear, L0 = 0; a fixed tendon L = gear·Σ c_i q_i whose joints the imported couplers tie
    to one of them, q_i = ρ_i q_r + δ_i, has g = gear·Σ c_i ρ_i, L0 = gear·Σ c_i δ_i on q_r. None if neither."""
    m, mj = M.m, M.mj
    where = M.where("actuator", a)
    gear = float(m.actuator_gear[a][0])
    if gear == 0 or np.any(m.actuator_gear[a][1:]):
        M.add(where, f"gear {list(m.actuator_gear[a])} is not a scalar gear; a joint or tendon actuator takes one "
              "gear ≠ 0")
        return None
    trn, obj = int(m.actuator_trntype[a]), int(m.actuator_trnid[a][0])
    one_dof = (int(mj.mjtJoint.mjJNT_HINGE), int(mj.mjtJoint.mjJNT_SLIDE))
    if trn == mj.mjtTrn.mjTRN_JOINT:
        if obj not in jnames or int(m.jnt_type[obj]) not in one_dof:
            M.add(where, "its joint is not an imported hinge or slide joint; actuators drive hinge and slide joints")
            return None
        return jnames[obj], gear, 0.0
    if trn != mj.mjtTrn.mjTRN_TENDON:
        M.add(where, "only joint and fixed-tendon transmissions are imported (not site, body or slider-crank); "
              "drive the joints instead")
        return None
    adr, num = int(m.tendon_adr[obj]), int(m.tendon_num[obj])
    terms = [(int(m.wrap_objid[adr + i]), float(m.wrap_prm[adr + i])) for i in range(num)]
    if any(j not in jnames for j, _ in terms):
        return None                                   # a spatial tendon or a joint not imported: reported already
    tie = {c["joint"]: (c["reference"], c["ratio"], c["offset"]) for c in couplers if c["type"] == "coupler"}
    names = [jnames[j] for j, _ in terms]
    refs = {tie.get(n, (n, 1.0, 0.0))[0] for n in names}
    if len(refs) != 1:
        M.add(where, f"its tendon {M.name('tendon', obj)!r} combines joints {names} that no <equality> <joint> ties "
              "to one of them; convexsim drives a fixed tendon through the couplers of its joints: add the joint "
              "equalities (q_i = c0 + c1·q_ref), or drive each joint with its own actuator")
        return None
    ref = refs.pop()
    g = gear * sum(c * tie.get(n, (n, 1.0, 0.0))[1] for n, (_, c) in zip(names, terms))
    L0 = gear * sum(c * tie.get(n, (n, 1.0, 0.0))[2] for n, (_, c) in zip(names, terms))
    if g == 0:
        M.add(where, f"its tendon {M.name('tendon', obj)!r} has zero length change along its coupled joints")
        return None
    return ref, g, L0


def _symmetric_limit(M: _Model, a: int, what: str, lo: float, hi: float) -> float | None:
    if lo != -hi or hi <= 0:
        M.add(M.where("actuator", a), f"{what} [{lo:g}, {hi:g}] is not symmetric about 0; convexsim's effort limit "
              f"is |u| <= effort (use {what}='-F F')")
        return None
    return hi


def _actuators(M: _Model, jnames: dict[int, str], couplers: list[dict]) -> tuple[list[dict], list[dict]]:
    """PD actuators (position and velocity servos) and motors of the actuators (module docstring), with the
    start's ctrl (0, or the keyframe's) clamped to ctrlrange; anything else refused."""
    m = M.m
    acts, motors = [], []
    for a in range(m.nu):
        where = M.where("actuator", a)
        kind = _servo_kind(M, a)
        if kind is None:
            M.add(where, ACTUATOR_HELP)
            continue
        trn = _transmission(M, a, jnames, couplers)
        if trn is None:
            continue
        joint, g, L0 = trn
        ctrl = float(M.ctrl[a])
        if m.actuator_ctrllimited[a]:
            ctrl = float(np.clip(ctrl, *m.actuator_ctrlrange[a]))
        gain0, b0 = float(m.actuator_gainprm[a][0]), float(m.actuator_biasprm[a][0])
        effort = None
        if m.actuator_forcelimited[a]:
            F = _symmetric_limit(M, a, "forcerange", *(float(x) for x in m.actuator_forcerange[a]))
            if F is None:
                continue
            effort = abs(g) * F
        kind, kp, kv = kind
        if kind == "motor":
            if m.actuator_ctrllimited[a]:
                C = _symmetric_limit(M, a, "ctrlrange", *(float(x) for x in m.actuator_ctrlrange[a]))
                if C is None:
                    continue
                effort = min(effort or math.inf, abs(g * gain0) * C)
            torque = g * gain0 * ctrl              # the start's ctrl held: a constant torque, within forcerange
            spec = {"joint": joint, "torque": torque}
            if effort is not None and math.isfinite(effort):
                spec["effort"] = effort
                spec["torque"] = float(np.clip(torque, -effort, effort))
            motors.append(spec)
            continue
        spec = {"joint": joint, "kp": kp * g * g, "kd": kv * g * g}
        if kind == "position":          # F = kp (L_d − L) − kv L̇, L_d = (g0·ctrl + b0)/kp, L = g q + L0
            spec["target"] = ((gain0 * ctrl + b0) / kp - L0) / g
        else:                           # F = kv (L̇_d − L̇), L̇_d = (g0·ctrl + b0)/kv
            spec["velocity_target"] = (gain0 * ctrl + b0) / kv / g
        if effort is not None:
            spec["effort"] = effort
        acts.append(spec)
    return acts, motors


def _start_from_keyframe(M: _Model, joints: list[dict], frames: dict, moving: set, jnames: dict[int, str]) -> None:
    """Set the joints' initial positions and velocities from the keyframe (M.dk at its qpos, qvel): hinge and
    slide q and q̇ as they are; ball: the quaternion and ω in J (MuJoCo's ω is in the child frame); free: the
    centre of mass pose and [ω, v_COM] in the world (MuJoCo's qvel is the frame origin's velocity in the world
    and ω in the body frame)."""
    m, mj, dk = M.m, M.mj, M.dk
    T = mj.mjtJoint
    by_name = {j["name"]: j for j in joints}
    for b in sorted(moving):
        j = int(m.body_jntadr[b])
        spec = by_name[jnames[j]]
        qa, da, t = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j]), int(m.jnt_type[j])
        qpos, qvel = m.key_qpos[M.key], m.key_qvel[M.key]
        if t in (T.mjJNT_HINGE, T.mjJNT_SLIDE):
            spec["initial_position"] = float(qpos[qa] - m.qpos0[qa])
            spec["initial_velocity"] = float(qvel[da])
        elif t == T.mjJNT_BALL:
            quat = np.asarray(qpos[qa:qa + 4], dtype=float)
            spec["initial_position"] = [float(x) for x in quat / np.linalg.norm(quat)]
            spec["initial_velocity"] = [float(x) for x in quat_to_matrix(quat) @ np.asarray(qvel[da:da + 3])]
        else:
            com, R = _composite_com(M, b, frames), dk.xmat[b].reshape(3, 3)
            spec["initial_position"] = [float(x) for x in com] + matrix_to_quaternion(R)
            omega = R @ np.asarray(qvel[da + 3:da + 6], dtype=float)
            v_com = np.asarray(qvel[da:da + 3], dtype=float) + np.cross(omega, com - dk.xpos[b])
            spec["initial_velocity"] = [float(x) for x in omega] + [float(x) for x in v_com]


def _composite_com(M: _Model, h: int, frames: dict) -> np.ndarray:
    """World centre of mass of scene body h at the keyframe: its qpos0 COM carried by body h's motion."""
    d, dk = M.d, M.dk
    R0, Rk = d.xmat[h].reshape(3, 3), dk.xmat[h].reshape(3, 3)
    return dk.xpos[h] + Rk @ (R0.T @ (frames[h][0] - d.xpos[h]))


def _relpose(M: _Model, b1: int, b2: int) -> tuple[np.ndarray, np.ndarray]:
    """Pose (position, quaternion w x y z) of body b2's frame in body b1's frame at qpos0."""
    d = M.d
    R1 = d.xmat[b1].reshape(3, 3)
    p = R1.T @ (d.xpos[b2] - d.xpos[b1])
    return p, np.array(matrix_to_quaternion(R1.T @ d.xmat[b2].reshape(3, 3)))


def _equalities(M: _Model, host: dict, names: dict, moving: set, jnames: dict[int, str]) -> list[dict]:
    """Welds and couplers of the equality constraints (module docstring); anything else refused."""
    m, mj = M.m, M.mj
    E = mj.mjtEq
    out = []
    for e in range(m.neq):
        where = f"equality {M.name('equality', e) or e!r}"
        t, o1, o2, data = int(m.eq_type[e]), int(m.eq_obj1id[e]), int(m.eq_obj2id[e]), m.eq_data[e]
        if not m.eq_active0[e]:
            M.add(where, "inactive equality constraints are not imported (convexsim has no switch for them); "
                  "remove it or make it active")
            continue
        if t == E.mjEQ_WELD:
            if hasattr(m, "eq_objtype") and int(m.eq_objtype[e]) != mj.mjtObj.mjOBJ_BODY:
                M.add(where, "a weld between sites is not imported; weld the bodies (body1, body2)")
                continue
            p, q = _relpose(M, o1, o2)
            rp, rq = np.asarray(data[3:6]), np.asarray(data[6:10])
            scale = 1.0 + float(np.linalg.norm(p))
            if np.linalg.norm(rp - p) > AGREE * scale or min(np.linalg.norm(rq - q), np.linalg.norm(rq + q)) > AGREE:
                M.add(where, "relpose differs from the bodies' relative pose in the file; convexsim's weld keeps the "
                      "relative pose of t = 0: remove relpose and place the bodies as they are welded")
                continue
            a, b = host[o2], host[o1]
            if a == b:
                M.add(where, "both bodies end up in one scene body (welded by having no joints); remove the equality")
                continue
            if b not in moving and a in moving:
                a, b = b, a                                  # body_b is the one that moves
            out.append({"type": "weld", "name": _scene_name(M.name("equality", e), f"weld{e}", set()),
                        "body_a": names[a] if a else "world", "body_b": names[b]})
        elif t == E.mjEQ_JOINT:
            poly = [float(x) for x in data[:5]]
            if o2 < 0:
                M.add(where, f"joint1 alone (held at {poly[0]:g}) is not imported; make it a fixed joint (a body "
                      "without joints) or give joint2")
            elif any(poly[2:]):
                M.add(where, f"polycoef {poly} is not linear; convexsim couples q1 = c0 + c1*q2 (set c2 = c3 = c4 = 0)")
            elif o1 not in jnames or o2 not in jnames:
                M.add(where, "couples a joint that is not imported as a hinge or slide joint")
            else:
                out.append({"type": "coupler", "name": _scene_name(M.name("equality", e), f"coupler{e}", set()),
                            "joint": jnames[o1], "reference": jnames[o2], "ratio": poly[1], "offset": poly[0]})
        else:
            kind = E(t).name.removeprefix("mjEQ_").lower()
            fix = {"connect": "use a weld, or a ball joint in the tree"}.get(kind, "remove it")
            M.add(where, f"{kind} equality constraints are not imported; {fix}")
    return out


__all__ = ["ELLIPSOID_RECIPE", "MjcfError", "WORLD_GEOMS_BODY", "hull_vertices", "load_mjcf_model", "scene_body_members",
           "mjcf_to_scene", "model_to_scene"]
