"""convexsim: convex compliant-contact simulation of rigid bodies.

Each time step is one strictly convex, unconstrained problem in the next velocities (SAP,
Castro, Permenter & Han, IEEE T-RO 2023); a classic rigid LCP stepper (Lemke) runs on the same
scenes as the reference. See README.md and docs/.

The shipped scenes (with their robot descriptions and meshes) are the data package
``convexsim.scenes`` and the viewer is ``convexsim.viz``: the repository's top-level ``scenes/`` and
``viz/`` folders, mapped into the package when it is built or installed (editable installs alike).
"""

__version__ = "0.1.0"
