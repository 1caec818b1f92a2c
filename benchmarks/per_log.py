"""Per-log cost of diagnosing many logs in one process, as a ratio to a regex classifier's on the same logs.

The classifier is what a GPU alerting tool does (GPUAlert and the like): read the log, try a handful of
`re.search` patterns, name the first that hits. kbdebug reads every format's grammar, matches every rule and
renders nothing; both run in this process over the same files, after one warm-up pass each, so only the
per-log work is timed. Where a log has a label (`NNN.json` beside `NNN.log`, as in the dev corpus) both are
scored against it. Targets (issue #36): kbdebug p50 <= 3 ms a log, all logs within 10x the classifier's CPU.
Usage: python benchmarks/per_log.py DIR [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

# A regex classifier's whole knowledge: one pattern per cause, first hit wins.
CLASSIFIER = [
    ("cuda_oom", re.compile(r"CUDA out of memory|OutOfMemoryError")),
    ("device_assert", re.compile(r"device-side assert|Assertion `.*` failed")),
    ("nccl_timeout", re.compile(r"Watchdog caught collective operation timeout")),
    ("nccl_error", re.compile(r"NCCL error|ncclSystemError|ncclInternalError")),
    ("shape_mismatch", re.compile(r"shapes cannot be multiplied|must match the size of tensor|size mismatch")),
    ("device_mismatch", re.compile(r"Expected all tensors to be on the same device")),
    ("dtype_mismatch", re.compile(r"expected scalar type \w+ but found \w+")),
    ("illegal_memory", re.compile(r"illegal memory access")),
    ("killed", re.compile(r"^Killed$|oom-kill|exitcode\s*:\s*-9")),
    ("segfault", re.compile(r"Segmentation fault|SIGSEGV")),
]


def classify(path: Path) -> str:
    """Line by line, as an alerting tool watches a log: the last line that names a cause names it."""
    found = "other"
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            for name, rx in CLASSIFIER:
                if rx.search(line):
                    found = name
                    break
    return found


def timed(fn, paths: list[Path]) -> tuple[list[float], float, list[str]]:
    """CPU time of each call (wall time on a shared machine is mostly other processes'), their sum, and what
    each returned."""
    cpus, out = [], []
    for p in paths:
        start = time.process_time()
        out.append(fn(p))
        cpus.append(time.process_time() - start)
    return cpus, sum(cpus), out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * q))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path)
    ap.add_argument("--repeat", type=int, default=1, help="passes over the logs (the best pass is reported)")
    args = ap.parse_args()
    from kbdebug import api
    from kbdebug.parse import grammar

    paths = sorted(args.dir.glob("*.log"))
    labels = {p: json.loads(p.with_suffix(".json").read_text()).get("rule") for p in paths if p.with_suffix(".json").is_file()}

    def kbdebug_rule(p: Path) -> str | None:
        d = api.explain(p)
        return d.incidents[0].rule if d.incidents else None

    for fn in (classify, kbdebug_rule):  # warm-up: grammars, rules, regexes, page cache
        timed(fn, paths)
    grammar.forget()  # ... but no line's reading kept from it: each pass reads the logs afresh
    best: dict[str, tuple[list[float], float, list[str]]] = {}
    for _ in range(args.repeat):
        for name, fn in (("regex classifier", classify), ("kbdebug", kbdebug_rule)):
            grammar.forget()
            res = timed(fn, paths)
            if name not in best or res[1] < best[name][1]:
                best[name] = res
    for name, (walls, cpu, out) in best.items():
        right = sum(labels.get(p) == got for p, got in zip(paths, out, strict=True))
        print(
            f"{name:17s} {len(paths)} logs  p50 {pct(walls, 0.5) * 1e3:6.2f} ms  p99 {pct(walls, 0.99) * 1e3:7.2f} ms  "
            f"CPU {cpu:6.2f} s  right {right}/{len(labels)}"
        )
    (cw, cc, _), (kw, kc, _) = best["regex classifier"], best["kbdebug"]
    print(f"kbdebug / classifier: p50 {pct(kw, 0.5) / pct(cw, 0.5):5.1f}x  CPU {kc / cc:5.1f}x  (targets: p50 <= 3 ms, CPU <= 10x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
