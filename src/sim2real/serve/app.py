"""The dashboard: the report pages, live, for a team, plus a read-only JSON API.

Pages come from the same renderer as ``report.html`` (:mod:`sim2real.report.html`); the
API returns the report's pydantic models. Nothing here writes into a run, and runs are
looked up by name from the discovered list, so a URL can never reach another file.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import quote, urlencode

from fastapi import FastAPI, HTTPException, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse

from sim2real._version import __version__
from sim2real.errors import ReportError
from sim2real.report.html import plotly_js, render_report, render_runs, render_validation
from sim2real.report.model import ClusterReport, EventReport, ValidationModel
from sim2real.serve._runs import Run, RunStore

__all__ = ["TOKEN_COOKIE", "create_app"]

TOKEN_COOKIE = "sim2real_token"
_PLOTLY = "/static/plotly.js"
_NO_RUN = "no such run; see /api/runs for the runs this server finds"


def _run_href(run: Run, page: str = "") -> str:
    return f"/runs/{quote(run.name)}" + (f"/{page}" if page else "")


def _row(store: RunStore, run: Run) -> dict[str, object]:
    """One line of the run list; a run that cannot be read still shows, with its error."""
    row: dict[str, object] = {
        "name": run.name,
        "report_href": _run_href(run) if run.has_report else None,
        "validation_href": _run_href(run, "validation") if run.has_validation else None,
        "failures": "–",
        "clusters": "–",
        "deployments": "–",
        "fastest": "–",
        "error": None,
        "updated": time.strftime("%Y-%m-%d %H:%M", time.localtime(run.mtime)),
    }
    if run.has_report:
        try:
            model = store.report(run).model
        except ReportError as err:
            row["error"] = str(err)
            return row
        deps = model.dataset.deployments
        row.update(
            failures=model.dataset.failures,
            clusters=len(model.clusters),
            deployments=f"{deps[0]} → {deps[-1]}" if deps else "–",
            fastest=model.fastest_growing or "–",
        )
    return row


def _token_of(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE)


def _guard(
    token: str,
) -> Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]:
    """Middleware: every request carries the token (header, query or the cookie it sets)."""

    async def check(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        given = _token_of(request)
        if given is None or not secrets.compare_digest(given.encode(), token.encode()):
            return JSONResponse(
                {"detail": "missing or wrong token"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        query_token = request.query_params.get("token")
        if query_token and request.method == "GET" and not request.url.path.startswith("/api"):
            # a browser came with ?token=: keep it in a cookie and drop it from the address bar
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            response: Response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return response
        return await call_next(request)

    return check


async def _headers(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    response = await call_next(request)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    return response


def create_app(root: Path, token: str | None = None) -> FastAPI:
    """The dashboard for the runs under ``root`` (``root`` itself may be a run).

    Args:
        root: a run folder or a workspace holding run folders.
        token: when set, every request must carry it (``Authorization: Bearer``,
            ``?token=`` or the cookie a first ``?token=`` visit sets).
    """
    store = RunStore(Path(root))
    # no /docs: its page loads Swagger UI from a CDN, and the dashboard must work offline
    app = FastAPI(
        title="sim2real dashboard",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        description="Read-only view of sim2real runs: failure clusters, events, validations.",
    )
    app.middleware("http")(_headers)
    if token:
        app.middleware("http")(_guard(token))
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
        run = store.latest_report() if name is None else store.get(name)
        if run is None or not run.has_report:
            raise HTTPException(404, _NO_RUN)
        return run

    def nav(run: Run) -> list[tuple[str, str]]:
        links = [("All runs", "/")]
        if run.has_validation:
            links.append(("Validation", _run_href(run, "validation")))
        if run.has_report:
            links.append(("Report", _run_href(run)))
        return links

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> str:
        rows = [_row(store, r) for r in store.runs()]
        return render_runs(rows, root=str(store.root), api_href="/openapi.json", plotly_src=_PLOTLY)

    @app.get(_PLOTLY, include_in_schema=False)
    def plotly() -> Response:
        return Response(
            plotly_js(),
            media_type="text/javascript",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    @app.get("/runs/{name:path}/validation", response_class=HTMLResponse, include_in_schema=False)
    def validation_page(name: str) -> str:
        run = run_or_404(name, validation=True)
        return render_validation(store.validation(run), plotly_src=_PLOTLY, nav=nav(run))

    @app.get("/runs/{name:path}", response_class=HTMLResponse, include_in_schema=False)
    def report_page(name: str) -> str:
        run = run_or_404(name)
        if not run.has_report:
            return render_validation(store.validation(run), plotly_src=_PLOTLY, nav=nav(run))
        return render_report(store.report(run), plotly_src=_PLOTLY, nav=nav(run))

    @app.get("/api/runs", summary="The runs this server finds, newest first")
    def api_runs() -> list[dict[str, object]]:
        return [
            {
                "name": r.name,
                "report": r.has_report,
                "validation": r.has_validation,
                "modified": r.mtime,
            }
            for r in store.runs()
        ]

    run_query = Query(None, description="run name from /api/runs; default: the newest report")

    @app.get("/api/clusters", summary="Failure clusters, most urgent first")
    def api_clusters(run: str | None = run_query) -> list[ClusterReport]:
        return store.report(api_run(run)).model.clusters

    @app.get("/api/clusters/{cluster_id}", summary="One failure cluster")
    def api_cluster(cluster_id: str, run: str | None = run_query) -> ClusterReport:
        for c in store.report(api_run(run)).model.clusters:
            if c.cluster_id == cluster_id:
                return c
        raise HTTPException(404, f"no cluster {cluster_id!r} in this run")

    @app.get("/api/events/{event_id:path}", summary="One real failure and its drift signature")
    def api_event(event_id: str, run: str | None = run_query) -> EventReport:
        for e in store.report(api_run(run)).model.events:
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
