"""URDF import: a robot description → a convexsim scene (a dict validated as any scene file).

Parsed with the standard library's XML parser (``xml.etree.ElementTree``) and fully validated here; every
problem names the file and the element (``robot.urdf: joint 'elbow' <axis>: ...``). The mapping:

* the root link (the one that is no joint's child) becomes a **fixed** body: the robot's base is welded to
  the world at the origin; with ``floating_base=True`` (``convexsim import-urdf --floating-base``) it is a
  free body instead (a ``free`` joint from the world; it needs ``<inertial>``), its link frame starting at
  the origin;
* a root link named ``world`` (the common URDF convention) is the world itself: it becomes no body, and
  its joints hang from the scene's world. A link attached to it by a ``fixed`` joint is a fixed body at
  the joint's pose (it needs no ``<inertial>``); a ``floating`` joint from it makes its child a free
  body (a ``free`` joint) starting at the joint's pose;
* a link without ``<inertial>`` attached to its parent by a ``fixed`` joint (a tool frame, a finger pad) is
  merged into the parent: its geometry and the joints hanging from it move there, origins composed;
* every other link becomes a body with the ``<inertial>`` mass and inertia (the inertia is rotated from
  the inertial frame into the link frame; ``<inertial>`` with mass > 0 is required); its body frame is at
  the inertial origin (its centre of mass) with the link frame's axes;
* joints: ``revolute`` (with ``<limit lower upper>``), ``continuous`` (a revolute joint without limits),
  ``prismatic``, ``fixed``, ``floating`` (from the ``world`` link only: convexsim floats the root of a
  tree); ``planar`` is refused with a recipe (two prismatic joints and a revolute one through two light
  links). ``<mimic joint multiplier offset>`` on a revolute, continuous or prismatic joint becomes a
  coupler constraint q = multiplier·q_joint + offset (a SAP constraint, docs/articulated.md). ``<origin xyz rpy>`` poses the joint
  frame in the parent link frame (rpy: fixed-axis roll, pitch, yaw, R = Rz(y)·Ry(p)·Rx(r)); ``<axis>``
  defaults to (1, 0, 0); ``<dynamics damping friction>`` become the joint damping and dry friction; every revolute, continuous
  and prismatic joint that is not a ``<mimic>`` gets a motor (a torque input, scene ``motors``: zero torque,
  ``effort`` from ``<limit effort>``); ``<limit velocity>`` is read but not enforced;
* geometry from ``<collision>`` elements (``<visual>`` only when a link has no collision): ``box``,
  ``sphere``, ``cylinder`` (a cylinder shape: ``length`` is the full height along the local z axis) and
  ``mesh``: an OBJ, STL or PLY file (collision uses its convex hull), with ``scale``; ``package://pkg/f``
  is found as ``<package_root>/pkg/f`` or ``<package_root>/f`` (without a package root, under each folder
  of ``ROS_PACKAGE_PATH``), a relative file name against the URDF's
  folder, then the package root; the scene refers to the file by its absolute path (``convexsim
  import-urdf --out`` writes it relative to the scene file). Other mesh formats (COLLADA ``.dae``) are
  refused with the fix (convert the file to STL or OBJ).
"""

from __future__ import annotations

import math
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from convexsim.errors import InputError
from convexsim.spatial import quat_to_matrix


class UrdfError(InputError):
    """A URDF file cannot be imported; ``problems`` lists every problem (file and element named).
    ``convexsim.scene.load`` reports it as a SceneError."""

    def __init__(self, problems: list[str], source: str = "<urdf>"):
        self.problems = list(problems)
        self.source = source
        super().__init__("\n".join(self.problems))


SceneError = UrdfError   # the name used below


def rpy_to_matrix(r: float, p: float, y: float) -> np.ndarray:
    """R = Rz(y)·Ry(p)·Rx(r) (URDF's fixed-axis roll-pitch-yaw)."""
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def matrix_to_quaternion(R: np.ndarray) -> list[float]:
    from convexsim.multibody.forest import matrix_to_quat
    return [float(x) for x in matrix_to_quat(R)]


class _Problems:
    def __init__(self, source: str):
        self.source = source
        self.items: list[str] = []

    def add(self, where: str, msg: str) -> None:
        self.items.append(f"{self.source}: {where}: {msg}")

    def raise_if_any(self) -> None:
        if self.items:
            raise SceneError(self.items, self.source)


