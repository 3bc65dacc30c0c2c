"""Synthetic worlds with injected causes, generated and diagnosed once per session, and
zoo worlds diagnosed per test."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from sim2real.demo.synthetic import generate_world, renamed_world, standard_world
from sim2real.demo.zoo import WorldKey
from sim2real.demo.zoo import generate_world as generate_zoo_world
from sim2real.pipeline import Diagnosis, diagnose
from sim2real.report.build import ClusterFinding, find_clusters


def _world(tmp: Path, spec: object) -> tuple[Diagnosis, list[ClusterFinding], dict]:
    generate_world(spec, tmp, seed=0)  # type: ignore[arg-type]
    key = json.loads((tmp / "answer_key.json").read_text())
    diagnosis = diagnose(tmp / "dataset")
    return diagnosis, find_clusters(diagnosis), key


@pytest.fixture(scope="session")
def standard(tmp_path_factory: pytest.TempPathFactory) -> tuple[Diagnosis, list, dict]:
    return _world(tmp_path_factory.mktemp("standard"), standard_world())


@pytest.fixture(scope="session")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Diagnosis, list, dict]:
    return _world(tmp_path_factory.mktemp("renamed"), renamed_world())


@dataclass(frozen=True)
class ZooWorld:
    """A zoo world's answer key, diagnosis and clusters (the key read by tests only)."""

    key: WorldKey
    diagnosis: Diagnosis
    findings: list[ClusterFinding]

    def causes(self, finding: ClusterFinding) -> Counter[str | None]:
        """How many of the cluster's failures each cause accounts for."""
        ids = self.diagnosis.signatures.episode_ids
        return Counter(self.key.events.get(ids[i]) for i in finding.rows)

    def holding(self, cause: str,
                among: Sequence[ClusterFinding] | None = None) -> ClusterFinding:
        """The cluster (of ``among``, default all) holding most of ``cause``'s failures."""
        return max(self.findings if among is None else among,
                   key=lambda f: self.causes(f)[cause])


@pytest.fixture
def zoo_world(tmp_path: Path) -> Callable[[int], ZooWorld]:
    """Generate and diagnose the zoo world of a seed."""
    def get(seed: int) -> ZooWorld:
        key = generate_zoo_world(seed, tmp_path)
        diagnosis = diagnose(key.dataset)
        return ZooWorld(key, diagnosis, find_clusters(diagnosis))
    return get
