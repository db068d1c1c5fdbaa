"""The compiled dense assembly of the contact LCP (``assemble_dense``, used on small islands) against the
scipy.sparse assembly it replaces there (the reference, still used above ``DENSE_ASSEMBLY_WORK``).

Both compute the same sums in a different order, so (M, q) agree to round-off: entrywise within
1e-13·(‖M‖ scale) on random problems. Trajectories of small shipped scenes run with each assembly agree
to 1e-9 m / 1e-7 m/s (measured: ≤ 4e-14 m and 6e-11 m/s on box_stack, 0 on sphere_drop; a bound far above round-off growth over the run and far
below any physical difference, which is mm and cm/s)."""

from __future__ import annotations

import numpy as np
import pytest


def _random_problem(rng, nb, m, block):
    nv = 6 * nb
    if block:
        Ainv = np.zeros((nv, nv))
        for b in range(nb):
            X = rng.standard_normal((6, 6))
            Ainv[6 * b:6 * b + 6, 6 * b:6 * b + 6] = X @ X.T + 6 * np.eye(6)
    else:
        X = rng.standard_normal((nv, nv))
        Ainv = X @ X.T + nv * np.eye(nv)
    J = np.zeros((m, 3, nv))
    for c in range(m):
        for b in rng.choice(nb, size=min(2, nb), replace=False):
            J[c, :, 6 * b:6 * b + 6] = rng.standard_normal((3, 6))
    return Ainv, rng.standard_normal(nv), J, rng.standard_normal(m), rng.uniform(0.0, 1.0, m)


@pytest.mark.parametrize("block", [True, False])
@pytest.mark.parametrize("d", [0, 4, 8])
def test_dense_assembly_matches_sparse(monkeypatch, block, d):
    from convexsim.stepping import lcp_problem

    rng = np.random.default_rng(11 + d + 100 * block)
    for nb, m in ((1, 1), (2, 3), (5, 20)):
        args = _random_problem(rng, nb, m, block) + (d,)
        monkeypatch.setattr(lcp_problem, "DENSE_ASSEMBLY_WORK", 10**12)
        M, q, lay = lcp_problem.build_contact_lcp(*args)
        monkeypatch.setattr(lcp_problem, "DENSE_ASSEMBLY_WORK", -1)
        M0, q0, lay0 = lcp_problem.build_contact_lcp(*args)
        scale = np.abs(M0).max()
        assert M.shape == M0.shape and lay.size == lay0.size
        assert np.abs(M - M0).max() <= 1e-13 * scale
        assert np.array_equal(M, M.T) or d            # frictionless M is symmetric exactly
        assert np.abs(q - q0).max() <= 1e-13 * max(np.abs(q0).max(), 1.0)
        assert np.abs(lay.AinvW - lay0.AinvW).max() <= 1e-13 * np.abs(lay0.AinvW).max()
        assert np.array_equal(lay.W, lay0.W)


def _trajectory(name, duration, monkeypatch, work):
    from convexsim.scene import shipped_scene_path
    from convexsim.simulate import prepare
    from convexsim.stepping import StepContext
    from convexsim.stepping import lcp_problem, lcp_step

    monkeypatch.setattr(lcp_problem, "DENSE_ASSEMBLY_WORK", work)
    model, state, _ = prepare(str(shipped_scene_path(name)), solver="lcp")
    ctx = StepContext()
    qs, vs = [], []
    for _ in range(int(round(duration / model.time_step))):
        state, _ = lcp_step(model, state, ctx)
        qs.append(state.q.copy())
        vs.append(state.v.copy())
    return np.array(qs), np.array(vs)


