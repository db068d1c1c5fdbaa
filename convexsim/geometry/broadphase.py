"""Broad phase: candidate geometry pairs from bounding spheres (sort and sweep) and halfspace supports.

Every non-halfspace geometry g is bounded by the ball of radius ρ_g (``bounding_radius``) about its
origin, and carries a margin share m_g >= 0 [m]: the margin of a pair is m_i + m_j (a uniform pair
margin m is m_g = m/2; the steppers give each geometry its body's motion bound over the step). Two
geometries are a candidate pair when |c_i − c_j| <= ρ_i + ρ_j + m_i + m_j. The sweep sorts the
intervals [c_i·e − ρ_i − m_i, c_i·e + ρ_i + m_i] along the world axis e on which the centres spread
most, and tests only pairs whose intervals overlap: O(n log n + k) for k overlapping intervals,
instead of the n(n − 1)/2 tests of ``brute_force_pairs``.

Halfspaces (unbounded) are handled apart: a halfspace h = (p, n) and a geometry g form a pair when
the lowest point of g along n is within the pair's margin, n·(c_g − p) − s_g(n) <= m_h + m_g, with
s_g(n) the support half-width of g along n.

Pairs of geometries on the same body, pairs of two fixed bodies and halfspace–halfspace pairs are
never reported, nor pairs that the collision filter excludes: with ``geom_filter`` (ngeom, 2) holding each
geometry's (group, mask) bits, i and j are a pair only if (group_i & mask_j) | (group_j & mask_i) ≠ 0
(MuJoCo's contype/conaffinity rule; ``geom_filter=None``: no filter). With ``tree_filter`` = (body_tree,
body_moves, tree_base) of a model with kinematic trees, the tree-pair rule (``tree_admits``) also holds: no pair
within one tree, between a link and the fixed body its tree hangs from, or between two bodies without dofs, so
those pairs never reach the narrow phase. A pair is (A, B) with A the halfspace if there is one, else the lower
geom index.
"""

from __future__ import annotations

import numpy as np

from convexsim._jit import jit
from convexsim.geometry.transforms import dot3, sub3
from convexsim.model import GeomType

# convexsim.model.GeomType's values as plain ints for the kernels (compile-time constants).
SPHERE = int(GeomType.SPHERE)
BOX = int(GeomType.BOX)
CAPSULE = int(GeomType.CAPSULE)
HALFSPACE = int(GeomType.HALFSPACE)
CYLINDER = int(GeomType.CYLINDER)
MESH = int(GeomType.MESH)


@jit(borrowed=True)
def bounding_radius(gtype: int, size: np.ndarray) -> float:
    """Radius [m] of the smallest origin-centred ball containing the geometry (inf for a halfspace)."""
    if gtype == SPHERE:
        return size[0]
    if gtype == BOX or gtype == MESH:  # a mesh is bounded by its hull's box (half extents about G's origin)
        return np.sqrt(size[0] ** 2 + size[1] ** 2 + size[2] ** 2)
    if gtype == CAPSULE:
        return size[0] + size[1]
    if gtype == CYLINDER:
        return np.sqrt(size[0] ** 2 + size[1] ** 2)
    return np.inf


@jit(borrowed=True)
def support_half_width(gtype: int, size: np.ndarray, R: np.ndarray, n: np.ndarray) -> float:
    """max over the geometry of n·(x − c) [m] for a unit n: r, Σ h_i|R_i·n| or r + h|R_z·n|; cylinder
    h|R_z·n| + r·sqrt(1 − (R_z·n)²); a mesh: its hull's box's (an upper bound)."""
    if gtype == SPHERE:
        return size[0]
    if gtype == CYLINDER:
        c = abs(dot3(R[:, 2], n))
        return size[1] * c + size[0] * np.sqrt(max(0.0, 1.0 - c * c))
    if gtype == BOX or gtype == MESH:
        return (
            size[0] * abs(dot3(R[:, 0], n))
            + size[1] * abs(dot3(R[:, 1], n))
            + size[2] * abs(dot3(R[:, 2], n))
        )
    if gtype == CAPSULE:
        return size[0] + size[1] * abs(dot3(R[:, 2], n))
    return np.inf


