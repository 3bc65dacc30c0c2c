"""The zoo's CI subset: six small worlds that together set every trap class, scored.

The issue's targets are mean ARI >= 0.8, taxonomy >= 90 %, top parameter >= 85 %, first
action >= 85 %, validate all right and no-gap worlds silent. The bars below start at what the
analysis reaches today, a little under it so that a regression fails, and only ever go up.
Measured (2026-12-05, main at 1bd7dd7 merged, shared 2-core machine, about 45 s for the six
worlds):

    seed 500  perception_site, dynamics_via_perception, system_via_perception  ARI 0.51
    seed 501  same_family_pair, fleetwide_thin                                 ARI 0.67
    seed 502  unseen_context, confounders                                      ARI 0.69
    seed 503  validate                                                         ARI 0.72
    seed 504  same_place_modes                                                 ARI 0.70
    seed 505  no_gap                                                           silent
    mean ARI 0.66; taxonomy 8/12 causes; top-1 parameter 5/7; first action 7/12;
    validate verdicts 2/2; fastest growing 4/5; no confident cluster of background
    failures; on every world sim2real's ARI beats the KMeans yardstick (0.36, 0.45, 0.18,
    0.49, 0.35). At 5d2e651 (the prescription work of issue 16 merged) the same except
    first action 9/12, so its bar went up. With the family named by the parameter the
    events point to (2026-12-05 afternoon): taxonomy 10/12, first action 10/12, the rest
    the same; both bars went up. With each channel's level and size in the clustering
    space (2026-12-06, 6b1b4ed): ARI 0.56, 0.83, 0.69, 0.85, 0.71 (mean 0.73), so its bar
    went up; fastest growing 3 of 5 (one lost, at its bar); the rest the same.

Seeds 500-505 are neither the tuned-on (0-39) nor the held-back (1000-1039) range of
``bench/zoo.py``; they were taken in order, not picked by outcome.
"""

from __future__ import annotations

import numpy as np
import pytest

from sim2real.demo.scoring import WorldScore, generate_and_score
from sim2real.demo.zoo import TRAP_CLASSES

# seed -> (trap classes, size); at size 0.6 the causes of 500 and 503 have too few failures
_WORLDS: dict[int, tuple[list[str], float]] = {
    500: (["perception_site", "dynamics_via_perception", "system_via_perception"], 1.0),
    501: (["same_family_pair", "fleetwide_thin"], 0.6),
    502: (["unseen_context", "confounders"], 0.6),
    503: (["validate"], 1.0),
    504: (["same_place_modes"], 0.6),
    505: (["no_gap"], 0.6),
}
_MEAN_ARI = 0.68      # measured 0.73 at 6b1b4ed, 0.72 at dd320fe, 0.74 at 825165c; 0.66 before
_TAXONOMY = 0.74      # measured 10/12 = 0.83 (9/12 passes, 8/12 fails)
_TOP_PARAM = 0.57     # measured 5/7 = 0.71 (4/7 passes, 3/7 fails)
_FIRST_ACTION = 0.74  # measured 10/12 = 0.83 (9/12 passes, 8/12 fails); 9/12 at 5d2e651
_FASTEST = 3          # worlds whose fastest-growing cause is found, measured 3 of 5 (4 before)


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
    gap = [s for s in scores.values() if not s.no_gap]
    assert float(np.mean([s.ari for s in gap if s.ari is not None])) >= _MEAN_ARI, \
        _summary(scores)
    assert sum(s.fastest_growing_right for s in gap) >= _FASTEST, _summary(scores)


def test_clustering_keeps_what_plain_summaries_show(scores: dict[int, WorldScore]) -> None:
    """Issue 22's yardstick: a KMeans on per-failure summaries never does better."""
    for seed, s in scores.items():
        if not s.no_gap:
            assert s.ari is not None and s.yardstick_ari is not None
            assert s.ari >= s.yardstick_ari, (seed, s.ari, s.yardstick_ari)


def test_prescriptions(scores: dict[int, WorldScore]) -> None:
    causes = [c for s in scores.values() for c in s.causes]
    assert _share([c.taxonomy_right for c in causes]) >= _TAXONOMY, _summary(scores)
    assert _share([c.param_right for c in causes]) >= _TOP_PARAM, _summary(scores)
    assert _share([c.action_right for c in causes]) >= _FIRST_ACTION, _summary(scores)


def test_validate_verdicts(scores: dict[int, WorldScore]) -> None:
    verdicts = scores[503].validate
    assert len(verdicts) == 2 and all(verdicts.values()), verdicts


def test_no_gap_world_is_silent(scores: dict[int, WorldScore]) -> None:
    assert scores[505].no_gap and scores[505].silent
    assert not any(s.confident_wrong for s in scores.values())
