"""The supernodal factor's dense kernels on their own, and the whole factor on pile-like graphs wide enough to
take every path of them (register tiles with padding rows, the blocked triangular solve with its remainder,
diagonal blocks wider than CHOL_BLOCK, contiguous and scattered target columns).

Oracles: numpy products and Cholesky factors, and the backward-error bounds of the algorithms, which cannot be
tuned: a dot product of w terms is exact to γ_w·Σ|a_t b_t| (γ_w = w·ε/(1 − w·ε)), a triangular solve has a
backward error |D X − B| <= γ_w·|D|·|X| entrywise, a Cholesky factor |L Lᵀ − A| <= γ_(n+1)·|L|·|Lᵀ| entrywise
(Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., Thms. 3.5, 8.5, 10.3). The factor 2 below on
each γ covers the one extra rounding per stored sum (the kernels add four products at a time into a stored
entry); a misplaced entry or a missing update is an O(1) error, far above these bounds.
"""

from __future__ import annotations

import numpy as np
import pytest

from convexsim.sap import block_sparse as bs
from convexsim.sap import supernodal as sn
from tests.sap.test_block_sparse import sap_like_problem
from tests.sap.test_supernodal import dense_L

EPS = np.finfo(float).eps


def gamma(n: int) -> float:
    return n * EPS / (1.0 - n * EPS)


@pytest.mark.parametrize("w", [1, 3, 4, 5, 8, 9, 33])
@pytest.mark.parametrize("subtract", [False, True])
def test_syrk_rows4_is_b_bt_to_dot_product_accuracy(w, subtract):
    """Rows i0..i0+3 of B Bᵀ up to column i0+3, stored or subtracted, for every four-row strip of B."""
    rng = np.random.default_rng(w)
    r = 12
    B = rng.standard_normal((r, w))
    BT = np.ascontiguousarray(B.T)
    ref = B @ B.T
    bound = 2 * gamma(w) * (np.abs(B) @ np.abs(B).T)
    for i0 in range(0, r, 4):
        start = rng.standard_normal((4, r))
        out = start.copy()
        sn._syrk_rows4(BT, i0, out, 0, subtract)
        want = start[:, :i0 + 4] - ref[i0:i0 + 4, :i0 + 4] if subtract else ref[i0:i0 + 4, :i0 + 4]
        scale = bound[i0:i0 + 4, :i0 + 4] + (2 * EPS * np.abs(start[:, :i0 + 4]) if subtract else 0.0)
        assert np.all(np.abs(out[:, :i0 + 4] - want) <= scale)
        assert np.array_equal(out[:, i0 + 4:], start[:, i0 + 4:])  # columns beyond the strip untouched


@pytest.mark.parametrize("w", [1, 2, 3, 4, 5, 7, 8, 12, 13, 37])
def test_solve_lower_rows_backward_error(w):
    """X <- D⁻¹ X (the panel solve B <- B D⁻ᵀ on Bᵀ): |D X − X0| <= 2·γ_w·|D|·|X| entrywise."""
    rng = np.random.default_rng(100 + w)
    D = np.tril(rng.standard_normal((w, w))) + np.diag(2.0 + rng.random(w))
    X0 = rng.standard_normal((w, 9))
    X = X0.copy()
    sn._solve_lower_rows(D, X)
    assert np.all(np.abs(D @ X - X0) <= 2 * gamma(w) * (np.abs(D) @ np.abs(X)))
    assert np.abs(X - np.linalg.solve(D, X0)).max() <= 1e-10 * np.abs(X).max()  # cond(D) is small here


