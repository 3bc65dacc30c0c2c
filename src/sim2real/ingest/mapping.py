"""``mapping.yaml``: how a recording's topics become episodes and channels.

```yaml
task: pick_place                 # a constant, or {topic:, field:} / {filename:} / {csv:}
source: real
deployment: {filename: '^(w\\d+)_'}
outcome: {topic: /outcome, field: data}
failure_time: {topic: /failure}  # a topic without field: the time of its first message
episodes: {split: file}          # or markers: {split: markers, start: {...}, end: {...}}
channels:
  - /joint_states.position[2] -> j3_pos
  - {from: /wrench.force.z, name: grip_force, family: dynamics, unit: N}
images:
  - {topic: /camera/image_raw/compressed, prefix: cam}
ctx: {object_type: {csv: object}}
param: {friction: {topic: /sim/params, field: friction}}
sidecar: {path: episodes.csv, key: episode_id}
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sim2real.dataset.schema import Family
from sim2real.errors import IngestError
from sim2real.ingest.fields import Step, parse_field, split_source

__all__ = ["ChannelSpec", "Condition", "EpisodeSpec", "ImageSpec", "Mapping", "ValueSource",
           "load_mapping", "parse_mapping"]

Scalar = str | int | float | bool


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ValueSource(_Model):
    """Where one episode-level value comes from; exactly one of the four is set.

    ``topic`` without ``field`` means the time of the topic's message (seconds from the
    episode start) for ``failure_time``, and ``present``/``absent`` (look them up in ``map``)
    for the other values.
    """

    value: Scalar | None = None
    topic: str | None = None
    field: str | None = None
    pick: Literal["first", "last"] = "first"
    filename: str | None = Field(default=None, description="regex on the file name")
    csv: str | None = Field(default=None, description="column of the sidecar CSV")
    map: dict[str, Scalar] | None = None

    @model_validator(mode="before")
    @classmethod
    def _scalar(cls, data: Any) -> Any:
        return {"value": data} if isinstance(data, Scalar) else data

    @model_validator(mode="after")
    def _one(self) -> ValueSource:
        given = [k for k in ("value", "topic", "filename", "csv") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of value, topic, filename, csv")
        if self.field is not None:
            parse_field(self.field)
        return self


class Condition(_Model):
    """A marker: a message on ``topic`` (whose ``field`` equals ``equals``, when given)."""

    topic: str
    field: str | None = None
    equals: Scalar | None = None


class EpisodeSpec(_Model):
    """How a recording splits into episodes."""

    split: Literal["file", "markers"] = "file"
    start: Condition | None = None
    end: Condition | None = None
    id: str | None = Field(default=None, description="template: {stem}, {index}")

    @model_validator(mode="after")
    def _markers(self) -> EpisodeSpec:
        if self.split == "markers" and self.start is None:
            raise ValueError("split: markers needs a start condition (and usually an end)")
        return self

    @property
    def id_template(self) -> str:
        """Episode ID template; marker splits number the episodes of each file."""
        return self.id or ("{stem}" if self.split == "file" else "{stem}-{index:03d}")


class ChannelSpec(_Model):
    """One signal column from one numeric message field."""

    source: str = Field(alias="from")
    name: str
    family: Family | None = None
    unit: str = ""

    @model_validator(mode="before")
    @classmethod
    def _arrow(cls, data: Any) -> Any:
        if isinstance(data, str):
            src, sep, name = data.partition("->")
            if not sep:
                raise ValueError("a channel string reads '/topic.field -> name'")
            return {"from": src.strip(), "name": name.strip()}
        return data

    @model_validator(mode="after")
    def _path(self) -> ChannelSpec:
        topic, field = split_source(self.source)
        if not topic or field is None:
            raise ValueError(f"{self.source!r} names no field; expected /topic.field[index]")
        parse_field(field)
        return self

    @property
    def topic(self) -> str:
        """The topic part of ``from``."""
        return split_source(self.source)[0]

    @property
    def steps(self) -> tuple[Step, ...]:
        """The parsed field path of ``from``."""
        field = split_source(self.source)[1]
        assert field is not None  # checked by the validator
        return parse_field(field)


class ImageSpec(_Model):
    """An image topic whose frames become perception statistics ``<prefix>_<stat>``."""

    topic: str
    prefix: str | None = None

    @property
    def column_prefix(self) -> str:
        """``prefix``, or the topic name made into a column name."""
        if self.prefix:
            return self.prefix
        return "_".join(p for p in self.topic.replace("-", "_").split("/") if p) or "image"


class Sidecar(_Model):
    """A CSV with one row per episode; its ``key`` column holds the episode ID or file stem."""

    path: str
    key: str = "episode_id"


class ParamSpec(_Model):
    """The randomisation range of one simulation parameter (for ``params.csv``)."""

    low: float
    high: float
    nominal: float


class Mapping(_Model):
    """The whole ``mapping.yaml``."""

    task: ValueSource
    source: ValueSource = ValueSource(value="real")
    deployment: ValueSource | None = None
    robot_id: ValueSource | None = None
    site: ValueSource | None = None
    started_at: ValueSource | None = None
    outcome: ValueSource | None = None
    failure_time: ValueSource | None = None
    failure_label: ValueSource | None = None
    time: Literal["log", "header"] = "log"
    episodes: EpisodeSpec = EpisodeSpec()
    channels: list[ChannelSpec] = []
    images: list[ImageSpec] = []
    ctx: dict[str, ValueSource] = {}
    sys: dict[str, ValueSource] = {}
    param: dict[str, ValueSource] = {}
    params: dict[str, ParamSpec] = {}
    sidecar: Sidecar | None = None
    base_dir: Path = Field(default=Path("."), exclude=True)

    @model_validator(mode="after")
    def _unique(self) -> Mapping:
        seen: set[str] = set()
        for name in [c.name for c in self.channels] + [i.column_prefix for i in self.images]:
            if name in seen or name in ("episode_id", "t"):
                raise ValueError(f"channel name {name!r} is used twice or is reserved")
            seen.add(name)
        if not self.channels and not self.images:
            raise ValueError("the mapping names no channels and no images")
        return self


def _location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_mapping(data: Any, *, file: str = "mapping.yaml",
                  base_dir: Path | None = None) -> Mapping:
    """Validate a mapping given as plain data (what ``yaml.safe_load`` returns).

    Raises:
        IngestError: names the file, the key (``channels[3].family``) and what was expected.
    """
    if not isinstance(data, dict):
        raise IngestError(f"{file}: expected a mapping of keys (task:, channels:, ...)")
    try:
        return Mapping.model_validate({**data, "base_dir": base_dir or Path(".")})
    except ValidationError as err:
        first = err.errors()[0]
        loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and "[" in p))
        got = first.get("input")
        shown = f" (got {got!r})" if isinstance(got, Scalar) else ""
        msg = f"{file}: key {_location(loc)}: {first['msg']}{shown}"
        if len(err.errors()) > 1:
            msg += f"; and {len(err.errors()) - 1} more problem(s)"
        raise IngestError(msg) from err


def load_mapping(path: str | Path) -> Mapping:
    """Read and validate ``mapping.yaml``.

    Raises:
        IngestError: the file is missing, not YAML, or breaks the mapping's rules.
    """
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise IngestError(f"{path}: cannot read the mapping ({err.strerror})") from err
    except yaml.YAMLError as err:
        raise IngestError(f"{path}: not valid YAML ({err})") from err
    return parse_mapping(data, file=str(path), base_dir=path.parent)
