"""Validate verdicts are scored like every per-cause measure: only causes big enough to cluster."""

from __future__ import annotations

from pathlib import Path

from sim2real.demo.scoring import MIN_SCORED_FAILURES, _verdicts
from sim2real.demo.zoo import CauseKey, WorldKey
from sim2real.report.model import RateSummary, ValidationCluster, ValidationModel


def _cause(name: str, n_failures: int) -> CauseKey:
    return CauseKey(name=name, trap="validate", mechanism="friction", taxonomy="dynamics_mismatch",
                    key_param=None, true_value=None, outside_range=None, context=None,
                    actions=("recalibrate_param",), robots=("r1",), sites=("s1",),
                    deployments=("d1", "d2"), fixed_in="d2", n_failures=n_failures)


def _key(causes: tuple[CauseKey, ...]) -> WorldKey:
    expect = {c.name: ("shrank", "gone") for c in causes}
    return WorldKey(root=Path("."), dataset=Path("."), path=Path("."), seed=0,
                    traps=("validate",), no_gap=False, causes=causes, fastest_growing=None,
                    validate=(("d1",), ("d2",), expect), events={}, document={})


def _validation(verdict: str) -> ValidationModel:
    rates = RateSummary(episodes=100, failures=10, rate=0.1)
    cluster = ValidationCluster(cluster_id="c0", taxonomy="dynamics_mismatch", baseline=rates,
                                candidate=rates, rate_ratio=1.0, ci_low=0.5, ci_high=2.0,
                                p_value=1.0, verdict=verdict)  # type: ignore[arg-type]
    return ValidationModel(baseline=["d1"], candidate=["d2"], clusters=[cluster])


def test_a_cause_too_small_to_cluster_is_not_scored() -> None:
    key = _key((_cause("big", MIN_SCORED_FAILURES), _cause("small", MIN_SCORED_FAILURES - 1)))
    got = _verdicts(key, {"big": "c0", "small": None}, _validation("shrank"))
    assert got == {"big": True}


def test_a_wrong_verdict_of_a_scored_cause_counts() -> None:
    key = _key((_cause("big", 40),))
    assert _verdicts(key, {"big": "c0"}, _validation("unchanged")) == {"big": False}


def test_a_parameter_action_counts_only_on_the_causes_own_parameter() -> None:
    from dataclasses import replace

    from sim2real.demo.scoring import _fits
    from sim2real.report.model import Action

    pads = replace(_cause("worn_pads", 40), key_param="pad_mu",
                   actions=("recalibrate_param", "widen_randomization"))

    def action(kind: str, target: str) -> Action:
        return Action(kind=kind, target=target, detail="", expected_reduction=0.5)

    assert _fits(action("widen_randomization", "param.pad_mu"), pads)
    assert not _fits(action("widen_randomization", "param.floor_mu"), pads)
    assert not _fits(action("investigate", "cluster events"), pads)
    # A cause with no key parameter is scored on the kind alone.
    assert _fits(action("recalibrate_param", "param.anything"), _cause("friction", 40))