def _floats(text: str | None, n: int, where: str, what: str, probs: _Problems, default=None):
    if text is None:
        return default
    try:
        vals = [float(x) for x in text.split()]
    except ValueError:
        probs.add(where, f"{what} must be {n} numbers, got {text!r}")
        return default
    if len(vals) != n or not all(math.isfinite(v) for v in vals):
        probs.add(where, f"{what} must be {n} finite numbers, got {text!r}")
        return default
    return vals


def _origin(el, where: str, probs: _Problems) -> tuple[np.ndarray, np.ndarray]:
    o = el.find("origin") if el is not None else None
    if o is None:
        return np.zeros(3), np.eye(3)
    xyz = _floats(o.get("xyz"), 3, where + " <origin>", "xyz", probs, [0.0, 0.0, 0.0])
    rpy = _floats(o.get("rpy"), 3, where + " <origin>", "rpy", probs, [0.0, 0.0, 0.0])
    return np.array(xyz, dtype=float), rpy_to_matrix(*rpy)


def _attr_float(el, name: str, where: str, probs: _Problems, default=None, positive=False, nonneg=False):
    s = el.get(name) if el is not None else None
    if s is None:
        return default
    try:
        v = float(s)
    except ValueError:
        probs.add(where, f"{name} must be a number, got {s!r}")
        return default
    if not math.isfinite(v) or (positive and v <= 0) or (nonneg and v < 0):
        probs.add(where, f"{name} must be finite{' and > 0' if positive else ' and >= 0' if nonneg else ''}, got {s!r}")
        return default
    return v


MESH_SUFFIXES = (".obj", ".stl", ".ply")
"""Mesh file formats a scene's ``mesh`` geometry reads."""


def resolve_mesh_file(name: str, urdf_dir: Path, package_root: Path | None) -> tuple[Path | None, str]:
    """(the mesh file of a URDF ``filename``, or None, and why not): ``package://pkg/f`` is tried as
    ``<root>/pkg/f`` then ``<root>/f`` for the package root, or without one for each folder of the
    ``ROS_PACKAGE_PATH`` environment variable (as ROS finds packages); ``file://`` paths and absolute paths as
    they are; a relative name against the URDF's folder, then the package root."""
    if name.startswith("package://"):
        rest = name[len("package://"):]
        roots = [package_root] if package_root is not None else \
            [Path(p) for p in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep) if p]
        if not roots:
            return None, (f"{name!r} needs a package root: pass --package-root DIR (the folder holding the "
                          "package) or set ROS_PACKAGE_PATH")
        tail = rest.split("/", 1)[1] if "/" in rest else rest
        candidates = [c for root in roots for c in (root / rest, root / tail)]
    elif name.startswith("file://"):
        candidates = [Path(name[len("file://"):])]
    else:
        candidates = [urdf_dir / name] + ([package_root / name] if package_root is not None else [])
    for c in candidates:
        if c.is_file():
            return c.resolve(), ""
    tried = ", ".join(str(c) for c in candidates)
    return None, f"mesh file {name!r} not found (tried {tried}); check the path or --package-root"


def _mesh(shape, where: str, probs: _Problems, urdf_dir: Path, package_root: Path | None) -> dict | None:
    """The scene fields of a ``<mesh filename scale>``: an absolute ``file`` and ``scale``, or None."""
    name = shape.get("filename") or ""
    if not name:
        probs.add(where + " <mesh>", "filename is required")
        return None
    if Path(name).suffix.lower() not in MESH_SUFFIXES:
        probs.add(where + " <mesh>", f"{name!r}: only OBJ, STL and PLY mesh files are read; convert it to STL or OBJ "
                  "(e.g. trimesh, MeshLab or Blender)")
        return None
    path, why = resolve_mesh_file(name, urdf_dir, package_root)
    if path is None:
        probs.add(where + " <mesh>", why)
        return None
    out: dict = {"shape": "mesh", "file": str(path)}
    scale = _floats(shape.get("scale"), 3, where + " <mesh>", "scale", probs)
    if scale is not None:
        if min(scale) <= 0:
            probs.add(where + " <mesh>", f"scale must be > 0 (a mirrored mesh is not supported), got {shape.get('scale')!r}")
            return None
        out["scale"] = scale
    return out


