"""Random, well-posed SAP problems for the solver tests (not a test module)."""

from __future__ import annotations

import numpy as np

from convexsim.sap import ContactProblem


def random_spd(rng, n, scale=1.0):
    B = rng.normal(size=(n, n))
    return scale * (B @ B.T / n + 0.5 * np.eye(n))


def skew(p):
    return np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])


def random_rotation(rng):
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q * np.sign(np.diag(R))
    return Q if np.linalg.det(Q) > 0 else -Q


def body_mass_matrix(rng):
    """World-frame spatial mass matrix of a rigid body, angular first: diag(R I Rᵀ, m I3)."""
    m = rng.uniform(0.5, 2.0)
    Rot = random_rotation(rng)
    inertia = Rot @ np.diag(rng.uniform(0.002, 0.02, size=3)) @ Rot.T
    A = np.zeros((6, 6))
    A[:3, :3] = inertia
    A[3:, 3:] = m * np.eye(3)
    return A


def point_jacobian(rng, R_WC, offset):
    """Rows of R_WCᵀ (v + ω × p) for a body velocity [ω; v]: R_WCᵀ [−[p]×, I]."""
    return R_WC.T @ np.hstack([-skew(offset), np.eye(3)])


def random_problem(
    rng, nbodies, contacts_per_body=3.0, model="sap", two_body_fraction=0.5, dt=1e-2, neighbours=4,
    sigma=1e-3,
):
    """nbodies free bodies (cliques of 6), ≈ contacts_per_body contacts each; a contact joins body a to the
    ground or to one of the next ``neighbours`` bodies (a sparse, chain-like clique graph)."""
    A_blocks = [body_mass_matrix(rng) for _ in range(nbodies)]
    nk = max(1, int(round(contacts_per_body * nbodies)))
    cliques = -np.ones((nk, 2), dtype=np.int64)
    J_blocks = []
    for i in range(nk):
        a = rng.integers(nbodies)
        R_WC = random_rotation(rng)
        Ja = -point_jacobian(rng, R_WC, rng.normal(scale=0.1, size=3))
        if nbodies > 1 and rng.uniform() < two_body_fraction:
            b = (a + rng.integers(1, min(neighbours, nbodies - 1) + 1)) % nbodies
            Jb = point_jacobian(rng, R_WC, rng.normal(scale=0.1, size=3))
            cliques[i] = (a, b)
            J_blocks.append((Ja, Jb))
        else:
            cliques[i, 0] = a
            J_blocks.append((-Ja,))
    v_star = rng.normal(scale=0.3, size=6 * nbodies)
    mu = rng.uniform(0.1, 1.0, size=nk)
    k = 10 ** rng.uniform(3, 6, size=nk)
    common = dict(model=model, mu=mu, k=k, sigma=sigma)
    if model == "sap":
        extra = dict(tau_d=rng.uniform(0, 0.05, size=nk), phi0=rng.uniform(-2e-3, 1e-3, size=nk), beta=1.0)
    else:
        extra = dict(
            d=rng.uniform(0, 20, size=nk), fe0=rng.uniform(0, 50, size=nk), vn0=rng.uniform(-0.2, 0.1, size=nk),
            v_s=1e-4,
        )
    return ContactProblem.from_blocks(dt, A_blocks, v_star, cliques, J_blocks, **common, **extra)


def momentum_scale(problem, result):
    """s = max(‖D A v‖, ‖D Jᵀγ‖) of the stopping rule at a result, D = diag(A)^(-1/2)."""
    D = 1.0 / np.sqrt(np.diag(problem.A_dense()))
    return max(np.linalg.norm(D * (problem.A_dense() @ result.v)), np.linalg.norm(D * result.j))


def assert_same_optimum(problem, exact, mod, rel_tolerance=1e-6):
    """Both satisfy the stopping rule; the strictly convex cost has one minimizer, and the A-norm distance of
    two points whose gradients are ≤ ε is ≤ ε/λmin (in the D-scaled norm), so compare at that size."""
    assert exact.converged and mod.converged
    assert abs(mod.cost - exact.cost) <= 1e-6 * max(abs(exact.cost), 1e-12) + 1e-14
    D = 1.0 / np.sqrt(np.diag(problem.A_dense()))
    s = momentum_scale(problem, exact)
    dv = np.linalg.norm((exact.v - mod.v) / D)  # A-like scaled norm of the difference [sqrt(J)]
    assert dv <= 50 * rel_tolerance * s + 1e-12, (dv, s)


def scene_step_problems(scene, steps, every, contact_model=None):
    """(problem, v0) of some steps of a scene run with the default solver."""
    from convexsim import dynamics, stepping
    from convexsim.simulate import prepare
    from convexsim.stepping.contacts import contact_kinematics
    from convexsim.stepping.sap_stepper import build_sap_problem

    model, state, _ = prepare(scene, contact_model=contact_model)
    out = []
    for k in range(steps):
        if k % every == every - 1:
            kin = contact_kinematics(model, state)
            if kin.contacts.count:
                A_blocks, v_star = dynamics.free_motion(model, state)
                v0 = state.v[dynamics.moving_bodies(model)].reshape(-1)
                out.append((build_sap_problem(model, state, kin, A_blocks, v_star, v0), v0))
        state, _ = stepping.step(model, state)
    return out
