"""Training data for the hybrid-dynamics learner: simulated trajectories with ground-truth modes.

Two systems, unit mass by default, SI units, g = 9.81 m/s²:

* **sliding block (1D)**: velocity ``v`` [m/s] on a rough floor, applied force ``u`` [N], Coulomb
  friction μ, implicit Euler. With ``a = v_k + Δt u/m`` the step is the soft threshold

      v_{k+1} = sign(a)·max(|a| − Δtμg, 0)

  Modes: 0 stick (``v_{k+1} = 0``), 1 slide+ (``v_{k+1} > 0``), 2 slide− (``v_{k+1} < 0``).
  Samples: ``X = (v_k, u_k)``, ``Y = v_{k+1}``. Two ways to compute a step:
  ``"direct"`` (the closed form above) and ``"lcp"`` (Lemke on the Stewart–Trinkle friction LCP
  of the block, :func:`block_lcp`).
* **particle (2D)**: state ``(x, y, ẋ, ẏ)`` [m, m, m/s, m/s] over the floor y ≥ 0, applied force
  ``(u_x, u_y)`` [N] plus gravity, Coulomb friction with the two directions ±x, position-level
  non-penetration (Stewart–Trinkle; the Berard–Trinkle particle with a vertical force),
  solved by Lemke on the 4×4 LCP of :func:`particle_lcp`.
  Modes: 0 flight (no normal force), 1 stick, 2 slide+, 3 slide−.
  Samples: ``X = (x, y, ẋ, ẏ, u_x, u_y)``, ``Y`` = the next state.

Excitation: random piecewise-constant forces, each value held for ``hold`` steps.

A data file (npz, written atomically) holds ``X`` (N, d_x), ``Y`` (N, d_y), ``modes`` (N,) int,
``episode`` (N,) int (samples of one episode are consecutive steps), ``mode_names``,
``input_names``, ``output_names``, ``gate_columns`` (the inputs the gate sees) and the scalars
``system``, ``formulation``, ``dt``, ``mu``, ``g``, ``mass``, ``seed``, ``schema``. The first d_y
columns of ``X`` are the state, the rest the applied force, and ``Y`` is the next state, so a model
can be rolled out (docs/learn.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from convexsim.errors import InputError
from convexsim.io.atomic import atomic_path
from convexsim.lcp.lemke import LemkeStatus, lemke

G = 9.81
"""Gravity [m/s²]."""

SCHEMA = 1
"""Version of the learning data file layout."""

BLOCK_MODES = ("stick", "slide+", "slide-")
PARTICLE_MODES = ("flight", "stick", "slide+", "slide-")


class LearnDataError(InputError):
    """A data file is missing fields or is inconsistent, or a simulated step failed."""


@dataclass
class LearnData:
    """Samples of one-step transitions with ground-truth modes (see the module docstring).

    Attributes:
        X: inputs (state, applied force), shape (N, d_x).
        Y: next state, shape (N, d_y); d_y ≤ d_x and ``X[:, :d_y]`` is the current state.
        modes: ground-truth mode index per sample, shape (N,).
        episode: episode index per sample (consecutive steps within an episode), shape (N,).
        mode_names, input_names, output_names: labels.
        gate_columns: indices of the inputs the gate sees (the particle's x is left out: the
            dynamics do not depend on it).
        meta: system, formulation, dt [s], mu, g [m/s²], mass [kg], seed.
    """

    X: np.ndarray
    Y: np.ndarray
    modes: np.ndarray
    episode: np.ndarray
    mode_names: tuple
    input_names: tuple
    output_names: tuple
    gate_columns: np.ndarray
    meta: dict = field(default_factory=dict)

    @property
    def state_dim(self) -> int:
        return self.Y.shape[1]

    def episodes(self) -> list[np.ndarray]:
        """Sample indices of each episode, in step order."""
        return [np.flatnonzero(self.episode == e) for e in np.unique(self.episode)]

    def select(self, mask) -> LearnData:
        """The samples where ``mask`` (bool (N,) or indices) holds."""
        return LearnData(
            self.X[mask],
            self.Y[mask],
            self.modes[mask],
            self.episode[mask],
            self.mode_names,
            self.input_names,
            self.output_names,
            self.gate_columns,
            dict(self.meta),
        )

    def split_episodes(self, test_fraction: float) -> tuple[LearnData, LearnData]:
        """(train, test): the last ``ceil(test_fraction·E)`` of the E episodes are the test set.

        With a single episode the last ``test_fraction`` of its steps are the test set.
        """
        if not 0.0 < test_fraction < 1.0:
            raise InputError(f"test fraction must be in (0, 1); got {test_fraction}")
        ids = np.unique(self.episode)
        if len(ids) >= 2:
            n_test = min(len(ids) - 1, max(1, int(np.ceil(test_fraction * len(ids)))))
            test = np.isin(self.episode, ids[-n_test:])
        else:
            n = len(self.modes)
            test = np.arange(n) >= n - max(1, int(round(test_fraction * n)))
        return self.select(~test), self.select(test)


# ------------------------------------------------------------------------------------ 1D block
def block_step_direct(v: float, u: float, dt: float, mu: float, g: float = G, mass: float = 1.0):
    """(v_{k+1} [m/s], mode) of the implicit-Euler Coulomb block: the soft threshold of a = v + Δtu/m."""
    a = v + dt * u / mass
    thr = dt * mu * g
    if abs(a) <= thr:
        return 0.0, 0
    return (a - thr, 1) if a > 0 else (a + thr, 2)


def block_lcp(v: float, u: float, dt: float, mu: float, g: float = G, mass: float = 1.0):
    """(M, q) of the block's Stewart–Trinkle friction LCP, normal force mg known.

    z = (λ⁺, λ⁻, γ): friction forces along +x and −x [N] and the sliding speed γ [m/s];
    ``M = [[Δt/m, −Δt/m, 1], [−Δt/m, Δt/m, 1], [−1, −1, 0]]``, ``q = (v + Δtu/m, −v − Δtu/m, μmg)``,
    so w = (v_{k+1} + γ, −v_{k+1} + γ, μmg − λ⁺ − λ⁻) with ``v_{k+1} = v + Δt(u + λ⁺ − λ⁻)/m``.
    M is positive semidefinite, so Lemke solves it; v_{k+1} is unique (λ± need not be).
    """
    c = dt / mass
    M = np.array([[c, -c, 1.0], [-c, c, 1.0], [-1.0, -1.0, 0.0]])
    a = v + c * u
    return M, np.array([a, -a, mu * mass * g])


def _lemke_or_raise(M, q, what: str):
    r = lemke(M, q)
    if r.status != LemkeStatus.SOLVED:
        raise LearnDataError(f"{what}: Lemke ended with {r.status.name} (q = {q.tolist()})")
    return r


def block_step_lcp(
    v: float, u: float, dt: float, mu: float, g: float = G, mass: float = 1.0, stick_tol: float = 1e-12
):
    """(v_{k+1} [m/s], mode) from Lemke on :func:`block_lcp`; stick when |v_{k+1}| ≤ stick_tol [m/s].

    The stick tolerance only absorbs the round-off of ``v + Δt(u + λ⁺ − λ⁻)/m`` (≈ 1e-17 m/s here).
    """
    M, q = block_lcp(v, u, dt, mu, g, mass)
    lp, lm, _ = _lemke_or_raise(M, q, f"block step (v={v}, u={u})").z
    v1 = v + dt * (u + lp - lm) / mass
    if abs(v1) <= stick_tol:
        return v1, 0
    return v1, (1 if v1 > 0 else 2)


def piecewise_constant(rng: np.random.Generator, steps: int, hold: int, low, high) -> np.ndarray:
    """Random forces held for ``hold`` steps: shape (steps, len(low)), uniform on [low, high]."""
    low, high = np.atleast_1d(np.asarray(low, float)), np.atleast_1d(np.asarray(high, float))
    n_holds = -(-steps // hold)
    values = rng.uniform(low, high, size=(n_holds, len(low)))
    return np.repeat(values, hold, axis=0)[:steps]


def block_rollout(
    v0: float, U, dt: float, mu: float, g: float = G, mass: float = 1.0, formulation: str = "direct"
):
    """Simulate the block from v0 under the forces U (T,): (velocities (T+1,), modes (T,))."""
    step = {"direct": block_step_direct, "lcp": block_step_lcp}.get(formulation)
    if step is None:
        raise InputError(f"block formulation must be 'direct' or 'lcp'; got {formulation!r}")
    U = np.asarray(U, float).reshape(-1)
    v = np.empty(len(U) + 1)
    modes = np.empty(len(U), np.int64)
    v[0] = v0
    for k, u in enumerate(U):
        v[k + 1], modes[k] = step(float(v[k]), float(u), dt, mu, g, mass)
    return v, modes


def make_block_data(*, episodes: int = 9, steps: int = 1000, seed: int = 0, dt: float = 0.01, mu: float = 0.3,
                    g: float = G, mass: float = 1.0, u_max: float = 6.0, hold: int = 25,
                    formulation: str = "direct") -> LearnData:
    """Sliding-block data: ``episodes`` runs of ``steps`` steps from rest, u uniform on [−u_max, u_max] N.

    With the defaults (μg = 2.943 N) about a third of the samples stick.
    """
    _check_sizes(episodes, steps, hold)
    rng = np.random.default_rng(seed)
    X, Y, modes, ep = [], [], [], []
    for e in range(episodes):
        U = piecewise_constant(rng, steps, hold, -u_max, u_max)[:, 0]
        v, m = block_rollout(0.0, U, dt, mu, g, mass, formulation)
        X.append(np.column_stack([v[:-1], U]))
        Y.append(v[1:, None])
        modes.append(m)
        ep.append(np.full(steps, e))
    meta = dict(
        system="block",
        formulation=formulation,
        dt=dt,
        mu=mu,
        g=g,
        mass=mass,
        seed=seed,
        u_max=u_max,
        hold=hold,
    )
    return LearnData(
        np.concatenate(X),
        np.concatenate(Y),
        np.concatenate(modes),
        np.concatenate(ep),
        BLOCK_MODES,
        ("v", "u"),
        ("v_next",),
        np.array([0, 1]),
        meta,
    )


# ------------------------------------------------------------------------------------ 2D particle
def particle_lcp(state, u, h: float, mu: float, g: float = G, mass: float = 1.0):
    """(A, q) of one particle step over the floor y ≥ 0 (Stewart–Trinkle, position-level normal row).

    state = (x, y, ẋ, ẏ), u = (u_x, u_y) [N]; z = (λ_n, λ_f1, λ_f2, σ): normal force, friction
    forces along −x and +x [N] (impulses hλ), sliding-speed multiplier σ [m/s];
    ``A = [[h²/m, 0, 0, 0], [0, h/m, −h/m, 1], [0, −h/m, h/m, 1], [μ, −1, −1, 0]]``,
    ``q = (y + hẏ + h²(u_y/m − g), −ẋ − (h/m)u_x, ẋ + (h/m)u_x, 0)``.
    With u_y = 0 this is the Berard–Trinkle particle LCP (applied force u_x).
    """
    _, y, xd, yd = state
    ux, uy = u
    c = h / mass
    A = np.array([[h * c, 0.0, 0.0, 0.0], [0.0, c, -c, 1.0], [0.0, -c, c, 1.0], [mu, -1.0, -1.0, 0.0]])
    q = np.array([y + h * yd + h * h * (uy / mass - g), -xd - c * ux, xd + c * ux, 0.0])
    return A, q


def particle_step(state, u, h: float, mu: float, g: float = G, mass: float = 1.0, tol: float = 1e-9):
    """(next state (4,), mode, forces (λ_n, λ_f1, λ_f2, σ)) by Lemke on :func:`particle_lcp`.

    ẋ⁺ = ẋ + (h/m)(u_x − λ_f1 + λ_f2), ẏ⁺ = ẏ + (h/m)(u_y + λ_n − mg), (x, y)⁺ = (x, y) + h(ẋ⁺, ẏ⁺).
    Mode: flight if λ_n ≤ tol·mg, else stick if |ẋ⁺| ≤ tol·hg, else slide± by the sign of ẋ⁺.
    """
    A, q = particle_lcp(state, u, h, mu, g, mass)
    r = _lemke_or_raise(A, q, f"particle step (state={list(state)}, u={list(u)})")
    ln, lf1, lf2, _ = r.z
    x, y, xd, yd = state
    c = h / mass
    xd1 = xd + c * (u[0] - lf1 + lf2)
    yd1 = yd + c * (u[1] + ln - mass * g)
    if ln <= tol * mass * g:
        mode = 0
    elif abs(xd1) <= tol * h * g:
        mode = 1
    else:
        mode = 2 if xd1 > 0 else 3
    return np.array([x + h * xd1, y + h * yd1, xd1, yd1]), mode, r.z.copy()


def particle_step_closed_form(state, u, h: float, mu: float, g: float = G, mass: float = 1.0):
    """(next state, mode) of the same step in closed form (reference for :func:`particle_step`).

    Free flight when the predicted height ``y + hẏ + h²(u_y/m − g)`` is ≥ 0; otherwise the normal
    force lands the particle exactly on the floor, ``λ_n = m(g − u_y/m) − m(y + hẏ)/h²``, and the
    tangential velocity is the soft threshold of ``ẋ + hu_x/m`` by ``hμλ_n/m``.
    """
    x, y, xd, yd = state
    c = h / mass
    pred = y + h * yd + h * h * (u[1] / mass - g)
    if pred >= 0.0:
        xd1, yd1, mode = xd + c * u[0], yd + c * (u[1] - mass * g), 0
    else:
        ln = mass * g - u[1] - mass * (y + h * yd) / (h * h)
        xd1, m = block_step_direct(xd, u[0], h, mu * ln / (mass * g), g, mass)
        yd1, mode = -y / h, 1 + m
    return np.array([x + h * xd1, y + h * yd1, xd1, yd1]), mode


def make_particle_data(*, episodes: int = 40, steps: int = 200, seed: int = 0, dt: float = 0.01, mu: float = 0.3,
                       g: float = G, mass: float = 1.0, ux_max: float = 6.0, uy_range=(-6.0, 11.5),
                       y0_max: float = 0.5, hold: int = 25) -> LearnData:
    """2D particle data: episodes from a random height y0 ∈ [0, y0_max] m at rest, u_x uniform on
    [−ux_max, ux_max] N and u_y uniform on ``uy_range`` N (u_y > mg lifts the particle off)."""
    _check_sizes(episodes, steps, hold)
    rng = np.random.default_rng(seed)
    X, Y, modes, ep = [], [], [], []
    for e in range(episodes):
        U = piecewise_constant(rng, steps, hold, (-ux_max, uy_range[0]), (ux_max, uy_range[1]))
        s = np.array([0.0, rng.uniform(0.0, y0_max), 0.0, 0.0])
        for k in range(steps):
            s1, m, _ = particle_step(s, U[k], dt, mu, g, mass)
            X.append(np.concatenate([s, U[k]]))
            Y.append(s1)
            modes.append(m)
            ep.append(e)
            s = s1
    meta = dict(
        system="particle", formulation="lcp", dt=dt, mu=mu, g=g, mass=mass, seed=seed, u_max=ux_max, hold=hold
    )
    return LearnData(
        np.array(X),
        np.array(Y),
        np.array(modes, np.int64),
        np.array(ep, np.int64),
        PARTICLE_MODES,
        ("x", "y", "xdot", "ydot", "u_x", "u_y"),
        ("x_next", "y_next", "xdot_next", "ydot_next"),
        np.array([1, 2, 3, 4, 5]),
        meta,
    )


def _check_sizes(episodes: int, steps: int, hold: int) -> None:
    for name, val in (("episodes", episodes), ("steps", steps), ("hold", hold)):
        if int(val) < 1:
            raise InputError(f"{name} must be ≥ 1; got {val}")


# ------------------------------------------------------------------------------------ files
_META_KEYS = ("system", "formulation", "dt", "mu", "g", "mass", "seed", "u_max", "hold")


def save_data(path, data: LearnData) -> Path:
    """Write ``data`` to an npz file atomically; returns the path."""
    path = Path(path)
    arrays = dict(
        X=data.X,
        Y=data.Y,
        modes=data.modes,
        episode=data.episode,
        mode_names=np.array(data.mode_names),
        input_names=np.array(data.input_names),
        output_names=np.array(data.output_names),
        gate_columns=np.asarray(data.gate_columns),
        schema=np.array(SCHEMA),
    )
    for k in _META_KEYS:
        if k in data.meta:
            arrays[k] = np.array(data.meta[k])
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    return path


def load_data(path) -> LearnData:
    """Read a data file written by :func:`save_data`; LearnDataError names what is wrong."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"learning data file not found: {path}")
    try:
        raw = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:     # EOFError: an empty file
        raise LearnDataError(f"{path}: not a readable npz file ({exc or 'empty'})") from None
    with raw:
        need = (
            "X",
            "Y",
            "modes",
            "episode",
            "mode_names",
            "input_names",
            "output_names",
            "gate_columns",
            "schema",
        )
        missing = [k for k in need if k not in raw.files]
        if missing:
            raise LearnDataError(
                f"{path}: missing {', '.join(missing)} (expected a file from `convexsim learn generate`)"
            )
        _check_dtypes(path, raw)
        if int(raw["schema"]) != SCHEMA:
            raise LearnDataError(f"{path}: schema {int(raw['schema'])}, this version reads {SCHEMA}")
        X, Y = np.asarray(raw["X"], float), np.asarray(raw["Y"], float)
        modes, ep = np.asarray(raw["modes"], np.int64), np.asarray(raw["episode"], np.int64)
        meta = {k: raw[k].item() for k in _META_KEYS if k in raw.files}
        data = LearnData(
            X,
            Y,
            modes,
            ep,
            tuple(str(s) for s in raw["mode_names"]),
            tuple(str(s) for s in raw["input_names"]),
            tuple(str(s) for s in raw["output_names"]),
            np.asarray(raw["gate_columns"], np.int64),
            meta,
        )
    _validate(path, data)
    return data


