"""Ready-made worlds: the standard fleet, a renamed one, one without a gap, one that never
changes, one whose dynamics cause acts on every robot.

Each preset is a function returning a :class:`WorldSpec`; tweak one with
:func:`dataclasses.replace`. Sizes at scale 1: about 1000 real episodes, 600 sim rollouts,
20-40 failures per cause and 20-30 background failures.
"""

from __future__ import annotations

import dataclasses

from sim2real.demo.synthetic.spec import (
    BackgroundSpec,
    CatalogueItem,
    CauseSpec,
    ChannelSpec,
    CtxCategorical,
    CtxNumeric,
    ParamSpec,
    TaskSpec,
    WorldSpec,
)

__all__ = ["PRESETS", "no_gap_world", "renamed_world", "standard_world", "unchanged_world",
           "widened"]

_STANDARD_CHANNELS = (
    ChannelSpec("j1_pos", "joint_pos", "dynamics", "rad", noise=0.01),
    ChannelSpec("j1_vel", "joint_vel", "dynamics", "rad/s", noise=0.03),
    ChannelSpec("j1_torque", "joint_torque", "dynamics", "N*m", scale=10.0, noise=0.03),
    ChannelSpec("grip_force", "grip_force", "dynamics", "N", scale=15.0, noise=0.03),
    ChannelSpec("grip_width", "grip_width", "dynamics", "m", scale=0.08, noise=0.01),
    ChannelSpec("obj_slip", "slip", "dynamics", "m/s", noise=0.15),
    ChannelSpec("track_err", "track_err", "dynamics", "m", noise=0.1),
    ChannelSpec("det_conf", "det_conf", "perception", "", noise=0.15),
    ChannelSpec("pose_err", "pose_err", "perception", "m", noise=0.1),
    ChannelSpec("img_brightness", "brightness", "perception", "", noise=0.015),
    ChannelSpec("img_contrast", "contrast", "perception", "", noise=0.015),
    ChannelSpec("cmd_x", "cmd_vel", "policy", "m/s", noise=0.03, variant=0),
    ChannelSpec("cmd_y", "cmd_vel", "policy", "m/s", noise=0.03, variant=1),
    ChannelSpec("cmd_z", "cmd_vel", "policy", "m/s", noise=0.03, variant=2),
    ChannelSpec("cmd_grip", "cmd_grip", "policy", "", noise=0.02),
    ChannelSpec("loop_latency_ms", "latency", "system", "ms", noise=1.5),
    ChannelSpec("dropped_msgs", "dropped", "system", "count"),
)

_STANDARD_PARAMS = (
    ParamSpec("friction", 0.5, 1.2, 0.85,
              {"slip": -1.5, "grip_force": -0.12, "track_err": -0.1}),
    ParamSpec("object_mass", 0.2, 1.0, 0.5,
              {"joint_torque": 0.5, "grip_force": 0.3, "slip": 0.6, "track_err": 0.25,
               "joint_pos": -0.08, "joint_vel": -0.05}),
    ParamSpec("actuator_latency", 0.0, 0.04, 0.015,
              {"track_err": 0.9, "joint_vel": -0.1, "cmd_vel": 0.1}),
    ParamSpec("light_level", 0.6, 1.4, 1.0,
              {"brightness": 0.35, "contrast": 0.2, "det_conf": 1.6, "pose_err": -0.9}),
    ParamSpec("camera_noise", 0.0, 0.1, 0.03,
              {"contrast": -0.12, "det_conf": -0.7, "pose_err": 0.5, "brightness": 0.02}),
)

_OBJECTS = CtxCategorical("object_type", (
    CatalogueItem("box", 3.0, {"grip_width": 0.1}),
    CatalogueItem("cup", 2.0, {"grip_width": -0.1, "pose_err": 0.1}),
    CatalogueItem("can", 2.0, {"grip_width": -0.05, "joint_torque": 0.05}),
    CatalogueItem("pouch", 1.0, {"grip_force": -0.1, "slip": 0.3}),
))

_TALL_BOTTLE = {"grip_width": -0.15, "pose_err": 0.6, "joint_pos": 0.15, "joint_torque": 0.25,
                "det_conf": -0.5, "slip": 0.4}


