"""How a scene reaches the simulator: path, shipped name or YAML text (and which is which), one parse with
PyYAML's C loader giving the same data and messages as the pure-Python loader, the compact resolved header
trajectory files store, and a scene file listing many bodies one by one."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import yaml

from convexsim.tools.bench_startup import explicit_scene_yaml
from convexsim.scene import (
    SceneError,
    compile_scene,
    dump_scene,
    dump_scene_compact,
    is_scene_text,
    list_scenes,
    load_scene,
    read_scene_data,
    scene_from_yaml,
)
from convexsim.scene import load as scene_load
from convexsim.simulate import prepare, simulate

BALL = "bodies: [{name: ball, mass: 1, position: [0, 0, 0.5], geometries: [{shape: sphere, radius: 0.1}]}]"


@pytest.mark.parametrize("text, expected", [
    ("box_stack", False), ("scenes/box_stack.yaml", False), ("C:\\scenes\\a.yaml", False),
    ("my scene.yaml", False), ("x" * 5000, False), ("", False),
    (BALL, True), ("{bodies: []}", True), ("  bodies: []", True), ("name: a", True), ("name:", True),
    ("---\nbodies: []", True), ("# a comment\nbodies: []", True), ("bodies:\n  - name: b", True),
])
def test_path_or_text_decision(text, expected):
    """Check a string is YAML text exactly when it has a newline or starts with a mapping."""
    assert is_scene_text(text) is expected


def test_long_yaml_text_is_simulated_as_text(tmp_path):
    """Check YAML text far longer than any file name (the OS limit is 255 bytes per component) runs as text,
    block style and single-line flow style, and gives the same model as the same text read from a file."""
    block = explicit_scene_yaml(40)                      # ~ 6 kB, many lines
    flow = "bodies: [" + ", ".join(
        f"{{name: b{i}, mass: 1, position: [{0.3 * i}, 0, 0.5], "
        "geometries: [{shape: sphere, radius: 0.1}]}"
        for i in range(20)) + "]"                        # ~ 2 kB on one line
    assert len(flow) > 1000 and "\n" not in flow
    for text in (block, flow):
        path = tmp_path / "scene.yaml"
        path.write_text(text, encoding="utf-8")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from_text, state_text, _ = prepare(text, duration=0.01)
            from_file, state_file, _ = prepare(path, duration=0.01)
        assert from_text.nbody == from_file.nbody >= 20
        np.testing.assert_array_equal(state_text.q, state_file.q)
        np.testing.assert_array_equal(from_text.body_inertia, from_file.body_inertia)
    traj = simulate(flow, duration=0.002)
    assert traj.num_frames == 3 and not traj.failure


@pytest.mark.parametrize("name", ["x" * 300, "x" * 300 + ".yaml", "a/" * 200 + "b.yaml", "bad\0name"])
def test_over_long_or_impossible_names_are_a_scene_error(name):
    """Check a name the OS refuses (longer than 255 bytes, a NUL byte) is reported as a missing scene
    (SceneError, a ValueError the CLI turns into exit 2), not an OSError, with the name shortened."""
    with pytest.raises(SceneError, match="cannot read scene file") as err:
        prepare(name)
    assert len(str(err.value)) < 1500


def test_prepare_reports_file_problems_with_line_numbers_also_with_overrides(tmp_path):
    """Check a broken file is reported with its line numbers, with or without --set overrides, and that a
    bad override value is reported against the override."""
    path = tmp_path / "bad.yaml"
    path.write_text("bodies:\n  - name: ball\n    mass: -1\n    geometries: [{shape: sphere, radius: 0.1}]\n")
    for overrides in (None, ["bodies.ball.position=[0, 0, 1]"]):
        with pytest.raises(SceneError, match=r"bad\.yaml:3: bodies\[0\]\.mass \(body 'ball'\)"):
            prepare(path, overrides=overrides)
    path.write_text(BALL + "\n")
    with pytest.raises(SceneError, match=r"bodies\[0\]\.mass \(body 'ball'\).*\(got -2\)"):
        prepare(path, overrides=["bodies.ball.mass=-2"])


def test_prepare_does_not_change_the_callers_mapping():
    """Check prepare's keyword arguments and overrides leave a caller's dict as it was."""
    data = yaml.safe_load(BALL)
    before = yaml.safe_dump(data)
    model, _, duration = prepare(data, duration=0.3, solver="lcp", overrides={"bodies.ball.mass": 2.0})
    assert (duration, model.solver.kind, model.body_mass[0]) == (0.3, "lcp", 2.0)
    assert yaml.safe_dump(data) == before


@pytest.mark.parametrize("name", [n for n, _, _ in list_scenes()])
def test_c_loader_reads_what_the_python_loader_reads(name):
    """Check the C loader (when PyYAML has it) gives the same data and node lines as the pure-Python one."""
    text = (list_scenes()[[n for n, _, _ in list_scenes()].index(name)][2]).read_text(encoding="utf-8")
    fast, fast_node = scene_load._compose_and_construct(text, scene_load._FastLoader)
    slow, slow_node = scene_load._compose_and_construct(text, scene_load._Loader)
    assert fast == slow
    assert _node_lines(fast_node) == _node_lines(slow_node)


def test_c_loader_is_used_when_available():
    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML built without libyaml")
    assert issubclass(scene_load._FastLoader, yaml.CSafeLoader)


@pytest.mark.parametrize("text, line", [("bodies:\n  - name: [a\n", 3), ("a: 1\n b: 2\n", 2),
                                        ("bodies: [\n", 2), ("x: 'open\n", 2)])
def test_invalid_yaml_messages_do_not_depend_on_the_loader(text, line):
    """Check invalid YAML gives the pure-Python loader's message (line, column, problem) whatever loader
    parsed it first."""
    with pytest.raises(SceneError) as err:
        scene_from_yaml(text, source="s.yaml")
    try:
        yaml.load(text, Loader=scene_load._Loader)
    except yaml.YAMLError as exc:
        expected = exc.problem
    assert err.value.problems[0].startswith(f"s.yaml:{line}: line {line}, column ")
    assert err.value.problems[0].endswith(f"invalid YAML: {expected}")


@pytest.mark.parametrize("name", [n for n, _, _ in list_scenes()])
def test_compact_header_is_the_resolved_scene(name):
    """Check the compact header (what trajectory files now store) reads back, by the project's loader and by
    plain yaml.safe_load, as exactly what the full dump (what older files store) reads back as."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = load_scene(name)
        compact = dump_scene_compact(spec)
        assert scene_from_yaml(compact) == spec == scene_from_yaml(dump_scene(spec))
    assert yaml.safe_load(compact) == yaml.safe_load(dump_scene(spec))
    assert compile_scene(spec)[0].scene_yaml == compact


