"""``sim2real serve``: the dashboard on a local port."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import click

from sim2real._optional import require

__all__ = ["serve"]

_LOCAL_NAMES = {"localhost", "ip6-localhost"}


def is_local(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command()
@click.argument(
    "root",
    metavar="OUT_OR_WORKSPACE",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; anything but localhost needs --token.",
)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="SIM2REAL_TOKEN",
    default=None,
    metavar="TOKEN",
    help="Secret every request must carry (Bearer header or ?token=); "
    "also read from SIM2REAL_TOKEN.",
)
def serve(root: Path, host: str, port: int, token: str | None) -> None:
    """Serve the runs under OUT_OR_WORKSPACE as a live, read-only dashboard.

    OUT_OR_WORKSPACE is a run folder (with report.json or validation.json) or a folder of
    them. Pages at /, the JSON API at /api/... (described at /openapi.json).
    """
    if not is_local(host) and not token:
        msg = (
            f"--host {host} accepts connections from other machines; "
            "give --token TOKEN (or set SIM2REAL_TOKEN) so only your team gets in"
        )
        raise click.UsageError(msg)
    uvicorn = require("uvicorn", "serve")
    require("fastapi", "serve")
    from sim2real.serve.app import create_app

    app = create_app(root, token)
    runs = len(app.state.store.runs())
    click.echo(
        f"serving {runs} run{'s' * (runs != 1)} from {root} at http://{host}:{port}/"
        + (" (token required)" if token else "")
    )
    uvicorn.run(app, host=host, port=port, log_level="warning")
