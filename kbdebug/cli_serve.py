"""`kbdebug serve`: the team crash service (kbdebug/server/, extra `kbdebug[server]`), registered by kbdebug.cli."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from kbdebug.cli_options import fail

DEFAULT_MAX_UPLOAD = 16 << 20  # kbdebug.server.app's default; not imported here so `serve -h` needs no FastAPI


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach `host` (127.0.0.0/8, ::1, localhost); a name is resolved."""
    import ipaddress
    import socket

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        addrs = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addrs) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addrs)


def serve_cmd(
    host: Annotated[
        str, typer.Option("--host", metavar="ADDRESS", help="Address to listen on; anything but loopback needs --token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", min=0, max=65535, help="TCP port.")] = 8000,
    db: Annotated[
        str | None,
        typer.Option(
            "--db", metavar="URL", help="sqlite:///FILE (default: ~/.local/share/kbdebug/crashes.db) or postgresql://USER@HOST/DB."
        ),
    ] = None,
    workers: Annotated[int, typer.Option("--workers", metavar="N", min=1, help="Worker processes (they share the database).")] = 1,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            metavar="TOKEN",
            envvar="KBDEBUG_SERVE_TOKEN",
            help="Writes need `Authorization: Bearer TOKEN` (env KBDEBUG_SERVE_TOKEN).",
        ),
    ] = None,
    max_upload: Annotated[
        int, typer.Option("--max-upload", metavar="BYTES", min=1, help="Largest log accepted (413 above).")
    ] = DEFAULT_MAX_UPLOAD,
    webhook: Annotated[
        str | None, typer.Option("--webhook", metavar="URL", help="POST a chat message (JSON) here when a new crash appears.")
    ] = None,
    public_url: Annotated[str | None, typer.Option("--public-url", metavar="URL", help="How links in webhook messages start.")] = None,
) -> None:
    """Serve every job's diagnosis, grouped by crash signature: JSON API under /v1, pages at /, OpenAPI at /docs."""
    if not is_loopback(host) and not token:
        fail(f"--host {host} can be reached from other machines: give --token (or KBDEBUG_SERVE_TOKEN) so that only your jobs can post")
    try:
        import uvicorn

        from kbdebug.server import db as database
    except ImportError as exc:
        fail(f"the server needs its extra: pip install 'kbdebug[server]' ({exc.name} is missing)")
    url = database.normalise_url(db or database.default_url())
    try:
        version = database.migrate(database.make_engine(url))  # once, before the workers start
    except Exception as exc:  # a wrong URL, a server that is down, a file that cannot be written
        fail(f"cannot open the database {url}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    os.environ.update(
        KBDEBUG_SERVE_DB=url,
        KBDEBUG_SERVE_TOKEN=token or "",
        KBDEBUG_SERVE_MAX_UPLOAD=str(max_upload),
        KBDEBUG_SERVE_WEBHOOK=webhook or "",
        KBDEBUG_SERVE_URL=public_url or "",
    )
    typer.echo(f"kbdebug: serving {url} (schema version {version}) on http://{host}:{port}/ with {workers} worker(s)", err=True)
    uvicorn.run("kbdebug.server.app:app_from_env", factory=True, host=host, port=port, workers=workers, log_level="warning")
