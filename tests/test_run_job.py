"""`kbdebug run` as a job wrapper: --retry, how the child ended (signals, statuses), saved logs that survive kills."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from test_run import KBDEBUG, env, kb_run, script

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and exit statuses")

PREEMPTION = "slurmstepd: error: *** JOB 1234 ON node01 CANCELLED AT 2024-05-01T10:00:00 DUE TO PREEMPTION ***"

# A job the scheduler preempts on its first `times` runs (it says so and exits 143, as Slurm's SIGTERM
# leaves it), then one that finishes; each run is counted in a state file beside it.
PREEMPTED = textwrap.dedent("""
    import sys
    from pathlib import Path
    state = Path(sys.argv[1])
    n = int(state.read_text()) + 1 if state.exists() else 1
    state.write_text(str(n))
    print(f"attempt {{n}}: step 1", flush=True)
    if n <= {times}:
        print({line!r}, file=sys.stderr, flush=True)
        sys.exit(143)
    print(f"attempt {{n}}: done")
""")

# A label bug: a class index the logits do not have. A rerun fails the same way.
LABEL_BUG = textwrap.dedent("""
    import sys
    from pathlib import Path
    state = Path(sys.argv[1])
    state.write_text(str(int(state.read_text()) + 1 if state.exists() else 1))
    import torch
    torch.nn.functional.cross_entropy(torch.randn(2, 3), torch.tensor([5, 0]))
""")

# For a kbdebug without a bundled rule for a job stopped from outside (rule-ids.md: job_terminated, retry
# "yes"), a user rule says the same of the status a scheduler's SIGTERM leaves. The tests below assert what
# a cause whose retry is "yes" does, whichever rule names it.
STOPPED_RULE = """
id = "test_stopped_from_outside"
title = "stopped from outside (test rule)"
retry = "yes"

[[match]]
kind = "process_exit"
fields = { signal = '^SIGTERM$' }
confidence = 0.9

[guide]
what = "The job was stopped by {{ signal }} (status {{ exit_code }})."
why = "Something outside the job stopped it."
confirm = "Read the scheduler's record of the job."
fix = "Run it again."
"""


def retry_yes_kb(tmp_path: Path) -> list[str]:
    """`--kb` arguments under which a preempted job's cause says retry "yes"."""
    from kbdebug.kb import load_kb

    bundled = load_kb().get("job_terminated")
    if bundled is not None and bundled.retry == "yes":
        return []
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "stopped.toml").write_text(STOPPED_RULE)
    return ["--kb", str(rules)]


def kbdebug_lines(stderr: str) -> list[str]:
    """kbdebug's lines about rerunning the job."""
    return [line for line in stderr.splitlines() if line.startswith(("kbdebug: rerunning", "kbdebug: not rerunning"))]


def test_a_preempted_job_is_rerun_until_it_succeeds(tmp_path: Path) -> None:
    child = script(tmp_path, PREEMPTED.format(times=1, line=PREEMPTION))
    state, save = tmp_path / "state", tmp_path / "saved"
    res = kb_run(*retry_yes_kb(tmp_path), "--retry", "2", "--save", str(save), "--", sys.executable, child, str(state))
    assert res.returncode == 0, res.stderr
    assert state.read_text() == "2"
    assert res.stdout.splitlines() == ["attempt 1: step 1", "attempt 2: step 1", "attempt 2: done"]
    [line] = kbdebug_lines(res.stderr)
    assert line.startswith("kbdebug: rerunning (1 of 2): ") and "retry: yes" in line, line
    # each attempt keeps its own logs
    assert sorted(p.name for p in save.iterdir()) == ["run-001", "run-002"]
    assert PREEMPTION in (save / "run-001" / "run1.log").read_text()
    assert (save / "run-002" / "run1.log").read_text() == "attempt 2: step 1\nattempt 2: done\n"
    assert [r["returncode"] for r in json.loads((save / "run-001" / "diagnosis.json").read_text())["runs"]] == [143]


def test_reruns_stop_at_the_limit_with_the_last_status(tmp_path: Path) -> None:
    child = script(tmp_path, PREEMPTED.format(times=5, line=PREEMPTION))
    state = tmp_path / "state"
    res = kb_run(*retry_yes_kb(tmp_path), "--retry", "2", "--", sys.executable, child, str(state))
    assert res.returncode == 143
    assert state.read_text() == "3"  # the first run and two reruns
    lines = kbdebug_lines(res.stderr)
    assert [line.split(":")[1].strip() for line in lines] == ["rerunning (1 of 2)", "rerunning (2 of 2)", "not rerunning"]
    assert lines[-1].endswith("but --retry 2 allows no more reruns")


