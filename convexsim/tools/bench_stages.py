"""Where a compiled SAP step's time goes: ``convexsim bench --stages`` (docs/performance.md), on free-body
scenes the compiled step takes.

A scene is first run from its initial state by the compiled step (``stepping.step``, one step context, as
``simulate`` runs it) and every state of its window is recorded. Then each stage of the compiled step is
called on its own, in a loop over all recorded states, and timed in process CPU time (best of ``repeats``
loops, after one untimed call that loads the kernels from the numba disk cache):

* collision: ``stepping.contacts.collide_and_filter`` (broad phase, narrow phase, pair-reach filter);
* rows and problem: the rest of the ``step_prepare`` kernel (free motion, Jacobians, kernel parameters,
  clique graph and islands) = ``step_prepare`` − collision;
* symbolic analysis: ``StepContext.symbolic.covering`` in Python on the steps with an island above the dense
  limit (one pass over the states in order, with one cache as a run has: its hits and misses are the run's);
* Newton: the ``step_finish`` kernel − integration (Newton iterations with their factorizations and line
  searches, impulses to forces, velocities scattered back);
* integration: ``stepping.integration.integrate_bodies``;
* Python around the kernels: one ``compiled.compiled_step`` call per state minus the stages above (argument
  packing, the result's State, StepInfo and Contacts) — or, for a scene the run loop takes, recording: the run
  loop recording every step minus the run loop recording only the last.

Each stage call unboxes its arguments from Python (a few µs), which the run loop does not pay per step: on a
small scene the stage sum is larger than the run loop's step. The table states both.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

STAGE_SCENES = (("pile_100", 1.0), ("sphere_drop", 0.5))
"""(scene, simulated seconds) profiled by default: the 100-sphere pile landing (islands above the dense
limit: the two-call step) and one sphere (the run loop)."""


def record_states(model, state, nsteps: int) -> tuple[list, dict]:
    """The states before each of ``nsteps`` compiled steps from ``state`` (one step context) and the run's
    counts: Newton iterations, steps with a large island (two-call steps), contacts."""
    from convexsim import stepping

    ctx = stepping.StepContext()
    states, its, big, nc = [], 0, 0, 0
    for _ in range(nsteps):
        states.append(state)
        state, info = stepping.step(model, state, ctx)
        its += info.iterations
        nc += info.contacts.count
        big += int(ctx.big_islands)
    return states, {"iterations": its / nsteps, "two_call_steps": big, "contacts": nc / nsteps}


class _Stages:
    """The stage calls of one model's compiled step, with their arguments packed once."""

    def __init__(self, model):
        from convexsim.controls import step_controls
        from convexsim.stepping.packing import packed, packed_forest, step_arrays

        self.model = model
        self._qv: dict = {}
        self.pm, self.pf, self.arrays = packed(model), packed_forest(model), step_arrays(model)
        self.args = self.pm.args(False)
        ctl = step_controls(None, model)
        self.ctl = (ctl[0], ctl[1], np.zeros_like(ctl[2]), ctl[6])
        self.limit = int(self.args[1][_newton().I_ISLAND_MAX_DOFS])
        pf = self.pf
        self.sizes = (len(pf.actuator_names), len(pf.limit_names), len(pf.coupler_names))

    def qv(self, state):
        """(q, v, tree_q, tree_v) of ``state`` as the kernels take them, made once per state (outside the
        timed loops; no stage writes them)."""
        from convexsim.stepping.packing import tree_arrays

        key = id(state)
        if key not in self._qv:
            tq, tv = tree_arrays(state)
            self._qv[key] = (np.array(state.q, dtype=float), np.array(state.v, dtype=float), tq, tv, state)
        return self._qv[key][:4]

    def prepare(self, state):
        from convexsim.stepping import sap_composition as C

        q, v, tq, tv = self.qv(state)
        return C.step_prepare(self.args[0], self.args[1], self.arrays, float(state.t), q, v, tq, tv, self.ctl)

    def collide(self, state):
        from convexsim.stepping.contacts import collide_and_filter

        m, fa = self.pm.model_arrays, self.pf.fa
        q, v, _, _ = self.qv(state)
        bits, (body_tree, body_moves, tree_base) = self.pm.pair_rule
        return collide_and_filter(self.args[0], m[1], fa[21], m[6], m[7], m[8], m[9], m[10], m[11], m[12], q, v,
                                  bits, (body_tree, body_moves, tree_base))

    def finish(self, state, prepared, sym):
        from convexsim.stepping import sap_composition as C

        q, v, tq, tv = self.qv(state)
        sn, sn_edges = sym if sym is not None else _newton().no_supernodal()
        outs = (np.empty_like(q), np.empty_like(v), np.empty_like(tq), np.empty_like(tv))
        forces = tuple(np.zeros(n) for n in self.sizes)
        return C.step_finish(self.args[0], self.args[1], self.arrays, q, v, tq, prepared, *outs, *forces,
                             sym is not None, sn, sn_edges)

    def integrate(self, state, v_next):
        from convexsim.stepping.integration import integrate_bodies
        from convexsim.stepping.sap_composition import kinematic_flags

        q, v, _, _ = self.qv(state)
        return integrate_bodies(self.args[0], self.pm.model_arrays[3], kinematic_flags(self.arrays), q, v, v_next,
                                np.empty_like(q), np.empty_like(v))


