"""A tree whose joint-space mass matrix is singular in double precision (a massless link, or lever arms ~1e8
times the links' sizes): every step path stops at the first step with a SimulationError naming the tree's
joints, and a run stops there with the frames so far (the CLI side, a fuzzer's 1e15 m lever, is in
``tests/fuzz/test_bad_input_regressions.py``). Also the compiled block solve against its numpy reference (``numpy.linalg.solve``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from convexsim.multibody.dynamics import solve_tree_blocks
from convexsim.simulate import prepare, run_model
from convexsim.stepping import SimulationError, StepContext, step
from repo_paths import SCENES

SOLVE_RTOL = 1e-12
"""Cholesky against LAPACK's LU on blocks of condition number ≤ 1e3: both backward stable, so the solutions agree
to ~cond·1e-16; 1e-12 leaves a factor 10 on top."""


def _spd(rng, n):
    """A random SPD n × n block of condition number ≤ 1e3 (eigenvalues in [1, 1e3])."""
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return Q @ np.diag(rng.uniform(1.0, 1e3, n)) @ Q.T


def test_block_solve_matches_numpy_and_marks_a_singular_block():
    rng = np.random.default_rng(7)
    sizes = np.array([3, 0, 7, 1], np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    n = int(sizes.sum())
    A = np.zeros((n, n))
    for s, k in zip(starts, sizes):
        A[s:s + k, s:s + k] = _spd(rng, k)
    rhs = rng.standard_normal(n)
    x = np.empty(n)
    assert solve_tree_blocks(A, rhs, starts, sizes, x) == -1
    for s, k in zip(starts, sizes):
        ref = np.linalg.solve(A[s:s + k, s:s + k], rhs[s:s + k])
        assert np.allclose(x[s:s + k], ref, rtol=SOLVE_RTOL, atol=0)
    # Tree 2 made exactly singular (rank one): its entries are NaN, the others still solved.
    u = rng.standard_normal(7)
    A[3:10, 3:10] = np.outer(u, u)
    x = np.empty(n)
    assert solve_tree_blocks(A, rhs, starts, sizes, x) == 2
    assert np.all(np.isnan(x[3:10])) and np.all(np.isfinite(x[:3])) and np.isfinite(x[10])


def _massless_elbow():
    """double_pendulum with the elbow's link massless (mass and inertia 0, no armature): M(q)'s elbow row is
    exactly zero, so its Cholesky pivot is exactly 0 on every machine."""
    model, state, _ = prepare(SCENES / "double_pendulum.yaml")
    tree = model.forest.trees[0]
    mass, inertia = tree.model.body_mass.copy(), tree.model.body_inertia.copy()
    mass[1], inertia[1] = 0.0, 0.0
    tree = dataclasses.replace(tree, model=dataclasses.replace(tree.model, body_mass=mass, body_inertia=inertia))
    forest = dataclasses.replace(model.forest, trees=(tree,))
    return dataclasses.replace(model, forest=forest), state


@pytest.mark.parametrize("kind", ["sap", "lcp"])
@pytest.mark.parametrize("path", ["compiled", "reference"])
def test_singular_mass_matrix_is_a_named_step_error(kind, path):
    model, state = _massless_elbow()
    model = dataclasses.replace(model, solver=dataclasses.replace(model.solver, kind=kind))
    with pytest.raises(SimulationError) as err:
        step(model, state, StepContext(), path=path)
    assert err.value.step == 0
    message = str(err.value)
    assert "shoulder, elbow" in message and "mass matrix" in message, message


def test_singular_mass_matrix_stops_a_run_with_its_frames():
    model, state = _massless_elbow()
    traj, _ = run_model(model, state, duration=0.01)
    assert traj.num_frames == 1 and "shoulder, elbow" in traj.failure


def test_a_runners_linalg_error_is_the_steps_error(monkeypatch):
    """Any dense solve left on LAPACK's LU (the LCP's A⁻¹, the PD fold) raises numpy's LinAlgError on an exactly
    zero pivot; the dispatcher reports it as that step's SimulationError with numpy's message, chained."""
    from convexsim.stepping import dispatch

    model, state, _ = prepare(SCENES / "double_pendulum.yaml")
    state = dataclasses.replace(state, step=7, t=0.007)

    def singular(*args, **kwargs):
        raise np.linalg.LinAlgError("Matrix is singular to machine precision.")

    runners, resolve = {spec for spec, _ in dispatch.RUNNERS.values()}, dispatch.resolve
    monkeypatch.setattr(dispatch, "resolve", lambda spec: singular if spec in runners else resolve(spec))
    with pytest.raises(SimulationError, match=r"step 7 \(t = 0.007 s\): the SAP step's linear algebra failed "
                                              r"\(Matrix is singular") as err:
        step(model, state, StepContext())
    assert isinstance(err.value.__cause__, np.linalg.LinAlgError)
