"""The small MuJoCo demo as the sim tests see it (the session's shared one, seed 0)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

# importlib import mode: put this folder on the path so the tests can import the helpers.
sys.path.insert(0, str(Path(__file__).parent))
from sim_fixtures import Demo

from sim2real.demo import DemoPaths


@pytest.fixture(scope="session")
def demo(small_demo: Callable[[int], DemoPaths]) -> Demo:
    paths = small_demo(0)
    return Demo(paths.dataset, json.loads(paths.answer_key.read_text()))
