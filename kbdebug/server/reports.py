"""/v1/diagnose and /v1/reports: a log posted, diagnosed within its budget and stored; a stored report read
(as JSON, or as the HTML report, rendered when asked for) or deleted."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, BackgroundTasks, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy import Engine

from kbdebug.server import models, store, triage, webhook, worker
from kbdebug.server.deps import EngineDep, Readable, SettingsDep, Writable
from kbdebug.server.prepared import Prepared
from kbdebug.server.settings import Settings

router = APIRouter(prefix="/v1", tags=["reports"], responses=models.ERRORS)
INT32 = 2**31 - 1
LIMITS = {"job": 512, "host": 255, "user": 256, "command": 8192, "tags": 1024, "source": 1024}
PURGE_EVERY = timedelta(minutes=10)


class TooLarge(Exception):
    pass


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
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        raise HTTPException(400, "the log goes in the body as text (Content-Type: text/plain) or as a multipart file, not as JSON")
    if kind != "multipart/form-data":
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


def _is_json_document(log: bytes) -> bool:
    """A whole body that is one JSON object or array: an API payload sent to the wrong place, not a log."""
    head = log.lstrip()[:1]
    if head not in (b"{", b"["):
        return False
    try:
        json.loads(log)
    except ValueError:
        return False
    return True


def _meta(job: str, host: str, rank: int | None, command: str, user: str, tags: str, source: str) -> store.Meta:
    """The poster's metadata, refused whole (422) when a value is too long or holds a NUL: the same answer
    on every database (PostgreSQL cannot store NUL, and its columns have lengths)."""
    values = {"job": job, "host": host, "command": command, "user": user, "tags": tags, "source": source}
    for name, value in values.items():
        if len(value) > LIMITS[name]:
            raise HTTPException(422, f"{name} is {len(value)} characters long; this server takes at most {LIMITS[name]}")
        if "\x00" in value:
            raise HTTPException(422, f"{name} holds a NUL character (%00)")
    return store.Meta(job=job, host=host, rank=rank, command=command, user=user, tags=tags, source=source or "-")


def _notify(settings: Settings, request: Request, background: BackgroundTasks, group: dict[str, Any] | None, regressed: bool) -> None:
    if group is None:
        return
    # the link starts at the configured public URL, never at the poster's Host header
    payload = webhook.message(group, webhook.link(settings.public_url, group["signature"]), "regressed" if regressed else "new_signature")
    background.add_task(webhook.send, settings.webhook, payload)


def _purge_due(request: Request, settings: Settings) -> bool:
    kept = settings.retention()
    last = getattr(request.app.state, "purged_at", None)
    now = store.utcnow()
    if kept is None or (last is not None and now - last < PURGE_EVERY):
        return False
    request.app.state.purged_at = now
    return True


def _diagnose_and_save(engine: Engine, settings: Settings, log: bytes, meta: store.Meta) -> tuple[Prepared, store.Saved]:
    """The log diagnosed in the pool (this thread waits for a worker) and stored: one hand-off to a thread per post."""
    diag = worker.pool(settings.diagnose_workers).diagnose(log, meta.source, settings.diagnose_timeout, settings.diagnose_queue)
    return diag, store.save(engine, diag, meta, len(log))


@router.post(
    "/diagnose",
    status_code=201,
    summary="Diagnose a log and store the diagnosis",
    response_model=models.DiagnosisJSON,
    dependencies=[Writable],
    responses={400: {"model": models.Problem, "description": "An empty body, or JSON instead of a log."}, 413: {"model": models.Problem}},
)
async def post_diagnose(
    request: Request,
    background: BackgroundTasks,
    engine: EngineDep,
    settings: SettingsDep,
    job: Annotated[str, Query(description="The job's name (at most 512 characters).")] = "",
    host: str = "",
    rank: Annotated[int | None, Query(ge=0, le=INT32)] = None,
    command: str = "",
    user: str = "",
    tags: str = "",
    source: str = "",
) -> Response:
    """The log is the raw body (`text/plain`) or a multipart file upload. Returns what
    `kbdebug explain --format json` prints for it; `Location` names the stored report."""
    meta = _meta(job, host, rank, command, user, tags, source)
    try:
        body = await _read_capped(request, settings.max_upload)
    except TooLarge as exc:
        limit = f"this server takes logs of at most {settings.max_upload} bytes (--max-upload)"
        return JSONResponse({"detail": f"the log is {exc.args[0]} bytes or more; {limit}"}, status_code=413)
    log, filename = await _log_from(request, body)
    if not log.strip():
        raise HTTPException(400, "the body is empty: post the log's text (Content-Type: text/plain) or upload it as a file")
    if _is_json_document(log):
        raise HTTPException(400, "the body is a JSON document, not a log: post the log's text as it was printed")
    name = meta.source if meta.source != "-" else filename or "-"
    meta = store.Meta(**{**meta.__dict__, "source": name})
    diag, saved = await run_in_threadpool(_diagnose_and_save, engine, settings, log, meta)
    if (saved.new or saved.regressed) and settings.webhook and diag.signature:
        group = await run_in_threadpool(store.group_summary, engine, diag.signature)
        _notify(settings, request, background, group, saved.regressed)
    kept = settings.retention()
    if kept is not None and _purge_due(request, settings):
        background.add_task(triage.purge, engine, store.utcnow() - kept)
    location = f"/v1/reports/{saved.ref}"
    headers = {"Location": location, "X-Kbdebug-Report": saved.ref}
    return Response(diag.answer, status_code=201, headers=headers, media_type="application/json")


@router.get(
    "/reports/{report}",
    summary="A stored diagnosis: JSON, or the HTML report (Accept: text/html or ?format=html)",
    response_model=models.DiagnosisJSON,
    dependencies=[Readable],
    responses={404: {"model": models.Problem}},
)
def get_report(report: str, request: Request, engine: EngineDep, format: str | None = None) -> Response:
    found = store.report(engine, report)
    if found is None:
        raise HTTPException(404, f"no report {report[:40]!r}")
    diag, legacy = found
    wants_html = format == "html" or (format is None and "text/html" in request.headers.get("accept", ""))
    if not wants_html:
        return JSONResponse(store.answer(diag))
    if legacy:  # stored before schema v2, with its HTML
        import zlib

        return HTMLResponse(zlib.decompress(legacy).decode())
    from kbdebug.render import render

    return HTMLResponse(render([diag], "html"))


@router.delete("/reports/{report}", summary="Delete one report", response_model=models.Deleted, dependencies=[Writable])
def delete_report(report: str, engine: EngineDep) -> models.Deleted:
    if not triage.delete_report(engine, report):
        raise HTTPException(404, f"no report {report[:40]!r}")
    return models.Deleted(deleted=1)


@router.get(
    "/unrecognised",
    summary="Logs in which nothing was recognised, newest first",
    response_model=models.Unrecognised,
    dependencies=[Readable],
)
def get_unrecognised(engine: EngineDep, limit: Annotated[int, Query(ge=1, le=500)] = 50) -> models.Unrecognised:
    n, rows = store.unrecognised(engine, store.Filters(), limit)
    return models.Unrecognised(count=n, reports=[models.Occurrence(**r) for r in rows])
