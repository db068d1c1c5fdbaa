"""``validate_scene_file``: every problem of a scene file, from loading and from compiling it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convexsim.scene.compile import compile_scene
from convexsim.scene.load import SceneError, load_scene


def validate_scene_file(path: str | Path, overrides: dict[str, Any] | list[str] | None = None) -> list[str]:
    """Every problem of a scene file as a list of messages (empty when the scene loads and compiles)."""
    try:
        spec = load_scene(path, overrides)
    except SceneError as err:
        return list(err.problems)
    try:
        compile_scene(spec)
    except SceneError as err:
        return list(err.problems)
    return []


__all__ = ["validate_scene_file"]
