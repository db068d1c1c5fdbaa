"""convexsim.multibody: kinematic trees in reduced coordinates (docs/articulated.md).

Revolute, prismatic, fixed, ball and free joints; forward kinematics, Jacobians, the mass matrix by the
composite-rigid-body algorithm and inverse dynamics by recursive Newton–Euler (Featherstone, *Rigid
Body Dynamics Algorithms*), configuration integration and differences, and a standalone reference step
with joint limits, PD actuators and couplers as SAP constraints.
"""

from convexsim.multibody.dynamics import (
    bias_forces,
    gravity_forces,
    inverse_dynamics,
    kinetic_energy,
    mass_matrix,
    mass_matrix_reference,
    potential_energy,
)
from convexsim.multibody.kinematics import (
    Kinematics,
    difference,
    forward_kinematics,
    integrate_q,
    normalize_q,
    qdot,
)
from convexsim.multibody.model import Joint, JointType, MultibodyModel, MultibodyModelError, build_tree

__all__ = [
    "Joint",
    "JointType",
    "Kinematics",
    "MultibodyModel",
    "MultibodyModelError",
    "bias_forces",
    "build_tree",
    "difference",
    "forward_kinematics",
    "gravity_forces",
    "integrate_q",
    "inverse_dynamics",
    "kinetic_energy",
    "mass_matrix",
    "mass_matrix_reference",
    "normalize_q",
    "potential_energy",
    "qdot",
]