# dtype kinds (numpy dtype.kind) and ndim of each field of a data file; meta fields are 0-d
_FIELD_KINDS = {"X": ("fiu", 2), "Y": ("fiu", 2), "modes": ("iu", 1), "episode": ("iu", 1), "mode_names": ("U", 1),
                "input_names": ("U", 1), "output_names": ("U", 1), "gate_columns": ("iu", 1), "schema": ("iu", 0),
                "system": ("U", 0), "formulation": ("U", 0), "seed": ("iu", 0)}


def _check_dtypes(path, raw) -> None:
    """Every field of a data file has the dtype kind and ndim it is written with (numbers where numbers are
    read: no strings converted, no floats truncated to labels), and the numeric meta values are finite."""
    for name in list(_FIELD_KINDS) + [k for k in _META_KEYS if k not in _FIELD_KINDS]:
        if name not in raw.files:
            continue
        arr = raw[name]
        kinds, ndim = _FIELD_KINDS.get(name, ("fiu", 0))
        if arr.dtype.kind not in kinds or arr.ndim != ndim:
            what = {"fiu": "numbers", "iu": "integers", "U": "strings"}[kinds]
            raise LearnDataError(f"{path}: field {name!r} must be {ndim}-d {what}; got {arr.dtype.str} of shape "
                                 f"{arr.shape}")
        if kinds == "fiu" and ndim == 0 and not np.isfinite(arr):
            raise LearnDataError(f"{path}: field {name!r} is {arr.item()}, not a finite number")


