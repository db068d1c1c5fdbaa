"""convexsim.lcp: Lemke's algorithm, the rigid contact LCP stepper, worked examples, SAP-vs-LCP comparison.

* ``lemke(M, q, *, d=None, max_pivots=None, workspace=None, options=None) -> LemkeResult`` (convexsim.lcp.lemke)
* ``lcp_step(model, state, *, workspace=None, warm_start=None) -> (State, LcpStepInfo)``, ``build_contact_lcp``, ``LcpStepError``
  (convexsim.lcp.stepper; imported lazily, it needs the stepping pipeline)
* ``compare_trajectories``, ``format_comparison`` (convexsim.lcp.compare)
* worked LCP examples (docs/lcp.md §3) and ``main(argv)`` of ``convexsim seeds`` (convexsim.lcp.seeds)

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
)

_LAZY = {
    "lcp_step": "convexsim.lcp.stepper",
    "build_contact_lcp": "convexsim.lcp.stepper",
    "LcpStepError": "convexsim.lcp.stepper",
    "ContactLcpLayout": "convexsim.lcp.stepper",
    "compare_trajectories": "convexsim.lcp.compare",
    "format_comparison": "convexsim.lcp.compare",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'convexsim.lcp' has no attribute {name!r}")


__all__ = ["lemke", "LemkeResult", "LemkeStatus", "LemkeOptions", "LemkeWorkspace", "lcp_residual",
           "default_max_pivots", *_LAZY]
