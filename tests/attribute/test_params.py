"""Parameter attribution and actions on worlds whose causes are known."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import numpy as np

from sim2real.attribute import ParameterInference, param_evidence
from sim2real.attribute.actions import at_bound, simulator_config
from sim2real.attribute.params import _space, param_families
from sim2real.dataset import ParamRange
from sim2real.engine import LocalExecutor


def dominant_cause(diagnosis, rows: np.ndarray, key: dict) -> tuple[str, float]:
    """The cause most of a cluster's events have, and its share (answer key: tests only)."""
    causes = Counter(key["events"].get(diagnosis.signatures.episode_ids[i]) for i in rows)
    name, count = causes.most_common(1)[0]
    return str(name), count / len(rows)


def _by_cause(world: tuple) -> dict[str, list]:
    diagnosis, findings, key = world
    out: dict[str, list] = {}
    for f in findings:
        cause, share = dominant_cause(diagnosis, f.rows, key)
        if share >= 0.8:
            out.setdefault(cause, []).append(f)
    return out


def _causes(key: dict) -> dict[str, dict]:
    return {c["name"]: c for c in key["causes"]}


def test_top_parameter_and_outside_range_per_parameter_cause(standard, renamed) -> None:
    for world in (standard, renamed):
        causes = _causes(world[2])
        for name, findings in _by_cause(world).items():
            cause = causes.get(name)
            if not cause or not cause["key_param"]:
                continue
            for f in findings:
                top = f.params[0]
                assert top.param == cause["key_param"], (name, [p.param for p in f.params])
                assert top.outside_range, (name, top)
                lo, hi = top.sim_low, top.sim_high
                true = cause["true_value"]
                assert (top.estimate < lo) == (true < lo) and (top.estimate > hi) == (true > hi)
                others = [p for p in f.params[1:] if p.outside_range]
                assert not others, (name, others)


def test_same_family_causes_are_two_clusters_with_different_top_params(renamed) -> None:
    found = _by_cause(renamed)
    heavy, worn = found["heavy_payloads"], found["worn_pads"]
    assert heavy and worn
    assert {f.index for f in heavy}.isdisjoint({f.index for f in worn})
    assert heavy[0].params[0].param != worn[0].params[0].param


def test_action_kinds(standard, renamed) -> None:
    for world in (standard, renamed):
        causes = _causes(world[2])
        for name, findings in _by_cause(world).items():
            if name not in causes:
                continue
            taxonomy = causes[name]["taxonomy"]
            for f in findings:
                kinds = [a.kind for a in f.actions]
                assert all(0 <= a.expected_reduction <= 1 and a.evidence for a in f.actions)
                if taxonomy == "deployment_system_noise":
                    assert kinds[0] == "fix_infrastructure", (name, kinds)
                elif taxonomy == "task_scope_overflow":
                    assert kinds[0] == "add_training_scenarios", (name, kinds)
                elif causes[name]["key_param"]:
                    assert "widen_randomization" in kinds, (name, kinds)


def test_inference_follows_the_estimator_contract(standard) -> None:
    diagnosis = standard[0]
    space = _space(diagnosis)
    assert space is not None
    est = ParameterInference(seed=3)
    fitted = est.fit(diagnosis.matcher.bank_, space)
    assert fitted is est
    assert est.identifiability_.shape == (len(space.names),)
    assert np.all((est.identifiability_ >= 0) & (est.identifiability_ <= 1))


