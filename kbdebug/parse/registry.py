"""The formats kbdebug reads, derived from the folders in `grammars/`: each folder is a format, read by the
reader of the same name in `kbdebug/parse/readers/`. Nothing lists them: a new folder and its reader are a
new format."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from functools import cache
from typing import TypeVar

from kbdebug.parse.reader import Reader
from kbdebug.parse.sources import folder, names

T = TypeVar("T")


@dataclass(frozen=True)
class Format:
    name: str  # its folder under grammars/, and its reader's module under kbdebug/parse/readers/
    grammars: tuple[str, ...]  # the folder's grammars
    reader: type[Reader]


@cache
def formats() -> tuple[Format, ...]:
    """Every format, in the order their readers read a line."""
    by_folder: dict[str, list[str]] = {}
    for name in names():
        by_folder.setdefault(folder(name).name, []).append(name)
    found = [Format(name, tuple(grammars), _reader(name)) for name, grammars in by_folder.items()]
    return tuple(sorted(found, key=lambda f: (f.reader.order, f.name)))


def _reader(name: str) -> type[Reader]:
    """The one Reader class defined in kbdebug/parse/readers/<name>.py."""
    readers = defined_in(name, Reader)
    if len(readers) != 1:
        raise LookupError(f"kbdebug/parse/readers/{name}.py defines {len(readers)} Reader classes, not one")
    return readers[0]


def defined_in(name: str, base: type[T]) -> list[type[T]]:
    """The subclasses of `base` that the reader module of format `name` defines (its Reader, its Transformers)."""
    try:
        module = importlib.import_module(f"kbdebug.parse.readers.{name}")
    except ModuleNotFoundError as exc:
        raise LookupError(f"grammars/{name}/ has no reader: kbdebug/parse/readers/{name}.py is missing") from exc
    return [cls for _, cls in inspect.getmembers(module, inspect.isclass) if issubclass(cls, base) and cls.__module__ == module.__name__]
