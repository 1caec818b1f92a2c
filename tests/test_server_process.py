"""`kbdebug serve` as a process: concurrent posts over loopback (nothing lost, no request fails), several
workers on one database, a SIGKILLed server restarted on its database, and the token rule off loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from conftest import ROOT, run_cli
from serverkit import EXAMPLE, INDEX, OOM, fresh_db, get, multirank, post, serve

LOGS = [EXAMPLE, INDEX, OOM, multirank()]


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return fresh_db(request.param, tmp_path)


def test_concurrent_posts_to_two_workers_lose_nothing(db_url: str) -> None:
    posts, clients = 120, 8
    with serve(db_url, "--workers", "2") as server:
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(lambda i: post(server.url, LOGS[i % len(LOGS)], job=f"load-{i}", rank=str(i % 8)), range(posts)))
        assert [status for status, _ in results].count(201) == posts
        assert get(server.url + "/v1/health")["reports"] == posts
        crashes = get(server.url + "/v1/crashes")["crashes"]
        assert sum(g["count"] for g in crashes) == posts
        assert sorted(g["count"] for g in crashes) == [30, 30, 30, 30]


def test_a_killed_server_restarted_on_its_database_keeps_every_diagnosis(db_url: str) -> None:
    with serve(db_url) as server:
        ids = []
        for i in range(12):
            status, body = post(server.url, LOGS[i % len(LOGS)], job=f"j{i}")
            assert status == 201
            ids.append(body["incidents"][0]["signature"])
        server.kill()  # SIGKILL: no shutdown, no flush
    with serve(db_url) as again:
        assert get(again.url + "/v1/health")["reports"] == 12
        crashes = get(again.url + "/v1/crashes")["crashes"]
        assert {g["signature"] for g in crashes} == set(ids) and sum(g["count"] for g in crashes) == 12
        for g in crashes:
            assert get(f"{again.url}/v1/reports/{g['example']['report']}")["incidents"][0]["signature"] == g["signature"]
        status, _ = post(again.url, INDEX)
        assert status == 201 and get(again.url + "/v1/health")["reports"] == 13


def test_listening_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'c.db'}"
    env = {k: v for k, v in os.environ.items() if k != "KBDEBUG_SERVE_TOKEN"}
    r = run_cli("serve", "--host", "0.0.0.0", "--port", "0", "--db", db, env={**env, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2
    assert r.stderr.decode().startswith("kbdebug: --host 0.0.0.0 can be reached from other machines: give --token")
    with serve(db, "--token", "t0ken", host="0.0.0.0") as server:
        status, body = post(server.url, INDEX)
        assert status == 401 and "token" in body["detail"]
        assert post(server.url, INDEX, token="t0ken")[0] == 201
        with pytest.raises(urllib.error.HTTPError, match="401"):
            get(server.url + "/v1/crashes")  # reads need the token too
        assert len(get(server.url + "/v1/crashes", token="t0ken")["crashes"]) == 1
        assert get(server.url + "/v1/health")["reports"] == 1


def test_a_database_that_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    r = run_cli("serve", "--db", "postgresql://nobody@127.0.0.1:1/none", "--port", "0", env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kbdebug: cannot open the database postgresql+psycopg://nobody@127.0.0.1:1/none")


def test_serve_help_needs_no_server_packages() -> None:
    code = "import sys; sys.modules['fastapi'] = None; sys.modules['uvicorn'] = None; from kbdebug.cli.app import main; sys.argv = ['kbdebug', 'serve', '-h']; main()"
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    assert r.returncode == 0 and "--max-upload" in r.stdout and "--webhook" in r.stdout


def test_a_client_that_leaves_mid_diagnosis_harms_nothing(tmp_path: Path) -> None:
    """#38.4: a 4 MiB retry-loop log posted by a client that hangs up at once: the server goes on taking
    posts (another diagnosis worker), and its worker comes back or is replaced within the budget."""
    import socket
    import urllib.parse

    one = b'Traceback (most recent call last):\n  File "train.py", line 10, in step\n    x = f()\nRuntimeError: boom\n'
    slow = one * ((4 << 20) // len(one))
    with serve(f"sqlite:///{tmp_path / 'c.db'}") as server:
        where = urllib.parse.urlsplit(server.url)
        for _ in range(2):
            with socket.create_connection((where.hostname, where.port)) as s:
                head = f"POST /v1/diagnose HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Kbdebug-Client: t\r\nContent-Length: {len(slow)}\r\n\r\n"
                s.sendall(head.encode() + slow)
        for log in (INDEX, OOM, EXAMPLE):
            assert post(server.url, log)[0] == 201
        assert get(server.url + "/v1/health")["reports"] in (3, 4, 5)  # the abandoned posts: stored or refused, never half


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the process's ignored signals from /proc (Linux)")
def test_a_client_that_hangs_up_before_its_answer_cannot_kill_the_service(tmp_path: Path) -> None:
    """Writing an answer to a client that has gone fails with EPIPE, and raises SIGPIPE: the service ignores it (as
    Python does by default; the CLI's commands that print end quietly on a closed pipe, `serve` must not), so
    one client hanging up never takes every other client's connection with it."""
    import re
    import signal

    with serve(f"sqlite:///{tmp_path / 'p.db'}") as server:
        status = Path(f"/proc/{server.proc.pid}/status").read_text()
        found = re.search(r"^SigIgn:\s*([0-9a-f]+)$", status, re.M)
        assert found is not None
        assert int(found.group(1), 16) & (1 << (signal.SIGPIPE - 1)), "kbdebug serve dies of SIGPIPE"
        assert post(server.url, INDEX)[0] == 201
