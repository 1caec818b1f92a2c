"""The dependencies every route declares: the engine and settings of its app, who may read and write,
and the `since` filter. The access rules (docs/server.md, Access):

- with a token set, every read and every write needs it (`Authorization: Bearer T`, HTTP Basic with T as
  the password, which browsers ask for themselves, or `X-Kbdebug-Token: T`); /v1/health and /docs do not;
- a write (POST, PATCH, DELETE) needs a header no cross-site form or no-cors fetch can send (a token
  header, or `X-Kbdebug-Client`), or an `Origin` equal to the Host it was sent to (this service's own forms);
- the Host header must name this service (loopback, --public-url's host, or an allowed host), so that a
  page whose name was rebound to 127.0.0.1 reads and writes nothing.

Each is `async def`: none waits on anything, and FastAPI runs a plain `def` dependency in its thread pool,
a hand-off to a thread and back for each, several a request.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, HTTPException, Request
from sqlalchemy import Engine

from kbdebug.server.settings import Settings, parse_duration

UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
CLIENT_HEADERS = ("authorization", "x-kbdebug-token", "x-kbdebug-client")


def _settings(request: Request) -> Settings:
    """The app's settings: `get_settings`'s answer, and what the checks every request passes read directly rather
    than declaring it as a dependency each (FastAPI solves each dependency of each request anew: on a post, the
    checks' own were a third of its work outside the diagnosis)."""
    settings: Settings = request.app.state.settings
    return settings


async def get_settings(request: Request) -> Settings:
    return _settings(request)


async def get_engine(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


SettingsDep = Annotated[Settings, Depends(get_settings)]
EngineDep = Annotated[Engine, Depends(get_engine)]


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


async def check_host(request: Request) -> None:
    """Refuse a Host this service does not answer to (DNS rebinding). With a token and no configured
    names, the token guards every request and any Host is served."""
    settings = _settings(request)
    if settings.token and not (settings.public_url or settings.allowed_hosts):
        return
    name = _host_name(request.headers.get("host", ""))
    if name not in settings.hosts():
        raise HTTPException(
            421,
            f"this service does not answer to the host {name!r}: give it --public-url or list it in KBDEBUG_SERVE_ALLOWED_HOSTS"
            " (loopback names always work)",
        )


def _given_token(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip()
    if scheme.lower() == "basic":
        try:
            return base64.b64decode(value.strip(), validate=True).decode("utf-8", "replace").partition(":")[2]
        except (binascii.Error, ValueError):
            return ""
    return request.headers.get("x-kbdebug-token", "")


class Unauthorized(HTTPException):
    def __init__(self, detail: str) -> None:
        super().__init__(401, detail, headers={"WWW-Authenticate": 'Basic realm="kbdebug", charset="UTF-8"'})


async def read_access(request: Request) -> None:
    settings = _settings(request)
    if settings.token and not hmac.compare_digest(_given_token(request).encode(), settings.token.encode()):
        raise Unauthorized("this server answers only with its token (Authorization: Bearer TOKEN, or the token as the password)")


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin", "")
    return bool(origin) and origin != "null" and urlsplit(origin).netloc.lower() == request.headers.get("host", "").lower()


async def write_access(request: Request) -> None:
    settings = _settings(request)
    if settings.token and not hmac.compare_digest(_given_token(request).encode(), settings.token.encode()):
        raise Unauthorized("this server takes reports only with its token (Authorization: Bearer TOKEN)")
    if request.method in UNSAFE and not any(h in request.headers for h in CLIENT_HEADERS) and not _same_origin(request):
        raise HTTPException(
            403, "a write needs the header X-Kbdebug-Client (any value) or the token: a form or script on another site cannot send it"
        )


Readable = Depends(read_access)
Writable = Depends(write_access)


def parse_since(value: str | None) -> datetime | None:
    """`30m`, `24h`, `7d`, `2w` before now, or an ISO 8601 date or time (UTC when it names no zone)."""
    if not value:
        return None
    span = parse_duration(value)
    if span is not None:
        return datetime.now(UTC) - span
    try:
        when = datetime.fromisoformat(value.strip())
        return when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)  # the database compares UTC times
    except (ValueError, OverflowError):
        raise HTTPException(422, f"since={value[:40]!r}: give 30m, 24h, 7d, 2w or an ISO 8601 date") from None


async def since_param(since: str | None = None) -> datetime | None:
    return parse_since(since)


SinceDep = Annotated[datetime | None, Depends(since_param)]
