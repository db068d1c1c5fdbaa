"""The identification report: Markdown table of estimates, fit-vs-data PNGs (matplotlib Agg), atomic
writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from convexsim.identify.fit import Identification
from convexsim.io.atomic import atomic_path, atomic_write_text


def plot_fit(ident: Identification, path: Path) -> Path:
    """Observed COM positions (dots) against each method's fitted positions (lines), one row per body."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nb = len(ident.body_names)
    fig, axes = plt.subplots(nb, 3, figsize=(12, 3.2 * nb), squeeze=False)
    styles = {"mpec": "--", "sap": "-"}
    for b, name in enumerate(ident.body_names):
        for c, label in enumerate("xyz"):
            ax = axes[b, c]
            ax.plot(ident.time, ident.observed[:, b, c], ".", ms=3, color="0.4", label="data")
            for res in ident.results:
                ax.plot(ident.time, res.positions[:, b, c], styles.get(res.method, "-"), lw=1.2,
                        label=f"{res.method} fit")
            ax.set_title(f"{name}: {label}")
            ax.set_xlabel("t [s]")
            ax.set_ylabel(f"{label} [m]")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path


def plot_residuals(ident: Identification, path: Path) -> Path:
    """Per-frame misfit ‖p_fit − p̃‖ of each method [m] (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for res in ident.results:
        err = np.linalg.norm(res.positions - ident.observed, axis=2).max(axis=1)
        ax.semilogy(ident.time, np.maximum(err, 1e-16), label=res.method)
    ax.set_xlabel("t [s]")
    ax.set_ylabel("max over bodies ‖fit − data‖ [m]")
    ax.legend()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    return path


def markdown(ident: Identification, figures: list[str]) -> str:
    """The report text."""
    T = ident.observed.shape[0]
    n_obs = ident.observed.size
    intro = (f"Trajectory `{ident.source}`: {T} frames, dt = {ident.model.time_step:g} s, moving bodies "
             f"{', '.join(ident.body_names)}; material pairs in contact: "
             f"{', '.join('/'.join(p) for p in ident.pairs)}. Data: COM positions ({n_obs} numbers).")
    header = ("| method | parameter | estimate | std | initial | objective Σ‖p − p̃‖² [m²] | RMS misfit [m] "
              "| evaluations |")
    first = [ident.verdict.first_line(), ""] if ident.verdict is not None else []
    lines = first + [f"# Identification: {ident.model.name}", "", intro, "", header,
             "|---|---|---|---|---|---|---|---|"]
    for res in ident.results:
        rms = np.sqrt(res.objective / n_obs)
        for e in res.estimates:
            lines.append(f"| {res.method} | {e.parameter} | {e.value:.6g} | {e.std:.2g} | {e.initial:.4g} | "
                         f"{res.objective:.4g} | {rms:.3g} | {res.evaluations} |")
    legend = ("std: Gauss–Newton standard deviation s²(JᵀJ)⁻¹, s² = objective/(observations − unknowns). "
              "mpec: Berard–Trinkle MPEC on the rigid LCP, solved by implicit programming (one LCP per step); "
              "sap: least squares on SAP rollouts (docs/identify.md).")
    lines += ["", legend, ""]
    for res in ident.results:
        if res.method == "mpec":
            lines.append(f"MPEC constraint violation at the end: {res.violation:.2g} m/s.")
        for n in res.notes:
            lines.append(f"- {res.method}: {n}")
    lines.append("")
    for f in figures:
        lines.append(f"![{f}]({f})")
    return "\n".join(lines) + "\n"


def write_report(ident: Identification, out_dir: str | Path) -> Path:
    """Write report.md, fit.png, residuals.png and estimates.csv into ``out_dir`` (each atomically)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = [plot_fit(ident, out / "fit.png").name, plot_residuals(ident, out / "residuals.png").name]
    rows = ["method,parameter,estimate,std,initial,objective,evaluations"]
    for res in ident.results:
        for e in res.estimates:
            rows.append(f"{res.method},{e.parameter},{e.value!r},{e.std!r},{e.initial!r},{res.objective!r},"
                        f"{res.evaluations}")
    atomic_write_text(out / "estimates.csv", "\n".join(rows) + "\n")
    path = out / "report.md"
    atomic_write_text(path, markdown(ident, figs))
    return path


__all__ = ["markdown", "plot_fit", "plot_residuals", "write_report"]
