"""Parameter studies: sweeps over scene parameters, metrics per run, tables, plots and reports.

A study file (``scenes/studies/*.yaml``, docs/studies.md) names a base scene, the swept dotted paths
(``materials.default.stiffness``, ``solver.sigma``, ``time_step``, ``contact_model``, ``solver.kind``),
how to combine them and the metrics to compute. ``run_study`` runs it locally (process pool) or on a
Dask cluster, writes ``results.jsonl`` and ``results.csv`` as runs finish, resumes where it stopped,
and draws plots and a Markdown report. The core package never imports this one.
"""

import importlib

_LAZY = {"cli_main": "cli", "METRICS": "metrics", "PAIR_METRICS": "metrics", "MetricContext": "metrics",
         "compute_metrics": "metrics", "make_context": "metrics", "StudyResult": "runner",
         "execute_run": "runner", "run_study": "runner", "RunTask": "spec", "StudyError": "spec",
         "StudySpec": "spec", "expand_runs": "spec", "load_study": "spec", "reduce_spec": "spec",
         "study_from_dict": "spec", "ResultStore": "store", "read_csv": "store"}
_SUBMODULES = ("cli", "metrics", "report", "result", "runner", "spec", "store")


def __getattr__(name):  # lazy: `convexsim --help` builds the study parser without numpy, pydantic or dask
    if name in _LAZY:
        return getattr(importlib.import_module(f"convexsim.studies.{_LAZY[name]}"), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"convexsim.studies.{name}")
    raise AttributeError(f"module 'convexsim.studies' has no attribute {name!r}")


__all__ = ["run_study", "load_study", "study_from_dict", "cli_main", "StudySpec", "StudyResult", "StudyError",
           "RunTask", "expand_runs", "reduce_spec", "execute_run", "METRICS", "PAIR_METRICS", "MetricContext",
           "make_context", "compute_metrics", "ResultStore", "read_csv"]
