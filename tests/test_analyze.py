"""End to end: the analysis scored against worlds whose root causes are known."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import sim2real
from sim2real._progress import Stages
from sim2real.cli import main
from sim2real.demo.scoring import score_report
from sim2real.drift.compute import QuerySet, compare
from sim2real.drift.signature import SegmentDiff
from sim2real.match.context import ContextTable
from sim2real.pipeline import AnalysisConfig, fit_yardstick, real_episodes

from .conftest import ObjectStore, World


@pytest.fixture(scope="module")
def standard_report(standard: World) -> sim2real.Report:
    return sim2real.analyze(standard.dataset)


# Measured: standard 0.96, renamed 0.88, fleetwide 0.91. The renamed world (other channel
# names and rates, two tasks, two dynamics causes that must stay apart) is harder: its early
# worn-pad failures are barely outside sim's range. In the fleetwide world a cause is thin
# on every robot, so where failures happen helps least. Both are held to a lower bar.
@pytest.mark.parametrize(("world_name", "min_ari"),
                         [("standard", 0.9), ("renamed", 0.8), ("fleetwide", 0.8)])
def test_clusters_match_the_injected_causes(world_name: str, min_ari: float,
                                            request: pytest.FixtureRequest) -> None:
    world: World = request.getfixturevalue(world_name)
    report = sim2real.analyze(world.dataset)
    card = score_report(report.model, world.key)
    assert card.ari >= min_ari, card
    assert all(card.taxonomy_right.values()), card
    assert card.fastest_growing_right, card
    assert not card.confident_wrong, card


def test_no_gap_fleet_yields_no_confident_cluster(no_gap: World) -> None:
    report = sim2real.analyze(no_gap.dataset)
    confident = [c for c in report.model.clusters
                 if c.taxonomy != "unexplained" and c.confidence >= 0.5]
    assert confident == []
    assert report.model.fastest_growing is None
    scores = [e.drift_score for e in report.model.events]
    assert 0.5 < float(np.median(scores)) < 1.6


def test_sim_against_sim_scores_about_one(standard: World) -> None:
    """Held-out sim rollouts (and real successes, for channels sim lacks) matched against the
    rest score about 1: the calibration generalises beyond the sample it was fitted on."""
    ds = sim2real.load_dataset(standard.dataset)
    config = AnalysisConfig(null_samples=150, seed=1)
    yardstick = fit_yardstick(ds, real_episodes(ds), config, Stages(enabled=False))
    bank, reference = yardstick.matcher.bank_, yardstick.reference
    assert reference is not None  # the standard world has real-only system channels
    rng = np.random.default_rng(7)
    rows = rng.choice(bank.grid.values.shape[0], size=120, replace=False)
    ends = bank.grid.durations[rows] * rng.uniform(0.3, 1.0, size=rows.size)
    ends = np.where(bank.failed[rows] & np.isfinite(bank.failure_time[rows]),
                    bank.failure_time[rows], ends)
    sim_queries = QuerySet(bank.grid, rows, bank.tasks[rows], ends, config.window_s,
                           bank.context.take(rows), exclude_self=True)
    sim_diffs, _ = compare(sim_queries, list(range(yardstick.sim_channels)), [],
                           yardstick.matcher, None, config.n_segments)
    ref_rows = rng.choice(reference.grid.values.shape[0], size=120, replace=False)
    ref_ends = reference.grid.durations[ref_rows] * rng.uniform(0.3, 1.0, size=120)
    ref_queries = QuerySet(reference.grid, ref_rows, reference.tasks[ref_rows], ref_ends,
                           config.window_s, ContextTable(120, {}, {}), exclude_self=True)
    n_ref = len(yardstick.channels) - yardstick.sim_channels
    ref_diffs, _ = compare(ref_queries, [], list(range(n_ref)), yardstick.matcher, reference,
                           config.n_segments)
    scorer = yardstick.scorer
    drift = []
    for d, r in zip(sim_diffs, ref_diffs, strict=True):
        _, _, family, _ = scorer.score(SegmentDiff.join([d, r]))
        drift.append(scorer.drift(family, 0.0))
    assert 0.8 < float(np.median(drift)) < 1.25


def test_background_failures_score_low_and_causes_high(standard: World,
                                                       standard_report: sim2real.Report) -> None:
    by_cause: dict[str, list[float]] = {}
    for event in standard_report.model.events:
        by_cause.setdefault(standard.truth[event.episode_id], []).append(event.drift_score)
    assert np.median(by_cause.pop("background")) < 1.5
    for cause, scores in by_cause.items():
        assert np.median(scores) > 1.5, cause


def test_report_is_deterministic_and_follows_the_spec(standard: World,
                                                      standard_report: sim2real.Report,
                                                      tmp_path: Path) -> None:
    again = sim2real.analyze(standard.dataset)
    assert again.to_json() == standard_report.to_json()
    standard_report.save(tmp_path / "out")
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["schema_version"] == 1
    assert set(data["dataset"]) >= {"episodes_real", "episodes_sim", "failures",
                                    "deployments", "tasks"}
    assert data["dataset"]["deployments"] == sorted(data["dataset"]["deployments"])
    event = data["events"][0]
    assert set(event) >= {"episode_id", "deployment", "cluster_id", "drift_score",
                          "family_scores", "top_channels", "nearest_sim"}
    assert set(event["family_scores"]) == {"perception", "dynamics", "policy", "system",
                                           "task_scope"}
    cluster = data["clusters"][0]
    assert set(cluster) >= {"cluster_id", "taxonomy", "confidence", "explanation", "size",
                            "events", "trend", "top_channels", "sim_params", "actions"}
    assert set(cluster["trend"]) >= {"per_deployment", "growth", "p_value"}
    assert len(cluster["trend"]["per_deployment"]) == len(data["dataset"]["deployments"])
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<script src=\"http" not in html


def test_cli_analyze_writes_the_run_folder(standard: World, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["analyze", str(standard.dataset), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "fastest growing" in result.output
    assert {p.name for p in out.iterdir()} >= {"report.json", "report.html",
                                               "signatures.parquet", "traces.parquet"}
    names = pq.read_schema(out / "signatures.parquet").names
    channels = [n[2:] for n in names if n.startswith("z.")]
    assert channels and [n[6:] for n in names if n.startswith("rough.")] == channels


def test_help_reads_like_a_manual() -> None:
    runner = CliRunner()
    top = runner.invoke(main, ["--help"])
    assert top.exit_code == 0 and "analyze" in top.output
    sub = runner.invoke(main, ["analyze", "--help"])
    assert "drift signature" in sub.output and "--previous" in sub.output


def test_validate_speaks_of_the_report_clusters(standard: World,
                                                standard_report: sim2real.Report) -> None:
    fixed = next(c for c in standard.key["causes"] if c["fixed_in"])
    deployments = standard_report.model.dataset.deployments
    split = deployments.index(fixed["fixed_in"])
    result = sim2real.validate(standard.dataset, deployments[:split], deployments[split:],
                               previous=standard_report.model)
    by_taxonomy = {c.taxonomy: c.cluster_id for c in standard_report.model.clusters}
    verdicts = {c.cluster_id: c.verdict for c in result.model.clusters}
    system = by_taxonomy["deployment_system_noise"]
    assert verdicts[system] in {"shrank", "gone"}


def test_dataset_on_s3_gives_the_same_report(standard: World, standard_report: sim2real.Report,
                                             s3: ObjectStore, tmp_path: Path) -> None:
    uri = s3.upload(standard.dataset, "standard")
    result = CliRunner().invoke(main, ["analyze", uri, "-o", str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 0, result.output
    remote = json.loads((tmp_path / "run" / "report.json").read_text())
    local = json.loads(standard_report.to_json())
    assert remote["dataset"].pop("path") == "s3://bucket/standard"
    local["dataset"].pop("path")
    assert remote == local