def standard_world() -> WorldSpec:
    """Eight weekly deployments of a pick-and-place fleet with one cause of each family.

    ``dim_lighting`` (perception, site s2) grows clearly fastest; ``slippery_pads``
    (dynamics, robots r03 and r10); ``tall_bottles`` (task scope, an object sim never saw);
    ``stale_config`` (system, robot r07) is fixed from w07.
    """
    return WorldSpec(
        name="standard",
        tasks=(TaskSpec("pick_place", 6.0),),
        channels=_STANDARD_CHANNELS,
        params=_STANDARD_PARAMS,
        deployments=tuple(f"w{i:02d}" for i in range(1, 9)),
        episodes_per_deployment=(100, 105, 110, 118, 125, 132, 140, 150),
        robots=tuple(f"r{i:02d}" for i in range(1, 13)),
        sites=("s1", "s2", "s3"),
        robot_sites=("s1",) * 4 + ("s2",) * 4 + ("s3",) * 4,
        ctx_categorical=(_OBJECTS,),
        ctx_numeric=(CtxNumeric("light_request", 300.0, 700.0,
                                {"brightness": 0.1, "det_conf": 0.2}),),
        causes=(
            CauseSpec("dim_lighting", "perception_drift", "grasp_miss", failure_prob=0.6,
                      ramp=(0.0, 0.36), sites=("s2",), key_param="light_level",
                      true_value=0.25),
            CauseSpec("slippery_pads", "dynamics_mismatch", "slip_drop", failure_prob=0.6,
                      ramp=(0.25, 0.35), robots=("r03", "r10"), key_param="friction",
                      true_value=0.25),
            CauseSpec("tall_bottles", "task_scope_overflow", "knock_over", failure_prob=0.65,
                      ramp=(0.045, 0.055), new_ctx=("object_type", "tall_bottle"),
                      effects=_TALL_BOTTLE),
            CauseSpec("stale_config", "deployment_system_noise", "collision", failure_prob=0.75,
                      ramp=(0.7, 0.7), robots=("r07",), fixed_from="w07",
                      latency_spike_ms=120.0, drop_rate=0.5, config_hash="cfg-stale-0badc0de"),
        ),
        background=BackgroundSpec(rate=0.026, extreme_param="friction", extreme_rate=0.15),
    )


def renamed_world() -> WorldSpec:
    """Other names, rates, tasks and causes: checks nothing is keyed to the standard world.

    Sim 30 Hz / real 100 Hz, two tasks, deployments ``v8..v13`` (not in lexical order), two
    dynamics causes with different key parameters at different sites (``heavy_payloads`` at
    east, growing fastest; ``worn_pads`` at west, fixed from v12) and a system cause
    (``flaky_wifi`` on b03); no perception or task-scope cause.
    """
    channels = (
        ChannelSpec("shoulder_q", "joint_pos", "dynamics", "rad", noise=0.01),
        ChannelSpec("elbow_q", "joint_pos", "dynamics", "rad", noise=0.01, variant=1),
        ChannelSpec("elbow_qd", "joint_vel", "dynamics", "rad/s", noise=0.03, variant=1),
        ChannelSpec("wrist_tau", "joint_torque", "dynamics", "N*m", scale=4.0, noise=0.03),
        ChannelSpec("finger_force", "grip_force", "dynamics", "N", scale=30.0, noise=0.03),
        ChannelSpec("finger_gap", "grip_width", "dynamics", "m", scale=0.1, noise=0.01),
        ChannelSpec("contact_slip", "slip", "dynamics", "m/s", noise=0.15),
        ChannelSpec("ee_track_err", "track_err", "dynamics", "m", noise=0.1),
        ChannelSpec("cam_lux", "brightness", "perception", "lux", scale=800.0, noise=0.015),
        ChannelSpec("cam_sharpness", "contrast", "perception", "", noise=0.015),
        ChannelSpec("kp_confidence", "det_conf", "perception", "", noise=0.15),
        ChannelSpec("kp_reproj_err", "pose_err", "perception", "px", scale=1000.0, noise=0.1),
        ChannelSpec("act_dx", "cmd_vel", "policy", "m/s", noise=0.03),
        ChannelSpec("act_dz", "cmd_vel", "policy", "m/s", noise=0.03, variant=3),
        ChannelSpec("act_grip", "cmd_grip", "policy", "", noise=0.02),
        ChannelSpec("ctrl_rtt_ms", "latency", "system", "ms", noise=2.0),
        ChannelSpec("msg_loss", "dropped", "system", "count"),
    )
    params = (
        ParamSpec("pad_friction", 0.6, 1.1, 0.9, {"slip": -1.4, "grip_force": -0.1}),
        ParamSpec("payload_mass", 0.3, 1.5, 0.8,
                  {"joint_torque": 0.6, "grip_force": 0.3, "slip": 0.8, "track_err": 0.3,
                   "joint_pos": -0.1}),
        ParamSpec("servo_delay", 0.005, 0.03, 0.012, {"track_err": 0.8, "joint_vel": -0.1}),
        ParamSpec("lux", 200.0, 900.0, 550.0,
                  {"brightness": 0.4, "det_conf": 1.2, "pose_err": -0.7, "contrast": 0.1}),
        ParamSpec("cam_blur", 0.0, 2.0, 0.5, {"contrast": -0.2, "det_conf": -0.5, "pose_err": 0.4}),
    )
    items = CtxCategorical("item", (
        CatalogueItem("carton", 2.0, {"grip_width": 0.1}),
        CatalogueItem("tin", 1.0, {"grip_width": -0.1, "joint_torque": 0.1}),
        CatalogueItem("pouch", 1.0, {"slip": 0.3}),
        CatalogueItem("jar", 1.0, {"grip_width": -0.05, "pose_err": 0.1}),
    ))
    return WorldSpec(
        name="renamed",
        tasks=(TaskSpec("pick_place", 5.0, (0.22, 0.18, 0.4, 0.2), weight=2.0),
               TaskSpec("bin_sort", 4.0, (0.3, 0.25, 0.25, 0.2))),
        channels=channels,
        params=params,
        deployments=tuple(f"v{i}" for i in range(8, 14)),
        episodes_per_deployment=(130, 140, 150, 165, 180, 195),
        robots=tuple(f"b{i:02d}" for i in range(1, 11)),
        sites=("east", "west"),
        robot_sites=("east",) * 5 + ("west",) * 5,
        ctx_categorical=(items,),
        ctx_numeric=(CtxNumeric("shelf_height", 0.2, 1.2,
                                {"joint_pos": 0.1, "joint_torque": 0.1}),),
        causes=(
            CauseSpec("heavy_payloads", "dynamics_mismatch", "slip_drop", failure_prob=0.45,
                      ramp=(0.0, 0.32), sites=("east",), key_param="payload_mass",
                      true_value=2.6),
            CauseSpec("worn_pads", "dynamics_mismatch", "slip_drop", failure_prob=0.55,
                      ramp=(0.2, 0.2), sites=("west",), fixed_from="v12",
                      key_param="pad_friction", true_value=0.3),
            CauseSpec("flaky_wifi", "deployment_system_noise", "collision", failure_prob=0.6,
                      ramp=(0.45, 0.5), robots=("b03",), latency_spike_ms=150.0,
                      drop_rate=0.8, config_hash="cfg-wifi-legacy"),
        ),
        background=BackgroundSpec(rate=0.025, extreme_param="pad_friction", extreme_rate=0.15),
        n_sim=600,
        sim_rate_hz=30.0,
        real_rate_hz=100.0,
    )


