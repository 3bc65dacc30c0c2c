"""Which simulation parameters differ for a cluster, and which action should shrink it."""

from sim2real.attribute.actions import propose_actions
from sim2real.attribute.params import ParamEstimate, infer_params

__all__ = ["ParamEstimate", "infer_params", "propose_actions"]
