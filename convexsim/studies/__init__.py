"""Parameter studies: sweeps over scene parameters, metrics per run, tables, plots and reports.

A study file (``scenes/studies/*.yaml``, docs/studies.md) names a base scene, the swept dotted paths
(``materials.default.stiffness``, ``solver.sigma``, ``time_step``, ``contact_model``, ``solver.kind``),
how to combine them and the metrics to compute. ``run_study`` runs it locally (process pool) or on a
Dask cluster, writes ``results.jsonl`` and ``results.csv`` as runs finish, resumes where it stopped,
and draws plots and a Markdown report. The core package never imports this one.
"""

from convexsim.studies.cli import cli_main
from convexsim.studies.metrics import METRICS, PAIR_METRICS, MetricContext, compute_metrics, make_context
from convexsim.studies.runner import StudyResult, execute_run, run_study
from convexsim.studies.spec import (RunTask, StudyError, StudySpec, expand_runs, load_study, reduce_spec,
                                    study_from_dict)
from convexsim.studies.store import ResultStore, read_csv

__all__ = ["run_study", "load_study", "study_from_dict", "cli_main", "StudySpec", "StudyResult", "StudyError",
           "RunTask", "expand_runs", "reduce_spec", "execute_run", "METRICS", "PAIR_METRICS", "MetricContext",
           "make_context", "compute_metrics", "ResultStore", "read_csv"]