def test_a_label_bug_is_never_rerun(tmp_path: Path) -> None:
    child = script(tmp_path, LABEL_BUG)
    state = tmp_path / "state"
    res = kb_run(*retry_yes_kb(tmp_path), "--retry", "2", "--", sys.executable, child, str(state))
    assert res.returncode == 1
    assert state.read_text() == "1"
    assert "IndexError: Target 5 is out of bounds." in res.stderr
    [line] = kbdebug_lines(res.stderr)
    assert line.startswith("kbdebug: not rerunning: nll_target_out_of_range (")
    assert line.endswith("retry: no): a bug in code or data: a rerun would fail the same way")


def test_an_unrecognised_failure_is_not_rerun(tmp_path: Path) -> None:
    res = kb_run("--retry", "3", "--", sys.executable, "-c", "print('step'); raise SystemExit(5)")
    assert res.returncode == 5
    assert res.stdout == "step\n"
    assert kbdebug_lines(res.stderr) == ["kbdebug: not rerunning: nothing in the output names a cause that a rerun would fix"]


def test_without_retry_a_preempted_job_runs_once_and_says_nothing_of_reruns(tmp_path: Path) -> None:
    child = script(tmp_path, PREEMPTED.format(times=1, line=PREEMPTION))
    state = tmp_path / "state"
    res = kb_run(*retry_yes_kb(tmp_path), "--", sys.executable, child, str(state))
    assert res.returncode == 143
    assert state.read_text() == "1"
    assert kbdebug_lines(res.stderr) == []


def test_a_job_stopped_through_kbdebug_is_not_rerun(tmp_path: Path) -> None:
    """The scheduler stopping the whole job (SIGTERM to kbdebug) ends the loop, whatever the cause says."""
    child = script(
        tmp_path,
        textwrap.dedent(f"""
        import signal, sys, time
        def stop(signum, frame):
            print({PREEMPTION!r}, file=sys.stderr, flush=True)
            sys.exit(143)
        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        time.sleep(30)
    """),
    )
    proc = subprocess.Popen(
        [*KBDEBUG, *retry_yes_kb(tmp_path), "--retry", "2", "--", sys.executable, child],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env(),
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert out == ""  # no second "ready": no second run
    assert kbdebug_lines(err) == ["kbdebug: not rerunning: kbdebug itself received SIGTERM"]


EXIT_CODES = [1, 2, 137, 139, 143]
SIGNALS = [signal.SIGKILL, signal.SIGSEGV, signal.SIGTERM, signal.SIGABRT]


@pytest.mark.parametrize("code", EXIT_CODES)
def test_exit_codes_pass_through(code: int) -> None:
    assert kb_run("--", sys.executable, "-c", f"raise SystemExit({code})").returncode == code


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_deaths_by_signal_give_128_plus_n(sig: signal.Signals) -> None:
    res = kb_run("--", "sh", "-c", f"echo before; kill -{sig.name[3:]} $$")
    assert res.returncode == 128 + int(sig)
    assert res.stdout == "before\n"


# A rule that reads how the child ended; `kbdebug run` must hand it the status, since a segfault prints nothing.
STATUS_RULE = """
id = "test_status_signal"
title = "ended by a signal (test rule)"
retry = "no"
priority = 99

[[match]]
kind = "process_exit"
fields = { reporter = '^status$' }
confidence = 0.9

[guide]
what = "The command ended by {{ signal }} (status {{ exit_code }})."
why = "A signal ended it."
confirm = "Look at the status."
fix = "Find what sent it."
"""


@pytest.mark.parametrize(
    ("child", "name", "status"),
    [
        ("kill -SEGV $$", "SIGSEGV", 139),
        ("kill -ABRT $$", "SIGABRT", 134),
        ("kill -BUS $$", "SIGBUS", 135),
        ("exit 137", "SIGKILL", 137),  # what a shell reports for its child the OOM killer took
    ],
)
def test_the_status_reaches_the_diagnosis(tmp_path: Path, child: str, name: str, status: int) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "status.toml").write_text(STATUS_RULE)
    res = kb_run("--kb", str(rules), "-f", "json", "--", "sh", "-c", f"echo line one; echo line two >&2; {child}")
    assert res.returncode == status
    assert res.stderr.startswith("line two\n{")  # the child's stderr, then the diagnosis
    root = json.loads(res.stderr.removeprefix("line two\n"))["incidents"][0]
    assert root["rule"] == "test_status_signal"
    assert (root["facts"]["signal"], root["facts"]["exit_code"]) == (name, status)
    [rec] = root["records"]
    assert (rec["reporter"], rec["first_line"]) == ("status", 3)  # after the output's two lines
    assert root["guide"]["what"] == f"The command ended by {name} (status {status})."
    # without the test's rule, the bundled ones name it: a death in native code, or the OOM killer's SIGKILL
    bundled = kb_run("-f", "json", "--", "sh", "-c", f"echo line one; {child}")
    root = json.loads(bundled.stderr)["incidents"][0]
    cause = "oom_killed" if name == "SIGKILL" else "native_crash"
    assert (root["rule"], root["facts"]["signal"], root["facts"]["exit_code"]) == (cause, name, status)
    assert f"with {name} (exit {status})" in root["guide"]["what"]


