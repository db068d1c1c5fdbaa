"""Side-by-side runs of a convexsim scene in Drake (discrete SAP) and MuJoCo, for speed and agreement.

Optional: needs the ``compare`` extra (``pip install -e '.[compare]'``, the drake and mujoco wheels).
The translation covers free rigid bodies and fixed bodies with sphere, box, capsule and halfspace
geometry (every shipped scene); see docs/performance.md for the parameter matching and its limits.

* ``drake_system(model, state)``: a Drake MultibodyPlant (point contact, SAP) of the scene,
* ``mujoco_xml(model, state)``: MJCF text of the scene with matched contact parameters,
* ``run_side_by_side(scene, duration, engines)``: timed runs and their agreement.
"""

from __future__ import annotations

from convexsim.tools.compare_engines.engines import (EngineRun, MissingEngine, UntranslatableScene,
                                                     available_engines, drake_system, mujoco_xml,
                                                     run_side_by_side, translation_problem)

__all__ = ["EngineRun", "MissingEngine", "UntranslatableScene", "available_engines", "drake_system", "mujoco_xml",
           "run_side_by_side", "translation_problem"]
