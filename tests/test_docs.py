"""The documentation a user of the repository reads: every link leads somewhere, and the
adapter guide's example is an adapter."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from sim2real.sim import RolloutRequest, RolloutResult, load_adapter

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "bench" / "README.md",
         *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_leads_to_a_file_of_the_repository(page: Path) -> None:
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address or an anchor of the same page
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"{page.name}: {target}"


def test_the_adapter_guide_example_is_an_adapter() -> None:
    text = (ROOT / "docs" / "adapters.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "docs/adapters.md", "exec"), namespace)
    adapter = load_adapter(namespace["RailAdapter"]())  # type: ignore[operator]
    closed = adapter.rollout(RolloutRequest({}, {}, {}, seed=0, rate_hz=50.0))
    assert isinstance(closed, RolloutResult) and closed.outcome in ("success", "failure")
    recorded = pa.table({"t": np.arange(0.0, 1.0, 0.02), "x": np.zeros(50),
                         "force": np.full(50, 2.0)})
    state = adapter.initial_state({"episode_id": "real-1"}, recorded)
    replay = RolloutRequest({"friction": 0.9}, {}, state, seed=3, rate_hz=50.0,
                            commands=recorded.select(["t", *adapter.command_channels]))
    one, again = adapter.rollout(replay), adapter.rollout(replay)
    assert one.telemetry.equals(again.telemetry)  # deterministic for a request
    assert set(recorded.column_names) <= set(one.telemetry.column_names)
    assert one.telemetry.num_rows == recorded.num_rows


def test_nothing_points_outside_the_repository() -> None:
    """A user has the repository, not the team's shared folder."""
    texts = [*PAGES, *sorted((ROOT / "src").rglob("*.py"))]
    for path in texts:
        assert "shared/" not in path.read_text(), path.relative_to(ROOT)
