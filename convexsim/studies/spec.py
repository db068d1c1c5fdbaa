"""Study specs: a base scene, swept parameters, repetitions and the metrics to compute.

A study file is YAML validated by pydantic (``extra="forbid"``); errors name the file and the field
path (``parameters[1].range.count``), like scene files. Example::

    name: rest_penetration_vs_stiffness
    scene: ../sphere_drop.yaml          # path (relative to this file), shipped scene name, or a mapping
    duration: 0.5                       # [s], optional override of the scene's
    fixed: {solver.beta: 1.0}           # dotted overrides applied to every run
    parameters:
      - path: materials.default.stiffness
        range: {start: 1.0e3, stop: 1.0e8, count: 11, scale: log}
      - path: contact_model
        values: [sap, lagged]
    combine: grid                       # grid (Cartesian product) | zip (element-wise)
    repetitions: 1
    metrics: [rest_penetration, newton_iterations_mean]
    reduced:                            # what ``--reduced`` (tests, demos) runs instead
      duration: 0.3
      parameters: {materials.default.stiffness: {values: [1.0e3, 1.0e4, 1.0e5]}}

``expand_runs(spec)`` turns a spec into ``RunTask`` objects, each keyed by a hash of its resolved
parameters (``run_id``), which is what resuming a study relies on.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from convexsim.errors import InputError
from convexsim.studies.metrics import METRICS, PAIR_METRICS

RUN_KWARG_PATHS = {"time_step": "time_step", "duration": "duration", "contact_model": "contact_model",
                   "solver.kind": "solver"}
"""Dotted paths passed to ``simulate`` as keyword arguments instead of scene overrides."""


class _Yaml12Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e3`` and ``1.0e5`` as floats (YAML 1.2; PyYAML 1.1 reads them as strings)."""


_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                    |\.[0-9_]+(?:[eE][-+][0-9]+)?
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))


def read_yaml(text: str) -> Any:
    """Parse YAML text, reading exponent notation without a dot (``1e3``) as a float."""
    return yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506 - a SafeLoader subclass