def test_an_ordinary_exit_status_is_no_signal(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "status.toml").write_text(STATUS_RULE)
    res = kb_run("--kb", str(rules), "--", "sh", "-c", "exit 3")
    assert res.returncode == 3
    assert "test_status_signal" not in res.stderr
    assert "exited with status 3; nothing in its output matched" in res.stderr


NOISY_DEATH = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    log = Path(sys.argv[1]) / "run-001" / "run1.log"
    print("log exists before the child runs:", log.exists())
    for i in range(2000):
        print(f"out {i}")
        print(f"err {i}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), getattr(signal, sys.argv[2]))
""")


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSEGV"])
def test_saved_log_keeps_everything_a_killed_child_wrote(tmp_path: Path, sig: str) -> None:
    save = tmp_path / "saved"
    res = kb_run("--save", str(save), "--", sys.executable, script(tmp_path, NOISY_DEATH), str(save), sig)
    assert res.returncode == 128 + getattr(signal, sig)
    run = save / "run-001"
    out = (run / "run1.stdout.log").read_text().splitlines()
    assert out == ["log exists before the child runs: True", *(f"out {i}" for i in range(2000))]
    assert (run / "run1.stderr.log").read_text().splitlines() == [f"err {i}" for i in range(2000)]
    merged = (run / "run1.log").read_text().splitlines()  # the two streams interleaved by whole lines
    assert sorted(merged) == sorted([*out, *(f"err {i}" for i in range(2000))])
    assert [line for line in merged if line.startswith("out ")] == out[1:]


def test_saved_log_survives_kbdebug_itself_being_killed(tmp_path: Path) -> None:
    """Written as each chunk arrives, not held in a buffer: a SIGKILL to the wrapper (a cgroup's OOM kill)
    loses nothing that was already shown."""
    save = tmp_path / "saved"
    child = script(
        tmp_path,
        textwrap.dedent("""
        import os, time
        for i in range(50):
            print(f"line {i}")
        print("pid", os.getpid(), flush=True)
        time.sleep(30)
    """),
    )
    proc = subprocess.Popen(
        [*KBDEBUG, "--save", str(save), "--", sys.executable, child], stdout=subprocess.PIPE, env=env(), stdin=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    shown = []
    while not shown or not shown[-1].startswith("pid "):
        shown.append(proc.stdout.readline().rstrip("\n"))
    proc.kill()
    proc.wait(timeout=30)
    os.kill(int(shown[-1].split()[1]), signal.SIGKILL)  # the orphaned child
    assert (save / "run-001" / "run1.log").read_text().splitlines() == shown


def test_the_fast_reader_knows_every_option_of_run() -> None:
    """`kbdebug run` reads its options without typer (cli_run.parse_run_args); it must know exactly run's options."""
    import typer.main

    from kbdebug.cli.app import app
    from kbdebug.cli.run import FAST_OPTIONS

    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    names = {name for param in command.params for name in (*param.opts, *param.secondary_opts) if name.startswith("-")}
    assert names - {"-h", "--help"} == set(FAST_OPTIONS)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--", "python", "t.py"], {"cmd": ["python", "t.py"]}),
        (["python", "t.py", "--retry", "2"], {"cmd": ["python", "t.py", "--retry", "2"]}),  # after CMD: the command's
        (
            ["--retry", "2", "--save=runs", "-f", "json", "--no-rerun", "--", "x"],
            {"retry": 2, "save": Path("runs"), "fmt": "json", "rerun": False},
        ),
        (["--kb", "a", "--kb=b", "--sanitizer", "memcheck", "x"], {"kb": [Path("a"), Path("b")], "sanitizer": "memcheck"}),
        (["--retry", "-1", "--", "x"], None),  # typer says what is wrong
        (["--retry", "two", "--", "x"], None),
        (["-f", "yaml", "--", "x"], None),
        (["--help"], None),
        (["--rerun=yes", "x"], None),
        (["--save"], None),
        (["--"], None),
    ],
)
def test_fast_reader(args: list[str], expected: dict | None) -> None:
    from kbdebug.cli.run import parse_run_args

    got = parse_run_args(args)
    if expected is None:
        assert got is None
        return
    assert got is not None
    assert {k: got[k] for k in expected} == expected


