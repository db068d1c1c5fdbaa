"""The package outside its checkout: a wheel built from the repository, installed in a fresh virtual
environment and run from an empty folder, finds its scenes, robot descriptions, meshes and viewer.

The fresh environment holds only the wheel: its dependencies are the test environment's (a ``.pth`` file
names the test environment's site-packages, whose own ``.pth`` files, the editable install's finder among
them, are not run), so what is checked is the package's own files. The runs set ``NUMBA_DISABLE_JIT``:
numba keys its kernel cache by the source file's path, so the installed copy's kernels would compile anew
(minutes); the kernels themselves are tested by the rest of the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import numpy as np
import pytest

from convexsim.io.trajectory import load_trajectory
from repo_paths import REPO, SCENES

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, env: dict | None = None, timeout: float = 240) -> str:
    """Run ``cmd`` (in ``_env()`` unless ``env``); its stdout, or a failure with both streams."""
    proc = subprocess.run(cmd, cwd=cwd, env=env or _env(jit=True), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _shipped_files() -> set[str]:
    """The files under scenes/ that the wheel must carry, relative to scenes/ (no caches)."""
    return {p.relative_to(SCENES).as_posix() for p in SCENES.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(wheel, fresh venv's python, empty working folder) with the wheel installed in the venv."""
    tmp = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp / "dist"), str(REPO)], tmp)
    (wheel,) = (tmp / "dist").glob("convexsim-*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp)
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)], tmp)
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp).strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_test_env_dependencies.pth").write_text("\n".join(sorted(deps)) + "\n", encoding="utf-8")
    empty = tmp / "empty"
    empty.mkdir()
    return wheel, python, empty


def _env(jit: bool = False) -> dict:
    """This process's environment without the checkout on PYTHONPATH (the suite's conftest puts it there);
    numba's compiler off unless ``jit``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    if not jit:
        env["NUMBA_DISABLE_JIT"] = "1"
    return env


def test_wheel_carries_every_scene_robot_and_mesh(installed):
    wheel, _, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = {f for f in _shipped_files() if f"convexsim/scenes/{f}" not in names}
    assert not missing, f"not in the wheel: {sorted(missing)}"
    assert "convexsim/__main__.py" in names and "convexsim/viz/__init__.py" in names


def test_installed_package_lists_every_scene_from_an_empty_folder(installed):
    _, python, empty = installed
    where = _run([str(python), "-c", "import convexsim, convexsim.scenes, convexsim.viz as v; "
                  "print(convexsim.__file__); print(v.__file__)"], empty, _env()).split()
    venv = python.parents[1]
    assert all(Path(w).resolve().is_relative_to(venv.resolve()) for w in where), where
    listed = _run([str(python.parent / "convexsim"), "scenes"], empty, _env())
    names = {line.split()[0] for line in listed.splitlines() if line.strip()}
    assert {p.stem for p in SCENES.glob("*.yaml")} <= names, listed


def test_installed_package_runs_a_free_body_and_a_robot_scene(installed):
    """sphere_drop (free body) through the console script; robotiq_pick (a URDF-derived gripper with OBJ
    meshes, found relative to the installed scene) through ``python -m convexsim``. Both from an empty
    folder; the written trajectories hold one frame per step plus the initial one."""
    _, python, empty = installed
    _run([str(python.parent / "convexsim"), "run", "sphere_drop", "--duration", "0.01", "--quiet",
          "--out", "sphere.npz"], empty, _env())
    _run([str(python), "-m", "convexsim", "run", "robotiq_pick", "--duration", "0.003", "--quiet",
          "--out", "robot.npz"], empty, _env())
    sphere, robot = load_trajectory(empty / "sphere.npz"), load_trajectory(empty / "robot.npz")
    assert len(sphere.time) == 11 and len(robot.time) == 4
    # the ball falls freely (no contact before t ≈ 0.43 s): the time stepping's symplectic Euler gives
    # z_n = z_0 − g·dt²·n(n+1)/2 exactly, up to round-off (1e-12 m against 5.4e-4 m of fall)
    ball = list(sphere.body_names).index("ball")
    n = np.arange(11)
    np.testing.assert_allclose(sphere.position[:, ball, 2], 1.0 - 9.81 * 1e-6 * n * (n + 1) / 2, rtol=0, atol=1e-12)
    assert any("robotiq" in n or "finger" in n for n in robot.body_names), robot.body_names
