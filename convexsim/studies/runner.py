"""Running a study: expand the spec, skip finished runs, execute the rest, write results as they finish.

Backends:

* in-process, when ``jobs == 1`` or a single run is pending;
* a local process pool (``concurrent.futures`` with the ``spawn`` start method, so worker processes
  never inherit threads or locks of the parent) for ``jobs > 1`` (default: the number of CPUs);
* a Dask distributed cluster when ``scheduler="tcp://HOST:PORT"`` is given (optional extra
  ``convexsim[cluster]``). The workers must be able to import convexsim.

Every run is executed by ``execute_run``, which never raises: an exception or a run that stops early
(``Trajectory.failure``) becomes a record with ``status = "failed"`` and the error text, and the study
goes on. A worker that dies or is lost (``BrokenProcessPool``, Dask ``KilledWorker``, a lost connection)
is not a run failure: the pool is rebuilt (or the run resubmitted) up to ``INFRA_RETRIES`` times, and a
run that still has no result is recorded with ``status = "retryable"``. Records are appended to
``results.jsonl`` as they arrive and ``results.csv`` is rewritten atomically each time.

Resume rule (``reusable``): a stored record is reused when its ``fingerprint`` (the run's resolved inputs,
per-run metrics, ``metric_options`` and the convexsim version) equals the task's and its status is
``ok`` or ``failed``; a ``retryable`` record, a record with another fingerprint or none is executed again.
"""

from __future__ import annotations

import copy
import datetime as _dt
import math
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from convexsim.studies.metrics import (METRICS, PAIR_METRICS, TIMING_METRICS, compute_metrics, make_context,
                                       position_samples)
from convexsim.studies.spec import (RunTask, StudySpec, expand_runs, load_study, reduce_spec, study_from_dict)
from convexsim.studies.result import StudyResult
from convexsim.studies.store import TIMING_COLUMNS, ResultStore

OnResult = Callable[[dict[str, Any]], None]

INFRA_RETRIES = 2
"""How many times runs lost to a dead worker or a lost connection are resubmitted before being recorded as
``retryable``."""

CONNECT_TIMEOUT_S = 5.0
"""Timeout of the TCP probe of a Dask scheduler address and of the Dask Client's connection."""

FINAL_STATUSES = ("ok", "failed")
"""Statuses of records that a resumed study keeps (``retryable`` records are executed again)."""


class SchedulerUnreachable(RuntimeError):
    """The ``--scheduler`` address is malformed or nothing answers there."""


# ---------------------------------------------------------------------------------------------------------
# One run


def _simulate(scene: Any, **kwargs: Any):
    from convexsim.simulate import simulate

    return simulate(scene, **kwargs)


def execute_run(task: RunTask) -> dict[str, Any]:
    """Simulate one run and compute its metrics; never raises (failures become the record's error)."""
    rec: dict[str, Any] = {"run_id": task.run_id, "fingerprint": task.fingerprint, "index": task.index,
                           "params": task.params, "repetition": task.repetition, "seed": task.seed, "status": "ok",
                           "error": "", "metrics": {}, "wall_time_s": math.nan,
                           "worker": f"{socket.gethostname()}:{os.getpid()}"}
    t0 = time.perf_counter()
    try:
        traj = _simulate(task.scene, overrides=task.overrides or None, record_every=task.record_every,
                         progress=False, **task.run_kwargs)
    except MemoryError as exc:  # the machine's limit, not the run's physics: try again on resume
        rec.update(status="retryable", error=_error_text(exc),
                   metrics={m: math.nan for m in task.metrics if m in METRICS})
        return _finish(rec, t0)
    except Exception as exc:  # noqa: BLE001 - any error is recorded; the study goes on
        rec.update(status="failed", error=_error_text(exc),
                   metrics={m: math.nan for m in task.metrics if m in METRICS})
        return _finish(rec, t0)
    if traj.failure:
        rec.update(status="failed", error=str(traj.failure))
    try:
        opts = task.metric_options
        ctx = make_context(traj, body=opts.get("body"), window=opts.get("window", 0.25),
                           stop_speed=opts.get("stop_speed", 1e-3), params=task.params)
        rec["metrics"] = compute_metrics(traj, task.metrics, ctx)
    except Exception as exc:  # noqa: BLE001
        rec["metrics"] = {m: math.nan for m in task.metrics if m in METRICS}
        if rec["status"] == "ok":
            rec.update(status="failed", error=f"metrics: {_error_text(exc)}")
    rec["summary"] = position_samples(traj)
    rec["steps"] = int(traj.metadata.get("steps", max(traj.num_frames - 1, 0)))
    rec["ms_per_step"] = traj.metadata.get("ms_per_step", math.nan)
    return _finish(rec, t0)


