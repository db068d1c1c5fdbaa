"""Stage: packing. The model as the flat arrays the compiled stages take (built once per model and kept
while the model lives), the settings slots, and the eligibility checks that say why a model cannot take a
compiled step (``stepping.dispatch`` asks them, once per model).

* settings: :func:`sap_parameters` (the SAP settings of a step, read by the reference and the compiled
  step), the SAP step's ``fpar`` / ``ipar`` (slots F_* / I_* of its Newton loop, ``sap.newton``), the LCP
  steps' ``lpar`` (Lemke's tolerances) and ``jpar`` (integer settings), whose slots L_* / J_* are in
  ``status`` (a file without imports: the kernels that read them do not depend on this module);
* arrays: :class:`PackedModel` (bodies, geometries, materials per geometry; :func:`packed`),
  :class:`PackedForest` (the trees in one parents-first list and their joint rows; :func:`packed_forest`),
  :class:`LcpPacked` (the LCP settings; :func:`lcp_packed`);
* eligibility: :func:`compiled_step_supported` (SAP, free bodies and trees), :func:`lcp_compiled_supported`
  (LCP, free bodies), :func:`lcp_tree_supported` (LCP, trees), and their per-model caches
  (``*_supported_cached``), with the layout checks they share (:func:`free_body_layout_problem`,
  :func:`tree_layout_problem`).
"""

from __future__ import annotations

import math
import weakref

import numpy as np

from convexsim import sap
from convexsim.geometry.collide import geometry_table, pair_rule_of
from convexsim.model import ContactModel, GeomType, Model, State
from convexsim.sap import newton as N
from convexsim.stepping.contacts import MARGIN_FLOOR, geom_sweep_radius
from convexsim.stepping.status import (J_DENSE_WORK, J_HARRIS, J_LU_MAX, J_MAX_PIVOTS, J_NDIR, J_REFACTOR,
                                       J_WARM_MIN, L_CHECK_TOL, L_HARRIS_RATIO, L_HARRIS_TOL, L_LEX_ABS_TOL,
                                       L_LEX_REL_TOL, L_PIVOT_TOL, L_RATIO_REL_TOL, L_RHS_TOL, NJPAR, NLPAR)

def sap_parameters(model: Model) -> sap.SapParameters:
    """The SapParameters of a step of ``model`` (its solver settings; the rest SapParameters' defaults).
    Both the reference and the compiled step read every setting from here."""
    s = model.solver
    return sap.SapParameters(rel_tolerance=s.rel_tolerance, abs_tolerance=s.abs_tolerance,
                             max_iterations=s.max_iterations, line_search=s.line_search,
                             slip_curvature=s.slip_curvature)


ISLAND_MAX_DOFS = 120
"""Largest island (dofs) the compiled step factors with a dense Cholesky; larger ones take the reference
step. 120 dofs = 20 free bodies: a dense factor of that size costs about as much as the reference
step's orchestration (docs/performance.md)."""


SUPPORTED_SHAPES = (GeomType.SPHERE, GeomType.BOX, GeomType.CAPSULE, GeomType.HALFSPACE, GeomType.CYLINDER,
                    GeomType.MESH)


def free_body_layout_problem(model: Model, links_allowed: bool = False) -> str:
    """Why the compiled kernels cannot take ``model``'s bodies and shapes ("" if they can): every shape
    among sphere, box, capsule, halfspace, cylinder, mesh; every body free (6 dofs, in body order) or fixed (or, with
    ``links_allowed``, a link of a kinematic tree). Shared by the compiled SAP and LCP steps."""
    bad = sorted({int(t) for t in np.asarray(model.geom_type)} - {int(s) for s in SUPPORTED_SHAPES})
    if bad:
        return f"geometry type(s) {bad} not supported (sphere, box, capsule, halfspace, cylinder, mesh)"
    fixed = np.asarray(model.body_fixed, dtype=bool)
    dof = np.asarray(model.body_dof)
    if links_allowed and model.forest is not None:
        fixed = fixed.copy()
        for t in model.forest.trees:
            fixed[t.bodies] = True                # links: neither free nor fixed, their rows come from FK
        if np.any(dof[np.asarray(model.body_fixed, dtype=bool)] != -1):
            return "a fixed body has dofs"
        moving = np.flatnonzero(~fixed)
        if not np.array_equal(dof[moving], 6 * np.arange(moving.size)):
            return "bodies are not all free (6 dofs each, in body order), fixed or links"
        return ""
    moving = np.flatnonzero(~fixed)
    if np.any(dof[fixed] != -1) or not np.array_equal(dof[moving], 6 * np.arange(moving.size)):
        return "bodies are not all free (6 dofs each, in body order) or fixed"
    return ""


