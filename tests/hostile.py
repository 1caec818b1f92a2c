"""A loopback HTTP peer that misbehaves on purpose, for the crash service's clients (reporting.py, the
webhook): canned answers, answers that never end, a byte every so often, redirects. Each connection is
counted; every loop is bounded and the server stops with its `with` block."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Seen:
    """What the peer was sent: each request's head (request line and headers, lower-cased names) and body."""

    heads: list[dict[str, str]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def count(self) -> int:
        with self.lock:
            return len(self.heads)


def _read_request(conn: socket.socket) -> tuple[dict[str, str], bytes] | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {"": lines[0]}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    want = int(headers.get("content-length", "0") or 0)
    while len(body) < want:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return headers, body


def response(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


Answer = Callable[[socket.socket, Seen], None]


def canned(raw: bytes) -> Answer:
    def answer(conn: socket.socket, _: Seen) -> None:
        conn.sendall(raw)

    return answer


def delayed(seconds: float, raw: bytes) -> Answer:
    def answer(conn: socket.socket, _: Seen) -> None:
        time.sleep(seconds)
        conn.sendall(raw)

    return answer


def dribble(every: float, steps: int = 40) -> Answer:
    """A status line, then one header byte each `every` seconds (at most `steps`): never a whole answer."""

    def answer(conn: socket.socket, _: Seen) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        for _ in range(steps):
            time.sleep(every)
            conn.sendall(b"X")

    return answer


def endless(conn: socket.socket, _: Seen) -> None:
    """A 200 whose body keeps coming (at most 64 MiB)."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
    chunk = b"[" * 65536
    for _ in range(1024):
        conn.sendall(chunk)


def silent(conn: socket.socket, _: Seen) -> None:
    time.sleep(30)


@contextmanager
def peer(answer: Answer | list[Answer]) -> Iterator[tuple[str, Seen]]:
    """`http://127.0.0.1:PORT` answering each request with `answer` (or the list's answers in turn, the
    last repeated)."""
    seen = Seen()
    answers = answer if isinstance(answer, list) else [answer]

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            conn: socket.socket = self.request
            conn.settimeout(35)
            try:
                got = _read_request(conn)
                if got is None:
                    return
                with seen.lock:
                    n = len(seen.heads)
                    seen.heads.append(got[0])
                    seen.bodies.append(got[1])
                answers[min(n, len(answers) - 1)](conn, seen)
            except OSError:
                pass

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
