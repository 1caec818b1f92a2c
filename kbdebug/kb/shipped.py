"""The bundled rules as read from their files, shipped beside them in `knowledge/rules.json`, with the texts
every match of each of their patterns holds.

Reading a rule folder is parsing its TOML and splitting its guide into sections: some 20 ms for the bundled
rules (tomllib is pure Python, and importing it is a third of that), paid by every run without a cache (a
first run, CI, a read-only home, `KBDEBUG_NO_CACHE=1`). The file holds each bundled rule's data as
`kbdebug.kb.layout.rule_data` reads it, under a hash of the bytes of its rule.toml, guide.md and case pages: a rule whose
files changed since is read from them, as if the file were not there. The data is validated all the same
(kbdebug.kb.model): only the reading of the files is skipped. `python -m kbdebug.kb` writes it; a test fails
while it is stale.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

from kbdebug._resources import data_dir
from kbdebug.core import phrases
from kbdebug.kb.layout import GUIDE_FILE, case_files, read_rule_files, rule_paths

FILE = "rules.json"
# What the file's data is: raise it when kbdebug.kb.layout reads a rule folder into other data, or
# kbdebug.core.phrases.required_texts reads other texts off a pattern.
LAYOUT = "layout-3"


def digest(toml: bytes, guide: bytes, cases: list[tuple[str, bytes]] | None = None) -> str:
    """The hash of a rule folder's files (line ends as the wheel has them): rule.toml, guide.md and its case pages."""
    whole = toml.replace(b"\r\n", b"\n") + b"\0" + guide.replace(b"\r\n", b"\n")
    for name, text in cases or ():
        whole += b"\0" + name.encode() + b"\0" + text.replace(b"\r\n", b"\n")
    return hashlib.sha256(whole).hexdigest()[:20]


def _folder_files(folder: Path) -> tuple[bytes, list[tuple[str, bytes]]]:
    """The bytes of a rule folder's guide and of each of its case pages, by name."""
    return (folder / GUIDE_FILE).read_bytes(), [(p.name, p.read_bytes()) for p in case_files(folder)]


@cache
def _shipped_file() -> dict[str, Any]:
    try:
        data = json.loads((data_dir("knowledge") / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("layout") == LAYOUT else {}


def _shipped() -> dict[str, Any]:
    rules = _shipped_file().get("rules")
    return rules if isinstance(rules, dict) else {}


@cache
def _texts() -> dict[str, frozenset[str] | None]:
    texts = _shipped_file().get("texts")
    if not isinstance(texts, dict):
        return {}
    try:
        return {str(p): None if t is None else frozenset(map(str, t)) for p, t in texts.items()}
    except TypeError:
        return {}


def required_texts(pattern: str) -> frozenset[str] | None:
    """kbdebug.core.phrases.required_texts of a pattern: shipped for every bundled rule's patterns (keyed by the
    pattern itself, so a new or edited one is read off the pattern), a fifth of a cold start's matching."""
    texts = _texts()
    return texts[pattern] if pattern in texts else phrases.required_texts(pattern)


def read(path: Path, toml: bytes) -> dict[str, Any] | None:
    """The data of the bundled rule folder whose rule.toml is `path` (holding `toml`), as read from these very
    files; None where it is not shipped, its files changed since, or the entry is not of the shape written here.
    The dict is shared: validate it, never change it."""
    entry = _shipped().get(path.parent.name)
    if not isinstance(entry, dict) or not isinstance(entry.get("data"), dict):
        return None
    try:
        guide, cases = _folder_files(path.parent)
    except OSError:
        return None  # reading the folder says what is wrong with it
    return entry["data"] if entry.get("hash") == digest(toml, guide, cases) else None  # type: ignore[no-any-return]


def snapshot() -> dict[str, Any]:
    """What the file holds when it is current: every bundled rule folder read from its files now."""
    rules: dict[str, Any] = {}
    patterns: set[str] = set()
    for path in rule_paths(data_dir("knowledge")):
        toml = path.read_bytes()
        data, problem = read_rule_files(path, toml)
        if problem is not None:
            raise ValueError(problem)
        rules[path.parent.name] = {"hash": digest(toml, *_folder_files(path.parent)), "data": data}
        for m in data.get("match", []):
            patterns.update(m.get("fields", {}).values(), m.get("absent", {}).values())
        patterns.update(ind["pattern"] for ind in data.get("indicators", []))
    texts = {p: None if (t := phrases.required_texts(p)) is None else sorted(t) for p in sorted(patterns)}
    return {"layout": LAYOUT, "rules": rules, "texts": texts}
