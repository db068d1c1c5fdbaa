"""Scene translation for the side-by-side bench (Drake, MuJoCo). MuJoCo is in the test extra; Drake is in
the `compare` extra, which `make test-long` installs: the Drake tests are marked ``drake`` (deselected by
`make test`, run by `make test-long`; in CI a Drake test that skips fails the run, conftest.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from convexsim.tools.compare_engines import bench, engines
from convexsim.model import GeomType
from convexsim.simulate import prepare

SCENES = Path(__file__).resolve().parents[2] / "scenes"


def test_parse_engines():
    assert bench.parse_engines("drake, mujoco") == ("convexsim", "drake", "mujoco")
    assert bench.parse_engines("mujoco,mujoco") == ("convexsim", "mujoco")
    with pytest.raises(ValueError, match="bullet"):
        bench.parse_engines("bullet")


def test_mujoco_solref_matches_the_oscillator_when_stable():
    """Unclamped: MuJoCo's stiffness 1/(tc·ζ)² = k/m and damping 2/tc = k·τ_d/m per unit mass."""
    k, tau, m, dt = 1e3, 2e-3, 1.0, 1e-3
    tc, zeta = engines.mujoco_solref(k, tau, m, dt)
    assert tc > 2 * dt
    assert 1 / (tc * zeta) ** 2 == pytest.approx(k / m, rel=1e-12)
    assert 2 / tc == pytest.approx(k * tau / m, rel=1e-12)


@pytest.mark.parametrize("k, tau, m", [(5e5, 0.2, 1.0), (1e5, 0.01, 0.1), (2e5, 0.005, 0.1),
                                        (1e5, 0.0, 1.0), (1e3, 2e-3, 1.0), (1e7, 1e-4, 0.01)])
@pytest.mark.parametrize("dt", [1e-3, 1e-2])
def test_mujoco_solref_stays_inside_mujocos_stability_range(k, tau, m, dt):
    """Both rates of MuJoCo's start-of-step reference, 1/timeconst and ω = 1/(timeconst·dampratio), are
    at most 1/(2·dt); a contact that cannot be matched gets (2·dt, 1). The pile's 0.1 kg balls on
    1e5 N/m (ω·dt = 10 at dt = 10 ms) flew apart at 200 m/s with the stiffness kept."""
    tc, zeta = engines.mujoco_solref(k, tau, m, dt)
    assert tc >= 2 * dt * (1 - 1e-12)
    assert tc * zeta >= 2 * dt * (1 - 1e-12)
    omega = np.sqrt(k / m)
    if 1 / omega < 2 * dt or 1 / (max(0.5 * tau * omega, 0.01) * omega) < 2 * dt:
        assert (tc, zeta) == (2 * dt, 1.0)


@pytest.mark.parametrize("scene", ["sphere_drop", "box_stack", "mixed_clutter", "capsule_roll"])
def test_mjcf_has_every_body_and_geometry(scene):
    model, state, _ = prepare(SCENES / f"{scene}.yaml")
    root = ET.fromstring(engines.mujoco_xml(model, state))
    bodies = root.findall("./worldbody/body")
    moving = np.flatnonzero(~model.body_fixed)
    assert [b.get("name") for b in bodies] == [model.body_names[i] for i in moving]
    kinds = {GeomType.SPHERE: "sphere", GeomType.BOX: "box", GeomType.CAPSULE: "capsule",
             GeomType.HALFSPACE: "plane"}
    geoms = {g.get("name"): g for g in root.iter("geom")}
    assert len(geoms) == model.ngeom
    for g in range(model.ngeom):
        el = geoms[f"g{g}"]
        assert el.get("type") == kinds[GeomType(int(model.geom_type[g]))]
        if model.geom_type[g] == GeomType.BOX:
            np.testing.assert_allclose([float(x) for x in el.get("size").split()], model.geom_size[g])
    for b, el in zip(moving, bodies):
        np.testing.assert_allclose([float(x) for x in el.get("pos").split()], state.q[b, :3])
        assert float(el.find("inertial").get("mass")) == pytest.approx(model.body_mass[b])
        assert el.find("freejoint") is not None


def test_missing_engine_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(engines, "available_engines", lambda: {"drake": False, "mujoco": False})
    code = bench.bench_vs([(SCENES / "sphere_drop.yaml", "sphere_drop", 0.01)], "mujoco")
    err = capsys.readouterr().err
    assert code == 2 and "pip install -e '.[compare]'" in err and len(err.strip().splitlines()) == 1


def _rest_height(engine):
    model, state, _ = prepare(SCENES / "sphere_drop.yaml")
    (run,) = engines.run_side_by_side(model, state, 0.8, (engine,))
    return run.position[np.flatnonzero(~model.body_fixed)[0], 2]


@pytest.mark.parametrize("engine, module", [("mujoco", "mujoco"),
                                            pytest.param("drake", "pydrake", marks=pytest.mark.drake)])
