"""``convexsim warmup``: compile (or load from the disk cache) every numba kernel a run may need, and write the
bytecode of convexsim's modules."""

from __future__ import annotations

import time as _time

from convexsim.kernels import KernelClock
from convexsim.simulate import prepare, run_model

WARMUP_SCENE = {
    "name": "warmup",
    "time_step": 1.0e-3,
    "materials": {"soft": {"stiffness": 1.0e5}},
    "bodies": [
        {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace"}]},
        {"name": "ball", "mass": 0.5, "position": [0.0, 0.0, 0.0999],
         "geometries": [{"shape": "sphere", "radius": 0.1}]},
        {"name": "ball2", "mass": 0.5, "position": [0.0, 0.0, 0.2997],
         "geometries": [{"shape": "sphere", "radius": 0.1, "material": "soft"}]},
        {"name": "box", "mass": 1.0, "position": [0.5, 0.0, 0.0999],
         "geometries": [{"shape": "box", "size": [0.2, 0.2, 0.2]}]},
        {"name": "box2", "mass": 1.0, "position": [0.5, 0.0, 0.2997],
         "geometries": [{"shape": "box", "size": [0.2, 0.2, 0.2]}]},
        {"name": "rod", "mass": 0.5, "position": [1.0, 0.0, 0.0499],
         "quaternion": [0.7071067811865476, 0.7071067811865476, 0, 0],
         "geometries": [{"shape": "capsule", "radius": 0.05, "length": 0.3}]},
        {"name": "rod_on_box", "mass": 0.5, "position": [0.5, 0.0, 0.4496],
         "quaternion": [0.7071067811865476, 0.7071067811865476, 0, 0],
         "geometries": [{"shape": "capsule", "radius": 0.05, "length": 0.1}]},
        {"name": "ball_on_rod", "mass": 0.2, "position": [1.0, -0.1, 0.1497],
         "geometries": [{"shape": "sphere", "radius": 0.05}]},
        {"name": "rod_on_rod", "mass": 0.5, "position": [1.0, 0.1, 0.1497],
         "quaternion": [0.7071067811865476, 0, 0.7071067811865476, 0],
         "geometries": [{"shape": "capsule", "radius": 0.05, "length": 0.1}]},
        {"name": "ball_on_box", "mass": 0.2, "position": [0.6499, 0.0, 0.3],
         "geometries": [{"shape": "sphere", "radius": 0.05}]},
    ],
}
"""Every pair of moving shapes (sphere, box, capsule) and halfspace in contact at t = 0, so that a few
steps reach the collision, SAP and LCP kernels of every shipped scene."""

WARMUP_TREE_SCENE = {
    "name": "warmup_tree",
    "time_step": 1.0e-3,
    "bodies": [
        {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace"}]},
        {"name": "bob", "mass": 1.0, "geometries": [{"shape": "sphere", "radius": 0.1}]},
        {"name": "slider", "mass": 0.5, "geometries": [{"shape": "box", "size": [0.2, 0.2, 0.2]}]},
    ],
    "joints": [
        {"name": "hinge", "type": "revolute", "child": "bob", "axis": [0, 1, 0], "position": [0, 0, 1.0999],
         "child_offset": [0, 0, -1.0], "lower": 0.0, "upper": 0.5},
        {"name": "slide", "type": "prismatic", "child": "slider", "axis": [1, 0, 0], "position": [0.5, 0, 0.0999],
         "lower": 0.0, "upper": 0.1},
    ],
}
"""Two one-joint trees (revolute, prismatic; each at a joint limit and touching the ground at t = 0), so that
a few steps reach the kinematics, dynamics and joint-limit kernels of the articulated scenes (double_pendulum,
gripper_lift, iiwa_push...)."""


def write_bytecode() -> bool:
    """Write the bytecode cache (``__pycache__``) of convexsim's modules where it is missing or stale, so that
    later processes do not compile their source: Python skips writing it on import when
    ``PYTHONDONTWRITEBYTECODE`` is set, and compiling the ~50 modules of a run from source costs a few tenths of
    a second every time.
    Best effort (False when some file could not be written, e.g. a read-only install)."""
    import compileall
    from pathlib import Path

    import convexsim

    try:
        return bool(compileall.compile_dir(Path(convexsim.__file__).resolve().parent, quiet=2))
    except OSError:
        return False


def _warm_sparse_lemke() -> None:
    """The sparse-LU Lemke kernels (``method="auto"`` takes them for large sparse islands, which the warm-up
    scenes do not have): one small LCP solved with ``method="sparse"``, cold and from a basis."""
    import numpy as np

    from convexsim.lcp.lemke import LemkeOptions, lemke, lemke_from_basis

    n = 6
    M = 2.0 * np.eye(n) + np.diag(np.full(n - 1, -0.5), 1) + np.diag(np.full(n - 1, -0.5), -1)
    q = np.linspace(-1.0, 1.0, n)
    opts = LemkeOptions(method="sparse")
    lemke(M, q, options=opts)
    lemke_from_basis(M, q, np.arange(n) < n // 2, options=opts)    # basic: a mask of the guessed basic z's


def _warm_crash() -> None:
    """The crash-basis kernels (``lcp.crash``; the LCP stepper's cold start on islands of ≥ 600 unknowns, which
    the warm-up scenes do not have): the guess for a block resting on the ground at two points, dense and CSR."""
    import numpy as np
    import scipy.sparse

    from convexsim.lcp.crash import crash_guess
    from convexsim.stepping.lcp_stepper import build_contact_lcp

    J = np.zeros((2, 3, 6))
    for c, y in enumerate((-0.1, 0.1)):
        J[c, :, :3] = np.eye(3)
        J[c, 0, 5], J[c, 1, 5] = -y, 0.0
    M, q, layout = build_contact_lcp(np.eye(6), np.array([0.0, 0.0, -0.01, 0.0, 0.0, 0.0]), J, np.zeros(2),
                                     np.full(2, 0.5), 8)
    for form in (M, scipy.sparse.csr_matrix(M)):
        crash_guess(form, q, layout.num_contacts, layout.num_directions)


def warm_up(*, steps: int = 3, progress: bool = True) -> float:
    """Compile (or load from the disk cache) the kernels a run needs: ``steps`` steps of
    :data:`WARMUP_SCENE` with SAP (contact models sap, lagged, similar; both the compiled run loop and the
    reference Python path, and the compiled single step of ``stepping.step``) and LCP (compiled and reference
    paths), then of :data:`WARMUP_TREE_SCENE` with SAP (the compiled tree run loop and single step, and the reference
    articulated step) and LCP; and write the modules'
    bytecode (:func:`write_bytecode`). Returns the wall time [s]; with ``progress`` the first-run notice is
    printed when there is anything to compile."""
    from convexsim.stepping import step

    t0 = _time.perf_counter()
    write_bytecode()
    with KernelClock(notice=progress):
        for solver, model_name in (("sap", "sap"), ("sap", "lagged"), ("sap", "similar"), ("lcp", "sap")):
            model, state, _ = prepare(WARMUP_SCENE, solver=solver, contact_model=model_name)
            paths = ("compiled", "reference")       # LCP too: the compiled LCP step and its reference
            for path in paths:
                run_model(model, state, duration=steps * model.time_step, path=path)
            if solver == "sap":
                step(model, state, path="compiled")
        for solver in ("sap", "lcp"):
            model, state, _ = prepare(WARMUP_TREE_SCENE, solver=solver)
            run_model(model, state, duration=steps * model.time_step)
            if solver == "sap":       # the reference (articulated) step and the compiled single tree step
                run_model(model, state, duration=steps * model.time_step, path="reference")
                step(model, state, path="compiled")
        _warm_sparse_lemke()
        _warm_crash()
    return _time.perf_counter() - t0


__all__ = ["warm_up", "write_bytecode", "WARMUP_SCENE", "WARMUP_TREE_SCENE"]
