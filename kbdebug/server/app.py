"""The HTTP service: the /v1 JSON API and the pages, over one database (see kbdebug/server/db.py).

One router per resource (reports, crashes, health and rules, pages), each route declaring what it needs
(the engine, the settings, read or write access: kbdebug/server/deps.py) and answering a pydantic model.
A worker keeps nothing between requests but its engine, its diagnosis pool and the rule base: every
diagnosis, group and first sighting is in the database, so `--workers N` and several hosts can serve one
PostgreSQL.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kbdebug._version import __version__
from kbdebug.server import crashes, db, errors, health, pages, reports, triage
from kbdebug.server.deps import check_host
from kbdebug.server.settings import DEFAULT_MAX_UPLOAD, Settings

__all__ = ["DEFAULT_MAX_UPLOAD", "Settings", "app_from_env", "create_app"]

# Pages and reports show text from logs: nothing in them may run, load or submit anything.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"


class _SecurityHeaders:
    """Every answer's CSP and nosniff headers, unless a route set its own: added to the response's start as it
    passes (an ASGI middleware: Starlette's `@app.middleware("http")` runs each request in a task group and
    streams the body through a queue, a tenth of a small post's cost)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("Content-Security-Policy", CSP)
                headers.setdefault("X-Content-Type-Options", "nosniff")
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    kept = settings.retention()  # a malformed --keep fails here, before anything is served
    engine = db.make_engine(settings.db or db.default_url(), timeout=settings.db_timeout)
    db.migrate(engine)
    if kept is not None:
        triage.purge(engine, db.utcnow() - kept)
    app = FastAPI(
        title="kbdebug crash service",
        version=__version__,
        description="Every job's diagnosis in one place, grouped by root signature. Contract: docs/server.md.",
        docs_url=None,  # FastAPI's Swagger UI loads from a CDN; pages.docs draws the API offline
        redoc_url=None,
    )
    app.state.engine = engine
    app.state.settings = settings
    errors.install(app)

    app.add_middleware(_SecurityHeaders)
    for module in (reports, crashes, pages):
        app.include_router(module.router, dependencies=[Depends(check_host)])
    app.include_router(health.router)  # a liveness probe comes by address, under any Host: health is open
    return app


def app_from_env() -> FastAPI:
    """uvicorn's factory for `kbdebug serve` (each worker builds its app from the environment serve set)."""
    return create_app(Settings.from_env())
