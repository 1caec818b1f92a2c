"""The compact rendering: one or two lines per incident, for places that show many failures at once
(the pytest plugin, an excepthook inside a loop); the full guide is `render(..., "text")`."""

from __future__ import annotations

import re

from kbdebug.diagnosis import Diagnosis
from kbdebug.render import markup

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`])")


def compact(diags: list[Diagnosis], hint: str = "") -> str:
    """`kbdebug: RULE at USER_LINE: first sentence of What` (the wrong value is in it; USER_LINE only when
    that sentence does not already name it), then the title.

    The rule's own filled `what` names the wrong value, so the compact line needs no per-rule key list.
    """
    lines = []
    for diag in diags:
        for inc in diag.incidents:
            where = inc.facts.get("innermost_user_frame") or inc.facts.get("raised_at") or diag.source
            what = " ".join((inc.guide.get("what") or inc.title).split())
            first = " ".join(markup.to_plain(_SENTENCE_END.split(what, 1)[0]).split())  # a terminal: no Markdown
            # the location once: where the first sentence already says it, the head does not repeat it
            head = f"kbdebug: {inc.rule}: " if str(where) in first or where == "-" else f"kbdebug: {inc.rule} at {where}: "
            lines.append(head + first)
            lines.append(f"  {inc.title}{hint}")
    return "\n".join(lines) + ("\n" if lines else "")
