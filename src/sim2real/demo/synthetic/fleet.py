"""Episode-level sampling: who ran what, with which hidden parameters, and which episodes fail.

Everything per episode is drawn here, vectorised, before any telemetry: the episodes table is
small even for 300k episodes, and the signal generator then only needs slices of these arrays.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from sim2real.demo.synthetic.spec import FAILURE_MODES, CatalogueItem, CauseSpec, WorldSpec

__all__ = [
    "FAILURE_LABELS",
    "MODE_WINDOWS",
    "Episodes",
    "ctx_values",
    "eligible",
    "phase_bounds",
    "phase_to_time",
    "sample_real",
    "sample_sim",
]

# The symptom a person sees for each failure mode (never the cause).
FAILURE_LABELS: dict[str, str] = {
    "grasp_miss": "missed_pick",
    "bump_drop": "dropped_object",
    "slip_drop": "dropped_object",
    "collision": "collision",
    "knock_over": "knocked_over",
}
# (phase index, start, end as fractions of that phase) where each failure mode happens.
MODE_WINDOWS: dict[str, tuple[int, float, float]] = {
    "grasp_miss": (1, 0.3, 0.8),
    "bump_drop": (2, 0.2, 0.8),
    "slip_drop": (2, 0.3, 0.9),
    "collision": (2, 0.1, 0.9),
    "knock_over": (1, 0.2, 0.7),
}
_N_SPIKES = 3
_NO_CAUSE = -1


@dataclass(frozen=True)
class Episodes:
    """Per-episode draws of one source; every array has one row per episode.

    ``params`` is ``(n, n_params)``, ``ctx_num`` ``(n, n_ctx_numeric)``, ``ctx_cat``
    ``(n, n_ctx_categorical)`` codes into :func:`ctx_values`, ``spike_u``/``spike_w``
    ``(n, 3)`` latency-spike centres (phase clock) and widths (s), NaN where none.
    Times: a sample recorded at ``t`` happened at ``t * (1 + clock_warp)`` true seconds; the
    latent phase clock runs ``duration`` true seconds, warped by ``phase_warp``.
    """

    is_real: bool
    task: np.ndarray
    duration: np.ndarray
    phase_warp: np.ndarray
    clock_warp: np.ndarray
    params: np.ndarray
    ctx_num: np.ndarray
    ctx_cat: np.ndarray
    cause: np.ndarray
    strength: np.ndarray
    mode: np.ndarray
    fail_u: np.ndarray
    background: np.ndarray
    spike_u: np.ndarray
    spike_w: np.ndarray
    deployment: np.ndarray
    robot: np.ndarray
    started_us: np.ndarray
    config_cause: np.ndarray

    def __len__(self) -> int:
        return len(self.task)

    def take(self, rows: slice) -> Episodes:
        """The episodes in ``rows``, as a new record of views."""
        arrays = {f.name: getattr(self, f.name)[rows]
                  for f in dataclasses.fields(self) if f.name != "is_real"}
        return Episodes(is_real=self.is_real, **arrays)

    @property
    def failed(self) -> np.ndarray:
        """Boolean mask of failed episodes."""
        return self.mode >= 0

    def failure_time(self) -> np.ndarray:
        """Recorded seconds from the start at which each failed episode failed (NaN if none)."""
        return phase_to_time(self.fail_u, self.phase_warp) * self.duration / (1 + self.clock_warp)


def sample_sim(spec: WorldSpec, n: int, rng: np.random.Generator) -> Episodes:
    """Draw ``n`` simulation rollouts: params uniform in range, background failures only."""
    params = _uniform_params(spec, n, rng)
    return _assemble(spec, rng, is_real=False, params=params,
                     deployment=np.full(n, -1), robot=np.full(n, -1), started_us=np.zeros(n, "i8"))


def sample_real(spec: WorldSpec, counts: np.ndarray, rng: np.random.Generator) -> Episodes:
    """Draw real episodes, ``counts[d]`` in deployment ``d``, ordered by their start time."""
    deployment = np.repeat(np.arange(len(counts)), counts)
    n = len(deployment)
    start_us = np.datetime64(spec.start, "us").astype("i8")
    span_us = spec.deployment_days * 86_400e6
    started = start_us + ((deployment + rng.random(n)) * span_us).astype("i8")
    order = np.argsort(started, kind="stable")
    deployment, started = deployment[order], started[order]
    robot = rng.integers(0, len(spec.robots), n)
    if spec.real_param_sd is None:
        params = _uniform_params(spec, n, rng)
    else:
        params = _nominal_params(spec, n, spec.real_param_sd, rng)
    return _assemble(spec, rng, is_real=True, params=params,
                     deployment=deployment, robot=robot, started_us=started)


def _assemble(
    spec: WorldSpec, rng: np.random.Generator, *, is_real: bool, params: np.ndarray,
    deployment: np.ndarray, robot: np.ndarray, started_us: np.ndarray,
) -> Episodes:
    n = len(params)
    weights = np.array([t.weight for t in spec.tasks], float)
    task = rng.choice(len(spec.tasks), n, p=weights / weights.sum())
    duration = np.array([t.duration_s for t in spec.tasks])[task] * np.exp(rng.normal(0, 0.05, n))
    ctx_num = np.column_stack(
        [rng.uniform(c.low, c.high, n) for c in spec.ctx_numeric] or [np.zeros((n, 0))])
    ctx_cat = np.column_stack([_draw_items(c.items, n, rng) for c in spec.ctx_categorical]
                              or [np.zeros((n, 0), int)])
    cause, strength, config_cause = _assign_causes(spec, deployment, robot, ctx_cat, rng, is_real)
    _apply_causes(spec, cause, strength, params, ctx_cat)
    mode, background = _draw_failures(spec, cause, strength, params, rng)
    ep = Episodes(
        is_real=is_real, task=task, duration=duration,
        phase_warp=np.clip(rng.normal(0, 0.06, n), -0.2, 0.2),
        clock_warp=rng.normal(0, spec.real_time_warp, n) if is_real else np.zeros(n),
        params=params, ctx_num=ctx_num, ctx_cat=ctx_cat, cause=cause, strength=strength,
        mode=mode, fail_u=np.full(n, np.nan), background=background,
        spike_u=np.full((n, _N_SPIKES), np.nan), spike_w=np.full((n, _N_SPIKES), np.nan),
        deployment=deployment, robot=robot, started_us=started_us, config_cause=config_cause,
    )
    _place_failures(spec, ep, rng)
    _place_spikes(spec, ep, rng)
    return ep


def _uniform_params(spec: WorldSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    low = np.array([p.low for p in spec.params])
    high = np.array([p.high for p in spec.params])
    return low + (high - low) * rng.random((n, len(spec.params)))


def _nominal_params(spec: WorldSpec, n: int, sd: float, rng: np.random.Generator) -> np.ndarray:
    """Real hardware sits near nominal; clipped so that only causes leave the sim range."""
    low = np.array([p.low for p in spec.params])
    high = np.array([p.high for p in spec.params])
    nominal = np.array([p.nominal for p in spec.params])
    values = nominal + rng.normal(0, sd, (n, len(spec.params))) * (high - low)
    return np.clip(values, low, high)


def _draw_items(items: tuple[CatalogueItem, ...], n: int, rng: np.random.Generator) -> np.ndarray:
    weights = np.array([i.weight for i in items], float)
    return rng.choice(len(items), n, p=weights / weights.sum())


def ctx_values(spec: WorldSpec, column: int) -> list[str]:
    """Values a categorical ctx column's codes stand for: the catalogue, then causes' new ones."""
    cat = spec.ctx_categorical[column]
    values = [i.name for i in cat.items]
    for cause in spec.causes:
        if cause.new_ctx and cause.new_ctx[0] == cat.name and cause.new_ctx[1] not in values:
            values.append(cause.new_ctx[1])
    return values


def eligible(spec: WorldSpec, cause: CauseSpec, deployment: np.ndarray, robot: np.ndarray,
             ctx_cat: np.ndarray) -> np.ndarray:
    """Mask of real episodes a cause can touch: its robots, sites, deployments and ctx value."""
    deps = [spec.deployments.index(d) for d in cause.deployments] or range(len(spec.deployments))
    ok = np.isin(deployment, list(deps))
    if cause.fixed_from is not None:
        ok &= deployment < spec.deployments.index(cause.fixed_from)
    if cause.robots:
        ok &= np.isin(robot, [spec.robots.index(r) for r in cause.robots])
    if cause.sites:
        at_site = [i for i, s in enumerate(spec.robot_sites) if s in cause.sites]
        ok &= np.isin(robot, at_site)
    if cause.when_ctx is not None:
        col = [c.name for c in spec.ctx_categorical].index(cause.when_ctx[0])
        ok &= ctx_cat[:, col] == ctx_values(spec, col).index(cause.when_ctx[1])
    return ok


def _assign_causes(
    spec: WorldSpec, deployment: np.ndarray, robot: np.ndarray, ctx_cat: np.ndarray,
    rng: np.random.Generator, is_real: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At most one active cause per episode, so every failure has one true label."""
    n = len(deployment)
    cause = np.full(n, _NO_CAUSE)
    config_cause = np.full(n, _NO_CAUSE)
    strength = np.zeros(n)
    if not is_real or not spec.causes:
        return cause, strength, config_cause
    frac = deployment / max(len(spec.deployments) - 1, 1)
    probs = np.zeros((n, len(spec.causes)))
    for c, spec_c in enumerate(spec.causes):
        ok = eligible(spec, spec_c, deployment, robot, ctx_cat)
        probs[:, c] = ok * (spec_c.ramp[0] + (spec_c.ramp[1] - spec_c.ramp[0]) * frac)
        if spec_c.config_hash is not None:
            config_cause[ok] = c
    cum = np.cumsum(probs, axis=1)
    cum /= np.maximum(cum[:, -1:], 1.0)  # overlapping causes share the episode, never exceed 1
    u = rng.random(n)
    hit = u[:, None] < cum
    active = hit.any(axis=1)
    cause[active] = hit[active].argmax(axis=1)
    strength[active] = rng.uniform(0.7, 1.3, int(active.sum()))
    return cause, strength, config_cause


