"""A realistic report built in code, until the pipeline produces real ones.

Four clusters of different cause families over eight deployments (one growing, one
steady, one new, one shrinking), a few unassigned failures, a signatures table with an
embedding and ``z.<channel>`` columns, trajectories for a few events, and a validation.
``tests/serve`` loads this module by path, so keep its builders importable without pytest.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sim2real.report import Report, ReportModel, Validation, ValidationModel

CHANNELS = {
    "cam.brightness": "perception",
    "det.confidence": "perception",
    "pose_error": "perception",
    "gripper.force": "dynamics",
    "contact.slip": "dynamics",
    "joint3.velocity": "dynamics",
    "wrist.torque": "dynamics",
    "cmd.grasp_width": "policy",
    "sys.latency_ms": "system",
    "sys.dropped_frames": "system",
}
DEPLOYMENTS = [f"w{i:02d}" for i in range(1, 9)]
# per cluster: taxonomy, failures per deployment, signature, lifecycle
CLUSTERS = {
    "C3": (
        "perception_drift",
        [1, 2, 2, 4, 6, 9, 13, 18],
        {"cam.brightness": 3.2, "det.confidence": -2.6, "pose_error": 1.9},
        "escalating",
    ),
    "C1": (
        "dynamics_mismatch",
        [7, 8, 6, 9, 7, 8, 9, 8],
        {"contact.slip": 2.8, "gripper.force": -2.1, "wrist.torque": 1.2},
        "ongoing",
    ),
    "C5": (
        "task_scope_overflow",
        [0, 0, 0, 0, 0, 0, 5, 7],
        {"cmd.grasp_width": 2.4, "pose_error": 1.1},
        "new",
    ),
    "C2": (
        "deployment_system_noise",
        [6, 7, 5, 4, 3, 2, 1, 1],
        {"sys.latency_ms": 3.5, "sys.dropped_frames": 2.2},
        "resolved",
    ),
}
EXPLANATIONS = {
    "C3": "Detection confidence drops when the camera image is brighter than anything seen in "
    "simulation: the new site's skylights. Grasps then miss by 2-3 cm.",
    "C1": "Objects slip in the gripper: real friction is lower than the sim nominal and at the "
    "bottom of its randomisation range.",
    "C5": "Tall bottles, never part of the training scenes, arrived in w07; the policy opens "
    "the gripper too wide for them.",
    "C2": "Control-loop latency spikes on robots r07 and r08; it fell after the network "
    "fix in w05.",
}
ACTIONS = {
    "C3": [
        (
            "improve_perception",
            "ctx.lighting=skylight",
            "Add bright-light augmentation (+40% exposure) to the detector's training data.",
            0.65,
            "14 of the 20 most typical events have cam.brightness beyond every sim rollout.",
        ),
        (
            "widen_randomization",
            "param.light_intensity",
            "Widen light_intensity from [0.6, 1.2] to [0.6, 1.8].",
            0.4,
            None,
        ),
    ],
    "C1": [
        (
            "recalibrate_param",
            "param.friction",
            "Set friction nominal to 0.52 (now 0.8).",
            0.7,
            None,
        ),
        ("widen_randomization", "param.friction", "Sample friction from [0.4, 1.0].", 0.45, None),
    ],
    "C5": [
        (
            "add_training_scenarios",
            "ctx.object_type=tall_bottle",
            "Add tall bottles to the sim object set.",
            0.8,
            None,
        )
    ],
    "C2": [],
}
PARAMS = {
    "C3": [("light_intensity", 0.6, 1.2, 0.9, 1.62, 0.08, 0.71)],
    "C1": [
        ("friction", 0.6, 1.0, 0.8, 0.52, 0.03, 0.64),
        ("object_mass", 0.2, 0.6, 0.4, 0.47, 0.05, 0.12),
        ("motor_gain", 0.9, 1.1, 1.0, 0.98, 0.02, 0.03),
    ],
    "C5": [],
    "C2": [],
}
ROBOTS = [f"r{i:02d}" for i in range(1, 9)]


def _trend(counts: list[int], episodes: list[int]) -> dict[str, object]:
    rates = [c / n for c, n in zip(counts, episodes, strict=True)]
    x = np.arange(len(counts))
    positive = np.array(counts) > 0
    growth = (
        float(np.polyfit(x[positive], np.log(np.array(rates)[positive]), 1)[0])
        if positive.sum() > 1
        else 0.0
    )
    return {
        "per_deployment": [
            {"deployment": d, "episodes": n, "failures": c, "rate": r}
            for d, n, c, r in zip(DEPLOYMENTS[: len(counts)], episodes, counts, rates, strict=True)
        ],
        "growth": growth,
        "p_value": 0.002 if abs(growth) > 0.2 else 0.4,
    }


def _event(
    rng: np.random.Generator,
    eid: str,
    dep: str,
    cid: str | None,
    signature: dict[str, float],
    robot: str,
    site: str,
) -> tuple[dict[str, object], dict[str, float]]:
    z = {c: float(rng.normal(signature.get(c, 0.0), 0.5)) for c in CHANNELS}
    top = sorted(z, key=lambda c: -abs(z[c]))[:4]
    fam = {
        f: float(np.mean([abs(z[c]) for c in CHANNELS if CHANNELS[c] == f]))
        for f in ("perception", "dynamics", "policy", "system")
    }
    obj = "tall_bottle" if cid == "C5" else str(rng.choice(["mug", "box", "can"]))
    light = (
        "skylight"
        if cid == "C3" and rng.random() < 0.8
        else str(rng.choice(["indoor", "skylight"], p=[0.8, 0.2]))
    )
    event = {
        "episode_id": eid,
        "deployment": dep,
        "cluster_id": cid,
        "drift_score": float(np.sqrt(np.mean(np.square(list(z.values()))))),
        "family_scores": {**fam, "task_scope": 2.0 if cid == "C5" else 0.3},
        "top_channels": [{"channel": c, "effect": round(z[c], 3)} for c in top],
        "nearest_sim": [f"sim-{eid}-{k}" for k in range(3)],
        "robot_id": robot,
        "site": site,
        "failure_time": 12.5,
        "context": {"object_type": obj, "lighting": light},
    }
    return event, z


def build_report(seed: int = 0, deployments: int = 8) -> Report:
    """The fixture report; ``deployments`` keeps the first few weeks only."""
    rng = np.random.default_rng(seed)
    deps = DEPLOYMENTS[:deployments]
    episodes = [int(rng.integers(280, 420)) for _ in deps]
    events, sig_rows, clusters = [], [], []
    centers = {"C3": (-3, 2), "C1": (3, 2), "C5": (0, -3), "C2": (4, -2), None: (0, 0)}
    for cid, (tax, counts, signature, life) in CLUSTERS.items():
        ids = []
        for dep, n in zip(deps, counts[:deployments], strict=False):
            for k in range(n):
                robot = "r07" if cid == "C2" and k % 2 else str(rng.choice(ROBOTS))
                site = (
                    "south"
                    if cid == "C3" and rng.random() < 0.85
                    else str(rng.choice(["north", "south"]))
                )
                eid = f"{dep}-{robot}-{cid}-{k:02d}"
                event, z = _event(rng, eid, dep, cid, signature, robot, site)
                events.append(event)
                sig_rows.append((eid, cid, z))
                ids.append(eid)
        if not ids:
            continue
        clusters.append(
            {
                "cluster_id": cid,
                "taxonomy": tax,
                "confidence": float(rng.uniform(0.55, 0.95)),
                "explanation": EXPLANATIONS[cid],
                "size": len(ids),
                "events": ids,
                "trend": {**_trend(counts[:deployments], episodes), "growth_ci": [0.1, 0.6]},
                "top_channels": [
                    {"channel": c, "family": CHANNELS[c], "effect": e} for c, e in signature.items()
                ],
                "sim_params": [
                    {
                        "param": p,
                        "sim_low": lo,
                        "sim_high": hi,
                        "sim_nominal": nom,
                        "estimate": est,
                        "shift": (est - nom) / (hi - lo),
                        "outside_range": not lo <= est <= hi,
                        "uncertainty": se,
                        "explained": ex,
                    }
                    for p, lo, hi, nom, est, se, ex in PARAMS[cid]
                ],
                "actions": [
                    {
                        "kind": k,
                        "target": t,
                        "detail": d,
                        "expected_reduction": r,
                        **({"evidence": ev} if ev else {}),
                    }
                    for k, t, d, r, ev in ACTIONS[cid]
                ],
                "lifecycle": life,
                "family_scores": {
                    "perception": 1.2,
                    "dynamics": 0.4,
                    "policy": 0.2,
                    "system": 0.1,
                    "task_scope": 0.2,
                },
            }
        )
    for k in range(5):  # failures that resemble no cluster
        dep = deps[k % len(deps)]
        event, z = _event(rng, f"{dep}-odd-{k}", dep, None, {}, str(rng.choice(ROBOTS)), "north")
        events.append(event)
        sig_rows.append((event["episode_id"], None, z))
    clusters.sort(key=lambda c: -c["trend"]["growth"])
    model = ReportModel.model_validate(
        {
            "tool_version": "0.1.0",
            "dataset": {
                "episodes_real": sum(episodes),
                "episodes_sim": 12000,
                "failures": len(events),
                "deployments": deps,
                "tasks": ["pick_place"],
            },
            "events": events,
            "clusters": clusters,
            "fastest_growing": clusters[0]["cluster_id"]
            if clusters and clusters[0]["trend"]["growth"] > 0
            else None,
            "warnings": [
                "12 real episodes have no sim rollout within the matching radius; "
                "they were skipped."
            ],
        }
    )
    return Report(
        model=model, signatures=_signatures(rng, sig_rows, centers), traces=_traces(rng, model)
    )


def _signatures(
    rng: np.random.Generator,
    rows: list[tuple[str, str | None, dict[str, float]]],
    centers: dict[str | None, tuple[int, int]],
) -> pa.Table:
    xy = np.array([centers[cid] for _, cid, _ in rows], dtype=float) + rng.normal(
        0, 0.7, (len(rows), 2)
    )
    cols: dict[str, object] = {
        "episode_id": [r[0] for r in rows],
        "cluster_id": [r[1] for r in rows],
        "embed_x": xy[:, 0],
        "embed_y": xy[:, 1],
    }
    for c in CHANNELS:
        cols[f"z.{c}"] = [r[2][c] for r in rows]
    for f in ("perception", "dynamics", "policy", "system"):
        cols[f"family.{f}"] = [
            float(np.mean([abs(r[2][c]) for c in CHANNELS if CHANNELS[c] == f])) for r in rows
        ]
    return pa.table(cols)


def _traces(rng: np.random.Generator, model: ReportModel) -> pa.Table:
    """Two shown trajectories per cluster: the real failure and three sim rollouts."""
    out: dict[str, list[object]] = {
        k: [] for k in ("event_id", "episode_id", "role", "channel", "t", "value")
    }
    t = np.round(np.arange(-4.0, 0.0001, 0.05), 3)
    for c in model.clusters:
        for eid in c.events[-2:]:
            event = next(e for e in model.events if e.episode_id == eid)
            for ch in [x.channel for x in event.top_channels[:3]]:
                base = np.sin(t * 1.3 + hash(ch) % 7) + 0.2 * t
                effect = next(x.effect for x in event.top_channels if x.channel == ch)
                for role, ep in [("real", eid)] + [("sim", s) for s in event.nearest_sim]:
                    drift = effect * 0.3 * np.clip(t + 2, 0, None) if role == "real" else 0
                    v = base + drift + rng.normal(0, 0.05, t.size)
                    for key, val in (
                        ("event_id", [eid] * t.size),
                        ("episode_id", [ep] * t.size),
                        ("role", [role] * t.size),
                        ("channel", [ch] * t.size),
                        ("t", list(t)),
                        ("value", list(v)),
                    ):
                        out[key].extend(val)
    return pa.table(out)


def build_validation() -> Validation:
    """C1 shrank after the friction fix, C5 is new, C3 grew, C2 unchanged."""

    def row(
        cid: str,
        tax: str,
        b: tuple[int, int],
        c: tuple[int, int],
        rr: float | None,
        lo: float | None,
        hi: float | None,
        p: float,
        verdict: str,
    ) -> dict[str, object]:
        return {
            "cluster_id": cid,
            "taxonomy": tax,
            "baseline": {"episodes": b[1], "failures": b[0], "rate": b[0] / b[1]},
            "candidate": {"episodes": c[1], "failures": c[0], "rate": c[0] / c[1]},
            "rate_ratio": rr,
            "ci_low": lo,
            "ci_high": hi,
            "p_value": p,
            "verdict": verdict,
        }

    return Validation(
        model=ValidationModel.model_validate(
            {
                "baseline": ["w05", "w06"],
                "candidate": ["w07"],
                "clusters": [
                    row(
                        "C1",
                        "dynamics_mismatch",
                        (15, 700),
                        (3, 360),
                        0.39,
                        0.11,
                        0.96,
                        0.03,
                        "shrank",
                    ),
                    row(
                        "C3",
                        "perception_drift",
                        (15, 700),
                        (13, 360),
                        1.69,
                        0.80,
                        3.5,
                        0.04,
                        "grew",
                    ),
                    row(
                        "C5",
                        "task_scope_overflow",
                        (0, 700),
                        (5, 360),
                        None,
                        None,
                        None,
                        0.004,
                        "new",
                    ),
                    row(
                        "C2",
                        "deployment_system_noise",
                        (5, 700),
                        (1, 360),
                        0.39,
                        0.02,
                        3.3,
                        0.5,
                        "unchanged",
                    ),
                ],
            }
        )
    )


@pytest.fixture(scope="session")
def report() -> Report:
    return build_report()


@pytest.fixture(scope="session")
def validation() -> Validation:
    return build_validation()


@pytest.fixture(scope="session")
def run_dir(
    tmp_path_factory: pytest.TempPathFactory, report: Report, validation: Validation
) -> Path:
    """A saved run folder holding both the report and the validation."""
    out = tmp_path_factory.mktemp("runs") / "week08"
    report.save(out)
    validation.save(out)
    return out


@pytest.fixture(scope="session")
def make_report() -> Callable[..., Report]:
    """The builder itself, for tests that need another seed or fewer deployments."""
    return build_report
