"""The dataset format: schema, loading with validation, and writing."""

from sim2real.dataset.ids import EpisodeIndex
from sim2real.dataset.load import Dataset, load_dataset
from sim2real.dataset.location import Location
from sim2real.dataset.schema import FAMILIES, Channel, Family, ParamRange, infer_family
from sim2real.dataset.write import write_dataset

__all__ = [
    "FAMILIES",
    "Channel",
    "Dataset",
    "EpisodeIndex",
    "Family",
    "Location",
    "ParamRange",
    "infer_family",
    "load_dataset",
    "write_dataset",
]
