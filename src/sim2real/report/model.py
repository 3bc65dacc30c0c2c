"""The JSON outputs (``docs/outputs.md``) as pydantic models.

Fields the spec names keep its names and meanings; fields added beyond it are marked
"extension" in their description. Models are frozen: a report is a snapshot.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Action",
    "ActionKind",
    "ClusterReport",
    "ClusterTrend",
    "DatasetSummary",
    "DeploymentRate",
    "EventReport",
    "FamilyScores",
    "Lifecycle",
    "RateSummary",
    "ReportModel",
    "SimParam",
    "Taxonomy",
    "TopChannel",
    "ValidationCluster",
    "ValidationModel",
    "Verdict",
]

Taxonomy = Literal[
    "perception_drift",
    "dynamics_mismatch",
    "task_scope_overflow",
    "deployment_system_noise",
    "unexplained",
]
ActionKind = Literal[
    "recalibrate_param",
    "widen_randomization",
    "add_training_scenarios",
    "fix_infrastructure",
    "improve_perception",
    "investigate",
]
Verdict = Literal["shrank", "grew", "unchanged", "new", "gone"]
Lifecycle = Literal["new", "ongoing", "escalating", "resolved", "regressed"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="allow")


class DatasetSummary(_Frozen):
    episodes_real: int
    episodes_sim: int
    failures: int
    deployments: list[str] = Field(description="in time order")
    tasks: list[str]
    path: str | None = Field(None, description="extension: the dataset folder analysed")
    units: dict[str, str] = Field(default_factory=dict,
                                  description="extension: channel -> unit, where declared")
    reference_channels: list[str] = Field(
        default_factory=list,
        description="extension: channels sim does not record, compared with real successes")
    compared_with: str = Field(
        "simulation",
        description="extension: what real failures are compared with: 'simulation' (sim "
                    "rollouts) or 'normal operation' (normal real runs declared source = "
                    "reference; no parameter attribution)")
    episodes_reference: int = Field(
        0, description="extension: normal real runs declared source = reference")


class FamilyScores(_Frozen):
    perception: float = 0.0
    dynamics: float = 0.0
    policy: float = 0.0
    system: float = 0.0
    task_scope: float = 0.0


class TopChannel(_Frozen):
    channel: str
    family: str | None = None
    effect: float = Field(description="signed standardised difference, real minus sim")


class EventReport(_Frozen):
    episode_id: str
    deployment: str
    cluster_id: str | None
    drift_score: float = Field(ge=0)
    family_scores: FamilyScores
    top_channels: list[TopChannel]
    nearest_sim: list[str]
    robot_id: str | None = Field(None, description="extension")
    site: str | None = Field(None, description="extension")
    task: str | None = Field(None, description="extension")
    failure_time: float | None = Field(None, description="extension: seconds from start")
    failure_label: str | None = Field(None, description="extension: the symptom reported")
    context: dict[str, object] = Field(default_factory=dict,
                                       description="extension: ctx.* values, prefix dropped")
    novel_context: list[str] = Field(default_factory=list,
                                     description="extension: ctx values sim never covered")
    suspicious_sys: list[str] = Field(
        default_factory=list,
        description="extension: sys.* values under which failures are over-represented",
    )


class DeploymentRate(_Frozen):
    deployment: str
    episodes: int
    failures: int
    rate: float


class ClusterTrend(_Frozen):
    per_deployment: list[DeploymentRate]
    growth: float = Field(description="change of log-rate per deployment")
    p_value: float
    growth_ci: list[float | None] = Field(
        default_factory=list, description="extension: 95% interval of growth"
    )


class SimParam(_Frozen):
    param: str
    sim_low: float
    sim_high: float
    sim_nominal: float
    estimate: float
    shift: float = Field(description="(estimate - nominal) / (sim_high - sim_low)")
    outside_range: bool
    uncertainty: float | None = Field(None, description="extension: standard error")
    explained: float | None = Field(
        None, description="extension: 0-1, how much this parameter explains the cluster"
    )


class Action(_Frozen):
    kind: ActionKind
    target: str
    detail: str
    expected_reduction: float = Field(ge=0, le=1)
    evidence: str | None = Field(None, description="extension: why expected_reduction")


class SimCheck(_Frozen):
    """Extension: what ``analyze --adapter`` found by replaying the cluster in sim."""

    adapter: str
    episodes: list[str]
    fitted: dict[str, float] = Field(description="calibrated parameter values")
    std: dict[str, float | None] = Field(description="their uncertainty (None: not estimated)")
    identifiable: bool
    converged: bool
    discrepancy_before: float
    discrepancy_after: float
    candidates: int = Field(description="candidate evaluations the calibration spent")
    reproduces: bool = Field(description="the counterfactual check's verdict on the fit")
    failures_real: int
    episodes_real: int
    failures_after: int
    replays: int
    verdict: str
    rollouts: int
    warnings: list[str] = Field(default_factory=list)


class ClusterReport(_Frozen):
    cluster_id: str
    taxonomy: Taxonomy
    confidence: float = Field(ge=0, le=1)
    explanation: str
    size: int
    events: list[str]
    trend: ClusterTrend
    top_channels: list[TopChannel]
    sim_params: list[SimParam] = Field(default_factory=list)
    actions: list[Action] = Field(default_factory=list)
    lifecycle: Lifecycle | None = Field(None, description="extension")
    family_scores: dict[str, float] = Field(
        default_factory=dict, description="extension: median family scores of the events"
    )
    sim_check: SimCheck | None = Field(
        None, description="extension: calibration and counterfactual check (analyze --adapter)"
    )


class ReportModel(_Frozen):
    schema_version: Literal[1] = 1
    tool_version: str
    dataset: DatasetSummary
    events: list[EventReport]
    clusters: list[ClusterReport] = Field(description="most urgent first")
    fastest_growing: str | None
    warnings: list[str] = Field(default_factory=list)


class RateSummary(_Frozen):
    episodes: int
    failures: int
    rate: float


class ValidationCluster(_Frozen):
    cluster_id: str
    taxonomy: Taxonomy
    baseline: RateSummary
    candidate: RateSummary
    rate_ratio: float | None = Field(description="candidate / baseline; null when undefined")
    ci_low: float | None
    ci_high: float | None
    p_value: float
    verdict: Verdict


class ValidationModel(_Frozen):
    schema_version: Literal[1] = 1
    baseline: list[str]
    candidate: list[str]
    clusters: list[ValidationCluster]
    targets: list[str] = Field(default_factory=list,
                               description="extension: the clusters the fix was meant to shrink")
    dataset: str | None = Field(None, description="extension: the dataset folder validated")
