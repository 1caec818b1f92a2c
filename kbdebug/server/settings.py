"""What one running service is told: its database, token, limits and neighbours. `kbdebug serve` passes
them to its workers through the environment (uvicorn builds each worker's app from an import string)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta

DEFAULT_MAX_UPLOAD = 16 << 20
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]", "::1")

_DURATION = re.compile(r"^\s*(\d{1,30})\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
LONGEST = timedelta(days=365 * 200)  # no duration reaches further back than this: the clock's range ends before


def parse_duration(value: str) -> timedelta | None:
    """`30m`, `24h`, `90d`, `2w` as a timedelta (at most 200 years); None when `value` is not one."""
    m = _DURATION.match(value)
    if m is None:
        return None
    return min(timedelta(**{_UNITS[m.group(2)]: min(int(m.group(1)), 10**6)}), LONGEST)  # 10**6 weeks is in range


@dataclass(frozen=True)
class Settings:
    db: str = ""
    token: str = ""  # when set, every request but /v1/health and /docs must carry it
    max_upload: int = DEFAULT_MAX_UPLOAD
    webhook: str = ""
    public_url: str = ""  # how links in webhook messages start; its host is also an allowed Host header
    allowed_hosts: tuple[str, ...] = ()  # Host headers served besides loopback names and public_url's host
    keep: str = ""  # retention: reports older than this duration (`90d`) are deleted; "" keeps everything
    diagnose_timeout: float = 10.0  # seconds one log may take to diagnose before it is refused
    diagnose_workers: int = 0  # worker processes that diagnose (0: one per CPU, at most 4)
    diagnose_queue: float = 30.0  # seconds a post waits for a free diagnosis worker before it is told to retry
    db_timeout: float = 5.0  # PostgreSQL connect and statement timeouts, seconds

    @classmethod
    def from_env(cls) -> Settings:
        """The settings `kbdebug serve` hands its workers: KBDEBUG_SERVE_* variables (docs/server.md)."""
        env = os.environ
        return cls(
            db=env.get("KBDEBUG_SERVE_DB", ""),
            token=env.get("KBDEBUG_SERVE_TOKEN", ""),
            max_upload=int(env.get("KBDEBUG_SERVE_MAX_UPLOAD") or DEFAULT_MAX_UPLOAD),
            webhook=env.get("KBDEBUG_SERVE_WEBHOOK", ""),
            public_url=env.get("KBDEBUG_SERVE_URL", ""),
            allowed_hosts=tuple(h for h in env.get("KBDEBUG_SERVE_ALLOWED_HOSTS", "").replace(",", " ").split() if h),
            keep=env.get("KBDEBUG_SERVE_KEEP", ""),
            diagnose_timeout=float(env.get("KBDEBUG_SERVE_DIAGNOSE_TIMEOUT") or 10.0),
            diagnose_workers=int(env.get("KBDEBUG_SERVE_DIAGNOSE_WORKERS") or 0),
            db_timeout=float(env.get("KBDEBUG_SERVE_DB_TIMEOUT") or 5.0),
        )

    def retention(self) -> timedelta | None:
        """How long a report is kept (None: for ever)."""
        if not self.keep:
            return None
        kept = parse_duration(self.keep)
        if kept is None:
            raise ValueError(f"keep={self.keep!r}: give a duration such as 90d, 12w or 48h")
        return kept

    def hosts(self) -> frozenset[str]:
        """The Host header names this service answers to (without port): a page elsewhere that rebinds its
        own name to 127.0.0.1 (DNS rebinding) is refused."""
        from urllib.parse import urlsplit

        names = {*LOOPBACK_NAMES, *(h.lower() for h in self.allowed_hosts)}
        if self.public_url:
            names.add((urlsplit(self.public_url).hostname or "").lower())
        return frozenset(n for n in names if n)
