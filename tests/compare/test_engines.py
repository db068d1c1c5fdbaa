"""Scene translation for the side-by-side bench (Drake, MuJoCo). The engines themselves are an
optional extra: tests that run them skip when they are not installed (CI does not install them)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from convexsim.compare_engines import bench, engines
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


def test_mujoco_solref_keeps_stiffness_at_the_stability_limit():
    """Near-rigid damping (ζω > 1/(2dt)): timeconst = 2·dt, stiffness still k/m."""
    k, tau, m, dt = 5e5, 0.2, 1.0, 1e-3
    tc, zeta = engines.mujoco_solref(k, tau, m, dt)
    assert tc == 2 * dt
    assert 1 / (tc * zeta) ** 2 == pytest.approx(k / m, rel=1e-12)


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


@pytest.mark.parametrize("engine, module", [("mujoco", "mujoco"), ("drake", "pydrake")])
def test_engines_agree_on_a_resting_sphere(engine, module):
    """The dropped ball comes to rest on the ground in every engine: height = r within 2 mm (the engines'
    rest depths differ by < 0.1 mm; the margin covers a ball still bouncing slightly at 0.8 s)."""
    pytest.importorskip(module)
    ours = _rest_height("convexsim")
    theirs = _rest_height(engine)
    assert abs(theirs - ours) < 2e-3
