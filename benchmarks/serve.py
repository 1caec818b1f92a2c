"""The crash service's throughput: diagnoses per second posted over loopback by N concurrent clients to
`kbdebug serve`, against diagnosing the same logs in one process (what `kbdebug explain --format json`
does per log, warm), in the same run. Checks that the count stored equals the count posted.

Loopback only, bounded (every request has a timeout, the run a deadline), and it stops the server it started.
One uvicorn worker and 16 clients by default (#36's goal: at least 0.8x the in-process rate, nothing lost,
no 5xx); the server diagnoses in its pool of worker processes and renders no HTML on a post.
On a shared machine either rate moves by a fifth from one second to the next, so the two are measured in
turns (`--rounds`, each an in-process pass and then a served one) and the ratio reported is the median of
the rounds' ratios: a load that comes and goes slows one round's two passes alike more often than not.
Usage: PYTHONPATH=. python benchmarks/serve.py [--logs 400] [--clients 16] [--workers 1] [--rounds 3] [--db URL]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from many import KINDS

DEADLINE = 600.0


def logs(n: int, seed: int = 0) -> list[bytes]:
    """`n` logs of a few dozen lines: noise, then one of many.KINDS with its own numbers. Each seed gives other
    numbers, so a round's logs are new to every cache of the diagnosis, as a service's posts are."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        noise = "".join(f"step {j} loss 0.{rnd.randrange(10**4)}\n" for j in range(rnd.randrange(5, 60)))
        text = noise + KINDS[i % len(KINDS)].format(
            a=rnd.randrange(10, 900), b=rnd.randrange(1, 64), c=rnd.randrange(8), r=f"job{rnd.randrange(10**6)}"
        )
        out.append(text.encode())
    return out


def in_process(texts: list[bytes]) -> float:
    """Seconds to diagnose and render every log as JSON in this process, after one warm-up."""
    import io

    from kbdebug.api import diagnose_regions
    from kbdebug.parse.needles import needles
    from kbdebug.render import render
    from kbdebug.scan import scan_stream

    def one(data: bytes) -> str:
        return render([diagnose_regions(scan_stream(io.BytesIO(data), needles))], "json")

    one(texts[0])
    start = time.perf_counter()
    for data in texts:
        one(data)
    return time.perf_counter() - start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def post(url: str, data: bytes, job: str) -> int:
    req = urllib.request.Request(
        f"{url}/v1/diagnose?job={job}", data=data, headers={"Content-Type": "text/plain", "X-Kbdebug-Client": "bench"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--logs", type=int, default=400)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--db", default=None, help="database URL (default: a new SQLite file); a PostgreSQL one must be empty")
    args = ap.parse_args()
    texts = logs(args.logs)
    rounds: list[tuple[float, float]] = []  # (in-process seconds, served seconds)
    statuses: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or f"sqlite:///{tmp}/bench.db"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(Path(__file__).resolve().parent.parent))}
        cmd = [sys.executable, "-m", "kbdebug", "serve", "--port", str(port), "--db", db, "--workers", str(args.workers)]
        server = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    before = get(url + "/v1/health")["reports"]
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        print("the server did not start:", server.stderr.read().decode() if server.poll() is not None else "")
                        return 1
                    time.sleep(0.2)
            for i in range(args.workers * 2):  # every worker's first diagnosis builds its parsers: not part of the rate
                post(url, texts[i % len(texts)], "warm-up")
            before = get(url + "/v1/health")["reports"]
            for r in range(1, args.rounds + 1):
                batch = logs(args.logs, seed=r)
                base = in_process(batch)
                start = time.perf_counter()
                with ThreadPoolExecutor(args.clients) as pool:
                    statuses += list(pool.map(lambda i, b=batch: post(url, b[i], f"bench-{i}"), range(len(batch)), timeout=DEADLINE))
                rounds.append((base, time.perf_counter() - start))
            stored = get(url + "/v1/health")["reports"] - before
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
    failed = len(statuses) - statuses.count(201)
    n = len(texts)
    print(f"logs: {n}, clients: {args.clients}, workers: {args.workers}, database: {db.split(':')[0]}, rounds: {args.rounds}")
    for i, (base, took) in enumerate(rounds, 1):
        print(f"round {i}: in one process {n / base:7.1f} diagnoses/s, served {n / took:7.1f} diagnoses/s, ratio {base / took:.2f}")
    ratio = statistics.median(base / took for base, took in rounds)
    print(f"in one process (explain's work, warm):  {statistics.median(n / b for b, _ in rounds):8.1f} diagnoses/s (median)")
    print(f"served over loopback:                   {statistics.median(n / t for _, t in rounds):8.1f} diagnoses/s (median)")
    print(f"ratio (the median of the rounds'):      {ratio:8.2f}")
    print(f"posted: {len(statuses)}, stored: {stored}, failed requests: {failed}")
    return 0 if stored == len(statuses) and failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
