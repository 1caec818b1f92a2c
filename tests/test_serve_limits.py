"""`kbdebug serve` as a process under slow and half-sent requests, SIGTERM, and a command line that cannot
work (loopback only; every loop bounded, every socket closed by the test)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn")
from conftest import ROOT, run_cli
from serverkit import INDEX, free_port, serve, wait_up

ENV = {**{k: v for k, v in os.environ.items() if k != "KBDEBUG_SERVE_TOKEN"}, "PYTHONPATH": str(ROOT)}


def post(url: str, log: bytes, token: str = "", host: str | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "text/plain", "X-Kbdebug-Client": "kbdebug/test"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if host:
        headers["Host"] = host
    req = urllib.request.Request(url + "/v1/diagnose?job=limits", data=log, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


# many short tracebacks: the costliest kind of log to diagnose (#38.4)
REPEATED = b"".join(
    b'Traceback (most recent call last):\n  File "a.py", line %d, in f\n    x()\nValueError: bad %d\n' % (i, i) for i in range(3000)
)


def _quietly(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except OSError:
        pass


def half_sent(url: str, n: int, body: bool = False) -> list[socket.socket]:
    """`n` connections each holding a request that never ends: headers cut short, or (body) a body cut short."""
    port = int(url.rsplit(":", 1)[1])
    part = (
        b"POST /v1/diagnose HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Kbdebug-Client: kbdebug\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nTrace"
        if body
        else b"POST /v1/diagnose HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
    )
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(part)
        socks.append(s)
    return socks


def closed_by_server(s: socket.socket, wait: float) -> bool:
    """Whether the server closed `s` within `wait` seconds (an empty read or a reset), not merely silent."""
    s.settimeout(wait)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def health(url: str) -> int:
    with urllib.request.urlopen(url + "/v1/health", timeout=10) as resp:
        return resp.status


def test_a_flood_of_half_sent_requests_leaves_health_answering(tmp_path: Path) -> None:
    with serve(f"sqlite:///{tmp_path / 'c.db'}", "--max-connections", "16") as server:
        socks = half_sent(server.url, 120)
        try:
            assert health(server.url) == 200  # the oldest half-sent connections made room
            status, _ = post(server.url, INDEX)
            assert status == 201
            closed = sum(closed_by_server(s, 0.05) for s in socks)
            assert closed >= 120 - 16
        finally:
            for s in socks:
                s.close()


@pytest.mark.parametrize("body", [False, True], ids=["headers", "body"])
def test_a_request_that_never_arrives_whole_is_closed(body: bool, tmp_path: Path) -> None:
    with serve(f"sqlite:///{tmp_path / 'c.db'}", "--request-timeout", "2") as server:
        (s,) = half_sent(server.url, 1, body=body)
        try:
            assert closed_by_server(s, 20)
        finally:
            s.close()
        assert health(server.url) == 200


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_stops_the_server_within_seconds(workers: str, tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbdebug", "serve", "--port", str(port), "--db", f"sqlite:///{tmp_path / 'c.db'}", "--workers", workers],
        cwd=ROOT,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    socks: list[socket.socket] = []
    try:
        url = f"http://127.0.0.1:{port}"
        wait_up(url)
        socks = half_sent(url, 5) + half_sent(url, 2, body=True)
        busy = threading.Thread(target=lambda: _quietly(post, url, REPEATED), daemon=True)
        busy.start()  # a long diagnosis in flight: SIGTERM does not wait for it to finish
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) is not None  # a TimeoutExpired here is the failure
    finally:
        for s in socks:
            s.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_a_port_in_use_is_one_line_and_nothing_served(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = run_cli("serve", "--port", str(port), "--db", f"sqlite:///{tmp_path / 'c.db'}", env=ENV)
    assert r.returncode == 2
    assert r.stderr.decode().splitlines() == [f"kbdebug: cannot listen on 127.0.0.1:{port}: Address already in use"]


@pytest.mark.parametrize(
    "db, said",
    [
        (
            "mysql://kb:s3cret-pw@127.0.0.1/kb",
            "kbdebug: unsupported database mysql://kb:***@127.0.0.1/kb: give sqlite:///FILE or postgresql://USER@HOST/DB",
        ),
        (
            "oracle+cx://kb:s3cret-pw@db/kb",
            "kbdebug: unsupported database oracle+cx://kb:***@db/kb: give sqlite:///FILE or postgresql://USER@HOST/DB",
        ),
        ("postgresql://kb:s3cret-pw@127.0.0.1:1/kb", "kbdebug: cannot open the database postgresql+psycopg://kb:***@127.0.0.1:1/kb: "),
    ],
)
def test_a_database_url_is_never_printed_with_its_password(db: str, said: str) -> None:
    r = run_cli("serve", "--port", "0", "--db", db, env=ENV)
    err = r.stderr.decode()
    assert r.returncode == 2 and len(err.splitlines()) == 1 and err.startswith(said)
    assert "s3cret" not in err


def test_the_startup_line_hides_the_password(tmp_path: Path) -> None:
    from kbdebug.cli.serve import shown_url

    assert shown_url("postgresql+psycopg://kb:s3cret-pw@db.internal:5432/kb") == "postgresql+psycopg://kb:***@db.internal:5432/kb"
    with serve(f"sqlite:///{tmp_path / 'c.db'}") as server:
        server.proc.send_signal(signal.SIGTERM)
        out = server.proc.communicate(timeout=15)[0].decode()
    assert (
        out.splitlines()[0]
        == f"kbdebug: serving sqlite:///{tmp_path / 'c.db'} (schema version {out.split('schema version ')[1].split(')')[0]}) on {server.url}/ with 1 worker(s)"
    )


@pytest.mark.parametrize("url", ["file:///etc/passwd", "not a url", "gopher://127.0.0.1/x"])
def test_a_webhook_that_is_not_http_is_refused_at_start(url: str) -> None:
    r = run_cli("serve", "--port", "0", "--webhook", url, env=ENV)
    assert r.returncode == 2
    assert r.stderr.decode().splitlines() == [f"kbdebug: --webhook: {url!r} is not an http:// or https:// URL"]


def test_the_token_from_a_file_or_the_environment_is_not_on_the_command_line(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("f1le-t0ken\n")
    with serve(f"sqlite:///{tmp_path / 'c.db'}", "--token-file", str(secret), host="0.0.0.0") as server:
        assert b"f1le-t0ken" not in Path(f"/proc/{server.proc.pid}/cmdline").read_bytes()
        assert post(server.url, INDEX)[0] == 401
        assert post(server.url, INDEX, token="f1le-t0ken")[0] == 201
    with serve(f"sqlite:///{tmp_path / 'd.db'}", env={"KBDEBUG_SERVE_TOKEN": "env-t0ken"}) as server:
        assert post(server.url, INDEX)[0] == 401
        assert post(server.url, INDEX, token="env-t0ken")[0] == 201


@pytest.mark.parametrize(
    "content, said",
    [("", "the file must hold the token alone, on one line"), ("a\nb\n", "the file must hold the token alone, on one line")],
)
def test_a_token_file_that_holds_no_token_is_one_line(content: str, said: str, tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text(content)
    r = run_cli("serve", "--port", "0", "--token-file", str(secret), env=ENV)
    assert r.returncode == 2 and r.stderr.decode().splitlines() == [f"kbdebug: --token-file {secret}: {said}"]
    missing = run_cli("serve", "--port", "0", "--token-file", str(tmp_path / "none"), env=ENV)
    assert missing.returncode == 2 and missing.stderr.decode().splitlines() == [
        f"kbdebug: --token-file {tmp_path / 'none'}: cannot read: No such file or directory"
    ]


def test_off_loopback_without_any_token_is_refused(tmp_path: Path) -> None:
    r = run_cli("serve", "--host", "0.0.0.0", "--port", "0", "--db", f"sqlite:///{tmp_path / 'c.db'}", env=ENV)
    assert r.returncode == 2
    assert r.stderr.decode().splitlines() == [
        "kbdebug: --host 0.0.0.0 can be reached from other machines: give --token (or KBDEBUG_SERVE_TOKEN, --token-file) so only your jobs post"
    ]