@jit(borrowed=True)
def filter_admits(i: int, j: int, geom_filter) -> bool:
    """Whether the collision filter lets geometries i and j collide: (group_i & mask_j) | (group_j & mask_i) ≠ 0
    (always, without a filter)."""
    if geom_filter is None:
        return True
    return (geom_filter[i, 0] & geom_filter[j, 1]) != 0 or (geom_filter[j, 0] & geom_filter[i, 1]) != 0


@jit(borrowed=True)
def tree_admits(bi: int, bj: int, tree_filter) -> bool:
    """The tree-pair rule for bodies bi and bj, ``tree_filter`` = (body_tree (nbody,), −1 outside trees;
    body_moves (nbody,) bool; tree_base (ntree,), the fixed body each tree hangs from, −1 the world): False
    for two links of one tree, a link and its tree's base body, two bodies without dofs (always True without
    a filter)."""
    if tree_filter is None:
        return True
    body_tree, body_moves, tree_base = tree_filter
    ti = body_tree[bi]
    tj = body_tree[bj]
    if ti >= 0 and ti == tj:
        return False
    if not body_moves[bi] and not body_moves[bj]:
        return False
    return not ((tj >= 0 and tree_base[tj] == bi) or (ti >= 0 and tree_base[ti] == bj))


@jit(borrowed=True)
def _allowed(i: int, j: int, geom_body: np.ndarray, body_fixed: np.ndarray, geom_filter, tree_filter) -> bool:
    """Geometries on different bodies, not both fixed, admitted by the collision filter and the tree rule."""
    bi = geom_body[i]
    bj = geom_body[j]
    return (bi != bj and not (body_fixed[bi] and body_fixed[bj]) and filter_admits(i, j, geom_filter)
            and tree_admits(bi, bj, tree_filter))


@jit
def _one_tree_only(idx: np.ndarray, geom_body: np.ndarray, tree_filter) -> bool:
    """Whether the geometries ``idx`` all sit on the links of one tree T or on T's base body, so that the tree
    rule (:func:`tree_admits`) admits none of their pairs: a lone robot on its base (a Menagerie arm with its
    floor; halfspaces are not in ``idx``). O(len(idx)); False without a tree filter."""
    if tree_filter is None:
        return False
    body_tree, _, tree_base = tree_filter
    T = -1
    for k in range(idx.shape[0]):
        t = body_tree[geom_body[idx[k]]]
        if t >= 0:
            if T < 0:
                T = t
            elif t != T:
                return False
    if T < 0:
        return False
    for k in range(idx.shape[0]):
        b = geom_body[idx[k]]
        if body_tree[b] < 0 and b != tree_base[T]:
            return False
    return True


@jit(borrowed=True)
def _emit(a: int, b: int, total: int, pairs: np.ndarray) -> int:
    """Store pair (a, b) at row ``total`` if it fits; returns total + 1."""
    if total < pairs.shape[0]:
        pairs[total, 0] = a
        pairs[total, 1] = b
    return total + 1


@jit(borrowed=True)
def _halfspace_pairs(
    geom_type: np.ndarray,
    geom_size: np.ndarray,
    geom_body: np.ndarray,
    body_fixed: np.ndarray,
    pos: np.ndarray,
    rot: np.ndarray,
    gmargin: np.ndarray,
    pairs: np.ndarray,
    total: int,
    geom_filter,
    tree_filter,
) -> int:
    """Append (halfspace, geom) pairs whose support test passes; returns the new total."""
    ngeom = geom_type.shape[0]
    for h in range(ngeom):
        if geom_type[h] != HALFSPACE:
            continue
        n = rot[h, :, 2]                       # the halfspace's normal (a view: nothing allocated)
        for g in range(ngeom):
            if geom_type[g] == HALFSPACE or not _allowed(h, g, geom_body, body_fixed, geom_filter, tree_filter):
                continue
            height = (
                n[0] * (pos[g, 0] - pos[h, 0]) + n[1] * (pos[g, 1] - pos[h, 1]) + n[2] * (pos[g, 2] - pos[h, 2])
            ) - support_half_width(geom_type[g], geom_size[g], rot[g], n)
            if height <= gmargin[h] + gmargin[g]:
                total = _emit(h, g, total, pairs)
    return total


