"""Per-step controls as arrays in model order, the form the compiled steps take.

:class:`ControlArrays` holds what a controller commands for the next step:

* ``target`` (n_act,): position targets q_d [rad or m] of the PD actuators, in the forest's actuator order
  (trees in order, each tree's actuators in scene order); NaN: the actuator follows its scene schedule,
* ``target_velocity`` (n_act,): velocity targets v_d [rad/s or m/s] of the set targets; NaN: 0,
* ``torque`` (nv,): generalized forces [N·m or N] added to the trees' dofs (``State.tree_v`` order); on a
  motor's joint they pass through the motor (its constant torque added, its effort clamping the sum:
  :meth:`ControlArrays.joint_forces`),
* ``wrench`` (nbody, 6): external wrenches (τ_W, f_W) [N·m, N] in W at each body's centre of mass.

``multibody.forest.Controls`` is the same by name (what a ``run_model`` controller returns);
:meth:`ControlArrays.from_controls` and :meth:`ControlArrays.to_controls` convert between the two.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from convexsim.model import Model


def actuator_names(model: Model) -> tuple[str, ...]:
    """The PD actuators' names (their joints' names) in the forest's actuator order."""
    forest = model.forest
    return tuple(a.name for tree in (forest.trees if forest is not None else ()) for a in tree.actuators)


def joint_dofs(model: Model) -> dict[str, slice]:
    """Joint name -> its slice of ``State.tree_v`` (joints with dofs only)."""
    out = {}
    forest = model.forest
    for tree in (forest.trees if forest is not None else ()):
        m = tree.model
        for j, name in enumerate(tree.joint_names):
            a, n = tree.v_start + int(m.joint_dofadr[j]), m.joint_nv(j)
            if n:
                out[name] = slice(a, a + n)
    return out


_MOTOR_ARRAYS: dict = {}


def motor_arrays(model: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The model's motors as arrays: (dof (nm,) int64 in ``State.tree_v``, constant torque τ₀ (nm,) [N·m or N],
    effort (nm,), inf when unlimited); empty without motors. Built once per model."""
    from convexsim.stepping.packing import per_model

    def build(m: Model):
        motors = m.forest.motors if m.forest is not None else ()
        return (np.array([x.dof for x in motors], dtype=np.int64), np.array([x.torque for x in motors], dtype=float),
                np.array([x.effort for x in motors], dtype=float))
    return per_model(_MOTOR_ARRAYS, model, build)


@dataclass
class ControlArrays:
    """The controls of the next step as arrays (module docstring)."""

    target: np.ndarray
    target_velocity: np.ndarray
    torque: np.ndarray
    wrench: np.ndarray

    @staticmethod
    def empty(model: Model) -> "ControlArrays":
        """No controls: NaN targets, zero torques and wrenches, sized for ``model``."""
        nact = len(actuator_names(model))
        nv = model.forest.nv if model.forest is not None else 0
        return ControlArrays(np.full(nact, np.nan), np.full(nact, np.nan), np.zeros(nv),
                             np.zeros((model.nbody, 6)))

    def clear(self) -> None:
        self.target[:] = np.nan
        self.target_velocity[:] = np.nan
        self.torque[:] = 0.0
        self.wrench[:] = 0.0

    def active(self) -> bool:
        """Whether any control is set."""
        return bool(self.torque.any() or self.wrench.any() or not np.isnan(self.target).all())

    @staticmethod
    def from_controls(c, model: Model) -> "ControlArrays":
        """The arrays of a (checked) ``multibody.forest.Controls``."""
        out = ControlArrays.empty(model)
        index = {n: i for i, n in enumerate(actuator_names(model))}
        for name, val in c.targets.items():
            x = np.atleast_1d(np.asarray(val, dtype=float))
            out.target[index[name]] = x[0]
            out.target_velocity[index[name]] = x[1] if x.size > 1 else 0.0
        dofs = joint_dofs(model)
        for name, val in c.torques.items():
            sl = dofs.get(name)
            if sl is not None:
                out.torque[sl] += np.atleast_1d(np.asarray(val, dtype=float))[:sl.stop - sl.start]
        W = c.wrench_array(model.body_names)
        if W is not None:
            out.wrench[:] = W
        return out

    def kernel_controls(self, model: Model) -> tuple:
        """The compiled steps' controls: (target, target_velocity, torque as commanded, the motors' dofs,
        constant torques and efforts (:func:`motor_arrays`), wrench); the kernels apply the motors each step.
        The same arrays (no copy): writing into them changes the next step's controls."""
        return (self.target, self.target_velocity, self.torque, *motor_arrays(model), self.wrench)

    def joint_forces(self, model: Model) -> np.ndarray:
        """The generalized forces (nv,) [N·m or N] the step applies for ``torque``: through the model's motors
        (``multibody.forest.motor_forces``: their constant torques added, their effort limits clamping)."""
        from convexsim.multibody.forest import motor_forces

        motors = model.forest.motors if model.forest is not None else ()
        return motor_forces(motors, self.torque) if motors else self.torque

    def to_controls(self, model: Model):
        """The same as a ``multibody.forest.Controls`` by name (for the reference steps), or None when no
        control is set."""
        from convexsim.multibody.forest import Controls

        if not self.active():
            return None
        names = actuator_names(model)
        targets = {names[i]: (float(self.target[i]), float(np.nan_to_num(self.target_velocity[i])))
                   for i in np.flatnonzero(~np.isnan(self.target)).tolist()}
        torques = {n: self.torque[sl].copy() for n, sl in joint_dofs(model).items() if self.torque[sl].any()}
        wrenches = {model.body_names[i]: self.wrench[i].copy()
                    for i in np.flatnonzero(np.any(self.wrench != 0.0, axis=1)).tolist()}
        return Controls(targets, torques, wrenches)


_NO_CONTROLS: dict = {}


def no_controls(model: Model) -> tuple:
    """The compiled steps' controls argument when none is set (:meth:`ControlArrays.kernel_controls`): NaN
    targets (the scene's schedules), no commanded torques, the motors (their constant torques apply), no
    wrenches. Built once per model and shared by every caller: never written."""
    from convexsim.stepping.packing import per_model

    def make(m: Model):
        if m.forest is None:              # no actuators, no joints (a free-body run imports no multibody model)
            e = np.zeros(0)
            return e, e, e, np.zeros(0, np.int64), e, e, np.zeros((m.nbody, 6))
        return ControlArrays.empty(m).kernel_controls(m)
    return per_model(_NO_CONTROLS, model, make)


def step_controls(controls, model: Model) -> tuple:
    """The compiled steps' controls tuple for a step context's ``controls``: a :class:`ControlArrays` as it is
    (its arrays, no copy; NaN targets and zero torques and wrenches act as none), a
    ``multibody.forest.Controls`` converted, None or an empty Controls :func:`no_controls`."""
    if isinstance(controls, ControlArrays):
        return controls.kernel_controls(model)
    if controls is None or not (controls.targets or controls.torques or controls.wrenches):
        return no_controls(model)
    return ControlArrays.from_controls(controls, model).kernel_controls(model)


__all__ = ["ControlArrays", "actuator_names", "joint_dofs", "no_controls", "step_controls"]
