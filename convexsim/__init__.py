"""convexsim: convex compliant-contact simulation of rigid bodies.

Each time step is one strictly convex, unconstrained problem in the next velocities (SAP,
Castro, Permenter & Han, IEEE T-RO 2023); a classic rigid LCP stepper (Lemke) runs on the same
scenes as the reference. See README.md and docs/.
"""

__version__ = "0.1.0"
