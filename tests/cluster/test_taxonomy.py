"""Naming a cluster's family: what sim's parameters say outranks which channels show most;
the explanation names a channel that spikes beyond sim's own."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from sim2real.cluster.taxonomy import label_cluster
from sim2real.drift.compute import Signatures
from sim2real.drift.evidence import Novelty


def _signatures(perception: float, dynamics: float, n: int = 12,
                system: float = 0.0) -> Signatures:
    """``n`` events deviating ``perception`` and ``dynamics`` (and on their system channels
    ``system``) times sim's variability."""
    scores = np.zeros((n, 5))
    scores[:, 0], scores[:, 1], scores[:, 3] = perception, dynamics, system
    return Signatures(
        episode_ids=tuple(f"e{i}" for i in range(n)), channels=("pose_err", "wheel_slip"),
        channel_families=("perception", "dynamics"), z=np.zeros((n, 4, 2)),
        rough=np.zeros((n, 2)),
        effects=np.tile([perception, dynamics], (n, 1)), family_scores=scores,
        onset=np.zeros((n, 4)), novelty=Novelty({}, [[] for _ in range(n)]),
        sys_values=[[] for _ in range(n)], sys_evidence=np.zeros(n),
        system_channels=np.full(n, system), drift_score=np.full(n, perception),
        nearest=[[] for _ in range(n)], null_effects=np.zeros((0, 2)),
        null_z=np.zeros((0, 4, 2)), null_rough=np.zeros((0, 2)),
        null_failed=np.zeros(0, dtype=bool))


def _taxonomy(sig: Signatures, **hints: Any) -> str:
    """The taxonomy of all of ``sig``'s events as one cluster, placed nowhere."""
    rows = np.arange(len(sig.episode_ids))
    places = np.full(len(rows), None, dtype=object)
    return label_cluster(sig, rows, places, places, **hints).taxonomy


def test_the_parameter_the_events_point_to_names_the_family() -> None:
    # Worn wheels: localisation deviates 16x, the slips themselves 3.3x.
    slips = _signatures(16.0, 3.3)
    assert _taxonomy(slips) == "perception_drift"
    assert _taxonomy(slips, lead="dynamics") == "dynamics_mismatch"
    # A camera offset whose failures look like sim's own, only more often.
    offset = _signatures(1.4, 0.3)
    assert _taxonomy(offset) == "unexplained"
    assert _taxonomy(offset, lead="perception") == "perception_drift"
    # A system lead does not outrank channels: sim cannot reproduce what the stack does.
    assert _taxonomy(slips, lead="system") == "perception_drift"


def test_a_lead_is_as_sure_as_the_channels_its_parameter_moves_in_sim() -> None:
    # Worn wheels whose slips sim shows as localisation error: the friction names the
    # family, and every failure deviates most where that friction shows.
    slips = _signatures(16.0, 2.3)
    rows = np.arange(len(slips.episode_ids))
    places = np.full(len(rows), None, dtype=object)
    label = label_cluster(slips, rows, places, places, lead="dynamics",
                          lead_shows="perception")
    assert label.taxonomy == "dynamics_mismatch" and label.confidence > 0.9
    # Where sim shows the friction on the wheels only, the failures do not agree with it.
    unsure = label_cluster(slips, rows, places, places, lead="dynamics", lead_shows="dynamics")
    assert unsure.taxonomy == "dynamics_mismatch" and unsure.confidence == 0.0


def test_a_weak_pull_breaks_a_tie_before_onset_does() -> None:
    # Slipping wheels: localisation 8x, the slips 10x, both from the first segment on.
    slips = _signatures(8.0, 10.0)
    assert _taxonomy(slips) == "perception_drift"
    assert _taxonomy(slips, tie="dynamics") == "dynamics_mismatch"
    # It breaks ties only: a family deviating several times more keeps its name.
    assert _taxonomy(_signatures(16.0, 3.3), tie="dynamics") == "perception_drift"


def test_system_channels_outrank_a_physical_explanation() -> None:
    # Late frames look like dim light, and the light parameter reproduces half of it; the
    # latency channel, which no sim parameter moves, deviates more.
    late = _signatures(7.5, 1.0, system=9.5)
    light = {"perception": (0.5, ("light",)), "dynamics": (0.0, ())}
    assert _taxonomy(late, explanation=light) == "deployment_system_noise"
    dim = _signatures(7.5, 1.0, system=1.0)
    assert _taxonomy(dim, explanation=light) == "perception_drift"


def test_the_explanation_names_a_channel_that_spikes_beyond_sims_own() -> None:
    impacts = dataclasses.replace(
        _signatures(0.5, 6.0), rough=np.tile([0.4, 14.0], (12, 1)),
        null_rough=np.random.default_rng(0).normal(0.0, 1.0, (300, 2)))
    rows = np.arange(12)
    places = np.full(12, None, dtype=object)
    text = label_cluster(impacts, rows, places, places).explanation
    assert "wheel_slip jitters or spikes more than in the sim rollouts (roughness +14.0σ)" in text
    # A roughness within what sim-vs-sim comparisons show is not cited.
    calm = dataclasses.replace(impacts, rough=np.tile([0.4, 1.5], (12, 1)))
    assert "roughness" not in label_cluster(calm, rows, places, places).explanation