def _geometry(link_name: str, k: int, el, probs: _Problems, com: np.ndarray, urdf_dir: Path,
              package_root: Path | None):
    where = f"link {link_name!r} <{el.tag}>[{k}] <geometry>"
    g = el.find("geometry")
    if g is None or len(g) != 1:
        probs.add(where, "needs exactly one of <box>, <sphere>, <cylinder>, <mesh>")
        return None
    shape = g[0]
    pos, R = _origin(el, f"link {link_name!r} <{el.tag}>[{k}]", probs)
    spec = {"position": [float(x) for x in pos - com], "quaternion": matrix_to_quaternion(R)}
    if shape.tag == "mesh":
        mesh = _mesh(shape, where, probs, urdf_dir, package_root)
        return None if mesh is None else {**mesh, **spec}
    if shape.tag == "box":
        size = _floats(shape.get("size"), 3, where + " <box>", "size", probs)
        if size is None or min(size) <= 0:
            if size is not None:
                probs.add(where + " <box>", f"size must be > 0, got {shape.get('size')!r}")
            return None
        return {"shape": "box", "size": size, **spec}
    if shape.tag == "sphere":
        r = _attr_float(shape, "radius", where + " <sphere>", probs, positive=True)
        if r is None:
            if shape.get("radius") is None:
                probs.add(where + " <sphere>", "radius is required")
            return None
        return {"shape": "sphere", "radius": r, **spec}
    if shape.tag == "cylinder":
        r = _attr_float(shape, "radius", where + " <cylinder>", probs, positive=True)
        length = _attr_float(shape, "length", where + " <cylinder>", probs, positive=True)
        if r is None or length is None:
            if shape.get("radius") is None or shape.get("length") is None:
                probs.add(where + " <cylinder>", "radius and length are required")
            return None
        return {"shape": "cylinder", "radius": r, "length": length, **spec}
    probs.add(where, f"unknown geometry <{shape.tag}>; expected <box>, <sphere>, <cylinder> or <mesh>")
    return None


WORLD_LINK = "world"
"""A root link of this name is the world itself (module docstring)."""

_PREFIX = re.compile(r"</?([A-Za-z_][\w.-]*):[A-Za-z_]")


def _bind_prefixes(text: str) -> str:
    """The URDF text with every undeclared element prefix (``<drake:collision_filter_group>``, common in
    published files, which simulator-specific parsers accept) declared on the root element, so that the XML
    parser reads the file; those elements are then ignored like any other unknown element."""
    used = set(_PREFIX.findall(text)) - {"xml"}
    missing = [p for p in sorted(used) if f"xmlns:{p}=" not in text]
    if not missing:
        return text
    decl = "".join(f' xmlns:{p}="urn:convexsim:ignored:{p}"' for p in missing)
    return re.sub(r"<robot\b", "<robot" + decl, text, count=1)

PLANAR_RECIPE = ("planar joints are not imported; model one as two prismatic joints (the plane's two axes) and a "
                 "revolute joint (its normal) in series, through two light links (small mass and inertia)")


