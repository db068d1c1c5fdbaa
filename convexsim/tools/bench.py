"""Benchmarks: random SAP problems vs size (``python -m convexsim.tools.bench``) and scene stepping
(:func:`scene_benchmark`, printed by ``convexsim bench``).

    python -m convexsim.tools.bench [--sizes 10 100 1000] [--repeats 3] [--seed 0]

Each problem is one "sap"-model time step (dt = 10 ms) of N free rigid bodies (6-dof cliques, angular-first
[ω; v]) resting on the ground and touching neighbours, ~3 contacts per body (see :func:`contact_layout`;
default layout "rows": rows of 10 touching bodies, a sparse contact graph of chains; "grid": a 2-D grid).
Masses, inertias and orientations are random (A_c SPD), the bodies slightly penetrate
(φ0 ∈ [−1, −0.1] mm) and carry random free-motion velocities v* (one step of gravity, random spin and
horizontal push), so the step mixes sticking and sliding contacts.

A second table times the linear algebra alone on a SAP-like Hessian with the same pattern
(H = A + Σ Jᵀ G J): block-sparse (one block at a time) and supernodal analyze + factor versus dense
``numpy.linalg.cholesky``.

The "ratio" column is t(N) / t(previous N); for 10x more bodies a linear-time solver gives ~10.
Times are medians over ``repeats`` after one warm-up solve (numba compilation excluded). Not a test:
wall-clock numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import time
from pathlib import Path

import numpy as np

from convexsim.sap import block_sparse as bs
from convexsim.spatial import skew
from convexsim.sap import supernodal as sn

DT = 0.01
"""Time step [s]."""
GRAVITY = 9.81
"""[m/s²]."""
HALF = 0.05
"""Half size of the (box-like) bodies [m]; neighbours are 2 HALF apart."""
ROW_LENGTH = 10
"""Bodies per row in the "rows" layout."""


def _random_rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def _frame(normal: np.ndarray) -> np.ndarray:
    """Contact frame rows (t1, t2, n) for a unit normal."""
    helper = np.array([1.0, 0.0, 0.0]) if abs(normal[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    t1 = np.cross(normal, helper)
    t1 /= np.linalg.norm(t1)
    return np.stack([t1, np.cross(normal, t1), normal])


def _point_jacobian(frame: np.ndarray, r: np.ndarray) -> np.ndarray:
    """3 x 6 Jacobian of the contact-frame velocity of the body point at offset r (from the COM, world) for
    body velocities [ω; v]: v_p = v + ω × r = v − [r]ₓ ω."""
    return frame @ np.hstack([-skew(r), np.eye(3)])


def contact_layout(n_bodies: int, layout: str = "rows") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Body positions (N, 3), ground-contact offsets (g, 3) (from the COM, world) and neighbour pairs (i, j),
    i < j, for a layout:

    * "rows": rows of ROW_LENGTH bodies along x (rows 0.1 m apart, not touching); each body touches the
      ground at two points and its right neighbour: ~2.9 contacts per body, the clique graph is a set of
      chains (zero fill: linear-time factorization).
    * "grid": a near-square grid; each body touches the ground under its COM and its right and front
      neighbours: ~3 contacts per body, the clique graph is a 2-D grid (fill grows like n log n and the
      factorization flops like n^1.5 under any ordering, so time grows faster than linearly).
    """
    idx = np.arange(n_bodies)
    if layout == "rows":
        cols = ROW_LENGTH
        ground = np.array([[-0.5 * HALF, 0.0, -HALF], [0.5 * HALF, 0.0, -HALF]])
        spacing_y = 4 * HALF
    elif layout == "grid":
        cols = int(np.ceil(np.sqrt(n_bodies)))
        ground = np.array([[0.0, 0.0, -HALF]])
        spacing_y = 2 * HALF
    else:
        raise ValueError(f"layout must be 'rows' or 'grid', got {layout!r}")
    row, col = idx // cols, idx % cols
    pos = np.stack([2 * HALF * col, spacing_y * row, np.full(n_bodies, HALF)], axis=1)
    pairs = [(i, i + 1) for i in idx if col[i] + 1 < cols and i + 1 < n_bodies]
    if layout == "grid":
        pairs += [(i, i + cols) for i in idx if i + cols < n_bodies]
    return pos, ground, np.array(pairs, dtype=np.int64).reshape(-1, 2)