def tree_layout_problem(model: Model) -> str:
    """Why the compiled SAP step (``compiled``) cannot take ``model``'s trees ("" if it can): cone
    limits, welds and distances, joint rows on joints with more than one dof, a tree's gravity other than
    the model's are refused."""
    from convexsim.multibody.forest import JointCoupler
    from convexsim.multibody.model import JointType
    from convexsim.multibody.model import ConeLimit

    one_dof = (int(JointType.REVOLUTE), int(JointType.PRISMATIC))
    forest = model.forest
    if forest is None:
        return ""
    for c in forest.constraints:
        if not isinstance(c, JointCoupler):
            return (f"constraint {c.name!r}: welds and distances between bodies are not in the compiled step "
                    "(joint couplers are)")
        for name in (c.joint, c.reference):
            k, j = forest.joint_index[name]
            if int(forest.trees[k].model.joint_type[j]) not in one_dof:
                return f"coupler {c.name!r}: joint {name!r} is not a 1-dof joint"
    g = np.asarray(model.gravity, dtype=float)
    for t in forest.trees:
        m = t.model
        if not np.array_equal(np.asarray(m.gravity, dtype=float), g):
            return f"tree {t.joint_names[0]!r}: its gravity differs from the model's"
        for lim in t.limits:
            if isinstance(lim, ConeLimit):
                return f"joint {t.joint_names[lim.joint]!r}: cone limits are not in the compiled step"
            if int(m.joint_type[lim.joint]) not in one_dof:
                return f"joint {t.joint_names[lim.joint]!r}: a limit on a joint with more than one dof"
            if not lim.lower <= lim.upper:
                return f"joint {t.joint_names[lim.joint]!r}: lower limit above the upper"
        for a in t.actuators:
            if int(m.joint_type[a.joint]) not in one_dof:
                return f"actuator {a.name!r}: not on a 1-dof joint"
            if not (a.effort > 0 and a.kp >= 0 and a.kd >= 0 and a.kp + a.kd > 0 and math.isfinite(a.kp)
                    and math.isfinite(a.kd)):
                return f"actuator {a.name!r}: gains or effort out of range"
        for cp in t.couplers:
            for j in (cp.joint_i, cp.joint_j):
                if int(m.joint_type[j]) not in one_dof:
                    return f"coupler on joint {t.joint_names[j]!r}: not a 1-dof joint"
    return ""


def compiled_step_supported(model: Model) -> tuple[bool, str]:
    """(True, "") when the compiled step can advance ``model``, else (False, the reason).

    Conditions: the SAP solver (not LCP); every body free (6 dofs), fixed or a link of a kinematic tree
    whose joints, limits, actuators and couplers ``tree_layout_problem`` accepts (no cone
    limits, no body constraints); geometry shapes among sphere, box, capsule, halfspace, cylinder, mesh; contact model
    sap, lagged or similar; every material with stiffness > 0, friction >= 0, dissipation >= 0 (the
    reference path rejects others when it builds the problem). Both step by ``compiled.compiled_step``
    (a free-body model as a forest of zero trees)."""
    if model.solver.kind != "sap":
        return False, f"solver.kind is {model.solver.kind!r}; the compiled step is the SAP step"
    if model.has_trees:
        why = tree_layout_problem(model)
        if why:
            return False, why
    try:
        cm = ContactModel(model.contact_model)
    except ValueError:
        return False, f"contact model {model.contact_model!r} is not one of sap, lagged, similar"
    if cm != ContactModel.SAP and model.kinematic_bodies.size:
        return False, "kinematic bodies need the 'sap' contact model (the reference step says why)"
    layout = free_body_layout_problem(model, links_allowed=model.has_trees)
    if layout:
        return False, layout
    for name, arr, positive in (("stiffness", model.material_stiffness, True),
                                ("friction", model.material_friction, False),
                                ("dissipation_time", model.material_dissipation_time, False),
                                ("hc_dissipation", model.material_hc_dissipation, False)):
        a = np.asarray(arr, dtype=float)
        ok = np.isfinite(a) & ((a > 0) if positive else (a >= 0))
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            return False, f"material {model.material_names[i]!r}: {name} = {float(a[i])!r} is out of range"
    return True, ""


