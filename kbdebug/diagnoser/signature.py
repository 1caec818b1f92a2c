"""Crash signatures: which failures are the same crash.

Like Sentry's grouping, a signature is built only from what identifies a crash and never from what
varies between runs, ranks or pastes of it:

- the rule (the cause);
- the site: the kernel file and assertion of a device assert; the check, kernel and access of a
  sanitizer report; otherwise the exception type and its message with every number, address, path,
  timestamp and quoted name masked (so `index 26 ... size 23` and `index 31 ... size 19` group);
- the user's frame as file name and function: never a line number, a directory, a rank or a pid.

`signature_key` is that text, readable; `signature` its first 12 hex digits of SHA-1. Two incidents
with the same signature are the same crash as far as the log can tell.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from kbdebug.diagnosis import Diagnosis
from kbdebug.frames import basename

_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?\S*"), "<time>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<addr>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:[\w.~-]*[\\/])+([\w.-]+)"), r"\1"),  # a path: its file name
    (re.compile(r"'[^']{1,80}'|\"[^\"]{1,80}\""), "<name>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
)


# Only the head of a message identifies it: a paste wrapped or cut further on still groups with the original.
MESSAGE_CHARS = 56


def normalise_message(message: str) -> str:
    """The message with whatever differs between two runs of the same crash masked."""
    # masks only shorten what they match, so a bounded head is enough: a megabyte message (a tensor printed
    # whole) is never searched whole (the path mask backtracks over a long run of word characters)
    text = message.strip()[: MESSAGE_CHARS * 64]
    for rx, repl in _MASKS:
        text = rx.sub(repl, text)
    return text[:MESSAGE_CHARS].strip()


def _user_frame(facts: dict[str, Any]) -> str:
    frame = str(facts.get("innermost_user_frame") or "")
    if not frame:
        return ""
    file = basename(frame.rsplit(":", 1)[0]) if re.search(r":\d+$", frame) else basename(frame)
    function = facts.get("user_function") or ""
    return f"{file}:{function}" if function else file


def _site(facts: dict[str, Any]) -> str:
    if facts.get("assertion") is not None and facts.get("kernel_file"):
        return f"{facts['kernel_file']} `{' '.join(str(facts['assertion']).split())}`"
    if facts.get("check") and facts.get("tool"):
        parts = [
            str(facts["check"]),
            str(facts.get("kernel_name") or ""),
            str(facts.get("memory_space") or ""),
            str(facts.get("access") or ""),
            str(facts.get("category") or ""),
        ]
        return " ".join(p for p in parts if p)
    etype = str(facts.get("error_type") or "")
    if etype:
        return f"{etype}: {normalise_message(str(facts.get('error_message') or ''))}"
    # no exception type: the CUDA error, collective event or job-level event (an OOM kill, an Xid, a time
    # limit; else the signal the process died of) names it before any message read without a type
    message = (
        facts.get("cuda_error")
        or facts.get("nccl_event")
        or facts.get("error_message")
        or " ".join(str(facts[k]) for k in ("job_event", "xid", "reason") if facts.get(k) is not None)
        or facts.get("signal")
        or ""
    )
    return normalise_message(str(message))


def signature_key(rule: str, facts: dict[str, Any]) -> str:
    parts = [rule, _site(facts)]
    frame = _user_frame(facts)
    if frame:
        parts.append(f"at {frame}")
    return " | ".join(parts)


def signature(key: str) -> str:
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:12]


def sign(diag: Diagnosis) -> Diagnosis:
    """Give every incident its signature, once its facts are final."""
    for inc in diag.incidents:
        inc.signature_key = signature_key(inc.rule, inc.facts)
        inc.signature = signature(inc.signature_key)
    return diag
