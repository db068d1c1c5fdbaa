"""Identification studies: μ̂ of Berard & Trinkle's particle over a noise sweep (docs/identify.md §4).

A study file (YAML, validated, unknown keys refused) names the estimators, the noise levels ε and the noise
seeds; every (ε, seed, method) is one fit of ``convexsim.identify.berard_trinkle``. The report states the
expected trend up front and checks it: the median |μ̂ − μ| over the noise seeds against ε has log–log slope
``trend.slope`` ± ``trend.tol`` within ``trend.range`` (least-squares estimators: error ∝ σ ∝ ε), and every
error is within ``trend.sigmas`` of its own Gauss–Newton σ. An MPEC fit that ends at an infeasible point
(violation > 1e-3 m/s) is a "not converged" row, kept out of the medians and drawn as a cross.

Output in DIR (each file written atomically): ``results.csv`` (one row per fit), ``report.md`` (the
per-ε table and the verdict), ``error_vs_noise.png`` (log–log |μ̂ − μ| against ε).

    convexsim identify --study scenes/studies/identification/mu_vs_noise.yaml --out DIR [--reduced]
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from convexsim.errors import InputError
from convexsim.io.atomic import atomic_path, atomic_write_text


class IdentifyStudyError(InputError):
    """A malformed identification study file."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Trend(_Strict):
    """Expected log–log slope of the median error against ε within ``range``, and the σ bound."""

    slope: float = 1.0
    tol: float = Field(0.25, gt=0)
    range: tuple[float, float] = (0.0, float("inf"))
    sigmas: float = Field(5.0, gt=0)


class Reduced(_Strict):
    """A smaller sweep for tests and demos."""

    eps: list[float] | None = None
    seeds: list[int] | None = None
    methods: list[Literal["shooting", "mpec"]] | None = None


class IdentifyStudy(_Strict):
    """The study file (module docstring)."""

    name: str
    description: str = ""
    expected: str
    problem: Literal["berard_trinkle"] = "berard_trinkle"
    mu: float = Field(0.2, gt=0, le=1.0)
    eps: list[float] = Field(min_length=1)
    seeds: list[int] = Field(min_length=1)
    methods: list[Literal["shooting", "mpec"]] = Field(min_length=1)
    trend: Trend = Trend()
    reduced: Reduced | None = None

    @model_validator(mode="after")
    def _check(self) -> IdentifyStudy:
        if any(e <= 0 for e in self.eps):
            raise ValueError("eps: noise levels must be > 0 (log–log axes)")
        if len(set(self.eps)) != len(self.eps) or len(set(self.seeds)) != len(self.seeds):
            raise ValueError("eps and seeds must not repeat a value")
        return self

    def reduce(self) -> IdentifyStudy:
        """The study with its ``reduced`` block applied (name gains ``-reduced``)."""
        r = self.reduced or Reduced()
        return self.model_copy(update={"name": f"{self.name}-reduced", "eps": r.eps or self.eps,
                                       "seeds": r.seeds or self.seeds, "methods": r.methods or self.methods,
                                       "reduced": None})


def resolve_identify_study(arg: str | Path) -> Path:
    """The file ``arg`` names: a path as given, else the same path under the shipped scenes folder (a
    leading ``scenes/`` dropped), else a shipped study name (``scenes/studies/identification/<arg>.yaml``).
    IdentifyStudyError listing the shipped identification studies otherwise."""
    from convexsim.scene import shipped_scenes_dir

    path = Path(arg)
    if path.exists():
        return path
    root = shipped_scenes_dir()
    tails = [path] + ([Path(*path.parts[1:])] if len(path.parts) > 1 and path.parts[0] == root.name else [])
    tails += [Path("studies") / "identification" / f"{path.name}.yaml"] if len(path.parts) == 1 else []
    for tail in tails:
        if not path.is_absolute() and (root / tail).is_file():
            return root / tail
    names = sorted(p.stem for p in (root / "studies" / "identification").glob("*.yaml"))
    raise IdentifyStudyError(f"identification study not found: {arg}; shipped: {', '.join(names)}")


