"""convexsim.identify: material parameters from recorded trajectories (docs/identify.md).

    from convexsim.identify import identify, write_report
    ident = identify("run.npz", ("mu",))          # μ per material pair in contact, MPEC and SAP fits
    write_report(ident, "out/")                     # report.md, fit.png, residuals.png, estimates.csv

Modules: ``mpec`` (Berard–Trinkle MPEC as smoothed sparse least squares), ``fit`` (both estimators on a
scene trajectory), ``berard_trinkle`` (the seed particle: forward model, Tables 1 and 2), ``report``,
``cli`` (``convexsim identify``).
"""

from convexsim.identify.fit import Estimate, Identification, IdentificationError, MethodResult, identify
from convexsim.identify.report import write_report

__all__ = ["Estimate", "Identification", "IdentificationError", "MethodResult", "identify", "write_report"]
