"""What the crash-service tests share: logs of a few kinds, a database per test (SQLite always, PostgreSQL
when KBDEBUG_TEST_POSTGRES names one), a `kbdebug serve` subprocess, and small HTTP receivers."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import ROOT

EXAMPLE = (ROOT / "examples" / "segmentation_crash.log").read_bytes()
INDEX = (
    b"Traceback (most recent call last):\n"
    b'  File "/job/train.py", line 51, in step\n'
    b"    emb = table[ids]\n"
    b"IndexError: index 5 is out of bounds for dimension 0 with size 3\n"
)
OOM = (
    b'Traceback (most recent call last):\n  File "train.py", line 88, in step\n    out = model(x)\n'
    b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.65 GiB "
    b"of which 1.02 GiB is free.\n"
)
HOSTILE_VALUE = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
HOSTILE = (
    b'Traceback (most recent call last):\n  File "seg.py", line 12, in <module>\n    loss = loss_fn(pred, label)\n'
    b"AssertionError: ground truth has different shape (torch.Size([2, 1, 96, 96])) from input (torch.Size([2, 14, 96, 96])) "
    + HOSTILE_VALUE.encode()
    + b"\n"
)


def multirank(causal: int = 3, ranks: int = 4) -> bytes:
    """One job's output: the causal rank's device assert and the other ranks' NCCL watchdog timeouts."""
    lines = [
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, "
        f"OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=600000) ran for 600012 milliseconds before timing out."
        for r in range(ranks)
        if r != causal
    ]
    lines += [
        f"[rank{causal}]:/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [3,0,0] "
        'Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.',
        f"[rank{causal}]:RuntimeError: CUDA error: device-side assert triggered",
    ]
    return ("\n".join(lines) + "\n").encode()


def postgres_url() -> str | None:
    return os.environ.get("KBDEBUG_TEST_POSTGRES") or None


def fresh_db(kind: str, tmp_path: Path) -> str:
    """An empty database of `kind` (sqlite: a file in tmp_path; postgresql: KBDEBUG_TEST_POSTGRES, emptied)."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'crashes.db'}"
    url = postgres_url()
    if url is None:
        pytest.skip("no PostgreSQL to test against (KBDEBUG_TEST_POSTGRES; .ci/run sets it)")
    from kbdebug.server import db

    engine = db.make_engine(url)
    db.Base.metadata.drop_all(engine)
    engine.dispose()
    return url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/v1/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not come up in {timeout} s")


class Served:
    def __init__(self, proc: subprocess.Popen[bytes], url: str) -> None:
        self.proc, self.url = proc, url

    def kill(self) -> None:
        """SIGKILL to the whole process group (uvicorn's workers too): no shutdown handler runs."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


@contextmanager
def serve(db_url: str, *args: str, host: str = "127.0.0.1", env: dict[str, str] | None = None) -> Iterator[Served]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kbdebug", "serve", "--host", host, "--port", str(port), "--db", db_url, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    served = Served(proc, f"http://127.0.0.1:{port}")
    try:
        wait_up(served.url)
        yield served
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                served.kill()


def post(url: str, log: bytes, timeout: float = 60, token: str = "", **query: str) -> tuple[int, dict]:
    q = urllib.parse.urlencode(query)
    headers = {"Content-Type": "text/plain", "X-Kbdebug-Client": "test"} | ({"Authorization": f"Bearer {token}"} if token else {})
    req = urllib.request.Request(f"{url}/v1/diagnose" + (f"?{q}" if q else ""), data=log, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def get(url: str, timeout: float = 30, token: str = "") -> dict:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


class Receiver:
    """An HTTP server on loopback that records what is posted to it and answers with `status` after `delay`."""

    def __init__(self, status: int = 200, delay: float = 0.0) -> None:
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.bodies.append(body)
                outer.paths.append(self.path)
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(b'{"detail": "refused by the test"}' if status >= 400 else b"{}")
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
