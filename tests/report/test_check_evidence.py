"""Counterfactual checks beside a run become evidence on the actions they tested."""

from __future__ import annotations

import json
from pathlib import Path

from sim2real.report.build import with_check_evidence
from sim2real.report.snapshot import Report
from sim2real.sim.check import CHECK_JSON, check_evidence


def test_check_beside_a_run_lands_on_the_param_action(report: Report, tmp_path: Path) -> None:
    cluster = next(c for c in report.model.clusters
                   if any(a.target.startswith("param.") for a in c.actions))
    verdict = "reproduces: replays now fail 60% of the time (real 70%)"
    (tmp_path / CHECK_JSON).write_text(json.dumps({"cluster_id": cluster.cluster_id,
                                                   "verdict": verdict}))
    updated = with_check_evidence(report, check_evidence(tmp_path))
    changed = next(c for c in updated.model.clusters if c.cluster_id == cluster.cluster_id)
    tested = next(a for a in changed.actions if a.target.startswith("param."))
    assert tested.evidence is not None and verdict in tested.evidence
    others = [c for c in updated.model.clusters if c.cluster_id != cluster.cluster_id]
    assert others == [c for c in report.model.clusters if c.cluster_id != cluster.cluster_id]


def test_no_checks_leave_the_report_as_it_was(report: Report, tmp_path: Path) -> None:
    assert with_check_evidence(report, check_evidence(tmp_path)) is report
