"""Density-based clustering of drift signatures: no number of clusters to choose."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.cluster import HDBSCAN, KMeans
from sklearn.neighbors import NearestNeighbors

from sim2real.cluster.location import Excess, Fleet, excess
from sim2real.cluster.taxonomy import event_families
from sim2real.drift.compute import Signatures
from sim2real.drift.signature import routine

__all__ = ["MIN_REACH", "SAMPLE_ABOVE", "FailureClusterer", "FeatureSpace", "signature_features"]

# Above this many events HDBSCAN runs on a seeded sample of this size and every other event
# is attached by the same nearest-member rule as HDBSCAN's own rim: HDBSCAN's cost grows
# much faster than linearly (about 100 s for 100k events here), the attachment's almost
# linearly. At or below it the clustering is exactly what it always was.
SAMPLE_ABOVE = 10_000
# More members than this: nearest members through a KD-tree instead of dense distance
# blocks (the same distances, memory bounded for any number of events).
_DENSE_MAX = 4_000
# Rows per dense distance block: (256, 4,000, n_features) float64 stays under ~100 MB.
_BLOCK = 256


@dataclass(frozen=True)
class FeatureSpace:
    """The space failures are clustered in.

    Attributes:
        values: ``(n_events, n_features)``.
        groups: ``(n_events,)`` each event's primary cause family (its own taxonomy).
        columns: group -> the feature columns clustered within that group.
        vocabulary: the unseen context values, the suspicious ``sys.*`` values and the
            symptoms (failure labels) that have a column each, in column order; new events
            are placed with the same columns.
        effects: ``(n_events, n_channels)`` the events' signed channel effects (sigma).
        null: ``(n_null, n_channels)`` the same for comparisons where no gap exists.
        null_failed: ``(n_null,)`` whether each of those comparisons ends at a sim failure.
        bands: ``(3, n_channels)`` the dead bands of the channels' level, size and
            roughness columns (see :func:`signature_features`); events placed later lose
            these.
        roughness: the roughness columns, which the merge of sub-clusters leaves out.
    """

    values: np.ndarray
    groups: np.ndarray
    columns: dict[str, np.ndarray]
    vocabulary: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
    effects: np.ndarray
    null: np.ndarray
    null_failed: np.ndarray
    bands: np.ndarray
    roughness: np.ndarray

    def take(self, rows: np.ndarray) -> FeatureSpace:
        """The same space restricted to events ``rows``."""
        return FeatureSpace(self.values[rows], self.groups[rows], self.columns,
                            self.vocabulary, self.effects[rows], self.null, self.null_failed,
                            self.bands, self.roughness)

    @staticmethod
    def concat(parts: list[FeatureSpace]) -> FeatureSpace:
        """Events of several spaces built from the same signature layout, stacked."""
        return FeatureSpace(np.vstack([p.values for p in parts]),
                            np.concatenate([p.groups for p in parts]), parts[0].columns,
                            parts[0].vocabulary, np.vstack([p.effects for p in parts]),
                            parts[0].null, parts[0].null_failed, parts[0].bands,
                            parts[0].roughness)


# A group's channel columns are capped at this norm (see _cap), and one-hot columns weigh
# as much; an event this close to a cluster's member belongs to it even where the
# cluster's dense core is tighter.
MAX_NORM = 1.5
MIN_REACH = MAX_NORM / 1.5


def signature_features(
    sig: Signatures,
    like: FeatureSpace | None = None,
    symptoms: np.ndarray | None = None,
    tail: float = 0.05,
    max_norm: float = MAX_NORM,
) -> FeatureSpace:
    """Place every event in the clustering space.

    Pass ``like`` (the space of the events a clusterer was fitted on) to place new events
    in that same space, whose one-hot columns are that space's vocabulary.

    Each channel gives three columns (sigma units): its level, the segment scores' mean (a
    steady offset, signed), its size, their RMS (how far the window strays, whichever
    way), and its roughness score (how much more it jitters or spikes between samples than
    its matches: what segment means average away). A noisy sensor's window strays up in
    some segments and down in others: by the strongest segment's sign alone its failures
    split into two clusters; by their level (near zero) and size they are one. An impact
    and a slow push against the same obstacle may reach one level; their roughness
    differs. Each column loses a dead band, what the comparisons where no gap exists show
    routinely: per channel, the size that only ``tail`` of them exceed. A contact force
    that spikes under no gap gets a wider band than a quiet estimate, so its routine spikes
    no longer scatter sim-like failures over the space (where they hid a cause that shows
    on quiet channels). Past the band they are log-compressed, so a cause whose size grows
    over deployments stays one elongated cluster and sim-like failures collapse near the
    origin.
    Then come one column per context column's novelty, one per unseen context value, one
    per suspicious ``sys.*`` value and one per symptom (``symptoms``: each event's
    ``failure_label``, None where none was logged), with one more for the unknown symptom
    (none logged, or one the fitted space never saw).

    Each event's group is its own primary family (:func:`event_families`): a cause shows
    consistently in its own family while its consequences vary (dim light ends in missed
    picks or in collisions), so events are clustered within their group, on the columns
    that describe that family. Two causes of one family (heavy objects at one site, worn
    pads at another) still separate on those columns. Events in which no family deviates
    are clustered on every channel's level and size and on their symptom: where the signals
    look like sim's own, what was seen to go wrong is what is left to tell them apart (a
    camera offset's missed picks from the background's dropped objects); whether such a
    group is more than sim's own failures is then for the places' rule of
    :class:`FailureClusterer` to say. Not on roughness: there it gathered background
    failures into clusters the places' rule let pass (synthetic worlds, 31 of them in one).
    """
    n = len(sig.episode_ids)
    families = np.array(sig.channel_families)
    null = like.null if like is not None else np.nan_to_num(sig.null_effects)
    null_failed = like.null_failed if like is not None else sig.null_failed
    scores = (*_level_size(sig.z), sig.rough)
    bands = like.bands if like is not None else np.stack(
        [_dead_band(b, len(sig.channels), tail)
         for b in (*_level_size(sig.null_z), sig.null_rough)])
    shrunk = np.column_stack([_shrink(x, band) for x, band in zip(scores, bands, strict=True)])
    novelty = np.column_stack([np.log1p(v) for v in sig.novelty.scores.values()]) \
        if sig.novelty.scores else np.zeros((n, 0))
    vocabulary = like.vocabulary if like is not None else (
        tuple(sorted({v for row in sig.novelty.values for v in row})),
        tuple(sorted({v for row in sig.sys_values for v in row})),
        (*sorted({str(v) for v in symptoms if v not in (None, _UNKNOWN)}), _UNKNOWN)
        if symptoms is not None else ())
    unseen = _one_hot(sig.novelty.values, vocabulary[0], max_norm)
    flagged = _one_hot(sig.sys_values, vocabulary[1], max_norm)
    seen = _one_hot(_symptom_rows(symptoms, vocabulary[2], n), vocabulary[2], max_norm)
    blocks = [shrunk, novelty, unseen, flagged, seen]
    offsets = np.cumsum([0] + [b.shape[1] for b in blocks])
    span = {name: np.arange(offsets[i], offsets[i + 1])
            for i, name in enumerate(("channels", "novelty", "unseen", "flagged", "symptom"))}
    channel_cols = span["channels"]
    families = np.tile(families, len(scores))  # a level, a size and a roughness column each
    rough = channel_cols[2 * len(sig.channels):]
    columns = {
        "perception_drift": channel_cols[families == "perception"],
        "dynamics_mismatch": channel_cols[families == "dynamics"],
        "deployment_system_noise": np.concatenate([channel_cols[families == "system"],
                                                   span["flagged"]]),
        "task_scope_overflow": np.concatenate([span["novelty"], span["unseen"]]),
        "unexplained": np.concatenate([np.setdiff1d(channel_cols, rough), span["symptom"]]),
    }
    values = np.column_stack(blocks) if n else np.zeros((0, int(offsets[-1])))
    groups = event_families(sig)
    for group, cols in columns.items():
        rows = groups == group
        cols = np.setdiff1d(cols, span["symptom"])
        if rows.any() and cols.size:
            values[np.ix_(rows, cols)] = _cap(values[np.ix_(rows, cols)], max_norm)
    return FeatureSpace(values, groups, columns, vocabulary, np.nan_to_num(sig.effects), null,
                        null_failed, bands, rough)


# The symptom column of failures without a label, or with one the fitted space never saw:
# its own column, so that such a failure is as far from every symptom's cluster as two
# symptoms are from each other (on no column it lay exactly as far as a cluster may reach).
_UNKNOWN = ""


def _symptom_rows(symptoms: np.ndarray | None, names: tuple[str, ...],
                  n: int) -> list[list[str]]:
    """Each event's symptom column: its label where ``names`` has it, else the unknown."""
    if symptoms is None:
        return [[] for _ in range(n)]
    return [[str(v)] if v is not None and str(v) in names else [_UNKNOWN] for v in symptoms]


