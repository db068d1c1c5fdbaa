"""Study specs: validation errors name the field path; sweeps expand as documented; run ids are stable."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from study_testkit import tiny_study

from convexsim.studies import StudyError, expand_runs, load_study, reduce_spec, study_from_dict
from convexsim.studies.spec import read_yaml


def _with_param(**param):
    return tiny_study(parameters=[{"path": "materials.default.stiffness", **param}])


BAD_SPECS = [
    # (case, mapping, text that must appear in the error: the field path and what is wrong)
    ("unknown top-level key", tiny_study(speed=3), "speed: Extra inputs are not permitted"),
    ("missing metrics", {k: v for k, v in tiny_study().items() if k != "metrics"}, "metrics: Field required"),
    ("unknown metric", tiny_study(metrics=["rest_penetration", "wobble"]), "metrics: unknown metric 'wobble'"),
    ("range count too small", _with_param(range={"start": 1, "stop": 2, "count": 1}),
     "parameters[0].range.count"),
    ("log range through zero", _with_param(range={"start": 0.0, "stop": 1e3, "count": 3, "scale": "log"}),
     "parameters[0].range: a log range needs start > 0"),
    ("bad scale", _with_param(range={"start": 1, "stop": 2, "count": 3, "scale": "cubic"}),
     "parameters[0].range.scale"),
    ("values and range", _with_param(values=[1.0], range={"start": 1, "stop": 2, "count": 3}),
     "parameters[0]: give exactly one of 'values' or 'range'"),
    ("empty values", _with_param(values=[]), "parameters[0]: 'values' must not be empty"),
    ("unknown key in a parameter", _with_param(values=[1.0e3], step=2), "parameters[0].step: Extra inputs"),
    ("no parameters", tiny_study(parameters=[]), "parameters: List should have at least 1 item"),
    ("zero repetitions", tiny_study(repetitions=0), "repetitions: Input should be greater than or equal to 1"),
    ("window out of range", tiny_study(metric_options={"window": 1.5}), "metric_options.window"),
    ("zip of unequal lengths", tiny_study(combine="zip", parameters=[
        {"path": "materials.default.stiffness", "values": [1.0e3, 1.0e4]},
        {"path": "contact_model", "values": ["sap", "lagged", "similar"]}]),
     "combine: zip needs parameters of equal length"),
    ("bad combine", tiny_study(combine="product"), "combine: Input should be 'grid' or 'zip'"),
    ("pair metric without solver.kind", tiny_study(metrics=["sap_lcp_final_position_diff"]),
     "the sap_lcp_* metrics need 'solver.kind'"),
    ("reduced names an unswept path", tiny_study(reduced={"parameters": {"solver.sigma": {"values": [1e-3]}}}),
     "reduced.parameters: ['solver.sigma'] are not swept"),
    ("swept path typo", tiny_study(parameters=[{"path": "materials.default.stifness", "values": [1.0e3]}]),
     "parameters[0] (materials.default.stifness=1000.0)"),
    ("swept value invalid for the scene", _with_param(values=[1.0e3, -5.0]),
     "parameters[0] (materials.default.stiffness=-5.0)"),
    ("duplicate swept value", _with_param(values=[1.0e3, 1.0e4, 1000]),
     "parameters[0]: values[2]: value 1000 is swept twice (same as values[0])"),
    ("duplicate values from a range", _with_param(range={"start": 5.0, "stop": 5.0, "count": 3}),
     "parameters[0]: range: value 5.0 is swept twice"),
    ("metric body not in the scene", tiny_study(metric_options={"body": "bal"}),
     "metric_options.body: no body named 'bal' in the scene; bodies: ground, ball"),
    ("reduced value invalid for the scene",
     tiny_study(reduced={"parameters": {"materials.default.stiffness": {"values": [1.0e3, -5.0]}}}),
     "reduced.parameters.materials.default.stiffness (materials.default.stiffness=-5.0)"),
    ("reduced duplicate value",
     tiny_study(reduced={"parameters": {"contact_model": {"values": ["sap", "sap"]}}}),
     "reduced.parameters.contact_model: values[1]: value 'sap' is swept twice"),
    ("reduced zip of unequal lengths", tiny_study(combine="zip", parameters=[
        {"path": "materials.default.stiffness", "values": [1.0e3, 1.0e4]},
        {"path": "contact_model", "values": ["sap", "lagged"]}],
        reduced={"parameters": {"contact_model": {"values": ["sap"]}}}),
     "reduced.parameters: combine: zip needs the reduced parameters to have equal lengths"),
    ("scene file missing", tiny_study(scene="no_such_scene_file.yaml"), "scene: no scene file or shipped scene"),
    ("invalid base scene", tiny_study(scene={"name": "x", "bodies": [{"name": "b", "mass": -1.0}]}),
     "scene: the base scene is invalid"),
]


@pytest.mark.parametrize("case,data,expected", BAD_SPECS, ids=[c[0] for c in BAD_SPECS])
def test_malformed_study_is_rejected_with_its_field_path(case, data, expected, tmp_path):
    """Check that a malformed study file is rejected, naming the file and the field path."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(StudyError) as err:
        load_study(path)
    msg = str(err.value)
    assert expected in msg, msg
    assert str(path) in msg, msg


