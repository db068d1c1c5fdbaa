"""The compiled dense assembly of the contact LCP (``_assemble_dense``, used on small islands) against the
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
    from convexsim.stepping import lcp_stepper as stepper

    rng = np.random.default_rng(11 + d + 100 * block)
    for nb, m in ((1, 1), (2, 3), (5, 20)):
        args = _random_problem(rng, nb, m, block) + (d,)
        monkeypatch.setattr(stepper, "DENSE_ASSEMBLY_WORK", 10**12)
        M, q, lay = stepper.build_contact_lcp(*args)
        monkeypatch.setattr(stepper, "DENSE_ASSEMBLY_WORK", -1)
        M0, q0, lay0 = stepper.build_contact_lcp(*args)
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
    from convexsim.stepping import lcp_stepper as stepper

    monkeypatch.setattr(stepper, "DENSE_ASSEMBLY_WORK", work)
    model, state, _ = prepare(str(shipped_scene_path(name)), solver="lcp")
    ctx = StepContext()
    qs, vs = [], []
    for _ in range(int(round(duration / model.time_step))):
        state, _ = stepper.lcp_step(model, state, ctx)
        qs.append(state.q.copy())
        vs.append(state.v.copy())
    return np.array(qs), np.array(vs)


@pytest.mark.blas_variant
@pytest.mark.parametrize("name,duration", [("sphere_drop", 1.0), ("box_slide", 1.0), ("box_stack", 0.3)])
def test_trajectories_equal_reference_assembly(monkeypatch, name, duration):
    from convexsim.stepping import lcp_stepper as stepper

    assert stepper.DENSE_ASSEMBLY_WORK > 0                    # the dense path is the default on these scenes
    q, v = _trajectory(name, duration, monkeypatch, stepper.DENSE_ASSEMBLY_WORK)
    q0, v0 = _trajectory(name, duration, monkeypatch, -1)
    assert np.abs(q - q0).max() <= 1e-9, np.abs(q - q0).max()
    assert np.abs(v - v0).max() <= 1e-7, np.abs(v - v0).max()
