"""Synthetic worlds with injected causes, generated and diagnosed once per session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim2real.demo.synthetic import generate_world, renamed_world, standard_world
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