class PackedModel:
    """The model as the flat arrays the kernels take (built once per model, :func:`packed`)."""

    def __init__(self, model: Model, strict: bool = False):
        prm = sap_parameters(model)
        s = model.solver
        fpar = np.zeros(N.NFPAR)
        fpar[N.F_DT] = model.time_step
        fpar[N.F_GNORM] = float(np.linalg.norm(model.gravity))
        fpar[N.F_SIGMA] = s.sigma
        fpar[N.F_BETA] = s.beta
        fpar[N.F_VS] = s.stiction_tolerance
        fpar[N.F_REL_TOL] = prm.rel_tolerance
        fpar[N.F_ABS_TOL] = prm.abs_tolerance
        fpar[N.F_COST_ABS_TOL] = prm.cost_abs_tolerance
        fpar[N.F_COST_REL_TOL] = prm.cost_rel_tolerance
        fpar[N.F_EXACT_ALPHA_MAX] = prm.exact_alpha_max
        fpar[N.F_ARMIJO] = prm.armijo
        fpar[N.F_RHO] = prm.rho
        fpar[N.F_RELATIVE_SLOP] = prm.relative_slop
        fpar[N.F_MARGIN_FLOOR] = MARGIN_FLOOR
        fpar[N.F_SLIP_CURVATURE] = prm.slip_curvature
        fpar[N.F_SLIP_CURVATURE_RESIDUAL] = prm.slip_curvature_residual
        ipar = np.zeros(N.NIPAR, np.int64)
        ipar[N.I_CONTACT_KIND] = int(ContactModel(model.contact_model))
        ipar[N.I_MAX_ITERATIONS] = prm.max_iterations
        ipar[N.I_LINE_SEARCH] = 0 if prm.line_search == "exact" else 1
        ipar[N.I_EXACT_MAX_ITERATIONS] = prm.exact_max_iterations
        ipar[N.I_BACKTRACKING_MAX_ITERATIONS] = prm.backtracking_max_iterations
        ipar[N.I_ISLAND_MAX_DOFS] = ISLAND_MAX_DOFS
        ipar[N.I_STRICT] = int(bool(strict))
        ipar[N.I_STICTION_PREDICTION] = int(bool(prm.stiction_prediction))
        self.fpar, self.ipar = fpar, ipar
        fixed = np.ascontiguousarray(model.body_fixed, dtype=np.bool_)
        geom_body = np.ascontiguousarray(model.geom_body, dtype=np.int64)
        rho = np.ascontiguousarray(geom_sweep_radius(model), dtype=float)
        rb = np.zeros(model.nbody)
        finite = np.isfinite(rho)
        np.maximum.at(rb, geom_body[finite], rho[finite])
        mat = np.asarray(model.geom_material, dtype=np.int64)
        f = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
        self.kinematic = np.zeros(model.nbody, np.bool_)
        """(nbody,) True for the kinematic bodies (``Model.body_kinematic``; all False when there are none)."""
        self.kinematic[model.kinematic_bodies] = True
        self.pair_rule = pair_rule_of(model)
        """(collision bits (ngeom, 2), (body_tree, body_moves, tree_base)): the broad phase's pair rule."""
        self.model_arrays = (
            f(model.gravity), fixed, np.ascontiguousarray(model.body_dof, dtype=np.int64),
            np.flatnonzero(np.asarray(model.body_dof) >= 0).astype(np.int64), f(model.body_mass), f(model.body_inertia), rb,
            np.ascontiguousarray(model.geom_type, dtype=np.int64), geometry_table(model), geom_body,
            f(model.geom_pos), f(model.geom_quat), rho,
            f(np.asarray(model.material_stiffness)[mat]), f(np.asarray(model.material_friction)[mat]),
            f(np.asarray(model.material_dissipation_time)[mat]),
            f(np.asarray(model.material_hc_dissipation)[mat]),
        )

    def args(self, strict: bool) -> tuple:
        """(fpar, ipar, *model arrays) with the strict flag set."""
        ipar = self.ipar
        if bool(ipar[N.I_STRICT]) != bool(strict):
            ipar = ipar.copy()
            ipar[N.I_STRICT] = int(bool(strict))
        return (self.fpar, ipar, *self.model_arrays)