def _validate(path, d: LearnData) -> None:
    n = len(d.X)
    if d.X.ndim != 2 or d.Y.ndim != 2 or n == 0:
        raise LearnDataError(f"{path}: X and Y must be non-empty 2D arrays; got {d.X.shape}, {d.Y.shape}")
    for name, arr in (("Y", d.Y), ("modes", d.modes), ("episode", d.episode)):
        if len(arr) != n:
            raise LearnDataError(f"{path}: {name} has {len(arr)} rows, X has {n}")
    if d.Y.shape[1] > d.X.shape[1]:
        raise LearnDataError(f"{path}: Y has more columns ({d.Y.shape[1]}) than X ({d.X.shape[1]})")
    if not (np.isfinite(d.X).all() and np.isfinite(d.Y).all()):
        raise LearnDataError(f"{path}: X or Y holds non-finite values")
    if d.modes.min() < 0 or d.modes.max() >= len(d.mode_names):
        raise LearnDataError(f"{path}: mode labels outside 0..{len(d.mode_names) - 1}")
    gc = d.gate_columns
    if len(gc) == 0 or gc.min() < 0 or gc.max() >= d.X.shape[1]:
        raise LearnDataError(f"{path}: gate_columns {gc.tolist()} outside 0..{d.X.shape[1] - 1}")
