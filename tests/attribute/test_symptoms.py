"""A parameter named by how sim's rollouts end, where the telemetry names none."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import special

from sim2real.attribute.params import ParamEstimate
from sim2real.attribute.symptoms import symptom_lead
from sim2real.dataset.schema import ParamRange

_RANGES = {"pad_mu": ParamRange("pad_mu", 0.5, 1.5, 1.0), "mass": ParamRange("mass", 0.5, 1.5, 1.0)}


def _diagnosis(drops_follow_pads: bool, worn_rate: float, real_label: str = "dropped_object",
               sim_labels: bool = True) -> tuple[SimpleNamespace, np.ndarray]:
    """Sim: 3,000 rollouts, objects dropped more often the lower the pad friction (or,
    ``drops_follow_pads`` false, at one rate whatever it is). Real: robot r1's pads are
    worn (it drops ``worn_rate`` of its objects), r2 and r3 drop as sim does at nominal.
    ``real_label``: what the real failures are labelled; ``sim_labels``: whether sim's are."""
    rng = np.random.default_rng(0)
    n = 3000
    pad = rng.uniform(0.5, 1.5, n)
    mass = rng.uniform(0.5, 1.5, n)
    slope = -4.0 if drops_follow_pads else 0.0
    dropped = rng.random(n) < special.expit(-3.0 + slope * (pad - 1.0))
    robots = np.repeat(["r1", "r2", "r3"], 400)
    rate = np.where(robots == "r1", worn_rate, special.expit(-3.0))
    real_dropped = rng.random(len(robots)) < rate
    episodes = pa.concat_tables([
        pa.table({"source": ["sim"] * n, "task": ["pick"] * n, "robot_id": [None] * n,
                  "deployment": [None] * n, "outcome": _outcome(dropped),
                  "failure_label": _label(dropped, "dropped_object" if sim_labels else None),
                  "param.pad_mu": pad, "param.mass": mass}),
        pa.table({"source": ["real"] * len(robots), "task": ["pick"] * len(robots),
                  "robot_id": robots, "deployment": ["d1"] * len(robots),
                  "outcome": _outcome(real_dropped),
                  "failure_label": _label(real_dropped, real_label),
                  "param.pad_mu": np.full(len(robots), np.nan),
                  "param.mass": np.full(len(robots), np.nan)}),
    ], promote_options="default")
    real = episodes.filter(pc.equal(episodes["source"], "real"))
    events = real.filter(pc.equal(real["outcome"], "failure"))
    dataset = SimpleNamespace(episodes=episodes, params=_RANGES, deployments=("d1",),
                              root="fleet")
    cluster = np.flatnonzero(np.array(events["robot_id"].to_pylist()) == "r1")
    return SimpleNamespace(dataset=dataset, events=events, deployments=("d1",)), cluster


def _outcome(failed: np.ndarray) -> np.ndarray:
    return np.where(failed, "failure", "success")


def _label(failed: np.ndarray, label: str | None) -> pa.Array:
    return pa.array(np.where(failed, label, None), pa.string())


def _candidates() -> list[ParamEstimate]:
    return [ParamEstimate(name, 0.5, 1.5, 1.0, 1.0, 0.0, False, 0.1, 0.0)
            for name in ("mass", "pad_mu")]


def test_worn_pads_are_named_by_the_rate_sim_drops_objects_at() -> None:
    # r1 drops 40 % of its objects: sim does so at logit(0.4) = -3 - 4 (pad - 1), pad 0.35.
    diagnosis, rows = _diagnosis(True, 0.4)
    lead = symptom_lead(diagnosis, rows, _candidates(), {"mass": 1.0, "pad_mu": 1.0})
    assert lead is not None
    assert lead.estimate.param == "pad_mu" and lead.symptom == "dropped_object"
    assert lead.z < -5
    assert abs(lead.estimate.estimate - 0.35) < 2.5 * lead.estimate.uncertainty
    assert 0.15 < lead.estimate.estimate < 0.5 and lead.estimate.outside_range
    assert lead.estimate.symptom == "dropped_object"
    # Most of the cluster's drops are beyond sim's 4.7 % at the successes' pads.
    assert lead.share[1] < lead.share[0] < lead.share[2] and lead.share[0] > 0.8


def test_no_lead_where_sim_drops_alike_at_every_value_or_reality_drops_no_more() -> None:
    diagnosis, rows = _diagnosis(False, 0.4)
    assert symptom_lead(diagnosis, rows, _candidates(), {}) is None
    diagnosis, rows = _diagnosis(True, 0.03)  # r1 drops less often than sim at nominal
    assert symptom_lead(diagnosis, rows, _candidates(), {}) is None


def test_a_failure_sim_never_produces_is_said_to_be_missing_from_it() -> None:
    from sim2real.attribute.symptoms import all_endings_in_sim, never_in_sim

    # r1 stops in 40 % of its runs; none of sim's 3,000 rollouts does (they only drop).
    diagnosis, rows = _diagnosis(True, 0.4, real_label="protective_stop")
    symptom, n, rate = never_in_sim(diagnosis, rows)  # type: ignore[misc]
    assert (symptom, n) == ("protective_stop", 3000) and abs(rate - 0.4) < 0.06
    # Sim ends that way too, or logs no labels at all: nothing to say.
    assert never_in_sim(*_diagnosis(True, 0.4)) is None
    assert never_in_sim(*_diagnosis(True, 0.4, "protective_stop", sim_labels=False)) is None
    # A cluster ending in a way sim never shows may not have its drops explained by the
    # pads over what the telemetry pulls (actions.lead_by_symptom); one that only drops may.
    assert not all_endings_in_sim(diagnosis, rows)
    assert all_endings_in_sim(*_diagnosis(True, 0.4))