def load_identify_study(path: str | Path) -> IdentifyStudy:
    """Read and validate a study file (a path or a shipped name, :func:`resolve_identify_study`);
    IdentifyStudyError names the file and the field."""
    path = resolve_identify_study(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise IdentifyStudyError(f"{path}: {exc}") from None
    if isinstance(data, dict):   # PyYAML reads 1e-3 (no dot) as a string
        for key in ("eps",):
            if isinstance(data.get(key), list):
                data[key] = [_number(v) for v in data[key]]
        if isinstance(data.get("reduced"), dict) and isinstance(data["reduced"].get("eps"), list):
            data["reduced"]["eps"] = [_number(v) for v in data["reduced"]["eps"]]
    try:
        return IdentifyStudy.model_validate(data)
    except ValidationError as exc:
        lines = [f"{path}: {'.'.join(str(p) for p in e['loc']) or '<top>'}: {e['msg']}" for e in exc.errors()]
        raise IdentifyStudyError("\n".join(lines)) from None


def _number(v):
    try:
        return float(v) if isinstance(v, str) else v
    except ValueError:
        return v


@dataclass
class StudyOutcome:
    """Rows (one per fit), per-(method, ε) summaries, the verdict lines, and the written files."""

    rows: list[dict]
    summary: list[dict]
    verdict: list[str]
    passed: bool | None
    files: list[Path]


def run_fits(spec: IdentifyStudy, progress=None) -> list[dict]:
    """One fit per (ε, seed, method) (module docstring)."""
    from convexsim.identify import berard_trinkle as bt

    truth, _ = bt.simulate(spec.mu)
    rows = []
    for eps in spec.eps:
        for seed in spec.seeds:
            obs = bt.observe(truth, eps, np.random.default_rng(seed))
            for method in spec.methods:
                t0 = time.perf_counter()
                fit = bt.fit_mpec(obs) if method == "mpec" else bt.fit_shooting(obs)
                rows.append({"eps": eps, "seed": seed, "method": method, "mu_hat": fit.mu,
                             "error": abs(fit.mu - spec.mu), "std": fit.mu_std,
                             "objective_per_eps2": fit.objective / eps ** 2, "violation": fit.violation,
                             "converged": bool(fit.converged), "evaluations": fit.evaluations,
                             "seconds": time.perf_counter() - t0})
                if progress:
                    progress(rows[-1])
    return rows


def summarize(spec: IdentifyStudy, rows: list[dict]) -> tuple[list[dict], list[str], bool | None]:
    """Per (method, ε): converged fits, median and max error, median σ, worst error/σ; then the verdict."""
    summary, verdict, ok_all = [], [], True
    lo, hi = spec.trend.range
    any_trend = False
    for method in spec.methods:
        xs, ys = [], []
        for eps in spec.eps:
            sel = [r for r in rows if r["method"] == method and r["eps"] == eps]
            good = [r for r in sel if r["converged"]]
            err = np.array([r["error"] for r in good])
            std = np.array([r["std"] for r in good])
            s = {"method": method, "eps": eps, "fits": len(sel), "converged": len(good),
                 "median_error": float(np.median(err)) if good else float("nan"),
                 "max_error": float(err.max()) if good else float("nan"),
                 "median_std": float(np.median(std)) if good else float("nan"),
                 "worst_error_per_std": float(np.max(err / std)) if good else float("nan")}
            summary.append(s)
            if good and lo <= eps <= hi:
                xs.append(eps)
                ys.append(max(s["median_error"], 1e-300))
            if good and not s["worst_error_per_std"] <= spec.trend.sigmas:
                ok_all = False
                verdict.append(f"FAIL {method} ε = {eps:g}: an error is {s['worst_error_per_std']:.2f} σ "
                               f"(> {spec.trend.sigmas:g} σ)")
            if len(good) < len(sel):
                verdict.append(f"note {method} ε = {eps:g}: {len(sel) - len(good)} of {len(sel)} fits did "
                               f"not reach a feasible point (not counted)")
        if len(xs) >= 2:
            any_trend = True
            slope = float(np.polyfit(np.log(xs), np.log(ys), 1)[0])
            good_slope = abs(slope - spec.trend.slope) <= spec.trend.tol
            ok_all &= good_slope
            verdict.append(f"{'PASS' if good_slope else 'FAIL'} {method}: log–log slope of the median "
                           f"|μ̂ − μ| against ε = {slope:.3f} (expected {spec.trend.slope:g} ± "
                           f"{spec.trend.tol:g}, ε in [{min(xs):g}, {max(xs):g}])")
        else:
            verdict.append(f"no data {method}: fewer than two noise levels with converged fits in the trend "
                           f"range")
    within = all(not s["converged"] or s["worst_error_per_std"] <= spec.trend.sigmas for s in summary)
    verdict.append(f"{'PASS' if within else 'FAIL'} every converged fit's |μ̂ − μ| within "
                   f"{spec.trend.sigmas:g} σ of its own Gauss–Newton σ")
    return summary, verdict, (ok_all if any_trend else None)


def plot(spec: IdentifyStudy, rows: list[dict], summary: list[dict], path: Path) -> Path:
    """Log–log |μ̂ − μ| against ε: every fit (dots; crosses: not converged), the medians (lines), the median
    σ (dashed) and a slope-1 reference through the first median."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    colors = {"shooting": "C0", "mpec": "C1"}
    offset = {"shooting": 0.93, "mpec": 1.07}
    for method in spec.methods:
        c = colors[method]
        for conv, marker in ((True, "o"), (False, "x")):
            sel = [r for r in rows if r["method"] == method and r["converged"] == conv]
            if sel:
                ax.loglog([r["eps"] * offset[method] for r in sel], [max(r["error"], 1e-12) for r in sel],
                          marker, color=c, ms=4, alpha=0.5, ls="none",
                          label=None if conv else f"{method}: not converged")
        s = [x for x in summary if x["method"] == method and x["converged"]]
        ax.loglog([x["eps"] for x in s], [x["median_error"] for x in s], "-", color=c, lw=1.8,
                  label=f"{method}: median |μ̂ − μ|")
        ax.loglog([x["eps"] for x in s], [x["median_std"] for x in s], "--", color=c, lw=1.0,
                  label=f"{method}: median σ (Gauss–Newton)")
    first = [x for x in summary if x["converged"]]
    if first:
        e0, y0 = first[0]["eps"], first[0]["median_error"]
        e = np.array([min(spec.eps), max(spec.eps)])
        ax.loglog(e, y0 * (e / e0) ** spec.trend.slope, ":", color="0.4", label=f"slope {spec.trend.slope:g}")
    ax.set_xlabel("noise ε [m] (uniform on [−ε, ε])")
    ax.set_ylabel(f"|μ̂ − μ|  (μ = {spec.mu:g})")
    ax.set_title(spec.name)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path


COLUMNS = ("eps", "seed", "method", "mu_hat", "error", "std", "objective_per_eps2", "violation", "converged",
           "evaluations", "seconds")


def markdown(spec: IdentifyStudy, summary: list[dict], verdict: list[str], figure: str | None) -> str:
    """The report text: the expectation, the per-(method, ε) table, the verdict, the plot."""
    lines = [f"# Study: {spec.name}", "", spec.description, "", f"**Expected.** {spec.expected}", "",
             (f"Particle of Berard & Trinkle (μ = {spec.mu:g}, 101 frames), noise seeds "
             f"{', '.join(map(str, spec.seeds))}; estimators: {', '.join(spec.methods)} (docs/identify.md)."),
             "", ("| method | ε [m] | fits | converged | median \\|μ̂ − μ\\| | max \\|μ̂ − μ\\| | median σ | "
             "max \\|μ̂ − μ\\|/σ |"), "|---|---|---|---|---|---|---|---|"]
    for s in summary:
        lines.append(f"| {s['method']} | {s['eps']:g} | {s['fits']} | {s['converged']} | "
                     f"{s['median_error']:.2g} | {s['max_error']:.2g} | {s['median_std']:.2g} | "
                     f"{s['worst_error_per_std']:.2f} |")
    lines += ["", "## Verdict", ""] + [f"- {v}" for v in verdict] + [""]
    if figure:
        lines += [f"![|μ̂ − μ| against ε]({figure})", ""]
    lines.append("Rows: results.csv (one per fit: μ̂, error, σ, objective/ε², MPEC violation [m/s], "
                 "evaluations).")
    return "\n".join(lines) + "\n"


def run_identify_study(spec: IdentifyStudy | str | Path, out_dir: str | Path, *, reduced: bool = False,
                       plots: bool = True, progress=None) -> StudyOutcome:
    """Run the fits and write results.csv, report.md and error_vs_noise.png into ``out_dir``."""
    if not isinstance(spec, IdentifyStudy):
        spec = load_identify_study(spec)
    if reduced:
        spec = spec.reduce()
    rows = run_fits(spec, progress)
    summary, verdict, passed = summarize(spec, rows)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    files = [out / "results.csv"]
    atomic_write_text(files[0], buf.getvalue())
    fig = plot(spec, rows, summary, out / "error_vs_noise.png").name if plots else None
    if fig:
        files.append(out / fig)
    atomic_write_text(out / "report.md", markdown(spec, summary, verdict, fig))
    files.append(out / "report.md")
    return StudyOutcome(rows, summary, verdict, passed, files)


__all__ = ["IdentifyStudy", "IdentifyStudyError", "StudyOutcome", "load_identify_study",
           "resolve_identify_study", "run_identify_study", "summarize"]
