"""The Python API: the same jobs as the CLI, returning snapshots that render in notebooks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.compute as pc

from sim2real._progress import Stages
from sim2real._scratch import scratch_folder
from sim2real.dataset import Dataset
from sim2real.pipeline import AnalysisConfig, check_analysable, diagnose, loaded, real_episodes
from sim2real.report.build import build_report, empty_report, with_check_evidence
from sim2real.report.model import ReportModel
from sim2real.report.snapshot import Report, check_output, read_previous
from sim2real.sim.adapter import SimulatorAdapter, load_adapter
from sim2real.sim.calibrate import CalibrationConfig, plan, screening_cost
from sim2real.sim.check import check_evidence

if TYPE_CHECKING:
    from sim2real.engine import Executor

__all__ = ["analyze"]


def analyze(
    dataset: str | Path | Dataset,
    out: str | Path | None = None,
    *,
    previous: str | Path | ReportModel | None = None,
    config: AnalysisConfig | None = None,
    seed: int | None = None,
    progress: bool = False,
    engine: str | Executor = "local",
    address: str | None = None,
    skip_bad_episodes: bool = False,
    adapter: str | SimulatorAdapter | None = None,
    adapter_options: Mapping[str, object] | None = None,
    calibration: CalibrationConfig | None = None,
    sim_clusters: int = 2,
    scratch: str | Path | None = None,
) -> Report:
    """Cluster a dataset's real failures by drift signature and report what to fix.

    Args:
        dataset: a dataset folder (see the dataset format) or a loaded :class:`Dataset`.
        out: when given, write ``report.json``, ``report.html`` and the plotted tables there;
            counterfactual checks already there (``sim2real check``) become evidence of the
            actions they tested.
        previous: an earlier ``report.json`` (or its model) whose cluster IDs to keep.
        config: analysis settings; defaults suit most fleets.
        seed: overrides ``config.seed``; the same input and seed give the same report.
        progress: show progress bars on stderr.
        engine: ``local`` (worker processes on this machine), ``ray`` (Ray tasks; needs
            ``pip install 'sim2real[ray]'``) or an :class:`~sim2real.engine.Executor`. The
            report is the same whichever runs it.
        address: the Ray cluster to join (``auto``, ``ray://head:10001``); ``ray`` only.
        skip_bad_episodes: leave out, with a warning, real failures that cannot be compared
            (no samples, a ``failure_time`` outside them) instead of failing.
        adapter: a simulator adapter (name, ``module:Class`` or instance): the
            ``sim_clusters`` most urgent clusters whose actions name a parameter are then
            calibrated on it and the fit checked (:mod:`sim2real.sim.loop`); the result is
            each cluster's ``sim_check`` and its action's evidence. ``None``: no replays.
        adapter_options: keyword arguments for the adapter's constructor.
        calibration: each calibration's budget (``budget`` candidate evaluations) and
            comparison.
        sim_clusters: how many clusters to calibrate.
        scratch: where temporary files go (signals regrouped by episode where the files
            are not clustered by it, large grids memory-mapped), in a folder of their own
            removed at the end; default: beside ``out``, else the system's temporary
            folder. See docs/performance.md.

    Returns:
        The :class:`Report`; in a notebook it renders as the HTML report. Without any real
        failure: a report with no events and no clusters.

    Raises:
        DatasetError: the dataset breaks the format (nothing is written).
        UsageError: ``previous`` cannot be read, or ``out`` cannot receive the report
            (both checked before any work).
        InputError: ``engine="ray"`` without Ray installed.
        SimulatorError: the adapter cannot be loaded or a rollout fails.
    """
    from sim2real.engine import make_executor

    config = config or AnalysisConfig()
    if seed is not None:
        config = replace(config, seed=seed)
    if out is not None:
        check_output(out)
    old = _previous(previous)
    sim = load_adapter(adapter, adapter_options) if adapter is not None else None
    calibration = calibration or CalibrationConfig()
    stages = Stages(enabled=progress)
    ds = loaded(dataset, stages, skip_bad_episodes)
    if sim is not None:  # a budget the calibrations cannot spend is an error before any work
        plan(calibration.budget, 2, calibration.restarts, screening_cost(len(ds.params)))
    real = real_episodes(ds)
    check_analysable(ds, real)
    if not pc.any(pc.equal(real["outcome"], "failure")).as_py():
        report = empty_report(ds)
    else:
        executor = make_executor(engine, address=address)
        with scratch_folder(scratch, beside=out) as folder:
            diagnosis = diagnose(ds, config, stages=stages, executor=executor, scratch=folder)
            with stages.stage("attribute and prescribe", 1):
                report = build_report(diagnosis, old, executor)
        if sim is not None:
            from sim2real.sim.loop import close_loop  # late: only a replaying run needs it

            report = close_loop(ds, report, sim, config=calibration, clusters=sim_clusters,
                                progress=progress)
    if out is not None:
        with stages.stage("write report", 1):
            report = with_check_evidence(report, check_evidence(out))
            report.save(out)
    return report


def _previous(previous: str | Path | ReportModel | None) -> ReportModel | None:
    if previous is None or isinstance(previous, ReportModel):
        return previous
    return read_previous(previous)
