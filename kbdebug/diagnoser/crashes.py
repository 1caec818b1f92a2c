"""Many diagnoses seen together: the distinct crashes among them (by the root incident's signature), and
which input failed first. Presentation (the summary table) is kbdebug.render.summary's."""

from __future__ import annotations

from dataclasses import dataclass, field

from kbdebug.diagnoser.match import earlier
from kbdebug.diagnosis import Diagnosis, FirstFailure
from kbdebug.kb.loader import KnowledgeBase


@dataclass
class Group:
    signature: str
    signature_key: str
    rule: str
    title: str
    first_guide_line: str
    members: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # logs of other ranks whose collective waited on this crash


def group(diags: list[Diagnosis], kb: KnowledgeBase | None = None) -> tuple[list[Group], list[str]]:
    """Crash groups by the root incident's signature, and the logs in which nothing was recognised.

    One file per rank of a job: a rank whose root is a collective (an NCCL timeout, tagged `collective`)
    waited on another rank's failure, so when the inputs hold exactly one other distinct crash, its log is
    folded under that crash, as the matcher folds it within one log. With several other crashes the
    inputs are not one run (or the culprit is not known), and every group stays as it is."""
    groups: dict[str, Group] = {}
    nothing: list[str] = []
    for diag in diags:
        root = diag.root
        if root is None:
            nothing.append(diag.source)
            continue
        g = groups.get(root.signature)
        if g is None:
            what = " ".join((root.guide.get("what") or root.title).split())
            g = groups[root.signature] = Group(root.signature, root.signature_key, root.rule, root.title, _first_sentence(what))
        g.members.append(diag.source)
    if kb is not None:
        waiting = [g for g in groups.values() if kb.tagged(g.rule, "collective")]
        causes = [g for g in groups.values() if g not in waiting and not kb.tagged(g.rule, "fallback")]
        if waiting and len(causes) == 1:
            for g in waiting:
                causes[0].waiting += g.members
                del groups[g.signature]
    return sorted(groups.values(), key=lambda g: (-len(g.members), g.rule)), nothing


def _first_sentence(what: str) -> str:
    """The guide's first sentence, whole (a cut inside a `code span` would break the Markdown around it)."""
    first = what.split(". ")[0]
    return first if len(first) <= 240 else what[:240].rsplit(" ", 1)[0] + " …"


def first_failure(diags: list[Diagnosis]) -> FirstFailure | None:
    """The earliest stamped failure over all the inputs (one file per rank of a job: the rank that broke first)."""
    first: FirstFailure | None = None
    for diag in diags:
        root = diag.root
        if root is not None and root.first_failure is not None:
            mine = root.first_failure.model_copy(update={"source": diag.source})
            first = mine if first is None else earlier(first, mine)
    return first
