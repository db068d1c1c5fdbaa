"""A run limits the BLAS pools to one thread (its factorizations are small and gain nothing from threads),
unless asked otherwise (``blas_threads``, ``CONVEXSIM_BLAS_THREADS``); the limit is lifted after the run.

Each test first sets every BLAS pool to 2 threads, so a run that did not limit them would be seen.
"""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from convexsim.sim import Simulation
from convexsim.simulate import blas_threads_setting, prepare, run_model

SCENE = """
time_step: 1.0e-3
bodies:
  - {name: bob, mass: 1.0, geometries: [{shape: sphere, radius: 0.05}]}
joints:
  - {name: hinge, type: revolute, child: bob, axis: [0, 1, 0], position: [0, 0, 1.5], child_offset: [0, 0, -1]}
"""


def blas_threads() -> set[int]:
    return {p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"}


@pytest.fixture
def two_threads():
    import numpy  # noqa: F401  (numpy's and scipy's BLAS loaded before the pools are set)
    import scipy.linalg  # noqa: F401

    if not blas_threads():
        pytest.skip("no BLAS pool that threadpoolctl can see")
    with threadpool_limits(limits=2, user_api="blas"):
        assert blas_threads() == {2}
        yield


@pytest.mark.parametrize("env, expected", [(None, {1}), ("3", {3}), ("default", {2})])
def test_a_run_uses_one_blas_thread_unless_asked(two_threads, monkeypatch, env, expected):
    if env is None:
        monkeypatch.delenv("CONVEXSIM_BLAS_THREADS", raising=False)
    else:
        monkeypatch.setenv("CONVEXSIM_BLAS_THREADS", env)
    model, state, _ = prepare(SCENE)
    seen = []
    run_model(model, state, duration=0.003, path="reference", step_callback=lambda m, s, i: seen.append(blas_threads()))
    assert seen and all(s == expected for s in seen)
    assert blas_threads() == {2}


def test_a_simulation_step_uses_one_blas_thread(two_threads, monkeypatch):
    monkeypatch.delenv("CONVEXSIM_BLAS_THREADS", raising=False)
    sim = Simulation(SCENE, path="reference")
    seen = []
    import convexsim.stepping.free_motion as art

    original = art.assemble

    def spy(*args, **kwargs):
        seen.append(blas_threads())
        return original(*args, **kwargs)

    monkeypatch.setattr(art, "assemble", spy)
    sim.step(2)
    assert seen == [{1}, {1}]
    assert blas_threads() == {1}          # held from the first step until close()
    sim.close()
    assert blas_threads() == {2}
    with Simulation(SCENE, path="reference", blas_threads=0) as sim2:
        seen.clear()
        sim2.step(1)
        assert seen == [{2}]


def test_bad_settings_name_their_source(monkeypatch):
    monkeypatch.setenv("CONVEXSIM_BLAS_THREADS", "many")
    with pytest.raises(ValueError, match="CONVEXSIM_BLAS_THREADS: must be a thread count"):
        blas_threads_setting()
    with pytest.raises(ValueError, match="blas_threads: must be a thread count"):
        blas_threads_setting(-2)
    assert blas_threads_setting(4) == 4 and blas_threads_setting("default") is None


def test_the_pools_are_found_once_and_again_after_an_import(monkeypatch):
    """Finding the pools walks the loaded libraries: done once, and again only when a module was imported since
    (a BLAS comes with the extension module that links it), so a later-loaded BLAS is still limited."""
    import sys
    import types

    from convexsim.simulate import blas_pools

    first = blas_pools()
    assert blas_pools() is first
    monkeypatch.setitem(sys.modules, "_convexsim_test_new_module", types.ModuleType("_convexsim_test_new_module"))
    again = blas_pools()
    assert again is not first
    assert {lib.internal_api for lib in again.lib_controllers} == {lib.internal_api for lib in first.lib_controllers}
    assert blas_pools() is again
