"""convexsim.identify: material parameters from recorded trajectories (docs/identify.md).

    from convexsim.identify import identify, write_report
    ident = identify("run.npz", ("mu",))          # μ per material pair in contact, MPEC and SAP fits
    write_report(ident, "out/")                     # report.md, fit.png, residuals.png, estimates.csv

Modules: ``mpec`` (Berard–Trinkle MPEC, implicit programming or smoothed sparse least squares), ``fit`` (both estimators on a
scene trajectory), ``robot`` (joint damping, PD gains, link masses of tree scenes), ``berard_trinkle`` (the seed particle: forward model, Tables 1 and 2), ``report``,
``cli`` (``convexsim identify``). Submodules load on first use.
"""

import importlib

_LAZY = {"Estimate": "fit", "Identification": "fit", "IdentificationError": "fit", "MethodResult": "fit",
         "identify": "fit", "write_report": "report", "fit_robot": "robot"}
"""Public names and their modules, imported on first use: ``convexsim --help`` must not load the solvers."""


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(f"convexsim.identify.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'convexsim.identify' has no attribute {name!r}")


__all__ = ["Estimate", "Identification", "IdentificationError", "MethodResult", "fit_robot", "identify",
           "write_report"]