def test_engines_agree_on_a_resting_sphere(engine, module):
    """The dropped ball comes to rest on the ground in every engine: height = r within 2 mm (the engines'
    rest depths differ by < 0.1 mm; the margin covers a ball still bouncing slightly at 0.8 s)."""
    pytest.importorskip(module)
    ours = _rest_height("convexsim")
    theirs = _rest_height(engine)
    assert abs(theirs - ours) < 2e-3


def test_mujoco_pile_stays_a_pile():
    """Regression: a 100-ball pile translated to MuJoCo settles instead of exploding (it once reached
    bodies 159 m away). After 0.5 s every ball is within 0.3 m of where it started horizontally and above
    the ground by at least r minus 1 cm, and the mean height is convexsim's within 1 cm (MuJoCo's contact
    is softer at this step, docs/performance.md)."""
    pytest.importorskip("mujoco")
    model, state, _ = prepare(SCENES / "pile_100.yaml")
    runs = engines.run_side_by_side(model, state, 0.5, ("convexsim", "mujoco"))
    moving = np.flatnonzero(~model.body_fixed)
    ours, theirs = (r.position[moving] for r in runs)
    r = model.geom_size[np.flatnonzero(~model.body_fixed[model.geom_body])[0], 0]
    assert np.all(np.linalg.norm(theirs[:, :2] - state.q[moving, :2], axis=1) < 0.3)
    assert np.all(theirs[:, 2] > r - 0.01)
    assert abs(theirs[:, 2].mean() - ours[:, 2].mean()) < 0.01


def test_a_scene_with_joints_is_refused_by_mujoco_not_timed():
    """A robot's links built as free bodies would fall in MuJoCo (whose translation has free and fixed bodies
    only): the side-by-side run refuses the scene for MuJoCo (whether or not it is installed) instead of timing
    another model. Drake gets the trees (joints, limits, actuators, couplers)."""
    from convexsim.simulate import prepare
    from convexsim.tools.compare_engines import UntranslatableScene, run_side_by_side, translation_problem

    model, state, _ = prepare("iiwa_push")
    assert "joints" in translation_problem(model, "mujoco")
    assert translation_problem(model, "drake") == ""
    with pytest.raises(UntranslatableScene, match="mujoco: the scene has joints"):
        run_side_by_side(model, state, 0.01, ("convexsim", "mujoco"))
    free, _, _ = prepare("sphere_drop")
    assert translation_problem(free, "mujoco") == translation_problem(free, "drake") == ""


@pytest.mark.drake
@pytest.mark.parametrize("scene, duration, bound_mm", [
    ("pendulum_limit", 1.0, 0.01),     # a swing onto the joint limit: Drake's limit constraint and ours agree
    ("iiwa_push", 0.3, 0.05),          # seven PD-held joints and the box on the floor
    # the published gripper (mesh hulls, mimic couplers, a saturated finger servo) lifting the box: 79 mm apart
    # while Drake let the linkage's links collide with each other (convexsim filters pairs within a tree);
    # with the same filter 1.1 mm, from Drake's single contact point per hull-box pair against our manifold
    ("robotiq_pick", 1.0, 3.0),
])
def test_drake_runs_the_same_robot(scene, duration, bound_mm):
    """The tree translation (links, joints, limits, PD actuators with their targets) gives Drake the same
    model: after the window every body is where convexsim has it, within ``bound_mm`` (both are SAP with the
    same parameters; the bound covers the solvers' tolerances and Drake's limit-constraint regularization,
    measured 0.000 mm and 0.028 mm over 1 s, and for robotiq_pick the contact-point sets)."""
    pytest.importorskip("pydrake")
    from convexsim.simulate import prepare
    from convexsim.tools.compare_engines import run_side_by_side

    model, state, _ = prepare(scene)
    ours, drake = run_side_by_side(model, state, duration, ("convexsim", "drake"))
    assert ours.steps == drake.steps + 1          # drake's warm-up step is inside convexsim's window
    gap = np.linalg.norm(drake.position - ours.position, axis=1).max()
    assert gap < bound_mm * 1e-3, f"{scene}: bodies {1e3 * gap:.3f} mm apart"


@pytest.mark.drake
def test_an_mjcf_file_is_compared_with_mujoco_only(capsys):
    """`bench --vs drake,mujoco` on a published MJCF file: MuJoCo reads the file itself, Drake is named as not
    compared (one line), and the run still exits 0."""
    pytest.importorskip("pydrake")
    pytest.importorskip("mujoco")
    iiwa = Path(__file__).resolve().parents[1] / "data" / "menagerie" / "kuka_iiwa_14" / "scene.xml"
    assert bench.bench_vs([(iiwa, "iiwa", 0.01)], "drake,mujoco", "home") == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("iiwa ")]
    assert [ln.split()[1] for ln in lines] == ["drake:", "convexsim", "mujoco"], lines
    assert "compared with MuJoCo reading the same file" in lines[0]
