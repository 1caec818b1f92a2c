"""The bundled rules as read from their files, shipped beside them in `knowledge/rules.json`.

Reading a rule folder is parsing its TOML and splitting its guide into sections: some 20 ms for the bundled
rules (tomllib is pure Python, and importing it is a third of that), paid by every run without a cache (a
first run, CI, a read-only home, `KBDEBUG_NO_CACHE=1`). The file holds each bundled rule's data as
`kbdebug.kb.layout.rule_data` reads it, under a hash of the bytes of its rule.toml and guide.md: a rule whose
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
from kbdebug.kb.layout import GUIDE_FILE, rule_data, rule_paths

FILE = "rules.json"
# What the file's data is: raise it when kbdebug.kb.layout reads a rule folder into other data.
LAYOUT = "layout-1"


def digest(toml: bytes, guide: bytes) -> str:
    """The hash of a rule folder's files (line ends as the wheel has them)."""
    whole = toml.replace(b"\r\n", b"\n") + b"\0" + guide.replace(b"\r\n", b"\n")
    return hashlib.sha256(whole).hexdigest()[:20]


@cache
def _shipped() -> dict[str, Any]:
    try:
        data = json.loads((data_dir("knowledge") / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("layout") != LAYOUT or not isinstance(data.get("rules"), dict):
        return {}
    return data["rules"]  # type: ignore[no-any-return]


def read(path: Path, toml: bytes) -> dict[str, Any] | None:
    """The data of the bundled rule folder whose rule.toml is `path` (holding `toml`), as read from these very
    files; None where it is not shipped, its files changed since, or the entry is not of the shape written here.
    The dict is shared: validate it, never change it."""
    entry = _shipped().get(path.parent.name)
    if not isinstance(entry, dict) or not isinstance(entry.get("data"), dict):
        return None
    try:
        guide = (path.parent / GUIDE_FILE).read_bytes()
    except OSError:
        return None  # reading the folder says what is wrong with it
    return entry["data"] if entry.get("hash") == digest(toml, guide) else None  # type: ignore[no-any-return]


def snapshot() -> dict[str, Any]:
    """What the file holds when it is current: every bundled rule folder read from its files now."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

    rules: dict[str, Any] = {}
    for path in rule_paths(data_dir("knowledge")):
        toml = path.read_bytes()
        data = rule_data(path, tomllib.loads(toml.decode("utf-8")))
        rules[path.parent.name] = {"hash": digest(toml, (path.parent / GUIDE_FILE).read_bytes()), "data": data}
    return {"layout": LAYOUT, "rules": rules}
