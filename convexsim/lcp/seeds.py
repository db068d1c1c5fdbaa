"""Small worked LCP examples, each one documented step function solved by ``lemke`` (docs/lcp.md §3).

The 1-D falling and sliding blocks of S. Pfrommer's LCP notes (2019), the 2-D particle of Berard and
Trinkle's MPEC identification example (2008) and Glocker and Studer's Moreau midpoint step with
restitution (2005; with corrected matrices, docs/lcp.md §3). Unit mass unless
stated; g = 9.81 m/s²; all quantities SI. ``main(argv)`` prints every example's result
(``convexsim seeds``).

Every function returns the LCP it solved (``M``, ``q``) together with the LemkeResult so that
tests can check both the physics (closed forms) and the complementarity conditions.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np

from convexsim.lcp.lemke import LemkeResult, LemkeStatus, lemke

G = 9.81
"""Gravity used by the examples [m/s²]."""


class SeedLcpError(RuntimeError):
    """Lemke did not solve one of the seed LCPs (they are all solvable, so this is a bug)."""


@dataclass
class SeedStep:
    """One solved step of a seed example.

    Attributes:
        values: named outputs of the step (positions, velocities, forces) in SI units.
        M: the LCP matrix, shape (n, n).
        q: the LCP vector, shape (n,).
        result: the LemkeResult.
    """

    values: dict
    M: np.ndarray
    q: np.ndarray
    result: LemkeResult


def _solve(M, q) -> LemkeResult:
    r = lemke(M, q)
    if r.status != LemkeStatus.SOLVED:
        raise SeedLcpError(f"Lemke ended with {r.status.name} on M={M.tolist()}, q={q.tolist()}")
    return r


# --------------------------------------------------------------------------------------------
# seed 000: the 1D block
# --------------------------------------------------------------------------------------------


def falling_block_step(x: float, xdot: float, dt: float, g: float = G) -> SeedStep:
    """Falling unit-mass block on the ground x ≥ 0, implicit Euler at position level.

    LCP in z = x_{k+1} [m], w = λ_{k+1} [N] (ground force):
    ``M = 1/Δt²``, ``q = −(x_k + Δt ẋ_k − gΔt²)/Δt²``, i.e. λ = (x_{k+1} − x_k − Δtẋ_k)/Δt² + g.
    Closed form: x_{k+1} = max(0, x_k + Δtẋ_k − gΔt²), ẋ_{k+1} = (x_{k+1} − x_k)/Δt (plastic landing).
    """
    M = np.array([[1.0 / dt**2]])
    q = np.array([-(x + dt * xdot - g * dt**2) / dt**2])
    r = _solve(M, q)
    x1 = float(r.z[0])
    return SeedStep({"x": x1, "xdot": (x1 - x) / dt, "lambda": float(r.w[0])}, M, q, r)


def sliding_block_forward_step(xdot: float, u: float, dt: float, mu: float, g: float = G) -> SeedStep:
    """Block pushed forward (u ≥ 0, ẋ ≥ 0) against Coulomb friction, unit mass.

    LCP in z = ẋ_{k+1} [m/s], w = λ' = μg − λ [N] (unused friction):
    ``M = 1/Δt``, ``q = −ẋ_k/Δt − u + μg``. Closed form ẋ_{k+1} = max(0, ẋ_k + Δt(u − μg)).
    The friction force is λ = μg − λ'.
    """
    M = np.array([[1.0 / dt]])
    q = np.array([-xdot / dt - u + mu * g])
    r = _solve(M, q)
    return SeedStep({"xdot": float(r.z[0]), "friction": mu * g - float(r.w[0])}, M, q, r)


def sliding_block_direct_step(xdot_pos: float, xdot_neg: float, u: float, dt: float, mu: float,
                              g: float = G) -> SeedStep:
    """Bidirectional block, seed 000's "direct" formulation, unit mass.

    z = (ẋ⁺_{k+1}, ẋ⁻_{k+1}) [m/s] with v = ẋ⁺ − ẋ⁻, w = (λ'⁻, λ'⁺) [N] (slack friction):
    ``M = I/Δt``,
    ``q = ((ẋ⁻_k − ẋ⁺_k)/Δt − u + μg, (ẋ⁺_k − ẋ⁻_k)/Δt + u + μg)``.
    Closed form with a = v_k + Δt u: v_{k+1} = sign(a)·max(|a| − Δtμg, 0) (implicit-Euler Coulomb).
    Lemma 2.1 of the seed: ẋ⁺ẋ⁻ = 0 (M is diagonal PD, so one of the pair is nonbasic, exactly 0).
    """
    M = np.eye(2) / dt
    dv = (xdot_neg - xdot_pos) / dt
    q = np.array([dv - u + mu * g, -dv + u + mu * g])
    r = _solve(M, q)
    xp, xm = float(r.z[0]), float(r.z[1])
    return SeedStep({"xdot_pos": xp, "xdot_neg": xm, "v": xp - xm, "slack_neg": float(r.w[0]),
                     "slack_pos": float(r.w[1])}, M, q, r)


def traditional_lcp(v: float, u: float, dt: float, mu: float, m: float = 1.0, g: float = G):
    """(M, q) of seed 000's "traditional" (Stewart–Trinkle) 1D friction LCP, normal force mg known.

    z = (λ⁺, λ⁻, γ): friction forces pushing +x / −x [N] and the sliding speed γ [m/s];
    ``M = [[Δt/m, −Δt/m, 1], [−Δt/m, Δt/m, 1], [−1, −1, 0]]``,
    ``q = (v_k + Δtu/m, −v_k − Δtu/m, μmg)``.
    w = (v_{k+1} + γ, −v_{k+1} + γ, μmg − λ⁺ − λ⁻). M is PSD (not P, as the seed guessed).
    """
    a = dt / m
    M = np.array([[a, -a, 1.0], [-a, a, 1.0], [-1.0, -1.0, 0.0]])
    q = np.array([v + a * u, -v - a * u, mu * m * g])
    return M, q


def sliding_block_traditional_step(v: float, u: float, dt: float, mu: float, m: float = 1.0,
                                   g: float = G) -> SeedStep:
    """One step of the traditional formulation; v_{k+1} = v_k + Δt(u + λ⁺ − λ⁻)/m.

    v_{k+1} is unique and equals the direct formulation's soft threshold; the split λ± is not
    unique when sticking (only λ⁺ − λ⁻ is).
    """
    M, q = traditional_lcp(v, u, dt, mu, m, g)
    r = _solve(M, q)
    lp, lm, gam = (float(x) for x in r.z)
    v1 = v + dt * (u + lp - lm) / m
    return SeedStep({"v": v1, "lambda_pos": lp, "lambda_neg": lm, "gamma": gam}, M, q, r)


def traditional_creep(a: float, eps: float, mu: float = 0.3, dt: float = 0.01, m: float = 1.0,
                      g: float = G) -> SeedStep:
    """Seed 000 §3.2.1: an error −ε in q₁ of the traditional LCP turns sticking into creep.

    With a = v_k + Δtu/m in the stick range (|a| < Δtμg/m... i.e. friction not saturated), the
    perturbed LCP gives γ = v = ε/2 with saturated friction λ⁺ + λ⁻ = μmg. Here q = (a − ε, −a, μmg)
    with Δt/m folded into a (u = 0, v_k = a).
    """
    M, q = traditional_lcp(a, 0.0, dt, mu, m, g)
    q[0] -= eps
    r = _solve(M, q)
    lp, lm, gam = (float(x) for x in r.z)
    w = M @ r.z + q
    return SeedStep({"gamma": gam, "v_plus": w[0] - gam, "lambda_sum": lp + lm}, M, q, r)


# --------------------------------------------------------------------------------------------
# seed 003: Berard–Trinkle particle
# --------------------------------------------------------------------------------------------


def berard_trinkle_lcp(state, mu: float, h: float, m: float, g: float, x_app: float):
    """(A, q) of the Berard–Trinkle particle step (docs/lcp.md §3).

    state = (x, y, ẋ, ẏ) [m, m/s]; z = (λ_n, λ_f1, λ_f2, σ) are forces [N] (impulses hλ) and the
    sliding-speed multiplier σ [m/s];
    ``A = [[h²/m, 0, 0, 0], [0, h/m, −h/m, 1], [0, −h/m, h/m, 1], [μ, −1, −1, 0]]``,
    ``q = (y + hẏ − h²g, −ẋ − (h/m)x_app, ẋ + (h/m)x_app, 0)``.
    """
    x, y, xd, yd = state
    A = np.array([[h * h / m, 0.0, 0.0, 0.0],
                  [0.0, h / m, -h / m, 1.0],
                  [0.0, -h / m, h / m, 1.0],
                  [mu, -1.0, -1.0, 0.0]])
    q = np.array([y + h * yd - h * h * g, -xd - h / m * x_app, xd + h / m * x_app, 0.0])
    return A, q


def berard_trinkle_step(state, mu: float = 0.2, h: float = 0.05, m: float = 1.0, g: float = G,
                        x_app: float = 5.0) -> SeedStep:
    """One step: ẋ⁺ = ẋ + (h/m)(x_app − λ_f1 + λ_f2), ẏ⁺ = ẏ + (h/m)(λ_n − mg), q⁺ = q + hν⁺."""
    A, q = berard_trinkle_lcp(state, mu, h, m, g, x_app)
    r = _solve(A, q)
    ln, lf1, lf2, sig = (float(v) for v in r.z)
    x, y, xd, yd = state
    xd1 = xd + h / m * (x_app - lf1 + lf2)
    yd1 = yd + h / m * (ln - m * g)
    return SeedStep({"state": np.array([x + h * xd1, y + h * yd1, xd1, yd1]),
                     "forces": np.array([ln, lf1, lf2, sig])}, A, q, r)


def berard_trinkle_trajectory(mu: float = 0.2, h: float = 0.05, q0=(0.0, 3.0), nu0=(0.0, 0.0),
                              x_app: float = 5.0, m: float = 1.0, g: float = G, steps: int = 100):
    """Forward simulation of seed 003's particle (defaults: the slides' values, ν⁰ = 0 assumed).

    Returns:
        states: (x, y, ẋ, ẏ) per step l = 0..steps, shape (steps+1, 4).
        forces: (λ_n, λ_f1, λ_f2, σ) of the step that produced state l (row 0 zeros), shape (steps+1, 4).
    """
    states = np.zeros((steps + 1, 4))
    forces = np.zeros((steps + 1, 4))
    states[0] = (q0[0], q0[1], nu0[0], nu0[1])
    for l in range(steps):
        s = berard_trinkle_step(states[l], mu, h, m, g, x_app)
        states[l + 1] = s.values["state"]
        forces[l + 1] = s.values["forces"]
    return states, forces


# --------------------------------------------------------------------------------------------
# seed 001: Moreau midpoint step with Newton restitution (Glocker–Studer), planar particle
# --------------------------------------------------------------------------------------------


def glocker_lcp(Minv, WN, WT, f, h, uA, mu, eN, eT):
    """(A, b) of the planar Moreau-midpoint contact LCP in z = (Λ_N, Λ_R, ξ_L) (docs/lcp.md §3).

    Percussions Λ [N·s]; W_N, W_T (n_q × k); ξ_N = γ_N^E + ε_N γ_N^A, Λ_R = μΛ_N + Λ_T,
    Λ_L = μΛ_N − Λ_T, ξ_T = ξ_R − ξ_L.
    ``A = [[W_NᵀM⁻¹(W_N − W_Tμ), W_NᵀM⁻¹W_T, 0], [W_TᵀM⁻¹(W_N − W_Tμ), W_TᵀM⁻¹W_T, I], [2μ, −I, 0]]``,
    ``b = (W_NᵀM⁻¹fh + (I+ε_N)γ_N^A, W_TᵀM⁻¹fh + (I+ε_T)γ_T^A, 0)``.
    """
    k = WN.shape[1]
    mu = np.diag(np.broadcast_to(np.asarray(mu, float), (k,)))
    eN = np.diag(np.broadcast_to(np.asarray(eN, float), (k,)))
    eT = np.diag(np.broadcast_to(np.asarray(eT, float), (k,)))
    I = np.eye(k)
    A = np.block([[WN.T @ Minv @ (WN - WT @ mu), WN.T @ Minv @ WT, np.zeros((k, k))],
                  [WT.T @ Minv @ (WN - WT @ mu), WT.T @ Minv @ WT, I],
                  [2.0 * mu, -I, np.zeros((k, k))]])
    b = np.concatenate([WN.T @ Minv @ f * h + (I + eN) @ (WN.T @ uA),
                        WT.T @ Minv @ f * h + (I + eT) @ (WT.T @ uA), np.zeros(k)])
    return A, b


def bouncing_particle(y0: float = 1.0, ux0: float = 1.0, h: float = 1e-3, eN: float = 0.5, mu: float = 0.2,
                      m: float = 1.0, g: float = G, steps: int = 1000):
    """Particle on the ground y ≥ 0, Moreau midpoint stepping with Newton restitution (ε_T = 0).

    Midpoint q_M = q^A + (h/2)u^A; the contact is active when y_M ≤ 0; then the LCP of
    ``glocker_lcp`` gives u^E = u^A + M⁻¹(fh + W_NΛ_N + W_TΛ_T) with Λ_T = Λ_R − μΛ_N; q^E = q_M + (h/2)u^E.

    Returns:
        list of per-step dicts (step index 1-based, q, u, and for active steps uA, Λ_N, Λ_T, pivots).
    """
    Minv = np.eye(2) / m
    WN = np.array([[0.0], [1.0]])
    WT = np.array([[1.0], [0.0]])
    f = np.array([0.0, -m * g])
    q = np.array([0.0, y0])
    u = np.array([ux0, 0.0])
    out = []
    for k in range(1, steps + 1):
        qM = q + 0.5 * h * u
        rec = {"step": k}
        if qM[1] <= 0.0:
            A, b = glocker_lcp(Minv, WN, WT, f, h, u, mu, eN, 0.0)
            r = _solve(A, b)
            LN, LR = r.z[0], r.z[1]
            LT = LR - mu * LN
            uE = u + Minv @ (f * h + WN[:, 0] * LN + WT[:, 0] * LT)
            rec.update(uA=u.copy(), Lambda_N=float(LN), Lambda_T=float(LT), pivots=r.pivots)
        else:
            uE = u + Minv @ f * h
        q = qM + 0.5 * h * uE
        u = uE
        rec.update(q=q.copy(), u=u.copy())
        out.append(rec)
    return out


# --------------------------------------------------------------------------------------------
# printing
# --------------------------------------------------------------------------------------------


def _fmt(d):
    return ", ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in d.items())


def report() -> str:
    """All examples' results as text (what ``convexsim seeds`` prints)."""
    lines = ["Seed 000 — falling block (Δt = 0.01, unit mass)"]
    for x, xd in [(1.0, 0.0), (0.001, -2.0)]:
        s = falling_block_step(x, xd, 0.01)
        lines.append(f"  (x, ẋ) = ({x}, {xd}) -> {_fmt(s.values)}  [pivots {s.result.pivots}]")
    lines.append("Seed 000 — sliding block, forward (Δt = 0.01, μ = 0.3)")
    for xd, u in [(0.0, 1.0), (0.5, 1.0), (0.0, 5.0)]:
        s = sliding_block_forward_step(xd, u, 0.01, 0.3)
        lines.append(f"  (ẋ, u) = ({xd}, {u}) -> {_fmt(s.values)}")
    lines.append("Seed 000 — bidirectional, direct vs traditional (Δt = 0.01, μ = 0.3)")
    for v, u in [(0.5, -1.0), (0.0, 2.0), (-0.3, 4.0), (0.02, -5.0)]:
        sd = sliding_block_direct_step(max(v, 0.0), max(-v, 0.0), u, 0.01, 0.3)
        st = sliding_block_traditional_step(v, u, 0.01, 0.3)
        lines.append(f"  (v, u) = ({v}, {u}) -> direct v' = {sd.values['v']:.6g} "
                     f"(ẋ⁺ẋ⁻ = {sd.values['xdot_pos'] * sd.values['xdot_neg']:.1g}, slack λ'⁺ = "
                     f"{sd.values['slack_pos']:.6g}); traditional v' = {st.values['v']:.6g}")
    lines.append("Seed 000 §3.2.1 — creep from an error −ε in q₁ (stick case a = 0)")
    for eps in (1e-2, 1e-3):
        s = traditional_creep(0.0, eps)
        lines.append(f"  ε = {eps:g}: γ = {s.values['gamma']:.6g} (ε/2 = {eps / 2:g}), "
                     f"λ⁺ + λ⁻ = {s.values['lambda_sum']:.6g} (μmg = {0.3 * G:.6g})")
    lines.append("Seed 003 — Berard–Trinkle particle (μ = 0.2, h = 0.05, q⁰ = (0, 3), x_app = 5, ν⁰ = 0)")
    states, forces = berard_trinkle_trajectory()
    lines.append("     l          x          y         ẋ         ẏ   (λ_n, λ_f1, λ_f2, σ)")
    for l in (15, 16, 17, 50, 100):
        x, y, xd, yd = states[l]
        fr = ", ".join(f"{v:.6g}" for v in forces[l])
        lines.append(f"  {l:4d} {x:10.6f} {y:10.6f} {xd:9.5f} {yd:9.5f}   ({fr})")
    lines.append("Seed 001 — bouncing particle, Moreau midpoint, ε_N = 0.5, μ = 0.2, h = 1e-3")
    hist = bouncing_particle(steps=600)
    first = next(r for r in hist if "Lambda_N" in r)
    lines.append(f"  first impact at step {first['step']}: u^A = {np.round(first['uA'], 5).tolist()} -> "
                 f"u^E = {np.round(first['u'], 5).tolist()}, Λ_N = {first['Lambda_N']:.6g}, "
                 f"Λ_T = {first['Lambda_T']:.6g}, −u^E_y/u^A_y = {-first['u'][1] / first['uA'][1]:.15g}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the worked LCP examples (``convexsim seeds``). Returns the exit code."""
    parser = argparse.ArgumentParser(prog="convexsim seeds", description="Run the worked LCP examples "
                                     "(docs/lcp.md §3) and print their results.")
    parser.parse_args(argv)
    print(report())
    return 0


__all__ = ["SeedStep", "SeedLcpError", "falling_block_step", "sliding_block_forward_step",
           "sliding_block_direct_step", "traditional_lcp", "sliding_block_traditional_step",
           "traditional_creep", "berard_trinkle_lcp", "berard_trinkle_step", "berard_trinkle_trajectory",
           "glocker_lcp", "bouncing_particle", "report", "main"]
