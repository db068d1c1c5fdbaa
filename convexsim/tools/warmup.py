"""``convexsim warmup``: compile (or load from the disk cache) every numba kernel a run may need, and write the
bytecode of convexsim's modules."""

from __future__ import annotations

import sys
import time as _time

from convexsim.simulate import prepare, run_model
from convexsim._kernel_clock import KernelClock

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
        {"name": "can", "mass": 0.5, "position": [1.5, 0.0, 0.0999],
         "geometries": [{"shape": "cylinder", "radius": 0.05, "length": 0.2}]},
        {"name": "hull_on_can", "mass": 0.2, "position": [1.5, 0.0, 0.2497],
         "geometries": [{"shape": "mesh", "vertices": [[x, y, z] for x in (-0.05, 0.05) for y in (-0.05, 0.05)
                                                        for z in (-0.05, 0.05)]}]},
    ],
}
"""Every pair of moving shapes (sphere, box, capsule, cylinder, mesh) and halfspace in contact at t = 0, so that a few
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
    from convexsim.stepping.lcp_problem import build_contact_lcp

    J = np.zeros((2, 3, 6))
    for c, y in enumerate((-0.1, 0.1)):
        J[c, :, :3] = np.eye(3)
        J[c, 0, 5], J[c, 1, 5] = -y, 0.0
    M, q, layout = build_contact_lcp(np.eye(6), np.array([0.0, 0.0, -0.01, 0.0, 0.0, 0.0]), J, np.zeros(2),
                                     np.full(2, 0.5), 8)
    for form in (M, scipy.sparse.csr_matrix(M)):
        crash_guess(form, q, layout.num_contacts, layout.num_directions)


def _warm_block_sparse() -> None:
    """The block-sparse Cholesky kernels (``sap.block_sparse``: the reference SAP path's factorization of
    large problems and ``convexsim bench``'s micro-benchmarks): a chain of three 2×2 blocks, analyzed,
    factored and solved."""
    import numpy as np

    from convexsim.sap import block_sparse as bs

    sizes = np.array([2, 2, 2])
    edges = np.array([[0, 1], [1, 2]])
    diag = np.tile(4.0 * np.eye(2).ravel(), 3)
    off = np.tile(0.5 * np.eye(2).ravel(), 2)
    sym = bs.analyze(sizes, edges)
    bs.solve(sym, bs.factor(sym, diag, off), np.ones(6))
    bs.to_dense(sizes, edges, diag, off)


def _warm_tableau() -> None:
    """The tableau Lemke kernel (``method="tableau"``, and the reference the revised kernel is tested
    against): one small LCP."""
    import numpy as np

    from convexsim.lcp.lemke import LemkeOptions, lemke

    lemke(np.array([[2.0, 1.0], [1.0, 2.0]]), np.array([-1.0, -1.0]), options=LemkeOptions(method="tableau"))


def _compile_for(kernel, *args) -> None:
    """Compile (or load from the disk cache) ``kernel`` for the numba types of ``args``, without running it:
    the types are all that matter, so the values may be empty arrays of the right dtype and dimension. Optional
    parameters after ``args`` are typed as left out (numba's ``Omitted(default)``), as the runs call them."""
    import inspect

    import numba

    params = list(inspect.signature(kernel.py_func).parameters.values())[len(args):]
    kernel.compile(tuple(numba.typeof(a) for a in args) + tuple(numba.types.Omitted(p.default) for p in params))


def _packed(scene: dict):
    """(model, state, packed model arrays) of a warm-up scene for the SAP solver."""
    from convexsim.stepping.packing import packed

    model, state, _ = prepare(scene, solver="sap")
    return model, state, packed(model).args(False)


def _leaf_collision(steps: int) -> None:
    """Collision: broad phase, the narrow phase of every shape pair, the pair-reach filter
    (``contacts.collide_and_filter``), for the argument types of every compiled step."""
    import numpy as np

    from convexsim.stepping.contacts import collide_and_filter

    from convexsim.stepping.packing import packed

    model, state, a = _packed(WARMUP_SCENE)
    q, v = np.ascontiguousarray(state.q), np.ascontiguousarray(state.v)
    _compile_for(collide_and_filter, a[0], a[3], a[4], a[8], a[9], a[10], a[11], a[12], a[13], a[14], q, v,
                 *packed(model).pair_rule)


def _pair_arrays():
    """Arguments of the types the narrow phase passes to a shape pair: position (3,), rotation (3, 3), size
    (3,), vertices (k, 3), margin, and the output rows φ (k,), points and normals (k, 3)."""
    import numpy as np

    p, R, size, verts = np.zeros(3), np.eye(3), np.full(3, 0.1), np.zeros((0, 3))
    return p, R, size, verts, 0.0, np.empty(8), np.empty((8, 3)), np.empty((8, 3))


def _leaf_convex(steps: int) -> None:
    """The convex-shape pairs (``geometry.convex`` through ``gjk``, ``epa`` and ``manifold``; cylinders and meshes)."""
    from convexsim.geometry.convex import convex_convex, halfspace_convex

    p, R, s, verts, margin, phi, point, normal = _pair_arrays()
    _compile_for(convex_convex, 3, p, R, s, verts, 3, p, R, s, verts, margin, phi, point, normal)
    _compile_for(halfspace_convex, p, R, 3, p, R, s, verts, margin, phi, point, normal)


def _leaf_boxes(steps: int) -> None:
    """The box pairs (``geometry.boxes``: box–box, capsule–box, sphere–box, halfspace–box)."""
    from convexsim.geometry.boxes import box_box, capsule_box, halfspace_box, sphere_box

    p, R, s, _, margin, phi, point, normal = _pair_arrays()
    _compile_for(box_box, p, R, s, p, R, s, margin, phi, point, normal)
    _compile_for(capsule_box, p, R, 0.1, 0.1, p, R, s, margin, phi, point, normal)
    _compile_for(sphere_box, p, 0.1, p, R, s, margin, phi, point, normal)
    _compile_for(halfspace_box, p, R, p, R, s, margin, phi, point, normal)


def _leaf_broadphase(steps: int) -> None:
    """Geometry poses, margin shares and the broad phase (``broadphase.sweep_and_prune_pairs``) for the
    argument types of every compiled step."""
    import numpy as np

    from convexsim.geometry.broadphase import sweep_and_prune_pairs
    from convexsim.geometry.transforms import geom_world_poses_kernel
    from convexsim.stepping.contacts import margin_shares

    _, state, a = _packed(WARMUP_SCENE)
    q, v = np.ascontiguousarray(state.q), np.ascontiguousarray(state.v)
    share = np.empty(a[3].shape[0])
    margin_shares(a[0], a[3], a[4], a[8], v, share)
    pos, rot = geom_world_poses_kernel(q, a[11], a[12], a[13])
    _compile_for(sweep_and_prune_pairs, a[9], a[10], a[11], a[3], pos, rot, np.zeros(a[9].shape[0]),
                 np.empty((4, 2), np.int64))


def _leaf_step_parts(steps: int) -> None:
    """The SAP step's stages besides collision and Newton that are kernels of their own
    (``sap_composition.step_prepare``'s callees: free motion, contact frames and Jacobian blocks, the Delassus
    estimate and the contacts' kernel parameters, the clique graph and its islands), for the argument types of
    the step. The stages' helpers inlined into the step (``inline="always"``) are not compiled here."""
    import numpy as np

    from convexsim.dynamics import contact_frame, free_motion_kernel, jacobian_block
    from convexsim.sap import blocks
    from convexsim.sap.newton import clique_graph, islands
    from convexsim.stepping.contacts import first_nonfinite_body
    from convexsim.stepping.sap_rows import contact_parameters

    _, state, a = _packed(WARMUP_SCENE)
    q, v = np.ascontiguousarray(state.q), np.ascontiguousarray(state.v)
    nmov = a[5].shape[0]
    first_nonfinite_body(q, v)
    free_motion_kernel(a[0], a[2], a[4], a[6], a[7], q, v, a[5], np.empty(36 * nmov), np.empty(6 * nmov))
    i1, f1, i2 = np.zeros(1, np.int64), np.zeros(1), np.zeros((1, 2), np.int64)
    R, x = np.eye(3), np.zeros(3)
    _compile_for(contact_frame, x, R)
    _compile_for(jacobian_block, R, x, q, 0, -1.0, f1, 0)
    _compile_for(blocks.delassus_estimate, i1, i1, i1, f1, i2, i2, f1, f1)
    _compile_for(contact_parameters, a[0], a[1], i2, f1, f1, f1, a[15], a[16], a[17], a[18])
    edges, _ = clique_graph(np.zeros((0, 2), np.int64))
    islands(0, edges)


def _leaf_newton(steps: int) -> None:
    """The SAP Newton loop (``sap.newton.newton_solve``: dense island factors, the supernodal factor, the
    line search, the constraint kernels) for the argument types of every compiled step."""
    import numpy as np

    from convexsim.sap.constraints import NPAR
    from convexsim.sap.newton import newton_solve, no_supernodal

    _, _, a = _packed(WARMUP_SCENE)
    i1, f1 = np.zeros(1, np.int64), np.zeros(1)
    i2, f2 = np.zeros((1, 2), np.int64), np.zeros((1, NPAR))
    sn, sn_edges = no_supernodal()
    _compile_for(newton_solve, a[0], a[1], i1, i1, i1, f1, f1, i2, i2, f1, i1, f2, f1, i2, i1, False, sn, sn_edges)


def _leaf_forest(steps: int) -> None:
    """The stages of the tree steps before the solve that are kernels of their own: forest kinematics, CRBA/RNEA
    free motion (``stepping.free_motion``, ``multibody.dynamics``), on the warm-up tree scene (the joint rows
    are inlined into the steps)."""
    import numpy as np

    from convexsim.multibody.dynamics import forest_free_motion
    from convexsim.stepping.packing import packed_forest
    from convexsim.stepping.free_motion import forest_kinematics, free_motion_stage

    model, state, a = _packed(WARMUP_TREE_SCENE)
    fa = packed_forest(model).fa
    tq, tv = np.ascontiguousarray(state.tree_q), np.ascontiguousarray(state.tree_v)
    R_WB, p_WB, _, S = forest_kinematics(fa, tq)
    nv = tv.shape[0]
    A, vs = np.empty((nv, nv)), np.empty(nv)
    dt = model.time_step
    forest_free_motion(fa[0], fa[1], fa[6], fa[7], S, R_WB, p_WB, fa[8], fa[9], fa[10], fa[11], fa[12], fa[13], tv, dt,
                       fa[14], fa[15], A, vs)
    q, v = np.ascontiguousarray(state.q), np.ascontiguousarray(state.v)
    free_motion_stage(a[0], a[2:], fa, q, v, tq, tv)


def _leaf_lemke(steps: int) -> None:
    """The Lemke kernels: the revised kernel (the LCP steps' solver), the tableau and sparse-LU kernels, the
    crash basis."""
    import numpy as np

    from convexsim.lcp.lemke import lemke

    lemke(np.array([[2.0, 1.0], [1.0, 2.0]]), np.array([-1.0, -1.0]))
    _warm_sparse_lemke()
    _warm_crash()
    _warm_tableau()


def _warm_sap_bodies(steps: int) -> None:
    """The compiled SAP step of free-body models: ``steps`` steps of :data:`WARMUP_SCENE` with contact
    models sap, lagged and similar in the compiled run loop, and one single compiled step."""
    from convexsim.stepping import step

    for model_name in ("sap", "lagged", "similar"):
        model, state, _ = prepare(WARMUP_SCENE, solver="sap", contact_model=model_name)
        run_model(model, state, duration=steps * model.time_step, path="compiled")
    step(model, state, path="compiled")


def _warm_sap_trees(steps: int) -> None:
    """The compiled SAP step of tree models: :data:`WARMUP_TREE_SCENE` in the run loop and one single step
    (the composition's tree variant: ``packing.step_arrays`` marks the model kind, and the step is compiled once
    per kind)."""
    from convexsim.stepping import step

    model, state, _ = prepare(WARMUP_TREE_SCENE, solver="sap")
    run_model(model, state, duration=steps * model.time_step)
    step(model, state, path="compiled")


def _warm_sap_large(steps: int, scene: dict = WARMUP_SCENE) -> None:
    """The SAP step of islands above the dense limit (``packing.ISLAND_MAX_DOFS``): the two kernel calls of
    ``compiled._two_call_step`` (``step_prepare``, a callee of the run kernel, already compiled with it; then
    ``step_finish`` with the supernodal factor, inlined in the run kernel, as an entry of its own) and the
    symbolic analysis (``sap.supernodal``), reached by lowering the limit to 0 for the steps of this job (the
    warm-up scene's contact islands are then "large"). Only models with more moving dofs than the limit can
    take this path (:func:`run_groups`). This group warms the free-body variant of the step; "sap-large-trees"
    the tree variant (:func:`_warm_sap_large_trees`).

    Why not inline ``step_prepare`` into the run kernel too (one entry less): measured, numba's typing and
    lowering of the one larger function cost more than the second LLVM pass it saves (the SAP group 206 s
    instead of 142 s wall, both at load ≈ 4)."""
    from convexsim.stepping import packing, step
    from convexsim.stepping.context import StepContext

    limit = packing.ISLAND_MAX_DOFS
    packing.ISLAND_MAX_DOFS = 0
    try:
        model, state, _ = prepare(scene, solver="sap")
        ctx = StepContext()
        for _ in range(max(2, steps)):
            state, _ = step(model, state, ctx, path="compiled")
    finally:
        packing.ISLAND_MAX_DOFS = limit


def _warm_sap_large_trees(steps: int) -> None:
    """The SAP step of islands above the dense limit for tree models (:func:`_warm_sap_large` on
    :data:`WARMUP_TREE_SCENE`: ``step_finish``'s tree variant as an entry of its own)."""
    _warm_sap_large(steps, WARMUP_TREE_SCENE)


def _warm_sap_reference(steps: int) -> None:
    """The kernels of the reference SAP paths (free bodies with each contact model, trees), the PD row kernels
    (controllers, tree gradients, robot fits) and the block-sparse Cholesky."""
    from convexsim.sap.joint_constraints import pd_row

    for model_name in ("sap", "lagged", "similar"):
        model, state, _ = prepare(WARMUP_SCENE, solver="sap", contact_model=model_name)
        run_model(model, state, duration=steps * model.time_step, path="reference")
    model, state, _ = prepare(WARMUP_TREE_SCENE, solver="sap")
    run_model(model, state, duration=steps * model.time_step, path="reference")
    pd_row(1e-3, 0.0, 0.1, 0.0, 0.0, 100.0, 10.0, 1.0, 1.0)
    _warm_block_sparse()


def _warm_lcp_bodies(steps: int) -> None:
    """The LCP stepper of free-body models: :data:`WARMUP_SCENE` on the compiled step and its reference."""
    model, state, _ = prepare(WARMUP_SCENE, solver="lcp", contact_model="sap")
    for path in ("compiled", "reference"):
        run_model(model, state, duration=steps * model.time_step, path=path)


def _warm_lcp_trees(steps: int) -> None:
    """The LCP stepper of tree models: :data:`WARMUP_TREE_SCENE` on the compiled step (the kernel's tree variant,
    ``lcp_composition.lcp_stages``) and its reference."""
    model, state, _ = prepare(WARMUP_TREE_SCENE, solver="lcp")
    for path in ("compiled", "reference"):
        run_model(model, state, duration=steps * model.time_step, path=path)


def _leaf_step_finish(steps: int) -> None:
    """The second half of the SAP step (``sap_composition.step_finish``: the Newton solve, impulses to
    forces, joint forces, integration) of free-body models as the two-call step of large islands calls it from
    Python (the run loop inlines it); it needs only the Newton loop, so it compiles beside the run kernel."""
    import numpy as np

    from convexsim.sap.newton import no_supernodal
    from convexsim.stepping import sap_composition as K
    from convexsim.stepping.packing import step_arrays

    model, state, a = _packed(WARMUP_SCENE)
    q, v = np.ascontiguousarray(state.q), np.ascontiguousarray(state.v)
    tq = np.zeros(0)
    prep = K.no_prepared(a[5].shape[0])                 # a prepared tuple: its types
    sn, sn_edges = no_supernodal()
    _compile_for(K.step_finish, a[0], a[1], step_arrays(model), q, v, tq, prep, q.copy(), v.copy(), tq.copy(),
                 tq.copy(), tq.copy(), tq.copy(), tq.copy(), False, sn, sn_edges)


LEAVES = {"convex": _leaf_convex, "boxes": _leaf_boxes, "broadphase": _leaf_broadphase,
          "collision": _leaf_collision, "newton": _leaf_newton, "step-parts": _leaf_step_parts, "forest": _leaf_forest, "lemke": _leaf_lemke,
          "step-finish": _leaf_step_finish}
"""The large kernels that several steps share, compiled first, in parallel processes: a step compiled
afterwards loads them from the disk cache instead of compiling them itself."""

GROUPS = {"sap-bodies": _warm_sap_bodies, "sap-trees": _warm_sap_trees, "sap-large": _warm_sap_large,
          "sap-large-trees": _warm_sap_large_trees, "lcp-bodies": _warm_lcp_bodies, "lcp-trees": _warm_lcp_trees,
          "sap-reference": _warm_sap_reference}
"""The warm-up's parts, by what a run needs (``convexsim run`` compiles only its own; ``convexsim warmup``
all)."""

NEEDS = {"collision": ("convex", "boxes", "broadphase"),
         "step-finish": ("newton",),
         "sap-bodies": ("collision", "newton", "step-parts"),
         "sap-trees": ("collision", "newton", "step-parts", "forest"),
         "sap-large": ("sap-bodies", "step-finish"), "sap-large-trees": ("sap-trees",),
         "lcp-bodies": ("collision", "lemke"), "lcp-trees": ("collision", "forest", "lemke"), "sap-reference": ()}
"""What each job calls that another job compiles (it starts when those have ended)."""

_JOBS = {**LEAVES, **GROUPS}
_ORDER = ("convex", "broadphase", "newton", "boxes", "forest", "collision", "step-parts", "sap-bodies", "lemke",
          "sap-trees", "lcp-bodies", "step-finish", "sap-large", "lcp-trees", "sap-large-trees", "sap-reference")
"""Which ready job a free worker takes first: the chain to the collision kernels first (the longest), the
short broad phase beside the convex pairs so that the boxes follow them on the same worker; then the steps a
newcomer runs after the demo first (``make demo``'s background warm-up: a robot, ``--solver both`` on free
bodies), the large-island steps and the reference paths last."""


PROGRESS_EVERY_S = 10.0
"""A compilation that is still running prints a progress line at least this often [s]."""


class _Progress:
    """Counts the convexsim kernels compiled in this process (numba's ``numba:compile`` events) and prints
    ``compiling kernels [label]: N compiled, T s`` to stderr every :data:`PROGRESS_EVERY_S` seconds from a
    background thread, so that a long compilation is never silent."""

    def __init__(self, label: str, enabled: bool):
        self.label, self.enabled = label, enabled
        self.compiled = 0
        self._stop = None

    def __enter__(self):
        import threading

        from numba.core import event

        progress = self

        class _Count(event.Listener):
            def on_start(self, ev):
                pass

            def on_end(self, ev):
                d = ev.data.get("dispatcher")
                if d is not None and getattr(d.py_func, "__module__", "").startswith("convexsim"):
                    progress.compiled += 1

        self._listener = _Count()
        event.register("numba:compile", self._listener)
        self._t0 = _time.perf_counter()
        if self.enabled:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._report, daemon=True)
            self._thread.start()
        return self

    def _report(self) -> None:
        while not self._stop.wait(PROGRESS_EVERY_S):
            if self.compiled:
                print(f"compiling kernels [{self.label}]: {self.compiled} compiled, "
                      f"{_time.perf_counter() - self._t0:.0f} s", file=sys.stderr, flush=True)

    def __exit__(self, *exc) -> None:
        from numba.core import event

        event.unregister("numba:compile", self._listener)
        if self._stop is not None:
            self._stop.set()
            self._thread.join()


def _run_job(name: str, steps: int, progress: bool) -> int:
    """One job of the warm-up (a leaf or a group) in this process; returns the convexsim kernels it compiled.
    A group that ends writes its marker (:func:`is_warm`)."""
    t0 = _time.perf_counter()
    with KernelClock(notice=False), _Progress(name, progress) as counter:
        _JOBS[name](steps)
    if progress and counter.compiled:
        print(f"compiled [{name}]: {counter.compiled} kernels in {_time.perf_counter() - t0:.0f} s", file=sys.stderr,
              flush=True)
    if name in GROUPS:
        _mark_warm(name)
    return counter.compiled


def _jobs_for(groups: list[str]) -> list[str]:
    """The jobs that warm up ``groups``: the groups and everything they need (:data:`NEEDS`), in
    :data:`_ORDER`."""
    todo, seen = list(groups), set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(NEEDS.get(name, ()))
    return [name for name in _ORDER if name in seen]


def _ready(waiting: list[str], done: set, planned: list[str], fillers: tuple[str, ...] = ()) -> list[str]:
    """The jobs of ``waiting`` whose needs (:data:`NEEDS`) have ended, in ``waiting``'s order; a job of
    ``fillers`` only when no other job is ready (it takes a worker the plan would leave idle)."""
    ready = [n for n in waiting if all(d in done or d not in planned for d in NEEDS.get(n, ()))]
    required = [n for n in ready if n not in fillers]
    return required or ready


def _run_jobs(names: list[str], steps: int, progress: bool, jobs: int, fillers: tuple[str, ...] = ()) -> int:
    """Run the jobs ``names`` (in :data:`_ORDER`), each once all it needs (:data:`NEEDS`) has ended, in at most
    ``jobs`` worker processes (this process if ``jobs`` is 1); returns the kernels compiled. The workers share
    NUMBA_CACHE_DIR (numba's cache writes are atomic renames, safe across processes). A job whose worker
    fails is run again here, so that its error, if real, surfaces in this process. ``fillers``: jobs of
    ``names`` started only on a worker that has nothing else to do (:func:`_ready`), and dropped if none ever
    has: a later path's kernels compiled in time the plan would leave idle."""
    if jobs <= 1 or len(names) <= 1:
        return sum(_run_job(name, steps, progress) for name in names if name not in fillers)
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    compiled, done, failed, running = 0, set(), [], {}
    waiting = list(names)
    with ProcessPoolExecutor(max_workers=min(jobs, len(names)),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        while waiting or running:
            if not any(n not in fillers for n in waiting) and not any(n not in fillers for n in running.values()):
                waiting = []                     # only fillers left, none started: the plan is done
            for name in _ready(waiting, done, names, fillers):
                if len(running) < jobs:
                    waiting.remove(name)
                    running[pool.submit(_run_job, name, steps, progress)] = name
            if not running:
                if not waiting:
                    break
                raise RuntimeError(f"warm-up jobs {waiting} wait for each other")   # an acyclic NEEDS never does
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                name = running.pop(future)
                done.add(name)
                try:
                    compiled += future.result()
                except Exception:  # noqa: BLE001 - rerun below, in this process, where the error is raised
                    failed.append(name)
    for name in failed:
        compiled += _run_job(name, steps, progress)
    return compiled


def warm_up(*, steps: int = 3, progress: bool = True, jobs: int | None = None,
            groups: list[str] | tuple[str, ...] | None = None, fillers: tuple[str, ...] = ()) -> float:
    """Compile (or load from the disk cache) the kernels of the warm-up ``groups`` (default: all of
    :data:`GROUPS`) and of the shared kernels they need (:data:`LEAVES`, :data:`NEEDS`), in ``jobs`` worker
    processes (default: one per core), each job once what it needs has ended; and write the modules'
    bytecode (:func:`write_bytecode`). Returns the wall time [s]. With ``progress`` a line on stderr at least
    every :data:`PROGRESS_EVERY_S` s while kernels compile. ``fillers``: leaves compiled only on a worker the
    groups' plan leaves idle (:func:`_run_jobs`).

    Why so: numba compiles one kernel at a time per process, and every kernel compiled on its own carries
    the machine code of its callees. The shared kernels compiled first, in parallel, are then loaded from the
    disk cache by the steps that call them, which compile in parallel in turn."""
    import os

    t0 = _time.perf_counter()
    write_bytecode()
    unknown = sorted(set(groups or ()) - set(GROUPS))
    if unknown:
        from convexsim.errors import InputError

        raise InputError(f"unknown warm-up group(s) {unknown}; known: {sorted(GROUPS)}")
    names = _jobs_for(list(GROUPS) if groups is None else list(groups))
    fillers = tuple(f for f in fillers if f in LEAVES and f not in names)
    names = [name for name in _ORDER if name in names or name in fillers]
    jobs = (os.cpu_count() or 1) if jobs is None else max(1, int(jobs))
    _run_jobs(names, steps, progress, jobs, fillers)
    return _time.perf_counter() - t0


def _marker(group: str):
    """The file that says the kernels of ``group`` are in the disk cache for these sources and this CPU:
    ``convexsim-warm-<group>-<key>`` in numba's cache directory (NUMBA_CACHE_DIR, else the package's
    ``__pycache__``), the key a hash of the kernel sources' fingerprint and numba's target CPU and features."""
    import hashlib

    import numba
    from llvmlite import binding as ll

    from convexsim._jit import kernel_sources_fingerprint

    cpu = numba.config.CPU_NAME or ll.get_host_cpu_name()
    features = numba.config.CPU_FEATURES or ll.get_host_cpu_features().flatten()
    key = hashlib.sha256(f"{kernel_sources_fingerprint()}|{cpu}|{features}|{numba.__version__}".encode())
    return cache_root() / f"convexsim-warm-{group}-{key.hexdigest()[:16]}"


def cache_root():
    """numba's cache directory for convexsim's kernels: NUMBA_CACHE_DIR, else the package's ``__pycache__``."""
    from pathlib import Path

    import numba

    import convexsim

    return (Path(numba.config.CACHE_DIR) if numba.config.CACHE_DIR
            else Path(convexsim.__file__).resolve().parent / "__pycache__")


def _mark_warm(group: str) -> None:
    """Write the marker of ``group`` (best effort: a read-only cache only costs the check next time)."""
    try:
        path = _marker(group)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:
        pass


def is_warm(group: str) -> bool:
    """Whether the warm-up of ``group`` ended in this cache for these sources and this CPU (its marker). A
    marker without its kernels (a cache emptied by hand) only means the run compiles them itself."""
    try:
        return _marker(group).exists()
    except OSError:
        return False


def run_group(model, solver: str) -> str:
    """The warm-up group whose kernels a compiled run of ``model`` with ``solver`` ("sap" or "lcp") uses."""
    return f"{solver}-{'trees' if model.has_trees else 'bodies'}"


def run_groups(model, solver: str) -> list[str]:
    """The warm-up groups a compiled run of ``model`` with ``solver`` may need: :func:`run_group`, and for SAP
    "sap-large" (the supernodal step of islands above the dense limit) when the model has more moving dofs than
    ``packing.ISLAND_MAX_DOFS``, so that one of its islands can be that large."""
    groups = [run_group(model, solver)]
    if solver == "sap":
        import numpy as np

        from convexsim.stepping import packing

        dofs = 6 * int(np.count_nonzero(np.asarray(model.body_dof) >= 0))
        dofs += model.forest.nv if model.forest is not None else 0
        if dofs > packing.ISLAND_MAX_DOFS:
            groups.append("sap-large-trees" if model.has_trees else "sap-large")
    return groups


FILLERS = {"sap-bodies": ("forest",)}
"""Leaves a group's first run compiles on a worker its own plan leaves idle (``make demo``: while one process
compiles the free-body step, the other compiles the trees' kinematics and dynamics, so that a robot run after the
demo waits only for its step)."""


def ensure_warm(model, solver: str, *, jobs: int | None = None) -> float | None:
    """Before a run: when the kernels of its groups (:func:`run_groups`) are not in the disk cache yet, compile
    them now with :func:`warm_up` in parallel processes, saying so on stderr with the time it took. Returns
    that time [s], or None when they were already there (or NUMBA_DISABLE_JIT is set)."""
    import numba

    if numba.config.DISABLE_JIT:
        return None
    groups = [g for g in run_groups(model, solver) if not is_warm(g)]
    if not groups:
        return None
    print(f"compiling the kernels of the compiled {solver.upper()} step for "
          f"{'kinematic trees' if model.has_trees else 'free bodies'} (first run; cached for later runs)…",
          file=sys.stderr, flush=True)
    fillers = tuple(f for g in groups for f in FILLERS.get(g, ()))
    seconds = warm_up(groups=groups, jobs=jobs, fillers=fillers)
    print(f"compiled in {seconds:.1f} s", file=sys.stderr, flush=True)
    return seconds


CHECK_STEPS = 3
"""Steps of each shipped scene that :func:`kernels_compiled_by_shipped_scenes` runs: enough to reach every
kernel of the scene's first contact (every shipped scene starts at or near it)."""


class _CompileLog:
    """Records the convexsim kernels numba compiles (not loads from the cache) while active."""

    def __init__(self):
        self.names: list[str] = []

    def __enter__(self):
        from numba.core import event

        log = self

        class _Listen(event.Listener):
            def on_start(self, ev):
                pass

            def on_end(self, ev):
                fn = getattr(ev.data.get("dispatcher"), "py_func", None)
                if fn is not None and getattr(fn, "__module__", "").startswith("convexsim"):
                    log.names.append(f"{fn.__module__}.{fn.__qualname__}")

        self._listener = _Listen()
        event.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc) -> None:
        from numba.core import event

        event.unregister("numba:compile", self._listener)


def kernels_compiled_by_shipped_scenes(solvers: tuple[str, ...] = ("sap", "lcp"), *,
                                       steps: int = CHECK_STEPS) -> dict[str, list[str]]:
    """Run every shipped scene (``scenes/*.yaml``) for ``steps`` steps with each of ``solvers`` (the
    compiled run loop, as ``convexsim run`` does) and return ``{"scene/solver": [kernels compiled]}`` for the
    runs that compiled a convexsim kernel. After :func:`warm_up` it should be empty: a kernel listed here
    is one the warm-up misses, and a user would wait for it in the middle of a run."""
    from convexsim.scene import list_scenes

    missed: dict[str, list[str]] = {}
    for name, _, path in list_scenes():
        for solver in solvers:
            model, state, _ = prepare(path, solver=solver)
            with _CompileLog() as log:
                run_model(model, state, duration=steps * model.time_step)
            if log.names:
                missed[f"{name}/{solver}"] = sorted(set(log.names))
    return missed


def check_shipped_scenes() -> int:
    """``convexsim warmup --check``: :func:`kernels_compiled_by_shipped_scenes` in this (fresh) process;
    prints the verdict and returns 0 when no shipped scene compiled anything, 1 otherwise (the kernels the
    warm-up misses, scene by scene)."""
    from convexsim.scene import list_scenes

    t0 = _time.perf_counter()
    missed = kernels_compiled_by_shipped_scenes()
    n = len(list_scenes())
    if not missed:
        print(f"warmup check: all {n} shipped scenes ran {CHECK_STEPS} steps with SAP and with the LCP stepper "
              f"without compiling a kernel ({_time.perf_counter() - t0:.1f} s)")
        return 0
    print(f"warmup check: {len(missed)} of {2 * n} shipped-scene runs compiled kernels the warm-up misses "
          "(add them to convexsim/tools/warmup.py):", file=sys.stderr)
    for run, names in missed.items():
        print(f"  {run}: {', '.join(names)}", file=sys.stderr)
    return 1


def _main(argv=None) -> int:
    """``python -m convexsim.tools.warmup --job NAME``: one job of the warm-up in this process."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m convexsim.tools.warmup")
    parser.add_argument("--job", choices=sorted(_JOBS), required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    _run_job(args.job, args.steps, not args.quiet)
    return 0


__all__ = ["warm_up", "ensure_warm", "FILLERS", "is_warm", "cache_root", "run_group", "run_groups", "LEAVES", "NEEDS", "write_bytecode", "kernels_compiled_by_shipped_scenes", "check_shipped_scenes", "GROUPS", "WARMUP_SCENE",
           "WARMUP_TREE_SCENE"]


if __name__ == "__main__":
    raise SystemExit(_main())
