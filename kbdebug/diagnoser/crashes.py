"""Many diagnoses seen together: the distinct crashes among them (by the root incident's signature), and
which input failed first. Presentation (the summary table) is kbdebug.render.summary's."""

from __future__ import annotations

from dataclasses import dataclass, field

from kbdebug.diagnoser.match import earlier
from kbdebug.diagnosis import Diagnosis, FirstFailure


@dataclass
class Group:
    signature: str
    signature_key: str
    rule: str
    title: str
    first_guide_line: str
    members: list[str] = field(default_factory=list)


def group(diags: list[Diagnosis]) -> tuple[list[Group], list[str]]:
    """Crash groups by the root incident's signature, and the logs in which nothing was recognised."""
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
            g = groups[root.signature] = Group(root.signature, root.signature_key, root.rule, root.title, what.split(". ")[0][:160])
        g.members.append(diag.source)
    return sorted(groups.values(), key=lambda g: (-len(g.members), g.rule)), nothing


def first_failure(diags: list[Diagnosis]) -> FirstFailure | None:
    """The earliest stamped failure over all the inputs (one file per rank of a job: the rank that broke first)."""
    first: FirstFailure | None = None
    for diag in diags:
        root = diag.root
        if root is not None and root.first_failure is not None:
            mine = root.first_failure.model_copy(update={"source": diag.source})
            first = mine if first is None else earlier(first, mine)
    return first