def random_problem_data(n_bodies: int, seed: int = 0, layout: str = "rows") -> dict:
    """Blocks of one random well-posed SAP step (see module docstring) as plain arrays.

    Returns a dict with A_blocks (N, 6, 6), v_star (6N,), constraint_cliques (nk, 2) (−1: ground),
    J_blocks (nk, 2, 3, 6), phi0 (nk,), and the neighbour pairs (clique-graph edges).
    """
    rng = np.random.default_rng(seed)
    pos, ground, pairs = contact_layout(n_bodies, layout)
    A = np.zeros((n_bodies, 6, 6))
    for b in range(n_bodies):
        m = rng.uniform(0.5, 2.0)  # [kg]
        principal = m * (2 * HALF) ** 2 / 6 * rng.uniform(0.5, 1.5, 3)  # [kg m²], cube-like
        Rot = _random_rotation(rng)
        A[b, :3, :3] = Rot @ np.diag(principal) @ Rot.T
        A[b, 3:, 3:] = m * np.eye(3)
    v_star = np.zeros((n_bodies, 6))
    v_star[:, :3] = rng.normal(0.0, 0.5, (n_bodies, 3))  # [rad/s]
    v_star[:, 3:5] = rng.normal(0.0, 0.1, (n_bodies, 2))  # [m/s] horizontal push
    v_star[:, 5] = -GRAVITY * DT + rng.normal(0.0, 0.01, n_bodies)  # [m/s] falling by one step of gravity
    cliques, J = [], []
    up = _frame(np.array([0.0, 0.0, 1.0]))
    for b in range(n_bodies):  # ground contacts (+z normal; the ground is not a clique)
        for r in ground:
            cliques.append((b, -1))
            J.append([_point_jacobian(up, r), np.zeros((3, 6))])
    for i, j in pairs:  # neighbour contact at the midpoint, normal from i to j; vc = v_j,p − v_i,p
        d = pos[j] - pos[i]
        frame = _frame(d / np.linalg.norm(d))
        J.append([-_point_jacobian(frame, 0.5 * d), _point_jacobian(frame, -0.5 * d)])
        cliques.append((i, j))
    nk = len(cliques)
    return {
        "A_blocks": A,
        "v_star": v_star.reshape(-1),
        "constraint_cliques": np.array(cliques, dtype=np.int64),
        "J_blocks": np.array(J),
        "phi0": -rng.uniform(1e-4, 1e-3, nk),  # [m] slight penetration
        "pairs": pairs,
    }


def make_problem(n_bodies: int, seed: int = 0, layout: str = "rows"):
    """The random SAP ContactProblem ("sap" model, μ = 0.5, k = 1e5 N/m, τd = 10 ms) for ``n_bodies``."""
    from convexsim.sap import ContactProblem

    data = random_problem_data(n_bodies, seed, layout)
    return ContactProblem.from_blocks(
        DT, data["A_blocks"], data["v_star"], data["constraint_cliques"], data["J_blocks"],
        model="sap", mu=0.5, k=1e5, tau_d=0.01, phi0=data["phi0"],
    )


def sap_like_hessian(n_bodies: int, seed: int = 0, layout: str = "rows"):
    """(block_sizes, edges, diag_values, edge_values) of H = A + Σ_c J_cᵀ G_c J_c for the benchmark problem
    with random SPD 3x3 G_c (stands in for the constraint Hessians; the pattern is what matters)."""
    data = random_problem_data(n_bodies, seed, layout)
    rng = np.random.default_rng(seed + 1)
    sizes = np.full(n_bodies, 6, dtype=np.int64)
    edges = data["pairs"]
    edge_index = {(int(i), int(j)): e for e, (i, j) in enumerate(edges)}
    diag = data["A_blocks"].copy()
    off = np.zeros((len(edges), 6, 6))
    for (c0, c1), (J0, J1) in zip(data["constraint_cliques"], data["J_blocks"]):
        M = rng.standard_normal((3, 3))
        G = 1e3 * (M @ M.T + 0.1 * np.eye(3))
        diag[c0] += J0.T @ G @ J0
        if c1 >= 0:
            diag[c1] += J1.T @ G @ J1
            off[edge_index[(int(c0), int(c1))]] = J1.T @ G @ J0  # H[rows c1, cols c0], c0 < c1
    return sizes, edges, diag.reshape(-1), off.reshape(-1)