@pytest.mark.parametrize(
    ("entry", "also"),
    [("kbdebug.cli.app", ()), ("kbdebug.__main__", ("typer",))],  # the installed `kbdebug` and `python -m kbdebug` start at __main__
)
def test_a_run_that_succeeds_loads_neither_pydantic_nor_the_pipeline(entry: str, also: tuple[str, ...]) -> None:
    """What a wrapper costs its job: a child that exits 0 needs no diagnosis (benchmarks/run_overhead.py)."""
    heavy = ("pydantic", "lark", "jinja2", "kbdebug.parse", "kbdebug.kb", "kbdebug.api", "kbdebug.scan", *also)
    code = textwrap.dedent(f"""
        import sys
        sys.argv = ["kbdebug", "run", "--", "true"]
        from {entry} import main
        try:
            main()
        except SystemExit as exc:
            heavy = sorted({{m.split(".")[0] if not m.startswith("kbdebug") else m for m in sys.modules if m.startswith({heavy!r})}})
            print(exc.code, heavy)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), timeout=60)
    assert res.stdout.strip() == "0 []", res.stderr


@pytest.mark.parametrize("steps", [3, 30_000])
def test_a_run_that_succeeds_printing_no_evidence_loads_no_parser(steps: int) -> None:
    """A job that prints training lines and exits 0 (a few, or a megabyte and more) is searched for the needles
    and nothing else: no grammar, no record class, no normaliser, not even hashlib's OpenSSL (the shipped needles'
    freshness is a zlib checksum) (benchmarks/run_overhead.py, the training child)."""
    heavy = ("pydantic", "lark", "jinja2", "kbdebug.records", "kbdebug.normalise", "kbdebug.parse.grammar", "kbdebug.kb", "kbdebug.api")
    heavy += ("hashlib", "_hashlib")
    child = f"for i in range({steps}): print(f'step {{i}} loss={{1 / (i + 1):.6f}} lr=0.001', 'x' * 40)"
    code = textwrap.dedent(f"""
        import sys
        sys.argv = ["kbdebug", "run", "--", sys.executable, "-c", {child!r}]
        from kbdebug.__main__ import main
        try:
            main()
        except SystemExit as exc:
            heavy = sorted({{m for m in sys.modules if m.startswith({heavy!r})}})
            print(exc.code, heavy, "kbdebug.scan" in sys.modules, file=sys.stderr)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), timeout=60)
    assert res.stdout.count("\n") == steps  # past a megabyte, the needles were searched as it arrived
    assert res.stderr.strip() == "0 [] True", res.stderr


@pytest.mark.parametrize(
    ("output", "found"),
    [
        (b"epoch 1 loss 0.5\n", False),
        (b"epoch 1 loss 0.5\nRuntimeError: CUDA error: device-side assert triggered\n", True),
        (b"step 3 loss 0.1 " * 100_000 + b"\n", False),
        (b"step 3 loss 0.1\n" * 100_000 + b"RuntimeError: CUDA out of memory.\n" + b"step 4\n" * 10, True),
        (b"step 3 loss 0.1\n" * 100_000 + b"RuntimeError: CUDA out of memory.", True),  # the last line, no newline yet
    ],
)
def test_the_scanner_says_whether_a_needle_was_found_in_small_and_large_output(output: bytes, found: bool) -> None:
    """`kbdebug run` diagnoses a job that succeeded only when its output holds a needle: a small output (read
    whole by the scanner, never searched) is searched for them too."""
    from kbdebug.parse.needles import needles
    from kbdebug.scan import Scanner

    scanner = Scanner(needles)
    for i in range(0, len(output), 1 << 16):
        scanner.feed(output[i : i + (1 << 16)])
    assert scanner.found() is found