def _apply_causes(spec: WorldSpec, cause: np.ndarray, strength: np.ndarray,
                  params: np.ndarray, ctx_cat: np.ndarray) -> None:
    """Push the hidden parameter / context of active episodes to the cause's value (in place)."""
    for c, spec_c in enumerate(spec.causes):
        on = cause == c
        if spec_c.key_param is not None and spec_c.true_value is not None:
            p = spec.params[spec.param_index(spec_c.key_param)]
            # Measured from the range edge the true value lies beyond, so strength 1 gives
            # exactly true_value and failures (which favour strong episodes) cluster around it.
            edge = min(max(spec_c.true_value, p.low), p.high)
            if edge == spec_c.true_value:
                edge = p.nominal
            params[on, spec.param_index(p.name)] = edge + (spec_c.true_value - edge) * strength[on]
        if spec_c.new_ctx is not None:
            col = [x.name for x in spec.ctx_categorical].index(spec_c.new_ctx[0])
            ctx_cat[on, col] = ctx_values(spec, col).index(spec_c.new_ctx[1])


def _draw_failures(
    spec: WorldSpec, cause: np.ndarray, strength: np.ndarray, params: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Failure mode per episode (-1: success) and whether the failure is a background one."""
    n = len(cause)
    mode = np.full(n, -1)
    fail_prob = np.array([c.failure_prob for c in spec.causes] + [0.0])[cause]
    cause_modes = np.array([FAILURE_MODES.index(c.failure_mode) for c in spec.causes] + [-1])
    by_cause = (cause >= 0) & (rng.random(n) < np.clip(fail_prob * strength, 0, 0.97))
    mode[by_cause] = cause_modes[cause[by_cause]]
    bg = spec.background
    bump = rng.random(n) < bg.rate
    miss = np.zeros(n, bool)
    if bg.extreme_param is not None:
        p = spec.params[spec.param_index(bg.extreme_param)]
        pos = np.clip((params[:, spec.param_index(p.name)] - p.low) / (p.high - p.low), 0, 1)
        miss = rng.random(n) < bg.extreme_rate * np.clip(1 - pos / bg.extreme_share, 0, 1)
    background = ~by_cause & (bump | miss)
    mode[background & miss] = FAILURE_MODES.index("grasp_miss")
    mode[background & bump & ~miss] = FAILURE_MODES.index("bump_drop")
    return mode, background


def phase_bounds(spec: WorldSpec, task: np.ndarray) -> np.ndarray:
    """``(n, 5)`` phase boundaries on the phase clock: 0, end of approach, ..., 1."""
    fracs = np.array([t.phases for t in spec.tasks], float)
    fracs /= fracs.sum(axis=1, keepdims=True)
    bounds = np.concatenate([np.zeros((len(spec.tasks), 1)), np.cumsum(fracs, axis=1)], axis=1)
    return bounds[task]


def _place_failures(spec: WorldSpec, ep: Episodes, rng: np.random.Generator) -> None:
    """Failure positions on the phase clock, inside the phase each mode belongs to."""
    bounds = phase_bounds(spec, ep.task)
    for m, name in enumerate(FAILURE_MODES):
        rows = np.flatnonzero(ep.mode == m)
        phase, lo, hi = MODE_WINDOWS[name]
        start, width = bounds[rows, phase], bounds[rows, phase + 1] - bounds[rows, phase]
        ep.fail_u[rows] = start + width * rng.uniform(lo, hi, len(rows))


def _place_spikes(spec: WorldSpec, ep: Episodes, rng: np.random.Generator) -> None:
    """Latency spikes of system causes; a failing episode fails at its first spike."""
    for c, spec_c in enumerate(spec.causes):
        if spec_c.latency_spike_ms <= 0 and spec_c.drop_rate <= 0:
            continue
        rows = np.flatnonzero(ep.cause == c)
        count = np.minimum(1 + rng.poisson(1.5 * ep.strength[rows]), _N_SPIKES)
        centres = rng.uniform(0.1, 0.95, (len(rows), _N_SPIKES))
        failing = ep.mode[rows] >= 0
        centres[failing, 0] = ep.fail_u[rows[failing]]
        used = np.arange(_N_SPIKES)[None, :] < count[:, None]
        ep.spike_u[rows] = np.where(used, centres, np.nan)
        ep.spike_w[rows] = np.where(used, rng.uniform(0.2, 0.6, (len(rows), _N_SPIKES)), np.nan)


def phase_to_time(phase: np.ndarray, warp: np.ndarray) -> np.ndarray:
    """Invert the phase clock ``phase = u + warp * sin(pi u) / pi`` (Newton; it is monotone)."""
    u = np.array(phase, float)
    for _ in range(8):
        u -= (u + warp * np.sin(np.pi * u) / np.pi - phase) / (1 + warp * np.cos(np.pi * u))
    return u