def _error_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _finish(rec: dict[str, Any], t0: float) -> dict[str, Any]:
    rec["wall_time_s"] = time.perf_counter() - t0
    rec["finished_at"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return rec


def _retryable_record(task: RunTask, exc: BaseException, attempts: int) -> dict[str, Any]:
    """A record for a run that got no result because its worker died or was lost, ``attempts`` times."""
    rec = {"run_id": task.run_id, "fingerprint": task.fingerprint, "index": task.index, "params": task.params,
           "repetition": task.repetition, "seed": task.seed, "status": "retryable",
           "error": f"worker lost {attempts} times, last: {_error_text(exc)}",
           "metrics": {m: math.nan for m in task.metrics if m in METRICS}, "wall_time_s": math.nan,
           "worker": ""}
    return _finish(rec, time.perf_counter())


# ---------------------------------------------------------------------------------------------------------
# Worker warm-up: load the numba-compiled kernels before the first timed run

_WARM_SCENE: dict[str, Any] = {
    "name": "warmup",
    "time_step": 1.0e-3,
    "duration": 2.0e-3,
    "gravity": [0.0, 0.0, -9.81],
    "materials": {"default": {"friction": 0.5, "stiffness": 1.0e5, "dissipation_time": 0.01,
                              "hunt_crossley_dissipation": 5.0}},
    "bodies": [
        {"name": "ground", "fixed": True, "geometries": [{"shape": "halfspace"}]},
        {"name": "sphere", "mass": 1.0, "position": [0.0, 0.0, 0.099], "linear_velocity": [0.1, 0.0, 0.0],
         "geometries": [{"shape": "sphere", "radius": 0.1}]},
        {"name": "box", "mass": 1.0, "position": [0.0, 0.0, 0.248], "geometries": [{"shape": "box",
                                                                                   "size": [0.1, 0.1, 0.1]}]},
        {"name": "capsule", "mass": 1.0, "position": [0.5, 0.0, 0.049],
         "quaternion": [0.70710678, 0.0, 0.70710678, 0.0],
         "geometries": [{"shape": "capsule", "radius": 0.05, "length": 0.2}]},
    ],
}
_WARM_RUNS = ({"contact_model": "sap"}, {"contact_model": "lagged"}, {"contact_model": "similar"},
              {"solver": "lcp"})
_warmed = False


def warm_up_worker() -> None:
    """Simulate a tiny scene (sphere, box, capsule on a plane; every contact model and LCP) for two steps.

    The first run in a process pays for loading the numba kernels (≈ 4× its later ``ms_per_step``); doing it
    here keeps that cost out of the timing columns. Runs once per process; never raises.
    """
    global _warmed
    if _warmed:
        return
    _warmed = True
    import warnings

    try:
        from convexsim.simulate import simulate

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for kwargs in _WARM_RUNS:
                try:
                    simulate(copy.deepcopy(_WARM_SCENE), progress=False, **kwargs)
                except Exception as exc:  # noqa: BLE001 - a warm-up problem must not stop the study
                    _warn_warm_up(exc)
    except Exception as exc:  # noqa: BLE001
        _warn_warm_up(exc)


def _warn_warm_up(exc: BaseException) -> None:
    """Say (on stderr, once per process) that the JIT warm-up failed: ms_per_step then includes compilation."""
    if not getattr(_warn_warm_up, "said", False):
        _warn_warm_up.said = True
        print(f"convexsim study: worker warm-up failed ({type(exc).__name__}: {exc}); "
              "the first run's ms_per_step includes numba compilation", file=sys.stderr, flush=True)


def _pool_initializer() -> None:
    warm_up_worker()


# ---------------------------------------------------------------------------------------------------------
# Backends


def _run_serial(tasks: list[RunTask], on_result: OnResult) -> None:
    warm_up_worker()
    for t in tasks:
        on_result(execute_run(t))


def _run_pool(tasks: list[RunTask], jobs: int, on_result: OnResult, *, retries: int | None = None) -> None:
    """Run ``tasks`` on a spawn process pool; resubmit the runs a dead worker took down.

    A dead worker breaks the whole pool and takes every run in flight with it, so the first attempt is
    parallel and the retries run the lost runs one at a time on a single worker: a run that kills its
    worker then takes only itself down, and the others finish.
    """
    retries = INFRA_RETRIES if retries is None else retries
    lost = _pool_attempt(tasks, max(1, min(jobs, len(tasks))), on_result)
    attempt = 1
    while lost and attempt <= retries:
        attempt += 1
        lost = _sequential_attempt([t for t, _ in lost], on_result)
    for t, exc in sorted(lost, key=lambda item: item[0].index):
        on_result(_retryable_record(t, exc, attempt))


def _new_pool(workers: int):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_pool_initializer)