def urdf_to_scene(path: str | Path, text: str | None = None, *, floating_base: bool = False,
                  package_root: str | Path | None = None) -> dict:
    """The scene mapping of a URDF file (module docstring); SceneError listing every problem.

    floating_base: the root link becomes a free body instead of being welded to the world (ignored, and
    reported, when the root link is ``world``).
    package_root: the folder ``package://`` mesh names are resolved against (and relative names after the
    URDF's folder)."""
    path = Path(path)
    package_root = Path(package_root).resolve() if package_root is not None else None
    source = str(path)
    probs = _Problems(source)
    try:
        text = path.read_text(encoding="utf-8") if text is None else text
    except (OSError, UnicodeDecodeError) as err:
        raise SceneError([f"{source}: cannot read URDF file: {err}"], source) from None
    try:
        root = ET.fromstring(_bind_prefixes(text))
    except ET.ParseError as err:
        raise SceneError([f"{source}: invalid XML: {err}"], source) from None
    if root.tag != "robot":
        raise SceneError([f"{source}: the root element must be <robot>, got <{root.tag}>"], source)
    links = root.findall("link")
    joints = root.findall("joint")
    if not links:
        raise SceneError([f"{source}: <robot> has no <link>"], source)
    names = []
    for i, l in enumerate(links):
        n = l.get("name")
        if not n:
            probs.add(f"<link>[{i}]", "name is required")
        elif n in names:
            probs.add(f"link {n!r}", "duplicate link name")
        names.append(n)
    probs.raise_if_any()
    parent_of: dict[str, str] = {}
    jnames = []
    for i, j in enumerate(joints):
        n = j.get("name")
        where = f"joint {n!r}" if n else f"<joint>[{i}]"
        if not n:
            probs.add(where, "name is required")
        elif n in jnames:
            probs.add(where, "duplicate joint name")
        jnames.append(n)
        t = j.get("type")
        if t == "planar":
            probs.add(where, PLANAR_RECIPE)
        elif t not in ("revolute", "continuous", "prismatic", "fixed", "floating"):
            probs.add(where, f"type {t!r} is not supported; use revolute, continuous, prismatic, fixed or floating")
        for tag in ("parent", "child"):
            el = j.find(tag)
            ln = el.get("link") if el is not None else None
            if ln is None:
                probs.add(where, f"<{tag} link=...> is required")
            elif ln not in names:
                probs.add(f"{where} <{tag}>", f"unknown link {ln!r}")
        ch = j.find("child")
        pa = j.find("parent")
        if ch is not None and pa is not None and ch.get("link") in names:
            c = ch.get("link")
            if c in parent_of:
                probs.add(f"{where} <child>", f"link {c!r} already has a parent joint; a link has one parent")
            parent_of[c] = pa.get("link")
    probs.raise_if_any()
    roots = [n for n in names if n not in parent_of]
    if len(roots) != 1:
        raise SceneError([f"{source}: the links must form one tree with one root link; roots: {roots or 'none (a cycle)'}"],
                         source)
    # cycles
    for n in names:
        seen, p = {n}, parent_of.get(n)
        while p is not None:
            if p in seen:
                raise SceneError([f"{source}: link {n!r}: the joints form a cycle"], source)
            seen.add(p)
            p = parent_of.get(p)
    root_link = roots[0]
    world_root = root_link == WORLD_LINK
    _merge_massless_fixed_links(root, WORLD_LINK if world_root else None, probs)
    links, joints = root.findall("link"), root.findall("joint")
    names = [l.get("name") for l in links]
    if world_root and floating_base:
        probs.add(f"link {WORLD_LINK!r}", "floating_base does not apply: the root link is the world, so its joints "
                  "decide (a 'floating' joint from it makes a free base)")
    joint_of = {j.find("child").get("link"): j for j in joints}
    for j in joints:
        if j.get("type") == "floating" and j.find("parent").get("link") != WORLD_LINK:
            probs.add(f"joint {j.get('name')!r}", f"a floating joint must hang from the root link {WORLD_LINK!r} "
                      "(convexsim floats the root of a tree); for a robot whose root is a link, use floating_base "
                      "(--floating-base)")
    probs.raise_if_any()
    welded = {c for c, j in joint_of.items()
              if j.get("type") == "fixed" and j.find("parent").get("link") == WORLD_LINK}
    com_of: dict[str, np.ndarray] = {}
    bodies = []
    for l in links:
        n = l.get("name")
        where = f"link {n!r}"
        if n == WORLD_LINK and world_root:
            if l.findall("collision") or l.findall("visual"):
                probs.add(where, "the root link 'world' is the world and carries no geometry; put it on a link "
                          "attached to 'world' by a fixed joint")
            com_of[n] = np.zeros(3)
            continue
        inertial = l.find("inertial")
        com = np.zeros(3)
        mass, inertia = None, None
        if inertial is not None:
            com, R_I = _origin(inertial, where + " <inertial>", probs)
            m_el = inertial.find("mass")
            mass = _attr_float(m_el, "value", where + " <inertial> <mass>", probs, positive=True)
            i_el = inertial.find("inertia")
            if i_el is not None:
                vals = [_attr_float(i_el, k, where + " <inertial> <inertia>", probs, default=0.0)
                        for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")]
                I = np.array([[vals[0], vals[1], vals[2]], [vals[1], vals[3], vals[4]], [vals[2], vals[4], vals[5]]])
                inertia = (R_I @ I @ R_I.T).tolist()
        fixed_body = (n == root_link and not floating_base) or n in welded
        if fixed_body:
            com = np.zeros(3)
        com_of[n] = com
        geoms = []
        elems = l.findall("collision") or l.findall("visual")
        for k, el in enumerate(elems):
            g = _geometry(n, k, el, probs, com, path.resolve().parent, package_root)
            if g is not None:
                geoms.append(g)
        body: dict = {"name": n, "geometries": geoms}
        if fixed_body:
            body["fixed"] = True
            if n in welded:                                  # posed by its fixed joint from the world link
                pos, R = _origin(joint_of[n], f"joint {joint_of[n].get('name')!r}", probs)
                body["position"] = [float(x) for x in pos]
                body["quaternion"] = matrix_to_quaternion(R)
        else:
            if mass is None:
                probs.add(where + " <inertial>", "a moving link needs <inertial> with <mass value> > 0")
                continue
            body["mass"] = mass
            if inertia is None:
                probs.add(where + " <inertial>", "<inertia ixx ixy ixz iyy iyz izz> is required")
                continue
            body["inertia"] = inertia
        bodies.append(body)
    scene_joints = []
    constraints, motors = [], []
    if floating_base and not world_root:
        scene_joints.append(_floating_base_joint(root_link, com_of[root_link], jnames))
    for j in joints:
        n = j.get("name")
        where = f"joint {n!r}"
        t = j.get("type")
        parent, child = j.find("parent").get("link"), j.find("child").get("link")
        if child in welded:
            continue
        pos, R = _origin(j, where, probs)
        if t == "floating":
            scene_joints.append(_free_joint(n, child, pos, R, com_of[child]))
            continue
        mimic = _mimic(j, where, joints, probs)
        if mimic is not None:
            constraints.append(mimic)
        spec = {"name": n, "type": "revolute" if t == "continuous" else t,
                "parent": parent, "child": child,
                "position": [float(x) for x in pos - com_of.get(parent, np.zeros(3))],
                "quaternion": matrix_to_quaternion(R),
                "child_offset": [float(x) for x in com_of.get(child, np.zeros(3))]}
        if t != "fixed":
            ax = j.find("axis")
            axis = _floats(ax.get("xyz") if ax is not None else None, 3, where + " <axis>", "xyz", probs,
                           [1.0, 0.0, 0.0])
            if np.linalg.norm(axis) < 1e-9:
                probs.add(where + " <axis>", f"xyz must be a nonzero vector, got {ax.get('xyz')!r}")
            spec["axis"] = axis
            lim = j.find("limit")
            if t in ("revolute", "prismatic"):
                lo = _attr_float(lim, "lower", where + " <limit>", probs)
                hi = _attr_float(lim, "upper", where + " <limit>", probs)
                if lo is not None and hi is not None and lo > hi:
                    probs.add(where + " <limit>", f"lower {lo} > upper {hi}")
                if lo is not None:
                    spec["lower"] = lo
                if hi is not None:
                    spec["upper"] = hi
            dyn = j.find("dynamics")
            d = _attr_float(dyn, "damping", where + " <dynamics>", probs, default=0.0, nonneg=True)
            if d:
                spec["damping"] = d
            fr = _attr_float(dyn, "friction", where + " <dynamics>", probs, default=0.0, nonneg=True)
            if fr and t in ("revolute", "continuous", "prismatic"):
                spec["friction"] = fr
            if t in ("revolute", "continuous", "prismatic") and mimic is None:
                effort = _attr_float(lim, "effort", where + " <limit>", probs, default=0.0, nonneg=True)
                motors.append({"joint": n, **({"effort": effort} if effort else {})})
        scene_joints.append(spec)
    probs.raise_if_any()
    root_name = root.get("name") or path.stem
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in root_name) or "robot"
    scene = {"name": name, "description": f"imported from {path.name}", "bodies": bodies, "joints": scene_joints}
    if constraints:
        scene["constraints"] = constraints
    if motors:
        scene["motors"] = motors
    return scene


