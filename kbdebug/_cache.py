"""A small on-disk cache for things that are slow to build and cheap to unpickle (parsers, the
validated knowledge base). Keys hash everything the value depends on; any problem means a rebuild."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def cache_dir() -> Path | None:
    """KBDEBUG_CACHE_DIR, else $XDG_CACHE_HOME/kbdebug or ~/.cache/kbdebug; None when KBDEBUG_NO_CACHE is set."""
    if os.environ.get("KBDEBUG_NO_CACHE"):
        return None
    if os.environ.get("KBDEBUG_CACHE_DIR"):
        return Path(os.environ["KBDEBUG_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kbdebug"


def cached(name: str, key: str, kind: type[T], build: Callable[[], T], dumps: Callable[[T], bytes] | None = None,
           loads: Callable[[bytes], object] | None = None) -> T:
    """`build()`'s value, kept in `<cache_dir>/<name>-<key>.pickle` between runs."""
    where = cache_dir()
    if where is None:
        return build()
    path = where / f"{name}-{key}.pickle"
    try:
        loaded = (loads or pickle.loads)(path.read_bytes())
        if isinstance(loaded, kind):
            return loaded
    except Exception:  # noqa: BLE001 - a missing or damaged entry is rebuilt
        pass
    value = build()
    try:
        where.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(dumps(value) if dumps else pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - a read-only home still gets a working value
        pass
    return value
