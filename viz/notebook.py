"""Inline playback in Jupyter: the standalone page (export.py) in an iframe of the cell's output.

``show(traj)`` or ``show([sap, lcp])`` returns an :class:`InlinePlayback`, which Jupyter displays through its
``_repr_html_``: the same page as ``convexsim view --html`` (meshcat's viewer, every frame, the control bar:
reset, step, play/pause, timeline, speed; the legend), held in the iframe's ``srcdoc`` so that it needs no
server, no file and no network, and keeps playing in a saved notebook opened later. Docs: docs/notebooks.md.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Sequence

from convexsim.io.trajectory import Trajectory
from convexsim.model import Model

from .export import page_html, write_page
from .playback import Playback, PlaybackOptions, build_playback


class InlinePlayback:
    """A built playback that Jupyter shows inline (``_repr_html_``); ``save(path)`` writes the page."""

    def __init__(self, playback: Playback, height: int = 480):
        if not 100 <= int(height) <= 4000:
            raise ValueError(f"show: height must be 100 … 4000 pixels, got {height}")
        self.playback = playback
        self.height = int(height)

    @property
    def title(self) -> str:
        return str(self.playback.info.get("title", "convexsim"))

    def _repr_html_(self) -> str:
        page = html.escape(page_html(self.playback), quote=True)
        return (f'<iframe title="{html.escape(self.title, quote=True)}" srcdoc="{page}" '
                f'style="width:100%;height:{self.height}px;border:0" allow="fullscreen"></iframe>')

    def __repr__(self) -> str:
        frames = sum(self.playback.frames)
        return f"<InlinePlayback {self.title!r}: {frames} frames, {self.playback.duration:.3g} s>"

    def save(self, path: str | os.PathLike) -> Path:
        """Write the standalone page (as ``export_html`` does); return the path."""
        return write_page(self.playback, path)


def show(trajectories: Trajectory | Sequence[Trajectory], *, height: int = 480,
         models: Sequence[Model] | None = None, **options) -> InlinePlayback:
    """Play one trajectory, or several runs of the same scene side by side (e.g. ``[sap, lcp]``), inline in a
    notebook: the last expression of a cell, or ``IPython.display.display(show(...))``.

    Args:
        trajectories: a Trajectory or a sequence of them.
        height: the iframe's height [px] (its width is the cell's).
        models: compiled scene(s) (default: compiled from each trajectory's ``scene_yaml``).
        **options: the options of :func:`convexsim.viz.export_html` (labels, layout, offset, force_scale,
            force_threshold, show_contacts, forces, max_fps, max_contacts, autoplay, loop, title, follow,
            joint_frames).
    """
    trajs = [trajectories] if isinstance(trajectories, Trajectory) else list(trajectories)
    try:
        opts = PlaybackOptions(**options)
    except TypeError as err:
        raise TypeError(f"show: {err} (the options are export_html's)") from None
    return InlinePlayback(build_playback(trajs, opts, models=models), height=height)
