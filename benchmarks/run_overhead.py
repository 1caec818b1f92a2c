"""What `kbdebug run -- CMD` adds to CMD, as differences to the bare command measured in the same run.

A job wrapper must cost its job nothing it can notice. Three figures per child:
- bare: the command alone;
- wrapped: `kbdebug run -- CMD`; "added" is wrapped minus bare;
- over the CLI: added minus `kbdebug --version`, the cost of starting kbdebug's Python CLI at all
  (interpreter, typer): what `run` itself adds, the part the wrapper's code decides.
- minimal: the same command under the smallest wrapper that does the same job (MINIMAL: pump both streams
  to ours and to a log file, exit with the child's status), the floor `kbdebug run` is held to: on
  `python -c pass` kbdebug should add at most 2x what it adds ("x minimal"), and a child printing 100k
  lines should cost at most 1.15x its bare CPU ("x bare").
- floor: the least any Python wrapper of a pipe can cost (FLOOR: one pipe, widened, read after a 10 ms
  gather like kbdebug's pumps, copied to our stdout; no log, no stderr, no scan). On an unbuffered child its
  "x bare" is the interpreter's start plus the child's own cost of writing each line into a pipe instead of
  /dev/null: the 1.15x target is only reachable where this floor is under it.
Children: `true` and `python -c pass` (a job that succeeds at once), one that prints 100k lines of 100
bytes (the pumps' throughput; the output goes to /dev/null either way; `-u` is the child as kbdebug runs
it, unbuffered), one that works between its 100k lines like a training loop (~0.4 s of CPU: the child
the 1.15x is about, where the wrapper's own start is not most of the total), and one that fails (the
diagnosis, paid only on failure). Runs are interleaved so a noisy
machine slows every command alike; the median is what a user meets, the minimum the least disturbed by a
shared machine. Wall clock and CPU time (user + system, of kbdebug and its child) are both reported.
`--against DIR` times the wrapped commands of another checkout (e.g. the main branch) in the same run.
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
KB = [sys.executable, "-m", "kbdebug"]
PY = sys.executable
PRINT_100K = "import sys\nline = 'x' * 99 + '\\n'\nfor _ in range(100_000): sys.stdout.write(line)"
# a training loop's shape: work between lines, each line printed as it is made (~0.4 s of CPU bare)
TRAIN_100K = (
    "for i in range(100_000):\n"
    "    loss = sum(j * j for j in range(40)) / (i + 1)\n"
    "    print(f'step {i} loss={loss:.6f} lr=0.001 ' + 'x' * 50)"
)
MINIMAL = """
import os, subprocess, sys, threading
log = open(sys.argv[1], "wb", buffering=0)
lock = threading.Lock()
proc = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
def pump(src, dest):
    while data := os.read(src.fileno(), 1 << 16):
        os.write(dest, data)
        with lock:
            log.write(data)
threads = [threading.Thread(target=pump, args=(proc.stdout, 1)), threading.Thread(target=pump, args=(proc.stderr, 2))]
for t in threads:
    t.start()
proc.wait()
for t in threads:
    t.join()
sys.exit(proc.returncode)
"""
FLOOR = """
import fcntl, os, subprocess, sys, time
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
fd = proc.stdout.fileno()
try:
    fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
except OSError:
    pass
while data := os.read(fd, 1 << 20):
    os.write(1, data)
    if len(data) < 1 << 20:
        time.sleep(0.01)
