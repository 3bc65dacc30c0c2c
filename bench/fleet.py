"""Benchmark fleets ``s``, ``m`` and ``l``, written in the dataset format.

They reuse the demo's synthetic telemetry model (:mod:`sim2real.demo.synthetic`: the
standard world widened to the issue's channel count), with the real/sim episode counts and
sample rate set to the sizes of the benchmark. Failures are whatever share the world's causes
and background produce (about 16 %), not a fixed count.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import NamedTuple

import pyarrow.parquet as pq

from sim2real.demo.synthetic import generate_world, standard_world, widened
from sim2real.demo.synthetic.spec import WorldSpec

__all__ = ["SIZES", "FleetSize", "decoded_estimate", "disk_estimate", "fleet_spec",
           "generate_fleet"]

DATA = Path(__file__).parent / "data"


class FleetSize(NamedTuple):
    """How big a benchmark fleet is."""

    name: str
    n_real: int
    n_sim: int
    n_samples: int
    n_channels: int


SIZES = {
    "s": FleetSize("s", 10_000, 20_000, 200, 24),
    "m": FleetSize("m", 100_000, 50_000, 300, 32),
    "l": FleetSize("l", 300_000, 100_000, 300, 32),
    # A quick size for smoke runs of the benchmark itself.
    "xs": FleetSize("xs", 2_000, 4_000, 200, 24),
}


def fleet_spec(size: FleetSize) -> tuple[WorldSpec, float]:
    """The world and the scale that give ``size``'s counts and shape."""
    base = widened(standard_world(), size.n_channels)
    scale = size.n_real / sum(base.episodes_per_deployment)
    duration = base.tasks[0].duration_s
    rate = size.n_samples / duration
    spec = dataclasses.replace(base, n_sim=round(size.n_sim / scale), sim_rate_hz=rate,
                               real_rate_hz=rate)
    return spec, scale


# Bytes a (row, channel) value takes on disk, measured on s, m and l (3.9-4.0), plus margin.
_DISK_BYTES_PER_VALUE = 4.4


def disk_estimate(size: FleetSize) -> int:
    """Bytes fleet ``size`` needs on disk (signals dominate)."""
    values = (size.n_real + size.n_sim) * size.n_samples * size.n_channels
    return int(values * _DISK_BYTES_PER_VALUE)


def generate_fleet(name: str, root: Path = DATA, *, force: bool = False) -> Path:
    """Write fleet ``name`` under ``root/name`` (once; ``force`` rewrites it).

    Returns:
        The dataset folder.

    Raises:
        SystemExit: the disk holding ``root`` has too little free space for it.
    """
    out = root / name
    dataset = out / "dataset"
    if dataset.exists() and not force:
        return dataset
    root.mkdir(parents=True, exist_ok=True)
    need, free = disk_estimate(SIZES[name]), shutil.disk_usage(root).free
    if need > free:
        raise SystemExit(f"fleet {name} needs about {need / 1024**3:.1f} GiB of free disk in "
                         f"{root}; {free / 1024**3:.1f} GiB free")
    if out.exists():
        shutil.rmtree(out)
    spec, scale = fleet_spec(SIZES[name])
    generate_world(spec, out, seed=0, scale=scale)
    return dataset


def disk_bytes(dataset: Path) -> int:
    """Bytes the dataset takes on disk."""
    return sum(f.stat().st_size for f in dataset.rglob("*") if f.is_file())


def signal_rows(dataset: Path) -> int:
    """Rows of the signals table, from the Parquet footers only."""
    return sum(pq.ParquetFile(f).metadata.num_rows for f in (dataset / "signals").glob("*.parquet"))


def decoded_estimate(dataset: Path) -> int:
    """Bytes the signals take decoded, from the Parquet footers (uncompressed row groups)."""
    total = 0
    for f in (dataset / "signals").glob("*.parquet"):
        meta = pq.ParquetFile(f).metadata
        total += sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))
    return total