def _median_time(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def run_benchmark(sizes=(10, 100, 1000), repeats: int = 3, seed: int = 0, dense_max_n: int = 6000,
                  layout: str = "rows") -> list[dict]:
    """Time SAP solves and the linear algebra for each size; returns one dict per size.

    Keys: layout, bodies, contacts, nv, solve_ms, newton_iterations, line_search_evaluations, converged,
    ms_per_iteration, ratio (solve time / previous size's, None for the first), sparse_factor_ms (block_sparse
    analyze + factor), supernodal_factor_ms (supernodal analyze + factor), supernodal_vs_block_rel_diff,
    fill_blocks,
    dense_factor_ms (numpy Cholesky of the dense H; None when nv > dense_max_n), factor_rel_diff (relative
    max difference of the two solutions of H x = 1).
    """
    from convexsim.sap import SapParameters, solve

    params = SapParameters(linear_solver="sparse", on_failure="ignore")
    warm = make_problem(min(sizes), seed, layout)
    solve(warm, params=params)  # compile (or load cached) numba kernels
    hw = sap_like_hessian(min(sizes), seed, layout)
    bs.factor(bs.analyze(hw[0], hw[1]), hw[2], hw[3])
    sn.factor(sn.analyze(hw[0], hw[1]), hw[2], hw[3])
    rows: list[dict] = []
    for n_bodies in sizes:
        problem = make_problem(n_bodies, seed, layout)
        t_solve, result = _median_time(lambda: solve(problem, params=params), repeats)
        block_sizes, edges, d, ev = sap_like_hessian(n_bodies, seed, layout)

        def sparse_factor():
            sym = bs.analyze(block_sizes, edges)
            return sym, bs.factor(sym, d, ev)

        t_sparse, (sym, fac) = _median_time(sparse_factor, repeats)
        rhs = np.ones(sym.n)
        x_sparse = bs.solve(sym, fac, rhs)

        def supernodal_factor(block_sizes=block_sizes, edges=edges, d=d, ev=ev):
            ssym = sn.analyze(block_sizes, edges)
            return ssym, sn.factor(ssym, d, ev)

        t_super, (ssym, sfac) = _median_time(supernodal_factor, repeats)
        x_super = sn.solve(ssym, sfac, rhs)
        super_rel = float(np.abs(x_super - x_sparse).max() / np.abs(x_sparse).max())
        t_dense = None
        rel = None
        if sym.n <= dense_max_n:
            H = bs.to_dense(block_sizes, edges, d, ev)
            t_dense, L = _median_time(lambda: np.linalg.cholesky(H), repeats if sym.n <= 1000 else 1)
            x_dense = np.linalg.solve(L.T, np.linalg.solve(L, rhs))
            rel = float(np.abs(x_sparse - x_dense).max() / np.abs(x_dense).max())
            del H, L
        rows.append({
            "layout": layout,
            "bodies": n_bodies,
            "contacts": problem.nk,
            "nv": problem.nv,
            "solve_ms": 1e3 * t_solve,
            "newton_iterations": int(result.iterations),
            "line_search_evaluations": int(result.line_search_evaluations),
            "converged": bool(result.converged),
            "ms_per_iteration": 1e3 * t_solve / max(1, int(result.iterations)),
            "ratio": None if not rows else t_solve / (rows[-1]["solve_ms"] / 1e3),
            "sparse_factor_ms": 1e3 * t_sparse,
            "supernodal_factor_ms": 1e3 * t_super,
            "supernodal_vs_block_rel_diff": super_rel,
            "fill_blocks": sym.fill_blocks,
            "dense_factor_ms": None if t_dense is None else 1e3 * t_dense,
            "factor_rel_diff": rel,
        })
    return rows


def format_table(rows: list[dict]) -> str:
    """Plain-text tables of :func:`run_benchmark` rows."""
    def fmt(x, spec):
        return "—" if x is None else format(x, spec)

    lines = [
        f"SAP solve (model 'sap', dt = 10 ms, 6-dof bodies, layout '{rows[0]['layout'] if rows else ''}', "
        "ground + neighbour contacts)",
        f"{'bodies':>7} {'contacts':>9} {'solve ms':>10} {'newton':>7} {'ls evals':>9} {'conv':>5} "
        f"{'ratio':>7} {'ms/newton':>10} {'ratio':>7}",
    ]
    prev = None
    for r in rows:
        per_ratio = None if prev is None else r["ms_per_iteration"] / prev["ms_per_iteration"]
        lines.append(
            f"{r['bodies']:>7d} {r['contacts']:>9d} {r['solve_ms']:>10.2f} {r['newton_iterations']:>7d} "
            f"{r['line_search_evaluations']:>9d} {'yes' if r['converged'] else 'NO':>5} "
            f"{fmt(r['ratio'], '>7.1f')} {r['ms_per_iteration']:>10.3f} {fmt(per_ratio, '>7.1f')}"
        )
        prev = r
    lines += [
        "",
        ("Factor only, H = A + sum J^T G J with the same pattern (analyze + factor; block = one 6x6 block at a "
         "time, supernodal = dense panels)"),
        (f"{'bodies':>7} {'nv':>6} {'fill blks':>9} {'block ms':>10} {'supern. ms':>10} {'dense ms':>10} "
         f"{'speedup':>8} {'rel diff x':>11}"),
    ]
    for r in rows:
        speed = None if r["dense_factor_ms"] is None else r["dense_factor_ms"] / r["supernodal_factor_ms"]
        lines.append(
            f"{r['bodies']:>7d} {r['nv']:>6d} {r['fill_blocks']:>9d} {r['sparse_factor_ms']:>10.3f} "
            f"{r['supernodal_factor_ms']:>10.3f} {fmt(r['dense_factor_ms'], '>10.3f')} {fmt(speed, '>8.1f')} "
            f"{fmt(r['factor_rel_diff'], '>11.1e')}"
        )
    lines.append("ratio = t(N) / t(previous N) (whole solve, then per Newton iteration); ~10 per 10x bodies "
                 "means linear scaling. speedup = dense / supernodal; rel diff x = block vs dense solution.")
    return "\n".join(lines)


def main(argv=None) -> int:
    """CLI entry point: ``python -m convexsim.tools.bench``."""
    parser = argparse.ArgumentParser(prog="python -m convexsim.tools.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000], help="numbers of bodies")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per size (median reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layout", choices=["rows", "grid"], default="rows",
                        help="rows: chains of touching bodies (linear-time); grid: a 2-D contact grid")
    parser.add_argument("--dense-max-n", type=int, default=6000,
                        help="skip the dense factorization above this many dofs")
    parser.add_argument("--hessians", metavar="SCENE",
                        help="instead: factor the Newton matrices of SCENE (at --steps) with every ordering")
    parser.add_argument("--steps", type=int, nargs="+", default=[20, 40, 60],
                        help="with --hessians: the steps whose last Newton matrix is factored")
    parser.add_argument("--dense", action="store_true",
                        help="instead: supernodal factor vs LAPACK on dense matrices (fraction of dense throughput)")
    args = parser.parse_args(argv)
    if args.dense:
        print("dense SPD matrices: supernodal factor (one supernode) vs numpy.linalg.cholesky, process CPU time")
        for r in dense_throughput(repeats=max(args.repeats, 5)):
            print(f"n = {r['n']:4d}: supernodal {r['supernodal_ms']:7.2f} ms ({r['supernodal_gflops']:5.2f} GFlop/s)"
                  f"  LAPACK {r['lapack_ms']:7.2f} ms ({r['lapack_gflops']:5.2f} GFlop/s)"
                  f"  ratio {r['lapack_ms'] / r['supernodal_ms']:.2f}")
        return 0
    if args.hessians:
        from convexsim.scene import resolve_scene_path as _resolve_scene

        rows = ordering_comparison(_resolve_scene(args.hessians), args.steps, max(args.repeats, 5))
        print(format_ordering_table(rows))
        return 0
    rows = run_benchmark(tuple(args.sizes), args.repeats, args.seed, args.dense_max_n, args.layout)
    print(format_table(rows))
    return 0


# ----------------------------------------------------------------------------------------------------
# Scene benchmark (``convexsim bench``)
# ----------------------------------------------------------------------------------------------------

PILE_SCENES = ("pile_100", "pile_500", "pile_1000", "pile_mixed")
"""Solver-stress scenes (scenes/pile_*.yaml); only pile_100 runs by default."""
DEFAULT_SCENES = (("sphere_drop", 0.5), ("box_stack", 0.5), ("pile_100", None), ("iiwa_push", 2.0))
"""(scene, simulated seconds or None for the scene's duration) run by ``convexsim bench`` without options
(iiwa_push: the 7-dof arm holding its pose for 1 s, then pushing the box; articulated SAP step)."""


def _warm_up(linear_solver: str) -> None:
    """Compile (or load from the numba cache) the solver kernels outside the timed window: one random
    10-body grid problem through the SAP solver."""
    from convexsim.sap import SapParameters, solve

    choice = linear_solver if linear_solver in ("sparse", "block", "dense") else "sparse"
    solve(make_problem(10, 0, "grid"), params=SapParameters(linear_solver=choice, on_failure="ignore"))


@contextlib.contextmanager
def forced_linear_solver(choice: str | None):
    """Within the block, every SAP solve uses ``linear_solver = choice`` ("sparse", "block" or "dense")
    whatever its SapParameters say (benchmarks compare factorizations on the same scene); None: no change."""
    from convexsim.sap import solver

    if choice is None:
        yield
        return
    if choice not in ("sparse", "block", "dense"):
        raise ValueError(f"linear solver must be 'sparse', 'block' or 'dense', got {choice!r}")
    original = solver._make_hessian
    solver._make_hessian = lambda problem, params, cache=None: original(
        problem, dataclasses.replace(params, linear_solver=choice), cache)
    try:
        yield
    finally:
        solver._make_hessian = original


def warm_up_compiled(model, state) -> None:
    """Load the compiled step's kernels outside the timed window: one step from the scene's initial state, in
    throwaway contexts, by the run kernel and by the two kernel calls of a step with a large island
    (``step_prepare``, ``step_finish``: loaded from the disk cache on their first call, ≈ 0.1–0.2 s)."""
    from convexsim.stepping import StepContext, compiled, dispatch

    if dispatch.route(model).path != "compiled":
        return
    compiled.compiled_step(model, state, StepContext())
    ctx = StepContext()
    ctx.big_islands = True                    # the route of a step after a large island: the two calls
    compiled.compiled_step(model, state, ctx)


def scene_benchmark(scene, duration: float | None = None, linear_solver: str | None = None,
                    slip_curvature: float | None = None, path: str = "auto") -> dict:
    """Step a scene from its initial state for ``duration`` (default: the scene's) and return per-step
    averages over that whole window. Numba compilation happens in an untimed warm-up before.

    Keys: scene, bodies, steps, ms_per_step (wall clock), cpu_ms_per_step (this process's CPU time: less
    sensitive to other processes on a shared machine), iterations (Newton per step), contacts, penetrating (contacts
    with φ < 0 per step), factor_ms and analyze_ms (per step), factorizations, analyses (orderings +
    symbolic factorizations actually run; the rest were reused), fill (Σ nonzero blocks of L / Σ nonzero
    blocks of H's lower triangle over all factorizations; None without any), kept (edges of the factored
    pattern / edges of the clique graph: below 1 when the blocks with G = 0 are pruned), unconverged (steps).
    ``linear_solver``: forces SapParameters.linear_solver ("sparse", "block", "dense") for the run;
    ``slip_curvature``: sets the scene's solver.slip_curvature κ (None: the scene's). Also: ls_per_iteration
    (line-search evaluations per Newton iteration).
    ``path``: the step path (``convexsim.stepping.step``): "auto" (default) times what ``simulate`` runs
    (the compiled step when the model is eligible; its supernodal factorizations run inside the kernel, so
    factor_ms is None — counts and fill are still reported); "reference" the Python SAP path, also taken
    whenever ``linear_solver`` is given or ``linalg.PRUNE_PATTERN`` is set (they act on that path). The
    run owns one StepContext, as ``simulate`` does (symbolic analyses reused across steps)."""
    from convexsim import stepping
    from convexsim.sap import linalg
    from convexsim.simulate import plan_steps, prepare

    overrides = None if slip_curvature is None else [f"solver.slip_curvature={float(slip_curvature)!r}"]
    model, state, dur = prepare(scene, duration=duration, overrides=overrides)
    nsteps, _ = plan_steps(dur, model.time_step)
    with forced_linear_solver(linear_solver):
        _warm_up(linear_solver or "sparse")
        if path != "reference" and linear_solver is None and not linalg.PRUNE_PATTERN:
            warm_up_compiled(model, state)
        else:
            path = "reference"   # a forced linear solver or a pruned pattern acts on the Python path only
        ctx = stepping.StepContext()
        stats = linalg.reset_factor_stats()
        its, nc, neg, bad, ls = 0, 0, 0, 0, 0
        paths: dict[str, int] = {}
        t0 = time.perf_counter()
        c0 = time.process_time()
        for _ in range(nsteps):
            state, info = stepping.step(model, state, ctx, path=path)
            its += info.iterations
            ls += info.line_search_evaluations
            nc += info.contacts.count
            neg += int(np.count_nonzero(info.contacts.phi < 0))
            bad += int(not info.converged)
            paths[info.path] = paths.get(info.path, 0) + 1
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
    return {
        "scene": Path(str(scene)).stem, "bodies": int((~model.body_fixed).sum()), "steps": nsteps,
        "ms_per_step": 1e3 * wall / nsteps, "cpu_ms_per_step": 1e3 * cpu / nsteps, "iterations": its / nsteps,
        "ls_per_iteration": ls / its if its else None, "contacts": nc / nsteps,
        "penetrating": neg / nsteps,
        "factor_ms": (1e3 * stats.factor_s / nsteps if stats.factor_s > 0 or not stats.factorizations
                      else None),
        "analyze_ms": 1e3 * stats.analyze_s / nsteps, "factorizations": stats.factorizations,
        "analyses": stats.analyses, "fill": stats.l_blocks / stats.h_blocks if stats.h_blocks else None,
        "kept": stats.kept_edges / stats.graph_edges if stats.graph_edges else None,
        "unconverged": bad, "path": path_summary(paths),
        "path_reasons": sorted({p.partition(": ")[2] or route_reason(model, path)
                                for p in paths if p != "compiled"}),
    }


def route_reason(model, path: str) -> str:
    """Why the dispatcher sends ``model``'s steps to the reference runner ("" when it does not)."""
    from convexsim.stepping.dispatch import route

    return route(model, path).reason


def path_summary(paths: dict[str, int]) -> str:
    """The bench's path column from {step path: steps}: "compiled", "reference", or "compiled+ref k" when k
    steps were handed to the reference (``convexsim bench`` prints the reasons under the table)."""
    compiled = paths.get("compiled", 0)
    handed = sum(n for p, n in paths.items() if p != "compiled")
    if not handed:
        return "compiled"
    return "reference" if not compiled else f"compiled+ref {handed}"


def scene_table_header() -> str:
    """Column titles of :func:`scene_row`."""
    return (f"{'scene':<16}{'bodies':>7}{'steps':>6}{'ms/step':>10}{'cpu ms':>9}{'iter/step':>10}{'ls/iter':>8}"
            f"{'contacts/step':>14}"
            f"{'φ<0/step':>9}{'factor ms':>10}{'analyze ms':>11}{'fill L/H':>9}{'kept':>6}{'unconv':>7}"
            f"  {'path'}")


SCENE_TABLE_LEGEND = {
    "scene": "the scene run from its initial state with its own solver settings",
    "bodies": "moving bodies",
    "steps": "time steps taken",
    "ms/step": "wall time per step [ms]",
    "cpu ms": "process CPU time per step [ms]",
    "iter/step": "Newton iterations per step",
    "ls/iter": "line-search evaluations per Newton iteration",
    "contacts/step": "contact pairs per step (candidates within the margin, touching or not)",
    "φ<0/step": "contacts per step that penetrate (signed distance φ < 0)",
    "factor ms": "time in the Newton-matrix factorizations per step [ms]; 'in kernel' when the compiled step "
                 "factors inside one numba call (not timed apart)",
    "analyze ms": "symbolic analysis (ordering, elimination tree) per step [ms]",
    "fill L/H": "nonzero blocks of the Cholesky factor L / nonzero blocks of H in the factored pattern",
    "kept": "edges of the factored pattern / edges of the clique graph (below 1 when blocks with G = 0 "
            "are pruned)",
    "unconv": "steps whose SAP solve did not converge",
    "path": "which runner took the steps (stepping.dispatch): 'compiled', 'reference', or 'compiled+ref k' when "
            "k steps were handed to the reference (an island over the compiled step's size limit)",
}
"""Every column of :func:`scene_table_header`, in words (printed under the table by ``convexsim bench``)."""


def scene_table_legend() -> str:
    """The legend printed under the scene table: one line per column."""
    width = max(len(k) for k in SCENE_TABLE_LEGEND)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in SCENE_TABLE_LEGEND.items())


