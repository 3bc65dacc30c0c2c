"""The descriptor prefilter finds (nearly) the same rollouts as the exact scan."""

from __future__ import annotations

import numpy as np
import pytest

from sim2real.match import stream
from sim2real.match.context import ContextTable
from sim2real.match.grid import SignalGrid
from sim2real.match.index import PREFILTER_MIN_ROLLOUTS, CandidateQuery, FlatIndex
from sim2real.match.matcher import RolloutBank, RolloutMatcher, family_weights, window_times
from sim2real.match.stream import nearest_streamed


def _bank(n: int, rng: np.random.Generator) -> RolloutBank:
    """``n`` random-walk rollouts, 3 channels of two families, 6 s at 0.1 s, a fifth of them
    failed."""
    steps = 61
    values = np.cumsum(rng.normal(size=(n, steps, 3)), axis=1).astype(np.float32) * 0.1
    grid = SignalGrid(tuple(f"sim-{i:05d}" for i in range(n)), ("a", "b", "c"), 0.1, values,
                      np.full(n, 6.0))
    failed = rng.random(n) < 0.2
    failure_time = np.where(failed, rng.uniform(2.0, 6.0, n), np.nan)
    context = ContextTable(n, {"ctx.obj": rng.choice(["box", "cup"], n).astype(object)},
                           {"ctx.light": rng.uniform(300, 700, n)})
    return RolloutBank(grid, np.full(n, "pick", dtype=object), failed, failure_time, context,
                       ("dynamics", "dynamics", "perception"))


def test_prefilter_recall_against_exact_scan() -> None:
    rng = np.random.default_rng(0)
    bank = _bank(PREFILTER_MIN_ROLLOUTS + 500, rng)
    matcher = RolloutMatcher(n_neighbors=5).fit(bank)
    assert matcher.index_ is not None and matcher.uses_index("pick")
    asks = []
    for row in rng.choice(bank.grid.values.shape[0], size=40, replace=False):
        end = float(rng.uniform(2.0, 6.0))
        window = bank.grid.at(np.array([row]), window_times(np.array([end]), end, 32))[0]
        asks.append(CandidateQuery(window, bank.grid.values[row, 0], int(row), "pick", end,
                                   end, int(row)))
    streamed = nearest_streamed(matcher, asks, bank.context)
    hits = []
    for ask, fast in zip(asks, streamed, strict=True):
        exact = matcher.query_many([ask], bank.context, [None])[0]
        assert ask.exclude not in fast.rows
        hits.append(len(set(exact.rows) & set(fast.rows)) / len(exact.rows))
        if set(exact.rows) == set(fast.rows):
            np.testing.assert_array_equal(exact.distances, fast.distances)
    assert np.mean(hits) >= 0.95


def test_streamed_blocks_do_not_change_a_match(monkeypatch: pytest.MonkeyPatch) -> None:
    # The bank read in many small blocks, over many stripes, finds what one block finds,
    # and the exact step gives query_many's distances for the same candidates.
    rng = np.random.default_rng(4)
    bank = _bank(PREFILTER_MIN_ROLLOUTS + 300, rng)
    matcher = RolloutMatcher(n_neighbors=5).fit(bank)
    asks = []
    for row in rng.choice(bank.grid.values.shape[0], size=30, replace=False):
        end = float(rng.uniform(2.0, 6.0))
        window = bank.grid.at(np.array([row]), window_times(np.array([end]), 3.0, 32))[0]
        asks.append(CandidateQuery(window + 0.05, bank.grid.values[row, 0], int(row), "pick",
                                   end, 3.0, None))
    whole = nearest_streamed(matcher, asks, bank.context)
    monkeypatch.setattr(stream, "_BLOCK_BYTES", 97 * bank.grid.values[0].nbytes)
    monkeypatch.setattr(stream, "_STRIPES", 3)
    blocked = nearest_streamed(matcher, asks, bank.context)
    index = matcher.index_
    assert index is not None
    rows = bank.task_rows("pick")
    for ask, a, b in zip(asks, whole, blocked, strict=True):
        np.testing.assert_array_equal(a.rows, b.rows)
        np.testing.assert_array_equal(a.distances, b.distances)
        found, approx = index.shortlist([ask], bank.context, rows)
        exact = matcher.query_many([ask], bank.context,
                                   [np.sort(found[0][np.isfinite(approx[0])])])[0]
        np.testing.assert_array_equal(exact.rows, a.rows)
        np.testing.assert_array_equal(exact.distances, a.distances)


def test_a_rollouts_descriptor_is_its_own_window_as_a_query_sees_it() -> None:
    # Off the grid's steps on purpose: a nearest-sample descriptor differs there, and then
    # ranks a rollout against a window it never had.
    bank = _bank(PREFILTER_MIN_ROLLOUTS + 10, np.random.default_rng(3))
    matcher = RolloutMatcher().fit(bank)
    index = matcher.index_
    assert index is not None
    end, length = 4.33, 3.71
    rows = np.flatnonzero(~bank.failed)[:20]
    described = index._descriptors(rows, end, length)
    windows = bank.grid.at(rows, window_times(np.full(rows.size, end), length, 32))
    for row, window, descriptor in zip(rows, windows, described, strict=True):
        ask = CandidateQuery(window, bank.grid.values[row, 0], int(row), "pick", end, length,
                             None)
        np.testing.assert_allclose(descriptor, index._query_vectors([ask])[0], rtol=1e-5,
                                   atol=1e-6)


def test_small_bank_keeps_the_exact_scan() -> None:
    matcher = RolloutMatcher().fit(_bank(300, np.random.default_rng(1)))
    assert matcher.index_ is None


def test_flat_index_is_exact() -> None:
    rng = np.random.default_rng(2)
    data = rng.normal(size=(500, 8))
    query = rng.normal(size=8)
    best = FlatIndex().fit(data).search(query, 5)
    brute = np.argsort(np.linalg.norm(data - query, axis=1))[:5]
    np.testing.assert_array_equal(best, brute)


def test_every_channel_family_weighs_the_same_in_the_distance() -> None:
    weights = family_weights(("dynamics",) * 12 + ("perception",) * 4, 16)
    assert np.isclose(weights.mean(), 1.0)
    assert np.isclose(weights[:12].sum(), weights[12:].sum())
    np.testing.assert_array_equal(family_weights((), 3), np.ones(3))