def matrix_to_rpy(R: np.ndarray) -> list[float]:
    """(roll, pitch, yaw) with R = Rz(yaw)·Ry(pitch)·Rx(roll) (the inverse of :func:`rpy_to_matrix`; at
    pitch = ±π/2 the roll is taken as 0)."""
    pitch = math.asin(max(-1.0, min(1.0, -R[2, 0])))
    if abs(R[2, 0]) < 1.0 - 1e-12:
        return [math.atan2(R[2, 1], R[2, 2]), pitch, math.atan2(R[1, 0], R[0, 0])]
    return [0.0, pitch, math.atan2(-R[0, 1], R[1, 1])]


def _set_origin(el, pos: np.ndarray, R: np.ndarray) -> None:
    """Replace the ``<origin>`` of an element by the pose (pos, R)."""
    for o in el.findall("origin"):
        el.remove(o)
    ET.SubElement(el, "origin", xyz=" ".join(repr(float(x)) for x in pos),
                  rpy=" ".join(repr(float(x)) for x in matrix_to_rpy(R)))


def _merge_massless_fixed_links(root, world: str | None, probs: _Problems) -> None:
    """Merge every link without ``<inertial>`` that hangs from its parent by a ``fixed`` joint (tool frames,
    finger pads, sensor mounts in published URDFs) into the parent: its collision and visual elements and
    the joints that hang from it move to the parent with their origins composed with the fixed joint's,
    T_P,x = T_P,C · T_C,x. Links welded to the ``world`` root link are left alone (they become fixed
    bodies)."""
    while True:
        links = {l.get("name"): l for l in root.findall("link")}
        for j in root.findall("joint"):
            child, parent = j.find("child").get("link"), j.find("parent").get("link")
            if j.get("type") == "fixed" and parent != world and links[child].find("inertial") is None:
                break
        else:
            return
        where = f"joint {j.get('name')!r}"
        p_j, R_j = _origin(j, where, probs)
        for el in [e for e in links[child] if e.tag in ("collision", "visual")]:
            p_e, R_e = _origin(el, f"link {child!r} <{el.tag}>", probs)
            _set_origin(el, p_j + R_j @ p_e, R_j @ R_e)
            links[parent].append(el)
        for k in root.findall("joint"):
            if k.find("parent").get("link") == child:
                p_k, R_k = _origin(k, f"joint {k.get('name')!r}", probs)
                _set_origin(k, p_j + R_j @ p_k, R_j @ R_k)
                k.find("parent").set("link", parent)
        root.remove(j)
        root.remove(links[child])


