"""Names users type: "did you mean" wherever a name is looked up, shipped scene names and paths
accepted by the Python API like the CLI; unit sanity warnings and how to silence them; an override of
a material no geometry uses warns, one that is used changes the physics as predicted."""

from __future__ import annotations

import warnings

import pytest

from convexsim.cli import EXIT_OK, EXIT_USAGE, main
from convexsim.scene import SceneError, SceneWarning, UnitWarning, list_scenes, load_scene, resolve_scene_path

UNITS_SCENE = """\
name: wrong_units
time_step: 1
bodies:
  - {name: ground, fixed: true, geometries: [{shape: halfspace}]}
  - {name: ball, mass: 500, position: [0, 0, 50], geometries: [{shape: sphere, radius: 40}]}
"""


# ----------------------------------------------------------------------------------- did you mean
def test_unknown_scene_name_suggests_the_closest(capsys, tmp_path):
    assert main(["run", "box_stak", "--out", str(tmp_path / "x.npz")]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert "did you mean 'box_stack'?" in err and "\n" not in err
    assert main(["validate", "sphere_drp"]) == EXIT_USAGE
    assert "did you mean 'sphere_drop'?" in capsys.readouterr().err
    assert main(["bench", "--scenes", "box_stak", "--no-solver-bench"]) == EXIT_USAGE
    assert "did you mean 'box_stack'?" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_unknown_scene_path_suggests_a_sibling(tmp_path, capsys):
    (tmp_path / "my_scene.yaml").write_text("bodies: []\n", encoding="utf-8")
    assert main(["validate", str(tmp_path / "my_scen.yaml")]) == EXIT_USAGE
    assert "did you mean 'my_scene.yaml'?" in capsys.readouterr().err


def test_unknown_material_suggests_the_closest(tmp_path, capsys):
    scene = tmp_path / "ice.yaml"
    scene.write_text("materials: {ice: {friction: 0.05}}\nbodies:\n"
                     "  - {name: ground, fixed: true, geometries: [{shape: halfspace, material: icee}]}\n",
                     encoding="utf-8")
    assert main(["validate", str(scene)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{scene}:3: bodies[0].geometries[0].material" in err and "did you mean 'ice'?" in err


def test_unknown_override_paths_suggest_the_closest(tmp_path, capsys):
    out = str(tmp_path / "x.npz")
    assert main(["run", "box_slide", "--set", "bodies.boxx.mass=2", "--out", out, "--quiet"]) == EXIT_USAGE
    assert "did you mean 'box'?" in capsys.readouterr().err
    assert main(["run", "box_slide", "--set", "solver.sigmaa=1e-4", "--out", out, "--quiet"]) == EXIT_USAGE
    assert "did you mean 'sigma'?" in capsys.readouterr().err


def test_unknown_study_file_suggests_the_shipped_one(capsys):
    assert main(["study", "scenes/studies/rest_penetration.yaml"]) == EXIT_USAGE
    assert "did you mean 'rest_penetration_vs_stiffness.yaml'?" in capsys.readouterr().err


def test_unknown_body_in_a_trajectory_suggests_the_closest():
    from convexsim.simulate import simulate

    traj = simulate("box_stack", duration=0.001)
    with pytest.raises(KeyError, match=r"did you mean 'box_4'\?"):
        traj.body_index("box4")


# ------------------------------------------------------------------------- names and paths in Python
def test_python_api_accepts_shipped_names_and_paths_from_anywhere(tmp_path, monkeypatch):
    from convexsim.simulate import simulate

    monkeypatch.chdir(tmp_path)                      # not the repository: paths fall back to scenes/
    by_name = load_scene("box_slide")
    assert load_scene("box_slide.yaml") == by_name == load_scene("scenes/box_slide.yaml")
    a = simulate("sphere_drop", duration=0.01)
    b = simulate("scenes/sphere_drop.yaml", duration=0.01)
    assert (a.position == b.position).all() and a.num_frames == 11
    # a file in the working directory wins over a shipped scene of the same name
    (tmp_path / "box_slide.yaml").write_text("name: mine\nbodies: []\n", encoding="utf-8")
    assert load_scene("box_slide.yaml").name == "mine"
    assert load_scene("box_slide").name == "box_slide"   # a bare name is the shipped scene
    with pytest.raises(SceneError, match="did you mean 'box_stack'"):
        simulate("box_stak")
    with pytest.raises(FileNotFoundError):
        resolve_scene_path("scenes/no_such.yaml")


# ------------------------------------------------------------------------------------ unit warnings
def test_unit_warnings_name_each_value(tmp_path):
    path = tmp_path / "u.yaml"
    path.write_text(UNITS_SCENE, encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_scene(path)
    messages = [str(w.message) for w in caught if issubclass(w.category, UnitWarning)]
    assert len(messages) == 3, messages
    assert any(m.startswith(f"{path}:2: time_step: dt = 1 s") and "ms?" in m for m in messages)
    assert any(f"{path}:5: bodies[1].geometries[0].radius (body 'ball'): 40 m" in m for m in messages)
    assert any(f"{path}:5: bodies[1].mass (body 'ball'): 500 kg" in m and "density" in m for m in messages)


def test_unit_warnings_on_the_command_line_and_how_to_silence_them(tmp_path, capsys):
    path = tmp_path / "u.yaml"
    path.write_text(UNITS_SCENE, encoding="utf-8")
    assert main(["validate", str(path)]) == EXIT_OK               # warnings do not make a scene invalid
    err = capsys.readouterr().err
    warned = [ln for ln in err.splitlines() if ln.startswith("warning: ")]
    assert len(warned) == 3 and "Traceback" not in err and "UnitWarning" not in err, err
    assert main(["validate", str(path), "--no-unit-warnings"]) == EXIT_OK
    assert "warning" not in capsys.readouterr().err
    path.write_text("unit_warnings: false\n" + UNITS_SCENE, encoding="utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_scene(path)
    assert not [w for w in caught if issubclass(w.category, UnitWarning)]


def test_plausible_values_do_not_warn():
    """Every shipped scene, and values at the edges of the documented ranges, load without a unit warning."""
    from convexsim.scene import scene_from_dict

    edge = {"time_step": 0.05, "gravity": [0, 0, -100], "bodies": [
        {"name": "pebble", "mass": 4.19e-12 * 2000, "geometries": [{"shape": "sphere", "radius": 1e-4}]},
        {"name": "rock", "mass": 1e4, "position": [0, 0, 20], "linear_velocity": [100, 0, 0],
         "angular_velocity": [0, 0, 1000], "geometries": [{"shape": "box", "size": [10, 1, 1]}]}]}
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnitWarning)
        for _, _, path in list_scenes():
            load_scene(path)
        scene_from_dict(edge)
        edge["time_step"] = 0.051                    # just outside: now it warns
        with pytest.raises(UnitWarning, match="time_step"):
            scene_from_dict(edge)


# ------------------------------------------------------------------------------- material overrides
def test_override_of_an_unused_material_warns(tmp_path, capsys):
    out = str(tmp_path / "x.npz")
    assert main(["run", "box_slide", "--set", "materials.default.friction=0.3", "--duration", "0.002",
                 "--out", out, "--quiet"]) == EXIT_OK
    err = capsys.readouterr().err
    assert "warning: <override>: materials.default.friction: no geometry uses material 'default'" in err
    assert "the geometries use: box, ground" in err
    assert main(["run", "box_slide", "--set", "materials.bx.friction=0.3", "--duration", "0.002",
                 "--out", out, "--quiet"]) == EXIT_OK
    assert "'bx' is a new material (did you mean 'box'?)" in capsys.readouterr().err
    assert main(["run", "box_slide", "--set", "materials.box.friction=0.3", "--duration", "0.002",
                 "--out", out, "--quiet"]) == EXIT_OK
    assert "warning" not in capsys.readouterr().err


def test_override_of_the_used_material_changes_the_stop_distance():
    """box_slide with the box material's μ = 0.25 against the ground's 0.5: pair μ = 2·0.5·0.25/0.75 = 1/3, so
    the box launched at v0 = 2 m/s stops after v0²/(2μg) = 0.6116 m instead of 0.4077 m. Tolerance 3 mm:
    implicit Euler adds about v0·dt/2 = 1 mm (scene header), plus the short spin-up of the lagged model."""
    from convexsim.simulate import simulate

    with warnings.catch_warnings():
        warnings.simplefilter("error", SceneWarning)
        traj = simulate("box_slide", overrides={"materials.box.friction": 0.25}, duration=1.0)
    x = traj.position[:, traj.body_index("box"), 0]
    mu, v0, g = 2 * 0.5 * 0.25 / 0.75, 2.0, 9.81
    assert x[-1] == pytest.approx(v0**2 / (2 * mu * g), abs=3e-3)
    assert abs(traj.linear_velocity[-1, traj.body_index("box"), 0]) < 1e-3     # it has stopped
