"""The dashboard under attack and under load, and runs named by what they are."""

from __future__ import annotations

import logging
import shutil
import statistics
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from sim2real.cli import main
from sim2real.errors import UsageError
from sim2real.report.model import ValidationModel
from sim2real.report.snapshot import Validation
from sim2real.serve import app as serve_app
from sim2real.serve._cli import trusted_hosts
from sim2real.serve.app import create_app

TOKEN = "correct-horse-battery"


@pytest.fixture()
def local(workspace: Path) -> TestClient:
    """A dashboard bound to localhost, as ``sim2real serve`` starts it."""
    return TestClient(create_app(workspace, allowed_hosts=trusted_hosts("127.0.0.1")),
                      base_url="http://localhost:8000")


def test_host_header_must_name_the_server(local: TestClient) -> None:
    assert local.get("/api/runs").status_code == 200
    assert local.get("/api/runs", headers={"Host": "127.0.0.1:8000"}).status_code == 200
    assert local.get("/api/runs", headers={"Host": "[::1]:8000"}).status_code == 200
    # a page of another site that DNS rebinding pointed at 127.0.0.1
    rebound = local.get("/api/runs", headers={"Host": "attacker.example:8000"})
    assert rebound.status_code == 400 and "--allowed-host" in rebound.text


def test_trusted_hosts() -> None:
    assert trusted_hosts("127.0.0.1") == {"127.0.0.1", "localhost", "::1"}
    assert trusted_hosts("10.0.0.5", ["dash.example.org"]) == {"10.0.0.5", "dash.example.org"}
    assert trusted_hosts("0.0.0.0") is None  # every interface: the token guards
    assert "dash.example.org" in (trusted_hosts("0.0.0.0", ["dash.example.org"]) or ())


def test_token_redirect_stays_on_this_server(workspace: Path) -> None:
    client = TestClient(create_app(workspace, token=TOKEN))
    for path in ("//attacker.example/", "/\\attacker.example/", "///attacker.example/x"):
        response = client.get(path, params={"token": TOKEN}, follow_redirects=False)
        assert response.status_code == 303
        location = response.headers["location"]
        assert location.startswith("/") and not location.startswith(("//", "/\\")), location


@pytest.mark.parametrize("token", ["x", "short-token-15c", " " * 20, "sixteen chars ok?"])
def test_weak_tokens_are_refused(workspace: Path, token: str) -> None:
    with pytest.raises(UsageError, match="at least 16 characters"):
        create_app(workspace, token=token)


def test_token_alone_is_generated_and_printed(workspace: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    seen: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(app=app))
    monkeypatch.delenv("SIM2REAL_TOKEN", raising=False)
    result = CliRunner().invoke(main, ["serve", str(workspace), "--host", "0.0.0.0", "--token"])
    assert result.exit_code == 0, result.output
    token = result.output.splitlines()[0].removeprefix("token: ")
    assert len(token) >= 16
    client = TestClient(seen["app"])  # type: ignore[arg-type]
    assert client.get("/api/runs", headers={"Authorization": f"Bearer {token}"}).status_code \
        == 200
    short = CliRunner().invoke(main, ["serve", str(workspace), "--token", "abc"])
    assert short.exit_code == 2 and "16 characters" in short.output


def test_wrong_tokens_are_rate_limited(workspace: Path) -> None:
    client = TestClient(create_app(workspace, token=TOKEN))
    codes = [client.get("/api/runs", params={"token": f"guess-{i:012d}"}).status_code
             for i in range(30)]
    assert codes[:10] == [401] * 10 and set(codes[10:]) == {429}
    # while it waits, even the right token is refused from that client
    locked = client.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert locked.status_code == 429 and int(locked.headers["Retry-After"]) > 0


