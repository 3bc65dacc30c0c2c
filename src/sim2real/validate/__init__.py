"""Validate a fix: did the targeted cluster shrink between baseline and candidate deployments?"""

from sim2real.validate.compare import rate_comparison, validate

__all__ = ["rate_comparison", "validate"]