def test_a_zoo_worlds_worn_pads_get_their_friction_from_how_sim_drops(zoo_world) -> None:
    from sim2real.cluster.taxonomy import event_families

    # Tuned zoo world 31: worn pads move no telemetry sim tells within its range
    # (identifiability 0.0); before the symptom lead their cluster was told to investigate,
    # and a cluster of drops that look like sim's own (half of them the pads') was
    # `unexplained`.
    world = zoo_world(31)
    led = [f for f in world.findings if f.params and f.params[0].symptom]
    assert len(led) == 2
    for finding in led:
        lead, action = finding.params[0], finding.actions[0]
        assert lead.param == "grip_friction_vo" and lead.symptom == "dropped_object"
        assert finding.label.taxonomy == "dynamics_mismatch"
        assert action.target == "param.grip_friction_vo"
        assert "how its rollouts end" in action.detail and action.evidence.startswith("symptom")
    pads = world.holding("worn_pads_4", among=led)
    assert world.causes(pads).most_common(1)[0][0] == "worn_pads_4"
    assert pads.params[0].outside_range and pads.params[0].estimate < pads.params[0].sim_low
    assert pads.actions[0].kind == "widen_randomization"
    # The other looked like sim's in every family: the symptom named its family.
    other = next(f for f in led if f is not pads)
    own = event_families(world.diagnosis.signatures, other.rows)
    assert (own == "unexplained").mean() > 0.5


def test_failures_ending_beyond_sims_rate_are_told_from_those_sim_has_too() -> None:
    from sim2real.attribute.symptoms import beyond_sim

    # r1 drops 40 % of its objects, sim (over its pads' range) 7.5 %.
    assert beyond_sim(*_diagnosis(True, 0.4)) == ("dropped_object", 224, 3000)
    # It stops where sim never does.
    assert beyond_sim(*_diagnosis(True, 0.4, real_label="protective_stop")) == (
        "protective_stop", 0, 3000)
    # r1 drops as sim does at nominal: failures sim has too.
    assert beyond_sim(*_diagnosis(True, float(special.expit(-3.0)))) is None


def test_a_zoo_worlds_impacts_take_the_family_of_the_clusters_that_end_alike(
        zoo_world) -> None:
    # Tuned zoo world 17: an impact trips a protective stop within a step, between two
    # samples of every channel, so its failures look like sim's up to the stop; the
    # obstructions and snags of the same cell stop too, with deviations of their own.
    world = zoo_world(17)
    impacts = world.holding("impact_1")
    assert world.causes(impacts)["impact_1"] >= 0.9 * len(impacts.rows)
    assert impacts.label.taxonomy == "dynamics_mismatch"
    assert "protective_stop" in impacts.label.explanation
    assert "dynamics_mismatch clusters end" in impacts.label.explanation
    # The family says nothing about which parameter to change: the actions stay the
    # telemetry's (nothing in sim's ranges to change).
    assert impacts.actions[0].kind == "investigate"


def test_how_sim_ends_backs_moving_a_parameter_only_the_way_it_fails_more() -> None:
    from sim2real.attribute.symptoms import ending_backs

    pad, mass = _candidates()[1], _candidates()[0]
    # Sim drops more the lower the pads' friction: that backs lowering it, not raising it,
    # and nothing backs moving the mass.
    diagnosis, rows = _diagnosis(True, 0.4)
    assert ending_backs(diagnosis, rows, pad, -1.0)
    assert not ending_backs(diagnosis, rows, pad, +1.0)
    assert not ending_backs(diagnosis, rows, mass, -1.0)
    # Sim drops alike at every friction; or the cluster ends in a way sim never does.
    assert not ending_backs(*_diagnosis(False, 0.4), pad, -1.0)
    assert not ending_backs(*_diagnosis(True, 0.4, real_label="protective_stop"), pad, -1.0)


def test_a_zoo_worlds_obstruction_is_inspected_before_a_mass_nothing_in_sim_backs(
        zoo_world) -> None:
    # Tuned zoo world 24: an obstruction's protective stops pull the payload below zero
    # through a column sim's telemetry barely moves (identifiability 0.005), and sim's
    # rollouts never stop more as the payload changes. The same world's heavy load pulls
    # the same payload up, to no bound; its wheel slip pulls the floor friction to zero
    # through telemetry sim tells it by (identifiability 0.27).
    world = zoo_world(24)
    obstruction = world.holding("obstruction_2")
    first, second = obstruction.actions[:2]
    assert first.kind == "investigate"
    assert "physical bound" in first.detail and "sim2real check" in first.detail
    assert second.kind == "widen_randomization" and second.target == "param.load_kg_ka"
    assert world.holding("heavy_load_4").actions[0].target == "param.load_kg_ka"
    assert world.holding("wheel_slip_1").actions[0].target == "param.wheel_traction"
