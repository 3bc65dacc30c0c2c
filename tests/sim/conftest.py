"""The small MuJoCo demo, generated once and cached across runs in pytest's cache."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

# importlib import mode: put this folder on the path so the tests can import the helpers.
sys.path.insert(0, str(Path(__file__).parent))
from sim_fixtures import Demo

from sim2real.demo import generate


@pytest.fixture(scope="session")
def demo(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Demo:
    # generate() reuses a folder holding the same seed, size and version; without pytest's
    # cache (-p no:cacheprovider) the demo is generated once per session.
    cache = pytestconfig.cache
    root = cache.mkdir("sim2real-demo-small") if cache else tmp_path_factory.mktemp("demo")
    paths = generate(root, size="small", seed=0, workers=2, progress=False)
    return Demo(paths.dataset, json.loads(paths.answer_key.read_text()))