def _level_size(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Segment scores ``(n, n_segments, n_channels)`` -> each channel's level (the
    segments' mean, signed) and size (their RMS), both ``(n, n_channels)``."""
    return z.mean(axis=-2), np.sqrt((z**2).mean(axis=-2))


def _shrink(x: np.ndarray, band: np.ndarray) -> np.ndarray:
    """``x`` less the dead band ``band`` in size, log-compressed beyond it, sign kept."""
    return np.sign(x) * np.log1p(np.maximum(np.abs(x) - band, 0.0))


# A channel's dead band where no no-gap comparison was made: wider than what a Gaussian
# channel's level or size passes in 5 % of comparisons (about 1 and 1.5 sigma over four
# segments), so that without a null nothing routine passes.
_DEFAULT_BAND = 3.0


def _dead_band(null: np.ndarray, n_channels: int, tail: float) -> np.ndarray:
    """``(n_channels,)`` the value that only ``tail`` of the no-gap comparisons' values
    ``null`` ``(n_null, n_channels)`` exceed in size."""
    if len(null) == 0:
        return np.full(n_channels, _DEFAULT_BAND)
    return routine(null, tail)


def _cap(block: np.ndarray, max_norm: float) -> np.ndarray:
    """Past ``max_norm`` only the direction counts: which signals deviate, which way. A
    cause that grows over deployments then stays one cluster instead of a trail."""
    norm = np.linalg.norm(block, axis=1, keepdims=True)
    return block * np.minimum(1.0, max_norm / np.maximum(norm, 1e-12))


def _one_hot(values: list[list[str]], names: tuple[str, ...], weight: float) -> np.ndarray:
    """One column per name, ``weight`` where an event has it (other strings are ignored)."""
    out = np.zeros((len(values), len(names)))
    index = {name: j for j, name in enumerate(names)}
    for i, row in enumerate(values):
        for v in row:
            if v in index:
                out[i, index[v]] = weight
    return out


class _DensityClusterer:
    """HDBSCAN over one group's features; events in no dense region get label -1.

    A group may hold a single cause, so a single cluster is allowed (``single``).

    HDBSCAN calls the sparse rim of a cluster noise; an event is attached to a cluster when
    it lies no farther from the cluster's nearest member than the cluster's own members lie
    from each other (the largest nearest-neighbour distance inside it). The same rule
    assigns new events in :meth:`predict`.

    Where each event's robot is given, a dense cluster is first halved (KMeans, two parts)
    as long as its halves strike different robots (the test below, on robots alone): two
    causes of one family at different robots can fill one density region between them
    (a heavy load's torque and worn pads' grip force, each deviating a little on the
    other's channel). A cause's own consequences split it along the signature but not
    along the robots, and stay one.

    Dense clusters whose centroids point alike are then merged, most aligned pair first,
    unless (where each event's place is given) their failures are spread over the places
    differently: one cause seen at different strengths, or spiking in some windows and not
    in others, strikes the same robots and ends the same way; two causes of one family
    seldom do both. The test is a permutation test of independence between cluster and
    place (the chi-square statistic, :data:`MERGE_PERMUTATIONS` seeded shuffles), rejecting
    at ``merge_alpha``; a place may be coded with the failure's symptom (see
    :class:`FailureClusterer`).

    Args:
        min_cluster_size: smallest group called a cluster; ``None`` scales it with the
            number of events (2 %, at least 5).
        min_samples: neighbourhood size of the density estimate.
        sample_above: more events than this are clustered through a seeded sample of this
            size (cluster size scaled to it); see :data:`SAMPLE_ABOVE`.
        seed: chooses that sample.
        min_reach: an event this close to a member joins its cluster, however tight the
            cluster's own core.
        merge_cosine: clusters whose centroids point this much alike are merged ...
        merge_alpha: ... unless the test of their places rejects at this level.
        single: whether all events may form one cluster.
    """

    def __init__(self, min_cluster_size: int | None = None, min_samples: int = 4,
                 sample_above: int = SAMPLE_ABOVE, seed: int = 0,
                 min_reach: float = 0.0, merge_cosine: float = 1.0,
                 merge_alpha: float = 0.02, single: bool = True) -> None:
        self.min_cluster_size = min_cluster_size
        self.min_samples = min_samples
        self.sample_above = sample_above
        self.seed = seed
        self.min_reach = min_reach
        self.merge_cosine = merge_cosine
        self.merge_alpha = merge_alpha
        self.single = single

    def fit(self, features: np.ndarray, merge_on: np.ndarray | None = None,
            places: np.ndarray | None = None,
            robots: np.ndarray | None = None) -> _DensityClusterer:
        """Cluster ``features`` ``(n_events, n_features)``; sets ``labels_``.

        Args:
            merge_on: the columns whose centroids the merge compares (default: all).
            places: ``(n_events,)`` each event's place (any integer code, negative where
                unknown; :class:`FailureClusterer` codes a robot with the failure's
                symptom); ``None``: clusters merge on their centroids alone.
            robots: ``(n_events,)`` each event's robot (an integer code, negative where
                unknown); ``None``: no dense cluster is halved.
        """
        n = features.shape[0]
        size = self.min_cluster_size or max(5, round(0.02 * n))
        self.features_ = features
        self.labels_ = np.full(n, -1)
        self.reach_: dict[int, float] = {}
        if n < size:
            return self
        aligned = features if merge_on is None else features[:, merge_on]
        dense = self._dense(features, size)
        if robots is not None:
            dense = _split_by_place(features, dense, robots, size, self.merge_alpha,
                                    self.seed)
        dense = _merge_aligned(aligned, dense, self.merge_cosine,
                               places, self.merge_alpha, np.random.default_rng(self.seed))
        self.reach_ = {c: max(_reach(features[dense == c]), self.min_reach)
                       for c in sorted(set(dense) - {-1})}
        self.labels_ = np.where(dense >= 0, dense, self._attach(features, dense))
        return self

    def _dense(self, features: np.ndarray, size: int) -> np.ndarray:
        """HDBSCAN's labels: of every event, or (many events) of a sample, -1 elsewhere."""
        n = features.shape[0]
        if n <= self.sample_above:
            model = HDBSCAN(min_cluster_size=size, min_samples=min(self.min_samples, n - 1),
                            allow_single_cluster=self.single, copy=True)
            return model.fit_predict(features)
        m = self.sample_above
        sample = np.sort(np.random.default_rng(self.seed).choice(n, size=m, replace=False))
        scaled = max(5, round(size * m / n))
        model = HDBSCAN(min_cluster_size=scaled, min_samples=min(self.min_samples, m - 1),
                        allow_single_cluster=self.single, copy=True)
        dense = np.full(n, -1)
        dense[sample] = model.fit_predict(features[sample])
        return dense

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Assign new events ``(n, n_features)`` to the fitted clusters, -1 where none fits."""
        return self._attach(features, self.labels_)

    def forget(self, clusters: np.ndarray) -> None:
        """Drop ``clusters``: their members become leftovers, nothing is assigned to them."""
        self.labels_ = np.where(np.isin(self.labels_, clusters), -1, self.labels_)

    def _attach(self, features: np.ndarray, labels: np.ndarray) -> np.ndarray:
        clustered = labels >= 0
        if not clustered.any() or features.shape[0] == 0:
            return np.full(features.shape[0], -1)
        members = self.features_[clustered]
        member_labels = labels[clustered]
        if members.shape[0] > _DENSE_MAX:
            dist, nearest = _nearest_tree(members, features, 1)
            label = member_labels[nearest[:, 0]]
            reach = np.array([self.reach_[c] for c in label])
            return np.where(dist[:, 0] <= reach, label, -1)
        out = np.full(features.shape[0], -1)
        for start in range(0, features.shape[0], _BLOCK):
            block = features[start : start + _BLOCK]
            dist = np.linalg.norm(block[:, None, :] - members[None, :, :], axis=2)
            nearest = dist.argmin(axis=1)
            label = member_labels[nearest]
            reach = np.array([self.reach_[c] for c in label])
            fits = dist[np.arange(len(block)), nearest] <= reach
            out[start : start + len(block)] = np.where(fits, label, -1)
        return out


class FailureClusterer:
    """Density clusters of failures within each primary-family group (see
    :func:`signature_features`); events that fit no cluster get label -1.

    A failure whose cause shows only faintly (a light barely below sim's range, a drop
    that looks much like sim's own drops) rarely sits in a dense region, yet it may still
    deviate the way a cluster does. An event left over by the density clustering joins
    the cluster along whose typical deviation (its members' median channel effects) it
    deviates further than ``1 - tail`` of the comparisons where no gap exists do; of
    several, the one it passes by the widest margin. An event grouped by an upstream cause
    (unseen context, or perception deviating first) joins only clusters of its own group:
    what follows from a misperception or an unseen object (a drop, a collision) looks
    like other clusters' symptoms. An event in which no family deviates must pass the
    stricter ``1 - faint_tail``: most such events are failures sim has too, and each one
    wrongly attached dilutes a cause's cluster. Events that deviate no more than that stay
    in no cluster.

    Given the :class:`~sim2real.cluster.location.Fleet` (where each event happened), where
    a cluster's failures concentrate counts too (see :mod:`sim2real.cluster.location`).
    A cluster keeps its members only at places (robots, sites, the fleet) where it has more
    failures than sim predicts (its hot places, :func:`~sim2real.cluster.location.excess`
    at ``alpha``): elsewhere they look like the cause but are no more than sim's own
    failures would be. Sim predicts its rate of the members' symptoms times the share of
    its own failures whose comparisons deviate along the cluster as far as its median
    member: the rate of sim-like failures that also look like the cluster. An event left
    in no cluster at a cluster's hot place joins it when it deviates along the cluster's
    typical deviation further than ``1 - tail`` of the no-gap comparisons: there neither
    the stricter ``faint_tail`` nor the own-group restriction of upstream groups applies,
    since the place makes the cause the likelier explanation.
    Clusters of unseen context are exempt from both: sim, never having seen that context,
    predicts none of their failures, and their members share a context, not a deviation.

    Args:
        min_cluster_size: smallest group called a cluster; ``None`` scales it with the
            number of events (2 %, at least 5).
        min_samples: neighbourhood size of the density estimate.
        sample_above: more events than this in a group are clustered through a seeded
            sample of this size; see :data:`SAMPLE_ABOVE`.
        seed: chooses that sample.
        tail: share of no-gap comparisons that would reach a cluster by that rule.
        faint_tail: the same for events in which no family deviates.
        alpha: false discovery rate of hot places. 0.02 keeps a thin cause spread over
            the whole fleet in all of ten synthetic fleets (a cause active in 3 % to 12 %
            of every robot's episodes), where 0.01 lost it in one. Also the level at which
            the places keep two aligned dense clusters apart (see :class:`_DensityClusterer`;
            on the zoo 0.02, 0.05 and 0.1 gave the same hit rates, and moved two worlds'
            ARI by up to 0.03). There a place is a robot and a symptom (``failure_label``):
            a heavy load seen on localisation and a noisy camera, aligned and at the same
            robots, still end differently (dropped objects and protective stops against missed
            picks).
    """

    def __init__(self, min_cluster_size: int | None = None, min_samples: int = 4,
                 sample_above: int = SAMPLE_ABOVE, seed: int = 0, tail: float = 0.05,
                 faint_tail: float = 0.01, alpha: float = 0.02) -> None:
        self.min_cluster_size = min_cluster_size
        self.min_samples = min_samples
        self.sample_above = sample_above
        self.seed = seed
        self.tail = tail
        self.faint_tail = faint_tail
        self.alpha = alpha

    def fit(self, space: FeatureSpace, fleet: Fleet | None = None) -> FailureClusterer:
        """Cluster every group; sets ``labels_`` (cluster numbers unique across groups).

        Args:
            space: the events' features.
            fleet: where the events happened; ``None``: the clustering ignores places.
        """
        n = space.values.shape[0]
        size = self.min_cluster_size or max(5, round(0.02 * n))
        self.labels_ = np.full(n, -1)
        self.models_: dict[str, tuple[_DensityClusterer, int]] = {}
        offset = 0
        where = None if fleet is None else _place_and_symptom(fleet)
        for group in sorted(space.columns):
            rows = np.flatnonzero(space.groups == group)
            cols = space.columns[group]
            if rows.size == 0 or cols.size == 0:
                continue
            # Failures that look like sim's own form a cluster only where they have
            # structure of their own; a featureless blob of them is no finding.
            model = _DensityClusterer(size, self.min_samples, self.sample_above, self.seed,
                                      min_reach=MIN_REACH, merge_cosine=MERGE_COSINE,
                                      merge_alpha=self.alpha, single=group != "unexplained")
            model.fit(space.values[np.ix_(rows, cols)],
                      merge_on=np.flatnonzero(~np.isin(cols, space.roughness)),
                      places=None if where is None else where[rows],
                      robots=None if fleet is None else fleet.cell[rows])
            self.labels_[rows] = np.where(model.labels_ >= 0, model.labels_ + offset, -1)
            self.models_[group] = (model, offset)
            offset += int(model.labels_.max()) + 1 if (model.labels_ >= 0).any() else 0
        self._fit_directions(space)
        labels = self._attach_faint(space, self.labels_)
        self.hot_ = None if fleet is None else self._hot(labels, fleet)
        self.labels_ = labels if fleet is None else self.place(space, labels, fleet)
        ids = self.direction_ids_
        self._forget(ids[np.bincount(self.labels_[self.labels_ >= 0],
                                     minlength=offset)[ids] < size])
        return self

    def _forget(self, clusters: np.ndarray) -> None:
        """Drop ``clusters``: their members are left in none, and nothing joins them later.

        A cluster the places' rule cut below the smallest cluster is no cluster: the
        density stage would not have called so few events one (a no-gap fleet's few
        look-alike failures at one robot).
        """
        if clusters.size == 0:
            return
        self.labels_ = np.where(np.isin(self.labels_, clusters), -1, self.labels_)
        for model, first in self.models_.values():
            model.forget(clusters - first)
        keep = ~np.isin(self.direction_ids_, clusters)
        for name in ("direction_ids_", "directions_", "direction_groups_", "thresholds_",
                     "faint_thresholds_", "look_alike_"):
            setattr(self, name, getattr(self, name)[keep])
        if self.hot_ is not None:
            self.hot_ = {c: places for c, places in self.hot_.items() if c not in clusters}

    def _hot(self, labels: np.ndarray, fleet: Fleet) -> dict[int, list[Excess]]:
        """The hot places of every cluster but those of unseen context.

        Sim's share of look-alikes is taken at a cluster's median member, yet every member
        counts: a cause's failures spread in strength (it grows over deployments), and
        counting only those past the median lost real causes (synthetic renamed world:
        ARI 0.88 -> 0.61).
        """
        if len(fleet.placed) != len(labels):
            raise ValueError(f"the fleet places {len(fleet.placed)} events, not {len(labels)}")
        return {c: excess(fleet, np.flatnonzero(labels == c), float(self.look_alike_[j]),
                          self.alpha)
                for j, c in enumerate(self.direction_ids_.tolist())
                if self.direction_groups_[j] != _CONTEXT_GROUP}

    def _fit_directions(self, space: FeatureSpace) -> None:
        """Each cluster's typical deviation (unit vector), its group, and the projections
        onto it that only ``tail`` and ``faint_tail`` of the no-gap comparisons exceed."""
        ids = sorted(set(self.labels_.tolist()) - {-1})
        self.directions_ = _unit(np.stack(
            [np.median(space.effects[self.labels_ == c], axis=0) for c in ids]
        ) if ids else np.zeros((0, space.effects.shape[1])))
        self.direction_ids_ = np.array(ids, dtype=int)
        # Clusters form within one group, so any member names the cluster's group.
        self.direction_groups_ = np.array(
            [space.groups[np.argmax(self.labels_ == c)] for c in ids], dtype=object)
        if ids and len(space.null):
            null = space.null @ self.directions_.T
            quantiles = np.quantile(null, [1.0 - self.tail, 1.0 - self.faint_tail], axis=0)
            self.thresholds_, self.faint_thresholds_ = quantiles[0], quantiles[1]
            # The share of sim's own failures whose comparisons reach the cluster's median
            # member along its direction, (k + 1) / (n + 1): never zero, however few the
            # comparisons, and 1 (every sim failure looks alike) where sim never failed.
            typical = np.array([np.median(space.effects[self.labels_ == c] @ d)
                                for c, d in zip(ids, self.directions_, strict=True)])
            failed = null[space.null_failed]
            self.look_alike_ = ((failed >= typical).sum(axis=0) + 1.0) / (len(failed) + 1.0)
        else:
            self.thresholds_ = self.faint_thresholds_ = np.full(len(ids), np.inf)
            self.look_alike_ = np.ones(len(ids))

    def _attach_faint(self, space: FeatureSpace, labels: np.ndarray) -> np.ndarray:
        """``labels`` with the leftover events attached by the rule of the class docstring."""
        left = labels < 0
        if not left.any() or self.direction_ids_.size == 0:
            return labels
        groups = space.groups[left][:, None]
        faint = groups == "unexplained"
        threshold = np.where(faint, self.faint_thresholds_[None, :], self.thresholds_[None, :])
        free = ~np.isin(groups, _UPSTREAM_GROUPS) | (groups == self.direction_groups_[None, :])
        out = labels.copy()
        out[left] = self._furthest(space.effects[left], threshold, free)
        return out

    def _furthest(self, effects: np.ndarray, threshold: np.ndarray,
                  allowed: np.ndarray) -> np.ndarray:
        """For each row of ``effects``, the ``allowed`` cluster it deviates along furthest
        past that cluster's ``threshold`` (the two broadcast against ``(rows, clusters)``);
        -1 where it passes none."""
        margin = (effects @ self.directions_.T) / np.maximum(threshold, 1e-12)
        margin = np.where(allowed, margin, -np.inf)
        best = margin.argmax(axis=1)
        passed = margin[np.arange(len(best)), best] > 1.0
        return np.where(passed, self.direction_ids_[best], -1)

    def place(self, space: FeatureSpace, labels: np.ndarray, fleet: Fleet,
              hot: dict[int, list[Excess]] | None = None) -> np.ndarray:
        """``labels`` (:meth:`predict` without a fleet) with the places' rule of the class
        docstring applied at hot places ``hot`` (default: those learnt in :meth:`fit`;
        see :meth:`places`): :meth:`predict` with a fleet, without assigning anew."""
        hot = self.hot_ if hot is None else hot
        if hot is None:
            return labels
        placed = fleet.placed
        ids = self.direction_ids_.tolist()
        # Whether each event happened at a hot place of each cluster (never, for clusters
        # of unseen context: they have no hot places).
        at = np.zeros((len(labels), len(ids)), dtype=bool)
        out = labels.copy()
        for j, c in enumerate(ids):
            if c in hot:
                at[:, j] = fleet.at(frozenset(e.place for e in hot[c]))
                out[(labels == c) & placed & ~at[:, j]] = -1
        left = np.flatnonzero((out < 0) & placed)
        if left.size == 0 or not ids:
            return out
        out[left] = self._furthest(space.effects[left], self.thresholds_[None, :], at[left])
        return out

    def hot_places(self, cluster: int) -> list[Excess]:
        """Where ``cluster`` was found more often than sim predicts, most failures first
        (none for a cluster of unseen context, or when fitted without places)."""
        return list((self.hot_ or {}).get(cluster, []))

    def cited_places(self, fleet: Fleet) -> dict[int, list[Excess]]:
        """The hot places of every cluster as fitted (``labels_``), counted on its final
        members: what a report cites, so that its counts are those of the members it
        lists (the places found in :meth:`fit` come before the places' rule moved some)."""
        return {} if self.hot_ is None else self._hot(self.labels_, fleet)

    def places(self, assigned: np.ndarray, fleet: Fleet) -> dict[int, list[Excess]]:
        """The hot places learnt in :meth:`fit`, with those where new events are themselves
        more than sim predicts: a cause that spread to another robot is still its cluster.
        Pass them to :meth:`place` (or :meth:`predict`) for every side of a comparison.

        Args:
            assigned: the new events' clusters by signature alone (:meth:`predict` without
                a fleet).
            fleet: where they happened.
        """
        if self.hot_ is None:
            return {}
        here = self._hot(assigned, fleet)
        out = {}
        for c, known in self.hot_.items():
            seen = {e.place for e in known}
            out[c] = known + [e for e in here[c] if e.place not in seen]
        return out

    def predict(self, space: FeatureSpace, fleet: Fleet | None = None,
                hot: dict[int, list[Excess]] | None = None) -> np.ndarray:
        """Assign new events to the fitted clusters of their group, -1 where none fits.

        Pass ``fleet`` (where the new events happened) to apply the places' rule, with the
        hot places ``hot`` (default: those learnt in :meth:`fit`; see :meth:`places`).
        """
        labels = self._assign(space)
        return labels if fleet is None else self.place(space, labels, fleet, hot)

    def _assign(self, space: FeatureSpace) -> np.ndarray:
        """The fitted clusters' density rule, then the faint events' rule."""
        out = np.full(space.values.shape[0], -1)
        for group, (model, offset) in self.models_.items():
            rows = np.flatnonzero(space.groups == group)
            if rows.size == 0:
                continue
            found = model.predict(space.values[np.ix_(rows, space.columns[group])])
            out[rows] = np.where(found >= 0, found + offset, -1)
        return self._attach_faint(space, out)


# Groups decided by what deviates first (or by context sim never saw): their events are
# attached only to clusters of their own group.
_UPSTREAM_GROUPS = ("perception_drift", "task_scope_overflow")
# Clusters of unseen context: no place's rule (see FailureClusterer).
_CONTEXT_GROUP = "task_scope_overflow"

# Clusters of one group whose mean deviations (levels and sizes) point the same way
# (cosine at least this) are one cause seen at different strengths: early weeks of a
# dimming light move one perception channel, later weeks all of them. Roughness is left
# out: an intermittent slip spikes in some failures' windows and not in others'.
MERGE_COSINE = 0.7


def _place_and_symptom(fleet: Fleet) -> np.ndarray:
    """``(n_events,)`` each event's place and failure label as one code (negative where
    the place is unknown): what the merge of aligned clusters compares."""
    symptoms = np.unique(fleet.symptom.astype(str), return_inverse=True)[1]
    kinds = int(symptoms.max()) + 1 if symptoms.size else 1
    return np.where(fleet.cell >= 0, fleet.cell * kinds + symptoms, -1)


def _unit(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero, so they align with nothing)."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)


# Shuffles of the merge's place test: its p-value resolves 0.001.
MERGE_PERMUTATIONS = 999
_SHUFFLE_BLOCK = 128


def _merge_aligned(features: np.ndarray, labels: np.ndarray, cosine: float,
                   places: np.ndarray | None, alpha: float,
                   rng: np.random.Generator) -> np.ndarray:
    """Merge clusters whose centroid directions agree, most aligned pair first; with
    ``places``, only pairs whose failures :func:`_spread_alike` over them at ``alpha``."""
    labels = labels.copy()
    apart: set[tuple[int, int]] = set()  # pairs the place test kept apart, as they are now
    while True:
        ids = sorted(set(labels.tolist()) - {-1})
        if len(ids) < 2:
            return labels
        unit = _unit(np.stack([features[labels == c].mean(axis=0) for c in ids]))
        sim = unit @ unit.T
        np.fill_diagonal(sim, -np.inf)
        for a, b in zip(*np.unravel_index(np.argsort(-sim, axis=None), sim.shape),
                        strict=True):
            if sim[a, b] < cosine:
                return _renumber(labels)
            pair = (ids[a], ids[b])
            if pair in apart:
                continue
            both = np.isin(labels, pair)
            if places is None or _spread_alike(places[both], labels[both] == ids[b], alpha,
                                               rng):
                labels[labels == ids[b]] = ids[a]
                # The merged cluster is another cluster: test its pairs afresh.
                apart = {p for p in apart if ids[a] not in p}
                break
            apart |= {pair, pair[::-1]}


def _split_by_place(features: np.ndarray, labels: np.ndarray, robots: np.ndarray,
                    size: int, alpha: float, seed: int) -> np.ndarray:
    """Each dense cluster halved (KMeans, two parts), and each half again, as long as both
    halves hold at least ``size`` events and strike different ``robots``
    (:func:`_spread_alike` rejects at ``alpha``)."""
    labels = labels.copy()
    rng = np.random.default_rng(seed)
    todo = sorted(set(labels.tolist()) - {-1})
    next_id = max(todo, default=-1) + 1
    while todo:
        c = todo.pop(0)
        members = np.flatnonzero(labels == c)
        if members.size < 2 * size or np.unique(features[members], axis=0).shape[0] < 2:
            continue
        half = KMeans(2, n_init=10, random_state=seed).fit_predict(features[members]) == 1
        if min(half.sum(), (~half).sum()) < size or _spread_alike(robots[members], half,
                                                                   alpha, rng):
            continue
        labels[members[half]] = next_id
        todo += [c, next_id]
        next_id += 1
    return labels


def _spread_alike(places: np.ndarray, side: np.ndarray, alpha: float,
                  rng: np.random.Generator) -> bool:
    """Whether the events of two clusters (``side``: of the second) are spread over their
    ``places`` alike: a permutation test of independence (chi-square statistic) does not
    reject at ``alpha``. Events of no known place count for neither."""
    known = places >= 0
    codes = np.unique(places[known], return_inverse=True)[1]
    side = side[known].astype(np.int64)
    k = int(codes.max()) + 1 if codes.size else 0
    if k < 2 or np.unique(side).size < 2:
        return True

    # A shuffle keeps both margins of the table, so every one shares the expected counts.
    first = np.bincount(side * k + codes, minlength=2 * k).reshape(2, k)
    expected = np.outer(first.sum(axis=1), first.sum(axis=0)) / first.sum()
    weight = 1.0 / np.where(expected > 0, expected, 1)

    def statistic(sides: np.ndarray) -> np.ndarray:
        """Chi-square of each row of ``sides`` ``(m, n)``, one bincount for all."""
        cells = np.arange(len(sides))[:, None] * 2 * k + sides * k + codes
        tables = np.bincount(cells.ravel(), minlength=len(sides) * 2 * k).reshape(-1, 2, k)
        return (((tables - expected) ** 2) * weight).sum(axis=(1, 2))

    observed = statistic(side[None])[0]
    hits = 0
    # In blocks of shuffles: 999 of 10,000 events at once would take hundreds of megabytes.
    for start in range(0, MERGE_PERMUTATIONS, _SHUFFLE_BLOCK):
        block = min(_SHUFFLE_BLOCK, MERGE_PERMUTATIONS - start)
        shuffles = np.stack([rng.permutation(side) for _ in range(block)])
        # A tolerance: a shuffle that reaches the observed table counts, whatever the
        # rounding.
        hits += int((statistic(shuffles) >= observed - 1e-9).sum())
    return (hits + 1) / (MERGE_PERMUTATIONS + 1) >= alpha


def _renumber(labels: np.ndarray) -> np.ndarray:
    ids = sorted(set(labels.tolist()) - {-1})
    lookup = {c: i for i, c in enumerate(ids)}
    return np.array([lookup.get(c, -1) for c in labels.tolist()], dtype=int)


def _reach(members: np.ndarray) -> float:
    """The largest distance from a member to its nearest fellow member."""
    if len(members) < 2:
        return 0.0
    if len(members) > _DENSE_MAX:
        dist, _ = _nearest_tree(members, members, 2)
        return float(dist[:, 1].max())
    # Rows in blocks: the full (n, n, n_features) difference array of 4,000 members
    # would take over a gigabyte. The same distances, the same nearest.
    nearest = np.empty(len(members))
    for start in range(0, len(members), _BLOCK):
        block = members[start : start + _BLOCK]
        dist = np.linalg.norm(block[:, None, :] - members[None, :, :], axis=2)
        dist[np.arange(len(block)), np.arange(start, start + len(block))] = np.inf
        nearest[start : start + len(block)] = dist.min(axis=1)
    return float(nearest.max())


def _nearest_tree(members: np.ndarray, queries: np.ndarray,
                  k: int) -> tuple[np.ndarray, np.ndarray]:
    """Distances and indices of the ``k`` nearest ``members`` of each query (KD-tree)."""
    return NearestNeighbors(n_neighbors=k).fit(members).kneighbors(queries)
