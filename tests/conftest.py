"""Shared fixtures: synthetic worlds with known causes, generated once per test session."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from sim2real.demo.synthetic import (
    generate_world,
    no_gap_world,
    renamed_world,
    standard_world,
    unchanged_world,
)
from sim2real.demo.synthetic.spec import WorldSpec


@dataclass(frozen=True)
class World:
    """A generated dataset and its answer key (read by tests only, never by the analysis)."""

    dataset: Path
    key: dict[str, object]

    @property
    def truth(self) -> dict[str, str]:
        return self.key["events"]  # type: ignore[return-value]

    def taxonomy_of(self, cause: str) -> str:
        if cause == "background":
            return "unexplained"
        causes = self.key["causes"]
        assert isinstance(causes, list)
        return next(c["taxonomy"] for c in causes if c["name"] == cause)


def _world(factory: Callable[[], WorldSpec], name: str,
           tmp_path_factory: pytest.TempPathFactory) -> World:
    paths = generate_world(factory(), tmp_path_factory.mktemp(name), seed=0)
    return World(paths.dataset, json.loads(paths.answer_key.read_text()))


@pytest.fixture(scope="session")
def standard(tmp_path_factory: pytest.TempPathFactory) -> World:
    return _world(standard_world, "standard", tmp_path_factory)


@pytest.fixture(scope="session")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> World:
    return _world(renamed_world, "renamed", tmp_path_factory)


@pytest.fixture(scope="session")
def no_gap(tmp_path_factory: pytest.TempPathFactory) -> World:
    return _world(no_gap_world, "no_gap", tmp_path_factory)


@pytest.fixture(scope="session")
def unchanged(tmp_path_factory: pytest.TempPathFactory) -> World:
    return _world(unchanged_world, "unchanged", tmp_path_factory)