class StudyError(InputError):
    """A study file is malformed; the message names the file, the field path and what is allowed."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Range(_Strict):
    """Evenly spaced values from ``start`` to ``stop`` inclusive (lin) or evenly in log10 (log)."""

    start: float = Field(description="first value (> 0 for log)")
    stop: float = Field(description="last value (> 0 for log)")
    count: int = Field(ge=2, description="number of values, >= 2")
    scale: Literal["lin", "log"] = Field("lin", description="lin | log spacing")

    @model_validator(mode="after")
    def _check(self) -> "Range":
        if not (math.isfinite(self.start) and math.isfinite(self.stop)):
            raise ValueError(f"start and stop must be finite, got {self.start}, {self.stop}")
        if self.scale == "log" and (self.start <= 0 or self.stop <= 0):
            raise ValueError(f"a log range needs start > 0 and stop > 0, got {self.start}, {self.stop}")
        return self

    def values(self) -> list[float]:
        """The values, rounded to 12 significant digits so that run hashes are stable."""
        if self.scale == "log":
            raw = np.logspace(math.log10(self.start), math.log10(self.stop), self.count)
        else:
            raw = np.linspace(self.start, self.stop, self.count)
        return [_round_sig(float(x)) for x in raw]


class ValueSet(_Strict):
    """Either an explicit list of ``values`` or a ``range`` (exactly one)."""

    values: list[Any] | None = Field(None, description="explicit values (numbers or strings)")
    range: Range | None = Field(None, description="a lin/log range")

    @model_validator(mode="after")
    def _one_of(self) -> "ValueSet":
        if (self.values is None) == (self.range is None):
            raise ValueError("give exactly one of 'values' or 'range'")
        if self.values is not None:
            if len(self.values) == 0:
                raise ValueError("'values' must not be empty")
            for i, v in enumerate(self.values):
                items = v if isinstance(v, list) else [v]
                for x in items:
                    if isinstance(x, float) and not math.isfinite(x):
                        raise ValueError(f"values[{i}] must be finite, got {v}")
                    if isinstance(x, (dict, list)) or x is None:
                        raise ValueError(f"values[{i}] must be a number, string, bool or a list of numbers "
                                         f"(a vector), got {v!r}")
        vals = self.resolved()
        seen: dict[Any, int] = {}
        for i, v in enumerate(vals):
            key = _value_key(v)
            if key in seen:
                where = "range" if self.range is not None else f"values[{i}]"
                raise ValueError(f"{where}: value {v!r} is swept twice (same as values[{seen[key]}]); every swept "
                                 f"value must be distinct (duplicates would give two runs with the same run_id)")
            seen[key] = i
        return self

    def resolved(self) -> list[Any]:
        """The concrete values."""
        if self.range is not None:
            return self.range.values()
        return [_round_sig(v) if isinstance(v, float) else v for v in self.values]

    @property
    def is_numeric(self) -> bool:
        """True when every value is a number (not a bool, string or vector)."""
        return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in self.resolved())

    @property
    def is_log(self) -> bool:
        """True when the values are log-spaced (plots use a log axis)."""
        if self.range is not None:
            return self.range.scale == "log"
        nums = [v for v in self.values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return len(nums) == len(self.values) and len(nums) >= 3 and min(nums) > 0 and max(nums) / min(nums) >= 100


class Parameter(ValueSet):
    """One swept parameter: a dotted scene path and its values."""

    path: str = Field(min_length=1, description="dotted path, e.g. materials.default.stiffness, solver.sigma, "
                                                "time_step, contact_model, solver.kind")
    label: str | None = Field(None, description="axis label for plots (default: the path)")

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if any(part == "" for part in v.split(".")) or v.strip() != v:
            raise ValueError(f"not a dotted path: {v!r}")
        return v


class MetricOptions(_Strict):
    """Options shared by the metrics (see docs/studies.md)."""

    body: str | None = Field(None, description="body the body metrics look at (default: first moving body)")
    window: float = Field(0.25, gt=0.0, le=1.0, description="final fraction of the run averaged by rest metrics")
    stop_speed: float = Field(1e-3, gt=0.0, description="tangential speed below which a body counts as stopped "
                                                        "[m/s]")


class Reduced(_Strict):
    """A smaller version of the study (``--reduced``): tests and demos."""

    duration: float | None = Field(None, gt=0.0, description="simulated time per run [s]")
    repetitions: int | None = Field(None, ge=1, description="repetitions per parameter point")
    parameters: dict[str, ValueSet] = Field(default_factory=dict,
                                            description="replacement values keyed by parameter path")


class Trend(_Strict):
    """One expected trend, checked against the study's data in the report (docs/studies.md, "Verdict").

    The rows with status ok whose swept values equal ``where`` are split into series by the other swept
    parameters (each series must meet the trend); within ``range`` of ``against`` the metric, averaged per
    value of ``against``, must show:

    * ``slope``: the least-squares slope (``fit`` loglog: d log y / d log x; semilogx: d y / d log10 x;
      linear: d y / d x) within ``value ± tol``, or between ``min`` and ``max``;
    * ``plateau``: max / min <= ``max_ratio`` (and, with ``value``, the mean within ``tol`` relative);
    * ``above`` / ``below``: every value above / below ``value``.
    """

    metric: str = Field(description="a metric of the study")
    against: str = Field(description="a swept parameter path (the x axis)")
    kind: Literal["slope", "plateau", "above", "below"] = Field(description="what is checked")
    where: dict[str, Any] = Field(default_factory=dict, description="keep rows with these swept values")
    range: list[float] | None = Field(None, min_length=2, max_length=2,
                                      description="[low, high] of `against` (inclusive; default: all)")
    fit: Literal["loglog", "semilogx", "linear"] = Field("loglog", description="axes of the slope fit")
    value: float | None = Field(None, description="expected slope, plateau level or threshold")
    tol: float | None = Field(None, ge=0.0, description="slope: absolute; plateau level: relative")
    min: float | None = Field(None, description="slope: lower bound")
    max: float | None = Field(None, description="slope: upper bound")
    max_ratio: float = Field(1.5, ge=1.0, description="plateau: largest max / min over the range")
    label: str | None = Field(None, description="the trend in words (default: generated)")

    @model_validator(mode="after")
    def _check(self) -> "Trend":
        if self.kind == "slope" and self.value is None and self.min is None and self.max is None:
            raise ValueError("a slope trend needs value (with tol) or min / max")
        if self.kind == "slope" and self.value is not None and self.tol is None:
            raise ValueError("a slope trend with a value needs tol")
        if self.kind in ("above", "below") and self.value is None:
            raise ValueError(f"an {self.kind!r} trend needs value")
        if self.kind == "plateau" and self.value is not None and self.tol is None:
            raise ValueError("a plateau trend with a value (level) needs tol")
        if self.range is not None and not self.range[0] <= self.range[1]:
            raise ValueError(f"range must be [low, high], got {self.range}")
        return self


class StudySpec(_Strict):
    """A parameter study (see the module docstring for an example)."""

    name: str = Field(min_length=1, description="study name (used for the output folder)")
    description: str = Field("", description="what the study shows")
    expected: str = Field("", description="the expected trend, stated up front")
    trends: list[Trend] = Field(default_factory=list, description="the expected trend in checkable form")
    scene: str | dict[str, Any] = Field(description="base scene: path (relative to the study file), shipped "
                                                    "scene name, or an inline scene mapping")
    duration: float | None = Field(None, gt=0.0, description="simulated time per run [s] (default: the scene's)")
    time_step: float | None = Field(None, gt=0.0, description="dt [s] (default: the scene's)")
    record_every: int = Field(1, ge=1, description="record one frame every N steps")
    fixed: dict[str, Any] = Field(default_factory=dict, description="dotted overrides applied to every run")
    parameters: list[Parameter] = Field(min_length=1, description="swept parameters")
    combine: Literal["grid", "zip"] = Field("grid", description="grid: Cartesian product; zip: element-wise")
    repetitions: int = Field(1, ge=1, description="runs per parameter point")
    seed: int = Field(0, ge=0, description="seed of repetition 0; repetition r uses seed + r")
    seed_path: str | None = Field(None, description="dotted scene path that receives each run's seed "
                                                    "(e.g. grids.pile.jitter.seed)")
    metrics: list[str] = Field(min_length=1, description="metric names (docs/studies.md)")
    metric_options: MetricOptions = Field(default_factory=MetricOptions)
    reduced: Reduced | None = Field(None, description="smaller version for tests and demos")
    source: str | None = Field(None, exclude=True, description="(internal) file the spec was read from")

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, names: list[str]) -> list[str]:
        known = set(METRICS) | set(PAIR_METRICS)
        for n in names:
            if n not in known:
                raise ValueError(f"unknown metric {n!r}; known metrics: {', '.join(sorted(known))}")
        if len(set(names)) != len(names):
            raise ValueError("metrics are listed more than once")
        return names

    @model_validator(mode="after")
    def _check(self) -> "StudySpec":
        paths = [p.path for p in self.parameters]
        dup = {p for p in paths if paths.count(p) > 1}
        if dup:
            raise ValueError(f"parameters: path(s) {sorted(dup)} swept more than once")
        if self.combine == "zip":
            lens = {p.path: len(p.resolved()) for p in self.parameters}
            if len(set(lens.values())) > 1:
                raise ValueError(f"combine: zip needs parameters of equal length, got {lens}")
        if self.reduced is not None:
            unknown = sorted(set(self.reduced.parameters) - set(paths))
            if unknown:
                raise ValueError(f"reduced.parameters: {unknown} are not swept parameters {paths}")
            if self.combine == "zip":
                lens = {p.path: len((self.reduced.parameters.get(p.path) or p).resolved()) for p in self.parameters}
                if len(set(lens.values())) > 1:
                    raise ValueError(f"reduced.parameters: combine: zip needs the reduced parameters to have equal "
                                     f"lengths, got {lens}")
        for i, t in enumerate(self.trends):
            if t.metric not in self.metrics:
                raise ValueError(f"trends[{i}].metric: {t.metric!r} is not among the study's metrics {self.metrics}")
            if t.against not in paths:
                raise ValueError(f"trends[{i}].against: {t.against!r} is not a swept parameter {paths}")
            bad = sorted(set(t.where) - set(paths))
            if bad:
                raise ValueError(f"trends[{i}].where: {bad} are not swept parameters {paths}")
        if any(m in PAIR_METRICS for m in self.metrics) and "solver.kind" not in paths:
            raise ValueError("metrics: the sap_lcp_* metrics need 'solver.kind' among the swept parameters")
        return self

    @property
    def swept_paths(self) -> list[str]:
        """The swept parameter paths, in order."""
        return [p.path for p in self.parameters]

    def parameter(self, path: str) -> Parameter:
        """The swept parameter with this path."""
        for p in self.parameters:
            if p.path == path:
                return p
        raise KeyError(path)


def _value_key(v: Any) -> Any:
    """A hashable key under which equal swept values (1000 and 1.0e3, [0, 1] and [0.0, 1.0]) coincide."""
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, (int, float)):
        return ("num", float(v))
    if isinstance(v, list):
        return ("vec", tuple(_value_key(x) for x in v))
    return (type(v).__name__, v)


def _round_sig(x: float, digits: int = 12) -> float:
    return float(f"{x:.{digits}g}") if math.isfinite(x) else x


def _loc_to_path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "function-before") or str(part).startswith(("function-", "union[")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def format_validation_error(exc: ValidationError, source: str) -> list[str]:
    """One message per problem: ``source: field.path: what is wrong (got value)``."""
    msgs = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if p not in ("str", "dict[str,any]"))
        path = _loc_to_path(loc)
        msg = err["msg"].removeprefix("Value error, ")
        got = err.get("input")
        tail = "" if err["type"] in ("missing",) or isinstance(got, (dict, list)) else f" (got {got!r})"
        msgs.append(f"{source}: {path}: {msg}{tail}")
    return msgs


def study_from_dict(data: Any, *, source: str = "<study>", base_dir: str | os.PathLike | None = None) -> StudySpec:
    """Validate a study mapping; raise StudyError naming the field path of every problem."""
    if not isinstance(data, dict):
        raise StudyError(f"{source}: a study file must be a mapping at the top level, got {type(data).__name__}")
    try:
        spec = StudySpec.model_validate(data)
    except ValidationError as exc:
        raise StudyError("\n".join(format_validation_error(exc, source))) from None
    spec.source = str(source)
    if isinstance(spec.scene, str):
        spec.scene = str(_resolve_scene_path(spec.scene, base_dir, source))
    _check_against_scene(spec, source)
    return spec


def load_study(path: str | os.PathLike) -> StudySpec:
    """Read and validate a study file (YAML); raise StudyError (file, field path, value) if malformed."""
    path = Path(path)
    if not path.is_file():
        raise StudyError(f"study file not found: {path}")
    try:
        data = read_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise StudyError(f"{path}:{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    return study_from_dict(data, source=str(path), base_dir=path.parent)


def study_header(path: str | os.PathLike) -> str:
    """The leading comment block of a study file (its statement of the expected trend)."""
    lines = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].strip())
    return "\n".join(lines).strip()


def _resolve_scene_path(ref: str, base_dir: str | os.PathLike | None, source: str) -> Path:
    candidates = []
    if base_dir is not None:
        candidates.append(Path(base_dir) / ref)
    candidates.append(Path(ref))
    for c in candidates:
        if c.is_file():
            return c.resolve()
    try:
        from convexsim.scene import shipped_scene_path

        return Path(shipped_scene_path(ref)).resolve()
    except Exception:  # noqa: BLE001 - any lookup failure becomes the field error below
        pass
    raise StudyError(f"{source}: scene: no scene file or shipped scene named {ref!r} "
                     f"(looked in {', '.join(str(c) for c in candidates)} and scenes/)")


def base_scene_dict(spec: StudySpec) -> dict[str, Any]:
    """The base scene as a plain mapping (inline, or read from the referenced YAML file)."""
    if isinstance(spec.scene, dict):
        return copy.deepcopy(spec.scene)
    return read_yaml(Path(spec.scene).read_text(encoding="utf-8"))


def _check_against_scene(spec: StudySpec, source: str) -> None:
    """Check the base scene, every swept value (full and reduced) and ``metric_options.body`` before any run.

    Typos in paths, values the scene rejects and a metric body that is not in the scene fail at load time,
    naming the field (``parameters[1] (path=value)``, ``reduced.parameters.<path> (path=value)``,
    ``metric_options.body``).
    """
    try:
        from convexsim.scene import apply_overrides, expand_bodies, scene_from_dict
    except ImportError:  # the scene layer is not there: checked at run time instead
        return
    base = base_scene_dict(spec)

    def build(where: str, over: dict[str, Any]):
        prefix = f"{source}: {where}"
        try:
            data = apply_overrides(copy.deepcopy(base), over) if over else copy.deepcopy(base)
            return scene_from_dict(data, source=prefix)
        except Exception as exc:  # noqa: BLE001
            text = str(exc).strip()
            # The scene layer usually names the source itself; never print the prefix twice.
            raise StudyError(text if text.startswith(prefix) else f"{prefix}: {text}") from None

    try:
        scene_from_dict(copy.deepcopy(base), source=f"{source}: scene")
    except Exception as exc:  # noqa: BLE001
        raise StudyError(f"{source}: scene: the base scene is invalid:\n{exc}") from None
    fixed_scene = build("fixed", dict(spec.fixed))
    for i, p in enumerate(spec.parameters):
        for v in p.resolved():
            build(f"parameters[{i}] ({p.path}={v!r})", {**spec.fixed, p.path: v})
    if spec.reduced is not None:
        for path, vs in spec.reduced.parameters.items():
            for v in vs.resolved():
                build(f"reduced.parameters.{path} ({path}={v!r})", {**spec.fixed, path: v})
    if spec.seed_path:
        build("seed_path", {**spec.fixed, spec.seed_path: spec.seed})
    body = spec.metric_options.body
    if body is not None:
        names = [b.name for b in expand_bodies(fixed_scene)]
        if body not in names:
            raise StudyError(f"{source}: metric_options.body: no body named {body!r} in the scene; bodies: "
                             f"{', '.join(map(str, names))}")


def reduce_spec(spec: StudySpec) -> StudySpec:
    """The spec with its ``reduced`` block applied (unchanged if it has none)."""
    if spec.reduced is None:
        return spec
    red = spec.reduced
    params = []
    for p in spec.parameters:
        repl = red.parameters.get(p.path)
        if repl is None:
            params.append(p)
        else:
            params.append(p.model_copy(update={"values": repl.values, "range": repl.range}))
    update: dict[str, Any] = {"parameters": params, "reduced": None}
    if red.duration is not None:
        update["duration"] = red.duration
    if red.repetitions is not None:
        update["repetitions"] = red.repetitions
    out = spec.model_copy(update=update)
    out.source = spec.source
    return out


@dataclass
class RunTask:
    """One simulation of a study: everything a worker needs (picklable, no open files).

    Attributes:
        index: position in the expanded study (rows of the CSV are sorted by it).
        run_id: hash of the resolved run parameters (scene, overrides, run settings, seed, repetition).
        params: swept parameter values keyed by path.
        repetition: repetition number r (0-based).
        seed: seed of this run (spec.seed + r).
        scene: the base scene mapping.
        overrides: dotted scene overrides (fixed, then swept, then the seed).
        run_kwargs: keyword arguments of ``simulate`` (duration, time_step, contact_model, solver).
        record_every: frames recorded every N steps.
        metrics: metric names to compute.
        metric_options: MetricOptions as a dict.
        fingerprint: hash of everything that determines the run's record: the run's resolved inputs
            (as in ``run_id``), the per-run metric names, ``metric_options`` and the convexsim version. A
            stored record with another fingerprint is stale and the run is executed again.
    """

    index: int
    run_id: str
    params: dict[str, Any]
    repetition: int
    seed: int
    scene: dict[str, Any]
    overrides: dict[str, Any]
    run_kwargs: dict[str, Any]
    record_every: int = 1
    metrics: list[str] = field(default_factory=list)
    metric_options: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""


@functools.lru_cache(maxsize=1)
def _software_version() -> str:
    """convexsim's version plus a hash of its Python sources (so any code change, not only a version bump,
    makes stored results stale), e.g. ``0.1.0+src.3f9a1c2b4d5e``."""
    import convexsim

    root = Path(convexsim.__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode())
        h.update(f.read_bytes())
    return f"{getattr(convexsim, '__version__', '?')}+src.{h.hexdigest()[:12]}"


def run_fingerprint(run_payload: dict[str, Any], metrics: list[str], metric_options: dict[str, Any]) -> str:
    """Hash of a run's resolved inputs, its per-run metrics (sorted), the metric options and the convexsim version.

    Pair metrics (``sap_lcp_*``) are left out: they are computed from the stored position samples when
    the table is built, not by the run.
    """
    return run_hash({"run": run_payload, "metrics": sorted(m for m in metrics if m in METRICS),
                     "metric_options": metric_options, "convexsim": _software_version()})


def parameter_points(spec: StudySpec) -> list[dict[str, Any]]:
    """The parameter combinations: grid = Cartesian product (last parameter fastest), zip = element-wise."""
    value_lists = [p.resolved() for p in spec.parameters]
    paths = spec.swept_paths
    combos = zip(*value_lists) if spec.combine == "zip" else itertools.product(*value_lists)
    return [dict(zip(paths, c)) for c in combos]


def run_hash(payload: dict[str, Any]) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of ``payload``."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def expand_runs(spec: StudySpec) -> list[RunTask]:
    """All runs of the study, in a deterministic order (points, then repetitions)."""
    base = base_scene_dict(spec)
    tasks: list[RunTask] = []
    for point in parameter_points(spec):
        for rep in range(spec.repetitions):
            seed = spec.seed + rep
            settings: dict[str, Any] = {}
            if spec.duration is not None:
                settings["duration"] = spec.duration
            if spec.time_step is not None:
                settings["time_step"] = spec.time_step
            settings.update(spec.fixed)
            settings.update(point)
            if spec.seed_path:
                settings[spec.seed_path] = seed
            kwargs = {RUN_KWARG_PATHS[k]: v for k, v in settings.items() if k in RUN_KWARG_PATHS}
            overrides = {k: v for k, v in settings.items() if k not in RUN_KWARG_PATHS}
            payload = {"scene": base, "overrides": overrides, "kwargs": kwargs, "seed": seed, "repetition": rep,
                       "record_every": spec.record_every}
            run_id = run_hash(payload)
            options = spec.metric_options.model_dump()
            tasks.append(RunTask(index=len(tasks), run_id=run_id, params=dict(point), repetition=rep, seed=seed,
                                 scene=base, overrides=overrides, run_kwargs=kwargs,
                                 record_every=spec.record_every, metrics=list(spec.metrics),
                                 metric_options=options,
                                 fingerprint=run_fingerprint(payload, list(spec.metrics), options)))
    return tasks


__all__ = ["StudySpec", "StudyError", "Trend", "Parameter", "Range", "ValueSet", "MetricOptions", "Reduced", "RunTask",
           "load_study", "study_from_dict", "study_header", "reduce_spec", "expand_runs", "parameter_points",
           "base_scene_dict", "run_hash", "run_fingerprint", "RUN_KWARG_PATHS"]
