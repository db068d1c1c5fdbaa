"""Helpers of the study tests: the repository paths and a tiny inline study (imported by name)."""

from __future__ import annotations

import copy

from repo_paths import REPO, STUDIES  # noqa: F401  (re-exported to the study tests)

# A sphere resting on a rigid ground; dt = 1e-2 s keeps every run to a few dozen steps.
TINY_SCENE = {
    "name": "tiny_sphere",
    "time_step": 1.0e-2,
    "duration": 0.2,
    "gravity": [0.0, 0.0, -9.81],
    "contact_model": "sap",
    "materials": {
        "default": {"friction": 0.5, "stiffness": 1.0e4, "dissipation_time": 0.05,
                    "hunt_crossley_dissipation": 5.0},
        "rigid": {"friction": 0.5, "stiffness": 1.0e15, "dissipation_time": 0.0,
                  "hunt_crossley_dissipation": 0.0},
    },
    "bodies": [
        {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace", "material": "rigid"}]},
        {"name": "ball", "mass": 1.0, "position": [0.0, 0.0, 0.1],
         "geometries": [{"shape": "sphere", "radius": 0.1}]},
    ],
}


def tiny_study(**changes) -> dict:
    """A four-run study on the tiny scene (stiffness × contact model), with ``changes`` applied on top."""
    spec = {
        "name": "tiny",
        "scene": copy.deepcopy(TINY_SCENE),
        "parameters": [
            {"path": "materials.default.stiffness", "values": [1.0e3, 1.0e4]},
            {"path": "contact_model", "values": ["sap", "lagged"]},
        ],
        "metrics": ["rest_penetration", "max_penetration", "hop_height", "energy_drift",
                    "newton_iterations_mean", "contacts_per_step", "ms_per_step"],
    }
    spec.update(changes)
    return spec




# Stand-ins for ``runner.execute_run`` / the pool initializer, run inside spawned pool workers (they are
# pickled by reference, so they must live in an importable module, not in a test file).


def no_warm_up() -> None:
    """A pool initializer that does nothing (the fake runs below do not need the numba kernels)."""


def exit_worker_once(marker: str, task):
    """Kill this worker process the first time any worker gets here (``marker`` is created), then run normally."""
    import os

    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        from convexsim.studies.runner import execute_run

        return execute_run(task)
    os.close(fd)
    os._exit(3)


def exit_worker_always(task):
    """Kill this worker process (a run that takes its worker down every time)."""
    import os

    os._exit(3)


def exit_worker_on_run(index: int, task):
    """Kill this worker process whenever it runs task ``index`` (a run that always takes its worker down);
    run the other tasks normally."""
    import os

    if task.index == index:
        os._exit(3)
    from convexsim.studies.runner import execute_run

    return execute_run(task)
