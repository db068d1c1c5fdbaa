"""Options of Lemke's method: the tolerances and choices of ``LemkeOptions``, the ratio tests and methods they
name, and the pivot limits derived from them."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

EPS = float(np.finfo(np.float64).eps)
"""Machine epsilon of float64: the unit of the default tolerances."""


class LemkeOptions(NamedTuple):
    """Tolerances of ``lemke`` (all dimensionless; they multiply data scales, see docs/lcp.md).

    Attributes:
        pivot_tol: an entering-column entry is a pivot candidate when ``c_i > pivot_tol·n·s``,
            s = max(1, ‖M‖∞, ‖d‖∞).
        ratio_rel_tol: ratios tie when ``ρ_i − ρ* ≤ ratio_rel_tol·|ρ*| + rhs_tol·(e_i/c_i + e*/c*)``
            with the rhs noise scale ``e_i = (|B⁻¹| |q|)_i`` of each row.
        rhs_tol: multiplies the rhs noise scale (ratio ties above; the trivial test ``q ≥ −rhs_tol·‖q‖∞``).
            Too loose a tie lets the lexicographic rule pick a row with a larger true ratio, which
            makes the basis slightly infeasible and derails degenerate (contact) problems; too tight
            lets rounding noise decide genuine ties.
        lex_rel_tol: lexicographic entries are equal when within ``lex_rel_tol`` relative, plus
            an absolute floor ``lex_abs_tol·max(‖row a‖∞, ‖row b‖∞)`` of the pair compared.
        lex_abs_tol: see lex_rel_tol. A floor scaled by the largest entry over *all* tied rows (tried:
            100ε·n·max) merged distinct lexicographic vectors on 240-variable contact problems and let
            the path cycle; without any floor rounding noise decides exact ties (Fathi's problem).
        check_tol: final check tolerance factor ``t = check_tol·n``: ``z ≥ −t·‖z‖∞``,
            ``w ≥ −t·s_w``, ``|z_i w_i| ≤ t·‖z‖∞·s_w`` with ``s_w = ‖M‖∞‖z‖∞ + ‖q‖∞``.
        refactor_every: rebuild the tableau from (M, q, d) every this many pivots (0 = never, −1 = automatic:
            max(50, 2n); a rebuild costs about as much as 1.2·n pivots). 0 also turns off the rebuild
            before lexicographic tie decisions.
        ratio_test: ``"harris"`` (default; robust on noisy degenerate data, module docstring) or
            ``"textbook"`` (minimum ratio, z0 first, lexicographic ties: the classic path, whose
            pivot counts match the literature; no early exit).
        harris_tol: Harris feasibility tolerance factor: a basic variable may go down to
            ``−δ_i = −harris_tol·n·max(e_i, f_i)`` (e_i = (|B⁻¹||q|)_i its rounding-noise scale, f_i its
            data scale: ‖q‖∞ for a w, ‖q‖∞/‖M‖∞ for a z). Default 1000ε: 10× below the final check's
            tolerance. 100ε, 300ε and 1000ε all leave a residual failure rate of ~1e-4 on perturbed box_stack
            LCPs (the stepper's fallback chain covers it); 1000ε takes the fewest pivots.
        harris_pivot_ratio: pass 2 keeps the eligible rows whose pivot is ``c_i ≥ harris_pivot_ratio·c_max``
            (c_max the largest eligible pivot) and the lexicographic rule decides among them. Near 1 this
            is "the largest pivot"; that cycled on Siconos' 40×40 ``lcp_tobenna`` (a degenerate vertex
            with exact zero rhs, where only the lexicographic rule prevents cycling), so the default
            1e-6 only excludes pivots a million times smaller than the best eligible one.
        method: ``"auto"`` (default): ``"sparse"`` for large sparse M (n ≥ ``sparse.AUTO_MIN_SIZE``, at
            most ``AUTO_MAX_DENSITY`` nonzero), ``"revised"`` otherwise. ``"sparse"``: the basis as a sparse
            LU with an eta file (``convexsim.lcp.lemke.sparse``; same rules, sketched noise scales, so the path
            may differ from the dense kernels' on degenerate data). ``"revised"``: keep only B⁻¹ and B⁻¹q and compute the entering column as B⁻¹a
            (a sparse product: contact LCPs are a few percent dense); a pivot updates B⁻¹ on the pivot
            row's nonzero columns (at most k + 1, k the basic z's) and a rebuild inverts B with LAPACK.
            ``"tableau"``: the dense tableau B⁻¹[I | −M | −d | q] (2n + 2 columns per pivot). Both walk
            the same path with the same rules; they differ in rounding only (docs/lcp.md §1, "Revised
            Lemke").
        restart: a run that ends in NUMERICAL_FAILURE or on a secondary ray starts once more from its last
            basis (the complementary basis of its basic z's, factorized afresh from the original data, with the
            warm start's covering vector; ``lemke_from_basis``), within the pivots left. Near-degenerate
            contact LCPs can end on a complementary basis that is infeasible by a few rounding units times
            the basis condition; that basis is next to a solution and the restart takes 2–200 pivots
            (docs/lcp.md §1, "Restart from the last basis"). An answer still has to pass the final check; if the
            restart fails too, the first run's result is returned (pivots of both counted). False: one run.
            Only with the Harris rule (``ratio_test="textbook"`` is always the classic single run).
    """

    pivot_tol: float = 10.0 * EPS
    ratio_rel_tol: float = 1e-12
    rhs_tol: float = 10.0 * EPS
    lex_rel_tol: float = 1e-12
    lex_abs_tol: float = 10.0 * EPS
    check_tol: float = 1e4 * EPS
    refactor_every: int = -1
    ratio_test: str = "harris"
    harris_tol: float = 1000.0 * EPS
    harris_pivot_ratio: float = 1e-6
    method: str = "auto"
    restart: bool = True


RATIO_TESTS = {"textbook": 0, "harris": 1}
"""``LemkeOptions.ratio_test`` -> the kernels' ``harris`` flag."""

METHODS = ("auto", "revised", "tableau", "sparse")
"""The values of ``LemkeOptions.method``."""


def default_max_pivots(n: int) -> int:
    """max(1000, 50 n): O(n) pivots are expected on solvable problems; the cap guards degenerate ones."""
    return max(1000, 50 * int(n))


def pivot_limits(n: int, opts: "LemkeOptions", max_pivots: int | None) -> tuple[int, int]:
    """(pivot cap, rebuild interval) for an n×n LCP: the caller's cap or ``default_max_pivots(n)``;
    ``opts.refactor_every``, or max(50, 2n) when it is negative."""
    if max_pivots is None:
        max_pivots = default_max_pivots(n)
    refactor = int(opts.refactor_every)
    if refactor < 0:
        refactor = max(50, 2 * n)
    return max_pivots, refactor
