"""The dashboard: the report pages, live, for a team, plus a read-only JSON API.

Pages come from the same renderer as ``report.html`` (:mod:`sim2real.report.html`), each
rendered once per version of its run's files, in a worker process
(:mod:`sim2real.serve._pages`) so the API stays fast meanwhile; the API returns the
report's pydantic models. Nothing here writes into a run, and runs are looked up by name from the
discovered list, so a URL can never reach another file.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from urllib.parse import quote, urlencode, urlsplit

from fastapi import FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse

from sim2real._version import __version__
from sim2real.errors import ReportError, UsageError
from sim2real.report.html import plotly_js, render_runs
from sim2real.report.model import ClusterReport, EventReport, ValidationCluster, ValidationModel
from sim2real.report.snapshot import VALIDATION_JSON
from sim2real.serve._docs import render_api_docs
from sim2real.serve._pages import render_page
from sim2real.serve._runs import REPORT_FILES, Run, RunStore

__all__ = ["MIN_TOKEN_LENGTH", "TOKEN_COOKIE", "check_token", "create_app"]

TOKEN_COOKIE = "sim2real_token"
MIN_TOKEN_LENGTH = 16
ACCESS_LOG = logging.getLogger("sim2real.serve.access")
_PLOTLY = "/static/plotly.js"
_NO_RUN = "no such run; see /api/runs for the runs this server finds"
# Wrong tokens a client may send in a window before it is told to wait.
_MAX_FAILURES, _WINDOW_S = 10, 60.0

Middleware = Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]


def check_token(token: str) -> None:
    """A token must be hard to guess: at least 16 characters, no spaces.

    Raises:
        UsageError: a shorter token, or one with whitespace.
    """
    if len(token) < MIN_TOKEN_LENGTH or any(c.isspace() for c in token):
        msg = (f"a token needs at least {MIN_TOKEN_LENGTH} characters and no spaces; "
               "give --token alone to have one generated")
        raise UsageError(msg)


def _run_href(run: Run, page: str = "") -> str:
    return f"/runs/{quote(run.name)}" + (f"/{page}" if page else "")


def _dataset_name(path: str | None) -> str | None:
    return Path(path).name or path if path else None


def _row(store: RunStore, run: Run) -> dict[str, object]:
    """One line of the run list, named by what the run is (dataset, deployments, date); a
    run that cannot be read still shows, marked broken, with its error."""
    date = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.mtime))
    row: dict[str, object] = {
        "name": run.name,
        "title": run.name,
        "report_href": _run_href(run) if run.has_report else None,
        "validation_href": _run_href(run, "validation") if run.has_validation else None,
        "failures": "–",
        "clusters": "–",
        "deployments": "–",
        "fastest": "–",
        "verdicts": [],
        "error": None,
        "updated": date,
    }
    try:
        if run.has_validation:
            model = store.validation(run).model
            row["verdicts"] = [(c.cluster_id, c.verdict) for c in model.clusters]
            row["deployments"] = f"{', '.join(model.baseline)} → {', '.join(model.candidate)}"
            dataset = _dataset_name(model.dataset)
            row["title"] = f"{dataset or run.name} · fix check {row['deployments']}"
        if run.has_report:
            report = store.report(run).model
            deps = report.dataset.deployments
            row.update(
                failures=report.dataset.failures,
                clusters=len(report.clusters),
                deployments=f"{deps[0]} → {deps[-1]}" if deps else "–",
                fastest=report.fastest_growing or "–",
                title=" · ".join(p for p in (_dataset_name(report.dataset.path) or run.name,
                                             f"{deps[0]}–{deps[-1]}" if deps else None) if p),
            )
    except (ReportError, OSError) as err:
        row["error"] = str(err)
    return row


def _token_of(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE)


class _Failures:
    """Wrong tokens per client over the last minute: past the limit, it waits."""

    def __init__(self) -> None:
        self._seen: dict[str, deque[float]] = {}

    def wait(self, client: str) -> float:
        """Seconds ``client`` must wait before it may try again (0: it may)."""
        seen = self._seen.get(client)
        now = time.monotonic()
        while seen and now - seen[0] > _WINDOW_S:
            seen.popleft()
        if not seen:
            self._seen.pop(client, None)
            return 0.0
        return _WINDOW_S - (now - seen[0]) if len(seen) >= _MAX_FAILURES else 0.0

    def add(self, client: str) -> None:
        self._seen.setdefault(client, deque()).append(time.monotonic())


def _guard(token: str) -> Middleware:
    """Middleware: every request carries the token (header, query or the cookie it sets);
    a client that keeps sending wrong ones is refused for a while."""
    failures = _Failures()

    async def check(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        client = request.client.host if request.client else "?"
        wait = failures.wait(client)
        if wait > 0:
            return JSONResponse({"detail": "too many wrong tokens; wait and try again"},
                                status_code=429, headers={"Retry-After": f"{wait:.0f}"})
        given = _token_of(request)
        if given is None or not secrets.compare_digest(given.encode(), token.encode()):
            failures.add(client)
            return JSONResponse(
                {"detail": "missing or wrong token"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        query_token = request.query_params.get("token")
        if query_token and request.method == "GET" and not request.url.path.startswith("/api"):
            # a browser came with ?token=: keep it in a cookie and drop it from the address
            # bar; the target is a path of this server ("//host" would leave it)
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = "/" + request.url.path.lstrip("/\\") + (f"?{urlencode(rest)}" if rest
                                                             else "")
            response: Response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response
        return await call_next(request)

    return check


def _host_guard(allowed: Collection[str]) -> Middleware:
    """Middleware: the Host header names this server, so a page of another site that a
    DNS trick points at this address (DNS rebinding) gets nothing."""
    names = {h.lower().strip("[]") for h in allowed}

    async def check(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        host = urlsplit("//" + request.headers.get("host", "")).hostname or ""
        if host.lower() not in names:
            msg = f"unknown host {host!r}; a proxy's name is added with --allowed-host"
            return PlainTextResponse(msg, status_code=400)
        return await call_next(request)

    return check


async def _headers(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    response = await call_next(request)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    return response


async def _access_log(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """One line per request: client, method, path (a token in the query left out), status,
    milliseconds."""
    start = time.perf_counter()
    response = await call_next(request)
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    path = request.url.path + (f"?{urlencode(query)}" if query else "")
    client = request.client.host if request.client else "-"
    ACCESS_LOG.info('%s "%s %s" %d %.1f ms', client, request.method, path,
                    response.status_code, 1000 * (time.perf_counter() - start))
    return response


def create_app(root: Path, token: str | None = None, *,
               allowed_hosts: Collection[str] | None = None) -> FastAPI:
    """The dashboard for the runs under ``root`` (``root`` itself may be a run).

    Args:
        root: a run folder or a workspace holding run folders.
        token: when set, every request must carry it (``Authorization: Bearer``,
            ``?token=`` or the cookie a first ``?token=`` visit sets); 16 characters or more.
        allowed_hosts: the names a request's Host header may give (the bound address and
            any proxy's); ``None`` accepts any.

    Raises:
        UsageError: the token is too short or holds spaces.
    """
    if token is not None:
        check_token(token)
    store = RunStore(Path(root))
    # /docs is our own page, drawn from the OpenAPI description: FastAPI's loads Swagger UI
    # from a CDN, and the dashboard must work offline
    app = FastAPI(
        title="sim2real dashboard",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        description="Read-only view of sim2real runs: failure clusters, events, validations.",
    )
    # the last added runs first: log, then Host, then token, then the response headers
    app.middleware("http")(_headers)
    if token:
        app.middleware("http")(_guard(token))
    if allowed_hosts is not None:
        app.middleware("http")(_host_guard(allowed_hosts))
    app.middleware("http")(_access_log)
    app.state.store = store

    def run_or_404(name: str, *, report: bool = False, validation: bool = False) -> Run:
        run = store.get(name)
        if (
            run is None
            or (report and not run.has_report)
            or (validation and not run.has_validation)
        ):
            raise HTTPException(404, _NO_RUN)
        return run

    def api_run(name: str | None) -> Run:
        """The run ``?run=`` names (a report or a validation), else the newest report."""
        run = store.latest_report() if name is None else store.get(name)
        if run is None:
            raise HTTPException(404, _NO_RUN)
        return run

    def nav(run: Run) -> list[tuple[str, str]]:
        links = [("All runs", "/")]
        if run.has_validation:
            links.append(("Validation", _run_href(run, "validation")))
        if run.has_report:
            links.append(("Report", _run_href(run)))
        return links

    def page(run: Run, kind: str) -> str:
        """A run's page, rendered once per version of the files it shows (and of those
        that change its links)."""
        files = (*REPORT_FILES, VALIDATION_JSON)
        html = store.cached(run, f"{kind} page", files,
                            lambda: render_page(run.path, kind, nav(run), _PLOTLY))
        assert isinstance(html, str)
        return html

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> str:
        rows = [_row(store, r) for r in store.runs()]
        return render_runs(rows, root=str(store.root), api_href="/docs", plotly_src=_PLOTLY)

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> str:
        return render_api_docs(app.openapi())

    @app.get(_PLOTLY, include_in_schema=False)
    def plotly() -> Response:
        return Response(
            plotly_js(),
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    @app.get("/runs/{name:path}/validation", response_class=HTMLResponse, include_in_schema=False)
    def validation_route(name: str) -> str:
        return page(run_or_404(name, validation=True), "validation")

    @app.get("/runs/{name:path}", response_class=HTMLResponse, include_in_schema=False)
    def report_route(name: str) -> str:
        run = run_or_404(name)
        return page(run, "report" if run.has_report else "validation")

    @app.get("/api/runs", summary="The runs this server finds, newest first")
    def api_runs() -> list[dict[str, object]]:
        return [
            {
                "name": r.name,
                "title": row["title"],
                "report": r.has_report,
                "validation": r.has_validation,
                "verdicts": dict(row["verdicts"]),  # type: ignore[call-overload]
                "modified": r.mtime,
                "error": row["error"],
            }
            for r in store.runs()
            for row in [_row(store, r)]
        ]

    run_query = Query(None, description="run name from /api/runs (a report or a validation); "
                                        "default: the newest report")

    @app.get("/api/clusters", summary="Failure clusters, most urgent first (of a validation "
                                       "run: each cluster's verdict)")
    def api_clusters(run: str | None = run_query) -> list[ClusterReport] | list[ValidationCluster]:
        found = api_run(run)
        if found.has_report:
            return store.report(found).model.clusters
        return store.validation(found).model.clusters

    @app.get("/api/clusters/{cluster_id}", summary="One failure cluster (or its verdict)")
    def api_cluster(cluster_id: str,
                    run: str | None = run_query) -> ClusterReport | ValidationCluster:
        for c in api_clusters(run):
            if c.cluster_id == cluster_id:
                return c
        raise HTTPException(404, f"no cluster {cluster_id!r} in this run")

    @app.get("/api/events/{event_id:path}", summary="One real failure and its drift signature")
    def api_event(event_id: str, run: str | None = run_query) -> EventReport:
        found = api_run(run)
        if not found.has_report:
            raise HTTPException(404, "a validation run holds verdicts, not events; see "
                                     f"/api/clusters?run={quote(found.name)}")
        for e in store.report(found).model.events:
            if e.episode_id == event_id:
                return e
        raise HTTPException(404, f"no event {event_id!r} in this run")

    @app.get("/api/validation", summary="Before/after rates and verdicts of a validation run")
    def api_validation(run: str | None = run_query) -> ValidationModel:
        found = store.get(run) if run else next((r for r in store.runs() if r.has_validation), None)
        if found is None or not found.has_validation:
            raise HTTPException(404, _NO_RUN)
        return store.validation(found).model

    @app.exception_handler(ReportError)
    async def unreadable(request: Request, err: ReportError) -> Response:
        return PlainTextResponse(f"this run cannot be read: {err}", status_code=500)

    return app
