"""Cold start of `kbdebug explain` and of the first `diagnose(exc)`, as ratios to the floor of the same run.

The floor (benchmarks/_floor.py) is the smallest program of the same kind: a typer CLI with the same
arguments that uses lark, pydantic and jinja2 once each. Targets (issue #36): explain <= 1.1x with a warm
cache in text and json, <= 1.3x with `KBDEBUG_NO_CACHE=1`, never importing torch; the first
`diagnose(exc)` in a process that already imported torch <= 1.15x the floor's work done in-process.
The in-process figures also show the floor with the collector paused, as `diagnose(exc)` pauses it while it
builds (kbdebug._gc): in a process that imported torch, a collection during those imports scans torch's objects
too, and that row says how much of the ratio the pause is.
Runs are interleaved so that a noisy machine slows every command alike. `--against DIR` times another
kbdebug checkout's commands (e.g. the main branch's) in the same runs, for a before-and-after in one table.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "examples" / "segmentation_crash.log"
FLOOR = Path(__file__).resolve().parent / "_floor.py"

IN_PROCESS = r"""
import sys, time
import torch
sys.path.insert(0, {bench!r})
which = sys.argv[1]
try:
    torch.gather(torch.zeros(2, 3), 1, torch.tensor([[0, 5]]))
except Exception as exc:
    err = exc
t0, c0 = time.perf_counter(), time.process_time()
if which.startswith("floor"):
    if which == "floor, collections paused":
        import gc
        gc.disable()
    import _floor
    _floor.work({log!r}, "json")
else:
    import kbdebug
    kbdebug.diagnose(err).render("json")
print(time.perf_counter() - t0, time.process_time() - c0)
"""


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock seconds and CPU seconds (user + system): on a shared machine the CPU time is the steadier."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False, cwd=_root(env))
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def inner(which: str, env: dict[str, str]) -> tuple[float, float]:
    """The in-process work after `import torch`: the floor's, or the first `diagnose(exc)` of the kbdebug that `env` imports."""
    code = IN_PROCESS.format(bench=str(FLOOR.parent), log=str(LOG))
    out = subprocess.run([sys.executable, "-c", code, which], capture_output=True, text=True, env=env, check=False, cwd=_root(env))
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def _root(env: dict[str, str]) -> str:
    """Where a command runs: the checkout it is to import (`python -m` and `-c` look in the working directory first)."""
    return env.get("PYTHONPATH") or str(ROOT)


FLOOR_NAME = "floor (typer + lark + pydantic + jinja2)"


def report(name: str, med: float, low: float, floor_med: float, floor_min: float, goal: str, width: int = 45) -> None:
    print(f"{name:{width}s} {med * 1000:7.0f} ms {med / floor_med:5.2f}x {low * 1000:5.0f} ms {low / floor_min:5.2f}x  ({goal})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--no-torch", action="store_true", help="skip the diagnose(exc) figures")
    ap.add_argument("--against", type=Path, metavar="DIR", help="another kbdebug checkout to time beside this one")
    args = ap.parse_args()
    # A cold start is a fresh process, not uncompiled sources: write the bytecode first, as an install does.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    checkouts = {"": (ROOT, env)}
    if args.against:
        checkouts[f"{args.against}: "] = (args.against.resolve(), {**env, "PYTHONPATH": str(args.against.resolve())})
    for root, _ in checkouts.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "kbdebug"), str(FLOOR)], env=env, check=False)
    kb = [sys.executable, "-m", "kbdebug", "explain"]
    targets: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as empty_cache:
        cases = {FLOOR_NAME: ([sys.executable, str(FLOOR), "explain", str(LOG), "--format", "json"], env)}
        for label, (_, e) in checkouts.items():
            no_cache = {**e, "KBDEBUG_NO_CACHE": "1", "KBDEBUG_CACHE_DIR": empty_cache}
            subprocess.run(
                [*kb, "--format", "json", str(LOG)], stdout=subprocess.DEVNULL, env=e, check=False, cwd=_root(e)
            )  # warm the cache
            cases[f"{label}explain --format json"] = ([*kb, "--format", "json", str(LOG)], e)
            cases[f"{label}explain --format text"] = ([*kb, "--format", "text", str(LOG)], e)
            cases[f"{label}explain --format json, KBDEBUG_NO_CACHE=1"] = ([*kb, "--format", "json", str(LOG)], no_cache)
            targets |= {f"{label}explain --format json": 1.1, f"{label}explain --format text": 1.1}
            targets[f"{label}explain --format json, KBDEBUG_NO_CACHE=1"] = 1.3
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, (cmd, e) in cases.items():
                times[name].append(timed(cmd, e))
    # The median is what a user meets; the minimum is the least disturbed by a shared machine's noise.
    width = max(len(name) for name in times)
    for k, title in enumerate(("wall clock", "CPU time (user + system)")):
        print(f"== {title}")
        print(f"{'':{width}s} {'median':>10s} {'ratio':>6s} {'min':>8s} {'ratio':>6s}")
        floor_med, floor_min = statistics.median(t[k] for t in times[FLOOR_NAME]), min(t[k] for t in times[FLOOR_NAME])
        for name, t in times.items():
            goal = f"target <= {targets[name]}x" if name in targets else "baseline"
            report(name, statistics.median(x[k] for x in t), min(x[k] for x in t), floor_med, floor_min, goal, width)
    if not args.no_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("torch is not installed: the diagnose(exc) figures are skipped")
            return 0
        floor_in: list[tuple[float, float]] = []
        floor_paused: list[tuple[float, float]] = []
        first: dict[str, list[tuple[float, float]]] = {label: [] for label in checkouts}
        for _, e in checkouts.values():
            inner("kbdebug", e)  # warm the cache, as for `explain`
        for _ in range(args.runs):
            floor_in.append(inner("floor", env))
            floor_paused.append(inner("floor, collections paused", env))
            for label, (_, e) in checkouts.items():
                first[label].append(inner("kbdebug", e))
        width = max(45, *(len(f"{label}first diagnose(exc) (after import torch)") for label in checkouts))
        for k, title in enumerate(("wall clock", "CPU time")):
            print(f"== in process, {title}")
            f_med, f_min = statistics.median(t[k] for t in floor_in), min(t[k] for t in floor_in)
            report("in-process floor (after import torch)", f_med, f_min, f_med, f_min, "baseline", width)
            p_med, p_min = statistics.median(t[k] for t in floor_paused), min(t[k] for t in floor_paused)
            report("in-process floor, collections paused", p_med, p_min, f_med, f_min, "reference", width)
            for label, t in first.items():
                med, low = statistics.median(x[k] for x in t), min(x[k] for x in t)
                report(f"{label}first diagnose(exc) (after import torch)", med, low, f_med, f_min, "target <= 1.15x", width)
                report(f"{label}  the same, to the paused floor", med, low, p_med, p_min, "reference", width)
    return 0


if __name__ == "__main__":
    sys.exit(main())