def test_a_large_output_is_scanned_as_it_arrives_and_diagnosed(tmp_path: Path) -> None:
    """Past the held amount the scanner is built mid-run; the error at the end of a long output is still read."""
    child = script(
        tmp_path,
        "import sys, torch\nfor i in range(60_000):\n    print('step', i, 'x' * 80)\ntorch.nn.Conv2d(3, 8, 3)(torch.randn(1, 4, 8, 8))\n",
    )
    res = kb_run("--", sys.executable, child)
    assert res.returncode == 1
    assert len(res.stdout) > 5 << 20
    assert "conv_channel_mismatch" in res.stderr


def test_a_scanner_that_cannot_be_built_never_stops_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pumps build the scanner mid-run; should that fail (a broken install), they must go on copying the
    child's output, or the child would block on a full pipe."""
    from kbdebug.runtime import runner

    def broken(self: runner._Feed) -> None:
        raise ImportError("no lark")

    feed = runner._Feed(hold=10)
    monkeypatch.setattr(runner._Feed, "scanner", broken)
    for _ in range(5):
        feed.feed(b"a line of output\n")
    assert (feed.broken, feed.lines, feed.held) == (True, 5, [])


@pytest.mark.parametrize(
    ("retry", "again", "why"),
    [
        ("yes", True, "rerunning (1 of 2): gpu_lost (GPU lost, retry: yes): the job was stopped by its infrastructure"),
        ("no", False, "not rerunning: gpu_lost (GPU lost, retry: no): a bug in code or data: a rerun would fail the same way"),
        ("smaller", False, "not rerunning: gpu_lost (GPU lost, retry: smaller): out of a resource: a rerun as is would run out again"),
        ("after-install", False, "not rerunning: gpu_lost (GPU lost, retry: after-install): the environment is broken: fix the install"),
    ],
)
def test_only_a_cause_whose_retry_is_yes_is_rerun(retry: str, again: bool, why: str) -> None:
    from types import SimpleNamespace

    from kbdebug.runtime.job_end import retry_decision

    diag = SimpleNamespace(root=SimpleNamespace(rule="gpu_lost", title="GPU lost", facts={"retry": retry}))
    got = retry_decision(diag, None, 0, 2)
    assert got[0] is again and got[1].startswith(why), got[1]
    assert retry_decision(diag, None, 2, 2)[0] is False  # the reruns are spent
    assert retry_decision(diag, int(signal.SIGINT), 0, 2) == (False, "not rerunning: kbdebug itself received SIGINT")


@pytest.mark.parametrize("hold", [1 << 30, 4096, 64 * 1024])
def test_the_output_held_for_the_diagnosis_reads_as_the_whole_log(hold: int) -> None:
    """Held in memory, or scanned as it arrives past `hold`: the run's regions are those of its whole output
    read at once, and its lines are counted."""
    from kbdebug.parse.needles import needles
    from kbdebug.runtime import runner
    from kbdebug.scan import scan_bytes

    lines = [b"step %d loss 0.5 %s\n" % (i, b"x" * 60) for i in range(30_000)]
    lines[12_000:12_000] = [b"Traceback (most recent call last):\n", b'  File "t.py", line 3, in <module>\n', b"RuntimeError: boom\n"]
    lines.append(b"RuntimeError: CUDA error: an illegal memory access was encountered\n")
    feed = runner._Feed(hold=hold)
    for i in range(0, len(lines), 7):
        feed.feed(b"".join(lines[i : i + 7]))
    got = feed.scanner().close()
    expected = scan_bytes(b"".join(lines), needles)
    assert feed.lines == len(lines)
    assert [(r.first_line, [ln.text for ln in r.lines]) for r in got] == [(r.first_line, [ln.text for ln in r.lines]) for r in expected]
    assert len(got) >= 2
