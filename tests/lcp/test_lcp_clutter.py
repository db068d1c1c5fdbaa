"""mixed_clutter (96 spheres, boxes and capsules tumbling into a bin) runs its full 1.5 s with the LCP stepper,
cold and warm: the rigid reference on a heap of 300+ contacts whose big island has n ≈ 2500–3100 LCP unknowns.

Cold (no previous basis) each big-island step starts from the crash basis computed from its own LCP, warm from
the previous step's basis; both fall back to the cold chain and its rungs, and every answer passes Lemke's
final check on the original (M, q) (docs/lcp.md §6). Measured on the 2-core development machine (CPU, one BLAS
thread): ≈ 1 min warm, ≈ 3–4.5 min cold. The cold run is the one test of the `long` tier: CI runs it
after `make test` (`make test-long`), which keeps `make test` within its 10 minutes. The cold run here, the warm one in test_lcp_clutter_warm.py: separate files
(and collected first, conftest.py) so that the parallel suite runs them beside the others.
"""

from __future__ import annotations

import numpy as np
import pytest

from test_lcp_scenes import check_full_run

BIN_HALF_WIDTH = 0.4
"""The bin's walls are the halfspaces x = ±0.4 m and y = ±0.4 m, its floor z = 0 (scenes/mixed_clutter.yaml)."""


def check_clutter_run(warm, monkeypatch):
    """The run completes; every body's centre stays inside the bin and above its floor at every frame (a body
    that tunnelled through a wall or the floor would leave it: the rigid contacts admit only the small
    penetration that the stabilization removes)."""
    traj = check_full_run("mixed_clutter", warm, monkeypatch)
    x, y, z = traj.position[..., 0], traj.position[..., 1], traj.position[..., 2]
    assert np.abs(x).max() <= BIN_HALF_WIDTH and np.abs(y).max() <= BIN_HALF_WIDTH
    assert z.min() >= 0.0


@pytest.mark.roundoff
@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1200)
def test_mixed_clutter_full_duration_with_lcp_cold(monkeypatch):
    check_clutter_run(False, monkeypatch)
