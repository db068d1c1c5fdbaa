"""`convexsim import-urdf` and `convexsim import-mjcf`: robot and MuJoCo models into scene files."""

from __future__ import annotations

import sys
from pathlib import Path

from convexsim.cli.common import EXIT_OK, EXIT_USAGE, add_command, error_text


def _add_importer(sub, name: str, func, model: str, model_help: str, summary: str, what: str, tail: str):
    """The parser of an import command: its model file (positional ``model``) and --out; its --help is ``what``
    (into a scene), where the scene goes, then ``tail``."""
    p = add_command(sub, name, func, summary,
                    f"{what} (docs/importing-models.md) and print it, or write it with --out. {tail}")
    p.add_argument(model, metavar=model.upper(), help=model_help)
    p.add_argument("--out", "-o", help="scene file to write (default: print to stdout)")
    return p


# ---------------------------------------------------------------------------------- import-urdf
def add_import_urdf(sub) -> None:
    p = _add_importer(sub, "import-urdf", cmd_import_urdf, "urdf", "the .urdf file",
                      "convert a URDF robot into a scene file",
                      "Convert URDF (links, joints, collision geometry: primitives and OBJ/STL/PLY meshes) into a "
                      "scene", "`convexsim run robot.urdf` runs a URDF file directly. Exit 2 on a bad file.")
    p.add_argument("--floating-base", action="store_true",
                   help="the root link is a free body (a 'free' joint from the world) instead of welded to it")
    p.add_argument("--package-root", metavar="DIR",
                   help="folder that package:// mesh names resolve against (DIR/pkg/file, then DIR/file); "
                        "relative mesh names are tried against the URDF's folder first")


def cmd_import_urdf(args) -> int:
    from convexsim.scene import SceneError, load_scene, scene_from_dict
    from convexsim.scene.urdf import UrdfError, urdf_to_scene

    path = Path(args.urdf)
    if path.suffix.lower() != ".urdf":
        print(f"{path}: expected a .urdf file", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.floating_base or args.package_root:
            try:
                data = urdf_to_scene(_shipped_or_given(args.urdf), floating_base=args.floating_base,
                                     package_root=args.package_root)
            except UrdfError as exc:
                raise SceneError(exc.problems, str(path)) from None
            spec = scene_from_dict(data, str(path))
        else:
            spec = load_scene(path)
    except SceneError as exc:
        print(error_text(exc), file=sys.stderr)
        return EXIT_USAGE
    return _write_imported(spec, f"# {spec.name}: imported from {path.name} by `convexsim import-urdf`.\n", args.out)


# ---------------------------------------------------------------------------------- import-mjcf
def add_import_mjcf(sub) -> None:
    p = _add_importer(sub, "import-mjcf", cmd_import_mjcf, "mjcf", "the MuJoCo .xml file",
                      "convert a MuJoCo (MJCF) model into a scene file",
                      "Compile an MJCF file with MuJoCo (pip install 'convexsim[mjcf]'), convert its bodies, "
                      "joints, colliding geoms, position actuators and welds/joint couplings into a scene",
                      "The scene runs without MuJoCo. Exit 2 on a file that cannot be imported.")
    p.add_argument("--keyframe", metavar="NAME", help="start from this <key>'s qpos, qvel and ctrl (default: qpos0, "
                   "at rest, ctrl 0)")


def cmd_import_mjcf(args) -> int:
    from convexsim.scene import SceneError, scene_from_dict
    from convexsim.scene.mjcf import MjcfError, mjcf_to_scene

    path = _shipped_or_given(args.mjcf)
    try:
        try:
            data = mjcf_to_scene(path, keyframe=args.keyframe)
        except MjcfError as exc:
            raise SceneError(exc.problems, str(path)) from None
        spec = scene_from_dict(data, str(path))
    except SceneError as exc:
        print(error_text(exc), file=sys.stderr)
        return EXIT_USAGE
    start = f"keyframe {args.keyframe!r}" if args.keyframe else "qpos0 (no keyframe)"
    return _write_imported(spec, f"# {spec.name}: imported from {path.name} by `convexsim import-mjcf`, starting "
                           f"from {start}.\n", args.out)


def _shipped_or_given(name: str) -> Path:
    """The file a user means (a path, or one under the shipped scenes folder: ``scenes/robots/...`` works
    from any directory), or the path as given when there is none (the importer reports it)."""
    from convexsim.scene import resolve_scene_path

    try:
        return resolve_scene_path(name)
    except FileNotFoundError:
        return Path(name)


def _write_imported(spec, header: str, out: str | None) -> int:
    """Print an imported scene, or write it to ``out`` with mesh file paths made relative to its folder."""
    from convexsim.scene import dump_scene

    if out:
        spec = _mesh_files_relative_to(spec, Path(out).resolve().parent)
        Path(out).write_text(header + dump_scene(spec), encoding="utf-8")
        print(f"wrote {out}")
    else:
        sys.stdout.write(header + dump_scene(spec))
    return EXIT_OK


def _mesh_files_relative_to(spec, folder: Path):
    """The scene with every mesh ``file`` (absolute after an import) written relative to ``folder``
    (a scene's mesh files are found relative to the scene file's folder)."""
    import os

    bodies = []
    for body in spec.bodies:
        geoms = [g.model_copy(update={"file": os.path.relpath(g.file, folder)})
                 if getattr(g, "file", None) and Path(g.file).is_absolute() else g for g in body.geometries]
        bodies.append(body.model_copy(update={"geometries": geoms}))
    return spec.model_copy(update={"bodies": bodies})
