"""Every failure answers a sentence: `{"detail": "..."}` with its status (a validation error too, not
FastAPI's list), 503 with Retry-After when the database cannot be used (down, full, read-only, locked),
and a small HTML page instead of JSON to a browser on the pages."""

from __future__ import annotations

import logging
from html import escape
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from kbdebug.server.worker import Refused

log = logging.getLogger("kbdebug.server")
RETRY_AFTER = 30  # seconds a client is told to wait when the database cannot be used


def _wants_html(request: Request) -> bool:
    path = request.url.path
    return not path.startswith(("/v1/", "/openapi")) and "text/html" in request.headers.get("accept", "")


def problem(request: Request, status: int, detail: str, headers: dict[str, str] | None = None) -> Response:
    if _wants_html(request):
        page = f"<!doctype html><meta charset=utf-8><title>{status}</title><h1>{status}</h1><p>{escape(detail)}</p>"
        page += '<p><a href="/">all crashes</a></p>'
        return HTMLResponse(page, status_code=status, headers=headers)
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _sentence(errors: list[Any]) -> str:
    """FastAPI's list of validation errors as one sentence: `rank: Input should be a valid integer (got 'x')`."""
    parts = []
    for err in errors[:3]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("query", "path", "body", "header"))
        given = err.get("input")
        got = f" (got {str(given)[:40]!r})" if isinstance(given, str | int | float) else ""
        parts.append(f"{where or 'request'}: {err.get('msg', 'invalid')}{got}")
    return "; ".join(parts)


def _storage(exc: Exception) -> str:
    first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return first[0][:200] if first else type(exc).__name__


def install(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"nothing at {request.url.path[:200]}"
        elif exc.status_code == 405 and detail == "Method Not Allowed":
            detail = f"{request.method} is not allowed on {request.url.path[:200]}"
        return problem(request, exc.status_code, detail, getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return problem(request, 422, _sentence(list(exc.errors())))

    @app.exception_handler(Refused)
    async def _refused(request: Request, exc: Refused) -> Response:
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else None
        return problem(request, exc.status, exc.detail, headers)

    @app.exception_handler(SQLAlchemyError)
    async def _database(request: Request, exc: SQLAlchemyError) -> Response:
        log.warning("kbdebug: the database failed: %s", _storage(exc))
        if isinstance(exc, OperationalError | DBAPIError | PoolTimeout):
            reason = _storage(exc)
            detail = f"the database cannot be used just now ({reason}); nothing was stored: try again later"
            return problem(request, 503, detail, {"Retry-After": str(RETRY_AFTER)})
        return problem(request, 500, f"the database refused the request: {_storage(exc)}")

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> Response:
        log.exception("kbdebug: %s %s failed", request.method, request.url.path)
        return problem(request, 500, f"the server failed on this request ({type(exc).__name__}); it is logged")


__all__ = ["HTTPException", "install", "problem"]
