"""`kbdebug serve`: the team crash service (kbdebug/server/, extra `kbdebug[server]`), registered by kbdebug.cli.app.

Everything that can be wrong with the command line is said in one line before anything is served: an
unsupported database, a webhook that is not an http(s) URL, no token off loopback, an address in use (the
socket is bound before "serving" is printed). Nothing printed shows a password or the token; the token can
come from the environment or a file, so it is not in `ps`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from kbdebug.cli.options import fail

DEFAULT_MAX_UPLOAD = 16 << 20  # kbdebug.server.app's default; not imported here so `serve -h` needs no FastAPI
DATABASES = ("sqlite", "postgresql", "postgres")  # what kbdebug.server.db opens


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


def shown_url(url: str) -> str:
    """A database URL as it may be printed: the password replaced by `***`."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: show its scheme only
        return url.split("://", 1)[0] + "://..." if "://" in url else "..."


def public_base(host: str, port: int) -> str:
    """How webhook links start without --public-url: the address served on (this machine's name for a
    wildcard address), never what a poster's Host header claims."""
    import socket

    if host in ("0.0.0.0", "::", ""):
        host = socket.getfqdn()
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def read_token(token: str | None, token_file: Path | None) -> str | None:
    if token_file is None:
        return token or None
    if token:
        fail("give the token once: --token (or KBDEBUG_SERVE_TOKEN) or --token-file")
    try:
        text = token_file.read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--token-file {token_file}: cannot read: {getattr(exc, 'strerror', None) or exc}")
    if not text or "\n" in text:
        fail(f"--token-file {token_file}: the file must hold the token alone, on one line")
    return text


def serve_cmd(
    host: Annotated[
        str, typer.Option("--host", metavar="ADDRESS", help="Address to listen on; anything but loopback needs a token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", metavar="PORT", min=0, max=65535, help="TCP port (0: any free one).")] = 8000,
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
            show_envvar=False,
            help="Requests need `Authorization: Bearer TOKEN`. Prefer env KBDEBUG_SERVE_TOKEN or --token-file: `ps` shows arguments.",
        ),
    ] = None,
    token_file: Annotated[Path | None, typer.Option("--token-file", metavar="FILE", help="Read the token from FILE (one line).")] = None,
    max_upload: Annotated[
        int, typer.Option("--max-upload", metavar="BYTES", min=1, help="Largest log accepted (413 above).")
    ] = DEFAULT_MAX_UPLOAD,
    webhook: Annotated[
        str | None, typer.Option("--webhook", metavar="URL", help="POST a chat message (JSON) here when a new crash appears.")
    ] = None,
    max_connections: Annotated[
        int | None,
        typer.Option(
            "--max-connections", metavar="N", min=1, help="Open connections per worker (default 512, less under a low file limit)."
        ),
    ] = None,
    request_timeout: Annotated[
        float,
        typer.Option("--request-timeout", metavar="SECONDS", min=0.5, help="Time for a request to arrive whole (headers: 10 s at most)."),
    ] = 60.0,
    public_url: Annotated[
        str | None,
        typer.Option("--public-url", metavar="URL", help="How links in webhook messages start (default: the address served on)."),
    ] = None,
    keep: Annotated[
        str | None,
        typer.Option("--keep", metavar="AGE", help="Delete reports older than AGE (90d, 12w); default: keep all (KBDEBUG_SERVE_KEEP)."),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", metavar="HOST", help="A further Host header to answer (repeatable); loopback names always."),
    ] = None,
) -> None:
    """Serve every job's diagnosis, grouped by crash signature: JSON API under /v1, pages at /, OpenAPI at /docs."""
    secret = read_token(token, token_file)
    if not is_loopback(host) and not secret:
        fail(
            f"--host {host} can be reached from other machines: give --token (or KBDEBUG_SERVE_TOKEN, --token-file) so only your jobs post"
        )
    if webhook:
        from kbdebug.runtime.reporting import http_url_problem

        problem = http_url_problem(webhook)
        if problem:
            fail(f"--webhook: {problem}")
    if keep is not None:
        from kbdebug.server.settings import Settings

        try:
            Settings(keep=keep).retention()
        except ValueError:
            fail(f"--keep {keep}: give an age such as 90d, 12w or 48h")
    if public_url:
        from kbdebug.runtime.reporting import http_url_problem

        problem = http_url_problem(public_url)
        if problem:
            fail(f"--public-url: {problem}")
    try:
        import uvicorn  # noqa: F401 - said missing here, not in a worker

        from kbdebug.server import db as database
        from kbdebug.server import serving
    except ImportError as exc:
        fail(f"the server needs its extra: pip install 'kbdebug[server]' ({exc.name} is missing)")
    given = db or database.default_url()
    scheme = given.split("://", 1)[0].split("+", 1)[0].lower() if "://" in given else ""
    if scheme not in DATABASES:
        fail(f"unsupported database {shown_url(given)}: give sqlite:///FILE or postgresql://USER@HOST/DB")
    url = database.normalise_url(given)
    try:
        version = database.migrate(database.make_engine(url))  # once, before the workers start
    except Exception as exc:  # a wrong URL, a server that is down, a file that cannot be written
        first = str(exc).splitlines()[0] if str(exc) else ""
        fail(f"cannot open the database {shown_url(url)}: {type(exc).__name__}: {first}")
    try:
        sock = serving.listen(host, port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    bound = sock.getsockname()[1]
    os.environ.update(
        KBDEBUG_SERVE_DB=url,
        KBDEBUG_SERVE_TOKEN=secret or "",
        KBDEBUG_SERVE_MAX_UPLOAD=str(max_upload),
        KBDEBUG_SERVE_WEBHOOK=webhook or "",
        KBDEBUG_SERVE_URL=public_url or public_base(host, bound),
        KBDEBUG_SERVE_CONNECTIONS=str(max_connections or ""),
        KBDEBUG_SERVE_REQUEST_TIMEOUT=str(request_timeout),
    )
    if keep is not None:
        os.environ["KBDEBUG_SERVE_KEEP"] = keep
    if allow_host:
        os.environ["KBDEBUG_SERVE_ALLOWED_HOSTS"] = " ".join(allow_host)
    shown = f"http://[{host}]:{bound}/" if ":" in host else f"http://{host}:{bound}/"
    typer.echo(f"kbdebug: serving {shown_url(url)} (schema version {version}) on {shown} with {workers} worker(s)", err=True)
    serving.run("kbdebug.server.app:app_from_env", sock, workers)
