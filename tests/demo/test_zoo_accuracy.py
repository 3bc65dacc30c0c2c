"""The zoo's CI subset: six small worlds that together set every trap class, scored.

The issue's targets are mean ARI >= 0.8, taxonomy >= 90 %, top parameter >= 85 %, first
action >= 85 %, validate all right and no-gap worlds silent. The bars below start at what the
analysis reaches today, a little under it so that a regression fails, and only ever go up.
Measured (2026-12-05, shared 2-core machine, about 70 s for the six worlds):

    seed 500  perception_site, dynamics_via_perception, system_via_perception  ARI 0.53
    seed 501  same_family_pair, fleetwide_thin                                 ARI 0.64
    seed 502  unseen_context, confounders                                      ARI 0.75
    seed 503  validate (size 1)                                                ARI 0.47
    seed 504  same_place_modes                                                 ARI 0.62
    seed 505  no_gap                                                           silent
    mean ARI 0.60; taxonomy 9/13 causes; top-1 parameter 4/8; first action 6/13;
    validate verdicts 1/2 (the late cause is new; the fixed one, 11 failures, is missed);
    fastest growing 3/5; no confident cluster of background failures.

Seeds 500-505 are neither the tuned-on (0-39) nor the held-back (1000-1039) range of
``bench/zoo.py``; they were taken in order, not picked by outcome.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim2real.demo.scoring import WorldScore, generate_and_score
from sim2real.demo.zoo import TRAP_CLASSES

# seed -> (trap classes, size)
_WORLDS: dict[int, tuple[list[str], float]] = {
    500: (["perception_site", "dynamics_via_perception", "system_via_perception"], 0.6),
    501: (["same_family_pair", "fleetwide_thin"], 0.6),
    502: (["unseen_context", "confounders"], 0.6),
    503: (["validate"], 1.0),  # at 0.6 its causes have too few failures to be scored
    504: (["same_place_modes"], 0.6),
    505: (["no_gap"], 0.6),
}
_MEAN_ARI = 0.55     # measured 0.60
_TAXONOMY = 0.6      # measured 9/13 = 0.69 (8/13 passes, 7/13 fails)
_TOP_PARAM = 0.35    # measured 4/8 = 0.50 (3/8 passes)
_FIRST_ACTION = 0.38  # measured 6/13 = 0.46 (5/13 passes)
_VALIDATE = 1        # verdicts right, measured 1 of 2


@pytest.fixture(scope="session")
def scores(tmp_path_factory: pytest.TempPathFactory) -> dict[int, WorldScore]:
    root = tmp_path_factory.mktemp("zoo-accuracy")
    return {seed: generate_and_score(seed, root / str(seed), traps=traps, size=size)
            for seed, (traps, size) in _WORLDS.items()}


def _share(values: list[bool | None]) -> float:
    known = [v for v in values if v is not None]
    return sum(known) / len(known)


def _summary(scores: dict[int, WorldScore]) -> dict[int, str]:
    return {seed: f"ARI {s.ari}; " + ", ".join(
        f"{c.name}: tax {c.taxonomy_right} par {c.param_right} act {c.action_right}"
        for c in s.causes) for seed, s in scores.items()}


def test_the_subset_sets_every_trap_class(scores: dict[int, WorldScore]) -> None:
    scored = {c.trap for s in scores.values() for c in s.causes}
    assert scored | {"no_gap"} == set(TRAP_CLASSES)


def test_clusters_agree_with_the_causes(scores: dict[int, WorldScore]) -> None:
    ari = [s.ari for s in scores.values() if s.ari is not None]
    assert float(np.mean(ari)) >= _MEAN_ARI, _summary(scores)


def test_prescriptions(scores: dict[int, WorldScore]) -> None:
    causes = [c for s in scores.values() for c in s.causes]
    assert _share([c.taxonomy_right for c in causes]) >= _TAXONOMY, _summary(scores)
    assert _share([c.param_right for c in causes]) >= _TOP_PARAM, _summary(scores)
    assert _share([c.action_right for c in causes]) >= _FIRST_ACTION, _summary(scores)


def test_validate_verdicts(scores: dict[int, WorldScore]) -> None:
    verdicts = scores[503].validate
    assert len(verdicts) == 2
    assert sum(verdicts.values()) >= _VALIDATE, verdicts


def test_no_gap_world_is_silent(scores: dict[int, WorldScore]) -> None:
    assert scores[505].no_gap and scores[505].silent
    assert not any(s.confident_wrong for s in scores.values())
