"""``sim2real serve``: the dashboard on a local port."""

from __future__ import annotations

import ipaddress
import logging
import secrets
from collections.abc import Sequence
from pathlib import Path

import click

from sim2real._optional import require

__all__ = ["is_local", "serve", "trusted_hosts"]

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
    is_flag=False,
    flag_value="",
    metavar="[TOKEN]",
    help="Secret every request must carry (Bearer header or ?token=), 16 characters or "
    "more; --token alone generates one and prints it. Also read from SIM2REAL_TOKEN.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="Another name requests may give in their Host header, e.g. a reverse proxy's "
    "(repeat for more). Only the bound address is accepted otherwise.",
)
def serve(root: Path, host: str, port: int, token: str | None,
          allowed_hosts: tuple[str, ...]) -> None:
    """Serve the runs under OUT_OR_WORKSPACE as a live, read-only dashboard.

    OUT_OR_WORKSPACE is a run folder (with report.json or validation.json) or a folder of
    them. Pages at /, the JSON API at /api/... (described at /docs, offline, and
    /openapi.json). One line per request is logged on stderr.
    """
    if token == "":
        token = secrets.token_urlsafe(24)
        click.echo(f"token: {token}")
    if not is_local(host) and not token:
        msg = (
            f"--host {host} accepts connections from other machines; "
            "give --token TOKEN (or set SIM2REAL_TOKEN) so only your team gets in"
        )
        raise click.UsageError(msg)
    uvicorn = require("uvicorn", "serve")
    require("fastapi", "serve")
    from sim2real.serve.app import ACCESS_LOG, create_app

    app = create_app(root, token, allowed_hosts=trusted_hosts(host, allowed_hosts))
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    ACCESS_LOG.addHandler(handler)
    ACCESS_LOG.setLevel(logging.INFO)
    runs = len(app.state.store.runs())
    click.echo(
        f"serving {runs} run{'s' * (runs != 1)} from {root} at http://{host}:{port}/"
        + (" (token required)" if token else "")
    )
    uvicorn.run(app, host=host, port=port, log_level="warning")


def trusted_hosts(host: str, extra: Sequence[str] = ()) -> frozenset[str] | None:
    """The names a request's Host header may give for a server bound to ``host``: that
    address (with ``localhost`` and the loopback addresses for a local one) and ``extra``.
    ``None`` (any) for a bind to every interface without ``extra``: there the token guards.
    """
    wildcard = host.strip("[]") in ("0.0.0.0", "::", "")
    if wildcard and not extra:
        return None
    names = {h.strip("[]").lower() for h in extra}
    if not wildcard:
        names.add(host.strip("[]").lower())
    if wildcard or is_local(host):
        names |= {"localhost", "127.0.0.1", "::1"}
    return frozenset(names)
