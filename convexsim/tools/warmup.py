"""``convexsim warmup``: compile (or load from the disk cache) every numba kernel a run may need, and write the
bytecode of convexsim's modules."""

from __future__ import annotations

import sys
import time as _time

from convexsim.simulate import prepare, run_model
from convexsim.tools.kernels import KernelClock

WARMUP_SCENE = {
    "name": "warmup",
    "time_step": 1.0e-3,
    "materials": {"soft": {"stiffness": 1.0e5}},
    "bodies": [
        {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace"}]},
        {"name": "ball", "mass": 0.5, "position": [0.0, 0.0, 0.0999],
         "geometries": [{"shape": "sphere", "radius": 0.1}]},
        {"name": "ball2", "mass": 0.5, "position": [0.0, 0.0, 0.2997],
         "geometries": [{"shape": "sphere", "radius": 0.1, "material": "soft"}]},
        {"name": "box", "mass": 1.0, "position": [0.5, 0.0, 0.0999],
         "geometries": [{"shape": "box", "size": [0.2, 0.2, 0.2]}]},
        {"name": "box2", "mass": 1.0, "position": [0.5, 0.0, 0.2997],
         "geometries": [{"shape": "box", "size": [0.2, 0.2, 0.2]}]},
        {"name": "rod", "mass": 0.5, "position": [1.0, 0.0, 0.0499],
         "quaternion": [0.7071067811865476, 0.7071067811865476, 0, 0],
         "geometries": [{"shape": "capsule", "radius": 0.05, "length": 0.3}]},
        {"name": "rod_on_box", "mass": 0.5, "position": [0.5, 0.0, 0.4496],
         "quaternion": [0.7071067811865476, 0.7071067811865476, 0, 0],
         "geometries": [{"shape": "capsule", "radius": 0.05, "length": 0.1}]},
        {"name": "ball_on_rod", "mass": 0.2, "position": [1.0, -0.1, 0.1497],
         "geometries": [{"shape": "sphere", "radius": 0.05}]},
        {"name": "rod_on_rod", "mass": 0.5, "position": [1.0, 0.1, 0.1497],
         "quaternion": [0.7071067811865476, 0, 0.7071067811865476, 0],
         "geometries": [{"shape": "capsule", "radius": 0.05, "length": 0.1}]},
        {"name": "ball_on_box", "mass": 0.2, "position": [0.6499, 0.0, 0.3],
         "geometries": [{"shape": "sphere", "radius": 0.05}]},
        {"name": "can", "mass": 0.5, "position": [1.5, 0.0, 0.0999],
         "geometries": [{"shape": "cylinder", "radius": 0.05, "length": 0.2}]},
        {"name": "hull_on_can", "mass": 0.2, "position": [1.5, 0.0, 0.2497],
         "geometries": [{"shape": "mesh", "vertices": [[x, y, z] for x in (-0.05, 0.05) for y in (-0.05, 0.05)
                                                        for z in (-0.05, 0.05)]}]},
    ],
}
"""Every pair of moving shapes (sphere, box, capsule, cylinder, mesh) and halfspace in contact at t = 0, so that a few
steps reach the collision, SAP and LCP kernels of every shipped scene."""

WARMUP_TREE_SCENE = {
    "name": "warmup_tree",
    "time_step": 1.0e-3,
    "bodies": [
        {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace"}]},
        {"name": "bob", "mass": 1.0, "geometries": [{"shape": "sphere", "radius": 0.1}]},
        {"name": "slider", "mass": 0.5, "geometries": [{"shape": "box", "size": [0.2, 0.2, 0.2]}]},
    ],
    "joints": [
        {"name": "hinge", "type": "revolute", "child": "bob", "axis": [0, 1, 0], "position": [0, 0, 1.0999],
         "child_offset": [0, 0, -1.0], "lower": 0.0, "upper": 0.5},
        {"name": "slide", "type": "prismatic", "child": "slider", "axis": [1, 0, 0], "position": [0.5, 0, 0.0999],
         "lower": 0.0, "upper": 0.1},
    ],
}
"""Two one-joint trees (revolute, prismatic; each at a joint limit and touching the ground at t = 0), so that
a few steps reach the kinematics, dynamics and joint-limit kernels of the articulated scenes (double_pendulum,
gripper_lift, iiwa_push...)."""


def write_bytecode() -> bool:
    """Write the bytecode cache (``__pycache__``) of convexsim's modules where it is missing or stale, so that
    later processes do not compile their source: Python skips writing it on import when
    ``PYTHONDONTWRITEBYTECODE`` is set, and compiling the ~50 modules of a run from source costs a few tenths of
    a second every time.
    Best effort (False when some file could not be written, e.g. a read-only install)."""
    import compileall
    from pathlib import Path

    import convexsim

    try:
        return bool(compileall.compile_dir(Path(convexsim.__file__).resolve().parent, quiet=2))
    except OSError:
        return False


def _warm_sparse_lemke() -> None:
    """The sparse-LU Lemke kernels (``method="auto"`` takes them for large sparse islands, which the warm-up
    scenes do not have): one small LCP solved with ``method="sparse"``, cold and from a basis."""
    import numpy as np

    from convexsim.lcp.lemke import LemkeOptions, lemke, lemke_from_basis

    n = 6
    M = 2.0 * np.eye(n) + np.diag(np.full(n - 1, -0.5), 1) + np.diag(np.full(n - 1, -0.5), -1)
    q = np.linspace(-1.0, 1.0, n)
    opts = LemkeOptions(method="sparse")
    lemke(M, q, options=opts)
    lemke_from_basis(M, q, np.arange(n) < n // 2, options=opts)    # basic: a mask of the guessed basic z's


def _warm_crash() -> None:
    """The crash-basis kernels (``lcp.crash``; the LCP stepper's cold start on islands of ≥ 600 unknowns, which
    the warm-up scenes do not have): the guess for a block resting on the ground at two points, dense and CSR."""
    import numpy as np
    import scipy.sparse

    from convexsim.lcp.crash import crash_guess
    from convexsim.stepping.lcp_stepper import build_contact_lcp

    J = np.zeros((2, 3, 6))
    for c, y in enumerate((-0.1, 0.1)):
        J[c, :, :3] = np.eye(3)
        J[c, 0, 5], J[c, 1, 5] = -y, 0.0
    M, q, layout = build_contact_lcp(np.eye(6), np.array([0.0, 0.0, -0.01, 0.0, 0.0, 0.0]), J, np.zeros(2),
                                     np.full(2, 0.5), 8)
    for form in (M, scipy.sparse.csr_matrix(M)):
        crash_guess(form, q, layout.num_contacts, layout.num_directions)


def _warm_block_sparse() -> None:
    """The block-sparse Cholesky kernels (``sap.block_sparse``: the reference SAP path's factorization of
    large problems and ``convexsim bench``'s micro-benchmarks): a chain of three 2×2 blocks, analyzed,
    factored and solved."""
    import numpy as np

    from convexsim.sap import block_sparse as bs

    sizes = np.array([2, 2, 2])
    edges = np.array([[0, 1], [1, 2]])
    diag = np.tile(4.0 * np.eye(2).ravel(), 3)
    off = np.tile(0.5 * np.eye(2).ravel(), 2)
    sym = bs.analyze(sizes, edges)
    bs.solve(sym, bs.factor(sym, diag, off), np.ones(6))
    bs.to_dense(sizes, edges, diag, off)


def _warm_tableau() -> None:
    """The tableau Lemke kernel (``method="tableau"``, and the reference the revised kernel is tested
    against): one small LCP."""
    import numpy as np

    from convexsim.lcp.lemke import LemkeOptions, lemke

    lemke(np.array([[2.0, 1.0], [1.0, 2.0]]), np.array([-1.0, -1.0]), options=LemkeOptions(method="tableau"))


def _warm_sap(steps: int) -> None:
    """The SAP kernels: ``steps`` steps of :data:`WARMUP_SCENE` with contact models sap, lagged and similar
    (the compiled run loop, the reference Python path, the compiled single step of ``stepping.step``), then
    of :data:`WARMUP_TREE_SCENE` (the compiled tree run loop and single step, and the reference articulated
    step)."""
    from convexsim.stepping import step

    for model_name in ("sap", "lagged", "similar"):
        model, state, _ = prepare(WARMUP_SCENE, solver="sap", contact_model=model_name)
        for path in ("compiled", "reference"):
            run_model(model, state, duration=steps * model.time_step, path=path)
        step(model, state, path="compiled")
    model, state, _ = prepare(WARMUP_TREE_SCENE, solver="sap")
    run_model(model, state, duration=steps * model.time_step)   # the compiled tree run loop
    run_model(model, state, duration=steps * model.time_step, path="reference")   # the articulated step
    step(model, state, path="compiled")                          # the compiled single tree step
    from convexsim.sap.joint_constraints import pd_row

    # the PD row kernels of the reference tree step (controllers, tree gradients, robot fits)
    pd_row(1e-3, 0.0, 0.1, 0.0, 0.0, 100.0, 10.0, 1.0, 1.0)
    _warm_block_sparse()


def _warm_lcp(steps: int) -> None:
    """The LCP kernels: :data:`WARMUP_SCENE` and :data:`WARMUP_TREE_SCENE` on the compiled LCP step and its
    reference, the sparse-LU Lemke kernels and the crash basis."""
    model, state, _ = prepare(WARMUP_SCENE, solver="lcp", contact_model="sap")
    for path in ("compiled", "reference"):
        run_model(model, state, duration=steps * model.time_step, path=path)
    model, state, _ = prepare(WARMUP_TREE_SCENE, solver="lcp")
    for path in ("compiled", "reference"):
        run_model(model, state, duration=steps * model.time_step, path=path)
    _warm_sparse_lemke()
    _warm_crash()
    _warm_tableau()


GROUPS = {"sap": _warm_sap, "lcp": _warm_lcp}
"""The warm-up's independent parts (their kernels barely overlap), compiled in parallel processes when the
machine has the cores: on 2 cores the warm-up takes about as long as the larger part (LCP, about half of
the total) instead of the sum."""

PROGRESS_EVERY_S = 10.0
"""A compilation that is still running prints a progress line at least this often [s]."""


class _Progress:
    """Counts the convexsim kernels compiled in this process (numba's ``numba:compile`` events) and prints
    ``compiling kernels [label]: N compiled, T s`` to stderr every :data:`PROGRESS_EVERY_S` seconds from a
    background thread, so that a long compilation is never silent."""

    def __init__(self, label: str, enabled: bool):
        self.label, self.enabled = label, enabled
        self.compiled = 0
        self._stop = None

    def __enter__(self):
        import threading

        from numba.core import event

        progress = self

        class _Count(event.Listener):
            def on_start(self, ev):
                pass

            def on_end(self, ev):
                d = ev.data.get("dispatcher")
                if d is not None and getattr(d.py_func, "__module__", "").startswith("convexsim"):
                    progress.compiled += 1

        self._listener = _Count()
        event.register("numba:compile", self._listener)
        self._t0 = _time.perf_counter()
        if self.enabled:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._report, daemon=True)
            self._thread.start()
        return self

    def _report(self) -> None:
        while not self._stop.wait(PROGRESS_EVERY_S):
            if self.compiled:
                print(f"compiling kernels [{self.label}]: {self.compiled} compiled, "
                      f"{_time.perf_counter() - self._t0:.0f} s", file=sys.stderr, flush=True)

    def __exit__(self, *exc) -> None:
        from numba.core import event

        event.unregister("numba:compile", self._listener)
        if self._stop is not None:
            self._stop.set()
            self._thread.join()


def _start_group_process(name: str, steps: int, progress: bool):
    """``python -m convexsim.tools.warmup --group NAME`` in a child process (same environment, hence the same
    NUMBA_CACHE_DIR; numba's cache writes are atomic renames, safe across processes); its progress lines go
    to this process's stderr."""
    import subprocess

    cmd = [sys.executable, "-m", "convexsim.tools.warmup", "--group", name, "--steps", str(steps)]
    if not progress:
        cmd.append("--quiet")
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL)


def warm_up(*, steps: int = 3, progress: bool = True, jobs: int | None = None) -> float:
    """Compile (or load from the disk cache) the kernels a run needs: the parts of :data:`GROUPS` (SAP:
    ``steps`` steps of :data:`WARMUP_SCENE` with contact models sap, lagged and similar on the compiled and
    reference paths, and of :data:`WARMUP_TREE_SCENE`; LCP: the same scenes on the LCP stepper, sparse Lemke,
    the crash basis), in ``jobs`` processes at once (default: one per core, at most one per part); and write
    the modules' bytecode (:func:`write_bytecode`). Returns the wall time [s]. With ``progress`` a line on
    stderr at least every :data:`PROGRESS_EVERY_S` s while kernels compile. A part whose child process fails
    is warmed up again in this process (its error then surfaces here)."""
    import os

    t0 = _time.perf_counter()
    write_bytecode()
    jobs = min(len(GROUPS), os.cpu_count() or 1) if jobs is None else max(1, min(int(jobs), len(GROUPS)))
    names = list(GROUPS)
    here, elsewhere = names[:len(names) - (jobs - 1)], names[len(names) - (jobs - 1):]
    children = [(name, _start_group_process(name, steps, progress)) for name in elsewhere]
    try:
        with KernelClock(notice=False), _Progress("+".join(here), progress):
            for name in here:
                GROUPS[name](steps)
    finally:
        failed = [name for name, child in children if child.wait() != 0]
    for name in failed:                       # rerun here: the child's error, if it is real, is raised now
        with KernelClock(notice=False), _Progress(name, progress):
            GROUPS[name](steps)
    return _time.perf_counter() - t0


CHECK_STEPS = 3
"""Steps of each shipped scene that :func:`kernels_compiled_by_shipped_scenes` runs: enough to reach every
kernel of the scene's first contact (every shipped scene starts at or near it)."""


class _CompileLog:
    """Records the convexsim kernels numba compiles (not loads from the cache) while active."""

    def __init__(self):
        self.names: list[str] = []

    def __enter__(self):
        from numba.core import event

        log = self

        class _Listen(event.Listener):
            def on_start(self, ev):
                pass

            def on_end(self, ev):
                fn = getattr(ev.data.get("dispatcher"), "py_func", None)
                if fn is not None and getattr(fn, "__module__", "").startswith("convexsim"):
                    log.names.append(f"{fn.__module__}.{fn.__qualname__}")

        self._listener = _Listen()
        event.register("numba:compile", self._listener)
        return self

    def __exit__(self, *exc) -> None:
        from numba.core import event

        event.unregister("numba:compile", self._listener)


def kernels_compiled_by_shipped_scenes(solvers: tuple[str, ...] = ("sap", "lcp"), *,
                                       steps: int = CHECK_STEPS) -> dict[str, list[str]]:
    """Run every shipped scene (``scenes/*.yaml``) for ``steps`` steps with each of ``solvers`` (the
    compiled run loop, as ``convexsim run`` does) and return ``{"scene/solver": [kernels compiled]}`` for the
    runs that compiled a convexsim kernel. After :func:`warm_up` it should be empty: a kernel listed here
    is one the warm-up misses, and a user would wait for it in the middle of a run."""
    from convexsim.scene import list_scenes

    missed: dict[str, list[str]] = {}
    for name, _, path in list_scenes():
        for solver in solvers:
            model, state, _ = prepare(path, solver=solver)
            with _CompileLog() as log:
                run_model(model, state, duration=steps * model.time_step)
            if log.names:
                missed[f"{name}/{solver}"] = sorted(set(log.names))
    return missed


def check_shipped_scenes() -> int:
    """``convexsim warmup --check``: :func:`kernels_compiled_by_shipped_scenes` in this (fresh) process;
    prints the verdict and returns 0 when no shipped scene compiled anything, 1 otherwise (the kernels the
    warm-up misses, scene by scene)."""
    from convexsim.scene import list_scenes

    t0 = _time.perf_counter()
    missed = kernels_compiled_by_shipped_scenes()
    n = len(list_scenes())
    if not missed:
        print(f"warmup check: all {n} shipped scenes ran {CHECK_STEPS} steps with SAP and with the LCP stepper "
              f"without compiling a kernel ({_time.perf_counter() - t0:.1f} s)")
        return 0
    print(f"warmup check: {len(missed)} of {2 * n} shipped-scene runs compiled kernels the warm-up misses "
          "(add them to convexsim/tools/warmup.py):", file=sys.stderr)
    for run, names in missed.items():
        print(f"  {run}: {', '.join(names)}", file=sys.stderr)
    return 1


def _main(argv=None) -> int:
    """``python -m convexsim.tools.warmup --group NAME``: one part of the warm-up (a child of :func:`warm_up`)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m convexsim.tools.warmup")
    parser.add_argument("--group", choices=sorted(GROUPS), required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    with KernelClock(notice=False), _Progress(args.group, not args.quiet):
        GROUPS[args.group](args.steps)
    return 0


__all__ = ["warm_up", "write_bytecode", "kernels_compiled_by_shipped_scenes", "check_shipped_scenes", "GROUPS", "WARMUP_SCENE",
           "WARMUP_TREE_SCENE"]


if __name__ == "__main__":
    raise SystemExit(_main())
