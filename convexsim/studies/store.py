"""Result files of a study: JSON lines appended one record at a time, and a CSV rewritten atomically.

``results.jsonl`` holds one JSON object per finished run. Each line is written with a single ``write``
followed by flush + fsync, so a killed study leaves at most a truncated *last* line; ``load`` drops such a
line (and rewrites the file without it, atomically) before anything is appended. ``results.csv`` is
rebuilt from the records after every run and replaced atomically, so readers never see half a table.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from convexsim.io.atomic import atomic_write_text

TIMING_COLUMNS = ("wall_time_s", "ms_per_step", "finished_at", "worker")
"""CSV columns that depend on the machine and the schedule, not on the physics."""


class ResultStore:
    """The result files of one study folder."""

    def __init__(self, out_dir: str | os.PathLike):
        self.out_dir = Path(out_dir)
        self.jsonl = self.out_dir / "results.jsonl"
        self.csv = self.out_dir / "results.csv"
        self.dropped_lines = 0

    def load(self) -> dict[str, dict[str, Any]]:
        """Finished records keyed by run_id (a later line for the same run wins); repair a torn last line."""
        if not self.jsonl.is_file():
            return {}
        raw = self.jsonl.read_bytes()
        records: dict[str, dict[str, Any]] = {}
        good_lines: list[str] = []
        bad = 0
        for line in raw.decode("utf-8", errors="replace").splitlines():
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if not isinstance(rec, dict) or "run_id" not in rec:
                bad += 1
                continue
            records[rec["run_id"]] = rec
            good_lines.append(line)
        self.dropped_lines = bad
        if bad or (raw and not raw.endswith(b"\n")):
            atomic_write_text(self.jsonl, "".join(line + "\n" for line in good_lines))
        return records

    def append(self, record: dict[str, Any]) -> None:
        """Append one record as one line; flush and fsync before returning."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        line = json.dumps(_json_safe(record), sort_keys=True, allow_nan=False) + "\n"
        with open(self.jsonl, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def write_csv(self, rows: list[dict[str, Any]], columns: list[str]) -> None:
        """Replace the CSV with ``rows`` (dicts keyed by column), atomically."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for row in rows:
            w.writerow({c: _csv_cell(row.get(c, "")) for c in columns})
        atomic_write_text(self.csv, buf.getvalue())


def _json_safe(obj: Any) -> Any:
    """NaN/inf become None (strict JSON); numpy scalars become Python numbers."""
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        try:
            obj = obj.item()
        except (ValueError, TypeError):
            return str(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _csv_cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return "" if not math.isfinite(v) else repr(v)
    return v


def read_csv(path: str | os.PathLike) -> list[dict[str, str]]:
    """Rows of a results CSV as dicts of strings."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def column_floats(rows: Iterable[dict[str, str]], column: str) -> list[float]:
    """A CSV column as floats (empty cells -> NaN)."""
    return [float(r[column]) if r.get(column, "") != "" else math.nan for r in rows]


__all__ = ["ResultStore", "TIMING_COLUMNS", "read_csv", "column_floats"]