def _newton():
    from convexsim.sap import newton

    return newton


def _sn_arrays(sym):
    N = _newton()
    return (tuple(np.ascontiguousarray(getattr(sym, f), dtype=np.int64) for f in N.SN_FIELDS),
            np.ascontiguousarray(sym.edges, dtype=np.int64).reshape(-1, 2))


def best_loop_ms(loop, repeats: int) -> float:
    """Best process CPU time [ms] of ``loop()`` over ``repeats`` runs (``loop`` builds its inputs untimed and
    returns the seconds it timed)."""
    return 1e3 * min(loop() for _ in range(repeats))


def stage_profile(scene, duration: float | None = None, repeats: int = 3) -> dict:
    """Per-step CPU ms of each stage of the compiled step over the recorded states of ``scene``'s window
    (module docstring): keys scene, steps, two_call_steps, iterations, contacts, analyses (misses),
    reused (hits), stages [(name, ms per step)], total_ms (one compiled step per state from Python) and
    run_loop_ms (the run loop, no recording; None when the scene has large islands)."""
    from convexsim.sap.linalg import SymbolicCache
    from convexsim.simulate import plan_steps, prepare
    from convexsim.stepping import StepContext, compiled
    from convexsim.tools.bench import run_cpu_ms, warm_up_compiled

    from convexsim.errors import InputError
    from convexsim.stepping.dispatch import route

    model, state, dur = prepare(scene, duration=duration)
    why = route(model).reason if route(model).path != "compiled" else "it has kinematic trees" if model.has_trees else ""
    if why:
        raise InputError(f"bench --stages profiles the compiled step of free-body scenes; {Path(str(scene)).stem}: "
                         f"{why}")
    nsteps, _ = plan_steps(dur, model.time_step)
    warm_up_compiled(model, state)
    states, counts = record_states(model, state, nsteps)
    st = _Stages(model)
    n = len(states)
    prep0 = st.prepare(states[0])
    st.collide(states[0])
    st.integrate(states[0], np.array(prep0[3][5]))                 # load the kernels untimed
    big = [st.prepare(s)[2] > st.limit for s in states]

    def timed(fn, inputs):
        c0 = time.process_time()
        for x in inputs:
            fn(*x)
        return time.process_time() - c0

    collision = best_loop_ms(lambda: timed(st.collide, [(s,) for s in states]), repeats) / n
    prepare_ms = best_loop_ms(lambda: timed(st.prepare, [(s,) for s in states]), repeats) / n
    cache = SymbolicCache()
    analysis_s, syms = 0.0, []
    for s, large in zip(states, big):
        if not large:
            syms.append(None)
            continue
        p = st.prepare(s)[3]
        sizes, edges = p[7][0], p[9]
        c0 = time.process_time()
        sym = _sn_arrays(cache.covering(sizes, edges))
        analysis_s += time.process_time() - c0
        syms.append(sym)
    analysis = 1e3 * analysis_s / n

    def finish_loop():
        inputs = [(s, st.prepare(s)[3], sym) for s, sym in zip(states, syms)]
        return timed(st.finish, inputs)

    finish_ms = best_loop_ms(finish_loop, repeats) / n
    v_next = [np.array(st.prepare(s)[3][5]) for s in states]
    integration = best_loop_ms(lambda: timed(st.integrate, list(zip(states, v_next))), repeats) / n

    def step_loop():                   # one context over the states in order, as a run has
        ctx = StepContext()

        def one(s, large):
            ctx.big_islands = bool(large)
            compiled.compiled_step(model, s, ctx)
        return timed(one, list(zip(states, big)))

    total = best_loop_ms(step_loop, repeats) / n
    stages = [("collision", collision), ("rows and problem", prepare_ms - collision),
              ("symbolic analysis", analysis), ("Newton (+ impulses)", finish_ms - integration),
              ("integration", integration)]
    run_loop = None
    if not any(big):
        run_loop, _ = run_cpu_ms(model, state, dur, "compiled", nsteps)
        recorded, _ = run_cpu_ms(model, state, dur, "compiled", 1)
        stages.append(("recording (run loop)", recorded - run_loop))
    else:
        stages.append(("Python around the kernels", total - sum(ms for _, ms in stages)))
    return {"scene": Path(str(scene)).stem, "bodies": int((~model.body_fixed).sum()), "steps": n,
            **counts, "analyses": cache.misses, "reused": cache.hits, "stages": stages, "total_ms": total,
            "run_loop_ms": run_loop}


