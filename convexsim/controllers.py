"""Compiled controllers: a control law written as a numba function that the compiled run loop calls before every
step, so that a scripted policy runs at the loop's speed (no Python between steps).

A controller has one fixed signature (:func:`controller_signature`)::

    law(t, q, v, tree_q, tree_v, target, target_velocity, torque, wrench, params) -> None

* ``t`` [s]: the time at the start of the step; ``q`` (nbody, 7), ``v`` (nbody, 6), ``tree_q`` (nq,),
  ``tree_v`` (nv,): the state at the start of the step (read only: the step owns them);
* ``target``, ``target_velocity`` (n_act,): the PD actuators' targets q_d [rad or m] and v_d (NaN: the
  actuator follows its scene schedule; v_d NaN: 0), in the forest's actuator order
  (``convexsim.controls.actuator_names``); ``torque`` (nv,): generalized forces [N·m or N] on the trees' dofs
  (``State.tree_v`` order; through the joint's motor, if it has one: constant torque added, effort clamp);
  ``wrench`` (nbody, 6): external wrenches (τ_W [N·m], f_W [N]) in W at each body's centre of mass (free
  bodies and the links of trees; a body's index is its row in ``q``). The law writes the commands into
  these arrays; they keep their values from one step to the next;
* ``params`` (np,): numbers the law reads (gains, set points) and may write (a controller's own state, e.g.
  an integrator), handed over by the caller.

:func:`compiled_controller` compiles a Python function of that signature once (``numba.cfunc``, cached on
disk). Every controller has the same numba type, so the run loop is compiled once for all of them: a new
controller costs its own compilation (a fraction of a second), not the step's.

A law runs in the compiled SAP run loop (``run_model(..., controller=law)``); the LCP stepper has no compiled
run loop, so a model with the LCP solver refuses a compiled law with the reason (a Python controller drives
its compiled steps).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from convexsim._jit import CACHE

_F64_1D = "float64[::1]"
_F64_2D = "float64[:, ::1]"


def controller_signature():
    """The numba signature of a compiled controller (module docstring): void(float64 t, q (nbody, 7),
    v (nbody, 6), tree_q, tree_v, target, target_velocity, torque, wrench (nbody, 6), params)."""
    from numba import types

    a1 = types.Array(types.float64, 1, "C")
    a2 = types.Array(types.float64, 2, "C")
    return types.void(types.float64, a2, a2, a1, a1, a1, a1, a1, a2, a1)


class KernelLaw:
    """A compiled law as the run kernel's argument: its C address and signature, with its numba type built
    once. (numba types a ``cfunc`` argument by building its ``FunctionType`` again on every kernel call, a
    Python-level cost paid per ``Simulation.step()``; this object carries the same type ready-made, and numba
    takes it through the first-class-function protocol: ``__wrapper_address__`` and ``signature``.)"""

    __slots__ = ("cfunc", "address", "sig", "numba_type")

    def __init__(self, cfunc):
        from numba.core.types import FunctionType

        self.cfunc, self.address, self.sig = cfunc, int(cfunc.address), cfunc._sig
        self.numba_type = FunctionType(self.sig)

    def __wrapper_address__(self) -> int:
        return self.address

    def __call__(self, *args):
        """Call the law from Python (the run loop does so when numba's JIT is disabled)."""
        return self.cfunc(*args)

    def signature(self):
        return self.sig


def _register_kernel_law_type() -> None:
    """Teach numba the type of a :class:`KernelLaw` (its ready-made ``numba_type``) and that it follows the
    first-class-function protocol."""
    from numba.core.types.function_type import WrapperAddressProtocol
    from numba.core.typing.typeof import typeof_impl

    WrapperAddressProtocol.register(KernelLaw)
    typeof_impl.register(KernelLaw)(lambda val, c: val.numba_type)


_register_kernel_law_type()


@dataclass
class CompiledController:
    """A control law compiled with :func:`controller_signature` and its parameter vector.

    ``law`` is the compiled function (a ``numba.cfunc``), ``kernel_law`` the same as the run loop's argument
    (:class:`KernelLaw`), ``python`` the function it was compiled from (callable from Python for tests),
    ``params`` (np,) float64 the numbers it reads."""

    law: object
    python: Callable
    params: np.ndarray = field(default_factory=lambda: np.zeros(0))
    name: str = "controller"
    kernel_law: KernelLaw | None = None

    def __post_init__(self):
        if self.kernel_law is None:
            self.kernel_law = KernelLaw(self.law)

    def with_params(self, params) -> "CompiledController":
        """The same law with another parameter vector (no recompilation)."""
        return CompiledController(self.law, self.python, _params(params), self.name, self.kernel_law)


def _params(params) -> np.ndarray:
    p = np.ascontiguousarray(np.atleast_1d(np.asarray(params if params is not None else (), dtype=np.float64)))
    if p.ndim != 1:
        raise ValueError(f"controller params must be a 1-d sequence of numbers, got shape {p.shape}")
    if not np.all(np.isfinite(p)):
        raise ValueError("controller params must be finite")
    return p


def compiled_controller(fn: Callable | None = None, *, params=None):
    """Compile ``fn`` as a controller (module docstring); usable as ``@compiled_controller`` or
    ``compiled_controller(fn, params=[...])``. Cached on disk when ``fn`` lives in a file (not for code
    without one, e.g. ``python -c``). Raises a numba TypingError naming the line when ``fn`` does
    not fit the signature."""
    def build(f: Callable) -> CompiledController:
        import numba

        try:
            law = numba.cfunc(controller_signature(), cache=CACHE)(f)
        except RuntimeError as err:       # code without a file (python -c, exec): compiled, not cached
            if "cannot cache" not in str(err):
                raise
            law = numba.cfunc(controller_signature(), cache=False)(f)
        return CompiledController(law, f, _params(params), getattr(f, "__name__", "controller"))

    return build if fn is None else build(fn)


def _hold(t, q, v, tree_q, tree_v, target, target_velocity, torque, wrench, params):
    """The controller that commands nothing (the run loop's default): the arrays keep what they hold."""
    return None


_NO_CONTROLLER: list = []


def no_controller() -> CompiledController:
    """The do-nothing controller (compiled once per process, loaded from the cache after the first)."""
    if not _NO_CONTROLLER:
        _NO_CONTROLLER.append(compiled_controller(_hold))
    return _NO_CONTROLLER[0]


__all__ = ["CompiledController", "KernelLaw", "compiled_controller", "controller_signature", "no_controller"]
