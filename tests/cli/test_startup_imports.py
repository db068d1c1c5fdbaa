"""What the light commands import: `--help` (of the command and of every subcommand), `scenes`, `info` and
`validate` load no numba (so no kernel either), and the help texts no numpy, pydantic, scipy, matplotlib or
dask. Checked in fresh interpreters by listing sys.modules (speed itself is measured by
`convexsim bench --startup`, never asserted in tests)."""

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


def _imports(args, cwd) -> tuple[int, set[str]]:
    out = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True, cwd=cwd,
                         check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result["code"], {m.split(".")[0] for m in result["modules"]}


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
