"""One way for tests to build a ``convexsim.model.Model`` by hand (without the scene package).

``build_model(nbody, ngeom, nmat, **fields)`` starts from neutral values for every field of the
dataclass, sized by the body, geometry and material counts, and replaces the fields given. The table
of neutral values must name exactly the fields of ``Model``: a field added to (or removed from) the
dataclass makes every hand-built model fail with the field's name, instead of silently taking the
dataclass default in some factories and breaking others.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from convexsim.model import ContactModel, GeomType, Model, SolverSettings


def moving_dofs(body_fixed: np.ndarray) -> np.ndarray:
    """``Model.body_dof`` for the given fixed flags: 6·(index among moving bodies), −1 when fixed."""
    fixed = np.asarray(body_fixed, bool)
    return np.where(fixed, -1, 6 * (np.cumsum(~fixed) - 1)).astype(np.int64)


def neutral_fields(nbody: int, ngeom: int, nmat: int) -> dict:
    """Neutral values of every Model field: unit bodies (1 kg, I = 1 kg·m²), all moving; spheres of
    radius 0 at the body origins on body 0; material 0 named 'default' with the scene defaults."""
    return dict(
        name="test",
        time_step=1e-3,
        duration=1.0,
        gravity=np.array([0.0, 0.0, -9.81]),
        contact_model=ContactModel.SAP,
        solver=SolverSettings(),
        body_names=tuple(f"b{i}" for i in range(nbody)),
        body_mass=np.ones(nbody),
        body_inertia=np.tile(np.eye(3), (nbody, 1, 1)),
        body_fixed=np.zeros(nbody, bool),
        body_dof=None,                               # derived from body_fixed unless given
        geom_body=np.zeros(ngeom, np.int64),
        geom_type=np.full(ngeom, int(GeomType.SPHERE), np.int64),
        geom_size=np.zeros((ngeom, 3)),
        geom_pos=np.zeros((ngeom, 3)),
        geom_quat=np.tile([1.0, 0.0, 0.0, 0.0], (ngeom, 1)),
        geom_material=np.zeros(ngeom, np.int64),
        geom_rbound=np.zeros(ngeom),
        geom_color=np.ones((ngeom, 4)),
        material_names=tuple(["default"] + [f"m{i}" for i in range(1, nmat)])[:nmat],
        material_friction=np.full(nmat, 0.5),
        material_stiffness=np.full(nmat, 1e6),
        material_dissipation_time=np.full(nmat, 0.1),
        material_hc_dissipation=np.full(nmat, 50.0),
        scene_yaml="",
        forest=None,                                 # no kinematic trees
        geom_mesh=np.full(ngeom, -1, np.int64),      # no meshes
        mesh_vert_adr=np.zeros(0, np.int64),
        mesh_vert_num=np.zeros(0, np.int64),
        mesh_vert=np.zeros((0, 3)),
        mesh_face_adr=np.zeros(0, np.int64),
        mesh_face_num=np.zeros(0, np.int64),
        collision_filter=None,
        mesh_face=np.zeros((0, 3), np.int64),
        body_kinematic=np.zeros(nbody, np.bool_),    # no kinematic bodies
    )


def build_model(nbody: int, ngeom: int = 0, nmat: int = 1, **fields) -> Model:
    """A Model of ``nbody`` bodies, ``ngeom`` geometries and ``nmat`` materials; ``fields`` replace the
    neutral values (see :func:`neutral_fields`). ``body_dof`` follows ``body_fixed`` unless given."""
    values = neutral_fields(nbody, ngeom, nmat)
    names = {f.name for f in dataclasses.fields(Model)}
    if set(values) != names:
        raise AssertionError("tests/model_builder.py is out of date with Model: fields without a neutral "
                             f"value {sorted(names - set(values))}, values of no field "
                             f"{sorted(set(values) - names)}")
    unknown = set(fields) - names
    if unknown:
        raise TypeError(f"Model has no field(s) {sorted(unknown)}")
    values.update(fields)
    if values["body_dof"] is None:
        values["body_dof"] = moving_dofs(values["body_fixed"])
    for name, count in (("body_", nbody), ("geom_", ngeom), ("material_", nmat)):
        for key, value in values.items():
            if key.startswith(name) and len(value) != count:
                raise ValueError(f"{key} has {len(value)} entries, expected {count}")
    return Model(**values)
