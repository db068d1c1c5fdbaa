"""Scene files: schema (pydantic), loading with clear errors, dotted overrides, compile to Model.

    spec = load_scene("scenes/box_stack.yaml", overrides=["solver.sigma=1e-4"])
    model, state = compile_scene(spec)

The file format is documented in docs/scene-format.md; shipped scenes live in the repository's
top-level ``scenes/`` directory (:func:`list_scenes`, :func:`shipped_scene_path`); every function that
takes a scene path also takes a shipped scene name (:func:`resolve_scene_path`).
"""

from __future__ import annotations

from convexsim.scene.compile import compile_scene, expand_bodies, inertia_from_shapes
from convexsim.scene.load import (
    SceneError,
    SceneWarning,
    UnitWarning,
    apply_overrides,
    did_you_mean,
    dump_scene,
    dump_scene_compact,
    is_scene_text,
    list_scenes,
    read_scene_data,
    read_scene_file,
    load_scene,
    scene_from_dict,
    resolve_scene_path,
    scene_from_yaml,
    shipped_scene_path,
    shipped_scenes_dir,
    with_overrides,
)
from convexsim.scene.validate import validate_scene_file
from convexsim.scene.schema import (
    BodySpec,
    GeometrySpec,
    GridSpec,
    MaterialSpec,
    SceneSpec,
    SolverSpec,
)


__all__ = [
    "SceneSpec",
    "BodySpec",
    "GeometrySpec",
    "GridSpec",
    "MaterialSpec",
    "SolverSpec",
    "SceneError",
    "load_scene",
    "scene_from_dict",
    "scene_from_yaml",
    "apply_overrides",
    "dump_scene",
    "dump_scene_compact",
    "is_scene_text",
    "read_scene_data",
    "read_scene_file",
    "validate_scene_file",
    "with_overrides",
    "compile_scene",
    "expand_bodies",
    "inertia_from_shapes",
    "list_scenes",
    "shipped_scene_path",
    "shipped_scenes_dir",
    "resolve_scene_path",
    "did_you_mean",
    "SceneWarning",
    "UnitWarning",
]
