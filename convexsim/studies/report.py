"""The verdict, plots (PNG and SVG) and the Markdown report of a study.

The report leads with the verdict: each expected trend of the spec (``trends``) checked against the data
(``check_trends``: pass / fail / no data, with the fitted slope, plateau or extreme value), then the plots
of those trends, then the rest. One figure per (metric, swept parameter): a numeric parameter is the x
axis (log when its values are log-spaced), one line per combination of the other swept parameters
(legend values rounded to 3 significant digits), repetitions drawn as points with the line through their
mean; a categorical parameter (strings, bools) gives grouped bars, never a line. The y axis is log when
all values are positive and span at least two decades. Failed runs (NaN metrics) are left out and listed
in the report. Timing (``ms_per_step``) is plotted only when a trend names it; log–log fits are reported
only for physical metrics (not timing, iteration or contact counts) unless a trend names them.
"""

from __future__ import annotations

import datetime as _dt
import importlib
from dataclasses import dataclass, field
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
from convexsim.studies.spec import StudySpec, Trend, base_scene_dict, study_header

if TYPE_CHECKING:
    from convexsim.studies.result import StudyResult


NO_FIT_METRICS = ("ms_per_step", "newton_iterations_mean", "newton_iterations_max", "line_search_evals_mean",
                  "line_search_evals_max", "contacts_per_step", "solver_failures")
"""Timing and counts: no log–log fit in the report unless a trend names the metric."""


def plotted_metrics(spec: StudySpec) -> list[str]:
    """Metric columns drawn in plots: every metric but the timing ``ms_per_step`` (unless a trend names it),
    the metrics of the trends first."""
    trend_metrics = [t.metric for t in spec.trends]
    ms = [m for m in spec.metrics if (m in METRICS or m in PAIR_METRICS)
          and (m != "ms_per_step" or m in trend_metrics)]
    return sorted(ms, key=lambda m: (m not in trend_metrics, spec.metrics.index(m)))


def fitted_metrics(spec: StudySpec) -> list[str]:
    """Metrics whose log–log slopes the report lists: physical ones, plus any a trend names."""
    trend_metrics = {t.metric for t in spec.trends}
    return [m for m in plotted_metrics(spec) if m not in NO_FIT_METRICS or m in trend_metrics]


def round_value(v: Any) -> str:
    """A swept value for legends and tables: numbers to 3 significant digits with a compact exponent
    (3162.27766017 -> "3.16e3", 0.0025 -> "0.0025", 1e-05 -> "1e-5"), everything else as is."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        return str(v)
    v = float(v)
    if not math.isfinite(v):
        return str(v)
    text = f"{v:.3g}"
    if "e" in text:
        mant, exp = text.split("e")
        text = f"{mant}e{int(exp)}"
    return text


def short_path(path: str) -> str:
    """The last part of a dotted path (``materials.default.stiffness`` -> ``stiffness``)."""
    return path.split(".")[-1]


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
        label = ", ".join(f"{short_path(o)}={round_value(r.get(o))}" for o in others) or metric
        xs, ys = series.setdefault(label, ([], []))
        xs.append(r.get(param))
        ys.append(_as_float(r.get(metric)))
    return series


# ----------------------------------------------------------------------------------- verdict
@dataclass
class SeriesCheck:
    """One series of a trend: its label, the points used, the measured quantity and whether it holds."""

    label: str
    points: int
    measured: str
    ok: bool | None          # None: not enough data


@dataclass
class Verdict:
    """A trend checked against the rows: ``status`` "pass" | "fail" | "no data", one check per series."""

    trend: Trend
    status: str
    series: list[SeriesCheck] = field(default_factory=list)

    @property
    def statement(self) -> str:
        return self.trend.label or describe_trend(self.trend)


def describe_trend(t: Trend) -> str:
    """The trend in words, e.g. "rest_penetration vs stiffness (contact_model=sap), 1e3 ≤ x ≤ 1e5: log–log
    slope −1 ± 0.05"."""
    where = ", ".join(f"{short_path(k)}={round_value(v)}" for k, v in t.where.items())
    where = f" ({where})" if where else ""
    rng = ""
    if t.range:
        rng = f", {round_value(t.range[0])} ≤ {short_path(t.against)} ≤ {round_value(t.range[1])}"
    axes = {"loglog": "log–log slope", "semilogx": "slope per decade", "linear": "slope"}[t.fit]
    if t.kind == "slope":
        if t.value is not None:
            what = f"{axes} {round_value(t.value)} ± {round_value(t.tol)}"
        else:
            lo = round_value(t.min) if t.min is not None else "−∞"
            hi = round_value(t.max) if t.max is not None else "∞"
            what = f"{axes} between {lo} and {hi}"
    elif t.kind == "plateau":
        what = f"a plateau (max/min ≤ {round_value(t.max_ratio)}"
        level = f", level {round_value(t.value)} ± {round_value(100 * t.tol)}%" if t.value is not None else ""
        what += level + ")"
    else:
        what = f"every value {t.kind} {round_value(t.value)}"
    return f"`{t.metric}` vs `{short_path(t.against)}`{where}{rng}: {what}"


