"""The fixed text inside a regex: what the message anchors of a grammar and a rule's indicator phrases
are found by. A leaf module: the grammars (kbdebug.parse) and the rules (kbdebug.kb) both use it."""

from __future__ import annotations


def split_alternatives(regex: str) -> list[str]:
    """The top-level alternatives of a regex (`a(?:b|c)|d` -> `a(?:b|c)`, `d`)."""
    alts, depth, cur, i = [], 0, "", 0
    while i < len(regex):
        ch = regex[i]
        if ch == "\\" and i + 1 < len(regex):
            cur += regex[i : i + 2]
            i += 2
            continue
        depth += 1 if ch in "([" else (-1 if ch in ")]" else 0)
        if ch == "|" and depth == 0:
            alts.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    return [*alts, cur]


def canonical_text(regex: str) -> str:
    """The plain text a phrase regex reads as when each group takes its first alternative
    (`Class values must be (?:smaller than num_classes|non-negative)` -> `Class values must be smaller
    than num_classes`), up to the first part that is not fixed text. Used to recognise a phrase that
    a cut-off message ends in the middle of."""
    out, i = "", 0
    while i < len(regex):
        ch = regex[i]
        if ch == "\\":
            if i + 1 < len(regex) and not regex[i + 1].isalnum():
                out += regex[i + 1]
                i += 2
                continue
            break
        if ch == "|":
            break
        if ch == "(":
            depth, j = 0, i
            while j < len(regex):
                if regex[j] == "\\":
                    j += 2
                    continue
                depth += {"(": 1, ")": -1}.get(regex[j], 0)
                if depth == 0:
                    break
                j += 1
            inner = regex[i + 1 : j]
            inner = inner[2:] if inner.startswith("?:") else inner
            if inner.startswith("?"):
                break
            part = canonical_text(inner)
            out += part
            if j + 1 < len(regex) and regex[j + 1] in "?*":  # an optional group: the text reads on without it
                out = out[: len(out) - len(part)]
            i = j + 1
            if i < len(regex) and regex[i] in "?*+":
                i += 1
            continue
        if ch in "[.^$":
            break
        if ch in "?*" and out:
            out = out[:-1]
            i += 1
            continue
        if ch in "+{":
            break
        out += ch
        i += 1
    return out
