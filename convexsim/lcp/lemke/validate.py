"""Input validation and normalization of an LCP (M, q, d) before a solve: shapes, finiteness, the covering
vector, and M in canonical CSR form when it comes as a scipy.sparse matrix."""

from __future__ import annotations

import numpy as np
import scipy.sparse


def as_sparse_lcp_matrix(M) -> "scipy.sparse.csr_matrix | None":
    """M as a CSR matrix (float64, sorted indices, no duplicates, no stored zeros) if it is a scipy.sparse matrix,
    else None: M itself if it is one already (no copy; the solvers never write to M), else a new one.

    ``lemke`` and ``lemke_from_basis`` accept M in sparse form: it goes straight to the sparse-LU kernel
    (``method`` "sparse" or "auto"; the dense methods get ``M.toarray()``), without an n × n dense copy."""
    if not scipy.sparse.issparse(M):
        return None
    if (isinstance(M, scipy.sparse.csr_matrix) and M.dtype == np.float64 and M.has_canonical_format
            and np.all(M.data != 0.0)):
        return M            # already in this form (the stepper's islands, each solver stage after the first)
    Mr = scipy.sparse.csr_matrix(M, dtype=np.float64, copy=True)
    Mr.sum_duplicates()
    Mr.eliminate_zeros()
    Mr.sort_indices()
    return Mr


def validate_lcp(M, q, d):
    Ms = as_sparse_lcp_matrix(M)
    M = Ms if Ms is not None else np.asarray(M, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"LCP matrix M must be square (n, n); got shape {M.shape}")
    n = M.shape[0]
    if q.shape != (n,):
        raise ValueError(f"LCP vector q must have shape ({n},) to match M {M.shape}; got {q.shape}")
    if Ms is not None:
        if not np.all(np.isfinite(Ms.data)):
            k = int(np.flatnonzero(~np.isfinite(Ms.data))[0])
            i = int(np.searchsorted(Ms.indptr, k, side="right") - 1)
            raise ValueError(f"LCP matrix M has a non-finite entry at ({i}, {int(Ms.indices[k])})")
    elif not np.all(np.isfinite(M)):
        bad = np.argwhere(~np.isfinite(M))[0]
        raise ValueError(f"LCP matrix M has a non-finite entry at {tuple(int(i) for i in bad)}")
    if not np.all(np.isfinite(q)):
        raise ValueError(f"LCP vector q has a non-finite entry at index {int(np.flatnonzero(~np.isfinite(q))[0])}")
    if d is None:
        d = np.ones(n)
    else:
        d = np.asarray(d, dtype=np.float64)
        if d.shape != (n,):
            raise ValueError(f"covering vector d must have shape ({n},); got {d.shape}")
        if not np.all(np.isfinite(d)) or np.any(d <= 0.0):
            raise ValueError("covering vector d must be finite with every entry > 0 "
                             f"(got min {np.nanmin(d) if np.any(np.isfinite(d)) else d[0]})")
    return (M if Ms is not None else np.ascontiguousarray(M)), np.ascontiguousarray(q), np.ascontiguousarray(d)
