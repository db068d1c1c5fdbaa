"""Shared fixtures of the study tests: a tiny inline study and the shipped studies run once, reduced."""

from __future__ import annotations

import pytest
from study_testkit import STUDIES, tiny_study


@pytest.fixture
def tiny_spec() -> dict:
    """A fresh tiny study mapping."""
    return tiny_study()


_SHIPPED_CACHE: dict[str, object] = {}


@pytest.fixture(scope="session")
def shipped_reduced(tmp_path_factory):
    """Run a shipped study at reduced size once per session; returns ``run(name) -> StudyResult``."""
    from convexsim.studies import run_study

    def run(name: str, *, plots: bool = False):
        key = f"{name}:{plots}"
        if key not in _SHIPPED_CACHE:
            out = tmp_path_factory.mktemp(name)
            _SHIPPED_CACHE[key] = run_study(STUDIES / f"{name}.yaml", reduced=True, jobs=1, out_dir=out,
                                            progress=False, plots=plots, report=plots)
        return _SHIPPED_CACHE[key]

    return run
