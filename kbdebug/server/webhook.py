"""The message sent when a root signature is seen for the first time: a JSON POST that Slack's and
Mattermost's incoming webhooks accept (`text`), with the structured fields beside it for other receivers.
Best effort: a short timeout, run after the response has gone (a background task), failures only logged."""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

TIMEOUT = 2.0
log = logging.getLogger("kbdebug.server")


def _chat(value: Any) -> str:
    """Slack's and Mattermost's markup reads `<...>` as links and mentions: a log's value is shown, never read."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def message(group: dict[str, Any], link: str) -> dict[str, Any]:
    where = ", ".join(x for x in (f"job {group['example']['job']}" if group["example"]["job"] else "", group["example"]["host"]) if x)
    text = f"New crash: {_chat(group['title'])} (`{_chat(group['rule'])}`, retry: {_chat(group['retry'] or 'unknown')})"
    text += f" in {_chat(where)}" if where else ""
    text += f"\n{link}" if link else ""
    return {
        "text": text,
        "event": "new_signature",
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


def send(url: str, payload: dict[str, Any], timeout: float = TIMEOUT) -> bool:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read(1024)
        return True
    except Exception as exc:  # best effort: a chat server that is down never fails a post
        log.warning("kbdebug: webhook %s failed: %s", url, exc)
        return False
