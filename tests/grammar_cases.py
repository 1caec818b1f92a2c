"""The cases of every format folder (`grammars/<format>/cases.toml`): lines of each kind its grammars read."""

from __future__ import annotations

import sys

from kbdebug.parse.registry import formats
from kbdebug.parse.sources import folder

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def _cases() -> list[tuple[str, str, str]]:
    """(grammar, kind, line) of every format folder's cases.toml."""
    out = []
    for fmt in formats():
        path = folder(fmt.grammars[0]) / "cases.toml"
        with path.open("rb") as fh:
            for case in tomllib.load(fh)["line"]:
                out.append((case.get("grammar", fmt.name), case["kind"], case["text"]))
    return out


CASES = _cases()
