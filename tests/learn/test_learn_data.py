"""Learning data: the block's two formulations and the particle's LCP against closed forms; files."""

import numpy as np
import pytest

from convexsim.lcp.seeds import berard_trinkle_lcp
from convexsim.learn.data import (
    LearnDataError,
    block_lcp,
    load_data,
    make_block_data,
    make_particle_data,
    particle_lcp,
    particle_step_closed_form,
    save_data,
)


def test_block_lcp_data_equals_the_direct_formulation():
    """Lemke on the block's friction LCP reproduces the closed-form soft threshold step for step.

    Both compute implicit-Euler Coulomb friction; only round-off of v + Δt(u + λ⁺ − λ⁻) differs
    (tolerance 1e-12 m/s on |v| ≲ 2 m/s). Mode labels must agree exactly.
    """
    a = make_block_data(episodes=2, steps=600, seed=5, formulation="direct")
    b = make_block_data(episodes=2, steps=600, seed=5, formulation="lcp")
    np.testing.assert_array_equal(a.X[:, 1], b.X[:, 1])
    np.testing.assert_allclose(b.Y, a.Y, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(a.modes, b.modes)
    frac = np.bincount(a.modes, minlength=3) / len(a.modes)
    assert 0.15 < frac[0] < 0.5 and frac[1] > 0.15 and frac[2] > 0.15, frac  # every mode well represented


def test_block_lcp_matrix_is_the_traditional_formulation():
    """w = Mz + q gives v_{k+1} ± γ and the unused friction μmg − λ⁺ − λ⁻ (Δt = 0.01, m = 2)."""
    M, q = block_lcp(0.1, 3.0, 0.01, 0.3, mass=2.0)
    z = np.array([0.2, 0.5, 0.04])
    v1 = 0.1 + 0.01 * (3.0 + 0.2 - 0.5) / 2.0
    np.testing.assert_allclose(M @ z + q, [v1 + 0.04, -v1 + 0.04, 0.3 * 2.0 * 9.81 - 0.7], rtol=1e-14)


def test_particle_lcp_matches_berard_trinkle_and_the_closed_form():
    """With u_y = 0 the particle LCP is Berard–Trinkle's; every generated step equals the closed form."""
    state, u = (0.3, 0.02, 1.5, -0.7), (4.0, 0.0)
    A, q = particle_lcp(state, u, 0.05, 0.2)
    A0, q0 = berard_trinkle_lcp(state, 0.2, 0.05, 1.0, 9.81, 4.0)
    np.testing.assert_array_equal(A, A0)
    np.testing.assert_allclose(q, q0, rtol=1e-15, atol=1e-15)
    d = make_particle_data(episodes=6, steps=150, seed=9)
    assert set(np.unique(d.modes)) == {0, 1, 2, 3}
    for x, y, m in zip(d.X, d.Y, d.modes):
        s1, m1 = particle_step_closed_form(x[:4], x[4:], 0.01, 0.3)
        np.testing.assert_allclose(y, s1, rtol=0, atol=1e-11)  # m, m/s of order 1: round-off only
        assert m == m1
    onfloor = d.modes > 0
    np.testing.assert_allclose(d.Y[onfloor, 1], 0.0, atol=1e-12)  # contact steps end exactly on the floor


def test_data_file_round_trip_and_errors(tmp_path):
    """save_data/load_data keep every array and scalar; a foreign npz is refused with the missing names."""
    d = make_block_data(episodes=2, steps=50, seed=1)
    path = save_data(tmp_path / "d.npz", d)
    e = load_data(path)
    for k in ("X", "Y", "modes", "episode", "gate_columns"):
        np.testing.assert_array_equal(getattr(e, k), getattr(d, k))
    assert e.mode_names == d.mode_names and e.meta["system"] == "block" and e.meta["dt"] == 0.01
    assert not list(tmp_path.glob(".d.npz*"))  # no temporary left behind
    np.savez(tmp_path / "bad.npz", X=np.zeros((3, 2)))
    with pytest.raises(LearnDataError, match="missing Y"):
        load_data(tmp_path / "bad.npz")
    train, test = e.split_episodes(0.5)
    assert set(train.episode) == {0} and set(test.episode) == {1}