def scene_row(r: dict) -> str:
    """One line of the scene table (per-step averages; cpu ms = process CPU time; fill = nonzero blocks of L
    / of H in the factored pattern; kept = edges of that pattern / edges of the clique graph; ls/iter =
    line-search evaluations per Newton iteration)."""
    fill = "—" if r["fill"] is None else f"{r['fill']:.2f}"
    factor = "in kernel" if r["factor_ms"] is None else f"{r['factor_ms']:.2f}"
    kept = "—" if r.get("kept") is None else f"{r['kept']:.2f}"
    return (f"{r['scene']:<16}{r['bodies']:>7}{r['steps']:>6}{r['ms_per_step']:>10.2f}{r['cpu_ms_per_step']:>9.2f}"
            f"{r['iterations']:>10.1f}{'—' if r.get('ls_per_iteration') is None else format(r['ls_per_iteration'], '.2f'):>8}"
            f"{r['contacts']:>14.1f}{r['penetrating']:>9.1f}{factor:>10}{r['analyze_ms']:>11.2f}"
            f"{fill:>9}{kept:>6}{r['unconverged']:>7}  {r.get('path', '')}")


# ----------------------------------------------------------------------------------------------------
# Orderings and factorizations on a scene's Newton matrices
# ----------------------------------------------------------------------------------------------------


