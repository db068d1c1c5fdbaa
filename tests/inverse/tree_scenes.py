"""Tree scenes of the robot gradient and identification tests."""

ARM = """
name: arm2
time_step: 0.002
bodies:
  - {name: upper, mass: 2.0, inertia: [0.02, 0.02, 0.002]}
  - {name: fore, mass: 1.2, inertia: [0.01, 0.01, 0.001]}
joints:
  - {name: shoulder, type: revolute, child: upper, axis: [0, 1, 0], position: [0, 0, 1.0],
     child_offset: [0, 0, 0.25], initial_position: 0.6, initial_velocity: -1.0, damping: 0.8}
  - {name: elbow, type: revolute, parent: upper, child: fore, axis: [0, 1, 0], position: [0, 0, 0.25],
     child_offset: [0, 0, 0.2], initial_position: -0.9, initial_velocity: 2.0, damping: 0.3}
actuators:
  - {joint: shoulder, kp: 300, kd: 8, target: [[0.0, 0.6], [0.1, 0.2], [0.2, 0.5]]}
  - {joint: elbow, kp: 150, kd: 4, target: [[0.0, -0.9], [0.1, -0.4], [0.2, -0.7]]}
"""
"""A two-link arm (2 kg and 1.2 kg links, 0.25 m and 0.2 m COM offsets) swinging in the x–z plane under
gravity, damped joints and PD actuators following piecewise-linear targets (no contact)."""
