"""Timestamps as logs print them, read into one comparable form: which rank failed first, and when.

Launchers and logging handlers stamp lines in their own styles: ISO 8601 (`2024-05-01T12:03:11.123Z`,
Python logging's `2024-05-01 12:03:11,123`, bracketed or not; torchrun's failure table's
`2025-03-01_10:00:00`), glog and c10 (`I0501 12:03:11.123456`, `[E424 01:17:25.031978332
ProcessGroupNCCL.cpp:1895]`, month not zero-padded), journald (`Oct 04 15:02:41`) and vLLM
(`03-19 07:27:53`). Only ISO prints a year: a stamp keeps whether it had one, and two stamps
compare on month, day and time when either lacks it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from kbdebug import _regex_cache

_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
_TIME = r"(?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)(?:[.,](?P<f>\d+))?"
_STYLES = (
    _regex_cache.compile(rf"^(?P<y>\d{{4}})-(?P<m>\d\d)-(?P<d>\d\d)[T _]{_TIME}\s*(?P<tz>Z|[+-]\d\d:?\d\d)?"),
    _regex_cache.compile(rf"^[IWEF](?P<m>\d{{1,2}})(?P<d>\d\d) {_TIME}"),  # glog / c10: severity, month, day
    _regex_cache.compile(rf"^(?P<mon>[A-Z][a-z]{{2}}) +(?P<d>\d{{1,2}}) {_TIME}"),  # syslog / journald
    _regex_cache.compile(rf"^(?P<m>\d\d)-(?P<d>\d\d) {_TIME}"),  # vLLM
)
_INNER = _regex_cache.compile(r"^\[(?P<t>[IWEF]\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?) ")


@dataclass(frozen=True)
class Stamp:
    """A line's time: `text` as printed and `at` in ISO 8601 (UTC when an offset was printed; `--MM-DDT...`,
    ISO's form without a year, when none was)."""

    text: str
    at: str

    @property
    def has_year(self) -> bool:
        return not self.at.startswith("--")

    def key(self, with_year: bool = True) -> str:
        """Sortable text; without the year when some stamp compared with this one printed none."""
        return self.at if with_year and self.has_year else self.at[-len("MM-DDTHH:MM:SS.ffffff") :]


def parse_stamp(text: str) -> Stamp | None:
    """The stamp a prefix printed, or None when its fields are not a date (month 13, hour 25)."""
    text = text.strip().strip("[]")
    for style in _STYLES:
        m = style.match(text)
        if m is None:
            continue
        g = m.groupdict()
        month = _MONTHS.get(g["mon"]) if g.get("mon") else int(g["m"])
        frac = int(((g["f"] or "") + "000000")[:6])
        try:
            when = datetime(int(g.get("y") or 2000), month or 0, int(g["d"]), int(g["H"]), int(g["M"]), int(g["S"]), frac)
        except ValueError:
            return None
        if g.get("tz"):
            sign = 1 if g["tz"][0] == "+" else -1
            digits = g["tz"].replace(":", "")[1:]
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:])) * sign if g["tz"] != "Z" else timedelta(0)
            when = when.replace(tzinfo=timezone(offset)).astimezone(timezone.utc).replace(tzinfo=None)
        iso = when.isoformat(timespec="microseconds")
        shown = m.group(0).strip().lstrip("IWEF")  # glog's severity letter is not part of the time
        return Stamp(shown, iso if g.get("y") else "--" + iso[5:])
    return None


def inner_stamp(text: str) -> Stamp | None:
    """The time c10's logging prints inside its bracket (`[E1004 15:02:41.906416000 ProcessGroupNCCL.cpp:616]`)."""
    m = _INNER.match(text)
    return parse_stamp(m.group("t")) if m else None


def earliest(stamps: Iterable[Stamp]) -> Stamp | None:
    """The first of the stamps; compared without the year when any of them lacks one."""
    found = list(stamps)
    if not found:
        return None
    with_year = all(s.has_year for s in found)
    return min(found, key=lambda s: s.key(with_year))