def _fit(t: Trend, x: np.ndarray, y: np.ndarray) -> float:
    if t.fit == "linear":
        return float(np.polyfit(x, y, 1)[0])
    ok = (x > 0) & (y > 0) if t.fit == "loglog" else x > 0
    if np.count_nonzero(ok) < 2:
        return math.nan
    return float(np.polyfit(np.log10(x[ok]), np.log10(y[ok]) if t.fit == "loglog" else y[ok], 1)[0])


def _check_series(t: Trend, x: np.ndarray, y: np.ndarray) -> tuple[str, bool | None]:
    """(measured, holds) for one series of points averaged per x (None: not enough points)."""
    if t.kind in ("above", "below"):
        if y.size == 0:
            return "no points", None
        if t.kind == "above":
            return f"min {round_value(float(y.min()))}", bool(y.min() > t.value)
        return f"max {round_value(float(y.max()))}", bool(y.max() < t.value)
    if np.unique(x).size < 2:
        return f"{np.unique(x).size} value(s) of the parameter in range", None
    if t.kind == "slope":
        slope = _fit(t, x, y)
        if not math.isfinite(slope):
            return "no fit (values not positive)", False
        if t.value is not None:
            ok = abs(slope - t.value) <= t.tol
        else:
            ok = (t.min is None or slope >= t.min) and (t.max is None or slope <= t.max)
        return f"slope {slope:.3f}", bool(ok)
    # plateau
    if np.any(y <= 0):
        return "non-positive values", False
    ratio = float(y.max() / y.min())
    level = float(np.mean(y))
    ok = ratio <= t.max_ratio
    measured = f"level {round_value(level)}, max/min {ratio:.3f}"
    if t.value is not None:
        ok = ok and abs(level / t.value - 1.0) <= t.tol
    return measured, bool(ok)


def check_trends(spec: StudySpec, rows: list[dict]) -> list[Verdict]:
    """Check each of ``spec.trends`` against the rows (status ok only): pass if every series holds, fail if
    one does not, "no data" if no series has enough points in range (e.g. a reduced run)."""
    out = []
    ok_rows = [r for r in rows if r.get("status") == "ok"]
    for t in spec.trends:
        keep = [r for r in ok_rows if all(_same_value(r.get(k), v) for k, v in t.where.items())]
        checks = []
        for label, (xs, ys) in group_series(spec, keep, t.metric, t.against).items():
            pts = _finite_points(xs, ys)
            if t.range is not None:
                lo, hi = t.range
                pts = [(a, b) for a, b in pts if lo * (1 - 1e-9) <= a <= hi * (1 + 1e-9)]
            if pts:
                px, py = np.array(pts).T
                ux = np.unique(px)
                uy = np.array([py[px == u].mean() for u in ux])
            else:
                ux = uy = np.zeros(0)
            measured, holds = _check_series(t, ux, uy)
            checks.append(SeriesCheck(label, int(ux.size), measured, holds))
        if any(c.ok is False for c in checks):
            status = "fail"
        elif any(c.ok for c in checks):
            status = "pass"
        else:
            status = "no data"
        out.append(Verdict(t, status, checks))
    return out