def _free_joint(name: str, child: str, pos: np.ndarray, R: np.ndarray, com: np.ndarray) -> dict:
    """A ``free`` joint from the world: the child's body frame (its COM, the link's axes) starts at
    p + R·com with orientation R, where (p, R) is the link frame's pose in the world."""
    p = pos + R @ com
    return {"name": name, "type": "free", "parent": "world", "child": child,
            "initial_position": [float(x) for x in p] + matrix_to_quaternion(R)}


def _floating_base_joint(root: str, com: np.ndarray, taken: list) -> dict:
    """The free joint of ``floating_base``: the root link frame at the world origin, a unique joint name."""
    name, k = "floating_base", 1
    while name in taken:
        name, k = f"floating_base_{k}", k + 1
    return _free_joint(name, root, np.zeros(3), np.eye(3), com)


def _mimic(j, where: str, joints, probs: _Problems) -> dict | None:
    """The coupler of ``<mimic joint multiplier offset>`` (q = multiplier·q_joint + offset), or None."""
    el = j.find("mimic")
    if el is None:
        return None
    where = where + " <mimic>"
    types = {k.get("name"): k.get("type") for k in joints}
    one_dof = ("revolute", "continuous", "prismatic")
    ref = el.get("joint")
    if types.get(j.get("name")) not in one_dof:
        probs.add(where, f"mimic applies to revolute, continuous and prismatic joints, not {j.get('type')!r}")
        return None
    if ref is None or ref not in types:
        probs.add(where, f"joint must name a joint of the robot, got {ref!r}")
        return None
    if ref == j.get("name") or types[ref] not in one_dof:
        probs.add(where, f"joint {ref!r} must be another revolute, continuous or prismatic joint")
        return None
    ratio = _attr_float(el, "multiplier", where, probs, default=1.0)
    offset = _attr_float(el, "offset", where, probs, default=0.0)
    return {"type": "coupler", "name": f"{j.get('name')}_mimic", "joint": j.get("name"), "reference": ref,
            "ratio": ratio, "offset": offset}


__all__ = ["MESH_SUFFIXES", "PLANAR_RECIPE", "UrdfError", "WORLD_LINK", "resolve_mesh_file", "rpy_to_matrix",
           "urdf_to_scene"]
