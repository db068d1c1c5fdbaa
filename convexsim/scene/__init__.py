"""Scene files: schema (pydantic), loading with clear errors, dotted overrides, compile to Model.

    spec = load_scene("scenes/box_stack.yaml", overrides=["solver.sigma=1e-4"])
    model, state = compile_scene(spec)

The file format is documented in docs/scene-format.md; shipped scenes live in the repository's
top-level ``scenes/`` directory (:func:`list_scenes`, :func:`shipped_scene_path`).
"""

from __future__ import annotations

from pathlib import Path

from convexsim.scene.compile import compile_scene, expand_bodies, inertia_from_shapes
from convexsim.scene.load import (
    SceneError,
    apply_overrides,
    dump_scene,
    load_scene,
    scene_from_dict,
    scene_from_yaml,
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


def shipped_scenes_dir() -> Path:
    """The shipped scenes directory: ``scenes/`` next to the ``convexsim`` package (repo checkout or
    editable install)."""
    return Path(__file__).resolve().parents[2] / "scenes"


def _description(path: Path) -> str:
    """First comment line of a scene file without the '#', or ''."""
    try:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                text = line.strip()
                if not text:
                    continue
                return text.lstrip("#").strip() if text.startswith("#") else ""
    except OSError:
        pass
    return ""


def list_scenes(directory: str | Path | None = None) -> list[tuple[str, str, Path]]:
    """Shipped (or given directory's) scenes as (name, one-line description, path), sorted by name.

    The description is the first line of the file's comment header.
    """
    root = Path(directory) if directory is not None else shipped_scenes_dir()
    if not root.is_dir():
        return []
    files = sorted(set(root.glob("*.yaml")) | set(root.glob("*.yml")))
    return [(p.stem, _description(p), p) for p in files]


def shipped_scene_path(name: str) -> Path:
    """Path of shipped scene ``name`` (``scenes/<name>.yaml``); a path to an existing file is returned as is.

    Raises:
        FileNotFoundError: no such scene, with the list of shipped ones.
    """
    candidate = Path(name)
    if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
        return candidate
    stem = candidate.stem if candidate.suffix in (".yaml", ".yml") else name
    for ext in (".yaml", ".yml"):
        p = shipped_scenes_dir() / f"{stem}{ext}"
        if p.is_file():
            return p
    names = ", ".join(n for n, _, _ in list_scenes()) or "(none found)"
    raise FileNotFoundError(f"no shipped scene named {name!r} in {shipped_scenes_dir()}; shipped scenes: {names}")


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
    "validate_scene_file",
    "with_overrides",
    "compile_scene",
    "expand_bodies",
    "inertia_from_shapes",
    "list_scenes",
    "shipped_scene_path",
    "shipped_scenes_dir",
]