def _finite_points(xs: list, ys: list) -> list[tuple[float, float]]:
    """(x, y) pairs with both finite (x converted to float)."""
    return [(_as_float(a), b) for a, b in zip(xs, ys) if math.isfinite(_as_float(a)) and math.isfinite(b)]


def _same_value(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b or str(a) == str(b)


def verdict_lines(verdicts: list[Verdict]) -> list[str]:
    """The report's "Verdict" section (Markdown lines)."""
    if not verdicts:
        return ["## Verdict", "", "No checkable trend in the study file (`trends:`): compare the plots with "
                "the expected trend below by eye.", ""]
    n_pass = sum(v.status == "pass" for v in verdicts)
    n_fail = sum(v.status == "fail" for v in verdicts)
    head = "FAIL" if n_fail else ("PASS" if n_pass else "NO DATA")
    n_none = len(verdicts) - n_pass - n_fail
    lines = ["## Verdict", "", f"**{head}**: {n_pass} of {len(verdicts)} expected trends hold"
             + (f", {n_fail} fail" if n_fail else "")
             + (f", {n_none} without data in range" if n_none else "") + ".", ""]
    mark = {"pass": "✅ pass", "fail": "❌ FAIL", "no data": "— no data"}
    for v in verdicts:
        lines.append(f"* {mark[v.status]}: {v.statement}")
        for c in v.series:
            state = {True: "holds", False: "does not hold", None: "not enough data"}[c.ok]
            lines.append(f"  * {c.label}: {c.measured} over {c.points} points: {state}")
    lines.append("")
    return lines


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
            groups = group_series(spec, rows, metric, param)
            if numeric:
                for label, (xs, ys) in groups.items():
                    pts = _finite_points(xs, ys)
                    if not pts:
                        continue
                    px, py = np.array(pts).T
                    uniq = np.unique(px)
                    mean = np.array([py[px == u].mean() for u in uniq])
                    line, = ax.plot(uniq, mean, "-o", label=label, markersize=4)
                    if len(px) > len(uniq):
                        ax.plot(px, py, ".", color=line.get_color(), alpha=0.5)
                    all_y.extend(py.tolist())
            else:                # categories: grouped bars (mean), repetitions as points
                width = 0.8 / max(len(groups), 1)
                for j, (label, (xs, ys)) in enumerate(groups.items()):
                    pos = np.array([float(values.index(x)) if x in values else math.nan for x in xs])
                    py = np.asarray(ys, dtype=float)
                    ok = np.isfinite(pos) & np.isfinite(py)
                    if not ok.any():
                        continue
                    cats = np.unique(pos[ok])
                    mean = np.array([py[ok][pos[ok] == c].mean() for c in cats])
                    shift = (j - (len(groups) - 1) / 2) * width
                    bars = ax.bar(cats + shift, mean, width=width * 0.95, label=label)
                    if np.count_nonzero(ok) > cats.size:
                        ax.plot(pos[ok] + shift, py[ok], ".", color="k", alpha=0.5)
                    all_y.extend(py[ok].tolist())
                    del bars
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
            for t in spec.trends:             # the trend's range, shaded
                if t.metric == metric and t.against == param and t.range is not None and numeric:
                    ax.axvspan(t.range[0], t.range[1], color="tab:green", alpha=0.08, lw=0)
            ax.set_xlabel(p.label or param)
            ax.set_ylabel(f"{metric} [{unit}]" if unit != "1" else metric)
            ax.set_title(f"{spec.name}: {metric} vs {param}", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
            if ax.get_legend_handles_labels()[0] and len(groups) > 1:
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


def _plot_link(png: Path, report_path: Path) -> str:
    rel = png.relative_to(report_path.parent) if png.is_relative_to(report_path.parent) else png
    return f"![{png.stem}]({rel.as_posix()})"


def write_report(spec: StudySpec, rows: list[dict], result: "StudyResult", path: Path) -> Path:
    """Write report.md: the verdict and the plots that show it first, then the expected trend in words, the
    runs, fits, other plots, the scene, the parameters and software versions."""
    parts = [f"# Study `{spec.name}`", ""]
    if spec.description:
        parts += [spec.description.strip(), ""]
    verdicts = check_trends(spec, rows)
    parts += verdict_lines(verdicts)
    pngs = [p for p in result.plots if p.suffix == ".png"]
    key_stems = {f"{_slug(t.metric)}__vs__{_slug(t.against)}" for t in spec.trends}
    key = [p for p in pngs if p.stem in key_stems]
    for png in key:
        parts += [_plot_link(png, path), ""]
    header = study_header(spec.source) if spec.source and Path(spec.source).is_file() else ""
    if spec.expected or header:
        parts += ["## Expected trend", ""]
        if spec.expected:
            parts += [spec.expected.strip(), ""]
        if header:
            parts += ["<details><summary>the study file's header</summary>", "", "```text", header, "```", "",
                      "</details>", ""]
    n_ok = sum(r.get("status") == "ok" for r in rows)
    parts += ["## Runs", "", f"{len(rows)} runs recorded ({n_ok} ok, {len(rows) - n_ok} failed); "
              f"{result.executed} executed by the last invocation, {result.skipped} resumed from earlier "
              f"results. Full table: `{result.csv.name}`; one JSON record per run: `{result.jsonl.name}`.", ""]
    failed = [r for r in rows if r.get("status") != "ok"]
    if failed:
        parts += ["Failed runs:", "", _table(["index", *spec.swept_paths, "error"],
                                             [[r["index"], *[round_value(r.get(p)) for p in spec.swept_paths],
                                               str(r.get("error", ""))[:200]] for r in failed]), ""]
    metrics = plotted_metrics(spec)
    slopes = []
    for p in spec.parameters:
        if not p.is_log:
            continue
        for m in fitted_metrics(spec):
            for label, (xs, ys) in group_series(spec, rows, m, p.path).items():
                for x0, x1, n, s in loglog_regimes([_as_float(x) for x in xs], ys):
                    if math.isfinite(s) and n >= 3:
                        slopes.append([m, f"`{short_path(p.path)}`", label,
                                       f"{round_value(x0)} – {round_value(x1)}", n, f"{s:.3f}"])
    if slopes:
        parts += ["## Fits", "",
                  "Log–log slopes d log(metric) / d log(parameter) of the physical metrics (not timing or "
                  "counts), fitted per contiguous regime of at least 3 points: walking along the parameter, "
                  f"neighbouring points whose local slopes agree within {REGIME_TOL[0]:g} + "
                  f"{REGIME_TOL[1]:g}·|slope| are fitted together. A slope of −1 means inverse proportionality.", "",
                  _table(["metric", "parameter", "series", "range", "points", "slope"], slopes), ""]
    others = [p for p in pngs if p not in key]
    if others:
        parts += ["## More plots", "", "<details><summary>" + f"{len(others)} plots of the other metrics"
                  + "</summary>", ""]
        for png in others:
            parts += [_plot_link(png, path), ""]
        parts += ["</details>", ""]
    if len(rows) <= 80:
        header = ["index", *[short_path(p) for p in spec.swept_paths], "status", *metrics]
        body = [[r["index"], *[round_value(r.get(p)) for p in spec.swept_paths], r.get("status"),
                 *[_as_float(r.get(m)) for m in metrics]] for r in rows]
        parts += ["## Results", "", _table(header, body), ""]
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
        prow.append([f"`{p.path}`", ", ".join(round_value(v) for v in vals), scale])
    parts += [_table(["path", "values", "scale"], prow), ""]
    parts += [f"Combination: {spec.combine}; repetitions: {spec.repetitions} (seeds {spec.seed}.."
              f"{spec.seed + spec.repetitions - 1}{', into `' + spec.seed_path + '`' if spec.seed_path else ''}).", ""]
    if spec.fixed:
        parts += ["Fixed overrides: " + ", ".join(f"`{k}` = {v}" for k, v in spec.fixed.items()) + ".", ""]
    parts += ["## Software", "", _table(["package", "version"], [[k, v] for k, v in software_versions().items()]),
              "", f"Report written {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')} by "
              f"`{' '.join(Path(a).name if i == 0 else a for i, a in enumerate(sys.argv))}`.", ""]
    atomic_write_text(path, "\n".join(parts))
    return path


__all__ = ["make_plots", "write_report", "software_versions", "loglog_slope", "loglog_regimes", "group_series",
           "check_trends", "Verdict", "round_value", "plotted_metrics", "fitted_metrics"]