@pytest.mark.roundoff
@pytest.mark.parametrize("name,duration", [("sphere_drop", 0.6), ("box_slide", 0.5), ("box_stack", 0.3)])
def test_trajectories_equal_reference_assembly(monkeypatch, name, duration):
    # durations cover each scene's events, not its rest: sphere_drop lands at 0.427 s, box_slide stops at
    # 0.41 s (v0/(μg)), box_stack settles within ~0.03 s (were 1.0 s, 1.0 s: the resting tail added nothing)
    from convexsim.stepping import lcp_problem

    assert lcp_problem.DENSE_ASSEMBLY_WORK > 0                    # the dense path is the default on these scenes
    q, v = _trajectory(name, duration, monkeypatch, lcp_problem.DENSE_ASSEMBLY_WORK)
    q0, v0 = _trajectory(name, duration, monkeypatch, -1)
    assert np.abs(q - q0).max() <= 1e-9, np.abs(q - q0).max()
    assert np.abs(v - v0).max() <= 1e-7, np.abs(v - v0).max()


def _block_problem(rng, nb, m, fixed_share=0.3):
    """Random island in block form (per-body A⁻¹ blocks, each contact's two 3 × 6 Jacobian blocks, some
    sides on a fixed body) and the same problem as dense (A⁻¹, J) for ``build_contact_lcp``."""
    nv = 6 * nb
    X = rng.standard_normal((nb, 6, 6))
    inv = X @ np.transpose(X, (0, 2, 1)) + 6 * np.eye(6)
    Ja, Jb = rng.standard_normal((m, 3, 6)), rng.standard_normal((m, 3, 6))
    ba = rng.integers(0, nb, m)
    bb = np.where(rng.uniform(size=m) < fixed_share, -1, (ba + 1 + rng.integers(0, max(nb - 1, 1), m)) % nb)
    Ainv = np.zeros((nv, nv))
    for b in range(nb):
        Ainv[6 * b:6 * b + 6, 6 * b:6 * b + 6] = inv[b]
    J = np.zeros((m, 3, nv))
    for c in range(m):
        J[c, :, 6 * ba[c]:6 * ba[c] + 6] += Ja[c]
        if bb[c] >= 0:
            J[c, :, 6 * bb[c]:6 * bb[c] + 6] += Jb[c]
    v = rng.standard_normal(nv)
    bias, mu = rng.standard_normal(m), rng.uniform(0.0, 1.0, m)
    return (inv, v, Ja, Jb, ba, bb, bias, mu), (Ainv, v, J, bias, mu)


@pytest.mark.parametrize("d", [0, 4, 8])
def test_sparse_island_assembly_matches_dense(d):
    """``build_contact_lcp_sparse`` (large islands: per-body blocks in, M in CSR form out) against
    ``build_contact_lcp`` on the same random island: M, q, W, A⁻¹W and the velocity map agree to round-off
    (1e-13 relative: the same products summed in another order); a frictionless island (every μ = 0) drops
    β and λ in both."""
    from convexsim.stepping.lcp_problem import build_contact_lcp, build_contact_lcp_sparse

    rng = np.random.default_rng(5 + d)
    for nb, m in ((1, 1), (3, 7), (12, 40)):
        blocks, dense = _block_problem(rng, nb, m)
        for zero_mu in (False, True):
            if zero_mu:
                blocks = blocks[:7] + (np.zeros(m),)
                dense = dense[:4] + (np.zeros(m),)
            Ms, qs, ls = build_contact_lcp_sparse(*blocks, d)
            M, q, lay = build_contact_lcp(*dense, d)
            scale = np.abs(M).max()
            assert Ms.shape == M.shape and ls.size == lay.size and ls.num_directions == lay.num_directions
            np.testing.assert_allclose(Ms.toarray(), M, rtol=0, atol=1e-13 * scale)
            np.testing.assert_allclose(qs, q, rtol=0, atol=1e-13 * np.abs(q).max())
            np.testing.assert_allclose(ls.W.toarray(), lay.W, rtol=0, atol=1e-13 * np.abs(lay.W).max())
            z = rng.uniform(0.0, 1.0, lay.size)
            np.testing.assert_allclose(ls.velocity(dense[1], z), lay.velocity(dense[1], z), rtol=0,
                                       atol=1e-12 * np.abs(lay.velocity(dense[1], z)).max())
