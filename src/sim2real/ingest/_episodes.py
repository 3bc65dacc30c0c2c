"""Cut an extracted recording into episodes: time windows, long signal rows, episode rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sim2real.errors import IngestError
from sim2real.ingest._extract import Extracted, Plan, condition_matches
from sim2real.ingest._facts import Facts, apply_facts, resolve
from sim2real.ingest._tables import long_table, to_timestamp
from sim2real.ingest.images import STATS, hist_distance
from sim2real.ingest.mapping import Condition, Mapping, matches

__all__ = ["Episode", "split_episodes"]


@dataclass(frozen=True)
class Episode:
    """One episode: its row of ``episodes``, its ``signals`` rows (long layout), and what
    ingest had to leave out or assume for it."""

    row: dict[str, Any]
    signals: pa.Table
    warnings: list[str] = field(default_factory=list)
    nonfinite: dict[str, int] = field(default_factory=dict)


def _marker_times(ext: Extracted, cond: Condition) -> list[int]:
    return [t for t, m in ext.events.get(cond.topic, [])
            if condition_matches(m, cond.field, cond.equals)]


def _span(ext: Extracted) -> tuple[int, int] | None:
    """First and last sample time of any channel or frame."""
    series = [t for t, _ in ext.channels.values() if t.size] + [
        s.times for s in ext.images.values() if s.times.size]
    if not series:
        return None
    return int(min(t.min() for t in series)), int(max(t.max() for t in series))


def _windows(ext: Extracted, mapping: Mapping) -> list[tuple[int, int, int]]:
    """``(start, end, facts_end)`` ns of each episode: its samples lie in ``[start, end]``;
    its outcome and failure messages up to ``facts_end`` (``grace`` past the end, never
    into the next episode)."""
    grace = round(mapping.episodes.grace * 1e9)
    span = _span(ext)
    if mapping.episodes.split == "file":
        return [] if span is None else [(span[0], span[1], span[1] + grace)]
    assert mapping.episodes.start is not None  # the mapping's validator checks it
    starts = _marker_times(ext, mapping.episodes.start)
    ends = _marker_times(ext, mapping.episodes.end) if mapping.episodes.end else []
    windows = []
    for i, start in enumerate(starts):
        nxt = starts[i + 1] if i + 1 < len(starts) else None
        end = next((e for e in ends if e >= start and (nxt is None or e <= nxt)), None)
        if end is None:  # no end marker: the episode runs to the next start (or the file's end)
            end = nxt - 1 if nxt is not None else (start if span is None else max(span[1], start))
        windows.append((start, end, end + grace if nxt is None else min(end + grace, nxt - 1)))
    return windows


def _one_episode_per_file(ext: Extracted, mapping: Mapping, path: Path) -> None:
    """``split: file`` on a file of many episodes is an error, not one long episode: a file
    with more than one outcome message holds more than one episode."""
    outcome = mapping.outcome
    if mapping.episodes.split != "file" or outcome is None or outcome.topic is None:
        return
    found = [t for t, m in ext.events.get(outcome.topic, []) if matches(m, outcome.where)]
    if len(found) > 1:
        span = (found[-1] - found[0]) / 1e9
        msg = (f"{path}: {len(found)} messages on the outcome topic {outcome.topic!r} over "
               f"{span:.1f} s, so the file holds several episodes, but the mapping says "
               "episodes: {split: file}; use {split: markers, start: ..., end: ...}")
        raise IngestError(msg)


def _rows_of(times: np.ndarray, values: np.ndarray, start: int,
             end: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The samples in ``[start, end]`` as seconds from ``start``, ordered, one per time
    (the later message of a repeated stamp wins), finite only; and how many were not."""
    order = np.argsort(times, kind="stable")
    times, values = times[order], values[order]
    lo, hi = np.searchsorted(times, start, "left"), np.searchsorted(times, end, "right")
    t, v = (times[lo:hi] - start) / 1e9, values[lo:hi]
    last = np.ones(t.size, dtype=bool)
    last[:-1] = t[1:] != t[:-1]
    t, v = t[last], v[last]
    finite = np.isfinite(v)
    return t[finite], v[finite], int((~finite).sum())