def scene_hessians(scene, steps, with_positions: bool = False) -> list[tuple]:
    """(step, (block_sizes, edges, diag_values, edge_values)) of the last Newton matrix factored in each of
    the given steps (1-based) of a scene run from its initial state with the default solver settings;
    ``with_positions``: a third item, the world positions (nb, 3) of the cliques' bodies at that step."""
    from convexsim import dynamics, stepping
    from convexsim.sap import linalg, solver
    from convexsim.simulate import prepare

    model, state, _ = prepare(scene)
    wanted = {int(k) for k in steps}
    last: list = []
    original = linalg.SparseHessian.factor_and_solve
    original_participating = solver._participating_problem
    used_dofs: list = [None]

    def record(self, G, rhs):
        self.assemble(G)
        last[:] = [(self.problem.clique_sizes.copy(), self.edges.copy(), self.diag_values.copy(),
                    self.edge_values.copy())]
        return original(self, G, rhs)

    def participating(problem):
        reduced, dofs = original_participating(problem)
        used_dofs[0] = dofs
        return reduced, dofs

    out = []
    linalg.SparseHessian.factor_and_solve = record
    solver._participating_problem = participating
    try:
        for k in range(1, max(wanted) + 1):
            last.clear()
            q0 = state.q
            state, _ = stepping.step(model, state, path="reference")
            if k in wanted and last:
                if not with_positions:
                    out.append((k, last[0]))
                    continue
                centers = q0[dynamics.moving_bodies(model), :3]
                if used_dofs[0] is not None:
                    centers = centers[used_dofs[0].reshape(-1, 6)[:, 0]]
                out.append((k, last[0], centers))
    finally:
        linalg.SparseHessian.factor_and_solve = original
        solver._participating_problem = original_participating
    return out


