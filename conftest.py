"""Repository-wide pytest setup, so that the suite gives the same result from any directory.

* The repository root goes first on ``sys.path`` and on ``PYTHONPATH`` (for child processes): the
  ``convexsim`` under test is this checkout's, not whatever an installed copy points at.
* ``tests/`` goes on ``sys.path`` so that ``repo_paths`` (REPO, SCENES, STUDIES, DOCS) and
  ``model_builder`` are importable from every test directory; the ``repo`` fixture gives the root.
* Hypothesis runs derandomized, without an example database, its caches under the root.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

_ROOT = Path(__file__).resolve().parent
for _p in (_ROOT / "tests", _ROOT):
    if str(_p) not in sys.path[:2]:
        sys.path.insert(0, str(_p))
# Child processes (``python -m convexsim.cli ...``) import this checkout too, whatever their cwd.
_rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(_ROOT)]
os.environ["PYTHONPATH"] = os.pathsep.join([str(_ROOT), *_rest])

from repo_paths import REPO  # noqa: E402

assert REPO == _ROOT, (REPO, _ROOT)

# Property tests draw the same examples on every run and from every directory: examples derived from
# the test itself, no example database in the working directory, no wall-clock deadline.
settings.register_profile("convexsim", derandomize=True, database=None, deadline=None)
settings.load_profile("convexsim")
set_hypothesis_home_dir(REPO / ".hypothesis")   # its caches at the root (git-ignored), not in the cwd


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return REPO