def test_pages_are_rendered_once_per_version_of_the_files(
        workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(workspace / "week03", tmp_path / "week03")
    calls: list[int] = []
    render = serve_app.render_page

    def counted(*args: object, **kwargs: object) -> str:
        calls.append(1)
        return render(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(serve_app, "render_page", counted)
    client = TestClient(create_app(tmp_path))
    first = client.get("/runs/week03").text
    assert client.get("/runs/week03").text == first and len(calls) == 1
    report = tmp_path / "week03" / "report.json"
    report.write_text(report.read_text().replace('"C3"', '"C9"'))
    assert 'data-anchor="cluster-C9"' in client.get("/runs/week03").text and len(calls) == 2


def test_concurrent_page_loads_keep_the_api_fast(workspace: Path) -> None:
    """Pages render in a worker process, once per version: the API never waits on them."""
    client = TestClient(create_app(workspace))
    client.get("/api/runs")  # the app is started
    pages = [threading.Thread(target=client.get, args=("/runs/week03",)) for _ in range(10)]
    for page in pages:
        page.start()
    latencies = []
    while any(p.is_alive() for p in pages) or len(latencies) < 10:
        start = time.perf_counter()
        assert client.get("/api/clusters", params={"run": "week08"}).status_code == 200
        latencies.append(time.perf_counter() - start)
    for page in pages:
        page.join()
    assert statistics.median(latencies) < 0.05, latencies


def test_one_access_log_line_per_request_without_the_token(
        workspace: Path, caplog: pytest.LogCaptureFixture) -> None:
    client = TestClient(create_app(workspace, token=TOKEN))
    with caplog.at_level(logging.INFO, logger="sim2real.serve.access"):
        client.get("/api/runs", params={"token": TOKEN, "x": "1"})
        client.get("/api/runs")
    lines = [r.getMessage() for r in caplog.records if r.name == "sim2real.serve.access"]
    assert len(lines) == 2
    assert '"GET /api/runs?x=1" 200' in lines[0] and '"GET /api/runs" 401' in lines[1]
    assert TOKEN not in "".join(lines)


def test_api_docs_are_served_offline(local: TestClient) -> None:
    page = local.get("/docs")
    assert page.status_code == 200
    for route in ("/api/runs", "/api/clusters", "/api/validation", "ClusterReport"):
        assert route in page.text
    assert "<script" not in page.text and "cdn" not in page.text.lower()
    assert "http://" not in page.text and "https://" not in page.text


def test_runs_are_named_by_what_they_are(workspace: Path, tmp_path: Path) -> None:
    shutil.copytree(workspace / "week08", tmp_path / "report")
    model = Validation.load(workspace / "week08").model.model_dump()
    model["dataset"] = "/data/fleet-2026-11"
    Validation(ValidationModel.model_validate(model)).save(tmp_path / "validation")
    client = TestClient(create_app(tmp_path))
    home = client.get("/").text
    assert "w01–w08" in home
    assert "fleet-2026-11 · fix check w05, w06 → w07" in home
    for verdict in ("C1 shrank", "C5 new", "C3 grew", "C2 unchanged"):
        assert verdict in home
    runs = {r["name"]: r for r in client.get("/api/runs").json()}
    assert runs["validation"]["verdicts"]["C1"] == "shrank"
    assert runs["validation"]["title"].startswith("fleet-2026-11")


def test_run_query_works_for_validation_runs(workspace: Path, tmp_path: Path) -> None:
    Validation.load(workspace / "week08").save(tmp_path / "validation")
    client = TestClient(create_app(tmp_path))
    clusters = client.get("/api/clusters", params={"run": "validation"})
    assert clusters.status_code == 200
    assert {c["cluster_id"]: c["verdict"] for c in clusters.json()}["C1"] == "shrank"
    one = client.get("/api/clusters/C3", params={"run": "validation"}).json()
    assert one["verdict"] == "grew"
    event = client.get("/api/events/anything", params={"run": "validation"})
    assert event.status_code == 404 and "/api/clusters?run=validation" in event.text
    assert client.get("/api/validation", params={"run": "validation"}).status_code == 200
    assert client.get("/runs/validation").status_code == 200