def format_stage_table(profile: dict) -> str:
    """The printed table of one :func:`stage_profile`: CPU ms per step and share of the stage sum."""
    p = profile
    stages = p["stages"]
    whole = sum(ms for _, ms in stages)
    positive = sum(max(ms, 0.0) for _, ms in stages)   # > 0: the five stages add up to three timed loops
    lines = [f"{p['scene']}: {p['bodies']} bodies, {p['steps']} steps ({p['two_call_steps']} with an island above "
             f"the dense limit), {p['iterations']:.1f} Newton iterations/step, {p['contacts']:.1f} contacts/step, "
             f"symbolic analyses {p['analyses']} (reused {p['reused']})",
             f"  {'stage':<28}{'ms/step':>10}{'share':>9}"]
    for name, ms in stages:
        lines.append(f"  {name:<28}{ms:>10.4f} {100 * ms / positive if positive > 0 else 0.0:>7.1f}%")
        # a row that is a difference of two timed runs (rows, Newton, recording) can come out negative on a short,
        # noisy window: printed as measured, its share negative; the shares are of the rows that came out positive
    if p["run_loop_ms"] is not None:          # else the stages add up to the compiled step by construction
        lines.append(f"  {'sum of the stages':<28}{whole:>10.4f}")
    lines.append(f"  {'one compiled step (Python)':<28}{p['total_ms']:>10.4f}")
    if p["run_loop_ms"] is not None:
        lines.append(f"  {'run loop, no recording':<28}{p['run_loop_ms']:>10.4f}")
    return "\n".join(lines)


STAGE_LEGEND = ("CPU ms per step, best of the repeated loops over the recorded states of the window, each stage "
                "called on its own from Python (its kernel loaded from the disk cache beforehand); share: of the "
                "sum of the rows that came out positive (a difference of two timed runs can come out negative on "
                "a short, noisy window). Newton = the step_finish kernel minus integration; 'Python around the "
                "kernels' = one compiled step per state minus the stages; recording = the run loop recording "
                "every step minus recording only the last. Stage calls pay their own argument unboxing (µs), "
                "which the run loop does not pay per step.")


def main(scenes=STAGE_SCENES, repeats: int = 3) -> int:
    """Print the stage table of each (scene, duration)."""
    for scene, duration in scenes:
        print(format_stage_table(stage_profile(scene, duration, repeats)), flush=True)
    print(STAGE_LEGEND, flush=True)
    return 0