_PACKED: dict[int, tuple[weakref.ref, PackedModel]] = {}


_SUPPORTED: dict[int, tuple[weakref.ref, tuple[bool, str]]] = {}


def per_model(cache: dict, model: Model, build):
    """``build(model)``, computed once per model object and kept while the model lives.

    Model is frozen, so the answer cannot go stale; the entry is dropped when the model is
    collected (a weak reference keyed by ``id``, checked against reuse of the id).
    """
    key = id(model)
    hit = cache.get(key)
    if hit is not None and hit[0]() is model:
        return hit[1]
    value = build(model)
    cache[key] = (weakref.ref(model, lambda _r, key=key: cache.pop(key, None)), value)
    return value


def supported_cached(model: Model) -> tuple[bool, str]:
    """``compiled_step_supported(model)``, evaluated once per model object."""
    return per_model(_SUPPORTED, model, compiled_step_supported)


def packed(model: Model) -> PackedModel:
    """The PackedModel of ``model`` (built on first use, kept while the model lives)."""
    return per_model(_PACKED, model, PackedModel)


_NO_TREES = np.zeros(0)


def tree_arrays(state: State) -> tuple[np.ndarray, np.ndarray]:
    """(tree_q, tree_v) of ``state`` as fresh C arrays (one shared empty array for a model without trees)."""
    if state.tree_q is None:
        return _NO_TREES, _NO_TREES
    return (np.array(state.tree_q, dtype=np.float64, order="C"), np.array(state.tree_v, dtype=np.float64, order="C"))


