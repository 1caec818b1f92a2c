"""The sentences a report says beside the guides: what rerunning does, a folded consequence's one line, the
guide as one text. Their words are the templates in kbdebug/render/templates/words.j2 (one home, every format);
the diagnosis they describe is plain data (kbdebug.diagnosis)."""

from __future__ import annotations

from typing import Any

from kbdebug.diagnosis import Consequence, Incident
from kbdebug.kb.layout import GUIDE_SECTIONS as SECTIONS
from kbdebug.render.environment import _env


def _words() -> Any:
    return _env().get_template("words.j2").module


def retry_line(retry: str | None) -> str:
    """What rerunning does, said once at the top of every guide ("" without a known answer)."""
    return str(_words().retry_line(retry)).strip() if retry else ""


def rank_list(ranks: list[int]) -> str:
    """`[0, 1, 2, 4, 5, 6, 7]` -> `0-2,4-7`."""
    out: list[str] = []
    start = prev = None
    for r in [*ranks, None]:
        if r is not None and prev is not None and r == prev + 1:
            prev = r
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = r
    return ",".join(out)


def consequence_summary(c: Consequence) -> str:
    """A folded incident in one line, prefixed by the ranks it was read on: `ranks 0-2,4-7: NCCL watchdog timeout`."""
    return str(_words().consequence(c.facts, c.title, rank_list(c.ranks), len(c.ranks))).strip()


def fix_text(inc: Incident) -> str:
    """The retry line, then the four guide sections as `Title: text` paragraphs: the guide as one text."""
    head = [retry_line(inc.retry)] if inc.retry else []
    return "\n\n".join([*head, *(f"{title}: {inc.guide.get(key, '')}" for key, title in SECTIONS)])


def incident_json(inc: Incident) -> dict[str, Any]:
    """An incident as docs/json.md says it: its data, the guide as one text, each consequence's summary."""
    data = inc.model_dump(mode="json", exclude={"first_line", "device_evidence", "references"})
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "retry":  # the guide as one text comes before it (the contract's order)
            out["fix"] = fix_text(inc)
        out[key] = value
    out["consequences"] = []
    for c in inc.consequences:
        data = c.model_dump(mode="json")
        ranks, facts = data.pop("ranks"), data.pop("facts")  # the contract's order: the summary comes before them
        out["consequences"].append({**data, "summary": consequence_summary(c), "ranks": ranks, "facts": facts})
    return out