def no_gap_world() -> WorldSpec:
    """The standard fleet with reality drawn exactly like sim: only background failures."""
    return dataclasses.replace(standard_world(), name="no_gap", causes=(), real_param_sd=None,
                               real_time_warp=0.0)


def unchanged_world() -> WorldSpec:
    """The standard causes at a constant rate in every deployment and never fixed."""
    base = standard_world()
    flat = {"dim_lighting": 0.17, "slippery_pads": 0.3, "tall_bottles": 0.05, "stale_config": 0.6}
    causes = tuple(dataclasses.replace(c, ramp=(flat[c.name], flat[c.name]), fixed_from=None)
                   for c in base.causes)
    return dataclasses.replace(base, name="unchanged", causes=causes)


def fleetwide_world() -> WorldSpec:
    """The standard world with ``slippery_pads`` on every robot, thinly: active in 3 % to
    6 % of all episodes, so each robot sees only a few of its failures, about as many as
    its sim-like failures. Where failures happen must not lose a cause that is everywhere.
    """
    base = standard_world()
    causes = tuple(dataclasses.replace(c, robots=(), sites=(), ramp=(0.03, 0.06))
                   if c.name == "slippery_pads" else c for c in base.causes)
    return dataclasses.replace(base, name="fleetwide", causes=causes)


def widened(spec: WorldSpec, n_channels: int) -> WorldSpec:
    """``spec`` with extra joints (``jN_pos``, ``jN_vel``, ``jN_torque``) up to ``n_channels``.

    For benchmarks that need wide signals (e.g. 32 channels); the extra joints follow the
    same physics as the first one, with their own trajectories.
    """
    extra: list[ChannelSpec] = []
    joint = 2
    while len(spec.channels) + len(extra) < n_channels:
        kinds = (("pos", "joint_pos", "rad"), ("vel", "joint_vel", "rad/s"),
                 ("torque", "joint_torque", "N*m"))
        for suffix, kind, unit in kinds:
            if len(spec.channels) + len(extra) < n_channels:
                extra.append(ChannelSpec(f"j{joint}_{suffix}", kind, "dynamics", unit,
                                         noise=0.02, variant=joint - 1))
        joint += 1
    return dataclasses.replace(spec, channels=spec.channels + tuple(extra))


PRESETS = {
    "standard": standard_world,
    "renamed": renamed_world,
    "no_gap": no_gap_world,
    "unchanged": unchanged_world,
    "fleetwide": fleetwide_world,
}
