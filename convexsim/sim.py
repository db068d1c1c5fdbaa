"""Scripted simulation: a :class:`Simulation` holds a model, its state, its step context and the controls
of the next step, and steps on demand, the loop a controller, a policy or a data-generation script writes::

    sim = Simulation("iiwa_push")
    for _ in range(1000):
        sim.set_target("iiwa_joint_1", 0.2 * math.sin(2 * math.pi * sim.t))
        sim.step()
    print(sim.qpos("iiwa_joint_1"), sim.body_pose("box")[:3])

Controls are arrays that hold until changed (like MuJoCo's ``ctrl``): position (and velocity) targets
per actuator, generalized forces per tree dof, external wrenches per body; :meth:`Simulation.set_target`,
:meth:`~Simulation.set_torque` and :meth:`~Simulation.set_wrench` set them by name. State is read by name
(:meth:`~Simulation.qpos`, :meth:`~Simulation.body_pose`, :meth:`~Simulation.contact_forces`); a state
snapshot (:attr:`~Simulation.state`, :meth:`~Simulation.set_state`) or :meth:`~Simulation.copy` branches
a rollout. Units are SI throughout; quaternions are (w, x, y, z).

Steps of a model with a compiled run loop (the SAP solver) go straight to its kernel (``simulate.RunKernel``),
n steps per call, with the controls as arrays (PD targets, joint torques, body wrenches); with the LCP solver each
step is one call of the compiled LCP step, which takes the same arrays (``convexsim.stepping.step``). Only models
the compiled steps do not take, and the steps they hand over, take the Python reference step, and the first one
says so (``SlowPathWarning``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from convexsim.controls import ControlArrays, actuator_names, joint_dofs
from convexsim.model import Model, State
from convexsim.simulate import SlowPathWarning, blas_threads_setting, hold_blas_threads, prepare, slow_path_text


class _ControlArray:
    """A control of the next steps, the :class:`~convexsim.controls.ControlArrays` field of the attribute's name:
    reading gives the array itself (write into it), assigning copies into it (shape and dtype kept)."""

    def __init__(self, doc: str):
        self.__doc__ = doc

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, sim, owner=None):
        return self if sim is None else getattr(sim._controls, self.name)

    def __set__(self, sim, value) -> None:
        getattr(sim._controls, self.name)[...] = value


@dataclass(frozen=True)
class ContactForces:
    """The contacts of the last step and their forces, all in W.

    Attributes:
        body_a, body_b: body indices (``Simulation.body_names``) of each contact pair, shape (nc,).
        point: contact point [m], shape (nc, 3).
        normal: unit normal from A into B, shape (nc, 3).
        phi: signed distance at the start of the step [m] (< 0: penetration), shape (nc,).
        force: average contact force on B over the step [N], shape (nc, 3) (A receives −force).
    """

    body_a: np.ndarray
    body_b: np.ndarray
    point: np.ndarray
    normal: np.ndarray
    phi: np.ndarray
    force: np.ndarray

    @property
    def count(self) -> int:
        return int(self.phi.shape[0])

    def total_on(self, body: int, by: int | None = None) -> np.ndarray:
        """Net contact force on body index ``body`` [N], shape (3,); ``by``: only from contacts with that body."""
        on_b, on_a = self.body_b == body, self.body_a == body
        if by is not None:
            on_b, on_a = on_b & (self.body_a == by), on_a & (self.body_b == by)
        return self.force[on_b].sum(axis=0) - self.force[on_a].sum(axis=0)


class Simulation:
    """A model, its state, its step context and the controls of the next step (module docstring).

    Args:
        scene: anything ``convexsim.simulate.simulate`` takes (a shipped scene name, a path, YAML text, a
            dict, a SceneSpec); or use :meth:`from_model`.
        time_step, contact_model, solver, overrides: as ``simulate``.
        path: "auto" (compiled step when eligible), "compiled" or "reference" (``stepping.step``).
        strict: raise on a SAP step that does not converge instead of warning.
        blas_threads: BLAS threads inside ``step`` (default 1; ``simulate.blas_threads_setting``).
    """

    def __init__(self, scene: Any, *, time_step: float | None = None, contact_model: str | None = None,
                 solver: str | None = None, overrides: Mapping[str, Any] | Iterable[str] | None = None,
                 path: str = "auto", strict: bool = False, blas_threads: int | None = None):
        model, state, _ = prepare(scene, time_step=time_step, contact_model=contact_model, solver=solver,
                                  overrides=overrides)
        self._setup(model, state, path=path, strict=strict, blas_threads=blas_threads)

    @classmethod
    def from_model(cls, model: Model, state: State, *, path: str = "auto", strict: bool = False,
                   blas_threads: int | None = None) -> "Simulation":
        """A Simulation of a compiled model from ``state`` (copied; it is also what :meth:`reset` returns to)."""
        sim = cls.__new__(cls)
        sim._setup(model, state, path=path, strict=strict, blas_threads=blas_threads)
        return sim

    def _setup(self, model: Model, state: State, *, path: str, strict: bool, blas_threads) -> None:
        from convexsim.stepping import dispatch

        dispatch.check_path(path)
        self._run_loop = dispatch.run_plan(model, path)[0]
        """Uncontrolled steps go straight to the compiled run kernel (``simulate.RunKernel``)."""
        self._kernel = None
        self.model = model
        self.path = path
        self.strict = strict
        self._initial = state.copy()
        blas_threads_setting(blas_threads)               # a bad setting fails here, not at the first step
        self._blas_threads = blas_threads
        self._blas_release = None
        self._slow_warned = False
        forest = model.forest
        trees = forest.trees if forest is not None else ()
        self.body_names: tuple[str, ...] = tuple(model.body_names)
        """Body names; a body's index is its row in ``State.q`` and in :attr:`wrench`."""
        self._body = {n: i for i, n in enumerate(self.body_names)}
        self._joint_q: dict[str, slice] = {}
        for tree in trees:
            m = tree.model
            for j, name in enumerate(tree.joint_names):
                qa = tree.q_start + int(m.joint_qadr[j])
                self._joint_q[name] = slice(qa, qa + m.joint_nq(j))
        self._joint_v = joint_dofs(model)
        self.joint_names: tuple[str, ...] = tuple(self._joint_v)
        """Names of the joints with degrees of freedom, in ``State.tree_q``/``tree_v`` order."""
        self.actuator_names: tuple[str, ...] = actuator_names(model)
        """Names of the PD actuators (their joints' names), in the order of :attr:`target`."""
        self._actuator = {n: i for i, n in enumerate(self.actuator_names)}
        self._controls = ControlArrays.empty(model)
        self._kernel_controls = self._controls.kernel_controls(model)
        """The run kernel's view of the controls (the same arrays, written in place by the setters)."""
        kind = dispatch.model_kind(model)
        self._compiled_controls = self._run_loop and (kind, model.solver.kind) in dispatch.CONTROLLED_COMPILED
        """Controlled steps (targets, torques, wrenches) also go straight to the run kernel."""
        self.reset()

    # -- controls --------------------------------------------------------------------------------------

    target = _ControlArray(
        """(nact,) position targets q_d [rad or m] of the actuators (:attr:`actuator_names` order); NaN: the
        scene's own target schedule. Write into it (``sim.target[:] = q_d``) or assign an array.""")
    target_velocity = _ControlArray("""(nact,) velocity targets v_d [rad/s or m/s] of the set targets; NaN: 0.""")
    torque = _ControlArray(
        """(nv,) generalized forces [N·m or N] added to the trees' dofs (``State.tree_v`` order); on a joint
        with a motor, clamp(τ₀ + τ, ±effort).""")
    wrench = _ControlArray(
        """(nbody, 6) external wrenches (τ_x, τ_y, τ_z, f_x, f_y, f_z) in W at each body's COM [N·m, N].""")

    def set_target(self, joint: str, position: float, velocity: float | None = None) -> None:
        """The PD target of ``joint``'s actuator from the next step on: q_d [rad or m], v_d [rad/s or m/s]
        (None: 0). ``clear_target`` returns it to the scene's schedule."""
        i = self._index(self._actuator, joint, "actuator")
        self.target[i] = position
        self.target_velocity[i] = np.nan if velocity is None else velocity

    def clear_target(self, joint: str) -> None:
        """Back to the scene's target schedule for ``joint``'s actuator."""
        i = self._index(self._actuator, joint, "actuator")
        self.target[i] = self.target_velocity[i] = np.nan

    def set_torque(self, joint: str, value: float | Iterable[float]) -> None:
        """Generalized force on ``joint``'s dofs [N·m or N] (a number for a 1-dof joint), from the next step on."""
        self.torque[self._index(self._joint_v, joint, "joint")] = value

    def set_wrench(self, body: str, force: Iterable[float] = (0.0, 0.0, 0.0),
                   torque: Iterable[float] = (0.0, 0.0, 0.0)) -> None:
        """External force f_W [N] at ``body``'s centre of mass and torque τ_W [N·m], in W, from the next
        step on (a tree's link: mapped to its joints by the link's Jacobian)."""
        i = self._index(self._body, body, "body")
        self.wrench[i, :3] = torque
        self.wrench[i, 3:] = force

    # -- kinematic bodies (a script sets their pose and velocity; each step advances the pose by the velocity)

    def set_body_pose(self, body: str, position: Iterable[float],
                      quaternion: Iterable[float] = (1.0, 0.0, 0.0, 0.0)) -> None:
        """Place the kinematic ``body`` now: its COM at ``position`` in W [m], orientation R_WB ``quaternion``
        (w, x, y, z; normalized). Its velocity is kept (:meth:`set_body_velocity`); set both each step to
        follow a trajectory. ValueError for a body that is not kinematic."""
        i = self._kinematic_index(body)
        p = _finite_vector(position, 3, "position")
        quat = _finite_vector(quaternion, 4, "quaternion")
        norm = float(np.linalg.norm(quat))
        if norm == 0.0:
            raise ValueError(f"set_body_pose({body!r}): the quaternion is zero")
        q = self._own_state().q
        q[i, :3] = p
        q[i, 3:] = quat / norm

    def set_body_velocity(self, body: str, linear: Iterable[float] = (0.0, 0.0, 0.0),
                          angular: Iterable[float] = (0.0, 0.0, 0.0)) -> None:
        """The velocity of the kinematic ``body`` from the next step on: its COM velocity ``linear`` in W
        [m/s] and angular velocity ``angular`` in W [rad/s]; each step advances its pose by it and its contacts
        push with it. ValueError for a body that is not kinematic."""
        i = self._kinematic_index(body)
        v = self._own_state().v
        v[i, 3:] = _finite_vector(linear, 3, "linear")
        v[i, :3] = _finite_vector(angular, 3, "angular")

    def _kinematic_index(self, body: str) -> int:
        i = self._index(self._body, body, "body")
        if not (i < self.model.body_kinematic.shape[0] and self.model.body_kinematic[i]):
            kin = [self.body_names[k] for k in self.model.kinematic_bodies]
            raise ValueError(f"body {body!r} is not kinematic (its motion comes from its dynamics: push it with "
                             f"set_wrench); give it `kinematic: true` in the scene to script it. Kinematic bodies: "
                             f"{kin or 'none'}")
        return i

    def clear_controls(self) -> None:
        """No controls: scene targets, zero torques and wrenches."""
        self._controls.clear()

    def controls(self):
        """The controls of the next step by name (``multibody.forest.Controls``), or None when none is set;
        the arrays themselves: :attr:`target`, :attr:`target_velocity`, :attr:`torque`, :attr:`wrench`."""
        return self._controls.to_controls(self.model)

    # -- state -----------------------------------------------------------------------------------------

    @property
    def t(self) -> float:
        """Simulated time [s]."""
        return float(self._state.t)

    @property
    def step_count(self) -> int:
        """Steps taken since the initial state."""
        return int(self._state.step)

    @property
    def state(self) -> State:
        """A copy of the current state (a snapshot: later steps do not change it; :meth:`set_state`)."""
        return self._state.copy()

    def set_state(self, state: State) -> None:
        """Continue from (a copy of) ``state``; the step context's warm starts are dropped."""
        from convexsim.stepping.context import StepContext

        self._state = state.copy()
        self.ctx = StepContext()
        self._info = None
        self._kernel_frame = False

    def qpos(self, joint: str) -> float | np.ndarray:
        """Joint coordinates of ``joint`` [rad or m; a float for 1-coordinate joints, else a copy]."""
        return self._joint_value(self._state.tree_q, self._joint_q, joint)

    def qvel(self, joint: str) -> float | np.ndarray:
        """Joint velocities of ``joint`` [rad/s or m/s; a float for 1-dof joints, else a copy]."""
        return self._joint_value(self._state.tree_v, self._joint_v, joint)

    def body_pose(self, body: str) -> np.ndarray:
        """(7,) pose of ``body``: COM position in W [m], quaternion R_WB (w, x, y, z); a copy."""
        return self._state.q[self._index(self._body, body, "body")].copy()

    def body_velocity(self, body: str) -> np.ndarray:
        """(6,) velocity of ``body``: angular velocity ω_W [rad/s], COM velocity v_W [m/s]; a copy."""
        return self._state.v[self._index(self._body, body, "body")].copy()

    def contact_forces(self) -> ContactForces:
        """The contacts of the last step and their forces (none before the first step)."""
        info = self.info
        if info is None:
            z = np.zeros((0, 3))
            return ContactForces(np.zeros(0, np.int64), np.zeros(0, np.int64), z, z, np.zeros(0), z)
        c = info.contacts
        force = info.force_world if info.force_world.shape[0] == c.count else np.zeros((c.count, 3))
        return ContactForces(c.body_a.copy(), c.body_b.copy(), c.point.copy(), c.normal.copy(), c.phi.copy(),
                             np.array(force, dtype=float))

    def actuator_forces(self) -> dict[str, float]:
        """Generalized force of each PD actuator over the last step [N·m or N], after effort saturation."""
        info = self.info
        if info is None:
            return {}
        return {n: float(f) for n, f in zip(info.actuator_names, info.actuator_force)}

    # -- stepping --------------------------------------------------------------------------------------

    @property
    def info(self):
        """The last step's ``StepInfo`` (None before the first step); built on first access."""
        if self._info is None and self._kernel_frame:
            self._info = self._kernel_info()
        return self._info

    def step(self, n: int = 1):
        """Take ``n`` steps with the current controls.

        Steps of a model with a compiled run loop go straight to the run kernel, n steps per call, with the
        controls (``simulate.RunKernel``); the others (the LCP solver) through ``stepping.step``, which takes
        the compiled step with the same controls where it can. Use :attr:`info` for the last step's
        ``StepInfo``.

        Raises:
            SimulationError: a step failed (NaN state, or a SAP step that did not converge with ``strict``).
        """
        if n < 1:
            raise ValueError(f"step(n): n must be >= 1, got {n}")
        if self._blas_release is None:
            self._hold_blas()
        c = self._controls
        if self._compiled_controls:     # the kernel reads NaN targets (scene schedules), the motors' torques
            self._advance_compiled(n, self._kernel_controls)
            return
        controlled = c.active()
        if self._run_loop and not controlled:
            self._advance_compiled(n, None)
        else:
            self.ctx.controls = c if controlled else None
            for _ in range(n):
                self._one_step()

    def _hold_blas(self) -> None:
        """Limit the BLAS pools from the first step until :meth:`close` (or this object is collected)."""
        import weakref

        self._blas_release = hold_blas_threads(self._blas_threads)
        weakref.finalize(self, self._blas_release)

    def close(self) -> None:
        """Give back the BLAS thread limit this simulation holds (the pools return to their counts once no
        simulation holds them). Stepping again takes it again. Also ``with Simulation(...) as sim:``."""
        if self._blas_release is not None:
            self._blas_release()
            self._blas_release = None

    def __enter__(self) -> "Simulation":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _one_step(self) -> None:
        """One step through ``stepping.step`` (its info kept); the first step on the reference path that was
        not asked for says so (SlowPathWarning, once)."""
        from convexsim.stepping import step

        self._state, self._info = step(self.model, self._state, self.ctx, strict=self.strict, path=self.path)
        self._kernel_frame = False
        if not self._slow_warned and self.path == "auto" and self._info.path.startswith("reference"):
            self._warn_slow(self._info.path)

    def _advance_compiled(self, n: int, ctl: tuple | None) -> None:
        """n steps by the compiled run kernel with the trees' controls ``ctl`` (None: none), in place on the
        state's arrays; a step the kernel hands over goes through ``stepping.step``."""
        from convexsim.simulate import RunKernel

        if self._kernel is None:
            self._kernel = RunKernel(self.model, self.strict)
        kernel, st, dt = self._kernel, self._own_state(), self.model.time_step
        done = 0
        while done < n:
            code, taken, nf, _, bad, sap_status, extra = kernel.call(st.t, st.q, st.v, st.tree_q, st.tree_v, done,
                                                                     n, n - done, n, ctl)
            t = st.t
            for _ in range(taken):          # t += dt step by step, as every run loop counts time
                t += dt
            st.t, st.step, done = t, st.step + taken, done + taken
            if taken:
                self._info, self._kernel_frame = None, nf > 0
                self._warn_unconverged(kernel.bufs["st"][:taken], st)
            if code == kernel.K.RUN_NEED_CONTACT_SPACE:
                kernel.grow_contacts(2 * (kernel.bufs["c_phi"].shape[0] + int(extra)))
            elif kernel.hands_over(code):
                self.ctx.controls = self._controls if ctl is not None else None
                self._one_step()
                st = self._own_state()
                done += 1
            else:
                error = kernel.failure(code, st.step, st.t, bad, sap_status, extra)
                if error is not None:
                    raise error

    def _own_state(self) -> State:
        """The current state with C-contiguous float64 arrays the kernel may write in place."""
        st = self._state
        for name in ("q", "v", "tree_q", "tree_v"):
            x = getattr(st, name)
            if x is not None and not (x.flags.c_contiguous and x.dtype == np.float64 and x.flags.writeable):
                setattr(st, name, np.array(x, dtype=np.float64, order="C"))
        return st

    def _warn_unconverged(self, rows: np.ndarray, st: State) -> None:
        """A ConvergenceWarning for the first non-converged step among the kernel's step ``rows``
        (iterations, contacts, converged, line-search evaluations) ending at state ``st``."""
        if (rows[0, 2] != 0 if rows.shape[0] == 1 else rows[:, 2].all()):
            return
        from convexsim.stepping.types import ConvergenceWarning

        i = int(np.flatnonzero(rows[:, 2] == 0)[0])
        k = st.step - rows.shape[0] + i
        warnings.warn(f"step {k}: SAP did not converge after {int(rows[i, 0])} iterations",
                      ConvergenceWarning, stacklevel=4)

    def _kernel_info(self):
        """The StepInfo of the last kernel step, from the kernel's frame buffers (one frame: that step)."""
        from convexsim.model import Contacts
        from convexsim.sap.newton import SAP_STATUS_NAMES
        from convexsim.stepping.types import StepInfo

        b, kernel = self._kernel.bufs, self._kernel
        f = 0
        nc = int(b["fr_nc"][f])
        geom_body = self.model.geom_body
        geoms = b["c_geom"][:nc].copy()
        contacts = Contacts(geom_a=geoms[:, 0].copy(), geom_b=geoms[:, 1].copy(), body_a=geom_body[geoms[:, 0]],
                            body_b=geom_body[geoms[:, 1]], phi=b["c_phi"][:nc].copy(),
                            point=b["c_point"][:nc].copy(), normal=b["c_normal"][:nc].copy())
        iterations, _, ls_evals, status = (int(x) for x in b["fr_stat"][f])
        if status < 0:                               # no problem was solved
            info = StepInfo(contacts=contacts)
        else:
            info = StepInfo(contacts=contacts, gamma=b["c_gamma"][:nc].copy(), force_world=b["c_force"][:nc].copy(),
                            iterations=iterations, converged=status == 0, status=SAP_STATUS_NAMES[status],
                            momentum_residual=float(b["fr_resid"][f]), line_search_evaluations=ls_evals)
        if kernel.trees:
            pf = kernel.pf
            if status >= 0:
                info.actuator_force = b["fr_act"][f].copy()
            info.actuator_names = pf.actuator_names
            limit = {name: 0.0 for name in pf.limit_names}
            for name, x in zip(pf.limit_names, b["fr_lim"][f]):
                limit[name] += float(x)
            info.limit_force = limit
            info.constraint_force = {n: np.array([x]) for n, x in zip(pf.coupler_names, b["fr_con"][f])}
        info.path = "compiled"
        return info

    def _warn_slow(self, info_path: str) -> None:
        """The one SlowPathWarning of this simulation: why its step took the reference path."""
        from convexsim.stepping import dispatch

        self._slow_warned = True
        reason = info_path.partition(": ")[2] or dispatch.route(self.model, self.path,
                                                                controlled=self.ctx.controlled).reason
        warnings.warn(slow_path_text(reason), SlowPathWarning, stacklevel=4)

    def reset(self) -> None:
        """Back to the initial state with a fresh step context; the controls are cleared."""
        self.set_state(self._initial)
        self.clear_controls()

    def copy(self) -> "Simulation":
        """An independent Simulation of the same model from the current state, with the same controls and
        initial state, and a fresh step context (branching a rollout)."""
        other = Simulation.from_model(self.model, self._initial, path=self.path, strict=self.strict,
                                      blas_threads=self._blas_threads)
        other.set_state(self._state)
        for name in ("target", "target_velocity", "torque", "wrench"):
            getattr(other, name)[...] = getattr(self, name)
        other._slow_warned = self._slow_warned
        return other

    # -- helpers ---------------------------------------------------------------------------------------

    @staticmethod
    def _index(table: dict, name: str, kind: str):
        try:
            return table[name]
        except KeyError:
            raise KeyError(f"unknown {kind} {name!r}; {kind}s: {sorted(table)}") from None

    def _joint_value(self, values: np.ndarray | None, table: dict, joint: str):
        sl = self._index(table, joint, "joint")
        x = values[sl]
        return float(x[0]) if x.size == 1 else x.copy()


def _finite_vector(value, n: int, name: str) -> np.ndarray:
    """``value`` as a finite float vector of length n (ValueError naming ``name`` otherwise)."""
    x = np.asarray(value, dtype=float).reshape(-1)
    if x.shape != (n,) or not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must be {n} finite numbers, got {value!r}")
    return x


__all__ = ["Simulation", "ContactForces"]