def _pool_attempt(tasks: list[RunTask], workers: int, on_result: OnResult) -> list[tuple[RunTask, BaseException]]:
    """Run ``tasks`` in parallel; returns the (task, error) pairs whose worker was lost."""
    from concurrent.futures import as_completed

    pool = _new_pool(workers)
    lost: list[tuple[RunTask, BaseException]] = []
    try:
        futures = {}
        for i, t in enumerate(tasks):
            try:
                futures[pool.submit(execute_run, t)] = t
            except Exception as exc:  # noqa: BLE001 - the pool broke while submitting
                lost.extend((u, exc) for u in tasks[i:])
                break
        for fut in as_completed(futures):
            try:
                rec = fut.result()
            except Exception as exc:  # noqa: BLE001 - BrokenProcessPool etc.: the worker, not the run
                lost.append((futures[fut], exc))
                continue
            on_result(rec)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=not lost, cancel_futures=bool(lost))
    return lost


def _sequential_attempt(tasks: list[RunTask], on_result: OnResult) -> list[tuple[RunTask, BaseException]]:
    """Run ``tasks`` one at a time on one worker (a new one after each loss); returns the lost ones."""
    lost: list[tuple[RunTask, BaseException]] = []
    pool = None
    try:
        for t in sorted(tasks, key=lambda task: task.index):
            pool = pool or _new_pool(1)
            try:
                rec = pool.submit(execute_run, t).result()
            except Exception as exc:  # noqa: BLE001 - this run's worker died: only this run is lost
                lost.append((t, exc))
                pool.shutdown(wait=False, cancel_futures=True)
                pool = None
                continue
            on_result(rec)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return lost