class PackedForest:
    """The forest of a model as the flat arrays of the compiled stages (built once per model).

    ``fa``: (parent, jtype, axis, jpos, jrot, qadr, dofadr, nvj, mass, com, inertia, armature, damping,
    gravity, tree_vstart, tree_nv, link_body, body_tree, body_moves, tree_base, body_local, body_sweep,
    tree_clique, clique_size, clique_start) —
    all trees' bodies in one parents-first list (parent −1: the world; q and v addresses into
    State.tree_q / tree_v), the Model body of each forest body and back, the tree of each Model body, which
    Model bodies move, the body each tree hangs from, the per-body sweep flag of the margin shares
    (free bodies and links ≥ 0), and the cliques of the SAP problem (:func:`forest_cliques`). A model without
    trees is a forest of zero trees (its free bodies are the cliques; every tree array empty). ``ra``: the joint rows' data (limits, actuators with their targets,
    couplers; per-tree ranges ``*_ptr``; then the scene's joint couplers between trees, ``forest.JointCoupler``).
    ``limit_names``, ``actuator_names``, ``coupler_names``: reporting."""

    def __init__(self, model: Model):
        from convexsim.multibody.model import JOINT_NV

        forest = model.forest
        trees = forest.trees if forest is not None else ()
        constraints = forest.constraints if forest is not None else ()
        i64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)  # noqa: E731
        f64 = lambda a: np.ascontiguousarray(a, dtype=np.float64)  # noqa: E731
        parent, jtype, axis, jpos, jrot, qadr, dofadr, mass, com, inertia, arm, damp, link = ([] for _ in range(13))
        tree_vstart, tree_nv, tree_base = [], [], []
        nbody = model.nbody
        body_tree = -np.ones(nbody, np.int64)
        body_local = -np.ones(nbody, np.int64)
        body_moves = np.asarray(model.body_dof) >= 0
        off = 0
        for k, t in enumerate(trees):
            m = t.model
            parent.append(np.where(m.parent >= 0, m.parent + off, -1))
            jtype.append(m.joint_type)
            axis.append(m.joint_axis)
            jpos.append(m.joint_pos)
            jrot.append(m.joint_rot)
            qadr.append(m.joint_qadr + t.q_start)
            dofadr.append(m.joint_dofadr + t.v_start)
            mass.append(m.body_mass)
            com.append(m.body_com)
            inertia.append(m.body_inertia)
            arm.append(m.dof_armature)
            damp.append(m.dof_damping)
            link.append(t.bodies)
            tree_vstart.append(t.v_start)
            tree_nv.append(t.nv)
            tree_base.append(t.base_body)
            body_tree[t.bodies] = k
            body_local[t.bodies] = off + np.arange(m.nbody)
            body_moves[t.bodies] = t.moving_bodies()
            off += m.nbody
        cat = lambda xs, shape: np.concatenate(xs) if xs else np.zeros(shape)  # noqa: E731
        body_sweep = np.array(model.body_dof, dtype=np.int64)
        body_sweep[body_tree >= 0] = 0
        body_sweep[model.kinematic_bodies] = 0       # a kinematic body's velocity enters its margin share
        jt = i64(cat(jtype, (0,)))
        self.fa = (i64(cat(parent, (0,))), jt, f64(cat(axis, (0, 3))), f64(cat(jpos, (0, 3))),
                   f64(cat(jrot, (0, 3, 3))), i64(cat(qadr, (0,))), i64(cat(dofadr, (0,))), i64(JOINT_NV[jt]),
                   f64(cat(mass, (0,))), f64(cat(com, (0, 3))), f64(cat(inertia, (0, 3, 3))), f64(cat(arm, (0,))),
                   f64(cat(damp, (0,))), f64(model.gravity), i64(tree_vstart), i64(tree_nv), i64(cat(link, (0,))),
                   body_tree, np.ascontiguousarray(body_moves, dtype=np.bool_), i64(tree_base), body_local,
                   body_sweep, *forest_cliques(int(np.count_nonzero(np.asarray(model.body_dof) >= 0)),
                                               i64(tree_nv), i64(tree_vstart)))
        # joint rows
        lim_ptr, lim_dof, lim_qadr, lim_lo, lim_hi, self.limit_names = [0], [], [], [], [], []
        act_ptr, act = [0], {k: [] for k in ("dof", "qadr", "kp", "kd", "uff", "effort", "vel")}
        tptr, times, values, self.actuator_names = [0], [], [], []
        cp_ptr, cp = [0], {k: [] for k in ("di", "qi", "dj", "qj", "rho", "offset")}
        for t in trees:
            m = t.model
            for lim in t.limits:
                lim_dof.append(m.joint_dofadr[lim.joint] + t.v_start)
                lim_qadr.append(m.joint_qadr[lim.joint] + t.q_start)
                lim_lo.append(lim.lower)
                lim_hi.append(lim.upper)
                self.limit_names.append(t.joint_names[lim.joint])
            lim_ptr.append(len(lim_dof))
            for a in t.actuators:
                act["dof"].append(m.joint_dofadr[a.joint] + t.v_start)
                act["qadr"].append(m.joint_qadr[a.joint] + t.q_start)
                act["kp"].append(a.kp)
                act["kd"].append(a.kd)
                act["uff"].append(a.u_ff)
                act["effort"].append(a.effort)
                act["vel"].append(math.nan if a.velocity is None else a.velocity)
                times.extend(a.times)
                values.extend(a.values)
                tptr.append(len(times))
                self.actuator_names.append(a.name)
            act_ptr.append(len(act["dof"]))
            for c in t.couplers:
                cp["di"].append(m.joint_dofadr[c.joint_i] + t.v_start)
                cp["qi"].append(m.joint_qadr[c.joint_i] + t.q_start)
                cp["dj"].append(m.joint_dofadr[c.joint_j] + t.v_start)
                cp["qj"].append(m.joint_qadr[c.joint_j] + t.q_start)
                cp["rho"].append(c.rho)
                cp["offset"].append(c.offset)
            cp_ptr.append(len(cp["di"]))
        jc = {k: [] for k in ("di", "qi", "ti", "dj", "qj", "tj", "rho", "offset")}
        self.coupler_names = tuple(c.name for c in constraints)
        for c in constraints:                      # JointCoupler only (tree_layout_problem)
            for name, tag in ((c.joint, "i"), (c.reference, "j")):
                k, j = forest.joint_index[name]
                t = trees[k]
                jc["d" + tag].append(t.model.joint_dofadr[j] + t.v_start)
                jc["q" + tag].append(t.model.joint_qadr[j] + t.q_start)
                jc["t" + tag].append(k)
            jc["rho"].append(c.rho)
            jc["offset"].append(c.offset)
        self.ra = (i64(lim_ptr), i64(lim_dof), i64(lim_qadr), f64(lim_lo), f64(lim_hi), i64(act_ptr),
                   i64(act["dof"]), i64(act["qadr"]), f64(act["kp"]), f64(act["kd"]), f64(act["uff"]),
                   f64(act["effort"]), f64(act["vel"]), i64(tptr), f64(times), f64(values), i64(cp_ptr),
                   i64(cp["di"]), i64(cp["qi"]), i64(cp["dj"]), i64(cp["qj"]), f64(cp["rho"]), f64(cp["offset"]),
                   i64(jc["di"]), i64(jc["qi"]), i64(jc["ti"]), i64(jc["dj"]), i64(jc["qj"]), i64(jc["tj"]),
                   f64(jc["rho"]), f64(jc["offset"]))
        self.actuator_names = tuple(self.actuator_names)


