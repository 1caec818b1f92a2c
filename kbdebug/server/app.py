"""The HTTP service: the /v1 JSON API and the pages, over one database (see kbdebug/server/db.py).

A worker keeps nothing between requests but its engine and the rule base: every diagnosis, group and
first sighting is in the database, so `--workers N` and several hosts can serve one PostgreSQL.
"""

from __future__ import annotations

import hmac
import io
import json
import os
import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import BackgroundTasks, FastAPI, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy import Engine

from kbdebug._version import __version__
from kbdebug.server import db, pages, store, webhook

DEFAULT_MAX_UPLOAD = 16 << 20
# Pages and reports show text from logs: nothing in them may run, load or submit anything.
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"


@dataclass(frozen=True)
class Settings:
    db: str = ""
    token: str = ""  # when set, every write must carry it (`Authorization: Bearer TOKEN`)
    max_upload: int = DEFAULT_MAX_UPLOAD
    webhook: str = ""
    public_url: str = ""  # how links in webhook messages start (default: the URL the request came in on)

    @classmethod
    def from_env(cls) -> Settings:
        """The settings `kbdebug serve` hands its workers (uvicorn starts each from an import string)."""
        env = os.environ
        return cls(
            db=env.get("KBDEBUG_SERVE_DB", ""),
            token=env.get("KBDEBUG_SERVE_TOKEN", ""),
            max_upload=int(env.get("KBDEBUG_SERVE_MAX_UPLOAD") or DEFAULT_MAX_UPLOAD),
            webhook=env.get("KBDEBUG_SERVE_WEBHOOK", ""),
            public_url=env.get("KBDEBUG_SERVE_URL", ""),
        )


class TooLarge(Exception):
    pass


_diagnosing = threading.Lock()  # the pipeline's caches are built for one thread; the GIL serialises it anyway


def diagnose_bytes(body: bytes, source: str) -> tuple[dict[str, Any], str]:
    """What `kbdebug explain --format json` prints for these bytes (kbdebug's own renderer), and the HTML report."""
    from kbdebug.api import diagnose_regions
    from kbdebug.parse.needles import needles
    from kbdebug.render import render
    from kbdebug.scan import scan_stream

    with _diagnosing:
        diag = diagnose_regions(scan_stream(io.BytesIO(body), needles), source=source)
        return json.loads(render([diag], "json")), render([diag], "html")


