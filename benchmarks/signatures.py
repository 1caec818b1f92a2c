"""Signature stability: does each labelled log keep its root signature under the damages that remove no evidence?

Usage: PYTHONPATH=. python benchmarks/signatures.py CORPUS_DIR [--tools DIR] [--verbose]

Applies mutate_eval.py's wrap80, quoted, rank_prefix, timestamps, crlf_ansi and in_noise to every NNN.log of
CORPUS_DIR (the tools directory defaults to CORPUS_DIR/../../tools) and compares the root incident's
`signature` with the undamaged log's; also checks that no signature is shared by two rules.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kbdebug.api import diagnose_text

DAMAGES = ("wrap80", "quoted", "rank_prefix", "timestamps", "crlf_ansi", "in_noise")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--tools", type=Path, default=None)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(args.tools or args.corpus.resolve().parent.parent / "tools"))
    import mutate_eval  # type: ignore[import-not-found]

    kept = total = 0
    rules: dict[str, set[str]] = {}
    for log in sorted(args.corpus.glob("*.log")):
        text = log.read_bytes().decode("utf-8", "replace")
        root = diagnose_text(text).root
        if root is None:
            continue
        rules.setdefault(root.signature, set()).add(root.rule)
        for name in DAMAGES:
            damaged = getattr(mutate_eval, name)(text, mutate_eval._rng(log.stem, name))
            if damaged is None:
                continue
            total += 1
            other = diagnose_text(damaged).root
            if other is not None and other.signature == root.signature:
                kept += 1
            elif args.verbose:
                print(f"{log.stem} {name}: {root.signature_key!r}\n    damaged: {other.signature_key if other else None!r}")
    shared = {s: r for s, r in rules.items() if len(r) > 1}
    print(f"signatures kept {kept}/{total}; signatures shared by two rules: {len(shared)}")
    return 0 if not shared else 1


if __name__ == "__main__":
    sys.exit(main())
