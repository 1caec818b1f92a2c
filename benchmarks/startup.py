"""Cold `kbdebug explain` on a typical log, as a ratio to importing its libraries, in the same run."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

LOG = Path(__file__).resolve().parent.parent / "examples" / "segmentation_crash.log"


def median_time(cmd: list[str], runs: int = 9) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    # A cold start is a fresh process, not uncompiled sources: write kbdebug's bytecode first, as any
    # install does (PYTHONDONTWRITEBYTECODE, set on some CI machines, would make every run compile).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(LOG.parent.parent / "kbdebug")], env=env, check=False)
    base = median_time([sys.executable, "-c", "import lark, pydantic, jinja2, typer"])
    kb = median_time([sys.executable, "-m", "kbdebug", "explain", "-q", str(LOG)])
    print(f"import lark, pydantic, jinja2, typer: {base * 1000:6.0f} ms")
    print(f"kbdebug explain {LOG.name}:   {kb * 1000:6.0f} ms   ratio {kb / base:4.2f}x (target <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
