"""Which simulation parameters differ for a cluster, and which action should shrink it."""

from sim2real.attribute.actions import propose_actions
from sim2real.attribute.inference import ParameterInference, ParamSpace, Windows
from sim2real.attribute.params import (
    ParamEstimate,
    ParamEvidence,
    deviating_families,
    family_explanation,
    infer_params,
    param_evidence,
)

__all__ = [
    "ParamEstimate",
    "ParamEvidence",
    "ParamSpace",
    "ParameterInference",
    "Windows",
    "deviating_families",
    "family_explanation",
    "infer_params",
    "param_evidence",
    "propose_actions",
]
