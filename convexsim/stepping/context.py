"""The step context: everything a run carries from one step to the next, in one explicit object.

A step is a function of (model, state, context). The context holds

* ``collision``: the collision buffers (grown as needed; their previous content never matters),
* ``symbolic``: the SAP Newton matrix's symbolic analyses keyed by the clique graph (the reference path
  gets exactly the analysis ``analyze`` would compute, so caching never changes its result; the compiled
  path's large islands keep an analysis while the graph stays inside its pattern, which changes results
  by round-off only),
* ``lcp_warm``: the LCP stepper's previous basis per contact, used as a warm start only for
  the step that follows it, with the same model (a warm answer is accepted only if it passes
  Lemke's check on the new LCP),
* ``lemke``: the Lemke tableau workspace,
* ``controls``: what a controller commands for the next step (joint targets and torques, body wrenches:
  ``multibody.forest.Controls`` by name, or ``convexsim.controls.ControlArrays``; set by
  ``simulate(..., controller=fn)`` or ``convexsim.sim.Simulation`` before every step, None otherwise;
  :meth:`StepContext.control_arrays` and :meth:`StepContext.named_controls` give either form).

Nothing is kept anywhere else: two contexts never share state, and the same (model, state) with a
fresh context always gives the same step, whatever ran before in the process. ``simulate`` owns one
context per run; scripted loops pass one to ``step`` to get the warm start and the caches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from convexsim.geometry.collide import CollisionWorkspace
from convexsim.lcp.lemke import LemkeWorkspace
from convexsim.model import Model
from convexsim.sap.linalg import SymbolicCache


@dataclass
class LcpWarmStart:
    """The previous step's final Lemke basis per contact: row r = which of (p_n, β_1..β_d, λ) of contact
    keys[r] were basic (basic variables at value 0 included).

    Owned by a step context (convexsim.stepping.StepContext); it is used only for the step that
    directly follows the one that stored it, with the same model object.
    """

    model: Model | None = None
    next_step: int = -1
    num_directions: int = -1
    index: dict | None = field(default_factory=dict)
    _keys: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64), repr=False)
    per_contact: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), bool))

    def store(self, model: Model, next_step: int, keys: np.ndarray, layout, basic: np.ndarray) -> None:
        """Keep the basic z's (bool, laid out by ``layout``, a ContactLcpLayout) for step ``next_step``."""
        m, d = layout.num_contacts, layout.num_directions
        basic = np.asarray(basic, bool)
        pc = np.zeros((m, d + 2), bool)
        pc[:, 0] = basic[:m]
        if d:
            pc[:, 1:d + 1] = basic[m:m + m * d].reshape(m, d)
            pc[:, d + 1] = basic[m + m * d:m + m * d + m]
        self.model, self.next_step, self.num_directions = model, next_step, d
        self.index = {tuple(k): r for r, k in enumerate(keys.tolist())}
        self.per_contact = pc

    def store_per_contact(self, model: Model, next_step: int, keys: np.ndarray, d: int,
                          per_contact: np.ndarray) -> None:
        """``store`` from rows already laid out per contact ((p_n, β_1..β_d, λ) of contact keys[r], shape
        (m, d + 2)); the key index is built only if ``guess`` needs it (the compiled LCP step)."""
        self.model, self.next_step, self.num_directions = model, next_step, int(d)
        self.index = None
        self._keys = keys
        self.per_contact = np.asarray(per_contact, bool)

    def guess(self, model: Model, step: int, keys: np.ndarray, layout) -> np.ndarray | None:
        """Guessed basic z's of the new LCP (the stored basis; new contacts: w basic), or None if stale."""
        m, d = layout.num_contacts, layout.num_directions
        if self.model is not model or self.next_step != step or self.num_directions != d:
            return None
        if self.index is None:
            self.index = {tuple(k): r for r, k in enumerate(self._keys.tolist())}
        basic = np.zeros(layout.size, bool)
        for i, k in enumerate(keys.tolist()):
            r = self.index.get(tuple(k))
            if r is None:
                continue
            pc = self.per_contact[r]
            basic[i] = pc[0]
            if d:
                basic[m + i * d:m + (i + 1) * d] = pc[1:d + 1]
                basic[m + m * d + i] = pc[d + 1]
        return basic


@dataclass
class StepContext:
    """Per-run state carried between steps (module docstring). Create one per run: ``StepContext()``."""

    collision: CollisionWorkspace = field(default_factory=CollisionWorkspace)
    symbolic: SymbolicCache = field(default_factory=SymbolicCache)
    lcp_warm: LcpWarmStart = field(default_factory=LcpWarmStart)
    lemke: LemkeWorkspace = field(default_factory=lambda: LemkeWorkspace(16))
    controls: Any = None
    big_islands: bool = False
    """The last compiled step had an island above the dense limit (``stepping.compiled``): the next one
    starts with the two-call supernodal step. A routing hint only: the result is the same either way."""
    step_buffers: Any = None
    """The compiled single step's output buffers (``compiled.OneStepBuffers``), overwritten by every step."""
    lcp_crash_failed: tuple[int, int] = (-1, 0)
    """(step, k): the LCP stepper's crash start last failed at that step and is skipped for the k steps after
    it (``lcp_stepper.CRASH_BACKOFF_MAX``); k doubles with each failure in a row and resets on a success."""

    @property
    def controlled(self) -> bool:
        """Whether ``controls`` sets joint targets, torques or body wrenches for the next step."""
        c = self.controls
        if c is None:
            return False
        return c.active() if hasattr(c, "active") else bool(c.targets or c.torques or c.wrenches)

    def control_arrays(self, model: Model):
        """``controls`` as ``convexsim.controls.ControlArrays`` (the compiled step's form), or None."""
        from convexsim.controls import ControlArrays

        c = self.controls
        if c is None or isinstance(c, ControlArrays):
            return c
        return ControlArrays.from_controls(c, model)

    def named_controls(self, model: Model):
        """``controls`` as ``multibody.forest.Controls`` by name (the reference steps' form), or None."""
        from convexsim.controls import ControlArrays

        c = self.controls
        return c.to_controls(model) if isinstance(c, ControlArrays) else c

    def body_wrench(self, model: Model) -> np.ndarray | None:
        """(nbody, 6) external wrenches (τ_W, f_W) [N·m, N] at the bodies' COMs that ``controls`` sets for the
        next step, or None."""
        c = self.controls
        if c is None:
            return None
        if hasattr(c, "active"):                      # ControlArrays
            return c.wrench if c.wrench.any() else None
        return c.wrench_array(model.body_names)


__all__ = ["StepContext", "LcpWarmStart"]
