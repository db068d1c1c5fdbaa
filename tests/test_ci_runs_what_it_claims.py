"""CI runs what it claims: under ``CI=true`` a skipped browser or Drake test fails the run (conftest.py), so
that a Chromium that failed to install or a missing ``compare`` extra cannot pass silently. Checked on a probe
test in a child pytest (the probe skips only when asked to, through an environment variable)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from repo_paths import REPO

PROBE_ENV = "CONVEXSIM_SKIP_PROBE"


@pytest.mark.browser
def test_probe_browser():
    """Skips when the probe variable is set (as a browser test does without Chromium); passes otherwise."""
    if os.environ.get(PROBE_ENV):
        pytest.skip("chromium not found (probe)")


@pytest.mark.drake
def test_probe_drake():
    if os.environ.get(PROBE_ENV):
        pytest.skip("could not import 'pydrake' (probe)")


def _child(ci: str) -> subprocess.CompletedProcess:
    env = {**os.environ, PROBE_ENV: "1", "CI": ci}
    probes = [f"{__file__}::{name}" for name in ("test_probe_browser", "test_probe_drake")]
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
                           *probes], cwd=REPO, env=env, capture_output=True, text=True)


def test_a_skipped_browser_or_drake_test_fails_in_ci():
    ci = _child("true")
    assert ci.returncode == 1 and "2 failed" in ci.stdout, ci.stdout[-1500:]
    assert ci.stdout.count("skipped in CI (CI=true), but a") == 2, ci.stdout[-1500:]
    local = _child("")
    assert local.returncode == 0 and "2 skipped" in local.stdout, local.stdout[-1500:]
