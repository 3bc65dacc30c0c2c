"""Read the report's Parquet tables into the arrays the figures plot.

``signatures``: one row per event, ``episode_id``, ``cluster_id``, ``embed_x``, ``embed_y``,
``z.<channel>``... ``traces``: long format ``event_id, episode_id, role, channel, t, value``.
Either may be empty (a report saved without them); every reader then returns nothing and
the page shows an empty state instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from sim2real.report._words import extra
from sim2real.report.model import EventReport

__all__ = ["Breakdown", "Signatures", "Traces", "breakdowns"]

_Z = "z."


def _strings(table: pa.Table, name: str) -> np.ndarray:
    """A column as an object array of ``str`` (nulls become ``""``)."""
    return np.array(
        ["" if v is None else str(v) for v in table.column(name).to_pylist()], dtype=object
    )


class Signatures:
    """Per-event signature rows, indexed by episode id."""

    def __init__(self, table: pa.Table) -> None:
        names = table.column_names
        self.channels = [n[len(_Z) :] for n in names if n.startswith(_Z)]
        ok = "episode_id" in names and bool(self.channels)
        self.ids = _strings(table, "episode_id") if ok else np.array([], dtype=object)
        self.cluster = (
            _strings(table, "cluster_id")
            if ok and "cluster_id" in names
            else np.full(len(self.ids), "", dtype=object)
        )
        # layout (n_events, n_channels); NaN where a channel was not measured
        self.z = (
            np.column_stack(
                [
                    np.asarray(table.column(_Z + c).to_numpy(zero_copy_only=False), dtype=float)
                    for c in self.channels
                ]
            )
            if ok
            else np.zeros((0, 0))
        )
        self.embedding = None
        if ok and {"embed_x", "embed_y"} <= set(names):
            self.embedding = np.column_stack(
                [
                    np.asarray(table.column(n).to_numpy(zero_copy_only=False), dtype=float)
                    for n in ("embed_x", "embed_y")
                ]
            )

    def for_events(self, events: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """The rows of ``events`` that have a signature: ``(ids, z (n, n_channels))``."""
        row = {e: i for i, e in enumerate(self.ids)}
        hits = [e for e in events if e in row]
        return hits, self.z[[row[e] for e in hits]] if hits else np.zeros((0, len(self.channels)))


def heatmap_matrix(
    sig: Signatures, events: Sequence[EventReport], max_channels: int = 30, max_events: int = 400
) -> tuple[np.ndarray, list[str], list[str]]:
    """The heat map of one cluster: ``(z (n_channels, n_events), channels, event ids)``.

    Channels are ordered by their mean absolute effect, events by how closely they follow
    the cluster's mean signature (most typical first). Without a signatures table the
    events' own top channels fill a sparse matrix.
    """
    ids, z = sig.for_events([e.episode_id for e in events])
    channels = list(sig.channels)
    if not ids:
        channels = sorted({t.channel for e in events for t in e.top_channels})
        if not channels:
            return np.zeros((0, 0)), [], []
        col = {c: j for j, c in enumerate(channels)}
        z = np.full((len(events), len(channels)), np.nan)
        for i, e in enumerate(events):
            for t in e.top_channels:
                z[i, col[t.channel]] = t.effect
        ids = [e.episode_id for e in events]
    filled = np.nan_to_num(z)
    keep = np.argsort(-np.abs(filled).mean(axis=0), kind="stable")[:max_channels]
    mean = filled[:, keep].mean(axis=0)
    order = np.argsort(-(filled[:, keep] @ mean), kind="stable")[:max_events]
    return z[np.ix_(order, keep)].T, [channels[j] for j in keep], [ids[i] for i in order]


@dataclass(frozen=True)
class Breakdown:
    """Failures per value of one attribute: this cluster's share beside all failures'."""

    title: str
    values: list[str]
    in_cluster: list[float]
    overall: list[float]
    lift: float  # the largest over-representation, to show the most telling first


def _attributes(event: EventReport) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, title in (("robot_id", "robot"), ("site", "site")):
        value = extra(event, key)
        if value is not None:
            out[title] = str(value)
    context = extra(event, "context")
    if isinstance(context, dict):
        for key, value in context.items():
            if value is not None:
                out[str(key).removeprefix("ctx.")] = str(value)
    return out


def breakdowns(
    cluster: Sequence[EventReport], everyone: Sequence[EventReport], top: int = 8, most: int = 6
) -> list[Breakdown]:
    """By robot, site and each context value, the most over-represented attribute first."""
    mine = [_attributes(e) for e in cluster]
    allv = [_attributes(e) for e in everyone]
    titles = sorted({k for a in mine for k in a})
    out = []
    for title in titles:
        here = Counter(a[title] for a in mine if title in a)
        there = Counter(a[title] for a in allv if title in a)
        n_here, n_there = sum(here.values()), sum(there.values()) or 1
        values = [v for v, _ in here.most_common(top)]
        share = [here[v] / n_here for v in values]
        base = [there[v] / n_there for v in values]
        lift = max((s - b for s, b in zip(share, base, strict=True)), default=0.0)
        out.append(Breakdown(title, values, share, base, lift))
    out.sort(key=lambda b: -b.lift)
    return out[:most]


class Traces:
    """Shown trajectories grouped by the real failure they belong to."""

    def __init__(self, table: pa.Table) -> None:
        need = {"event_id", "episode_id", "role", "channel", "t", "value"}
        self._rows: dict[str, np.ndarray] = {}
        if not need <= set(table.column_names) or table.num_rows == 0:
            self._cols: dict[str, np.ndarray] = {}
            return
        self._cols = {n: _strings(table, n) for n in ("event_id", "episode_id", "role", "channel")}
        for n in ("t", "value"):
            self._cols[n] = np.asarray(table.column(n).to_numpy(zero_copy_only=False), dtype=float)
        order = np.argsort(self._cols["event_id"], kind="stable")
        keys, starts = np.unique(self._cols["event_id"][order], return_index=True)
        for k, rows in zip(keys, np.split(order, starts[1:]), strict=True):
            self._rows[str(k)] = rows

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._rows

    def series(
        self, event_id: str, prefer: Sequence[str], max_channels: int = 6
    ) -> tuple[list[str], dict[str, list[tuple[str, str, np.ndarray, np.ndarray]]]]:
        """Channels (the event's top channels first) and per channel its trajectories."""
        rows = self._rows.get(event_id)
        if rows is None:
            return [], {}
        c = {n: v[rows] for n, v in self._cols.items()}
        present = list(dict.fromkeys(c["channel"]))
        prefer = list(dict.fromkeys(prefer))
        channels = [p for p in prefer if p in present] + sorted(set(present) - set(prefer))
        channels = channels[:max_channels]
        out: dict[str, list[tuple[str, str, np.ndarray, np.ndarray]]] = {}
        for channel in channels:
            on = c["channel"] == channel
            for episode in dict.fromkeys(c["episode_id"][on]):
                pick = on & (c["episode_id"] == episode)
                t, v = c["t"][pick], c["value"][pick]
                step = np.argsort(t, kind="stable")
                role = str(c["role"][pick][0])
                out.setdefault(channel, []).append((str(episode), role, t[step], v[step]))
        return channels, out
