"""The message sent when a root signature is seen for the first time (or again after it was resolved): a
JSON POST that Slack's and Mattermost's incoming webhooks accept (`text`), with the structured fields beside
it for other receivers.

Delivery never holds up the service: `send` puts the notice on a bounded queue that one background thread
empties, so a receiver that is down, slow or dribbling a byte at a time costs neither a request nor
`/v1/health` anything. Each attempt has one deadline for the whole exchange (kbdebug.runtime.reporting.request:
connecting, sending, the answer's headers and body), a redirect is a failure (it is not followed: the
notice would go where the receiver says), a 5xx or a connection failure is retried a bounded number of
times with backoff, and the log names the receiver's host only: the URL itself is a secret (Slack's holds
its key in the path).
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import queue
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from kbdebug.runtime.reporting import CLIENT, AnswerTooLarge, http_url_problem, request

TIMEOUT = 5.0  # one attempt, whole exchange
BACKOFF = (1.0, 4.0)  # seconds before the 2nd and 3rd attempts
QUEUE_LIMIT = 200  # notices waiting beyond this are dropped (and logged): memory stays bounded
log = logging.getLogger("kbdebug.server")


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a webhook (None when it can): only http:// and https:// with a host are posted to."""
    return http_url_problem(url)


def receiver(url: str) -> str:
    """What the log may say of a webhook URL: its host and port, never its path or query (the secret)."""
    try:
        parts = urllib.parse.urlsplit(url)
        return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else "the webhook"
    except ValueError:
        return "the webhook"


def link(public_url: str, signature: str) -> str:
    """The crash's page under the configured public URL; "" without one (never the poster's Host header)."""
    return f"{public_url.rstrip('/')}/crashes/{signature}" if public_url else ""


def _chat(value: Any) -> str:
    """Slack's and Mattermost's markup reads `<...>` as links and mentions: a log's value is shown, never read."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_HEADLINE = {"new_signature": "New crash", "regressed": "Regressed (was resolved)"}


def message(group: dict[str, Any], link: str, event: str = "new_signature") -> dict[str, Any]:
    """The notice for `group` (store.group_summary's); `event` is `new_signature` or `regressed`."""
    where = ", ".join(x for x in (f"job {group['example']['job']}" if group["example"]["job"] else "", group["example"]["host"]) if x)
    text = (
        f"{_HEADLINE.get(event, 'Crash')}: {_chat(group['title'])} (`{_chat(group['rule'])}`, retry: {_chat(group['retry'] or 'unknown')})"
    )
    text += f" in {_chat(where)}" if where else ""
    text += f"\n{link}" if link else ""
    return {
        "text": text,
        "event": event,
        "signature": group["signature"],
        "rule": group["rule"],
        "title": group["title"],
        "retry": group["retry"],
        "first_seen": group["first_seen"],
        "job": group["example"]["job"],
        "host": group["example"]["host"],
        "rank": group["example"]["rank"],
        "report": group["example"]["report"],
        "url": link,
    }


def _attempt(url: str, body: bytes, timeout: float) -> tuple[bool, str, bool]:
    """One POST: (delivered, why not, worth retrying)."""
    headers = {"Content-Type": "application/json", "User-Agent": CLIENT}
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        answer = request(req, time.monotonic() + timeout, limit=1 << 16)
    except TimeoutError:
        return False, f"no answer within {timeout:g} s", True
    except AnswerTooLarge:
        return True, "", False  # it took the notice; what it says back is not read
    except urllib.error.URLError as exc:
        return False, str(exc.reason), True
    except (OSError, ValueError, http.client.HTTPException) as exc:  # reset, refused, a garbled answer
        return False, str(exc) or type(exc).__name__, True
    if 200 <= answer.status < 300:
        return True, "", False
    if 300 <= answer.status < 400:
        return False, f"HTTP {answer.status}: a redirect (not followed: give --webhook the final address)", False
    return False, f"HTTP {answer.status}", answer.status >= 500 or answer.status == 429


def deliver(url: str, payload: dict[str, Any], timeout: float = TIMEOUT, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Post `payload` now, retrying a 5xx, a 429 or a connection failure after each BACKOFF; True when the
    receiver took it. Never raises; failures are logged with the receiver's host only."""
    body = json.dumps(payload).encode()
    what = payload.get("signature", "")
    for attempt, pause in enumerate((*BACKOFF, None), 1):
        delivered, why, again = _attempt(url, body, timeout)
        if delivered:
            return True
        log.warning("kbdebug: webhook to %s failed for %s (attempt %d of %d): %s", receiver(url), what, attempt, len(BACKOFF) + 1, why)
        if not again or pause is None:
            break
        sleep(pause)
    log.warning("kbdebug: the notice for %s was not delivered to %s", what, receiver(url))
    return False


class _Outbox:
    """The queue of notices and the one thread that delivers them (started on first use, in each process)."""

    def __init__(self) -> None:
        self.queue: queue.Queue[tuple[str, dict[str, Any], float]] = queue.Queue(QUEUE_LIMIT)
        self.thread: threading.Thread | None = None
        self.pid = 0
        self.lock = threading.Lock()

    def put(self, url: str, payload: dict[str, Any], timeout: float) -> bool:
        with self.lock:
            if self.thread is None or not self.thread.is_alive() or self.pid != os.getpid():
                self.queue = queue.Queue(QUEUE_LIMIT) if self.pid != os.getpid() else self.queue
                self.pid = os.getpid()
                self.thread = threading.Thread(target=self.run, name="kbdebug-webhook", daemon=True)
                self.thread.start()
        try:
            self.queue.put_nowait((url, payload, timeout))
            return True
        except queue.Full:
            log.warning(
                "kbdebug: %d webhook notices wait for %s already: the one for %s is dropped",
                QUEUE_LIMIT,
                receiver(url),
                payload.get("signature", ""),
            )
            return False

    def run(self) -> None:
        while True:
            url, payload, timeout = self.queue.get()
            try:
                deliver(url, payload, timeout)
            except Exception:  # deliver never raises; the thread must outlive anything
                log.exception("kbdebug: webhook delivery")
            finally:
                self.queue.task_done()

    def join(self) -> None:
        self.queue.join()


outbox = _Outbox()


def send(url: str, payload: dict[str, Any], timeout: float = TIMEOUT) -> bool:
    """Queue `payload` for `url` and return at once (True when queued): the background thread delivers it
    (see deliver). This is what the service calls on a new or regressed group."""
    return outbox.put(url, payload, timeout)
