"""Which simulation parameters differ for a cluster: estimates, shifts, identifiability.

:func:`param_evidence` fits a :class:`ParameterInference` on a diagnosis' sim rollouts once
and reads every real failure and a sample of real successes through it;
:func:`infer_params` then summarises a cluster's events. The cluster is contrasted with
the real successes, so a parameter on which all of reality differs from sim (and which
therefore cannot explain why *these* episodes fail) is not blamed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim2real.attribute.inference import ParameterInference, ParamSpace, Windows
from sim2real.match.context import context_table

if TYPE_CHECKING:
    from sim2real.pipeline import Diagnosis

__all__ = ["ParamEstimate", "ParamEvidence", "infer_params", "param_evidence"]

# A parameter whose value sim rollouts' telemetry predicts with R^2 below this is reported
# as not identifiable: its estimate is the neighbours' value, not a finding.
IDENTIFIABLE = 0.2
_Z_EDGE = 1.645  # one-sided 95 %: the estimate lies beyond an edge of the range
_Z_SHIFT = 2.0  # the cluster differs from real successes
_CONFOUNDED = 0.7  # |posterior correlation| above which two parameters trade off


@dataclass(frozen=True)
class ParamEstimate:
    """The value a cluster's real episodes point to for one simulation parameter.

    Attributes:
        param: name without ``param.``.
        sim_low, sim_high, sim_nominal: the randomisation range.
        estimate: median of the cluster's per-episode estimates.
        shift: ``(estimate - nominal) / (high - low)``.
        outside_range: the estimate lies beyond an edge by more than 1.645 standard errors,
            the parameter is identifiable and the cluster differs from real successes.
        uncertainty: standard error of ``estimate``.
        explained: 0-1, share of the cluster's telemetry deviation (versus real successes)
            this parameter's shift accounts for, times its identifiability; 0 where the
            cluster's estimate does not differ from the successes' by 2 standard errors.
        identifiability: cross-validated R^2 of the parameter on sim rollouts.
        contrast: (cluster - real successes) in standard errors.
        confounded_with: parameters whose effects the data cannot tell from this one's.
        event_share: share of the cluster's episodes that point beyond the range (when
            ``outside_range``) or to the same side of nominal as the estimate.
    """

    param: str
    sim_low: float
    sim_high: float
    sim_nominal: float
    estimate: float
    shift: float
    outside_range: bool
    uncertainty: float
    explained: float
    identifiability: float = 0.0
    contrast: float = 0.0
    confounded_with: tuple[str, ...] = field(default_factory=tuple)
    event_share: float = 0.0

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["confounded_with"] = list(self.confounded_with)
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in out.items()}


@dataclass(frozen=True)
class ParamEvidence:
    """A diagnosis read through a fitted :class:`ParameterInference`, computed once.

    Attributes:
        inference: fitted on the sim rollouts.
        events: ``(n_events, n_params)`` per-failure estimates, signature row order.
        whitened: ``(n_events, n_features)`` per-failure deviations from their neighbours.
        success_mean: ``(n_params,)`` median estimate over sampled real successes.
        success_se: ``(n_params,)`` its standard error.
        success_whitened: ``(n_features,)`` mean deviation of the successes.
    """

    inference: ParameterInference
    events: np.ndarray
    whitened: np.ndarray
    success_mean: np.ndarray
    success_se: np.ndarray
    success_whitened: np.ndarray


def param_evidence(diagnosis: Diagnosis) -> ParamEvidence | None:
    """Fit the inference on the diagnosis' sim rollouts and read its real episodes.

    Returns:
        ``None`` where the dataset has no ``param.*`` columns (nothing to attribute).
    """
    space = _space(diagnosis)
    if space is None:
        return None
    cfg = diagnosis.config
    inference = ParameterInference(20, cfg.n_points, cfg.n_segments, cfg.window_s,
                                   seed=cfg.seed).fit(diagnosis.matcher.bank_, space)
    events = diagnosis.events
    windows = Windows(diagnosis.real_grid, np.arange(events.num_rows), diagnosis.ends,
                      _strings(events, "task"), context_table(events))
    whitened, base = inference.deviations(windows)
    estimates = base + inference.correct(whitened) * space.spread
    s_white, s_est = _successes(diagnosis, inference)
    n_s = max(len(s_est), 1)
    s_mean = np.nanmedian(s_est, axis=0) if len(s_est) else space.nominal.copy()
    s_se = (1.2533 * np.nanstd(s_est, axis=0) / np.sqrt(n_s) if len(s_est) > 1
            else np.full(len(space.names), np.inf))
    s_dev = s_white.mean(axis=0) if len(s_white) else np.zeros(whitened.shape[1])
    return ParamEvidence(inference, estimates, whitened, s_mean, s_se, s_dev)


def infer_params(
    diagnosis: Diagnosis, rows: np.ndarray, evidence: ParamEvidence | None = None
) -> list[ParamEstimate]:
    """Parameter estimates for the cluster of events ``rows``, most explaining first.

    Args:
        diagnosis: the analysis.
        rows: the cluster's event rows.
        evidence: :func:`param_evidence` of ``diagnosis``, computed once per diagnosis;
            computed here when not given.
    """
    ev = evidence if evidence is not None else param_evidence(diagnosis)
    if ev is None or len(rows) == 0:
        return []
    inf = ev.inference
    space = inf.space_
    per_event = ev.events[rows]
    n = len(rows)
    estimate = np.nanmedian(per_event, axis=0)
    spread_se = 1.2533 * np.nanstd(per_event, axis=0) / np.sqrt(n)
    se = np.maximum(spread_se, inf.posterior_sd_ / np.sqrt(n))
    contrast = (estimate - ev.success_mean) / np.sqrt(se**2 + ev.success_se**2)
    delta = (estimate - ev.success_mean) / space.spread
    share = _explained_share(inf, ev.whitened[rows].mean(axis=0) - ev.success_whitened, delta)
    # A parameter on which the cluster does not differ from real successes explains nothing.
    share = np.where(np.abs(np.nan_to_num(contrast)) >= _Z_SHIFT, share, 0.0)
    out = []
    for j, name in enumerate(space.names):
        low, high, nominal = (float(space.low[j]), float(space.high[j]),
                              float(space.nominal[j]))
        ident = float(inf.identifiability_[j])
        beyond = max(estimate[j] - high, low - estimate[j]) / se[j]
        outside = bool(ident >= IDENTIFIABLE and beyond > _Z_EDGE
                       and abs(contrast[j]) >= _Z_SHIFT)
        if outside:
            side = per_event[:, j] > high if estimate[j] > high else per_event[:, j] < low
        else:
            side = np.sign(per_event[:, j] - nominal) == np.sign(estimate[j] - nominal)
        partners = tuple(space.names[k] for k in range(len(space.names))
                         if k != j and abs(inf.correlation_[j, k]) >= _CONFOUNDED)
        out.append(ParamEstimate(
            param=name, sim_low=low, sim_high=high, sim_nominal=nominal,
            estimate=float(estimate[j]),
            shift=float((estimate[j] - nominal) / space.spread[j]),
            outside_range=outside, uncertainty=float(se[j]),
            explained=float(share[j] * ident), identifiability=ident,
            contrast=float(np.nan_to_num(contrast[j])), confounded_with=partners,
            event_share=float(np.mean(side)),
        ))
    return sorted(out, key=lambda p: (-p.explained, p.param))


def _explained_share(
    inf: ParameterInference, deviation: np.ndarray, delta: np.ndarray
) -> np.ndarray:
    """``(n_params,)`` share of ``|deviation|^2`` (whitened, versus real successes) that each
    parameter's shift ``delta`` (spread units) removes through its learnt effect."""
    total = float(deviation @ deviation)
    if total <= 0:
        return np.zeros(len(delta))
    cols = inf.columns()
    share = np.empty(len(delta))
    for j, dj in enumerate(delta):
        rest = deviation - cols[:, j] * dj
        share[j] = (total - float(rest @ rest)) / total
    return np.clip(share, 0.0, 1.0)


