"""Per-log cost of diagnosing many logs in one process, as a ratio to a regex classifier's on the same logs.

The classifier is what a GPU alerting tool does (GPUAlert, the anchor the issue measured at p50 0.27 ms):
read the log, search it for 15 patterns in priority order ignoring case, name the first that hits. kbdebug
reads every format's grammar, matches every rule and fills the guide; both run in this process over the same
files, after one warm-up pass each, so only the per-log work is timed. Where a log has a label (`NNN.json`
beside `NNN.log`, as in the dev corpus) both are scored against it. Targets (issue #36): kbdebug p50 <= 3 ms
a log, all logs within 10x the classifier's CPU.
Usage: python benchmarks/per_log.py DIR [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

# A regex classifier's whole knowledge, as GPUAlert (the anchor named in issue #36) keeps it: one pattern per
# cause, in priority order, each searched over the whole text ignoring case; the first that hits names the
# cause (the causes GPUAlert lists; the patterns written here from the messages themselves).
CLASSIFIER = [
    ("cuda_oom", r"CUDA\s+out\s+of\s+memory|OutOfMemoryError|CUDNN_STATUS_ALLOC_FAILED"),
    ("nccl_error", r"NCCL\s+error|Watchdog caught collective operation timeout|Timeout waiting for NCCL"),
    ("device_assert", r"RuntimeError:\s+CUDA error|device-side assert"),
    ("host_oom", r"MemoryError|Cannot allocate memory|std::bad_alloc"),
    ("segfault", r"Segmentation fault|core dumped|SIGSEGV"),
    ("file_not_found", r"FileNotFoundError:"),
    ("permission", r"PermissionError:"),
    ("import_error", r"ImportError:|ModuleNotFoundError:"),
    ("zero_division", r"ZeroDivisionError"),
    ("device_mismatch", r"Expected all tensors.*same device"),
    ("nan_loss", r"loss.*nan|nan.*loss|nan.*detected"),
    ("killed", r"Killed\s*$|OOM\s+killer|Out of memory: Kill"),
    ("assertion", r"AssertionError:"),
    ("runtime_error", r"RuntimeError:"),
    ("traceback", r"Traceback \(most recent call last\)"),
]
_COMPILED = [(name, re.compile(pattern, re.IGNORECASE | re.MULTILINE)) for name, pattern in CLASSIFIER]


def classify(path: Path) -> str:
    """The whole log read at once, each pattern searched in order: the first that hits names the cause."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return next((name for name, rx in _COMPILED if rx.search(text)), "other")


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
    from kbdebug.parse import lines

    paths = sorted(args.dir.glob("*.log"))
    labels = {p: json.loads(p.with_suffix(".json").read_text()).get("rule") for p in paths if p.with_suffix(".json").is_file()}

    def kbdebug_rule(p: Path) -> str | None:
        d = api.explain(p)
        return d.incidents[0].rule if d.incidents else None

    for fn in (classify, kbdebug_rule):  # warm-up: grammars, rules, regexes, page cache
        timed(fn, paths)
    lines.forget()  # ... but no line's reading kept from it: each pass reads the logs afresh
    best: dict[str, tuple[list[float], float, list[str]]] = {}
    for _ in range(args.repeat):
        for name, fn in (("regex classifier", classify), ("kbdebug", kbdebug_rule)):
            lines.forget()
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
