"""The revised Lemke (``LemkeOptions.method="revised"``, the default) against the dense tableau
(``method="tableau"``): the same path and the same answers.

Why they can agree bit for bit: the revised kernel keeps B⁻¹ (the tableau's first n columns) updated by the
same row operations, and forms an entering z column by applying the pivots since the last rebuild to the
original column, in order: that is the tableau's own update of that column, operation for operation. Up to
``REBUILD_LU_MAX`` unknowns a rebuild also uses the tableau's LU, so the runs are identical (status, pivots, z,
basis); above it a rebuild uses the LAPACK inverse, and the two agree to rounding (docs/lcp.md §1, "Revised
Lemke"). The cases: random P-matrix and contact-like PSD LCPs, both ratio tests, forced rebuilds, the
captured box_stack LCPs and the Siconos files, and the warm start.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from convexsim.lcp.lemke import REBUILD_LU_MAX, LemkeOptions, LemkeWorkspace, lemke, lemke_from_basis
from test_lcp_regressions import CASES, independent_check, load_case, passes_final_check, perturbed
from test_lemke import SICONOS, SICONOS_RAY, SICONOS_SOLVED, read_siconos

DATA = Path(__file__).parent / "data"
CAPTURED = ["box_stack_step52_lcp", "box_stack_step1842_lcp", "box_stack_prescott_step1951"]


def _both(M, q, **kw):
    o = kw.pop("options", LemkeOptions())
    a = lemke(M, q, options=o._replace(method="revised"), **kw)
    b = lemke(M, q, options=o._replace(method="tableau"), **kw)
    return a, b


def _identical(a, b):
    assert a.status == b.status and a.pivots == b.pivots
    np.testing.assert_array_equal(a.z, b.z)
    np.testing.assert_array_equal(a.basis, b.basis)


def _contact_like(m, d, seed, bodies=4):
    """A contact-structured LCP (frictional, polyhedral cone with d directions): M = [[WᵀA⁻¹W, E], [μ, −Eᵀ, 0]]
    with W from random contact Jacobians on a few bodies (PSD block of rank ≤ 6·bodies, as in a pile) and
    q = (Wᵀv*, 0) with v* pushing bodies into contact."""
    from convexsim.stepping.lcp_problem import build_contact_lcp

    rng = np.random.default_rng(seed)
    nv = 6 * bodies
    A = rng.standard_normal((nv, nv))
    Ainv = np.linalg.inv(A @ A.T + nv * np.eye(nv))
    J = np.zeros((m, 3, nv))
    for c in range(m):
        b = rng.integers(bodies)
        J[c, :, 6 * b:6 * b + 6] = rng.standard_normal((3, 6))
    v_star = rng.standard_normal(nv)
    M, q, _ = build_contact_lcp(Ainv, v_star, J, -0.1 * rng.random(m), np.full(m, 0.5), d)
    return M, q


@pytest.mark.roundoff
@pytest.mark.parametrize("rule", ["harris", "textbook"])
@pytest.mark.parametrize("seed", range(8))
def test_random_p_matrix_identical_runs(seed, rule):
    from test_warm_lemke import _p_matrix

    M, q = _p_matrix(12 + 7 * seed, seed)
    a, b = _both(M, q, options=LemkeOptions(ratio_test=rule))
    assert a.solved
    _identical(a, b)


@pytest.mark.roundoff
@pytest.mark.parametrize("refactor", [-1, 7])
@pytest.mark.parametrize("seed", range(6))
def test_contact_like_lcps_identical_runs(seed, refactor):
    # refactor_every = 7 forces rebuilds (the LU path below REBUILD_LU_MAX): still the same run
    # (random jammed contacts may have no solution: then both end on the same ray)
    M, q = _contact_like(6 + 3 * seed, 4, seed)
    a, b = _both(M, q, options=LemkeOptions(refactor_every=refactor))
    _identical(a, b)
    assert not a.solved or independent_check(M, q, a.z)
    assert a.pivots > (7 if refactor == 7 else 1)


@pytest.mark.roundoff
@pytest.mark.parametrize("name", CAPTURED + CASES)
def test_captured_box_stack_lcps_identical_runs(name):
    if name in CASES:
        M, q, _ = load_case(name)
    else:
        d = np.load(DATA / f"{name}.npz")
        M, q = d["M"], d["q"]
    for rule in ("harris", "textbook"):   # the textbook rule fails on some of them, identically
        a, b = _both(M, q, options=LemkeOptions(ratio_test=rule))
        _identical(a, b)
        assert a.solved or rule == "textbook"


@pytest.mark.roundoff
@pytest.mark.parametrize("name", CASES)
def test_perturbed_captured_lcps_identical_runs(name):
    M, q, nw = load_case(name)
    rng = np.random.default_rng(11)
    for k in range(12):
        Mp, qp = perturbed(M, q, nw, ["rel16", "rel15", "q12"][k % 3], rng)
        a, b = _both(Mp, qp)
        _identical(a, b)
        assert a.solved and passes_final_check(M, q, a.z)


@pytest.mark.roundoff
@pytest.mark.parametrize("name", SICONOS_SOLVED + SICONOS_RAY)
def test_siconos_files_identical_runs(name):
    M, q = read_siconos(SICONOS / f"{name}.dat")
    for rule in ("harris", "textbook"):
        a, b = _both(M, q, options=LemkeOptions(ratio_test=rule))
        _identical(a, b)


@pytest.mark.roundoff
def test_above_the_lu_size_rebuilds_agree_to_rounding():
    # n > REBUILD_LU_MAX with a rebuild every 25 pivots: the revised rebuild inverts B with LAPACK, so the runs
    # differ in rounding; on a P-matrix (unique solution) both find it: equal to 1e-10 relative.
    from test_warm_lemke import _p_matrix

    n = REBUILD_LU_MAX + 20
    M, q = _p_matrix(n, 3)
    a, b = _both(M, q, options=LemkeOptions(refactor_every=25))
    assert a.solved and b.solved and a.pivots > 25
    np.testing.assert_allclose(a.z, b.z, rtol=0.0, atol=1e-10 * np.abs(b.z).max())
    assert np.abs(a.pivots - b.pivots) <= 2


@pytest.mark.parametrize("seed", range(4))
def test_warm_start_agrees(seed):
    # lemke_from_basis: the revised start forms B⁻¹ and B⁻¹q only (not B⁻¹M), then the same kernel path; the
    # starting values come from different BLAS products, so the runs agree to rounding. A P-matrix LCP has one
    # solution: both find it from a half-wrong guess.
    from test_warm_lemke import _p_matrix

    M, q = _p_matrix(40, 100 + seed)
    z = lemke(M, q).z
    rng = np.random.default_rng(seed)
    guess = (z > 0) ^ (rng.random(40) < 0.3)
    a = lemke_from_basis(M, q, guess, options=LemkeOptions(method="revised"))
    b = lemke_from_basis(M, q, guess, options=LemkeOptions(method="tableau"))
    assert a.solved and b.solved
    np.testing.assert_allclose(a.z, z, rtol=0.0, atol=1e-10 * np.abs(z).max())
    np.testing.assert_allclose(b.z, z, rtol=0.0, atol=1e-10 * np.abs(z).max())


def test_workspace_serves_both_methods():
    # one workspace, sizes up and down, alternating methods: results equal to fresh solves
    ws = LemkeWorkspace(4)
    for seed, n in enumerate([5, 30, 9, 30]):
        M, q = _contact_like(n // 3 + 1, 3, seed)
        for method in ("revised", "tableau"):
            r = lemke(M, q, workspace=ws, options=LemkeOptions(method=method))
            ref = lemke(M, q, options=LemkeOptions(method=method))
            assert r.status == ref.status and r.pivots == ref.pivots
            np.testing.assert_array_equal(r.z, ref.z)


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="method"):
        lemke(np.eye(2), [-1.0, -1.0], options=LemkeOptions(method="bogus"))
