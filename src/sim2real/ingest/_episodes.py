"""Cut an extracted recording into episodes: time windows, signal tables, episode rows."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sim2real.errors import IngestError
from sim2real.ingest._extract import Extracted, condition_matches
from sim2real.ingest._tables import signals_table, to_timestamp
from sim2real.ingest.fields import FieldPathError, get_field, parse_field
from sim2real.ingest.images import hist_distance
from sim2real.ingest.mapping import Condition, Mapping, ValueSource

__all__ = ["Episode", "split_episodes"]

_OUTCOMES = {"success": "success", "succeeded": "success", "true": "success", "1": "success",
             "ok": "success", "1.0": "success", "failure": "failure", "failed": "failure",
             "fail": "failure", "false": "failure", "0": "failure", "0.0": "failure"}


@dataclass(frozen=True)
class Episode:
    """One episode: its row of ``episodes`` and its ``signals`` table."""

    row: dict[str, Any]
    signals: pa.Table


def _marker_times(ext: Extracted, cond: Condition) -> list[int]:
    return [t for t, m in ext.events.get(cond.topic, [])
            if condition_matches(m, cond.field, cond.equals)]


def _windows(ext: Extracted, mapping: Mapping) -> list[tuple[int, int]]:
    """``(start_ns, end_ns)`` of each episode, end inclusive."""
    if mapping.episodes.split == "file":
        firsts = [s.times.min() for s in ext.series.values() if len(s.times)]
        lasts = [s.times.max() for s in ext.series.values() if len(s.times)]
        return [(int(min(firsts)), int(max(lasts)))] if firsts else []
    assert mapping.episodes.start is not None  # the mapping's validator checks it
    starts = _marker_times(ext, mapping.episodes.start)
    ends = _marker_times(ext, mapping.episodes.end) if mapping.episodes.end else []
    windows = []
    for i, start in enumerate(starts):
        nxt = starts[i + 1] if i + 1 < len(starts) else None
        end = next((e for e in ends if e >= start and (nxt is None or e <= nxt)), None)
        if end is None:  # no end marker: the episode runs to the next start (or the file's end)
            end = nxt - 1 if nxt is not None else max(
                (int(s.times.max()) for s in ext.series.values() if len(s.times)), default=start)
        windows.append((start, end))
    return windows


def _signals(ext: Extracted, episode_id: str, start: int, end: int) -> pa.Table:
    """Union of every channel's sample times in the window; a channel is null between its own."""
    cuts = {}
    for topic, series in ext.series.items():
        order = np.argsort(series.times, kind="stable")
        times = series.times[order]
        lo, hi = np.searchsorted(times, start, "left"), np.searchsorted(times, end, "right")
        cuts[topic] = (times[lo:hi], order[lo:hi])
    union = np.unique(np.concatenate([c[0] for c in cuts.values()] or [np.zeros(0, np.int64)]))
    columns: dict[str, np.ndarray] = {}
    for topic, (times, rows) in cuts.items():
        series = ext.series[topic]
        slot = np.searchsorted(union, times)
        for j, name in enumerate(series.columns):
            col = np.full(len(union), np.nan)
            col[slot] = series.values[rows, j]  # duplicates of one stamp: the last one wins
            columns[name] = col
        if series.hists is not None and series.hists.size:
            col = np.full(len(union), np.nan)
            col[slot] = hist_distance(series.hists[rows])
            columns[series.columns[0].removesuffix("_brightness") + "_hist_dist"] = col
    return signals_table(episode_id, (union - start) / 1e9, columns)