@jit
def sweep_and_prune_pairs(
    geom_type: np.ndarray,
    geom_size: np.ndarray,
    geom_body: np.ndarray,
    body_fixed: np.ndarray,
    pos: np.ndarray,
    rot: np.ndarray,
    gmargin: np.ndarray,
    pairs: np.ndarray,
    geom_filter=None,
    tree_filter=None,
) -> int:
    """All candidate pairs (sort and sweep + halfspaces) into ``pairs`` (cap, 2).

    ``gmargin`` (ngeom,) holds each geometry's margin share m_g [m]; a pair's margin is m_i + m_j.
    ``geom_filter``: None, or (ngeom, 2) int64 (group, mask) bits; ``tree_filter``: None, or (body_tree,
    body_moves, tree_base) (``tree_admits``; module docstring).
    Returns the number of pairs found; if it exceeds ``pairs.shape[0]`` only the first rows were
    written and the caller must retry with a larger buffer.
    """
    ngeom = geom_type.shape[0]
    idx = np.empty(ngeom, np.int64)
    m = 0
    for g in range(ngeom):
        if geom_type[g] != HALFSPACE:
            idx[m] = g
            m += 1
    idx = idx[:m]
    total = 0
    if m > 1 and not _one_tree_only(idx, geom_body, tree_filter):     # else no pair to sweep for
        rho = np.empty(m)
        for k in range(m):
            rho[k] = bounding_radius(geom_type[idx[k]], geom_size[idx[k]])
        centres = pos[idx]
        axis = 0
        best_var = -1.0
        for e in range(3):
            var = np.var(centres[:, e])
            if var > best_var:
                best_var = var
                axis = e
        mg = gmargin[idx]
        lo = centres[:, axis] - rho - mg
        hi = centres[:, axis] + rho + mg
        order = np.argsort(lo, kind="mergesort")
        for ii in range(m):
            ki = order[ii]
            i = idx[ki]
            for jj in range(ii + 1, m):
                kj = order[jj]
                if lo[kj] > hi[ki]:
                    break
                j = idx[kj]
                if not _allowed(i, j, geom_body, body_fixed, geom_filter, tree_filter):
                    continue
                dx = centres[ki, 0] - centres[kj, 0]
                dy = centres[ki, 1] - centres[kj, 1]
                dz = centres[ki, 2] - centres[kj, 2]
                reach = rho[ki] + rho[kj] + mg[ki] + mg[kj]
                if dx * dx + dy * dy + dz * dz <= reach * reach:
                    total = _emit(min(i, j), max(i, j), total, pairs)
    return _halfspace_pairs(geom_type, geom_size, geom_body, body_fixed, pos, rot, gmargin, pairs, total,
                            geom_filter, tree_filter)


@jit
def brute_force_pairs(
    geom_type: np.ndarray,
    geom_size: np.ndarray,
    geom_body: np.ndarray,
    body_fixed: np.ndarray,
    pos: np.ndarray,
    rot: np.ndarray,
    gmargin: np.ndarray,
    pairs: np.ndarray,
    geom_filter=None,
    tree_filter=None,
) -> int:
    """Reference broad phase: the same pair rule as ``sweep_and_prune_pairs`` by testing all pairs."""
    ngeom = geom_type.shape[0]
    total = 0
    for i in range(ngeom):
        if geom_type[i] == HALFSPACE:
            continue
        for j in range(i + 1, ngeom):
            if geom_type[j] == HALFSPACE or not _allowed(i, j, geom_body, body_fixed, geom_filter, tree_filter):
                continue
            d = sub3(pos[i], pos[j])
            reach = (
                bounding_radius(geom_type[i], geom_size[i])
                + bounding_radius(geom_type[j], geom_size[j])
                + gmargin[i]
                + gmargin[j]
            )
            if dot3(d, d) <= reach * reach:
                total = _emit(i, j, total, pairs)
    return _halfspace_pairs(geom_type, geom_size, geom_body, body_fixed, pos, rot, gmargin, pairs, total,
                            geom_filter, tree_filter)
