"""Fuzzing scene files (issue 29): valid scene documents broken field by field (every JSON/YAML type, extreme
and non-finite numbers, missing, unknown and schema keys with wrong values, shortened and duplicated lists),
and YAML-level breakage (anchors and aliases, alias bombs, recursive aliases, deep nesting).

Property: `convexsim validate` ends with status 0 or 2 and no traceback (2 with one message line per problem,
each naming the file); a mutated scene that validates also runs two steps (`convexsim run`, in this process)
with status 0 or 1, and a run with status 0 wrote a loadable trajectory with a finite state.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from fuzz_kit import NASTY_VALUES, check_cli, error_lines, get, paths
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from repo_paths import SCENES

from convexsim.io import load_trajectory
from convexsim.scene import SceneError, scene_from_dict, validate_scene_file
from convexsim.scene.compile import expand_bodies
from convexsim.scene.load import _model_keys, _resolve, _yaml_load

SHIPPED = ["box_slide", "sphere_drop", "pendulum_limit", "double_pendulum", "capsule_roll", "gripper_lift",
           "sphere_pile", "incline_stick"]

CONSTRAINTS_DOC = {
    "name": "constrained", "time_step": 1e-3, "duration": 0.1,
    "materials": {"rubber": {"friction": 0.8, "stiffness": 1e5}},
    "bodies": [
        {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace", "material": "rubber"}]},
        {"name": "a", "mass": 1.0, "position": [0, 0, 0.5], "geometries": [{"shape": "box", "size": [0.1, 0.1, 0.1]}]},
        {"name": "b", "mass": 0.5, "position": [0.3, 0, 0.5], "inertia": [1e-3, 1e-3, 1e-3],
         "geometries": [{"shape": "capsule", "radius": 0.05, "length": 0.1}]},
        {"name": "l1", "mass": 1.0, "geometries": [{"shape": "sphere", "radius": 0.05}]},
        {"name": "l2", "mass": 1.0, "geometries": [{"shape": "sphere", "radius": 0.05}]},
    ],
    "joints": [
        {"name": "j1", "type": "revolute", "child": "l1", "position": [1, 0, 1], "child_offset": [0, 0, -0.3],
         "lower": -1.0, "upper": 1.0},
        {"name": "j2", "type": "prismatic", "parent": "l1", "child": "l2", "axis": [1, 0, 0]},
    ],
    "actuators": [{"joint": "j1", "kp": 10.0, "kd": 1.0, "target": [[0.0, 0.0], [1.0, 0.5]], "effort": 5.0}],
    "constraints": [
        {"type": "weld", "body_a": "world", "body_b": "a", "stiffness": 1e4, "relaxation_time": 0.01},
        {"type": "distance", "body_a": "a", "body_b": "b", "point_b": [0, 0, 0.05]},
        {"type": "coupler", "joint": "j2", "reference": "j1", "ratio": 0.1},
    ],
    "grids": [{"name": "g", "counts": [2, 1, 1], "spacing": [0.3, 0, 0], "origin": [0, 2, 0.2], "jitter": 0.01,
               "random_orientation": True, "template": {"mass": 0.1, "geometries": [{"shape": "sphere", "radius": 0.05}]}}],
}


def _base_docs() -> list[dict]:
    docs = []
    for name in SHIPPED:
        text = (SCENES / f"{name}.yaml").read_text(encoding="utf-8")
        docs.append(_yaml_load(text))
    return docs + [CONSTRAINTS_DOC]


BASE_DOCS = _base_docs()


def test_base_documents_are_valid():
    """The fuzzers start from valid scenes (else they would only ever test the first refusal)."""
    for doc in BASE_DOCS:
        scene_from_dict(copy.deepcopy(doc), doc.get("name", "?"))


def _schema_loc(doc, loc) -> tuple:
    """The schema path of a document path (list items by index; the same here)."""
    return tuple(loc)


@st.composite
def mutated_documents(draw, max_mutations: int = 3):
    """A base scene document with 1..max_mutations mutations; returns (doc, description)."""
    doc = copy.deepcopy(draw(st.sampled_from(BASE_DOCS)))
    what = []
    for _ in range(draw(st.integers(1, max_mutations))):
        locs = paths(doc)
        loc = draw(st.sampled_from(locs))
        target = get(doc, loc)
        kind = draw(st.sampled_from(["replace", "replace", "number", "delete", "unknown", "schema_key",
                                     "shorten", "duplicate"]))
        if kind == "number":                       # a number leaf scaled to the extremes or made non-finite
            numeric = [p for p in locs if p and isinstance(get(doc, p), (int, float)) and not isinstance(get(doc, p), bool)]
            if not numeric:
                continue
            loc = draw(st.sampled_from(numeric))
            x = get(doc, loc)
            factor = draw(st.sampled_from([1e300, 1e-300, -1.0, 0.0, 1e16, 1e-16, math.inf, math.nan, 1e15, 1e-15]))
            value = x * factor if x else factor
            get(doc, loc[:-1])[loc[-1]] = value
        elif kind == "replace" and loc:
            get(doc, loc[:-1])[loc[-1]] = copy.deepcopy(draw(st.sampled_from(NASTY_VALUES)))
        elif kind == "replace":
            doc = copy.deepcopy(draw(st.sampled_from(NASTY_VALUES)))
            what.append(("root", doc))
            break
        elif kind == "delete" and loc and isinstance(get(doc, loc[:-1]), dict):
            del get(doc, loc[:-1])[loc[-1]]
        elif kind == "unknown" and isinstance(target, dict):
            target[draw(st.sampled_from(["bogus", "mass_", "radius", "Name", "geometry", "1", ""]))] = \
                copy.deepcopy(draw(st.sampled_from(NASTY_VALUES)))
        elif kind == "schema_key" and isinstance(target, dict):
            keys = _model_keys(_resolve(_schema_loc(doc, loc))[0]) or []
            if keys:
                target[draw(st.sampled_from(keys))] = copy.deepcopy(draw(st.sampled_from(NASTY_VALUES)))
        elif kind == "shorten" and isinstance(target, list) and target:
            del target[draw(st.integers(0, len(target) - 1)):]
        elif kind == "duplicate" and isinstance(target, list) and target:
            target.append(copy.deepcopy(target[draw(st.integers(0, len(target) - 1))]))
        else:
            continue
        what.append((kind, loc))
    return doc, what


def _write(tmp: Path, doc, name: str = "scene.yaml") -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _runnable(doc) -> float | None:
    """2·dt when the (valid) scene is small and bounded enough for a two-step run in a test, else None.
    (Limits of the test, not of convexsim: a scene may legally ask for 1e15 Newton iterations.)"""
    try:
        spec = scene_from_dict(copy.deepcopy(doc), "<fuzz>")
    except SceneError:
        return None
    if spec.solver.max_iterations > 200 or len(expand_bodies(spec)) > 60:
        return None
    return 2 * spec.time_step


def check_scene_document(doc, tmp: Path, run: bool, via_cli: bool = True) -> int:
    """The property on one scene document (see the module docstring); returns the validate status.
    Without ``via_cli`` the validation function itself is called (``validate_scene_file``, a third of the
    time of the whole command line): problems are a list of lines naming the file, nothing else escapes."""
    path = _write(tmp, doc)
    if not via_cli:
        problems = validate_scene_file(path)
        assert all(isinstance(p, str) and p.startswith(str(path)) and "\n" not in p for p in problems), problems
        event("refused" if problems else "validated")
        return 2 if problems else 0
    status, _, err = check_cli(["validate", str(path)])
    assert status in (0, 2)
    if status == 2:
        event("refused")
        lines = error_lines(err)
        assert lines and all(str(path) in ln or ln.startswith("  - ") for ln in lines), err
        return status
    duration = _runnable(doc) if run else None
    event("validated" if duration is None else "ran two steps")
    if duration is not None:
        out = tmp / "run.npz"
        out.unlink(missing_ok=True)
        rs, _, err = check_cli(["run", str(path), "--duration", repr(duration), "--quiet", "--out", str(out)])
        assert rs in (0, 1), err
        if rs == 0:
            traj = load_trajectory(out)                  # loadable, and finite: the loader checks it
            assert traj.num_frames == 3 and not traj.failure
            assert np.isfinite(traj.position).all() and np.isfinite(traj.linear_velocity).all()
    return status


SUPPRESS = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much]


@settings(max_examples=150, deadline=None, suppress_health_check=SUPPRESS)
@given(case=mutated_documents())
def test_mutated_scenes_validate_cleanly(case, tmp_path):
    doc, _ = case
    check_scene_document(doc, tmp_path, run=False)


@settings(max_examples=25, deadline=None, suppress_health_check=SUPPRESS)
@given(case=mutated_documents(max_mutations=1))
def test_mutated_scenes_that_validate_run_two_steps(case, tmp_path):
    doc, _ = case
    check_scene_document(doc, tmp_path, run=True)


@pytest.mark.long
@settings(max_examples=1500, deadline=None, suppress_health_check=SUPPRESS)
@given(case=mutated_documents(max_mutations=4), via_cli=st.integers(0, 3))
def test_mutated_scenes_validate_cleanly_many(case, via_cli, tmp_path):
    doc, _ = case
    check_scene_document(doc, tmp_path, run=False, via_cli=via_cli == 0)


@pytest.mark.long
@settings(max_examples=150, deadline=None, suppress_health_check=SUPPRESS)
@given(case=mutated_documents(max_mutations=2))
def test_mutated_scenes_run_two_steps_many(case, tmp_path):
    doc, _ = case
    check_scene_document(doc, tmp_path, run=True)


# ------------------------------------------------------------------------------------- YAML-level breakage
GOOD_BODY = "{name: b, mass: 1.0, geometries: [{shape: sphere, radius: 0.1}]}"

YAML_TEXTS = {
    "anchor_reused": f"bodies:\n  - &b {GOOD_BODY}\n  - *b\n",                      # duplicate names via an alias
    "anchor_merge": "defaults: &d {mass: 1.0}\nbodies:\n  - {<<: *d, name: b, geometries: []}\n",
    "alias_undefined": "bodies: [*nothing]\n",
    "alias_recursive": "bodies: &a [*a]\n",
    "alias_recursive_map": "solver: &s {kind: sap, x: *s}\n",
    "alias_bomb": "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi")) + "bodies: *i\n",
    "deep_list": "bodies: " + "[" * 5000 + "]" * 5000 + "\n",
    "deep_map": "bodies: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
    "deep_block": "".join("  " * k + f"k{k}:\n" for k in range(400)) + "  " * 400 + "x: 1\n",
    "tab_indent": "bodies:\n\t- {name: b}\n",
    "duplicate_key": "time_step: 0.001\ntime_step: 0.002\n",
    "inf_text": f"time_step: 1e999\nbodies: [{GOOD_BODY}]\n",
    "nan_text": f"time_step: .nan\nbodies: [{GOOD_BODY}]\n",
    "hex_int": f"duration: 0x10\nbodies: [{GOOD_BODY}]\n",
    "big_int": "bodies: [{name: b, mass: " + "9" * 5000 + ", geometries: [{shape: sphere, radius: 0.1}]}]\n",
    "binary_tag": "bodies: !!binary aGVsbG8=\n",
    "python_tag": "bodies: !!python/object:os.system [ls]\n",
    "set_tag": "bodies: !!set {a, b}\n",
    "timestamp": "duration: 2001-12-14t21:59:43.10-05:00\n",
    "two_documents": f"bodies: [{GOOD_BODY}]\n---\nbodies: []\n",
    "not_a_mapping": "- 1\n- 2\n",
    "scalar": "42\n",
    "empty": "",
    "comment_only": "# nothing\n",
    "null_byte": "bodies: []\x00\n",
    "bom": "\ufeffbodies: []\n",
    "unicode_name": "bodies: [{name: \"b\u00e9\u0301\U0001F600\", mass: 1.0, geometries: [{shape: sphere, radius: 0.1}]}]\n",
    "long_line": "name: " + "x" * 200_000 + "\n",
    "complex_key": "? [a, b]\n: 1\n",
    "null_key": "~: 1\n",
    "int_key": "1: 2\nbodies: []\n",
}


@pytest.mark.parametrize("name", sorted(YAML_TEXTS))
def test_yaml_level_breakage_is_refused_or_loaded_cleanly(name, tmp_path):
    path = tmp_path / f"{name}.yaml"
    path.write_text(YAML_TEXTS[name], encoding="utf-8")
    status, _, err = check_cli(["validate", str(path)])
    assert status in (0, 2), err
    if status == 2:
        assert all(str(path) in ln or ln.startswith("  - ") for ln in error_lines(err)), err


def test_non_utf8_scene_file_is_refused(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    status, _, err = check_cli(["validate", str(path)])
    assert status == 2 and str(path) in err


@st.composite
def yaml_fragments(draw):
    """Scene text built from fragments with anchors, aliases, flow and block nesting at random."""
    depth = draw(st.integers(0, 60))
    leaf = draw(st.sampled_from(["1", "-1e400", ".nan", "x", "[]", "{}", "*a", "&a 3", "~", "'s'", "!!str 3"]))
    value = leaf
    for _ in range(depth):
        value = draw(st.sampled_from(["[{v}]", "{{k: {v}}}", "[&a {v}, *a]", "{{<<: {{m: 1}}, k: {v}}}"])).format(v=value)
    key = draw(st.sampled_from(["bodies", "solver", "materials", "gravity", "grids", "joints", "name", "bogus"]))
    return f"{key}: {value}\nbodies2: *a\n" if draw(st.booleans()) else f"{key}: {value}\n"


@settings(max_examples=60, deadline=None, suppress_health_check=SUPPRESS)
@given(text=yaml_fragments())
def test_random_yaml_structures_validate_cleanly(text, tmp_path):
    path = tmp_path / "frag.yaml"
    path.write_text(text, encoding="utf-8")
    status, _, err = check_cli(["validate", str(path)])
    assert status in (0, 2), err
