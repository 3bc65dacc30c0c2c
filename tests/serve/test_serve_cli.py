"""The ``sim2real serve`` command's options, without starting a server."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sim2real.cli import main
from sim2real.serve._cli import is_local


def test_public_host_needs_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIM2REAL_TOKEN", raising=False)
    result = CliRunner().invoke(main, ["serve", str(tmp_path), "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "--token" in result.output


def test_token_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    seen: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(kw))
    monkeypatch.setenv("SIM2REAL_TOKEN", "t0k-of-sixteen-chars")
    result = CliRunner().invoke(
        main, ["serve", str(tmp_path), "--host", "0.0.0.0", "--port", "8123"]
    )
    assert result.exit_code == 0, result.output
    assert seen == {"host": "0.0.0.0", "port": 8123, "log_level": "warning"}
    assert "token required" in result.output


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("192.168.1.4", False),
        ("example.org", False),
    ],
)
def test_is_local(host: str, local: bool) -> None:
    assert is_local(host) is local
