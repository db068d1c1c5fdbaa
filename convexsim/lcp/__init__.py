"""convexsim.lcp: Lemke's algorithm, the textbook LCP examples (trajectory comparison: convexsim.io.compare).

* ``lemke(M, q, *, d=None, max_pivots=None, workspace=None, options=None) -> LemkeResult`` (convexsim.lcp.lemke, a package: one module per idea)
* ``lemke_from_basis(M, q, basic, ...) -> LemkeResult``: Lemke started from a guessed complementary basis
* the worked LCP examples behind ``convexsim examples lcp`` (convexsim.lcp.seeds)

The rigid LCP time stepper that builds contact LCPs from a scene is a sibling of the SAP stepper:
``convexsim.stepping.lcp_reference``. This package is math only: it imports no stepper, scene or viewer code.

See docs/lcp.md.
"""

from convexsim.lcp.lemke import (
    LemkeOptions,
    LemkeResult,
    LemkeStatus,
    LemkeWorkspace,
    default_max_pivots,
    lcp_residual,
    lemke,
    lemke_from_basis,
)

__all__ = ["lemke", "LemkeResult", "LemkeStatus", "LemkeOptions", "LemkeWorkspace", "lcp_residual",
           "default_max_pivots", "lemke_from_basis"]
