"""Standalone HTML export: no server, no network; opens from file:// and plays."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Sequence

from convexsim.io.atomic import atomic_write_text
from convexsim.io.trajectory import Trajectory
from convexsim.model import Model

from .page import static_page_html
from .playback import Playback, PlaybackOptions, build_playback


def page_html(pb: Playback) -> str:
    """The standalone page of a built playback: the viewer, every drawing command and the control bar."""
    return static_page_html(pb.commands, title=pb.info.get("title", "convexsim"))


def write_page(pb: Playback, out_path: str | os.PathLike) -> Path:
    """Write the standalone page of a built playback atomically; return the path."""
    out = Path(out_path)
    atomic_write_text(out, page_html(pb))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(out, 0o666 & ~umask)      # a page to share: the temporary file's 0600 would surprise
    return out


def export_html(trajectories: Sequence[Trajectory], out_path: str | os.PathLike, *,
                labels: Sequence[str] | None = None, layout: str = "auto",
                offset: Sequence[float] | None = None, force_scale: float | None = None,
                force_threshold: float | None = None, show_contacts: bool = True,
                models: Sequence[Model] | None = None, max_fps: float = 60.0,
                max_contacts: int = 300, autoplay: bool = True, loop: bool = True,
                title: str | None = None, follow: str = "auto", joint_frames: bool = False,
                forces: str = "auto", report: bool = False) -> Path:
    """Write one standalone HTML animation of ``trajectories`` (same scene) to ``out_path``.

    The page embeds meshcat's viewer and every drawing command: it needs no server and no network.
    A control bar at the bottom: reset, one frame back, play/pause, one frame forward, a timeline, the
    time and a speed menu; keys (written on the bar): Space play/pause, → / ← one frame, + / − double /
    halve the speed. A legend says which trajectory is which and how long the force arrows are.

    Args:
        trajectories: one or more runs of the same scene (e.g. SAP and LCP).
        out_path: the .html file (written atomically: write to a temporary file, then rename).
        labels: legend labels (default: "SAP (sap)", "LCP", …).
        layout: "auto" (offset when the runs agree to the eye, i.e. no body ever more than 5 % of the scene
            radius apart, or are runs of different scenes; else overlay), "overlay" (the second and later
            runs translucent and tinted, in place) or "offset" (each run shifted by ``offset``).
        offset: shift between successive runs [m], (3,); default: along x (side by side for the
            default camera) by 1.15 × the scene's x extent (along y if the scene is > 2× wider in x).
        force_scale: arrow length per newton [m/N]; default 0.25·R / f_ref rounded to 1, 2 or 5 × 10^k
            (R: scene radius, f_ref: the weight of the heaviest moving body; without gravity the 98th
            percentile of the nonzero contact force magnitudes of all runs); arrows are capped at R.
        force_threshold: no arrow at or below this force [N]; default 1e-3·f_ref.
        show_contacts: draw contact points and force arrows.
        forces: "auto" (every contact's arrow, capped at R, unless a frame has more than 40 contacts: then
            the 12 largest forces of each frame only, and the legend says so), "capped", "scaled" (not
            capped), "top" (the largest only) or "off" (contact points, no arrows).
        models: compiled scene(s) (default: compiled from each trajectory's ``scene_yaml``).
        max_fps: at most this many animation frames per simulated second.
        max_contacts: at most this many contact markers per trajectory and frame (largest forces first).
        autoplay: start playing on load (if False the page pauses at t = 0; the scrubber works).
        loop: repeat forever (else play once).
        title: page and legend title (default: scene name and labels).
        follow: camera: "auto" (follow the moving bodies when the whole recording would make them
            small), "centroid", a body name, or "off".
        joint_frames: draw each link's inboard joint frame (a triad, and the axis of revolute and
            prismatic joints; scenes with joints only).
        report: print the path and size to stderr.

    Returns:
        The path written.
    """
    opts = PlaybackOptions(labels=labels, layout=layout, offset=offset, force_scale=force_scale,
                           force_threshold=force_threshold, show_contacts=show_contacts,
                           max_contacts=max_contacts, max_fps=max_fps, autoplay=autoplay, loop=loop,
                           title=title, follow=follow, joint_frames=joint_frames, forces=forces)
    pb = build_playback(trajectories, opts, models=models)
    path = write_page(pb, out_path)
    if report:
        print(f"HTML animation: {path} ({path.stat().st_size / 1e6:.2f} MB, {sum(pb.frames)} frames)",
              file=sys.stderr, flush=True)
    return path
