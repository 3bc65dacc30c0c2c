"""Shared fixtures: synthetic worlds with known causes, generated once per test session."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from filelock import FileLock

from sim2real.demo import DemoPaths, generate
from sim2real.demo.synthetic import (
    fleetwide_world,
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
def fleetwide(tmp_path_factory: pytest.TempPathFactory) -> World:
    return _world(fleetwide_world, "fleetwide", tmp_path_factory)


@pytest.fixture(scope="session")
def unchanged(tmp_path_factory: pytest.TempPathFactory) -> World:
    return _world(unchanged_world, "unchanged", tmp_path_factory)


@pytest.fixture(scope="session")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tenth of the standard world (97 real episodes, 24 of them failures; 60 sim): a
    valid dataset that analyses in about a second, for tests of what goes wrong around it."""
    return generate_world(standard_world(), tmp_path_factory.mktemp("small"), scale=0.1).dataset


@pytest.fixture(scope="session")
def small_demo(pytestconfig: pytest.Config,
               tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], DemoPaths]:
    """The small MuJoCo demo of a seed, generated once per session (MuJoCo takes ~20 s a
    seed) and kept in pytest's cache between runs where there is one: three modules read
    seed 0. ``generate`` reuses a folder holding the same seed, size and version; a file
    lock keeps two xdist workers from writing one seed's folder at once."""
    cache = getattr(pytestconfig, "cache", None)  # absent under -p no:cacheprovider
    # Under xdist every worker has its own base temp; their common parent is shared.
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent

    def get(seed: int) -> DemoPaths:
        root = (cache.mkdir(f"sim2real-demo-small-{seed}") if cache is not None
                else shared / f"demo-small-{seed}")
        with FileLock(str(root) + ".lock"):
            return generate(root, size="small", seed=seed, workers=2, progress=False)

    return get


@dataclass(frozen=True)
class ObjectStore:
    """A local S3-compatible server (moto) and the bucket the tests upload datasets to."""

    endpoint: str
    filesystem: pafs.S3FileSystem

    def upload(self, folder: Path, name: str) -> str:
        """Copy a local dataset folder to ``s3://bucket/name``; returns its URI."""
        pafs.copy_files(str(folder), f"bucket/{name}",
                        source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=self.filesystem)
        # The endpoint travels in the URI's query, as a user of MinIO or Ceph would pass it.
        return f"s3://bucket/{name}?endpoint_override={self.endpoint}&scheme=http&region=us-east-1"


@pytest.fixture(scope="session")
def s3() -> Iterator[ObjectStore]:
    server_module = pytest.importorskip("moto.server",
                                        reason="the dev extra installs moto[server]")
    # Any credentials do for moto; set them before a Ray runtime starts, so its workers
    # (which resolve credentials themselves, as on a real cluster) inherit them.
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_EC2_METADATA_DISABLED": "true"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    filesystem = pafs.S3FileSystem(endpoint_override=f"{host}:{port}", scheme="http",
                                   region="us-east-1", allow_bucket_creation=True)
    filesystem.create_dir("bucket")
    try:
        yield ObjectStore(f"{host}:{port}", filesystem)
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
