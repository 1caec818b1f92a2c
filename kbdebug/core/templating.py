"""What every jinja2 environment of kbdebug shares (the guides' and the renderers'): compiled templates kept
between runs, and a log's text as a Markdown code span that survives its own backticks."""

from __future__ import annotations

import hashlib
import re

import jinja2
import jinja2.bccache

from kbdebug._cache import code_version, private_dir


class _QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """A cache that cannot be written (read-only home, full disk) is no cache, not an error."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except OSError:
            bucket.reset()


def bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept between runs: compiling them is a few percent of a cold explain."""
    # compiled templates are code: only from a directory nobody else can write; and their bytecode depends on
    # this module's environment settings (finalize, filters), not only on the template text, hence the key
    key = hashlib.sha256(f"{jinja2.__version__}|{code_version()}".encode()).hexdigest()[:12]
    where = private_dir(f"jinja-{key}")
    return _QuietBytecodeCache(str(where)) if where is not None else None


def code_span(text: str) -> str:
    """`text` as a Markdown code span whose fence is longer than any backtick run inside it (CommonMark), so a
    message with backticks reads and copies as the log printed it; padded where it starts or ends with one."""
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"
