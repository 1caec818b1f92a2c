"""`kbdebug explain` on a log of repeated short tracebacks (a retry loop), at three sizes: time must grow
linearly with the number of incidents (or less), memory stay bounded.

A client retries a request that keeps failing; each attempt logs a line and the same traceback. The log is
written at 256 KiB, 1 MiB and 4 MiB (~60k lines at the largest); each size is explained in a fresh process,
which reports its own CPU time and peak RSS. Targets (issue #36): 4 MiB within 10 s, the time per incident
not growing with the size, peak RSS bounded.
Usage: python benchmarks/retry.py [--sizes 256,1024,4096] (KiB)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ATTEMPT = (
    "2024-05-01 12:00:{s:02d},{ms:03d} WARNING client: attempt {i} failed, retrying in 1s\n"
    "Traceback (most recent call last):\n"
    '  File "/app/client.py", line 42, in fetch\n'
    "    resp = session.get(url, timeout=5)\n"
    "ConnectionError: HTTPSConnectionPool(host='hub.example.com', port=443): Read timed out. (read timeout=5)\n"
)


def build(path: Path, kib: int) -> int:
    """Write `kib` KiB of attempts; the number of attempts (incidents' worth) written."""
    parts, size, i = [], 0, 0
    while size < kib * 1024:
        part = ATTEMPT.format(s=i % 60, ms=i % 1000, i=i)
        parts.append(part)
        size += len(part)
        i += 1
    path.write_text("".join(parts))
    return i


CHILD = """
import json, resource, sys, time
from kbdebug import api
api.diagnose_text("x\\n")  # grammars and rules loaded before timing: the size is what is measured
start = time.process_time()
d = api.explain(sys.argv[1])
cpu = time.process_time() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"cpu": cpu, "rss_kb": rss, "rules": [i.rule for i in d.incidents]}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256,1024,4096")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kib in (int(s) for s in args.sizes.split(",")):
            path = Path(tmp) / f"retry_{kib}.log"
            attempts = build(path, kib)
            out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True)
            res = json.loads(out.stdout.splitlines()[-1])
            rows.append((kib, attempts, res))
            print(
                f"{kib:5d} KiB  {attempts:6d} attempts  cpu {res['cpu']:6.2f} s  {res['cpu'] * 1e6 / attempts:7.1f} us/attempt  "
                f"peak RSS {res['rss_kb'] / 1024:6.1f} MB  root {res['rules'][:1]}"
            )
    (k0, a0, r0), (k1, a1, r1) = rows[0], rows[-1]
    growth = (r1["cpu"] / max(r0["cpu"], 1e-6)) / (a1 / a0)
    print(f"time growth over attempt growth, {k0} -> {k1} KiB: {growth:4.2f} (linear: <= 1; target 4 MiB <= 10 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
