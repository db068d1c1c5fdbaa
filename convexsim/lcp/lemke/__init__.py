"""Lemke's complementary pivoting algorithm for the linear complementarity problem.

Problem LCP(M, q): find ``z ∈ ℝⁿ`` with

    z ≥ 0,   w = M z + q ≥ 0,   zᵀw = 0.

Method (docs/lcp.md): dense tableau ``B⁻¹[I | −M | −d | q]`` over the variables
``w_1..w_n, z_1..z_n, z0`` (indices 0..n−1, n..2n−1, 2n). An artificial variable ``z0`` with
covering vector ``d > 0`` makes ``(w = q + d z0, z = 0)`` feasible; complementary pivoting then
walks the almost-complementary path until ``z0`` leaves the basis (solved), the entering column
has no positive entry (secondary ray), or the pivot limit is hit.

Two ratio tests (``LemkeOptions.ratio_test``):

* ``"textbook"``: the minimum ratio; among ratios tied up to their rounding noise, ``z0`` leaves if
  it is tied, otherwise the lexicographic minimum of the rows ``(q̄_i, B⁻¹_{i,·}) / c_i`` (the
  ε-perturbation ``q + (ε, ε², …)``, which cannot cycle). Its pivot counts are the published ones.
* ``"harris"`` (default): built for degenerate, noisy data (contact LCPs: resting contacts, coplanar
  manifold points), where the textbook test lets the last bits of M and q decide.

  - Pass 1 bounds the step by ``θ = min_i (r_i⁺ + δ_i)/c_i``, δ_i a feasibility tolerance scaled to
    row i's data: a step lowers no basic value by more than δ_i below max(its value, 0).
  - Pass 2 takes the eligible rows ``r_i⁺/c_i ≤ θ`` (negative rhs, rounding noise of a feasible basis,
    count as 0; entries at their own noise level ``(|B⁻¹||a|)_i`` are not pivots): ``z0`` if it is
    there; otherwise pivots far below the largest eligible one are dropped (a tiny pivot never wins on
    a noise-sized ratio) and the lexicographic rule decides among the rest (no cycling at degenerate
    vertices). A negative rhs in the pivot row is set to 0 first (bound shift: the step is never
    backwards).
  - After every pivot, when ``z0`` is small enough to be dropped, the basic point without ``z0`` goes
    through the final check and the path stops if it passes (degenerate contact data pass through
    solutions long before ``z0`` leaves).

After a solve the final basis is re-solved from the original data (``M_αα z_α = −q_α``, α the
basic ``z``s), the better of the two candidates is kept, and ``z ≥ 0``, ``w ≥ 0``, ``z∘w ≈ 0`` are
checked with scaled tolerances; a failed check gives ``NUMERICAL_FAILURE``, never a wrong "solved".
Every ``refactor_every`` pivots the tableau is rebuilt from the original data with a fresh LU
of the basis (drift control), and also before a lexicographic tie decision once ``max(8, n)``
pivots have passed since the last rebuild: the decision reads ``B⁻¹``, whose accumulated rounding
noise otherwise decides near-ties (Fathi's SPD family lost 4 of its 2⁸ pivots that way). A rebuild
(LU of the basis, then B⁻¹ applied to the 2n + 2 tableau columns: ≈ 4.7 n³ flops) costs as much as
about 1.2·n pivots (a pivot updates the n × (2n + 2) tableau: ≈ 4 n² flops), so this at most about
doubles the work. ``refactor_every = 0`` turns off both kinds of rebuild.

References: K. G. Murty, *Linear Complementarity, Linear and Nonlinear Programming* (1988), ch. 2;
R. W. Cottle, J.-S. Pang, R. E. Stone, *The Linear Complementarity Problem* (1992), §4.4;
P. M. J. Harris, "Pivot selection methods of the Devex LP code", Math. Programming 5 (1973) (two-pass
ratio test).

Modules, one idea each (the names below are all re-exported here):

* ``options``: ``LemkeOptions``, the ratio tests and methods, the pivot limits.
* ``result``: ``LemkeStatus``, ``LemkeResult``. ``workspace``: ``LemkeWorkspace``, the reusable buffers.
* ``checks``: the final check on the original data (dense and CSR M), the restart's gain test, ``lcp_residual``.
* ``pivot_rules``: the rules all three kernels share: the entry row of z0, the textbook and Harris ratio tests,
  the lexicographic tie-break, the secondary ray, the early exit.
* ``tableau``: the dense tableau kernel and the pieces the revised kernel shares with it (LU, original columns,
  the end of a path).
* ``revised``: the revised kernel (B⁻¹ and B⁻¹q only; ``method="revised"``).
* ``sparse`` and ``sparse_kernels``: the sparse-LU kernel (``method="sparse"``; ``"auto"`` on large sparse M).
* ``validate``: input validation, M in canonical CSR form.
* ``warm``: warm starts from a guessed basis (``independent_basis``, ``solve_from_basis``).
* ``solve``: the entry points ``lemke`` and ``lemke_from_basis``: kernel choice and the restart from the last
  basis.
"""

from convexsim.lcp.lemke.checks import (RESTART_MAX_GAIN, both_finite, final_check, final_check_sparse, inf_norm,
                                        lcp_residual, plausible_gain)
from convexsim.lcp.lemke.options import LemkeOptions, default_max_pivots
from convexsim.lcp.lemke.result import LemkeResult, LemkeStatus
from convexsim.lcp.lemke.pivot_rules import harris_passes
from convexsim.lcp.lemke.revised import REBUILD_LU_MAX, compressed_transpose, pivot_rhs, revised_buffers
from convexsim.lcp.lemke.solve import lemke, lemke_from_basis
from convexsim.lcp.lemke.validate import as_sparse_lcp_matrix
from convexsim.lcp.lemke.warm import BasisSolveResult, independent_basis, solve_from_basis
from convexsim.lcp.lemke.workspace import LemkeWorkspace

__all__ = ["lemke", "LemkeResult", "LemkeStatus", "LemkeOptions", "LemkeWorkspace", "lcp_residual",
           "default_max_pivots", "solve_from_basis", "BasisSolveResult", "lemke_from_basis", "independent_basis",
           "as_sparse_lcp_matrix", "plausible_gain", "RESTART_MAX_GAIN", "REBUILD_LU_MAX", "both_finite",
           "compressed_transpose", "harris_passes", "pivot_rhs", "revised_buffers", "final_check", "final_check_sparse",
           "inf_norm"]