@pytest.mark.parametrize("w", [1, 4, 5, 31, 32, 33, 37, 70, 100])
def test_chol_lower_across_column_blocks(w):
    """The blocked dense Cholesky of a diagonal block (blocks of CHOL_BLOCK columns, in-place trailing update
    four rows at a time): the numpy factor to backward-error accuracy, zeros above the diagonal."""
    rng = np.random.default_rng(200 + w)
    M = rng.standard_normal((w, w + 3))
    A = M @ M.T + 0.1 * np.eye(w)
    D = np.tril(A) + np.triu(rng.standard_normal((w, w)), 1)  # the strict upper part is never read
    ptbuf, acc = np.empty(w * sn.CHOL_BLOCK), np.empty(w)
    assert sn._chol_lower(D, ptbuf, acc) == -1
    assert np.all(np.triu(D, 1) == 0.0)
    assert np.all(np.abs(D @ D.T - A) <= 2 * gamma(w + 1) * (np.abs(D) @ np.abs(D).T))
    L_ref = np.linalg.cholesky(A)
    assert np.abs(D - L_ref).max() <= 1e-8 * np.abs(L_ref).max()  # cond(A) <~ 1e4 here: forward error small
    A[w // 2, w // 2] = -1.0
    assert sn._chol_lower(np.tril(A), ptbuf, acc) == w // 2  # the failing column


def pile_graph(nx, ny, nz, rng, diagonal_fraction=0.3):
    """Bodies on a 3D lattice touching their lattice neighbours and some diagonal ones (a resting pile's
    contact graph), edges (a < b) unique."""
    idx = np.arange(nx * ny * nz).reshape(nx, ny, nz)
    edges = [np.stack([idx[:-1].ravel(), idx[1:].ravel()], 1), np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], 1),
             np.stack([idx[:, :, :-1].ravel(), idx[:, :, 1:].ravel()], 1)]
    diag = np.stack([idx[:-1, :-1].ravel(), idx[1:, 1:].ravel()], 1)
    edges.append(diag[rng.random(len(diag)) < diagonal_fraction])
    return np.unique(np.sort(np.concatenate(edges), axis=1), axis=0).astype(np.int64)


@pytest.mark.parametrize("shape, sizes_from", [((6, 6, 6), (6,)), ((5, 5, 7), (6, 3)), ((9, 9, 2), (6, 4, 1))])
def test_factor_of_pile_graphs_within_the_backward_error_bound(shape, sizes_from):
    """Whole factor and solve on pile-like graphs: |L Lᵀ − P H Pᵀ| <= 2·γ_(n+1)·|L|·|Lᵀ| entrywise and the
    solve's relative residual ‖H x − b‖∞ <= c·n·ε·‖H‖∞·‖x‖∞ with c = 4 (a backward-stable factor and two
    triangular solves, each with an n·ε backward error bound in the ∞-norm)."""
    rng = np.random.default_rng(sum(shape))
    edges = pile_graph(*shape, rng)
    nb = int(np.prod(shape))
    sizes = rng.choice(np.asarray(sizes_from), nb)
    d, ev, _ = sap_like_problem(sizes, edges, rng)
    H = bs.to_dense(sizes, edges, d, ev)
    sym = sn.analyze(sizes, edges)
    w = np.diff(sym.sn_col)
    r = np.diff(sym.sn_rowptr)
    assert w.max() > sn.CHOL_BLOCK and np.any(r % 4 != 0) and np.any(r >= 8)  # every kernel path is taken
    fac = sn.factor(sym, d, ev)
    L = dense_L(sym, fac)
    p = sym.scalar_perm
    Hp = H[np.ix_(p, p)]
    n = sym.n
    assert np.all(np.triu(L, 1) == 0.0)
    assert np.all(np.abs(L @ L.T - Hp) <= 2 * gamma(n + 1) * (np.abs(L) @ np.abs(L).T))
    b = rng.standard_normal(n)
    x = sn.solve(sym, fac, b)
    assert np.abs(H @ x - b).max() <= 4 * n * EPS * np.abs(H).sum(axis=1).max() * np.abs(x).max()
    assert np.abs(L - np.linalg.cholesky(Hp)).max() <= 1e-10 * np.abs(L).max()  # the unique Cholesky factor


def test_scatter_takes_both_contiguous_and_scattered_target_columns():
    """Mixed block sizes make some update groups land on non-consecutive target columns: the factor is still
    the dense one (the scattered path of _scatter_update), and most groups are contiguous (the plain loop)."""
    rng = np.random.default_rng(7)
    edges = pile_graph(5, 5, 7, rng)
    sizes = rng.choice(np.array([6, 3]), 175)
    sym = sn.analyze(sizes, edges)
    contiguous = []
    r = np.diff(sym.sn_rowptr)
    for s in range(sym.supernodes):
        g0, g1 = sym.upd_ptr[s], sym.upd_ptr[s + 1]
        for g in range(g0, g1):
            a = sym.upd_first[g]
            b = sym.upd_first[g + 1] if g + 1 < g1 else r[s]
            rel = sym.upd_rel[sym.upd_relptr[g]:sym.upd_relptr[g + 1]]
            contiguous.append(rel[b - a - 1] - rel[0] == b - a - 1)
    assert 0 < sum(contiguous) < len(contiguous)
    d, ev, _ = sap_like_problem(sizes, edges, rng)
    H = bs.to_dense(sizes, edges, d, ev)
    L = dense_L(sym, sn.factor(sym, d, ev))
    p = sym.scalar_perm
    assert np.abs(L - np.linalg.cholesky(H[np.ix_(p, p)])).max() <= 1e-10 * np.abs(L).max()
