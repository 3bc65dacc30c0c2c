"""Fixtures of the ingest tests; the recording writers live in ``ingest_fixtures``."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# The test modules import the writers as ``ingest_fixtures``; conftest loads before them.
sys.path.insert(0, str(Path(__file__).parent))
from ingest_fixtures import MAPPING


@pytest.fixture
def mapping_data() -> dict[str, Any]:
    """The mapping the fixtures' recordings fit (a fresh copy per test)."""
    return json.loads(json.dumps(MAPPING))


@pytest.fixture
def write_mapping(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    """Write a mapping dict as ``mapping.yaml`` and return its path."""
    import yaml

    def write(data: dict[str, Any]) -> Path:
        path = tmp_path / "mapping.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    return write