sys.exit(proc.wait())
"""
CHILDREN = {
    "true": ["true"],
    "python -c pass": [PY, "-c", "pass"],
    "python printing 100k lines": [PY, "-c", PRINT_100K],
    # kbdebug run makes a Python child unbuffered (output is live): this bare figure is the pumps' own baseline
    "python -u printing 100k lines": [PY, "-u", "-c", PRINT_100K],
    "python -u training, 100k lines": [PY, "-u", "-c", TRAIN_100K],
    "python failing (diagnosed)": [PY, "-c", "raise SystemExit(3)"],
}


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock seconds, and CPU seconds (user + system) of the command and every process it waited for:
    on a shared machine the CPU time is the steadier figure, the wall clock the one a user meets."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # run from / : `python -m` puts the working directory first on sys.path, before PYTHONPATH
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, env=env, cwd="/", check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--against", type=Path, metavar="DIR", help="another kbdebug checkout to time beside this one")
    ap.add_argument("--child", action="append", choices=list(CHILDREN), help="time only this child (again for more)")
    args = ap.parse_args()
    children = {name: cmd for name, cmd in CHILDREN.items() if not args.child or name in args.child}
    # A cold start is a fresh process, not uncompiled sources: write the bytecode first, as an install does.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    other = {**env, "PYTHONPATH": str(args.against)} if args.against else None
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "kbdebug")], env=env, check=False)
    for e in (env, other or env):  # warm the caches
        subprocess.run([*KB, "run", "--", PY, "-c", "raise SystemExit(3)"], capture_output=True, env=e, cwd="/", check=False)
    with tempfile.TemporaryDirectory() as tmp:
        minimal = [PY, "-c", MINIMAL, os.path.join(tmp, "minimal.log")]
        cases: dict[str, tuple[list[str], dict[str, str]]] = {"kbdebug --version (the CLI floor)": ([*KB, "--version"], env)}
        for name, cmd in children.items():
            cases[name] = (cmd, env)
            # the minimal wrapper gets the child's environment as kbdebug makes it (unbuffered), so both copy alike
            cases[f"minimal -- {name}"] = ([*minimal, *cmd], {**env, "PYTHONUNBUFFERED": "1"})
            cases[f"floor -- {name}"] = ([PY, "-c", FLOOR, *cmd], {**env, "PYTHONUNBUFFERED": "1"})
            cases[f"kbdebug run -- {name}"] = ([*KB, "run", "--", *cmd], env)
            if other is not None:
                cases[f"{args.against}: kbdebug run -- {name}"] = ([*KB, "run", "--", *cmd], other)
        times: dict[str, list[float]] = {name: [] for name in cases}
        cpu: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, (cmd, e) in cases.items():
                wall, used = timed(cmd, e)
                times[name].append(wall)
                cpu[name].append(used)
    for title, figures in (("wall clock", times), ("CPU time (user + system)", cpu)):
        print(f"== {title}")
        table(figures, args.against, list(children))
    return 0


def table(times: dict[str, list[float]], against: Path | None, children: list[str]) -> None:
    """Per child: the bare command, then each wrapper: what it adds, that over the CLI's own start, the
    ratio of what it adds to what the minimal wrapper adds, and its total as a multiple of the bare child's."""
    med = {name: statistics.median(t) for name, t in times.items()}
    low = {name: min(t) for name, t in times.items()}
    cli = "kbdebug --version (the CLI floor)"
    print(f"{'':44s} {'median':>8s} {'min':>8s} {'added (med/min)':>17s} {'over the CLI':>14s} {'x minimal':>10s} {'x bare':>7s}")
    print(f"{cli:44s} {med[cli] * 1000:6.0f}ms {low[cli] * 1000:6.0f}ms")
    for name in children:
        print(f"{name:44s} {med[name] * 1000:6.0f}ms {low[name] * 1000:6.0f}ms")
        floor = med[f"minimal -- {name}"] - med[name]
        for label, wrapped in (
            ("", f"minimal -- {name}"),
            ("", f"floor -- {name}"),
            ("", f"kbdebug run -- {name}"),
            (f"  {against}", f"{against}: kbdebug run -- {name}"),
        ):
            if wrapped not in med:
                continue
            added = f"{(med[wrapped] - med[name]) * 1000:+.0f}/{(low[wrapped] - low[name]) * 1000:+.0f} ms"
            over = f"{(med[wrapped] - med[name] - med[cli]) * 1000:+.0f} ms"
            ratio = (med[wrapped] - med[name]) / floor if floor > 0 else float("nan")
            bare = med[wrapped] / med[name] if med[name] > 0 else float("nan")
            title = wrapped[: 44 - len(label)] + label
            print(
                f"{title:44s} {med[wrapped] * 1000:6.0f}ms {low[wrapped] * 1000:6.0f}ms {added:>17s} {over:>14s} {ratio:9.2f}x {bare:6.2f}x"
            )


if __name__ == "__main__":
    sys.exit(main())
