"""convexsim: convex compliant-contact simulation of rigid bodies.

Each time step is one strictly convex, unconstrained problem in the next velocities (SAP,
Castro, Permenter & Han, IEEE T-RO 2023); a classic rigid LCP stepper (Lemke) runs on the same
scenes as the reference. See README.md and docs/.
"""

__version__ = "0.1.0"


def _use_this_checkouts_viewer() -> None:
    """In a source checkout (``pyproject.toml`` next to ``convexsim/``), ``convexsim.viz`` is this checkout's
    top-level ``viz/``, not the folder an editable install of another checkout (e.g. a git worktree's main)
    maps it to."""
    import os
    import sys
    from importlib.machinery import ModuleSpec
    from importlib.util import spec_from_file_location

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    init = os.path.join(root, "viz", "__init__.py")
    if not (os.path.isfile(init) and os.path.isfile(os.path.join(root, "pyproject.toml"))):
        return

    class _CheckoutViz:
        @staticmethod
        def find_spec(fullname, path=None, target=None) -> "ModuleSpec | None":
            if fullname != "convexsim.viz":
                return None
            return spec_from_file_location(fullname, init, submodule_search_locations=[os.path.dirname(init)])

    sys.meta_path.insert(0, _CheckoutViz())


_use_this_checkouts_viewer()


def __getattr__(name: str):
    """``convexsim.Simulation`` (``convexsim.sim``), imported on first use so that ``import convexsim`` stays light."""
    if name == "Simulation":
        from convexsim.sim import Simulation

        return Simulation
    raise AttributeError(f"module 'convexsim' has no attribute {name!r}")