async def _read_capped(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:  # a body without Content-Length, or one longer than it said
            raise TooLarge(size)
        chunks.append(chunk)
    return b"".join(chunks)


async def _log_from(request: Request, body: bytes) -> tuple[bytes, str | None]:
    """The log in a raw body, or in the multipart upload's first file (or `log` field)."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        return body, None

    async def replay() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    form = await Request(request.scope, replay).form()
    for _name, value in form.multi_items():
        if hasattr(value, "read"):
            return await value.read(), getattr(value, "filename", None)
    text = form.get("log")
    if isinstance(text, str):
        return text.encode(), None
    raise HTTPException(422, "the multipart body holds no file (upload the log as a file, or as a field named log)")


_SINCE = re.compile(r"^(\d+)\s*([mhdw])$")


def parse_since(value: str | None) -> datetime | None:
    """`30m`, `24h`, `7d`, `2w` before now, or an ISO 8601 date or time (UTC when it names no zone)."""
    if not value:
        return None
    m = _SINCE.match(value.strip())
    if m:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
        return db.utcnow() - timedelta(**{unit: int(m.group(1))})
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise HTTPException(422, f"since={value!r}: give 30m, 24h, 7d, 2w or an ISO 8601 date") from None
    return when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)  # the database compares UTC times


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()
    engine: Engine = db.make_engine(settings.db or db.default_url())
    version = db.migrate(engine)
    app = FastAPI(
        title="kbdebug crash service",
        version=__version__,
        description="Every job's diagnosis in one place, grouped by root signature. Contract: docs/server.md.",
    )
    app.state.engine = engine
    app.state.settings = settings

    @app.middleware("http")
    async def _headers(request: Request, call_next: Any) -> Response:
        response = await call_next(request)
        if not request.url.path.startswith(("/docs", "/redoc")):  # Swagger UI loads its own scripts
            response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response

    def _authorise(request: Request) -> None:
        if not settings.token:
            return
        given = request.headers.get("authorization", "")
        given = given[7:] if given.lower().startswith("bearer ") else request.headers.get("x-kbdebug-token", "")
        if not hmac.compare_digest(given.encode(), settings.token.encode()):
            raise HTTPException(401, "this server takes reports only with its token (Authorization: Bearer TOKEN)")

    @app.post("/v1/diagnose", status_code=201, summary="Diagnose a log and store the diagnosis")
    async def post_diagnose(
        request: Request,
        background: BackgroundTasks,
        job: str = "",
        host: str = "",
        rank: int | None = None,
        command: str = "",
        user: str = "",
        tags: str = "",
        source: str = "",
    ) -> Response:
        """The log is the raw body (`text/plain`) or a multipart file upload. Returns what
        `kbdebug explain --format json` prints for it; `Location` names the stored report."""
        _authorise(request)
        try:
            body = await _read_capped(request, settings.max_upload)
        except TooLarge as exc:
            limit = f"this server takes logs of at most {settings.max_upload} bytes (--max-upload)"
            return JSONResponse({"detail": f"the log is {exc.args[0]} bytes or more; {limit}"}, status_code=413)
        log, filename = await _log_from(request, body)
        name = source or filename or "-"
        diagnosis, html = await run_in_threadpool(diagnose_bytes, log, name)
        meta = store.Meta(job=job, host=host, rank=rank, command=command, user=user, tags=tags, source=name)
        report_id, new = await run_in_threadpool(store.save, engine, diagnosis, html, meta, len(log))
        if new and settings.webhook:
            group = await run_in_threadpool(store.group_summary, engine, diagnosis["incidents"][0]["signature"])
            if group is not None:
                base = (settings.public_url or str(request.base_url)).rstrip("/")
                background.add_task(webhook.send, settings.webhook, webhook.message(group, f"{base}/crashes/{group['signature']}"))
        return JSONResponse(
            diagnosis, status_code=201, headers={"Location": f"/v1/reports/{report_id}", "X-Kbdebug-Report": str(report_id)}
        )

    @app.get("/v1/crashes", summary="Crash groups, one per root signature, most recently seen first")
    def get_crashes(
        rule: str | None = None, job: str | None = None, since: str | None = None, limit: Annotated[int, Query(ge=1, le=5000)] = 500
    ) -> dict[str, Any]:
        return {"crashes": store.groups(engine, store.Filters(rule, job, parse_since(since)), limit)}

    @app.get("/v1/crashes/{signature}", summary="One crash group: summary, latest diagnosis and every occurrence")
    def get_crash(signature: str) -> dict[str, Any]:
        found = store.group(engine, signature)
        if found is None:
            raise HTTPException(404, f"no crash with signature {signature!r}")
        return found

    @app.get("/v1/reports/{report_id}", summary="A stored diagnosis: JSON, or the HTML report (Accept: text/html or ?format=html)")
    def get_report(report_id: int, request: Request, format: str | None = None) -> Response:
        found = store.report(engine, report_id)
        if found is None:
            raise HTTPException(404, f"no report {report_id}")
        diagnosis, html = found
        wants_html = format == "html" or (format is None and "text/html" in request.headers.get("accept", ""))
        return HTMLResponse(html) if wants_html else JSONResponse(diagnosis)

    @app.get("/v1/rules", summary="The rules this server diagnoses with")
    def get_rules() -> dict[str, Any]:
        from kbdebug.kb import load_kb

        rules = sorted(load_kb().rules, key=lambda r: r.id)
        return {"rules": [{"id": r.id, "title": r.title, "priority": r.priority, "retry": r.retry} for r in rules]}

    @app.get("/v1/health", summary="Liveness and the database's state")
    def get_health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__, "schema_version": version, "reports": store.count(engine)}

    pages.mount(app, engine)
    return app


def app_from_env() -> FastAPI:
    """uvicorn's factory for `kbdebug serve` (each worker builds its app from the environment serve set)."""
    return create_app(Settings.from_env())
