"""sim2real: cluster real-robot failures by their sim-to-real drift signature."""

from sim2real._version import __version__

__all__ = ["__version__"]
