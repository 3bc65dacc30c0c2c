"""Ingest recordings (MCAP, rosbag, LeRobot, robomimic) into the canonical dataset format.

Heavy readers (mcap, rosbags, h5py, pillow) are imported on first use; a missing one raises
an :class:`~sim2real.errors.IngestError` naming the extra to install.
"""

from sim2real.ingest.mapping import Mapping, load_mapping, parse_mapping
from sim2real.ingest.recordings import ingest_recordings, open_recording

__all__ = ["Mapping", "ingest_recordings", "load_mapping", "open_recording", "parse_mapping"]
