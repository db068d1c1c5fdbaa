"""Fixtures of the viewer tests: real trajectories (session), synthetic ones, and a headless browser."""

from __future__ import annotations

import os

import pytest

from convexsim.io.trajectory import Trajectory

from viz_helpers import CHROMIUM, CHROMIUM_ARGS, PageProbe, scene_path, synthetic_trajectory


@pytest.fixture(scope="session")
def two_body_traj() -> Trajectory:
    return synthetic_trajectory()


@pytest.fixture(scope="session")
def box_stack_pair():
    """box_stack run for 0.05 s with SAP and with LCP (the real pipeline)."""
    from convexsim.simulate import simulate

    sap = simulate(scene_path("box_stack"), duration=0.05)
    lcp = simulate(scene_path("box_stack"), duration=0.05, solver="lcp")
    return sap, lcp


# ------------------------------------------------------------------------------------- browser
@pytest.fixture(scope="session")
def browser():
    """Headless system Chromium through Playwright (skipped when either is missing)."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} missing (make test installs Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def open_page(browser):
    pages: list[PageProbe] = []

    def _open(url: str, **kw) -> PageProbe:
        p = PageProbe(browser, url, **kw)
        pages.append(p)
        return p

    yield _open
    for p in pages:
        p.close()