def geometric_nd_order(sizes: np.ndarray, edges: np.ndarray, positions: np.ndarray,
                       leaf: int = 48) -> np.ndarray:
    """Nested dissection by coordinate bisection (an elimination order for ``supernodal.analyze(perm=)``):
    split the blocks at the median of the coordinate of largest spread (positions (nb, 3) [m]), take as
    separator the blocks of the smaller side that touch the other side, order side 1, side 2, separator;
    parts of <= ``leaf`` blocks by minimum degree. Needs the bodies' positions, which the analysis does not
    have, so it is a benchmark comparison, not an ``analyze`` ordering."""
    nb = sizes.size
    xadj, adjncy = bs._adjacency(nb, np.asarray(edges, dtype=np.int64).reshape(-1, 2))
    order: list[np.ndarray] = []
    work: list[tuple[str, np.ndarray]] = [("nodes", np.arange(nb))]
    inside = np.zeros(nb, dtype=bool)
    while work:
        kind, nodes = work.pop()
        if kind == "emit" or nodes.size <= leaf:
            if kind == "emit" or nodes.size == 0:
                order.append(nodes)
                continue
            local_index = -np.ones(nb, dtype=np.int64)
            local_index[nodes] = np.arange(nodes.size)
            sub = [(local_index[i], local_index[j]) for i in nodes for j in adjncy[xadj[i]:xadj[i + 1]]
                   if local_index[j] > local_index[i]]
            local = sn._md_order(sizes[nodes], np.array(sub, dtype=np.int64).reshape(-1, 2))
            order.append(nodes[local])
            continue
        p = positions[nodes]
        axis = int(np.argmax(p.max(axis=0) - p.min(axis=0)))
        left = p[:, axis] <= np.median(p[:, axis])
        if left.all() or not left.any():
            left = np.arange(nodes.size) < nodes.size // 2
        a, b = nodes[left], nodes[~left]
        inside[:] = False
        inside[b] = True
        touch_a = np.array([inside[adjncy[xadj[i]:xadj[i + 1]]].any() for i in a], dtype=bool)
        inside[:] = False
        inside[a] = True
        touch_b = np.array([inside[adjncy[xadj[i]:xadj[i + 1]]].any() for i in b], dtype=bool)
        if touch_a.sum() <= touch_b.sum():
            sep, a = a[touch_a], a[~touch_a]
        else:
            sep, b = b[touch_b], b[~touch_b]
        work.append(("emit", sep))
        work.append(("nodes", b))
        work.append(("nodes", a))
    return np.concatenate(order).astype(np.int64)