def forest_cliques(nmov: int, tree_nv: np.ndarray, tree_vstart: np.ndarray) -> tuple[np.ndarray, ...]:
    """The cliques of the SAP problem of a forest: the nmov free bodies (6 dofs each), then every tree with
    dofs. Returns (tree_clique (ntree; −1 no dofs), dofs of each clique, its offset in v = (free bodies |
    trees)), int64."""
    tree_nv = np.asarray(tree_nv, dtype=np.int64)
    has = tree_nv > 0
    tree_clique = np.where(has, nmov + np.cumsum(has) - 1, -1).astype(np.int64)
    size = np.concatenate((np.full(nmov, 6, np.int64), tree_nv[has]))
    start = np.concatenate((6 * np.arange(nmov, dtype=np.int64),
                            6 * nmov + np.asarray(tree_vstart, dtype=np.int64)[has]))
    return tree_clique, np.ascontiguousarray(size), np.ascontiguousarray(start)


_PACKED_FOREST: dict = {}


def packed_forest(model: Model) -> PackedForest:
    """The PackedForest of ``model`` (built on first use, kept while the model lives)."""
    return per_model(_PACKED_FOREST, model, PackedForest)


def flat_arrays(arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The C-contiguous int64, float64 and bool ``arrays`` in three flat buffers: (ints, floats, bools,
    header (n, 4)), header[k] = (offset of array k in its dtype's buffer, its shape padded with 1s). A kernel
    takes the four instead of the n arrays: numba unboxes every array argument on each call (≈ 0.15 µs
    each), which for the 73 arrays of the SAP step cost more than a small step itself;
    ``sap_composition.packed_views`` turns them back into the arrays (views, nothing copied)."""
    parts: dict[str, list] = {"i": [], "f": [], "b": []}
    size = {"i": 0, "f": 0, "b": 0}
    header = np.ones((len(arrays), 4), np.int64)
    for k, a in enumerate(arrays):
        kind = a.dtype.kind
        if a.dtype not in (np.int64, np.float64, np.bool_) or not a.flags.c_contiguous or a.ndim > 3:
            raise TypeError(f"array {k}: {a.dtype} {a.shape} is not a C-contiguous int64, float64 or bool array")
        header[k, 0] = size[kind]
        header[k, 1:1 + a.ndim] = a.shape
        parts[kind].append(a.ravel())
        size[kind] += a.size
    cat = lambda xs, dt: np.ascontiguousarray(np.concatenate(xs) if xs else np.zeros(0), dtype=dt)  # noqa: E731
    return cat(parts["i"], np.int64), cat(parts["f"], np.float64), cat(parts["b"], np.bool_), header


_STEP_ARRAYS: dict = {}


def step_arrays(model: Model) -> tuple:
    """The arrays of the compiled SAP run loop, ``PackedModel.model_arrays`` + ``PackedForest.fa`` +
    ``PackedForest.ra`` + the collision bits of ``PackedModel.pair_rule`` + ``PackedModel.kinematic``, flat
    (:func:`flat_arrays`; built once per model): (ints, floats, bools, header) for a model without trees
    (``PackedForest.fa[15]``, tree_nv, empty), with a fifth item, True, for a model with trees. The length is the
    model's kind to numba (part of the tuple's type): the compiled step is specialized on it when it compiles, and
    the step of a model without trees holds no tree stage (``sap_composition.NO_TREES``)."""
    def build(m: Model) -> tuple:
        flat = flat_arrays((*packed(m).model_arrays, *packed_forest(m).fa, *packed_forest(m).ra,
                            packed(m).pair_rule[0], packed(m).kinematic))
        return (*flat, True) if packed_forest(m).fa[15].shape[0] > 0 else flat

    return per_model(_STEP_ARRAYS, model, build)


_LCP_SUPPORTED: dict = {}


_LCP_PACKED: dict = {}


def lcp_packing_problem(model: Model, packers=(packed,)) -> str:
    """Why the compiled LCP steps cannot take ``model``'s materials or packed arrays ("" if they can): a
    friction that is not finite and ≥ 0, or settings one of the ``packers`` (:func:`packed`; for trees
    also :func:`packed_forest`) rejects."""
    mu = np.asarray(model.material_friction, dtype=float)
    if not np.all(np.isfinite(mu) & (mu >= 0)):
        return "a material's friction is not finite and ≥ 0"
    try:
        for pack in packers:
            pack(model)
    except (ValueError, TypeError) as e:                  # settings the packing rejects
        return f"the model cannot be packed for the compiled kernels: {e}"
    return ""


def lcp_compiled_supported(model: Model) -> tuple[bool, str]:
    """(True, "") when the compiled LCP step can advance ``model``, else (False, the reason).

    Conditions: the LCP solver; no kinematic trees; every body free (6 dofs, in body order) or fixed; shapes
    among sphere, box, capsule, halfspace; no restitution (``lcp_restitution`` = 0: the midpoint scheme
    stays on the reference path); finite friction ≥ 0."""
    s = model.solver
    if s.kind != "lcp":
        return False, f"solver.kind is {s.kind!r}; the compiled LCP step is the LCP step"
    if model.has_trees:
        return False, "the model has kinematic trees (joints); the compiled LCP step is for free bodies"
    if s.lcp_restitution != 0.0:
        return False, "lcp_restitution > 0 (Moreau midpoint scheme) is taken by the reference step"
    layout = free_body_layout_problem(model)
    if layout:
        return False, layout
    why = lcp_packing_problem(model)
    return (False, why) if why else (True, "")


def lcp_supported_cached(model: Model) -> tuple[bool, str]:
    """``lcp_compiled_supported(model)``, evaluated once per model object."""
    return per_model(_LCP_SUPPORTED, model, lcp_compiled_supported)


class LcpPacked:
    """The kernel arguments of a model: the SAP packing's arrays (:func:`packed`) and the LCP settings."""

    def __init__(self, model: Model, friction_directions):
        from convexsim.lcp.lemke import REBUILD_LU_MAX, LemkeOptions

        s = model.solver
        pm = packed(model)
        a = pm.model_arrays
        self.fpar = pm.fpar
        self.arrays = (*a[:13], a[14])          # geometry and bodies; geom friction (not k, τ, d)
        d = int(s.friction_directions)
        self.U = np.ascontiguousarray(friction_directions(d) if d else np.zeros((0, 2)))
        self.stabilization = float(s.lcp_stabilization)
        opts = LemkeOptions()
        lpar = np.zeros(NLPAR)
        lpar[L_PIVOT_TOL] = opts.pivot_tol
        lpar[L_RATIO_REL_TOL] = opts.ratio_rel_tol
        lpar[L_RHS_TOL] = opts.rhs_tol
        lpar[L_LEX_REL_TOL] = opts.lex_rel_tol
        lpar[L_LEX_ABS_TOL] = opts.lex_abs_tol
        lpar[L_CHECK_TOL] = opts.check_tol
        lpar[L_HARRIS_TOL] = opts.harris_tol
        lpar[L_HARRIS_RATIO] = opts.harris_pivot_ratio
        self.lpar = lpar
        jpar = np.zeros(NJPAR, np.int64)
        jpar[J_NDIR] = d
        jpar[J_MAX_PIVOTS] = int(s.lcp_max_pivots)
        jpar[J_REFACTOR] = int(opts.refactor_every)
        jpar[J_HARRIS] = 1 if opts.ratio_test == "harris" else 0
        jpar[J_LU_MAX] = REBUILD_LU_MAX
        self.jpar = jpar

    def settings(self, warm_min: int, dense_work: int) -> np.ndarray:
        """The integer settings with the caller's limits (``lcp_stepper``'s module constants, read per step)."""
        jpar = self.jpar.copy()
        jpar[J_WARM_MIN] = warm_min
        jpar[J_DENSE_WORK] = dense_work
        return jpar


def lcp_packed(model: Model, friction_directions) -> LcpPacked:
    """The LcpPacked of ``model`` (built on first use with ``friction_directions(d)``, the LCP stepper's
    directions u_j, and kept while the model lives)."""
    return per_model(_LCP_PACKED, model, lambda m: LcpPacked(m, friction_directions))


_LCP_TREE_SUPPORTED: dict = {}


def lcp_tree_supported(model: Model) -> tuple[bool, str]:
    """(True, "") when the compiled tree LCP step can advance ``model``, else (False, the reason) (module
    docstring)."""
    s = model.solver
    if s.kind != "lcp":
        return False, f"solver.kind is {s.kind!r}; the compiled tree LCP step is the LCP step"
    if not model.has_trees:
        return False, "the model has no kinematic trees (the free-body compiled LCP step takes it)"
    if s.lcp_restitution != 0.0:
        return False, "lcp_restitution > 0 is not supported with joints (the reference step says so)"
    if not (0.0 <= s.lcp_stabilization <= 1.0 and (s.friction_directions == 0 or s.friction_directions >= 3)):
        return False, "lcp_stabilization or friction_directions out of range (the reference step says which)"
    why = tree_layout_problem(model)
    if why:
        return False, why
    for t in model.forest.trees:
        if t.couplers:
            return False, (f"tree of joint {t.joint_names[0]!r}: couplers given in Python (Tree.couplers) are "
                           "not supported by the LCP stepper")
    layout = free_body_layout_problem(model, links_allowed=True)
    if layout:
        return False, layout
    why = lcp_packing_problem(model, (packed, packed_forest))
    return (False, why) if why else (True, "")


def lcp_tree_supported_cached(model: Model) -> tuple[bool, str]:
    """``lcp_tree_supported(model)``, evaluated once per model object."""
    return per_model(_LCP_TREE_SUPPORTED, model, lcp_tree_supported)


__all__ = ["sap_parameters", "tree_arrays", "ISLAND_MAX_DOFS", "SUPPORTED_SHAPES", "free_body_layout_problem",
           "tree_layout_problem", "compiled_step_supported", "supported_cached", "PackedModel", "packed",
           "per_model", "PackedForest", "forest_cliques", "packed_forest", "flat_arrays", "step_arrays", "LcpPacked", "lcp_packed", "lcp_packing_problem",
           "lcp_compiled_supported", "lcp_supported_cached", "lcp_tree_supported", "lcp_tree_supported_cached"]
