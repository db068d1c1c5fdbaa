"""What the light commands import: `--help` (of the command and of every subcommand), `scenes`, `info` and
`validate` load no numba (so no kernel either), and the help texts no numpy, pydantic, scipy, matplotlib or
dask; `run` of a free-body SAP scene imports the compiled run loop and not the other paths (reference and
LCP steppers, trees, studies, plotting, scipy.linalg). Checked in fresh interpreters by listing sys.modules
(speed itself is measured by `convexsim bench --startup`, never asserted in tests)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from convexsim.cli import build_parser

_PROBE = """
import contextlib, io, json, sys
import convexsim.cli as cli
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = cli.main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

HEAVY_FOR_HELP = ("numba", "llvmlite", "numpy", "scipy", "pydantic", "matplotlib", "dask", "yaml", "rich")


def _all_imports(args, cwd) -> tuple[int, set[str]]:
    """(exit code, every module name in sys.modules) of `convexsim *args` in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, cwd=cwd,
                         check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result["code"], set(result["modules"])


def _imports(args, cwd) -> tuple[int, set[str]]:
    """(exit code, the top-level packages imported) of `convexsim *args` in a fresh interpreter."""
    code, modules = _all_imports(args, cwd)
    return code, {m.split(".")[0] for m in modules}


def _subcommands() -> list[str]:
    action = next(a for a in build_parser()._actions if a.dest == "command")
    return sorted(action.choices)


def test_every_subcommand_is_probed():
    assert {"run", "study", "learn", "identify", "bench", "view"} <= set(_subcommands())


@pytest.mark.parametrize("args", [["--help"]] + [[c, "--help"] for c in _subcommands()])
def test_help_imports_nothing_heavy(args, tmp_path):
    """Check `convexsim [COMMAND] --help` builds every parser without importing a heavy library."""
    code, modules = _imports(args, tmp_path)
    assert code == 0
    assert not modules & set(HEAVY_FOR_HELP), sorted(modules & set(HEAVY_FOR_HELP))


def test_light_commands_load_no_numba(tmp_path):
    """Check `scenes`, `validate` and `info` work without importing numba (no kernel is loaded)."""
    from convexsim.io import save_trajectory
    from convexsim.simulate import simulate

    save_trajectory(tmp_path / "t.npz", simulate("sphere_drop", duration=0.002))
    for args in (["scenes"], ["validate", "sphere_drop", "box_stack"], ["info", "t.npz"]):
        code, modules = _imports(args, tmp_path)
        assert code == 0, args
        assert not modules & {"numba", "llvmlite", "matplotlib", "dask"}, (args, sorted(modules))


NOT_FOR_A_FREE_BODY_RUN = (
    "matplotlib", "dask", "rich", "scipy.linalg", "scipy.sparse", "scipy.optimize",
    "convexsim.viz", "convexsim.inverse", "convexsim.tools.compare_engines", "convexsim.lcp",
    "convexsim.multibody.forest", "convexsim.multibody.reference_step",
    "convexsim.stepping.lcp_reference", "convexsim.stepping.sap_stepper", "convexsim.stepping.context",
    "convexsim.sap.solver", "convexsim.sap.linalg",
)
"""Modules (and their submodules) that `run` of a free-body SAP scene must not import: the compiled run loop
needs neither the reference, LCP and articulated steppers nor the analysis packages, and numba finds BLAS
without the scipy.linalg package (``convexsim._jit``): its extension module ``scipy.linalg.cython_blas`` alone."""

PARSER_ONLY = ("convexsim.studies", "convexsim.learn", "convexsim.identify")
"""Packages whose ``cli`` module builds a subcommand's parser: `run` may import those two modules only."""


def test_run_imports_only_the_compiled_path(tmp_path):
    """Check `convexsim run sphere_drop --quiet` imports the compiled run loop and nothing for other paths."""
    from convexsim.simulate import simulate

    simulate("sphere_drop", duration=0.002)          # the kernels are compiled (or cached) before the probe
    code, modules = _all_imports(["run", "sphere_drop", "--duration", "0.01", "--quiet"], tmp_path)
    assert code == 0
    assert (tmp_path / "sphere_drop.npz").is_file()
    assert "convexsim.stepping.sap_composition" in modules     # the probe did run the compiled loop
    bad = {m for m in modules for p in NOT_FOR_A_FREE_BODY_RUN if m == p or m.startswith(p + ".")}
    bad -= {"scipy.linalg.cython_blas"}
    bad |= {m for m in modules for p in PARSER_ONLY
            if m.startswith(p + ".") and m != p + ".cli"}
    assert not bad, sorted(bad)