def test_evidence_is_deterministic_and_the_same_on_worker_processes(standard) -> None:
    diagnosis = standard[0]
    a, b = param_evidence(diagnosis), param_evidence(diagnosis, LocalExecutor(2))
    assert a is not None and b is not None
    for field in ("events", "whitened", "success_mean", "success_whitened"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    np.testing.assert_array_equal(a.inference.coef_, b.inference.coef_)
    np.testing.assert_array_equal(a.inference.identifiability_, b.inference.identifiability_)


def test_estimates_within_bounds_and_outside_range_literal(standard, renamed) -> None:
    for diagnosis, findings, _ in (standard, renamed):
        for f in findings:
            for p in f.params:
                low, high = diagnosis.dataset.params[p.param].bounds
                assert low <= p.estimate <= high, p
                assert p.outside_range == (not p.sim_low <= p.estimate <= p.sim_high), p


def test_parameter_actions_carry_range_interval_and_family_first_explanation(standard) -> None:
    key = standard[2]
    causes = _causes(key)
    for name, found in _by_cause(standard).items():
        cause = causes.get(name)
        if not cause or not cause["key_param"]:
            continue
        for f in found:
            first = f.actions[0]
            assert first.kind in ("widen_randomization", "recalibrate_param"), first
            assert first.reduction_low <= first.expected_reduction <= first.reduction_high
            assert "emulator" in first.evidence
            family = "perception" if cause["taxonomy"] == "perception_drift" else "dynamics"
            lead = f.label.explanation.split(":")[1]
            named = [c for c, fam, _ in f.label.top_channels if c in lead]
            assert named and all(
                fam == family for c, fam, _ in f.label.top_channels if c in named), lead
            assert f"param.{cause['key_param']}" in f.label.explanation


def test_simulator_config_forms() -> None:
    friction = ParamRange("friction", 0.5, 1.2, 0.85, 0.0, None, "dynamics", {
        "isaaclab": "events.physics_material.params.static_friction_range",
        "mjcf": "geom[@class='pad']/@friction[0]",
        "robosuite": "dynamics_randomization_args.friction_perturbation_ratio"})
    config = simulator_config(friction, 0.1, 1.2, 0.85)
    assert config["isaaclab"] == ("env.events.physics_material.params."
                                  "static_friction_range=[0.1,1.2]")
    assert config["mjcf"] == "geom[@class='pad']/@friction[0]=0.85"
    ratio = config["robosuite"]["dynamics_randomization_args"]["friction_perturbation_ratio"]
    assert abs(ratio - 0.75 / 0.85) < 1e-3
    assert simulator_config(ParamRange("mass", 1, 2, 1.5), 1, 3, 1.5) == {}


class _Moves:
    """A fitted inference stand-in: every parameter moves the perception features most."""

    def __init__(self, names: list[str]) -> None:
        self.space_ = SimpleNamespace(names=names)
        self._columns = np.array([[3.0] * len(names), [0.5] * len(names)])

    def columns(self) -> np.ndarray:
        return self._columns


def test_what_a_parameter_is_outranks_where_sim_shows_it() -> None:
    features = np.array(["perception", "dynamics"], dtype=object)
    names = ["wheel_traction", "geom_friction", "cam_fovy", "control_latency_ms", "noise_std",
             "body_mass"]
    declared = [None, None, None, None, None, "perception"]
    got = param_families(_Moves(names), features, declared)  # type: ignore[arg-type]
    # the name, else the channels it moves (noise_std: perception), a declaration first
    assert got == ("dynamics", "dynamics", "perception", "system", "perception", "perception")


def test_roughness_is_log_rms_of_steps_floored_by_spread() -> None:
    from sim2real.attribute.inference import _roughness

    t = np.arange(32, dtype=float)
    windows = np.stack([np.column_stack([np.zeros(32), 0.5 * (-1.0) ** t, 2.0 * t])])
    out = _roughness(windows, np.ones(3))
    np.testing.assert_allclose(out[0], [np.log(1e-3), np.log(1.0), np.log(2.0)])
    windows[0, :, 2] = np.nan
    assert np.isnan(_roughness(windows, np.ones(3))[0, 2])


def _evidence(names: tuple[str, ...], families: tuple[str, ...],
              columns: np.ndarray | None = None,
              features: tuple[str, ...] = ("perception", "dynamics")) -> SimpleNamespace:
    """Fitted evidence as far as the lead rules read it; by default each parameter moves
    the channels of its own family in sim."""
    if columns is None:
        columns = np.array([[f == g for f in families] for g in features], dtype=float)
    inference = SimpleNamespace(space_=SimpleNamespace(names=names), columns=lambda: columns)
    return SimpleNamespace(inference=inference, param_families=families,
                           feature_families=np.array(features, dtype=object))


def test_a_parameter_leads_only_where_its_family_deviates() -> None:
    from sim2real.attribute.params import ParamEstimate, lead_family, may_lead

    space = SimpleNamespace(names=("light", "friction"))
    evidence = _evidence(space.names, ("perception", "dynamics"))
    params = [ParamEstimate(name, 0, 1, 0.5, 2.0, 1.5, True, 0.1, 0.5, contrast=5.0)
              for name in space.names]
    assert lead_family(params, evidence, ("dynamics",)) == "dynamics"  # type: ignore[arg-type]
    assert lead_family(params, evidence, ("perception",)) == "perception"  # type: ignore[arg-type]
    assert lead_family(params, evidence, ("system",)) is None  # type: ignore[arg-type]
    # Nothing deviates: nothing contradicts the first parameter the events point to.
    assert lead_family(params, evidence, ()) == "perception"  # type: ignore[arg-type]
    assert not may_lead(evidence, "light", ("dynamics",))  # type: ignore[arg-type]


def test_a_parameter_may_lead_where_the_channels_it_moves_in_sim_deviate() -> None:
    from sim2real.attribute.params import ParamEstimate, lead_family, may_lead

    # Sim shows a low floor friction as localisation error (a perception channel), and
    # the light as brightness; the wheels' own speed barely moves.
    features = ("perception", "perception", "dynamics")  # localisation, brightness, wheels
    columns = np.array([[0.1, 3.0], [2.0, 0.0], [0.0, 0.3]])
    evidence = _evidence(("light", "friction"), ("perception", "dynamics"), columns, features)
    assert may_lead(evidence, "friction", ("perception",))  # type: ignore[arg-type]
    assert not may_lead(evidence, "light", ("dynamics",))  # type: ignore[arg-type]
    slips = [ParamEstimate("friction", 0, 1, 0.5, 0.1, -0.3, True, 0.1, 0.4, contrast=-4.0)]
    assert lead_family(slips, evidence, ("perception",)) == "dynamics"  # type: ignore[arg-type]
    # Where sim shows the friction on the wheels alone, a localisation error is no lead.
    columns[0, 1] = 0.0
    assert lead_family(slips, evidence, ("perception",)) is None  # type: ignore[arg-type]


def test_of_parameters_explaining_alike_one_that_may_be_the_cause_comes_first() -> None:
    from sim2real.attribute.params import ParamEstimate, rank_params

    space = SimpleNamespace(names=("light", "friction", "mass"))
    evidence = _evidence(space.names, ("perception", "dynamics", "dynamics"))
    # A dynamics cluster: the light is pulled hardest by the other families' deviation,
    # nothing explains anything significant.
    params = [ParamEstimate(name, 0, 1, 0.5, 0.6, 0.1, False, 0.1, explained, contrast=pull)
              for name, explained, pull in (("light", 0.0, 4.0), ("friction", 0.0, 1.5),
                                            ("mass", 0.0, -2.5))]
    ranked = rank_params(params, evidence, ("dynamics",))  # type: ignore[arg-type]
    assert [p.param for p in ranked] == ["mass", "friction", "light"]
    # What explains more comes first whatever its family.
    params[0] = ParamEstimate("light", 0, 1, 0.5, 0.6, 0.1, False, 0.1, 0.3, contrast=4.0)
    assert rank_params(params, evidence, ("dynamics",))[0].param == "light"  # type: ignore[arg-type]


def test_an_estimate_at_a_physical_bound_is_said_to_be_there() -> None:
    from sim2real.attribute.params import ParamEstimate

    # An object mass pulled below zero stops at zero: the action says so.
    massless = ParamEstimate("object_mass", 0.6, 1.4, 1.0, 0.0, -1.25, True, 0.1, 0.2,
                             contrast=-3.5)
    note = at_bound(massless, (0.0, float("inf")))
    assert "param.object_mass" in note and "lower physical bound (0)" in note
    # Inside its bounds, nothing is added.
    light = ParamEstimate("object_mass", 0.6, 1.4, 1.0, 0.3, -0.9, True, 0.1, 0.2)
    assert at_bound(light, (0.0, float("inf"))) == ""
    assert "upper" in at_bound(light, (0.0, 0.3))


def test_a_pull_within_the_successes_own_spread_leads_nothing(zoo_world) -> None:
    # Tuned zoo world 22: the impacts happen in a cell a shade brighter than the fleet's
    # average (ambient light +0.05 range widths, 5.6 standard errors); the successes' own
    # light spreads twice that. The light used to lead the impacts' cluster (perception
    # drift, "recalibrate ambient_light 10.0 -> 10.24"); the camera offset of the world's
    # calibration cause lies 19 of the successes' spreads away and still leads its cluster.
    world = zoo_world(22)
    impacts = world.holding("impact_2")
    light = next(p for p in impacts.params if p.param == "ambient_light")
    assert light.typical and light.explained == 0.0 and abs(light.contrast) > 2.0
    assert impacts.label.taxonomy == "dynamics_mismatch"
    assert all(a.target != "param.ambient_light" for a in impacts.actions)
    camera = world.holding("calibration_4")
    assert camera.params[0].param == "camera_offset_nu" and not camera.params[0].typical
    assert camera.label.taxonomy == "perception_drift"
    assert camera.actions[0].target == "param.camera_offset_nu"