def _cpu_ms(fn, repeats: int) -> float:
    """Best process CPU time of ``repeats`` calls [ms] (CPU time is less sensitive to other processes)."""
    best = np.inf
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return 1e3 * best


def ordering_comparison(scene, steps=(20, 40, 60), repeats: int = 5) -> list[dict]:
    """Per recorded Newton matrix: blocks, fill (blocks of L / of H), multiply-adds and CPU ms of one
    numeric factorization for the supernodal factor with each ordering, and the one-block-at-a-time factor
    (its own minimum-degree ordering); plus the analysis CPU ms."""
    rows = []
    for k, (sizes, edges, d, ev), centers in scene_hessians(scene, steps, with_positions=True):
        row = {"step": k, "blocks": int(sizes.size), "edges": int(edges.shape[0])}
        old = bs.analyze(sizes, edges)
        bs.factor(old, d, ev)
        row["block_ms"] = _cpu_ms(functools.partial(bs.factor, old, d, ev), repeats)
        row["block_fill"] = (sizes.size + old.l_colptr[-1]) / (sizes.size + edges.shape[0])
        row["block_analyze_ms"] = _cpu_ms(functools.partial(bs.analyze, sizes, edges), repeats)
        for ordering in sn.ORDERINGS + ("geo",):
            perm = geometric_nd_order(sizes, edges, centers) if ordering == "geo" else None
            analyse = functools.partial(sn.analyze, sizes, edges, "md" if perm is not None else ordering,
                                        perm=perm)
            sym = analyse()
            sn.factor(sym, d, ev)
            row[f"{ordering}_ms"] = _cpu_ms(functools.partial(sn.factor, sym, d, ev), repeats)
            row[f"{ordering}_fill"] = sym.l_blocks / sym.h_blocks
            row[f"{ordering}_mflop"] = 2e-6 * sym.flops
            row[f"{ordering}_supernodes"] = sym.supernodes
            row[f"{ordering}_analyze_ms"] = _cpu_ms(analyse, repeats)  # geo: without the bisection itself
        rows.append(row)
    return rows


def format_ordering_table(rows: list[dict]) -> str:
    """Plain-text table of :func:`ordering_comparison` rows."""
    title = ("Newton matrices of the scene: factor CPU ms (fill = blocks of L / of H, Mflop of the supernodal "
             "factor), analysis CPU ms")
    columns = " | ".join(f"{o + ' ms':>8}{'fill':>6}{'Mflop':>7}{'snodes':>7}{'an.':>6}"
                         for o in sn.ORDERINGS + ("geo",))
    lines = [title, f"{'step':>5}{'blocks':>7}{'edges':>7} | {'block ms':>9}{'fill':>6}{'an.':>6} | {columns}"]
    for r in rows:
        lines.append(
            f"{r['step']:>5}{r['blocks']:>7}{r['edges']:>7} | {r['block_ms']:>9.2f}{r['block_fill']:>6.2f}"
            f"{r['block_analyze_ms']:>6.1f} | "
            + " | ".join(f"{r[o + '_ms']:>8.2f}{r[o + '_fill']:>6.2f}{r[o + '_mflop']:>7.1f}"
                         f"{r[o + '_supernodes']:>7}{r[o + '_analyze_ms']:>6.1f}" for o in sn.ORDERINGS + ("geo",)))
    return "\n".join(lines)