def test_old_and_new_trajectory_headers_compile_to_the_same_model(tmp_path):
    """Check a trajectory file with the compact header and one with the full YAML dump (files written
    before it) both rebuild the run's model for viewers, studies and `identify`."""
    from convexsim.io import load_trajectory, save_trajectory

    traj = simulate("box_stack", duration=0.01)
    spec = scene_from_yaml(traj.scene_yaml)
    old = type(traj)(**{**traj.__dict__, "scene_yaml": dump_scene(spec)})
    for t, name in ((traj, "new.npz"), (old, "old.npz")):
        save_trajectory(tmp_path / name, t)
        back = load_trajectory(tmp_path / name)
        model, _, _ = prepare(yaml.safe_load(back.scene_yaml))        # as convexsim.identify reads it
        model2, _ = compile_scene(scene_from_yaml(back.scene_yaml))  # as viewers and studies read it
        np.testing.assert_array_equal(model.geom_size, model2.geom_size)
        assert model.body_names == tuple(traj.body_names)


def test_many_bodies_listed_one_by_one_load_like_a_grid_would():
    """Check the generated explicit scene (the start-up bench's 1000-body file, smaller here) loads with the
    bodies, shapes and materials it lists, and that read_scene_data parses text once into data + lines."""
    text = explicit_scene_yaml(30)
    data, node, source = read_scene_data(text)
    assert source == "<string>" and len(data["bodies"]) == 31 and node is not None
    model, state, _ = prepare(text)
    assert model.nbody == 31 and int((~model.body_fixed).sum()) == 30
    assert len(set(model.geom_type[1:].tolist())) == 3             # spheres, boxes and capsules
    assert model.material_names == ("default", "rubber")
    np.testing.assert_allclose(state.v[1:, 3:], [[0, 0, -0.5]] * 30)
    np.testing.assert_allclose(model.body_mass[1:], 0.2)


def _node_lines(node, out=None):
    """Start lines of every node, depth first."""
    out = [] if out is None else out
    out.append(node.start_mark.line)
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            _node_lines(k, out)
            _node_lines(v, out)
    elif isinstance(node, yaml.SequenceNode):
        for v in node.value:
            _node_lines(v, out)
    return out
