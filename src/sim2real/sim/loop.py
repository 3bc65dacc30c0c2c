"""The analysis closes the loop itself: calibrate and check the most urgent clusters.

For each of the report's most urgent clusters that points to simulation parameters (an
action names one, ``param.*``, or the cluster is a ``dynamics_mismatch`` or
``perception_drift`` with ``sim_params``), calibrate that parameter (else those the
attribution says explain part of it, else the two a screening finds closest to the events;
see :func:`~sim2real.sim.calibrate`) on the cluster's events within the budget, then
run the counterfactual check on the fitted values. The result goes into the cluster's
``sim_check`` and, as one sentence, into the tested action's ``evidence``: what a reader
needs before retraining on the new values. The check's verdict, not the ranking, says
whether the parameters explain the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping

from sim2real.dataset import Dataset
from sim2real.report.model import Action, ClusterReport, SimCheck
from sim2real.report.snapshot import Report
from sim2real.sim.adapter import SimulatorAdapter, load_adapter
from sim2real.sim.calibrate import CalibrationConfig, calibrate
from sim2real.sim.check import check

__all__ = ["close_loop"]

_SIM_TAXONOMIES = ("dynamics_mismatch", "perception_drift")  # what a sim parameter can cause


def close_loop(ds: Dataset, report: Report, adapter: str | SimulatorAdapter, *,
               adapter_options: Mapping[str, object] | None = None,
               config: CalibrationConfig | None = None, clusters: int = 2,
               workers: int | None = None, progress: bool = False) -> Report:
    """The report with calibration and check results on its most urgent clusters.

    Args:
        ds: the analysed dataset.
        report: its report.
        adapter: the simulator adapter (name, ``module:Class`` or instance).
        adapter_options: keyword arguments for the adapter's constructor.
        config: each calibration's budget and comparison; the check replays the same
            episodes on ``config.seeds`` seeds (more for a cluster's verdict: at least 3).
        clusters: how many clusters with an identified parameter to calibrate, most
            urgent first.
        workers: rollout processes.
        progress: show progress bars.

    Raises:
        UsageError / SimulatorError: as :func:`~sim2real.sim.calibrate` does.
    """
    cfg = config or CalibrationConfig()
    sim = load_adapter(adapter, adapter_options)
    model = report.model
    todo = [c.cluster_id for c in model.clusters if _eligible(c)][:clusters]
    updated = []
    for c in model.clusters:
        if c.cluster_id not in todo:
            updated.append(c)
            continue
        index = _tested(c)
        params = None if index is None else [c.actions[index].target.removeprefix("param.")]
        cal = calibrate(ds, cluster=c.cluster_id, run=model, params=params, adapter=sim,
                        config=cfg, workers=workers, progress=progress)
        res = check(ds, cal.fitted, cluster=c.cluster_id, run=model, adapter=sim,
                    seeds=max(cfg.seeds, 3), max_episodes=cfg.max_episodes, seed=cfg.seed,
                    workers=workers, progress=progress)
        fits = ", ".join(
            f"param.{p.param} = {p.fitted:.4g}{'' if p.std is None else f' +- {p.std:.2g}'}"
            f"{'' if p.identifiable else ' (not identifiable)'}" for p in cal.params)
        said = "reproduces" if res.reproduces else "does not reproduce"
        chosen = (f" (chosen by screening all {len(cal.screened)} parameters)"
                  if cal.screened else "")
        text = (f"Sim replay ({sim.name}, {cal.plan['candidates']} candidate evaluations): "
                f"calibrated {fits}{chosen}{'' if cal.converged else ' (not converged)'}; "
                f"with it the replay {said} the events: {res.failures_after} of "
                f"{res.replays} replays fail, reality {res.failures_real} of "
                f"{res.episodes_real}; drift "
                f"{res.drift_before:.3g} -> {res.drift_after:.3g}.")
        actions = list(c.actions)
        if actions:
            at = index or 0
            actions[at] = _with_evidence(actions[at], text)
        sim_check = SimCheck(
            adapter=sim.name, episodes=cal.episodes, fitted=cal.fitted,
            std={p.param: p.std for p in cal.params},
            identifiable=all(p.identifiable for p in cal.params), converged=cal.converged,
            discrepancy_before=cal.discrepancy_before, discrepancy_after=cal.discrepancy_after,
            candidates=cal.plan["candidates"], reproduces=res.reproduces,
            failures_real=res.failures_real, episodes_real=res.episodes_real,
            failures_after=res.failures_after, replays=res.replays, verdict=res.verdict,
            rollouts=cal.rollouts + res.rollouts, warnings=cal.warnings)
        updated.append(c.model_copy(update={"actions": actions, "sim_check": sim_check}))
    new = model.model_copy(update={"clusters": updated})
    return Report(new, report.signatures, report.traces)


def _eligible(c: ClusterReport) -> bool:
    return _tested(c) is not None or (c.taxonomy in _SIM_TAXONOMIES and bool(c.sim_params))


def _tested(c: ClusterReport) -> int | None:
    """The index of the cluster's first action on a simulation parameter."""
    return next((i for i, a in enumerate(c.actions) if a.target.startswith("param.")), None)


def _with_evidence(action: Action, text: str) -> Action:
    before = (action.evidence or "").rstrip()
    joined = f"{before}{'' if before.endswith('.') else '.'} {text}" if before else text
    return action.model_copy(update={"evidence": joined})