def test_scene_error_names_the_file_and_field_once(tmp_path):
    """Check a swept value the scene rejects gives 'file: parameters[0] (path=value): ...' without repeating it."""
    path = tmp_path / "badmodel.yaml"
    path.write_text(yaml.safe_dump(_with_param(values=[1.0e3, -5.0])))
    with pytest.raises(StudyError) as err:
        load_study(path)
    first = str(err.value).splitlines()[0]
    where = f"{path}: parameters[0] (materials.default.stiffness=-5.0)"
    assert first.startswith(where), first
    assert first.count("parameters[0]") == 1, first
    assert "materials.default.stiffness: Input should be greater than 0" in str(err.value)


def test_yaml_syntax_error_gives_the_line(tmp_path):
    """Check that broken YAML is reported with its line number."""
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\nparameters: [\n  {path: a\n")
    with pytest.raises(StudyError, match=r"line \d+"):
        load_study(path)


def test_exponent_without_dot_reads_as_a_number():
    """Check that 1e3 and 1.0e5 are floats in study files (PyYAML alone reads them as strings)."""
    assert read_yaml("[1e3, 1.0e5, -2E-3, 7, 'x']") == [1000.0, 100000.0, -0.002, 7, "x"]


def test_log_range_values_and_grid_expansion():
    """Check that a log range gives evenly spaced log10 values and a grid is the Cartesian product."""
    spec = study_from_dict(tiny_study(parameters=[
        {"path": "materials.default.stiffness", "range": {"start": 1e2, "stop": 1e6, "count": 5, "scale": "log"}},
        {"path": "contact_model", "values": ["sap", "lagged", "similar"]},
    ], repetitions=2))
    vals = spec.parameters[0].resolved()
    np.testing.assert_allclose(np.log10(vals), [2, 3, 4, 5, 6], atol=1e-12)
    runs = expand_runs(spec)
    assert len(runs) == 5 * 3 * 2
    assert [r.index for r in runs] == list(range(30))
    # Last parameter varies fastest, repetitions innermost.
    assert runs[0].params == {"materials.default.stiffness": 100.0, "contact_model": "sap"}
    assert runs[2].params == {"materials.default.stiffness": 100.0, "contact_model": "lagged"}
    assert [r.repetition for r in runs[:4]] == [0, 1, 0, 1]
    assert len({r.run_id for r in runs}) == 30
    # contact_model goes to simulate(...) as a keyword, the stiffness as a scene override.
    assert runs[0].run_kwargs == {"contact_model": "sap"}
    assert runs[0].overrides == {"materials.default.stiffness": 100.0}


def test_zip_pairs_values_and_seed_path_receives_the_seed():
    """Check that zip pairs values element-wise and each repetition's seed lands at seed_path."""
    spec = study_from_dict(tiny_study(
        parameters=[{"path": "materials.default.stiffness", "values": [1e3, 1e4]},
                    {"path": "solver.sigma", "values": [1e-3, 1e-4]}],
        combine="zip", repetitions=3, seed=7, seed_path="bodies.ball.position.0"))
    runs = expand_runs(spec)
    assert [(r.params["materials.default.stiffness"], r.params["solver.sigma"]) for r in runs[::3]] == \
        [(1e3, 1e-3), (1e4, 1e-4)]
    assert [r.seed for r in runs[:3]] == [7, 8, 9]
    assert [r.overrides["bodies.ball.position.0"] for r in runs[:3]] == [7, 8, 9]


def test_run_ids_are_stable_and_depend_on_every_resolved_input():
    """Check that run ids repeat for the same spec and change with the scene, settings or repetition."""
    a = expand_runs(study_from_dict(tiny_study()))
    b = expand_runs(study_from_dict(tiny_study()))
    assert [r.run_id for r in a] == [r.run_id for r in b]
    other_scene = tiny_study()
    other_scene["scene"]["bodies"][1]["mass"] = 2.0
    c = expand_runs(study_from_dict(other_scene))
    assert not {r.run_id for r in a} & {r.run_id for r in c}
    d = expand_runs(study_from_dict(tiny_study(duration=0.1)))
    assert not {r.run_id for r in a} & {r.run_id for r in d}
    # The metric list is not part of the run: adding a metric keeps the ids (finished runs are reused).
    e = expand_runs(study_from_dict(tiny_study(metrics=["rest_penetration"])))
    assert [r.run_id for r in a] == [r.run_id for r in e]


def test_fingerprints_cover_metrics_metric_options_and_version(monkeypatch):
    """Check the fingerprint (what resume compares) changes with the metrics, their options and the version."""
    import convexsim

    fp = lambda spec: [r.fingerprint for r in expand_runs(study_from_dict(spec))]  # noqa: E731
    base = fp(tiny_study())
    assert base == fp(tiny_study()) and len(set(base)) == 4
    assert base == fp(tiny_study(metrics=list(reversed(tiny_study()["metrics"]))))  # order does not matter
    for changed in (tiny_study(metrics=["rest_penetration"]), tiny_study(metric_options={"window": 0.5}),
                    tiny_study(metric_options={"body": "ball"}), tiny_study(metric_options={"stop_speed": 1e-2}),
                    tiny_study(duration=0.1)):
        assert not set(base) & set(fp(changed))
    from convexsim.studies import spec as spec_module

    version = spec_module._software_version()
    assert version.startswith(convexsim.__version__ + "+src.")  # version and a hash of the sources
    spec_module._software_version.cache_clear()
    monkeypatch.setattr(convexsim, "__version__", "999.0")
    try:
        assert not set(base) & set(fp(tiny_study()))
    finally:
        spec_module._software_version.cache_clear()


def test_reduced_replaces_values_duration_and_repetitions():
    """Check that the reduced block shrinks the sweep, the duration and the repetitions."""
    spec = study_from_dict(tiny_study(repetitions=3, reduced={
        "duration": 0.05, "repetitions": 1,
        "parameters": {"materials.default.stiffness": {"range": {"start": 1e3, "stop": 1e5, "count": 3,
                                                                 "scale": "log"}}}}))
    red = reduce_spec(spec)
    assert red.duration == 0.05 and red.repetitions == 1 and red.reduced is None
    assert red.parameters[0].resolved() == [1e3, 1e4, 1e5]
    assert red.parameters[0].is_log
    assert len(expand_runs(red)) == 3 * 2
    assert math.isclose(spec.parameters[0].resolved()[0], 1e3)  # the original is untouched
