"""The serving process of `kbdebug serve` (kbdebug/cli/serve.py binds the socket, then calls `run`): uvicorn
with every wait bounded, so slow or half-sent requests cannot use up the process.

- A connection gets HEADER_TIMEOUT seconds for its request's headers (from its opening, or from the end of
  the previous answer) and `--request-timeout` seconds for the whole request with its body; then it is closed.
- Each worker holds at most `--max-connections`; at the cap a new connection closes the one that has waited
  longest for a request to arrive (a half-sent or idle one), never one whose request is being answered, so
  a flood of half-open connections cannot keep a real request (or /v1/health) out. The kernel's backlog is
  bounded too (BACKLOG), and the cap stays well under the process's file limit.
- SIGTERM: uvicorn stops accepting, closes idle connections and gives running requests GRACE seconds.
"""

from __future__ import annotations

import asyncio
import functools
import os
import resource
import socket

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.supervisors import Multiprocess

HEADER_TIMEOUT = 10.0
REQUEST_TIMEOUT = 60.0  # the default: a 16 MiB upload over a slow link fits
KEEP_ALIVE = 5  # seconds an idle connection stays open after an answer
BACKLOG = 128
GRACE = 5  # seconds running requests get after SIGTERM
HEADER_LIMIT = 16 << 10  # request line and headers (h11's default, said here)


def max_connections() -> int:
    """Open connections per worker by default: 512, or a quarter of the file limit when that is lower (the
    rest is for the backlog being accepted, the database and the logs)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(16, min(512, (soft if soft != resource.RLIM_INFINITY else 4096) // 4))


@functools.cache
def limits() -> tuple[int, float, float]:
    """(connections, header timeout, request timeout) for this process: `kbdebug serve` hands its options to
    the workers in the environment, as it does the app's settings."""
    cap = int(os.environ.get("KBDEBUG_SERVE_CONNECTIONS") or 0) or max_connections()
    whole = float(os.environ.get("KBDEBUG_SERVE_REQUEST_TIMEOUT") or 0) or REQUEST_TIMEOUT
    return cap, min(HEADER_TIMEOUT, whole), whole


class BoundedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request to arrive and a cap on connections."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.waiting_since = self.loop.time()
        self.watch = self.loop.call_later(1.0, self.check)
        if len(self.connections) > limits()[0]:
            self.make_room()

    def on_response_complete(self) -> None:
        self.waiting_since = self.loop.time()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self.watch.cancel()
        super().connection_lost(exc)

    def waiting(self) -> bool:
        """Still waiting for (the rest of) a request: nothing of ours is running for it."""
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing()

    def check(self) -> None:
        if self.transport.is_closing():
            return
        age = self.loop.time() - self.waiting_since
        state, (_cap, headers, whole) = self.conn.their_state, limits()
        if (state is h11.IDLE and age > headers) or (state is h11.SEND_BODY and age > whole):
            self.close()
            return
        self.watch = self.loop.call_later(1.0, self.check)

    def close(self) -> None:
        self.connections.discard(self)  # at once: the cap counts it out now, not when the loop gets to it
        self.transport.close()

    def make_room(self) -> None:
        waiting = [c for c in self.connections if isinstance(c, BoundedH11) and c is not self and c.waiting()]
        if waiting:
            min(waiting, key=lambda c: c.waiting_since).close()
        else:  # every other connection has a request being answered: this one waits its turn elsewhere
            self.close()


def config(app: str, workers: int) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        factory=True,
        workers=workers,
        http=BoundedH11,
        timeout_keep_alive=KEEP_ALIVE,
        limit_concurrency=limits()[0] + BACKLOG,  # uvicorn's own 503 beyond this: a backstop to the cap
        backlog=BACKLOG,
        timeout_graceful_shutdown=GRACE,
        h11_max_incomplete_event_size=HEADER_LIMIT,
        log_level="warning",
        server_header=False,
    )


def run(app: str, sock: socket.socket, workers: int) -> None:
    """Serve `app` (an import string of an app factory) on the bound, listening `sock`."""
    cfg = config(app, workers)
    if workers > 1:
        Multiprocess(cfg, sockets=[sock]).run()
    else:
        uvicorn.Server(cfg).run(sockets=[sock])


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything says it serves (an address in use is an OSError here)."""
    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _type, _proto, _name, address = info[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(BACKLOG)
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock
