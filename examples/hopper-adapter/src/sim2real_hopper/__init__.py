"""An example sim2real simulator adapter package: a MuJoCo hopper (``--adapter hopper``)."""

from sim2real_hopper.adapter import HopperAdapter

__all__ = ["HopperAdapter"]