class _Resolver:
    """Resolves :class:`ValueSource` entries for one episode."""

    def __init__(self, ext: Extracted, path: Path, window: tuple[int, int],
                 sidecar_row: dict[str, str]) -> None:
        self.ext, self.path, self.window = ext, path, window
        self.sidecar_row = sidecar_row

    def raw(self, src: ValueSource, what: str) -> Any:
        if src.value is not None:
            return src.value
        if src.filename is not None:
            found = re.search(src.filename, self.path.name)
            if found is None:
                return None
            return found.group(1) if found.groups() else found.group(0)
        if src.csv is not None:
            return self.sidecar_row.get(src.csv) or None
        return self._from_topic(src, what)

    def _from_topic(self, src: ValueSource, what: str) -> Any:
        assert src.topic is not None
        start, end = self.window
        hits = [(t, m) for t, m in self.ext.events.get(src.topic, []) if start <= t <= end]
        if not hits:
            return None
        stamp, message = hits[0] if src.pick == "first" else hits[-1]
        if src.field is None:
            return (stamp - start) / 1e9 if what == "failure_time" else "present"
        try:
            value = get_field(message, parse_field(src.field))
        except FieldPathError as err:
            msg = f"{self.path}: topic {src.topic!r}: {what} field {src.field!r}: {err}"
            raise IngestError(msg) from err
        return value.item() if isinstance(value, np.generic) else value

    def value(self, src: ValueSource | None, what: str) -> Any:
        if src is None:
            return None
        raw = self.raw(src, what)
        if src.topic is not None and src.field is None and what != "failure_time":
            raw = raw or "absent"
        if src.map is not None and raw is not None:
            raw = src.map.get(str(raw), src.map.get(str(raw).lower(), raw))
        return raw


def _outcome(value: Any, where: str) -> str | None:
    if value is None:
        return None
    found = _OUTCOMES.get(str(value).strip().lower())
    if found is None:
        msg = f"{where}: outcome {value!r} is neither success nor failure; add a map: to it"
        raise IngestError(msg)
    return found


def _row(res: _Resolver, mapping: Mapping, episode_id: str) -> dict[str, Any]:
    where = f"{res.path}: episode {episode_id!r}"
    row: dict[str, Any] = {"episode_id": episode_id}
    for name in ("source", "task", "deployment", "robot_id", "site", "failure_label"):
        value = res.value(getattr(mapping, name), name)
        if value is not None:
            row[name] = str(value)
    row["outcome"] = _outcome(res.value(mapping.outcome, "outcome"), where)
    failure_time = res.value(mapping.failure_time, "failure_time")
    row["failure_time"] = None if failure_time is None else float(failure_time)
    started = res.value(mapping.started_at, "started_at")
    row["started_at"] = to_timestamp(res.window[0] if started is None else started, where)
    for prefix, specs in (("ctx.", mapping.ctx), ("sys.", mapping.sys), ("param.", mapping.param)):
        for name, spec in specs.items():
            row[prefix + name] = res.value(spec, prefix + name)
    if row.get("source") not in ("real", "sim"):
        raise IngestError(f"{where}: source {row.get('source')!r}; expected real or sim")
    if row["source"] == "real":  # the spec: param.* is null on real rows
        row.update({k: None for k in row if k.startswith("param.")})
    if row["source"] == "real" and row["outcome"] is None:
        msg = f"{where}: a real episode needs an outcome; none came from the mapping's outcome"
        raise IngestError(msg)
    return row


def split_episodes(ext: Extracted, mapping: Mapping, path: Path,
                   sidecar: dict[str, dict[str, str]]) -> list[Episode]:
    """The episodes of one recording.

    Raises:
        IngestError: no episode was found, or an episode's values are missing or invalid.
    """
    windows = _windows(ext, mapping)
    if not windows:
        raise IngestError(f"{path}: no episode found (no messages on the mapped topics, "
                          "or no start marker)")
    stem = path.name.removesuffix(".mcap").removesuffix(".bag").removesuffix(".db3")
    episodes = []
    for index, window in enumerate(windows):
        try:
            episode_id = mapping.episodes.id_template.format(stem=stem, index=index)
        except (KeyError, IndexError, ValueError) as err:
            msg = f"mapping episodes.id {mapping.episodes.id!r}: use only {{stem}} and {{index}}"
            raise IngestError(msg) from err
        # A sidecar row matches the episode ID, or else the file's stem.
        res = _Resolver(ext, path, window, sidecar.get(episode_id) or sidecar.get(stem) or {})
        episodes.append(Episode(_row(res, mapping, episode_id), _signals(ext, episode_id, *window)))
    return episodes
