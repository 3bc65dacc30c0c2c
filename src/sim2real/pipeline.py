"""``analyze``: from a dataset folder to a failure-cluster report, one stage after another."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sim2real._columns import column_values
from sim2real._progress import Stages
from sim2real.cluster.density import FailureClusterer, FeatureSpace, signature_features
from sim2real.cluster.location import Fleet, fleet_of
from sim2real.dataset import Dataset, load_dataset
from sim2real.dataset.regroup import clustering, regroup
from sim2real.dataset.schema import BANK_SOURCES
from sim2real.drift.compute import QuerySet, Reference, Signatures, compare, signatures
from sim2real.drift.evidence import SysFinding, context_novelty, sys_findings
from sim2real.drift.signature import DriftScorer, SegmentDiff
from sim2real.errors import DatasetError, UsageError
from sim2real.match.context import ContextTable, context_table
from sim2real.match.grid import SignalGrid, build_grid
from sim2real.match.matcher import RolloutBank, RolloutMatcher
from sim2real.match.timebase import TimeBase, check_grid_fits, time_base

if TYPE_CHECKING:
    from sim2real.engine import Executor

__all__ = [
    "AnalysisConfig",
    "Diagnosis",
    "Yardstick",
    "by_episode",
    "check_analysable",
    "compared_with",
    "diagnose",
    "fit_yardstick",
    "loaded",
    "real_episodes",
    "reference_warnings",
    "score_failures",
    "sim_episodes",
]


@dataclass(frozen=True)
class AnalysisConfig:
    """Knobs of the analysis; the defaults suit fleets from tens to thousands of failures.

    Attributes:
        n_neighbors: sim rollouts matched per failure.
        n_points: samples per comparison window.
        n_segments: parts of the window compared separately (for "what deviates first").
        window_s: seconds before the failure that are compared.
        null_samples: sim rollouts (and real successes) matched against their own kind to
            calibrate the scores.
        reference_successes: real successes per task kept to compare channels sim lacks.
        baseline_successes: real successes of the analysed deployments read with the
            failures: the parameter attribution's baseline.
        min_cluster_size: smallest cluster; ``None`` scales with the number of failures.
        seed: every random choice derives from it.
        rate_hz: the time grid's rate; ``None``: the rate of the fastest channel (of the
            coarser source), measured between that channel's own samples.
    """

    n_neighbors: int = 5
    n_points: int = 32
    n_segments: int = 4
    window_s: float = 10.0
    null_samples: int = 300
    reference_successes: int = 300
    baseline_successes: int = 200
    min_cluster_size: int | None = None
    seed: int = 0
    rate_hz: float | None = None


@dataclass(frozen=True)
class Yardstick:
    """What every failure is measured against: sim rollouts, real successes, calibration.

    Attributes:
        dataset: the validated input.
        matcher: fitted on the sim rollouts (its ``bank_`` holds them).
        reference: real successes for the channels sim lacks, or ``None``.
        scorer: calibrated on sim-vs-sim and success-vs-success comparisons.
        channels: sim-recorded channels first, then the success-compared ones.
        sim_channels: how many of ``channels`` sim records.
        findings: ``sys.*`` values under which failures are over-represented.
        time: the time grid's step and each source's channel periods.
        durations: every episode's last sample time.
        warnings: what had to be guessed or skipped.
        scratch: where large grids are memory-mapped (``None``: in memory).
    """

    dataset: Dataset
    matcher: RolloutMatcher
    reference: Reference | None
    scorer: DriftScorer
    channels: tuple[str, ...]
    sim_channels: int
    findings: list[SysFinding]
    time: TimeBase
    durations: Mapping[str, float]
    warnings: tuple[str, ...]
    scratch: Path | None = None

    @property
    def dt(self) -> float:
        """The time grid step, seconds."""
        return self.time.dt


@dataclass(frozen=True)
class Diagnosis:
    """Everything the analysis learned: what reports and validation are built from.

    Attributes:
        yardstick: the fitted reference every failure was measured against.
        events: the real failure episodes, in signature row order.
        signatures: their drift signatures.
        features: the clustering space of the events.
        labels: ``(n_events,)`` cluster index per event, -1 for none.
        clusterer: fitted, to assign further events.
        real_grid: the events on the shared time grid (rows in event order), then the
            ``successes``.
        successes: real successes of the analysed deployments, a seeded sample (see
            :attr:`AnalysisConfig.baseline_successes`).
        ends: ``(n_events,)`` failure time of each event (its end where none was given).
        config: the settings used.
        deployments: the deployments analysed, in time order.
        fleet: where the events happened, and what sim's failure rate predicts there.
    """

    yardstick: Yardstick
    events: pa.Table
    signatures: Signatures
    features: FeatureSpace
    labels: np.ndarray
    clusterer: FailureClusterer
    real_grid: SignalGrid
    ends: np.ndarray
    config: AnalysisConfig
    deployments: tuple[str, ...]
    successes: pa.Table
    fleet: Fleet

    @property
    def dataset(self) -> Dataset:
        return self.yardstick.dataset

    @property
    def matcher(self) -> RolloutMatcher:
        return self.yardstick.matcher

    @property
    def warnings(self) -> list[str]:
        return list(self.yardstick.warnings)


def diagnose(
    dataset: str | Path | Dataset,
    config: AnalysisConfig = AnalysisConfig(),
    *,
    deployments: Sequence[str] | None = None,
    stages: Stages | None = None,
    executor: Executor | None = None,
    scratch: Path | None = None,
    also: Sequence[str] = (),
) -> Diagnosis:
    """Load, match, score and cluster every real failure of a dataset.

    Args:
        dataset: a dataset folder or an already loaded :class:`Dataset`.
        config: analysis settings.
        deployments: analyse only the real episodes of these deployments.
        stages: progress display.
        executor: where the heavy stages run (signal shards, chunks of matches); ``None``
            runs them in this process. The result does not depend on it.
        scratch: an empty folder for temporary files: signals not clustered by episode
            are regrouped there in one pass (:mod:`sim2real.dataset.regroup`), and large
            grids memory-mapped. ``None``: such signals are read by ID, grids held in memory.
            The result does not depend on it.
        also: episodes read later with this diagnosis' yardstick (``validate``'s candidate
            failures): regrouped with the rest.

    Raises:
        DatasetError: the dataset breaks the format, or has no sim or no real episodes.
        UsageError: the deployments analysed hold no real failure.
    """
    stages = stages or Stages(enabled=False)
    ds = loaded(dataset, stages)
    real = real_episodes(ds, deployments)
    check_analysable(ds, real)
    failures = real.filter(pc.equal(real["outcome"], "failure"))
    if failures.num_rows == 0:
        which = f" of {', '.join(deployments)}" if deployments is not None else ""
        raise UsageError(f"{ds.root}: no real failures{which} to analyse")
    successes = _baseline_successes(real, failures, config)
    if scratch is not None:
        reference = _sample_per_task(real.filter(pc.equal(real["outcome"], "success")),
                                     config.reference_successes,
                                     np.random.default_rng(config.seed))  # as fit_yardstick
        ds = by_episode(ds, [*sim_episodes(ds)["episode_id"].to_pylist(),
                             *failures["episode_id"].to_pylist(),
                             *successes["episode_id"].to_pylist(),
                             *reference["episode_id"].to_pylist(), *also], scratch, stages)
    yardstick = fit_yardstick(ds, real, config, stages, executor, scratch)
    # Read with the failures: their rows share row groups, so they cost no second pass.
    sig, grid, ends = score_failures(yardstick, failures, config, stages, executor,
                                     also=successes["episode_id"].to_pylist())
    fleet = fleet_of(failures, real, sim_episodes(ds))
    with stages.stage("cluster signatures", 1):
        features = signature_features(sig, symptoms=fleet.symptom)
        clusterer = FailureClusterer(config.min_cluster_size).fit(features, fleet)
    analysed = tuple(d for d in ds.deployments if deployments is None or d in deployments)
    return Diagnosis(yardstick, failures, sig, features, clusterer.labels_, clusterer, grid,
                     ends, config, analysed, successes, fleet)


def loaded(dataset: str | Path | Dataset, stages: Stages,
           skip_bad_episodes: bool = False) -> Dataset:
    """``dataset`` where it is loaded already, else loaded and checked (see
    :func:`~sim2real.dataset.load_dataset`) under a progress line of its own."""
    if isinstance(dataset, Dataset):
        return dataset
    with stages.stage("load and check dataset", 1):
        return load_dataset(dataset, skip_bad_episodes=skip_bad_episodes)


def _baseline_successes(real: pa.Table, failures: pa.Table, config: AnalysisConfig) -> pa.Table:
    """A seeded sample of the real successes of the deployments the failures come from."""
    deployments = sorted(set(failures["deployment"].to_pylist()))
    ok = real.filter(pc.and_(pc.equal(real["outcome"], "success"),
                             pc.is_in(real["deployment"], value_set=pa.array(deployments))))
    rng = np.random.default_rng(config.seed)
    keep = rng.choice(ok.num_rows, size=min(config.baseline_successes, ok.num_rows),
                      replace=False)
    return ok.take(pa.array(np.sort(keep)))


def check_analysable(ds: Dataset, real: pa.Table) -> None:
    """Before any work: there are sim rollouts to match against and real episodes to match.

    Raises:
        DatasetError: no sim episodes, or no real episodes (of the deployments asked for).
    """
    if sim_episodes(ds).num_rows == 0:
        raise DatasetError("no sim episodes (source = sim), nor normal real runs declared "
                           "source = reference: matching needs one or the other",
                           file=str(ds.root), column="source")
    if real.num_rows == 0:
        raise DatasetError("no real episodes (source = real): nothing to analyse",
                           file=str(ds.root), column="source")


def sim_episodes(ds: Dataset) -> pa.Table:
    """The sim rollouts, or the normal real runs that stand in for them (``reference``)."""
    return ds.episodes.filter(pc.is_in(ds.episodes["source"], value_set=pa.array(BANK_SOURCES)))


def compared_with(ds: Dataset) -> str:
    """What real runs are compared with: ``simulation``, or ``normal operation`` where the
    dataset declares normal real runs as its reference (no simulator exists)."""
    reference = pc.any(pc.equal(ds.episodes["source"], "reference")).as_py()
    return "normal operation" if reference else "simulation"


def real_episodes(ds: Dataset, deployments: Sequence[str] | None = None) -> pa.Table:
    """The real episodes, optionally of some deployments only.

    Raises:
        UsageError: a named deployment is not in the dataset.
    """
    episodes = ds.episodes
    real = episodes.filter(pc.equal(episodes["source"], "real"))
    if deployments is None:
        return real
    unknown = sorted(set(deployments) - set(ds.deployments))
    if unknown:
        msg = (f"deployment(s) {', '.join(unknown)} not in {ds.root}; "
               f"known: {', '.join(ds.deployments)}")
        raise UsageError(msg)
    return real.filter(pc.is_in(real["deployment"], value_set=pa.array(list(deployments))))


def by_episode(ds: Dataset, episode_ids: Sequence[str], scratch: Path,
               stages: Stages) -> Dataset:
    """``ds``, its signals regrouped by episode into ``scratch`` unless they are clustered
    already; the progress display says which, and why."""
    layout = clustering(ds.signal_files)
    if layout.clustered:
        stages.note(f"signals: {layout.why}")
        return ds
    stages.note(f"signals not clustered by episode ({layout.why}): the "
                f"{len(set(episode_ids)):,} episodes analysed are regrouped in one pass")
    with stages.stage("regroup signals by episode", 1):
        return regroup(ds, episode_ids, scratch / "signals")


def fit_yardstick(
    ds: Dataset, real: pa.Table, config: AnalysisConfig, stages: Stages,
    executor: Executor | None = None, scratch: Path | None = None,
) -> Yardstick:
    """Resample the sim rollouts, fit the matcher and calibrate the scores.

    Args:
        ds: the dataset.
        real: the real episodes whose successes serve as reference.
        config: analysis settings.
        stages: progress display.
        executor: runs signal shards and chunks of null comparisons; ``None``: here.
        scratch: where large grids are memory-mapped; ``None``: in memory.

    Raises:
        DatasetError: the dataset has no sim rollouts.
    """
    rng = np.random.default_rng(config.seed)
    sim = sim_episodes(ds)
    check_analysable(ds, real)
    successes = real.filter(pc.equal(real["outcome"], "success"))
    failures = real.filter(pc.equal(real["outcome"], "failure"))
    warnings = list(ds.warnings)
    channels = list(ds.channels)
    with stages.stage("resample sim rollouts", 1):
        sim_ids = sim["episode_id"].to_pylist()
        base = time_base(ds, {"sim": sim_ids, "real": failures["episode_id"].to_pylist()},
                         channels, config.rate_hz)
        durations = ds.durations
        sim_full = _grid(ds, sim_ids, channels, base, "sim", executor, scratch)
    in_sim = sim_full.recorded()
    sim_channels = [c for c, ok in zip(channels, in_sim, strict=True) if ok]
    ref_channels = [c for c, ok in zip(channels, in_sim, strict=True) if not ok]
    if ref_channels and successes.num_rows == 0:
        warnings.append("channels absent from sim, left out (no real successes to compare "
                        "them against): " + ", ".join(ref_channels))
        ref_channels = []
    warnings += _tasks_apart(failures, sim, successes, ref_channels)
    # channels sim lacks are otherwise no warning: the report lists them
    # (dataset.reference_channels)
    # Narrowed in place: a copy of the sim channels beside the full grid would double the
    # peak memory of the largest array of the analysis.
    bank = RolloutBank(sim_full.narrow(sim_channels), column_values(sim, "task"),
                       column_values(sim, "outcome") == "failure", _floats(sim, "failure_time"),
                       context_table(sim), tuple(ds.channels[c].family for c in sim_channels))
    del sim_full
    matcher = RolloutMatcher(config.n_neighbors, config.n_points).fit(bank)
    reference = None
    if ref_channels:
        kept = _sample_per_task(successes, config.reference_successes, rng)
        ids = kept["episode_id"].to_pylist()
        reference = Reference(_grid(ds, ids, ref_channels, base, "real", executor, scratch),
                              column_values(kept, "task"))
    ordered = sim_channels + ref_channels
    families = tuple(ds.channels[c].family for c in ordered)
    with stages.stage("calibrate on sim vs sim", 1):
        scorer = _calibrate(bank, matcher, reference, families, len(ref_channels), config, rng,
                            executor)
    warnings += reference_warnings(ds, sim, failures, config)
    return Yardstick(ds, matcher, reference, scorer, tuple(ordered), len(sim_channels),
                     sys_findings(real), base, durations, tuple(warnings), scratch)


# Fewer reference episodes per task than this: matches and calibration are rough.
FEW_REFERENCE = 30


def reference_warnings(ds: Dataset, bank: pa.Table, failures: pa.Table,
                       config: AnalysisConfig) -> list[str]:
    """What about the reference makes the comparison weak: a window longer than the
    episodes, very few reference episodes of a task, a reference that never fails."""
    what = ("normal runs (source = reference)" if compared_with(ds) == "normal operation"
            else "sim rollouts")
    out = []
    lengths = [ds.durations[e] for e in failures["episode_id"].to_pylist()
               if e in ds.durations]
    # Whole-episode comparison is the design for short tasks (the demo's 10 s window over
    # episodes of 1 to 6 s); a window several times the longest failure says the time
    # scale was not chosen for this data (10 s over 0.3 s episodes).
    if lengths and config.window_s > 4 * max(lengths):
        out.append(f"the analysis window ({config.window_s:g} s) is far longer than the "
                   f"failures' episodes (longest {max(lengths):.3g} s): every comparison "
                   "covers whole episodes; a --window on the episodes' time scale compares "
                   "the moments before the failure")
    tasks, counts = np.unique(column_values(bank, "task"), return_counts=True)
    for task, count in zip(tasks.tolist(), counts.tolist(), strict=True):
        if count < FEW_REFERENCE:
            out.append(f"task {task!r}: only {count} {what} to compare with (fewer than "
                       f"{FEW_REFERENCE}): matches and their calibration are rough")
    if not (column_values(bank, "outcome") == "failure").any():
        out.append(f"no {what} fail: the reference predicts no failures, so no place is "
                   "reported as failing more often than it predicts")
    return out


def score_failures(
    yardstick: Yardstick, failures: pa.Table, config: AnalysisConfig, stages: Stages,
    executor: Executor | None = None, also: Sequence[str] = (),
) -> tuple[Signatures, SignalGrid, np.ndarray]:
    """Match real failures to sim and compute their drift signatures.

    ``executor`` runs signal shards and chunks of failures; ``None`` runs them here.
    ``also``: more episodes to read onto the grid in the same pass, after the failures.

    Returns:
        The signatures, the failures on the time grid, and their failure times.
    """
    ds = yardstick.dataset
    ids = failures["episode_id"].to_pylist()
    channels = list(yardstick.channels)
    read = ids + list(also)
    with stages.stage("read real failures", 1):
        grid = _grid(ds, read, channels, yardstick.time, "real", executor, yardstick.scratch)
    ends = _floats(failures, "failure_time")
    ends = np.where(np.isfinite(ends), ends, grid.durations[: len(ids)])
    queries = QuerySet(grid, np.arange(len(ids)), column_values(failures, "task"), ends,
                       config.window_s, context_table(failures))
    n_sim = yardstick.sim_channels
    with stages.stage("match failures to sim", len(ids)):
        diffs, nearest = compare(queries, list(range(n_sim)),
                                 list(range(n_sim, len(channels))), yardstick.matcher,
                                 yardstick.reference, config.n_segments, executor)
    bank = yardstick.matcher.bank_
    novelty = context_novelty(queries.context, queries.tasks, bank.context, bank.tasks)
    families = [ds.channels[c].family for c in channels]
    sig = signatures(ids, diffs, nearest, channels, families, yardstick.scorer, novelty,
                     queries.tasks, _sys_rows(failures), yardstick.findings)
    return sig, grid, ends


def _calibrate(
    bank: RolloutBank,
    matcher: RolloutMatcher,
    reference: Reference | None,
    families: tuple[str, ...],
    n_ref_channels: int,
    config: AnalysisConfig,
    rng: np.random.Generator,
    executor: Executor | None = None,
) -> DriftScorer:
    """Fit the scorer on sim rollouts matched against the other rollouts (and successes
    against the other successes), so that no gap reads as a drift score of about 1."""
    n = bank.grid.values.shape[0]
    rows = np.sort(rng.choice(n, size=min(config.null_samples, n), replace=False))
    ends = _pseudo_failure_times(bank.failed[rows], bank.failure_time[rows],
                                 bank.grid.durations[rows], rng)
    queries = QuerySet(bank.grid, rows, bank.tasks[rows], ends, config.window_s,
                       bank.context.take(rows), exclude_self=True)
    sim_null, _ = compare(queries, list(range(len(bank.grid.channels))), [], matcher, None,
                          config.n_segments, executor)
    null = sim_null
    if reference is not None:
        m = reference.grid.values.shape[0]
        ref_rows = np.sort(rng.choice(m, size=min(config.null_samples, m), replace=False))
        ref_ends = _pseudo_failure_times(np.zeros(len(ref_rows), bool), np.full(len(ref_rows),
                                         np.nan), reference.grid.durations[ref_rows], rng)
        ref_queries = QuerySet(reference.grid, ref_rows, reference.tasks[ref_rows], ref_ends,
                               config.window_s, ContextTable(len(ref_rows), {}, {}),
                               exclude_self=True)
        ref_null, _ = compare(ref_queries, [], list(range(n_ref_channels)), matcher,
                              reference, config.n_segments, executor)
        null = [SegmentDiff.join([d, ref_null[i % len(ref_null)]])
                for i, d in enumerate(sim_null)]
    scale = [matcher.scale_]
    if reference is not None:
        flat = reference.grid.values.reshape(-1, reference.grid.values.shape[-1])
        scale.append(np.nan_to_num(np.nanstd(flat, axis=0), nan=1.0))
    return DriftScorer(families).fit(null, np.concatenate(scale), failed=bank.failed[rows])


def _grid(ds: Dataset, ids: list[str], channels: Sequence[str], base: TimeBase, source: str,
          executor: Executor | None, scratch: Path | None) -> SignalGrid:
    """The episodes ``ids`` of ``source`` on the time grid, once it is known to fit (in
    memory, or on the disk of ``scratch``, where large grids are mapped from)."""
    check_grid_fits(base, ds.durations, ids, len(channels), str(ds.root), scratch)
    t_max = max((ds.durations.get(e, 0.0) for e in ids), default=0.0)
    return build_grid(ds, ids, channels, base.dt, t_max, executor, base.periods.get(source),
                      scratch)


def _tasks_apart(failures: pa.Table, sim: pa.Table, successes: pa.Table,
                 ref_channels: Sequence[str]) -> list[str]:
    """Warnings for real failures of a task that sim never ran (no nearest sim: only their
    context speaks) or, where some channels are compared with real successes, of a task
    that has none (those channels say nothing about them)."""
    tasks = column_values(failures, "task")
    cases = [(sim, "a task sim never ran", "no nearest sim rollouts, only their context is "
                                           "compared")]
    if ref_channels:
        cases.append((successes, "a task with no real success",
                      ", ".join(ref_channels) + " not compared for them"))
    out = []
    for others, what, effect in cases:
        # A set of the few distinct tasks, not np.isin: on object arrays that sorts every
        # sim rollout's task (2 s on the bench's `s` fleet).
        ran = _distinct_strings(others, "task")
        apart = np.fromiter((task not in ran for task in tasks), dtype=bool, count=tasks.size)
        if apart.any():
            names, counts = np.unique(tasks[apart], return_counts=True)
            listing = ", ".join(f"{t!r} ({n})" for t, n in zip(names, counts, strict=True))
            out.append(f"{int(apart.sum())} real failure(s) of {what} ({listing}): {effect}")
    return out




def _distinct_strings(table: pa.Table, column: str) -> set[object]:
    """The distinct values of ``column`` (``None`` standing for a missing column's rows,
    as in :func:`_strings`), hashed in Arrow rather than listed row by row."""
    if column not in table.column_names:
        return {None} if table.num_rows else set()
    return set(pc.unique(table[column]).to_pylist())


def _floats(table: pa.Table, column: str) -> np.ndarray:
    if column not in table.column_names:
        return np.full(table.num_rows, np.nan)
    return table[column].to_numpy(zero_copy_only=False).astype(float)


def _sample_per_task(table: pa.Table, n: int, rng: np.random.Generator) -> pa.Table:
    """At most ``n`` rows per task, chosen at random, in their original order."""
    tasks = column_values(table, "task")
    keep: list[int] = []
    for task in sorted(set(tasks)):
        rows = np.flatnonzero(tasks == task)
        keep.extend(rng.choice(rows, size=min(n, rows.size), replace=False).tolist())
    return table.take(pa.array(sorted(keep), pa.int64()))  # typed: none kept is no error


def _pseudo_failure_times(
    failed: np.ndarray, failure_time: np.ndarray, durations: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """A failed rollout ends at its failure; a success at a random point of its run."""
    random_end = durations * rng.uniform(0.3, 1.0, size=durations.shape)
    own = np.where(np.isfinite(failure_time), failure_time, durations)
    return np.where(failed, own, random_end)


def _sys_rows(table: pa.Table) -> list[dict[str, str | None]]:
    columns = [c for c in table.column_names if c.startswith("sys.")]
    values = {c: table[c].cast(pa.string()).to_pylist() for c in columns}
    return [{c: values[c][i] for c in columns} for i in range(table.num_rows)]
