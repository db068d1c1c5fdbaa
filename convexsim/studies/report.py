"""Plots (PNG and SVG) of every metric against every swept parameter, and the Markdown report.

One figure per (metric, swept parameter): the x axis is the parameter (log when its values are
log-spaced, categorical when they are not numbers), one line per combination of the other swept
parameters, repetitions drawn as points with the line through their mean. The y axis is log when all
values are positive and span at least two decades. Failed runs (NaN metrics) are left out of the lines
and listed in the report.
"""

from __future__ import annotations

import datetime as _dt
import importlib
import math
import platform
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from convexsim.io.atomic import atomic_path, atomic_write_text
from convexsim.studies.metrics import METRICS, PAIR_METRICS, unit_of
from convexsim.studies.spec import StudySpec, base_scene_dict, study_header

if TYPE_CHECKING:
    from convexsim.studies.result import StudyResult


def plotted_metrics(spec: StudySpec) -> list[str]:
    """Metric columns drawn in plots (``ms_per_step`` comes from the timing column of the same name)."""
    return [m for m in spec.metrics if m in METRICS or m in PAIR_METRICS]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _as_float(v: Any) -> float:
    try:
        return float(v) if v not in ("", None) else math.nan
    except (TypeError, ValueError):
        return math.nan


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of log10 y against log10 x over the points with x, y > 0 (NaN if < 2 points)."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if np.count_nonzero(ok) < 2 or np.ptp(np.log10(x[ok])) == 0:
        return math.nan
    return float(np.polyfit(np.log10(x[ok]), np.log10(y[ok]), 1)[0])


REGIME_TOL = (0.1, 0.1)
"""(absolute, relative): a local log–log slope s stays in a regime of mean local slope r while
|s − r| <= 0.1 + 0.1·|r| (0.2 around −1, 0.1 around a plateau)."""


def loglog_regimes(x: Sequence[float], y: Sequence[float],
                   tol: tuple[float, float] = REGIME_TOL) -> list[tuple[float, float, int, float]]:
    """Split a log–log curve into contiguous regimes and fit each: ``[(x_first, x_last, points, slope), ...]``.

    The points with x, y > 0 are averaged per x and sorted; walking along x, the local slope between
    neighbours joins the current regime while it is within ``tol[0] + tol[1]·|r|`` of the regime's mean local
    slope r, else a new regime starts at the shared point. Each regime's slope is the least-squares
    fit over its points, so a curve that follows m·g/k and then a floor gives −1 and ≈ 0, not one slope
    mixing both.
    """
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if not np.any(ok):
        return []
    ux = np.unique(x[ok])
    if ux.size < 2:
        return []
    uy = np.array([y[ok][x[ok] == u].mean() for u in ux])
    lx, ly = np.log10(ux), np.log10(uy)
    local = np.diff(ly) / np.diff(lx)
    bounds = []
    start, members = 0, [local[0]]
    for i in range(1, local.size):
        ref = float(np.mean(members))
        if abs(local[i] - ref) <= tol[0] + tol[1] * abs(ref):
            members.append(local[i])
        else:
            bounds.append((start, i))
            start, members = i, [local[i]]
    bounds.append((start, local.size))
    out = []
    for a, b in bounds:
        slope = float(np.polyfit(lx[a:b + 1], ly[a:b + 1], 1)[0])
        out.append((float(ux[a]), float(ux[b]), b - a + 1, slope))
    return out


def _pair_kind(rows: list[dict]) -> Any:
    """The ``solver.kind`` whose rows carry the pair metrics in plots and slopes (both rows of a pair hold the
    same value): ``sap`` when present."""
    kinds = [r.get("solver.kind") for r in rows]
    return "sap" if "sap" in kinds else (kinds[0] if kinds else None)


def group_series(spec: StudySpec, rows: list[dict], metric: str, param: str) -> dict[str, tuple[list, list]]:
    """Per combination of the other swept parameters: (x values, metric values) of the rows, in row order.

    A SAP-vs-LCP pair metric is one value per pair: it is taken from the ``sap`` rows only and ``solver.kind``
    does not split the series (nothing is returned against ``solver.kind`` itself).
    """
    others = [p for p in spec.swept_paths if p != param]
    if metric in PAIR_METRICS:
        if param == "solver.kind":
            return {}
        kind = _pair_kind(rows)
        rows = [r for r in rows if r.get("solver.kind") == kind]
        others = [p for p in others if p != "solver.kind"]
    series: dict[str, tuple[list, list]] = {}
    for r in rows:
        label = ", ".join(f"{o}={r.get(o)}" for o in others) or metric
        xs, ys = series.setdefault(label, ([], []))
        xs.append(r.get(param))
        ys.append(_as_float(r.get(metric)))
    return series


