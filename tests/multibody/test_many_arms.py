"""iiwa_push_10: ten copies of iiwa_push 1 m apart. The arms never touch, so each arm and its box is an island
of its own and must move exactly as the single-arm scene does: a check of the compiled tree step's packing of
many trees (cliques, rows, islands) against the one-tree scene."""

from __future__ import annotations

import numpy as np

from convexsim.simulate import prepare, simulate
from convexsim.stepping.packing import compiled_step_supported

DURATION = 1.3
"""[s]: the hold (1 s) and the first 0.3 s of the push, in which each box moves about 4 cm."""


def test_ten_arms_push_their_boxes_as_one_arm_does():
    """Each box's final position, shifted back by its arm's 1 m offset in y, equals the single-arm box's within
    1e-7 m. Both runs stop Newton at the same relative tolerance (1e-6) on identical islands; the copies differ
    only in the round-off of their 1 m offsets (measured: 1e-14 m). The box must also have moved (> 1 cm), so
    the check covers contact and pushing, not a scene at rest."""
    ten = simulate("iiwa_push_10", duration=DURATION)
    one = simulate("iiwa_push", duration=DURATION)
    model, _, _ = prepare("iiwa_push_10")
    assert compiled_step_supported(model) == (True, "")          # the scene takes the compiled tree step
    box = one.position[-1, one.body_index("box")]
    assert box[0] - one.position[0, one.body_index("box")][0] > 0.01
    for k in range(10):
        shifted = ten.position[-1, ten.body_index(f"box_{k}")] - np.array([0.0, 1.0 * k, 0.0])
        np.testing.assert_allclose(shifted, box, atol=1e-7, err_msg=f"box_{k}")