def _space(diagnosis: Diagnosis) -> ParamSpace | None:
    ds = diagnosis.dataset
    names = [n for n in sorted(ds.params) if f"param.{n}" in ds.episodes.column_names]
    if not names:
        return None
    bank = diagnosis.matcher.bank_
    sim = ds.episodes.filter(pc.equal(ds.episodes["source"], "sim"))
    order = {e: i for i, e in enumerate(sim["episode_id"].to_pylist())}
    take = pa.array([order[e] for e in bank.grid.episode_ids])
    values = np.column_stack([
        sim[f"param.{n}"].take(take).to_numpy(zero_copy_only=False).astype(float)
        for n in names])
    ranges = [ds.params[n] for n in names]
    return ParamSpace(tuple(names), np.array([r.low for r in ranges], float),
                      np.array([r.high for r in ranges], float),
                      np.array([r.nominal for r in ranges], float), values)


def _successes(
    diagnosis: Diagnosis, inference: ParameterInference
) -> tuple[np.ndarray, np.ndarray]:
    """Whitened deviations and estimates of the diagnosis' baseline real successes, each
    read at a random point of its run (there is no failure time)."""
    real = diagnosis.successes
    if real.num_rows == 0:
        n_params = len(inference.space_.names)
        return np.zeros((0, inference.coef_.shape[0])), np.zeros((0, n_params))
    rows = diagnosis.events.num_rows + np.arange(real.num_rows)
    rng = np.random.default_rng(diagnosis.config.seed)
    ends = diagnosis.real_grid.durations[rows] * rng.uniform(0.3, 1.0, size=rows.size)
    windows = Windows(diagnosis.real_grid, rows, ends, _strings(real, "task"),
                      context_table(real))
    whitened, base = inference.deviations(windows)
    return whitened, base + inference.correct(whitened) * inference.space_.spread


def _strings(table: pa.Table, column: str) -> np.ndarray:
    if column not in table.column_names:
        return np.full(table.num_rows, None, dtype=object)
    return np.array(table[column].to_pylist(), dtype=object)
