"""A generated world written the way teams record fleets, with each format's own writer.

Every episode of a dataset (wide, one rate) becomes what a robot's recorder makes of it:
joint states (dynamics channels) on ``/joint_states`` and commands (policy) on ``/cmd``
stamped 150 µs later, as one loop publishes them; a perception estimate on ``/perception``
at every ``capture_every``-th tick, stamped at capture time plus network latency; on real
robots only, ``/system`` (loop latency) and a 1 Hz ``/diagnostics`` array whose
``KeyValue`` strings hold the other system channels; ``/events`` (``KeyValue``: ``start``,
then ``failure`` with the symptom) and an ``/outcome`` published after the last tick.
Episode facts go where each format keeps them: MCAP metadata records, rosbag2
``custom_data``, an ``/episode_info`` topic in ROS 1 bags, a sidecar keyed by episode
index for LeRobot, demo attributes for robomimic. Real and sim recordings lie under
``real/`` and ``sim/``. Each format comes with the mapping that ingests it.

Formats: ``mcap-json`` (``mcap`` Writer, Foxglove-style JSON channels), ``mcap-ros2``
(mcap-ros2-support, CDR), ``rosbag2`` (rosbags, sqlite3 storage; ``rosbag2-mcap``: mcap
storage, five times faster to write), ``ros1`` (rosbags), ``lerobot``
(format v3.0 written with pyarrow as documented: the ``lerobot`` package needs torch) and
``robomimic`` (h5py). Needs the ``ingest`` extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sim2real.dataset import load_dataset
from sim2real.demo.recorded._world import Recorded
from sim2real.demo.recorded.messages import WRITERS, record_messages
from sim2real.demo.recorded.tabular import record_lerobot, record_robomimic

__all__ = ["FORMATS", "Recorded", "ingest_recorded", "record_world"]

FORMATS = (*WRITERS, "lerobot", "robomimic")


def record_world(dataset: str | Path, out: str | Path, fmt: str, *,
                 episodes: Sequence[str] | None = None, capture_every: int = 2,
                 latency_s: float = 0.03) -> Recorded:
    """Write the episodes of ``dataset`` as recordings of format ``fmt`` under ``out``.

    Args:
        dataset: a wide dataset with one rate per episode (a generated world).
        out: the folder to write (``real/``, ``sim/``, ``mapping.yaml``...).
        fmt: one of :data:`FORMATS`.
        episodes: record only these (default: all).
        capture_every: the perception estimate comes every this many ticks.
        latency_s: it is stamped this long after its capture.

    Returns:
        What to ingest and how.
    """
    if fmt not in FORMATS:
        raise ValueError(f"format {fmt!r}; expected one of {', '.join(FORMATS)}")
    ds = load_dataset(dataset)
    out = Path(out)
    only = None if episodes is None else set(episodes)
    if fmt == "lerobot":
        return record_lerobot(ds, out, only, capture_every)
    if fmt == "robomimic":
        return record_robomimic(ds, out, only, capture_every)
    return record_messages(ds, out, fmt, only, capture_every, round(latency_s * 1e9))


def ingest_recorded(rec: Recorded, out: str | Path) -> list[str]:
    """Ingest a recorded world into the dataset ``out`` with its mapping (what
    ``sim2real ingest KIND ...`` does, each LeRobot folder with its own sidecar).

    Returns:
        The IDs of the episodes written.
    """
    from sim2real.ingest import ingest_recordings, load_mapping
    from sim2real.ingest._tables import EpisodeDefaults
    from sim2real.ingest.lerobot import ingest_lerobot
    from sim2real.ingest.robomimic import ingest_robomimic

    mapping = load_mapping(rec.mapping)
    if rec.kind in ("mcap", "rosbag"):
        return ingest_recordings(rec.paths, mapping, out, kind=rec.kind).episodes  # type: ignore[arg-type]
    ids: list[str] = []
    for i, path in enumerate(rec.paths):
        defaults = EpisodeDefaults(sidecar=rec.sidecars.get(path))
        read = ingest_lerobot if rec.kind == "lerobot" else ingest_robomimic
        ids += read(path, out, defaults=defaults, append=i > 0, mapping=mapping,
                    families=rec.families)
    return ids
