"""The dashboard's pages and API through FastAPI's test client."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from sim2real.serve.app import create_app

TOKEN = "correct-horse-battery"


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
    }


@pytest.fixture()
def client(workspace: Path) -> TestClient:
    return TestClient(create_app(workspace))


def test_lists_runs_and_serves_pages(client: TestClient) -> None:
    home = client.get("/")
    assert home.status_code == 200
    assert "week08" in home.text and "week03" in home.text
    page = client.get("/runs/week08")
    assert page.status_code == 200
    assert 'src="/static/plotly.js"' in page.text
    for cid in ("C3", "C1", "C5", "C2"):
        assert f'data-anchor="cluster-{cid}"' in page.text
    assert client.get("/runs/week08/validation").status_code == 200
    assert client.get("/runs/week03/validation").status_code == 404
    js = client.get("/static/plotly.js")
    assert js.status_code == 200 and "Plotly" in js.text


def test_api_returns_the_models(client: TestClient) -> None:
    runs = client.get("/api/runs").json()
    assert {r["name"] for r in runs} == {"week08", "week03"}
    clusters = client.get("/api/clusters", params={"run": "week08"}).json()
    assert [c["cluster_id"] for c in clusters] == ["C3", "C5", "C1", "C2"]
    one = client.get("/api/clusters/C3", params={"run": "week08"}).json()
    assert one["taxonomy"] == "perception_drift" and one["lifecycle"] == "escalating"
    event_id = one["events"][0]
    event = client.get(f"/api/events/{event_id}", params={"run": "week08"}).json()
    assert event["cluster_id"] == "C3" and "robot_id" in event
    assert client.get("/api/clusters/C99", params={"run": "week08"}).status_code == 404
    assert client.get("/api/validation", params={"run": "week08"}).json()["candidate"] == ["w07"]
    spec = client.get("/openapi.json").json()
    assert {"/api/clusters", "/api/clusters/{cluster_id}", "/api/events/{event_id}"} <= set(
        spec["paths"]
    )


@pytest.mark.parametrize(
    "url",
    [
        "/runs/..%2F..%2Fetc/passwd",
        "/runs/../../etc/passwd",
        "/runs/week08%2F..%2F..%2F..%2Fetc/passwd",
        "/runs/%2Fetc",
        "/api/events/..%2F..%2Fetc%2Fpasswd",
        "/api/clusters/..%2Freport.json?run=week08",
        "/api/clusters?run=..%2F..%2Fetc",
        "/api/clusters?run=/etc",
    ],
)
def test_path_traversal_is_404(client: TestClient, url: str) -> None:
    response = client.get(url)
    assert response.status_code == 404
    assert "root:" not in response.text


def test_symlinked_run_outside_is_not_served(tmp_path: Path, workspace: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "escape").symlink_to(workspace / "week08", target_is_directory=True)
    client = TestClient(create_app(tmp_path / "ws"))
    assert client.get("/api/runs").json() == []
    assert client.get("/runs/escape").status_code == 404


def test_token_is_required_everywhere(workspace: Path) -> None:
    client = TestClient(create_app(workspace, token=TOKEN))
    for url in ("/", "/runs/week08", "/api/clusters", "/openapi.json", "/static/plotly.js"):
        assert client.get(url).status_code == 401, url
    bad = client.get("/api/clusters", headers={"Authorization": "Bearer wrong"})
    assert bad.status_code == 401
    assert client.get("/api/clusters", params={"token": "nope"}).status_code == 401
    good = client.get("/api/clusters", headers={"Authorization": f"Bearer {TOKEN}"})
    assert good.status_code == 200
    assert client.get("/api/clusters", params={"token": TOKEN}).status_code == 200


def test_query_token_becomes_a_cookie_for_the_browser(workspace: Path) -> None:
    client = TestClient(create_app(workspace, token=TOKEN))
    first = client.get("/runs/week08", params={"token": TOKEN}, follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/runs/week08"
    assert client.get("/runs/week08").status_code == 200  # the cookie now carries it


def test_serving_never_writes(workspace: Path, client: TestClient) -> None:
    before = _snapshot(workspace)
    for url in (
        "/",
        "/runs/week08",
        "/runs/week03",
        "/runs/week08/validation",
        "/api/clusters",
        "/api/runs",
        "/api/validation",
    ):
        client.get(url)
    assert _snapshot(workspace) == before


def test_root_may_be_a_run(workspace: Path) -> None:
    client = TestClient(create_app(workspace / "week08"))
    assert [r["name"] for r in client.get("/api/runs").json()] == ["week08"]
    assert client.get("/api/clusters").status_code == 200


@pytest.mark.parametrize(("file", "content"), [("report.json", b"{not json"),
                                               ("signatures.parquet", b"PAR1 torn PAR1"),
                                               ("validation.json", b"\xff\xfe")])
def test_a_broken_run_is_listed_as_broken_and_never_takes_down_the_list(
        tmp_path: Path, workspace: Path, file: str, content: bytes) -> None:
    shutil.copytree(workspace / "week08", tmp_path / "good")
    shutil.copytree(workspace / "week08", tmp_path / "broken")
    (tmp_path / "broken" / file).write_bytes(content)
    client = TestClient(create_app(tmp_path))
    home = client.get("/")
    assert home.status_code == 200
    assert 'class="broken"' in home.text and f"broken/{file}" in home.text
    assert client.get("/runs/good").status_code == 200
    runs = {r["name"]: r for r in client.get("/api/runs").json()}
    assert runs["good"]["error"] is None and file in runs["broken"]["error"]
    page = client.get("/runs/broken" + ("/validation" if file == "validation.json" else ""))
    assert page.status_code == 500 and "cannot be read" in page.text
