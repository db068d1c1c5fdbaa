"""Paths of the checkout that tests read: never relative to the working directory.

The root ``conftest.py`` puts ``tests/`` on ``sys.path``, so any test or helper can write
``from repo_paths import REPO, SCENES``; test functions can also take the ``repo`` fixture.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository root (the directory holding pyproject.toml)."""

SCENES = REPO / "scenes"
"""The shipped scenes."""

STUDIES = SCENES / "studies"
"""The shipped study specifications."""

DOCS = REPO / "docs"
"""The documentation pages."""


def scene_file(name: str) -> str:
    """Path of the shipped scene ``name`` (without extension), as a string for APIs and CLIs."""
    return str(SCENES / f"{name}.yaml")
