"""Crash signatures: which failures are the same crash.

Like Sentry's grouping, a signature is built only from what identifies a crash and never from what
varies between runs, ranks or pastes of it:

- the rule (the cause);
- the site: the kernel file and assertion of a device assert; the check, kernel and access of a
  sanitizer report; otherwise the exception type and its message with every number, address, path,
  timestamp and quoted name masked (so `index 26 ... size 23` and `index 31 ... size 19` group);
- the user's frame as file name and function: never a line number, a directory, a rank or a pid.

A rule may say what makes two of its crashes the same (`signature = ["fact", ...]` in its rule.toml): its
site is then those facts' values, masked the same way.

`signature_key` is that text, readable; `signature` its first 12 hex digits of SHA-1. Two incidents
with the same signature are the same crash as far as the log can tell. `SIGNATURE_VERSION` says how they are
built: a crash service stores it with every signature and regroups what it holds when it changes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import cast

from kbdebug import _regex_cache
from kbdebug.core.facts import Facts
from kbdebug.core.frames import basename
from kbdebug.diagnosis import Incident
from kbdebug.kb.model import Rule

_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (_regex_cache.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?\S*"), "<time>"),
    (_regex_cache.compile(r"\b0x[0-9a-fA-F]+\b"), "<addr>"),
    (_regex_cache.compile(r"(?:[A-Za-z]:)?(?:[\w.~-]*[\\/])+([\w.-]+)"), r"\1"),  # a path: its file name
    (_regex_cache.compile(r"'[^']{1,80}'|\"[^\"]{1,80}\""), "<name>"),
    (_regex_cache.compile(r"\d+(?:\.\d+)?"), "<n>"),
    (_regex_cache.compile(r"\s+"), " "),
)


# Only the head of a message identifies it: a paste wrapped or cut further on still groups with the original.
MESSAGE_CHARS = 56

# Raised whenever what a signature is built from changes: the crash service stores it with every report
# and regroups the reports signed by another version when it starts (kbdebug/server/db.py), never silently.
SIGNATURE_VERSION = 1


def normalise_message(message: str) -> str:
    """The message with whatever differs between two runs of the same crash masked."""
    # masks only shorten what they match, so a bounded head is enough: a megabyte message (a tensor printed
    # whole) is never searched whole (the path mask backtracks over a long run of word characters)
    text = message.strip()[: MESSAGE_CHARS * 64]
    for rx, repl in _MASKS:
        text = rx.sub(repl, text)
    return text[:MESSAGE_CHARS].strip()


def _user_frame(facts: Facts) -> str:
    frame = str(facts.get("innermost_user_frame") or "")
    if not frame:
        return ""
    if frame.startswith("Cell In["):  # a notebook cell: its number, not the line within it
        file = frame.split(",", 1)[0]
    else:
        file = basename(frame.rsplit(":", 1)[0]) if re.search(r":\d+$", frame) else basename(frame)
    function = facts.get("user_function") or ""
    return f"{file}:{function}" if function else file


def _site(facts: Facts) -> str:
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


def signature_key(rule: str, facts: Facts, site: Sequence[str] = ()) -> str:
    """`rule | site | at file:function`; `site`, the facts a rule declares its site is built from."""
    said = " ".join(normalise_message(str(v)) for name in site if (v := cast(Mapping[str, object], facts).get(name)) is not None)
    parts = [rule, said or _site(facts)]
    frame = _user_frame(facts)
    if frame:
        parts.append(f"at {frame}")
    return " | ".join(parts)


def signature(key: str) -> str:
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:12]


def signed(inc: Incident, rule: Rule | None = None) -> Incident:
    """The incident with its signature, once its facts are final (its rule may say what its site is)."""
    key = signature_key(inc.rule, inc.facts, rule.signature if rule is not None else ())
    return inc.model_copy(update={"signature_key": key, "signature": signature(key)})