def dense_throughput(block_counts=(20, 50, 80), repeats: int = 5, seed: int = 0) -> list[dict]:
    """The supernodal factor on complete block graphs (one dense supernode of 6·nb columns) against
    ``numpy.linalg.cholesky`` (LAPACK dpotrf) on the same matrix: process CPU ms and GFlop/s (n³/3 flops)."""
    rng = np.random.default_rng(seed)
    rows = []
    for nb in block_counts:
        sizes = np.full(nb, 6, dtype=np.int64)
        edges = np.array([(i, j) for i in range(nb) for j in range(i + 1, nb)], dtype=np.int64)
        n = 6 * nb
        M = rng.standard_normal((n, n))
        H = M @ M.T / n + np.eye(n)
        diag = np.concatenate([H[6 * i:6 * i + 6, 6 * i:6 * i + 6].ravel() for i in range(nb)])
        off = np.concatenate([H[6 * j:6 * j + 6, 6 * i:6 * i + 6].ravel() for i, j in edges])
        sym = sn.analyze(sizes, edges)
        sn.factor(sym, diag, off)
        t_sn = _cpu_ms(functools.partial(sn.factor, sym, diag, off), repeats)
        t_la = _cpu_ms(functools.partial(np.linalg.cholesky, H), repeats)
        flop = n**3 / 3
        rows.append({"n": n, "supernodal_ms": t_sn, "lapack_ms": t_la, "supernodal_gflops": 1e-6 * flop / t_sn,
                     "lapack_gflops": 1e-6 * flop / t_la})
    return rows


if __name__ == "__main__":
    raise SystemExit(main())


# ----------------------------------------------------------------------------------------------------
# Compiled step against the reference Python step (``convexsim bench --compiled``)
# ----------------------------------------------------------------------------------------------------

TEN_SPHERES = {
    "name": "ten_spheres",
    "time_step": 1.0e-3,
    "bodies": [{"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace"}]}] + [
        {"name": f"ball_{layer}_{i}", "mass": 0.5,
         "position": [0.11 * i + 0.005 * layer, 0.003 * i, 0.06 + 0.15 * layer],
         "geometries": [{"shape": "sphere", "radius": 0.05}]}
        for layer in range(2) for i in range(5)],
}
"""10 spheres (r = 5 cm) in two layers of 5 falling onto the ground: the 10-sphere row of
``convexsim bench --compiled``."""

COMPILED_SCENES = (("sphere_drop", 0.5), ("box_slide", 0.5), ("box_stack", 0.5), ("ten_spheres", 0.5),
                   ("incline_stick", 0.5), ("incline_slip", 0.5), ("capsule_roll", 0.5))
"""(scene, simulated seconds) timed by :func:`compiled_comparison`."""


def run_cpu_ms(model, state, duration: float, path: str, record_every: int) -> tuple[float, object]:
    from convexsim.simulate import run_model

    run_model(model, state, duration=min(duration, 10 * model.time_step), path=path)   # load the kernels
    c0 = time.process_time()
    traj, stats = run_model(model, state, duration=duration, path=path, record_every=record_every)
    return 1e3 * (time.process_time() - c0) / stats.steps, traj


def compiled_comparison(scenes=COMPILED_SCENES) -> list[dict]:
    """CPU ms/step of ``run_model`` on each scene by the reference Python path and by the compiled run
    loop (recording every step, and recording only the last step), after an untimed warm-up run, and the
    largest difference of the two trajectories' positions [m]."""
    from convexsim.simulate import prepare

    rows = []
    for name, duration in scenes:
        model, state, _ = prepare(TEN_SPHERES if str(name) == "ten_spheres" else name)
        n = int(round(duration / model.time_step))
        ref, traj_ref = run_cpu_ms(model, state, duration, "reference", 1)
        comp, traj = run_cpu_ms(model, state, duration, "compiled", 1)
        bare, _ = run_cpu_ms(model, state, duration, "compiled", n)
        rows.append({"scene": Path(str(name)).stem, "bodies": int((~model.body_fixed).sum()), "steps": n,
                     "reference_ms": ref, "compiled_ms": comp, "compiled_bare_ms": bare,
                     "max_dp": float(np.abs(traj.position - traj_ref.position).max())})
    return rows


def format_compiled_table(rows: list[dict]) -> str:
    """The table of :func:`compiled_comparison`."""
    lines = [f"{'scene':<15}{'bodies':>7}{'steps':>6}{'reference':>11}{'compiled':>10}{'no record':>10}"
             f"{'speed-up':>9}{'max |Δp| m':>12}"]
    for r in rows:
        lines.append(f"{r['scene']:<15}{r['bodies']:>7}{r['steps']:>6}{r['reference_ms']:>11.3f}"
                     f"{r['compiled_ms']:>10.4f}{r['compiled_bare_ms']:>10.4f}"
                     f"{r['reference_ms'] / r['compiled_ms']:>8.0f}×{r['max_dp']:>12.1e}")
    lines.append("CPU ms/step of run_model after a warm-up run: reference = the Python SAP path, compiled = "
                 "the compiled run loop recording every step, no record = recording only the last step; "
                 "speed-up = reference / compiled; max |Δp| = largest difference of a body position between "
                 "the reference and the compiled run [m].")
    return "\n".join(lines)
