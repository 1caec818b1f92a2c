"""A small on-disk cache for things that are slow to build and cheap to unpickle (parsers, the
validated knowledge base). Keys hash everything the value depends on; any problem means a rebuild."""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import sys
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def code_version() -> str:
    """`_code_version()`; a constant where nothing is kept (`KBDEBUG_NO_CACHE`): every caller keys a cache entry
    with it, and reading it costs a stat of each of the package's code files in a checkout."""
    return "not kept" if cache_dir() is None else _code_version()


@cache
def _code_version() -> str:
    """What every cached value is keyed by beside the data it was built from (grammar or rule files):
    the release of the code that built it, and the library and Python versions it was pickled with.

    An installed release never changes its code, so its version is enough. A source checkout (the data
    folders beside the package rather than inside it) changes code without a release: there the key also
    holds the size and time of change of each of the package's code files (a stat each: reading them
    would cost a cold start more than what the cache saves), so an edit never meets a value its old
    code built.
    """
    from kbdebug._resources import data_dir
    from kbdebug._version import __version__

    parts = [__version__, sys.version]
    package = Path(__file__).resolve().parent
    if data_dir("grammars").parent != package:
        digest = hashlib.sha256()
        for path in sorted(_code_files(str(package))):
            st = os.stat(path)
            digest.update(f"{path}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        parts.append(digest.hexdigest()[:16])
    return "|".join(parts)


def _code_files(top: str) -> list[str]:
    """The package's code files, found with `os.scandir` (`Path.rglob` costs a first `diagnose(exc)` 1-2 ms)."""
    found: list[str] = []
    folders = [top]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append(entry.path)
                elif entry.name.endswith(".py"):
                    found.append(entry.path)
    return found


def cache_dir() -> Path | None:
    """KBDEBUG_CACHE_DIR, else $XDG_CACHE_HOME/kbdebug or ~/.cache/kbdebug; None when KBDEBUG_NO_CACHE is set."""
    env = os.environ
    return _cache_dir(env.get("KBDEBUG_NO_CACHE"), env.get("KBDEBUG_CACHE_DIR"), env.get("XDG_CACHE_HOME"), env.get("HOME"))


@lru_cache(maxsize=4)
def _cache_dir(no_cache: str | None, chosen: str | None, xdg: str | None, home: str | None) -> Path | None:
    """`cache_dir()` for these settings (`home`: what `~` stands for), worked out once: every compiled pattern
    read back from the cache (kbdebug._regex_cache) asks for it."""
    if no_cache:
        return None
    if chosen:
        return Path(chosen)
    base = xdg or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kbdebug"


def _trusted(path: str | os.PathLike[str]) -> bool:
    """Unpickling runs code, so an entry is read only from a directory and a file that the current user
    owns and that nobody else can write: a cache on a shared disk cannot run another user's code as you."""
    if not hasattr(os, "getuid"):  # no ownership to check (Windows): per-user profile directories
        return True
    st = os.lstat(path)
    return not stat.S_ISLNK(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def private_dir(*parts: str) -> Path | None:
    """`<cache_dir>/<parts>`, created private (0700) and trusted, or None (no cache, or not ours)."""
    base = cache_dir()
    if base is None:
        return None
    try:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        where = base
        for part in parts:  # each level private, not only the last (`mkdir(parents=True)` makes the others 0755)
            where = where / part
            where.mkdir(mode=0o700, exist_ok=True)
        return where if _trusted(base) and _trusted(where) else None
    except OSError:
        return None


def cached(
    name: str,
    key: str,
    kind: type[T],
    build: Callable[[], T],
    dumps: Callable[[T], bytes] | None = None,
    loads: Callable[[bytes], object] | None = None,
) -> T:
    """`build()`'s value, kept in `<cache_dir>/<name>-<key>.pickle` between runs."""
    where = cache_dir()
    if where is None:
        return build()
    path = where / f"{name}-{key}.pickle"  # read only when trusted; written only into a private directory
    try:
        if _trusted(where) and _trusted(path):
            loaded = (loads or pickle.loads)(path.read_bytes())
            if isinstance(loaded, kind):
                return loaded
    except Exception:
        pass
    value = build()
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _trusted(where):  # a shared or foreign directory: never write where others could swap entries
            return value
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(dumps(value) if dumps else pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)
    except Exception:
        pass
    return value