def make_plots(spec: StudySpec, rows: list[dict], plot_dir: Path) -> list[Path]:
    """Draw every metric against every swept parameter; return the PNG and SVG paths written."""
    from matplotlib.figure import Figure

    plot_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if not rows:
        return written
    for metric in plotted_metrics(spec):
        unit = unit_of(metric)
        for param in spec.swept_paths:
            p = spec.parameter(param)
            values = p.resolved()
            if len(values) < 2:  # nothing varies along this axis
                continue
            if metric in PAIR_METRICS and param == "solver.kind":  # one value per pair: no axis
                continue
            numeric = all(_is_number(v) for v in values)
            fig = Figure(figsize=(6.4, 4.4))
            fig.subplots_adjust(left=0.14, right=0.97, bottom=0.12, top=0.92)
            ax = fig.add_subplot()
            all_y: list[float] = []
            for label, (xs, ys) in group_series(spec, rows, metric, param).items():
                pos = [(_as_float(x) if numeric else float(values.index(x)) if x in values else math.nan) for x in xs]
                pts = [(a, b) for a, b in zip(pos, ys) if math.isfinite(a) and math.isfinite(b)]
                if not pts:
                    continue
                px, py = np.array(pts).T
                uniq = np.unique(px)
                mean = np.array([py[px == u].mean() for u in uniq])
                line, = ax.plot(uniq, mean, "-o", label=label, markersize=4)
                if len(px) > len(uniq):
                    ax.plot(px, py, ".", color=line.get_color(), alpha=0.5)
                all_y.extend(py.tolist())
            if not all_y:
                ax.text(0.5, 0.5, "no finite values (failed or undefined)", ha="center", va="center",
                        transform=ax.transAxes)
            if numeric and p.is_log:
                ax.set_xscale("log")
            if not numeric:
                ax.set_xticks(range(len(values)), [str(v) for v in values])
            ys_pos = [y for y in all_y if y > 0]
            if all_y and len(ys_pos) == len(all_y) and max(ys_pos) / min(ys_pos) >= 100:
                ax.set_yscale("log")
            ax.set_xlabel(p.label or param)
            ax.set_ylabel(f"{metric} [{unit}]" if unit != "1" else metric)
            ax.set_title(f"{spec.name}: {metric} vs {param}", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            if ax.get_legend_handles_labels()[0] and len(group_series(spec, rows, metric, param)) > 1:
                ax.legend(fontsize=7)
            stem = f"{_slug(metric)}__vs__{_slug(param)}"
            for ext in ("png", "svg"):
                path = plot_dir / f"{stem}.{ext}"
                with atomic_path(path) as tmp:
                    fig.savefig(tmp, format=ext, dpi=110)
                written.append(path)
    return written


def software_versions() -> dict[str, str]:
    """Versions of Python, convexsim and the libraries a study depends on."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for mod in ("convexsim", "numpy", "scipy", "numba", "pydantic", "yaml", "matplotlib", "dask", "distributed"):
        try:
            out[mod] = str(getattr(importlib.import_module(mod), "__version__", "?"))
        except ImportError:
            out[mod] = "not installed"
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "—" if not math.isfinite(v) else f"{v:.4g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def write_report(spec: StudySpec, rows: list[dict], result: "StudyResult", path: Path) -> Path:
    """Write report.md: scene, parameters, trend statement, results, slopes, plots and software versions."""
    parts = [f"# Study `{spec.name}`", ""]
    if spec.description:
        parts += [spec.description.strip(), ""]
    header = study_header(spec.source) if spec.source and Path(spec.source).is_file() else ""
    if spec.expected or header:
        parts += ["## Expected trend", ""]
        if spec.expected:
            parts += [spec.expected.strip(), ""]
        if header:
            parts += ["From the study file's header:", "", "```text", header, "```", ""]
    scene = base_scene_dict(spec)
    src = "inline in the study file" if isinstance(spec.scene, dict) else f"`{spec.scene}`"
    parts += ["## Scene", "", f"Base scene: {src} (name `{scene.get('name', '?')}`).", ""]
    if spec.duration is not None or spec.time_step is not None:
        parts += [f"Run settings: duration = {spec.duration} s, time_step = {spec.time_step} s.", ""]
    scene_text = yaml.safe_dump(scene, sort_keys=False, default_flow_style=None, allow_unicode=True).rstrip()
    parts += ["<details><summary>base scene YAML</summary>", "", "```yaml", scene_text, "```", "", "</details>", ""]
    parts += ["## Parameters", ""]
    prow = []
    for p in spec.parameters:
        vals = p.resolved()
        scale = p.range.scale if p.range is not None else ("log" if p.is_log else "list")
        prow.append([f"`{p.path}`", ", ".join(_fmt(v) for v in vals), scale])
    parts += [_table(["path", "values", "scale"], prow), ""]
    parts += [f"Combination: {spec.combine}; repetitions: {spec.repetitions} (seeds {spec.seed}.."
              f"{spec.seed + spec.repetitions - 1}{', into `' + spec.seed_path + '`' if spec.seed_path else ''}).", ""]
    if spec.fixed:
        parts += ["Fixed overrides: " + ", ".join(f"`{k}` = {v}" for k, v in spec.fixed.items()) + ".", ""]
    n_ok = sum(r.get("status") == "ok" for r in rows)
    parts += ["## Runs", "", f"{len(rows)} runs recorded ({n_ok} ok, {len(rows) - n_ok} failed); "
              f"{result.executed} executed by the last invocation, {result.skipped} resumed from earlier results.",
              ""]
    failed = [r for r in rows if r.get("status") != "ok"]
    if failed:
        parts += ["Failed runs:", "", _table(["index", *spec.swept_paths, "error"],
                                             [[r["index"], *[r.get(p) for p in spec.swept_paths],
                                               str(r.get("error", ""))[:200]] for r in failed]), ""]
    metrics = plotted_metrics(spec)
    parts += ["## Results", "", f"Full table: `{result.csv.name}`; one JSON record per run: `{result.jsonl.name}`.",
              ""]
    if len(rows) <= 80:
        shown = [m for m in metrics if m != "ms_per_step"]
        parts += [_table(["index", *spec.swept_paths, "status", *shown],
                         [[r["index"], *[r.get(p) for p in spec.swept_paths], r.get("status"),
                           *[_as_float(r.get(m)) for m in shown]] for r in rows]), ""]
    slopes = []
    for p in spec.parameters:
        if not p.is_log:
            continue
        for m in metrics:
            for label, (xs, ys) in group_series(spec, rows, m, p.path).items():
                for x0, x1, n, s in loglog_regimes([_as_float(x) for x in xs], ys):
                    if math.isfinite(s):
                        slopes.append([m, f"`{p.path}`", label, f"{x0:.4g} – {x1:.4g}", n, s])
    if slopes:
        parts += ["Log–log slopes d log(metric) / d log(parameter), fitted per contiguous regime: walking along the "
                  f"parameter, neighbouring points whose local slopes agree within {REGIME_TOL[0]:g} + "
                  f"{REGIME_TOL[1]:g}·|slope| are fitted "
                  "together and a change of regime (e.g. the near-rigid floor) starts a new fit; a 2-point "
                  "regime is a transition between two. A slope of −1 means inverse proportionality. Compare "
                  "with the expected trend above, which states each regime's range.", "",
                  _table(["metric", "parameter", "series", "range", "points", "slope"], slopes), ""]
    pngs = [p for p in result.plots if p.suffix == ".png"]
    if pngs:
        parts += ["## Plots", ""]
        for png in pngs:
            rel = png.relative_to(path.parent) if png.is_relative_to(path.parent) else png
            parts += [f"![{png.stem}]({rel.as_posix()})", ""]
    parts += ["## Software", "", _table(["package", "version"], [[k, v] for k, v in software_versions().items()]),
              "", f"Report written {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} by "
              f"`{' '.join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv))}`.", ""]
    atomic_write_text(path, "\n".join(parts))
    return path


__all__ = ["make_plots", "write_report", "software_versions", "loglog_slope", "loglog_regimes", "group_series"]