def _signals(ext: Extracted, plan: Plan, mapping: Mapping, episode_id: str, start: int,
             end: int) -> tuple[pa.Table, dict[str, int]]:
    """Long rows ``episode_id, t, channel, value`` of the channels ``mapping`` names, each
    with its own times; and per channel the samples left out as NaN, inf or missing."""
    series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    dropped: dict[str, int] = {}
    for spec in mapping.channels:
        found = ext.channels.get(plan.channel_index(spec))
        if found is not None:
            t, v, bad = _rows_of(*found, start, end)
            series[spec.name] = (t, v)
            if bad:
                dropped[spec.name] = bad
    for image in mapping.images:
        frames = ext.images.get(plan.image_index(image))
        if frames is None or not frames.times.size:
            continue
        order = np.argsort(frames.times, kind="stable")
        inside = (frames.times[order] >= start) & (frames.times[order] <= end)
        rows = order[inside]
        t = (frames.times[rows] - start) / 1e9
        stats = {s: frames.stats[rows, k] for k, s in enumerate(STATS)}
        stats["hist_dist"] = hist_distance(frames.hists[rows])
        for name, values in stats.items():
            series[f"{image.column_prefix}_{name}"] = (t, values)
    return long_table(episode_id, series), dropped


def _check_channels(ext: Extracted, plan: Plan, mapping: Mapping, where: str) -> list[str]:
    """Raise for a channel the episode needs that could not be read; warn for an optional one.

    Raises:
        IngestError: the first required channel or image topic that is missing.
    """
    warnings = []
    entries: list[tuple[str, int, str, bool, int]] = [
        ("channel", i, c.name, c.optional, plan.channel_index(c))
        for i, c in enumerate(mapping.channels)]
    entries += [("image", i, m.column_prefix, m.optional, plan.image_index(m))
                for i, m in enumerate(mapping.images)]
    for kind, i, name, optional, index in entries:
        problem = ext.problems.get((kind, index))
        if problem is None:
            continue
        if not optional:
            raise IngestError(f"{problem} (mapping {kind}s[{i}]; optional: true makes it a "
                              "warning)")
        warnings.append(f"{where}: {name} left null (optional): {problem.split(': ', 1)[-1]}")
    return warnings


def _row(mapping: Mapping, facts: Facts, episode_id: str, start: int) -> dict[str, Any]:
    row: dict[str, Any] = {"episode_id": episode_id, "started_at": to_timestamp(start, "")}
    apply_facts(row, mapping, facts)
    if row.get("task") is None:
        raise IngestError(f"{facts.where}: no task: the mapping's task: gave none")
    if row.get("source") not in ("real", "sim"):
        raise IngestError(f"{facts.where}: source {row.get('source')!r}; expected real or sim")
    if row["source"] == "real":  # the spec: param.* is null on real rows
        row.update({k: None for k in row if k.startswith("param.")})
    for key in ("outcome", "deployment"):  # started_at defaults to the first message
        if row["source"] == "real" and row.get(key) is None:
            msg = (f"{facts.where}: a real episode needs {'an' if key == 'outcome' else 'a'} "
                   f"{key}; none came from the mapping's {key}:")
            raise IngestError(msg)
    return row


def split_episodes(ext: Extracted, plan: Plan, mapping: Mapping, path: Path,
                   sidecar: dict[str, dict[str, str]]) -> list[Episode]:
    """The episodes of one recording.

    Raises:
        IngestError: no episode was found, the file holds several under ``split: file``, or
            an episode's values or required channels are missing or invalid.
    """
    _one_episode_per_file(ext, mapping, path)
    windows = _windows(ext, mapping)
    if not windows:
        raise IngestError(f"{path}: no episode found (no messages on the mapped topics, "
                          "or no start marker)")
    stem = path.name.removesuffix(".mcap").removesuffix(".bag").removesuffix(".db3")
    episodes = []
    for index, (start, end, facts_end) in enumerate(windows):
        try:
            episode_id = mapping.episodes.id_template.format(stem=stem, index=index)
        except (KeyError, IndexError, ValueError) as err:
            msg = f"mapping episodes.id {mapping.episodes.id!r}: use only {{stem}} and {{index}}"
            raise IngestError(msg) from err
        where = f"{path}: episode {episode_id!r}"
        # A sidecar row matches the episode ID, or else the file's stem.
        facts = Facts(where, path, sidecar.get(episode_id) or sidecar.get(stem) or {},
                      ext.metadata, events=ext.events, window=(start, facts_end))
        source = resolve(mapping.source, facts, "source")
        own = mapping.for_source(str(source))
        warnings = _check_channels(ext, plan, own, where)
        signals, dropped = _signals(ext, plan, own, episode_id, start, end)
        warnings += [f"{where}: {n} sample(s) of {name} left out (NaN, inf or missing)"
                     for name, n in dropped.items()]
        episodes.append(Episode(_row(own, facts, episode_id, start), signals, warnings,
                                dropped))
    return episodes
