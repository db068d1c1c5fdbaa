"""mixed_clutter runs its full 1.5 s with the LCP stepper, warm-started (the cold run and the checks:
test_lcp_clutter.py; a file of its own so that the parallel suite runs the two side by side)."""

from __future__ import annotations

import pytest

from test_lcp_clutter import check_clutter_run


@pytest.mark.roundoff
@pytest.mark.slow
@pytest.mark.long     # ≈ 65 s on one core: the long tier (make test-long, which CI runs after make test)
@pytest.mark.timeout(600)
def test_mixed_clutter_full_duration_with_lcp_warm(monkeypatch):
    check_clutter_run(True, monkeypatch)
