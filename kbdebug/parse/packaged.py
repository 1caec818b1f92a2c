"""The grammars' derived readings, shipped beside them in each format folder's `derived.json`.

Which line may be of which format (anchors, first terminals, required texts: kbdebug.parse.derive) is
read off each grammar, and reading it needs lark to load the grammar: 20-60 ms a grammar, and every
format must be asked about every line. The user's cache keeps the readings between runs, but a first
run, a CI job, a read-only home or `KBDEBUG_NO_CACHE=1` has no cache, and paid to load all nine
grammars to read a log that holds three formats. So the readings travel with the grammars: generated
by `python -m kbdebug.parse` from the grammars (one file per format folder, so adding a format
changes nothing outside its folder) and the code that reads them, checked by the
tests to be what that code derives now, and used only where the hashes of the grammar and of that
code still match (an edited grammar is read from its source until the file is generated again).
"""

from __future__ import annotations

import json
import zlib
from functools import cache
from typing import Any

from kbdebug.parse.sources import COMMON, folder, source

FILE = "derived.json"
# What the readings shipped in the format folders' derived.json are: raise it when the deriving code
# (kbdebug.parse.derive) changes what a grammar yields, or the shape of a reading (tests/test_packaged.py fails
# while the file is stale).
READINGS = "readings-2"


def digest(text: str) -> str:
    """A checksum that a checkout with Windows line ends shares with the wheel. It tells an edited grammar from
    the one its readings were shipped for (no one forges a grammar against it), so zlib's two checksums and the
    length serve: `kbdebug run` reads the needles on a successful job's output, and hashlib's import loads
    OpenSSL, 3-7 ms of the wrapper's start."""
    data = text.replace("\r\n", "\n").encode()
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}{len(data):x}"


def grammar_hash(name: str) -> str:
    """What a reading shipped for grammar `name` was derived from: its text and the shared terminals'."""
    return digest(f"{source(name)}|{source(COMMON)}")


def shipped_reading(name: str, what: str) -> Any | None:
    """The reading `what` shipped for grammar `name` as it is now, read by this code; None when it must be derived."""
    return reading(name, what, grammar_hash(name), READINGS)


@cache
def _shipped(name: str) -> dict[str, Any]:
    """The derived readings shipped in the folder of grammar `name`."""
    try:
        data = json.loads((folder(name) / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def reading(name: str, what: str, grammar_hash: str, code_hash: str) -> Any | None:
    """The shipped reading `what` of grammar `name`, decoded, or None: absent, derived from other text, or
    not of the shape this code writes (a damaged file costs the time to derive it, never the run)."""
    try:
        data = _shipped(name)
        entry = data["grammars"][name]
        if data["code"] != code_hash or entry["grammar"] != grammar_hash:
            return None
        value = entry["readings"].get(what)
        return None if value is None else decode(what, value)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None


def encode(what: str, value: Any) -> Any:
    """A reading as JSON: anchors are (texts, {text: spaces}), texts are {kind: set of texts or None}, needles
    are byte strings (kept byte for byte as Latin-1 text: a needle may cut a UTF-8 character), templates a set
    of rule names."""
    if what == "needles":
        return [n.decode("latin-1") for n in value]
    if what == "texts":
        return {kind: None if texts is None else sorted(texts) for kind, texts in sorted(value.items())}
    if what.startswith("anchors-"):
        direct, after = value
        return [sorted(direct), dict(sorted(after.items()))]
    if what.startswith("templates-"):
        return sorted(value)
    return value


def decode(what: str, value: Any) -> Any:
    """The reading as the deriving code returns it; ValueError where the JSON is not of that shape."""
    out: Any
    if what == "needles":
        out = tuple(str(n).encode("latin-1") for n in value)
        if not isinstance(value, list):
            raise ValueError("needles: not a list")
    elif what == "texts":
        out = {str(kind): None if texts is None else frozenset(map(str, texts)) for kind, texts in value.items()}
    elif what.startswith("anchors-"):
        direct, after = value
        out = ([str(x) for x in direct], {str(k): bool(v) for k, v in after.items()})
    elif what.startswith("templates-"):
        if not isinstance(value, list):
            raise ValueError(f"{what}: not a list")
        out = frozenset(map(str, value))
    elif isinstance(value, str):
        out = value
    else:
        raise ValueError(f"{what}: not a reading")
    return out
