"""Which simulation parameters differ for a cluster, and which action should shrink it."""

from sim2real.attribute.actions import propose_actions
from sim2real.attribute.confounding import Confounder, cluster_confounders, over_represented
from sim2real.attribute.inference import ParameterInference, ParamSpace, Windows
from sim2real.attribute.params import (
    WEAK_PULL,
    ParamEstimate,
    ParamEvidence,
    deviating_families,
    family_explanation,
    infer_params,
    lead_family,
    param_evidence,
)

__all__ = [
    "WEAK_PULL",
    "Confounder",
    "ParamEstimate",
    "ParamEvidence",
    "ParamSpace",
    "ParameterInference",
    "Windows",
    "cluster_confounders",
    "deviating_families",
    "family_explanation",
    "infer_params",
    "lead_family",
    "over_represented",
    "param_evidence",
    "propose_actions",
]
