"""Webhook delivery (kbdebug/server/webhook.py) against receivers that misbehave on loopback: it never holds
up a request or /v1/health, cuts a dribbling receiver off at its deadline, follows no redirect, retries a 5xx
a bounded number of times, logs the receiver's host and never its secret URL, and links to the configured
address rather than the poster's Host header."""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from pathlib import Path

import pytest
from hostile import Answer, canned, dribble, peer, response
from serverkit import EXAMPLE, INDEX, OOM, Receiver, multirank, serve

PAYLOAD = {"text": "New crash", "signature": "3d8c070f95f9"}
OK = canned(response(200, b"ok"))


def deliver(url: str, timeout: float = 5.0) -> tuple[bool, list[float]]:
    from kbdebug.server import webhook

    pauses: list[float] = []
    return webhook.deliver(url, PAYLOAD, timeout=timeout, sleep=pauses.append), pauses


def test_a_5xx_is_retried_with_backoff_and_then_delivered() -> None:
    with peer([canned(response(500)), canned(response(503)), OK]) as (url, seen):
        delivered, pauses = deliver(url + "/hook")
    assert delivered and seen.count == 3 and pauses == [1.0, 4.0]
    assert [json.loads(b) for b in seen.bodies] == [PAYLOAD] * 3
    assert {h["content-type"] for h in seen.heads} == {"application/json"}


@pytest.mark.parametrize(
    "answer, attempts",
    [(canned(response(502)), 3), (canned(response(404)), 1), (canned(response(400)), 1)],
    ids=["5xx: three tries", "404: one", "400: one"],
)
def test_a_receiver_that_refuses_is_retried_only_when_it_may_recover(answer: Answer, attempts: int) -> None:
    with peer(answer) as (url, seen):
        delivered, pauses = deliver(url + "/hook")
    assert not delivered and seen.count == attempts and len(pauses) == attempts - 1


def test_a_connection_refused_is_retried_a_bounded_number_of_times() -> None:
    with peer(OK) as (url, _):
        pass  # closed: nothing listens there now
    delivered, pauses = deliver(url + "/hook")
    assert not delivered and pauses == [1.0, 4.0]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failure_and_not_followed(status: int) -> None:
    with peer(OK) as (internal, reached), peer(canned(response(status, b"", {"Location": internal + "/admin"}))) as (url, seen):
        delivered, pauses = deliver(url + "/hook")
    assert not delivered and seen.count == 1 and pauses == []
    assert reached.count == 0


def test_a_receiver_dribbling_a_byte_every_1_5_s_is_cut_off_at_each_attempts_deadline() -> None:
    with peer(dribble(1.5)) as (url, seen):
        delivered, pauses = deliver(url + "/hook", timeout=2.0)
    assert not delivered and seen.count == 3 and pauses == [1.0, 4.0]  # three attempts ended: none ran 40 bytes long


def test_the_log_names_the_host_never_the_secret_url(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kbdebug.server")
    with peer(canned(response(500))) as (url, _):
        deliver(url + "/services/T000/B000/s3cretKEY?token=abc")
    text = caplog.text
    assert "s3cretKEY" not in text and "token=abc" not in text and "/services" not in text
    host = url.removeprefix("http://")
    assert f"webhook to {host} failed for 3d8c070f95f9 (attempt 3 of 3): HTTP 500" in text


def test_send_returns_before_the_receiver_answers() -> None:
    from kbdebug.server import webhook

    release = threading.Event()

    def held(conn, _seen) -> None:  # type: ignore[no-untyped-def]
        release.wait(20)
        conn.sendall(response(200))

    with peer(held) as (url, seen):
        try:
            assert webhook.send(url + "/hook", PAYLOAD) is True
            assert not release.is_set()  # send came back while the receiver still holds the request
        finally:
            release.set()
            webhook.outbox.join()
    assert seen.count == 1


def test_message_for_a_regression_says_so() -> None:
    from kbdebug.server import webhook

    group = {
        "title": "advanced-indexing index out of bounds",
        "rule": "index_out_of_bounds",
        "retry": "no",
        "signature": "3d8c070f95f9",
        "first_seen": "2026-01-01T00:00:00+00:00",
        "example": {"job": "nightly-7", "host": "node12", "rank": 3, "report": 17},
    }
    link = webhook.link("https://crashes.example/", group["signature"])
    again = webhook.message(group, link, event="regressed")
    assert again["event"] == "regressed" and again["url"] == "https://crashes.example/crashes/3d8c070f95f9"
    assert again["text"].startswith("Regressed (was resolved): advanced-indexing index out of bounds")
    assert webhook.message(group, webhook.link("", group["signature"]))["url"] == ""


def health(url: str) -> dict:
    with urllib.request.urlopen(url + "/v1/health", timeout=10) as resp:  # a wedged service fails here
        return json.loads(resp.read())


def post(url: str, log: bytes, host: str | None = None) -> int:
    headers = {"Content-Type": "text/plain", "X-Kbdebug-Client": "kbdebug/test", **({"Host": host} if host else {})}
    req = urllib.request.Request(url + "/v1/diagnose", data=log, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.status


def test_a_dribbling_receiver_never_holds_up_posts_or_health(tmp_path: Path) -> None:
    logs = [INDEX, OOM, EXAMPLE, multirank()]
    with peer(dribble(1.5)) as (hook, seen), serve(f"sqlite:///{tmp_path / 'c.db'}", "--webhook", hook + "/hook") as server:
        for i, log in enumerate(logs, 1):
            assert post(server.url, log) == 201
            assert health(server.url)["reports"] == i
        assert seen.count >= 1  # deliveries are under way, behind the service's back


def test_without_public_url_the_link_is_the_served_address_not_the_posters_host(tmp_path: Path) -> None:
    hook = Receiver()
    try:
        with serve(f"sqlite:///{tmp_path / 'c.db'}", "--webhook", hook.url + "/hook") as server:
            assert post(server.url, INDEX, host="localhost") == 201  # another name the service answers to
            for _ in range(100):
                if hook.bodies:
                    break
                threading.Event().wait(0.1)
        (message,) = [json.loads(b) for b in hook.bodies]
    finally:
        hook.close()
    assert message["url"] == f"{server.url}/crashes/{message['signature']}"
    assert "localhost" not in message["url"] and "localhost" not in message["text"]
