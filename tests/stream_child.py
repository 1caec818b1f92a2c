"""Helper for tests/test_hostile.py: stream generated input into `kbdebug explain -` and report peak RSS.

usage: python tests/stream_child.py measure BYTES   (prints: exit status, peak RSS in KB, rules found)
       python tests/stream_child.py gen BYTES       (writes the input to stdout)
Run in its own process so that the peak RSS of its children is kbdebug's alone.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

ERROR = b"RuntimeError: CUDA error: an illegal memory access was encountered\n"


def gen(total: int) -> None:
    """Half `\\r` progress redraws, half one endless line: never a newline until the error."""
    out = sys.stdout.buffer
    cr, x = b"Epoch 1: 10%|###| loss=0.1\r" * 40000, b"x" * (1 << 20)
    n = 0
    while n < total:
        chunk = cr if n < total // 2 else x
        out.write(chunk)
        n += len(chunk)
    out.write(b" " + ERROR)


def measure(total: int) -> None:
    feed = subprocess.Popen([sys.executable, __file__, "gen", str(total)], stdout=subprocess.PIPE)
    kb = subprocess.run(
        [sys.executable, "-m", "kbdebug", "explain", "-q", "--format", "json", "-"],
        stdin=feed.stdout,
        capture_output=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    feed.wait()
    rules = [i["rule"] for i in json.loads(kb.stdout or b"{}").get("incidents", [])]
    print(kb.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, ",".join(rules) or "-")


if __name__ == "__main__":
    {"gen": gen, "measure": measure}[sys.argv[1]](int(sys.argv[2]))