def _probe_scheduler(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Check that something accepts TCP connections at ``tcp://HOST:PORT`` (raise SchedulerUnreachable if not)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(address)
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
        parts = None
    if parts is None or parts.scheme not in ("tcp", "tls") or not host or port is None:
        raise SchedulerUnreachable(f"--scheduler: expected tcp://HOST:PORT, got {address!r}")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise SchedulerUnreachable(f"--scheduler: cannot reach the Dask scheduler at {address} ({reason}; TCP "
                                   f"connect with a {timeout:g} s timeout). Start one with `dask scheduler` "
                                   f"or check the address.") from None


class _WarmUpPlugin:
    """Dask worker plugin: warm up every worker, including workers that join or restart later."""

    name = "convexsim-warmup"

    def setup(self, worker: Any = None) -> None:
        warm_up_worker()


def _warm_dask(client: Any) -> None:
    try:
        from distributed.diagnostics.plugin import WorkerPlugin

        plugin_cls = type("ConvexsimWarmUp", (_WarmUpPlugin, WorkerPlugin), {})
        client.register_plugin(plugin_cls())
    except Exception:  # noqa: BLE001 - older distributed: warm the current workers only
        try:
            client.run(warm_up_worker)
        except Exception as exc:  # noqa: BLE001
            _warn_warm_up(exc)


def _run_dask(tasks: list[RunTask], scheduler: str, on_result: OnResult, *, retries: int | None = None) -> None:
    retries = INFRA_RETRIES if retries is None else retries
    _probe_scheduler(scheduler)
    try:
        from dask.distributed import Client, as_completed
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise RuntimeError("running on a Dask cluster needs the optional extra: pip install 'convexsim[cluster]' "
                           f"({exc})") from None
    try:
        client = Client(scheduler, timeout=f"{CONNECT_TIMEOUT_S:g}s")
    except (OSError, TimeoutError) as exc:
        raise SchedulerUnreachable(f"--scheduler: no Dask scheduler answered at {scheduler} within "
                                   f"{CONNECT_TIMEOUT_S:g} s ({_error_text(exc)})") from None
    with client:
        _warm_dask(client)
        by_key: dict[str, RunTask] = {}
        attempts: dict[str, int] = {}

        def submit(t: RunTask) -> Any:
            n = attempts.get(t.run_id, 0) + 1
            attempts[t.run_id] = n
            fut = client.submit(execute_run, t, key=f"convexsim-run-{t.run_id}-{t.index}-a{n}", pure=False)
            by_key[fut.key] = t
            return fut

        futures = [submit(t) for t in tasks]
        queue = as_completed(futures)
        try:
            for fut in queue:
                t = by_key[fut.key]
                try:
                    rec = fut.result()
                except Exception as exc:  # noqa: BLE001 - KilledWorker, CancelledError, lost connection
                    if attempts[t.run_id] <= retries:
                        new = submit(t)
                        futures.append(new)
                        queue.add(new)
                        continue
                    rec = _retryable_record(t, exc, attempts[t.run_id])
                on_result(rec)
        except BaseException:
            client.cancel(futures)
            raise


# ---------------------------------------------------------------------------------------------------------
# The study


def _coerce_spec(spec: str | os.PathLike | StudySpec | dict) -> StudySpec:
    if isinstance(spec, StudySpec):
        return spec
    if isinstance(spec, dict):
        return study_from_dict(spec)
    return load_study(spec)


def default_out_dir(spec: StudySpec, reduced: bool) -> Path:
    """``out/studies/<name>`` (``<name>-reduced`` for reduced runs), relative to the current folder."""
    return Path("out") / "studies" / (spec.name + ("-reduced" if reduced else ""))


def reusable(rec: dict[str, Any], task: RunTask) -> bool:
    """The resume rule: a stored record is reused iff it has the task's fingerprint and a final status.

    ``ok`` and ``failed`` (the simulation raised, stopped early or its metrics failed) are final: the same
    inputs give the same outcome. ``retryable`` (the worker was lost) and a changed fingerprint (other
    metrics, ``metric_options`` or convexsim version; records written before fingerprints existed) are not.
    """
    return rec.get("fingerprint") == task.fingerprint and rec.get("status") in FINAL_STATUSES


def run_study(spec_path_or_spec: str | os.PathLike | StudySpec | dict, *, jobs: int | None = None,
              scheduler: str | None = None, out_dir: str | os.PathLike | None = None, progress: bool = True,
              reduced: bool = False, plots: bool = True, report: bool = True) -> StudyResult:
    """Run (or resume) a study and write its table, records, plots and report.

    Args:
        spec_path_or_spec: a study file, a StudySpec, or a study mapping.
        jobs: worker processes of the local pool (default: the number of CPUs; 1 = in this process).
        scheduler: address of a Dask scheduler, e.g. "tcp://127.0.0.1:8786" (then ``jobs`` is ignored).
        out_dir: output folder (default ``out/studies/<name>``).
        progress: show a progress bar on stderr.
        reduced: run the spec's ``reduced`` version (tests, demos).
        plots: draw the PNG/SVG plots.
        report: write ``report.md``.

    Returns:
        A StudyResult with the output paths and counts of executed, skipped and failed runs.
    """
    spec = _coerce_spec(spec_path_or_spec)
    if reduced:
        spec = reduce_spec(spec)
    out = Path(out_dir) if out_dir is not None else default_out_dir(spec, reduced)
    out.mkdir(parents=True, exist_ok=True)
    store = ResultStore(out)
    tasks = expand_runs(spec)
    stored = store.load()
    records: dict[str, dict[str, Any]] = {}
    pending: list[RunTask] = []
    for t in tasks:
        rec = stored.get(t.run_id)
        if rec is not None and reusable(rec, t):
            records[t.run_id] = rec
        else:
            pending.append(t)
    _write_spec_copy(spec, out)
    columns = table_columns(spec)
    counter = {"executed": 0}
    bar = _Progress(len(tasks), done=len(tasks) - len(pending), enabled=progress, name=spec.name)

    def on_result(rec: dict[str, Any]) -> None:
        store.append(rec)
        records[rec["run_id"]] = rec
        counter["executed"] += 1
        store.write_csv(table_rows(spec, tasks, records), columns)
        bar.advance(failed=rec.get("status") != "ok")

    try:
        if pending:
            n_jobs = jobs if jobs is not None else (os.cpu_count() or 1)
            if scheduler:
                _run_dask(pending, scheduler, on_result)
            elif n_jobs <= 1 or len(pending) == 1:
                _run_serial(pending, on_result)
            else:
                _run_pool(pending, min(n_jobs, len(pending)), on_result)
    finally:
        bar.close()
    rows = table_rows(spec, tasks, records)
    store.write_csv(rows, columns)
    ordered = [records[t.run_id] for t in tasks if t.run_id in records]
    result = StudyResult(spec=spec, out_dir=out, csv=store.csv, jsonl=store.jsonl, report=None, records=ordered,
                         executed=counter["executed"], skipped=len(tasks) - len(pending),
                         failed=sum(r.get("status") == "failed" for r in ordered),
                         retryable=sum(r.get("status") == "retryable" for r in ordered))
    if plots or report:
        from convexsim.studies import report as report_mod

        if plots:
            result.plots = report_mod.make_plots(spec, rows, out / "plots")
        if report:
            result.report = report_mod.write_report(spec, rows, result, out / "report.md")
    return result


def _write_spec_copy(spec: StudySpec, out: Path) -> None:
    from convexsim.io.atomic import atomic_write_text

    data = spec.model_dump(mode="json", exclude_none=True)
    atomic_write_text(out / "study.yaml", f"# resolved study spec (source: {spec.source})\n"
                      + yaml.safe_dump(data, sort_keys=False))


# ---------------------------------------------------------------------------------------------------------
# The table


def table_columns(spec: StudySpec) -> list[str]:
    """CSV columns: run identity, swept parameters, status, metrics, pair metrics, timing, error."""
    per_run = [m for m in spec.metrics if m in METRICS and m not in TIMING_METRICS]
    pairs = [m for m in spec.metrics if m in PAIR_METRICS]
    return (["index", "run_id", "repetition", "seed", *spec.swept_paths, "status", *per_run, *pairs, "steps",
             *TIMING_COLUMNS, "error"])


def table_rows(spec: StudySpec, tasks: Iterable[RunTask], records: dict[str, dict[str, Any]]) -> list[dict]:
    """One row per finished run (in run order), with the SAP-vs-LCP pair metrics filled in."""
    rows = []
    by_id: dict[str, dict[str, Any]] = {}
    for t in tasks:
        rec = records.get(t.run_id)
        if rec is None:
            continue
        row: dict[str, Any] = {"index": t.index, "run_id": t.run_id, "repetition": t.repetition, "seed": t.seed,
                               **t.params, "status": rec.get("status", ""), "error": rec.get("error", ""),
                               "steps": rec.get("steps", ""), "wall_time_s": rec.get("wall_time_s"),
                               "ms_per_step": rec.get("ms_per_step"), "finished_at": rec.get("finished_at", ""),
                               "worker": rec.get("worker", "")}
        for m, v in rec.get("metrics", {}).items():
            if m not in TIMING_METRICS:
                row[m] = math.nan if v is None else v
        rows.append(row)
        by_id[t.run_id] = rec
    _fill_pair_metrics(spec, tasks, records, rows)
    return rows


def _fill_pair_metrics(spec: StudySpec, tasks: Iterable[RunTask], records: dict[str, dict[str, Any]],
                       rows: list[dict]) -> None:
    names = [m for m in spec.metrics if m in PAIR_METRICS]
    if not names:
        return
    key_of = {}
    for t in tasks:
        others = tuple(sorted((k, repr(v)) for k, v in t.params.items() if k != "solver.kind"))
        key_of[t.run_id] = (others, t.repetition, t.params.get("solver.kind"))
    groups: dict[tuple, dict[str, dict]] = {}
    for rid, (others, rep, kind) in key_of.items():
        rec = records.get(rid)
        if rec is not None and rec.get("status") == "ok" and rec.get("summary"):
            groups.setdefault((others, rep), {})[kind] = rec
    for row in rows:
        others, rep, _ = key_of[row["run_id"]]
        pair = groups.get((others, rep), {})
        for m in names:
            fn, _ = PAIR_METRICS[m]
            row[m] = fn(pair["sap"]["summary"], pair["lcp"]["summary"]) if "sap" in pair and "lcp" in pair \
                else math.nan


# ---------------------------------------------------------------------------------------------------------
# Progress


class _Progress:
    """A rich progress bar over runs (stderr); silent when disabled."""

    def __init__(self, total: int, *, done: int, enabled: bool, name: str):
        self.failed = 0
        self._bar = None
        if not enabled or total == 0:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._bar = Progress(TextColumn(f"study {name}"), BarColumn(), MofNCompleteColumn(),
                             TextColumn("failed: {task.fields[failed]}"), TimeRemainingColumn(),
                             console=Console(stderr=True), transient=False)
        self._bar.start()
        self._task = self._bar.add_task("runs", total=total, completed=done, failed=0)

    def advance(self, *, failed: bool) -> None:
        self.failed += int(failed)
        if self._bar is not None:
            self._bar.update(self._task, advance=1, failed=self.failed)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


__all__ = ["run_study", "execute_run", "StudyResult", "table_columns", "table_rows", "default_out_dir", "reusable",
           "warm_up_worker", "SchedulerUnreachable", "INFRA_RETRIES", "FINAL_STATUSES"]
