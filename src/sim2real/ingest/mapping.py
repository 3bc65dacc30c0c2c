"""``mapping.yaml``: how a recording's topics become episodes and channels.

```yaml
task: pick_place                 # a constant, or {topic:, field:} / {filename:} / {csv:} ...
source: {path: '/(real|sim)/'}
deployment: {metadata: episode, key: wave}   # an MCAP metadata record (rosbag2: custom_data)
outcome: {topic: /outcome, field: data}
failure_time: {topic: /events, where: {type: failure}}   # the time of its first message
episodes: {split: file, grace: 1.0}  # or {split: markers, start: {...}, end: {...}}
channels:
  - /joint_states.position[2] -> j3_pos
  - {from: /wrench.force.z, name: grip_force, family: dynamics, unit: N}
  - {from: /diagnostics.status[0].values[key=battery].value, name: battery_v, optional: true}
images:
  - {topic: /camera/image_raw/compressed, prefix: cam}
ctx: {object_type: {csv: object}}
sidecar: {path: episodes.csv, key: episode_id}
real:                            # only for real episodes: lists extend, maps merge
  channels: [/system/loop.latency_ms -> loop_latency_ms]
sim:
  param: {friction: {topic: /sim/params, field: friction}}
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sim2real.dataset.schema import Family
from sim2real.errors import IngestError
from sim2real.ingest.fields import FieldPathError, Step, get_field, parse_field, split_source

__all__ = ["ChannelSpec", "Condition", "EpisodeSpec", "ImageSpec", "Mapping", "ValueSource",
           "load_mapping", "matches", "parse_mapping"]

Scalar = str | int | float | bool
_SOURCES = ("value", "topic", "filename", "path", "csv", "metadata", "attr", "feature")
# Keys a ``real:`` / ``sim:`` block may change: how files split into episodes and which
# source an episode is come first, so they are the same for every episode.
_FIXED_KEYS = ("source", "episodes", "time", "sidecar")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def matches(message: Any, where: dict[str, Scalar] | None) -> bool:
    """Whether every ``field: value`` of ``where`` holds in ``message`` (compared as text,
    case-insensitively, so that ``1``, ``"1"`` and ``true``/``True`` meet)."""
    if not where:
        return True
    for path, wanted in where.items():
        try:
            value = get_field(message, parse_field(path))
        except (FieldPathError, ValueError):
            return False
        if str(value).strip().lower() != str(wanted).strip().lower():
            return False
    return True


class ValueSource(_Model):
    """Where one episode-level value comes from; exactly one of the sources is set.

    ``topic`` without ``field`` means the time of the topic's message (seconds from the
    episode start) for ``failure_time``, and ``present``/``absent`` (look them up in ``map``)
    for the other values; ``where`` keeps only the messages whose fields hold the given
    values. ``metadata`` names an MCAP metadata record (``custom_data`` for rosbag2's) and
    ``key`` the entry in it; ``attr`` an HDF5 attribute (the demo's, else the file's);
    ``feature`` a LeRobot frame column (``next.success``); ``path`` a regex on the
    recording's whole path (``/(success|failure)/`` for labels kept in folder names).
    ``type`` forces ``number`` or ``string``; by default ``ctx.*`` and ``param.*`` values
    that all read as numbers become numbers.
    """

    value: Scalar | None = None
    topic: str | None = None
    field: str | None = None
    where: dict[str, Scalar] | None = None
    pick: Literal["first", "last", "any"] = "first"
    filename: str | None = Field(default=None, description="regex on the file name")
    path: str | None = Field(default=None, description="regex on the whole path")
    csv: str | None = Field(default=None, description="column of the sidecar CSV")
    metadata: str | None = Field(default=None, description="metadata record name")
    key: str | None = Field(default=None, description="entry of the metadata record")
    attr: str | None = Field(default=None, description="HDF5 attribute")
    feature: str | None = Field(default=None, description="LeRobot frame column")
    map: dict[str, Scalar] | None = None
    type: Literal["number", "string"] | None = None
    optional: bool = False

    @model_validator(mode="before")
    @classmethod
    def _scalar(cls, data: Any) -> Any:
        return {"value": data} if isinstance(data, Scalar) else data

    @model_validator(mode="after")
    def _one(self) -> ValueSource:
        given = [k for k in _SOURCES if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(_SOURCES)}")
        if self.field is not None:
            parse_field(self.field)
        for path in self.where or {}:
            parse_field(path)
        if (self.metadata is None) != (self.key is None):
            raise ValueError("metadata: and key: go together: {metadata: RECORD, key: NAME}")
        return self

    @property
    def topics(self) -> set[str]:
        return {self.topic} if self.topic else set()


class Condition(_Model):
    """A marker: a message on ``topic`` (whose ``field`` equals ``equals``, when given)."""

    topic: str
    field: str | None = None
    equals: Scalar | None = None


class EpisodeSpec(_Model):
    """How a recording splits into episodes.

    ``grace``: seconds after an episode's last sample (or end marker) during which its
    outcome and failure messages still count: recorders publish them after the last tick.
    """

    split: Literal["file", "markers"] = "file"
    start: Condition | None = None
    end: Condition | None = None
    id: str | None = Field(default=None, description="template: {stem}, {index}")
    grace: float = Field(default=1.0, ge=0.0)

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
    """One signal column from one numeric message field (numeric strings are read too).

    ``where`` keeps only the messages whose fields hold the given values (a topic of
    ``KeyValue`` messages: ``where: {key: battery}``); ``optional`` makes a missing topic or
    field a warning and the channel null, instead of an error.
    """

    source: str = Field(alias="from")
    name: str
    family: Family | None = None
    unit: str = ""
    where: dict[str, Scalar] | None = None
    optional: bool = False

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
        for path in self.where or {}:
            parse_field(path)
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
    optional: bool = False

    @property
    def column_prefix(self) -> str:
        """``prefix``, or the topic name made into a column name."""
        if self.prefix:
            return self.prefix
        return "_".join(p for p in self.topic.replace("-", "_").split("/") if p) or "image"


class Sidecar(_Model):
    """A CSV with one row per episode; its ``key`` column holds the episode ID, or the
    recording's own name for it (file stem, LeRobot episode index, robomimic demo name)."""

    path: str
    key: str = "episode_id"


class ParamSpec(_Model):
    """The randomisation range of one simulation parameter (for ``params.csv``)."""

    low: float
    high: float
    nominal: float


class Mapping(_Model):
    """The whole ``mapping.yaml``.

    ``variants`` holds the mapping as it applies to ``real`` and to ``sim`` episodes, where
    the file has ``real:`` / ``sim:`` blocks (built by :func:`parse_mapping`).
    """

    task: ValueSource | None = None
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
    variants: dict[str, Mapping] = Field(default_factory=dict, exclude=True)

    @model_validator(mode="after")
    def _unique(self) -> Mapping:
        seen: set[str] = set()
        for name in [c.name for c in self.channels] + [i.column_prefix for i in self.images]:
            if name in seen or name in ("episode_id", "t"):
                raise ValueError(f"channel name {name!r} is used twice or is reserved")
            seen.add(name)
        return self

    def for_source(self, source: str) -> Mapping:
        """The mapping that applies to episodes of ``source`` (``real`` or ``sim``)."""
        return self.variants.get(source, self)

    @property
    def all_variants(self) -> list[Mapping]:
        """This mapping and its per-source variants."""
        return [self, *self.variants.values()]

    def value_sources(self) -> list[ValueSource]:
        """Every episode-level value source, with its variants'."""
        out: list[ValueSource] = []
        for m in self.all_variants:
            out += [s for s in (m.task, m.source, m.deployment, m.robot_id, m.site,
                                m.started_at, m.outcome, m.failure_time, m.failure_label)
                    if s is not None]
            out += [*m.ctx.values(), *m.sys.values(), *m.param.values()]
        return out


def _location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _merged(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with a ``real:``/``sim:`` block applied: lists extend (an entry of the same
    channel name or image topic replaces the base one), maps merge, the rest replaces."""
    out = dict(base)
    for key, value in override.items():
        old = out.get(key)
        if isinstance(old, list) and isinstance(value, list):
            names = {_entry_name(v) for v in value}
            out[key] = [v for v in old if _entry_name(v) not in names] + value
        elif isinstance(old, dict) and isinstance(value, dict):
            out[key] = {**old, **value}
        else:
            out[key] = value
    return out


def _entry_name(entry: Any) -> Any:
    """The name a channel or image entry goes by, for overriding it."""
    if isinstance(entry, str):
        return entry.partition("->")[2].strip() or entry
    if isinstance(entry, dict):
        return entry.get("name") or entry.get("prefix") or entry.get("topic")
    return None


def _validate(data: dict[str, Any], file: str, prefix: tuple[str, ...] = ()) -> Mapping:
    try:
        return Mapping.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = prefix + tuple(p for p in first["loc"] if not (isinstance(p, str) and "[" in p))
        got = first.get("input")
        shown = f" (got {got!r})" if isinstance(got, Scalar) else ""
        msg = f"{file}: key {_location(loc)}: {first['msg']}{shown}"
        if len(err.errors()) > 1:
            msg += f"; and {len(err.errors()) - 1} more problem(s)"
        raise IngestError(msg) from err


def parse_mapping(data: Any, *, file: str = "mapping.yaml",
                  base_dir: Path | None = None) -> Mapping:
    """Validate a mapping given as plain data (what ``yaml.safe_load`` returns).

    Raises:
        IngestError: names the file, the key (``channels[3].family``) and what was expected.
    """
    if not isinstance(data, dict):
        raise IngestError(f"{file}: expected a mapping of keys (task:, channels:, ...)")
    base = {k: v for k, v in data.items() if k not in ("real", "sim")}
    base["base_dir"] = base_dir or Path(".")
    variants = {}
    for source in ("real", "sim"):
        block = data.get(source)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise IngestError(f"{file}: key {source}: expected a mapping of keys to override")
        fixed = [k for k in block if k in _FIXED_KEYS]
        if fixed:
            msg = (f"{file}: key {source}.{fixed[0]}: cannot differ between real and sim "
                   f"(the same for every episode: {', '.join(_FIXED_KEYS)})")
            raise IngestError(msg)
        variants[source] = _validate(_merged(base, block), file, (source,))
    return _validate({**base, "variants": variants}, file)


def load_mapping(path: str | Path) -> Mapping:
    """Read and validate ``mapping.yaml``.

    Raises:
        IngestError: the file is missing, not YAML, or breaks the mapping's rules.
    """
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise IngestError(f"{path}: cannot read the mapping ({err.strerror})") from err
    except UnicodeDecodeError as err:
        raise IngestError(f"{path}: not a text file ({err.reason} at byte {err.start}); "
                          "expected a YAML mapping") from err
    except yaml.YAMLError as err:
        # One line: where (1-based, as editors count) and the parser's own words.
        mark = getattr(err, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise IngestError(f"{path}{where}: not valid YAML: {problem}") from err
    return parse_mapping(data, file=str(path), base_dir=path.parent)
