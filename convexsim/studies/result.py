"""The result of a study run (``run_study``), shared by the runner and the report writer."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from convexsim.studies.spec import StudySpec


@dataclass
class StudyResult:
    """What ``run_study`` produced.

    Attributes:
        spec: the spec that ran (after ``reduced`` was applied).
        out_dir: output folder.
        csv: the results table.
        jsonl: one JSON record per run.
        report: the Markdown report (None when reports were turned off).
        plots: PNG and SVG files of every metric against every swept parameter.
        records: the records of this study's runs, in run order.
        executed: runs executed by this call.
        skipped: runs found already finished (resumed).
        failed: runs whose status is "failed" (the simulation or its metrics failed; kept on resume).
        retryable: runs whose worker was lost even after retries (executed again on resume).
    """

    spec: StudySpec
    out_dir: Path
    csv: Path
    jsonl: Path
    report: Path | None
    plots: list[Path] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    executed: int = 0
    skipped: int = 0
    failed: int = 0
    retryable: int = 0

    @property
    def total(self) -> int:
        """Number of runs in the study."""
        return len(self.records)


__all__ = ["StudyResult"]
