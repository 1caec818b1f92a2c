"""The byte strings a scanner searches a large log for, derived from the grammars.

A log of gigabytes cannot be parsed line by line; the scanner searches it for short byte strings and
reads the lines around each hit. Which strings is the grammars' knowledge, not a list kept beside
them: each grammar says which of its line kinds open a record (`// scan for: ...`; a frame or a
table field is read in the context of the line that opens it), every line of such a kind holds one of
the texts `required_texts` reads off the grammar, and a small set of short substrings that covers all
those texts is chosen here. A new grammar or template brings its needles with it.
"""

from __future__ import annotations

import hashlib
from functools import cache

from kbdebug._cache import cached, code_version
from kbdebug.parse.derive import required_texts
from kbdebug.parse.grammar import COMMON, directive, files, names, source

MIN_NEEDLE = 4  # a text shorter than this cannot be searched for: it is everywhere
NEEDLE = 6  # needles are this long (or a whole shorter text): `tion` would hit every other English line


def openers(name: str) -> list[str]:
    """The line kinds of grammar `name` that open a record: `// scan for: a b` (`*` for all, `none`)."""
    kinds = required_texts(name)
    words = directive(source(name), "scan for") or ["*"]
    if words == ["*"]:
        return sorted(kinds)
    return [] if words == ["none"] else [w for w in words if w in kinds]


@cache
def needles() -> tuple[bytes, ...]:
    """A small set of byte strings such that every opening line of every grammar holds one; derived once
    per set of grammars and kept in the cache, so a cold start that needs no parser does not build them."""
    sources = "".join(f"{name}|{source(name)}" for name in (*names(), COMMON))
    key = hashlib.sha256(f"{sources}|{code_version()}".encode()).hexdigest()[:20]  # the grammars and the code that reads them
    return cached("needles", key, tuple, _derive)


def _derive() -> tuple[bytes, ...]:
    texts: set[bytes] = set()
    for name in names():
        for kind in openers(name):
            found = required_texts(name)[kind]
            if found is None or min(len(t) for t in found) < MIN_NEEDLE:
                raise ValueError(f"{files()[name]}: line kind {kind!r} opens a record but holds no searchable text")
            texts |= {t.encode() for t in found}
    return cover(texts)


def cover(texts: set[bytes]) -> tuple[bytes, ...]:
    """Greedy set cover: the substring found in most of the texts not yet covered, until all are."""
    left = set(texts)
    chosen: list[bytes] = []
    while left:
        counts: dict[bytes, int] = {}
        for text in left:
            subs = {text[i : i + NEEDLE] for i in range(max(1, len(text) - NEEDLE + 1))}
            for sub in subs:
                counts[sub] = counts.get(sub, 0) + 1
        best = max(counts, key=lambda s: (_rarity(s) > 0, counts[s], _rarity(s), s))
        chosen.append(best)
        left = {t for t in left if best not in t}
    for needle in reversed(list(chosen)):  # a needle whose texts the others all hold is idle
        rest = [n for n in chosen if n != needle]
        if all(any(n in t for n in rest) for t in texts if needle in t):
            chosen = rest
    return tuple(sorted(chosen))


def _rarity(needle: bytes) -> int:
    """Capitals, digits and punctuation are rarer in a log than lower-case words (`Iterat`, not `ration`)."""
    return sum(not (97 <= b <= 122 or b == 32) for b in needle)
