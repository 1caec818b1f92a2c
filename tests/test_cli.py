from __future__ import annotations

import json
import select
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, explain_in_fresh_process, run_cli, run_in_pty
from hypothesis import given, settings
from hypothesis import strategies as st

from kbdebug.api import diagnose_text
from kbdebug.kb.layout import rule_paths
from kbdebug.parse.needles import needles
from kbdebug.parse.regions import parse_text
from kbdebug.scan import scan_bytes

EXAMPLE = ROOT / "examples" / "segmentation_crash.log"


def test_explain_json_contract() -> None:
    proc = run_cli("explain", "--format", "json", str(EXAMPLE))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    inc = out["incidents"][0]
    assert out["source"].endswith("segmentation_crash.log")
    assert inc["rule"] == "nll_target_out_of_range" and 0 < inc["confidence"] <= 1
    assert inc["facts"]["kernel_file"] == "NLLLoss2d.cu" and inc["facts"]["first_thread"] == [96, 0, 0]
    assert inc["facts"]["innermost_user_frame"] == "/home/user/seg/train.py:151"
    assert inc["records"] and inc["fix"] and "class_targets" in inc["checks"]


@pytest.mark.parametrize("fmt", ["text", "markdown", "html", "json"])
def test_every_format_renders(fmt: str) -> None:
    proc = run_cli("explain", "--format", fmt, str(EXAMPLE))
    assert proc.returncode == 0 and "NLLLoss2d.cu" in proc.stdout.decode()
    assert b"\x1b[" not in proc.stdout  # not a TTY: no colour
    if fmt == "html":
        assert proc.stdout.startswith(b"<!DOCTYPE html>") and b"<script" not in proc.stdout


def test_exit_codes_and_one_line_errors(tmp_path: Path) -> None:
    clean = tmp_path / "clean.log"
    clean.write_text("epoch 1 loss 0.2\nepoch 2 loss 0.1\n")
    assert run_cli("explain", str(clean)).returncode == 1
    assert run_cli("explain", str(tmp_path)).returncode == 1  # a directory is its logs: nothing recognised in them
    (tmp_path / "empty").mkdir()
    for args in (
        ["explain", str(tmp_path / "missing.log")],
        ["explain", str(tmp_path / "empty")],
        ["explain", "--format", "yaml", str(clean)],
    ):
        proc = run_cli(*args)
        assert proc.returncode == 2
        assert proc.stderr.decode().count("\n") == 1 and b"Traceback" not in proc.stderr


def test_binary_and_broken_input_never_traceback(tmp_path: Path) -> None:
    blob = tmp_path / "blob.log"
    blob.write_bytes(bytes(range(256)) * 500 + b"\xff\xfeRuntimeError: CUDA error: misaligned address\r\n\x00")
    proc = run_cli("explain", "--format", "json", str(blob))
    assert proc.returncode == 0 and json.loads(proc.stdout)["incidents"][0]["rule"] == "misaligned_address"
    assert b"Traceback" not in proc.stderr


def test_broken_user_rule_is_skipped_with_one_warning(tmp_path: Path) -> None:
    (tmp_path / "x.toml").write_text("id = 3")
    proc = run_cli("explain", "--format", "json", "--kb", str(tmp_path), str(EXAMPLE))
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["incidents"][0]["rule"] == "nll_target_out_of_range"
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and "x.toml" in lines[0] and "rule skipped" in lines[0] and "id" in lines[0]


def test_missing_rule_dir_is_a_one_line_error(tmp_path: Path) -> None:
    proc = run_cli("explain", "--kb", str(tmp_path / "nope"), str(EXAMPLE))
    assert proc.returncode == 2 and b"nope" in proc.stderr and proc.stderr.count(b"\n") == 1


def test_pipe_passes_lines_through_before_input_ends() -> None:
    """The writer prints a line, then waits for the test to answer it: kbdebug must pass that line on while
    its input is still open (a filter that waited for the end would never let the writer go on)."""
    writer = "import sys\nprint('step 1', flush=True)\nsys.stdin.readline()\nprint('IndexError: Target 14 is out of bounds.', flush=True)\n"
    child = subprocess.Popen([sys.executable, "-c", writer], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    kb = subprocess.Popen([sys.executable, "-m", "kbdebug", "explain", "-"], stdin=child.stdout, stdout=subprocess.PIPE, cwd=ROOT)
    assert child.stdin is not None and kb.stdout is not None
    try:
        ready, _, _ = select.select([kb.stdout], [], [], 120)  # a hang guard, not a measurement
        assert ready, "kbdebug held the first line back while its input was open"
        assert kb.stdout.readline() == b"step 1\n"
        child.stdin.write(b"go\n")
        child.stdin.close()
        rest = kb.stdout.read()
        assert kb.wait(timeout=60) == 1 and b"nll_target_out_of_range" in rest  # a crash piped in fails the pipeline
        assert b"IndexError: Target 14 is out of bounds.\n" in rest
    finally:
        child.kill()
        kb.kill()


CLEAN_RUN = "import sys\nprint('epoch 1 loss 0.3')\nsys.exit(0)\n"
CRASH_RUN = "print('epoch 1')\nconfig = {}\nconfig['lr']\n"


def _pipeline(script: str, *args: str, stderr_too: bool = True) -> subprocess.CompletedProcess:
    """`python x.py 2>&1 | kbdebug explain ARGS -` as a CI job writes it (stdout and stderr of kbdebug kept apart)."""
    redirect = " 2>&1" if stderr_too else " 2>/dev/null"
    cmd = f"{sys.executable} -c {shlex.quote(script)}{redirect} | {sys.executable} -m kbdebug explain {' '.join(args)} -"
    return subprocess.run(["bash", "-c", cmd], capture_output=True, cwd=ROOT, timeout=120)


def test_pipe_gates_ci_the_right_way_round() -> None:
    """#30: piped in, a crash fails the pipeline and a clean run passes it, with the verdict on stderr."""
    crash = _pipeline(CRASH_RUN)
    assert crash.returncode == 3  # only the catch-all `other` for this message: still a failure
    named = subprocess.run(
        ["bash", "-c", f"cat {shlex.quote(str(EXAMPLE))} | {sys.executable} -m kbdebug explain -"], capture_output=True, cwd=ROOT
    )
    assert named.returncode == 1 and b"nll_target_out_of_range" in named.stdout
    clean = _pipeline(CLEAN_RUN)
    assert clean.returncode == 0 and clean.stdout == b"epoch 1 loss 0.3\n"
    assert b"nothing recognised in standard input" in clean.stderr


def test_pipe_without_stderr_hints_2_redirect() -> None:
    """The traceback went to the terminal, not the pipe: kbdebug says how to pass it in."""
    proc = _pipeline(CRASH_RUN, stderr_too=False)
    assert proc.returncode == 0 and b"2>&1 | kbdebug explain -" in proc.stderr


@pytest.mark.parametrize("fmt", ["json", "html"])
def test_pipe_keeps_machine_formats_whole(fmt: str) -> None:
    """Without -q the run's output is passed through on stderr: stdout is exactly the JSON or the HTML."""
    proc = subprocess.run(
        ["bash", "-c", f"cat {shlex.quote(str(EXAMPLE))} | {sys.executable} -m kbdebug explain -f {fmt} -"], capture_output=True, cwd=ROOT
    )
    assert proc.returncode == 1 and b"Epoch 3/100" in proc.stderr
    if fmt == "json":
        assert json.loads(proc.stdout)["incidents"][0]["rule"] == "nll_target_out_of_range"
    else:
        assert proc.stdout.startswith(b"<!DOCTYPE html>") and b"Epoch 3/100:" not in proc.stdout.split(b"<h1>")[0]


def test_exit_status_tells_named_cause_from_catch_all(tmp_path: Path) -> None:
    other = tmp_path / "other.log"
    other.write_text("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nKeyError: 'lr'\n")
    assert run_cli("explain", str(other)).returncode == 3
    assert run_cli("explain", str(EXAMPLE)).returncode == 0
    assert run_cli("explain", str(EXAMPLE), str(other)).returncode == 0  # a named cause in one of them


def test_global_kb_option_before_the_command(tmp_path: Path) -> None:
    proc = run_cli("--kb", str(tmp_path / "nope"), "explain", str(EXAMPLE))
    assert proc.returncode == 2 and b"nope" in proc.stderr
    listed = run_cli("--kb", str(tmp_path), "rules", "list")
    assert listed.returncode == 0 and b"nll_target_out_of_range" in listed.stdout


def test_directory_skips_binary_files_and_names_the_unrecognised(tmp_path: Path) -> None:
    (tmp_path / "model.pt").write_bytes(b"PK\x03\x04" + bytes(range(256)) * 64)
    (tmp_path / "crash.log").write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "clean.log").write_text("epoch 1 loss 0.3\n")
    proc = run_cli("explain", str(tmp_path))
    assert proc.returncode == 0
    assert b"skipped 1 binary file (not a text log)" in proc.stderr and b"model.pt" in proc.stderr
    summary = proc.stdout.decode().split("summary: ")[1]
    assert summary.startswith("2 logs, 1 distinct crash, nothing recognised in 1")
    assert f"nothing recognised in: {tmp_path / 'clean.log'}" in summary
    assert "`" not in summary and max(len(line) for line in summary.splitlines()) <= 100


def test_quiet_pipe_prints_only_the_diagnosis() -> None:
    proc = run_cli("explain", "-q", "--format", "json", "-", stdin=EXAMPLE.read_bytes())
    assert json.loads(proc.stdout)["incidents"][0]["rule"] == "nll_target_out_of_range"
    assert proc.returncode == 0  # -q: standard input read as a saved log, with the reader's statuses
    assert run_cli("explain", "-q", "-", stdin=b"epoch 1\n").returncode == 1


def test_rules_commands(tmp_path: Path) -> None:
    listing = run_cli("rules", "list").stdout.decode()
    assert "scatter_gather_index_oob" in listing
    assert len(listing.splitlines()) == len(rule_paths(ROOT / "knowledge"))
    shown = run_cli("rules", "show", "embedding_index_oob").stdout.decode()
    assert "What it means" in shown and "How to fix" in shown
    assert run_cli("rules", "lint", str(ROOT / "knowledge")).returncode == 0
    (tmp_path / "bad.toml").write_text("title = 1")
    assert run_cli("rules", "lint", str(tmp_path)).returncode == 1


def test_parse_command_prints_records() -> None:
    proc = run_cli("parse", "--format", "json", str(EXAMPLE))
    kinds = [r["kind"] for r in json.loads(proc.stdout)]
    assert "kernel_assert" in kinds and "exception" in kinds and "cuda_error" in kinds


def test_explain_never_imports_torch() -> None:
    _, modules = explain_in_fresh_process("-q", str(EXAMPLE))
    assert "torch" not in modules, "torch imported"


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000))
def test_random_bytes_never_raise(data: bytes) -> None:
    regions = scan_bytes(data, needles)
    last = data.count(b"\n") + 1
    assert all(1 <= ln.no <= last and "\n" not in ln.text for r in regions for ln in r.lines)
    diagnose_text(data.decode("utf-8", "replace"))


ALPHABET = st.sampled_from(
    list("abcXYZ0129 :,.[]()`'\"=\n\r\t\x1b_-/\\")
    + [
        "Assertion `",
        "` failed.",
        "block: [",
        "thread: [",
        "=========",
        "RuntimeError: ",
        "CUDA error: ",
        "Traceback (most recent call last):\n",
        '  File "a.py", line 3, in f\n',
        "Tried to allocate ",
        "NCCL",
        "Warning",
        "frame #0: ",
        "terminate called after throwing an instance of '",
        "GiB",
        "torch.Size([",
    ]
)


@settings(max_examples=80, deadline=None)
@given(st.lists(ALPHABET, max_size=200).map("".join))
def test_random_log_like_text_never_raises(text: str) -> None:
    diagnose_text(text)
    parse_text(text)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_mutated_example_never_raises(data: st.DataObject) -> None:
    raw = bytearray(EXAMPLE.read_bytes())
    for _ in range(data.draw(st.integers(1, 20))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        op = data.draw(st.sampled_from(["flip", "cut", "dup"]))
        if op == "flip":
            raw[pos] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del raw[pos : pos + data.draw(st.integers(1, 40))]
        else:
            raw[pos:pos] = raw[pos : pos + 30]
        if not raw:
            break
    diagnose_text(bytes(raw).decode("utf-8", "replace"))


def test_version_short_help_and_format_choices() -> None:
    from kbdebug import __version__

    assert run_cli("--version").stdout.decode().strip() == f"kbdebug {__version__}"
    helped = run_cli("explain", "-h", env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"})
    assert helped.returncode == 0 and "<text|markdown|json|html>" in helped.stdout.decode()
    bad = run_cli("explain", "--format", "yaml", str(EXAMPLE))
    assert bad.returncode == 2 and bad.stderr.count(b"\n") == 1 and b"'markdown'" in bad.stderr


def test_json_output_carries_its_schema_version() -> None:
    out = json.loads(run_cli("explain", "--format", "json", str(EXAMPLE)).stdout)
    assert out["schema_version"] == 1
    doc = (ROOT / "docs" / "json.md").read_text()
    assert all(f"`{key}`" in doc for key in out)  # every top-level key is documented
    assert all(f"`{key}`" in doc for key in out["incidents"][0])


def test_text_follows_the_terminal_width_and_is_stable_when_piped() -> None:
    import os

    env = {**os.environ, "COLUMNS": "60", "NO_COLOR": "1"}
    shown, status = run_in_pty([sys.executable, "-m", "kbdebug", "explain", str(EXAMPLE)], env=env)
    lines = shown.decode(errors="replace").replace("\r", "").splitlines()

    def guide(lines: list[str]) -> list[str]:  # the wrapped prose: the section "How to confirm"
        start = lines.index("How to confirm")
        return lines[start + 1 : lines.index("", start + 1)]

    assert status == 0 and len(guide(lines)) > 1 and max(len(line) for line in guide(lines)) <= 60
    piped = run_cli("explain", str(EXAMPLE), env=env).stdout.decode().splitlines()
    assert 60 < max(len(line) for line in guide(piped)) <= 100


def test_explain_many_logs_streams_each_then_groups_by_signature(tmp_path: Path) -> None:
    oom = (
        'Traceback (most recent call last):\n  File "/j{i}/train.py", line {n}, in step\n    y = model(x)\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {i}.00 GiB. GPU 0 has a total capacity of 79 GiB\n"
    )
    for i in range(1, 5):
        (tmp_path / "runs" / f"r{i}").mkdir(parents=True)
        (tmp_path / "runs" / f"r{i}" / "out.log").write_text(oom.format(i=i, n=40 + i))
    (tmp_path / "runs" / "bad.log").write_text(EXAMPLE.read_text())
    (tmp_path / "runs" / "clean.log").write_text("all good\n")
    proc = run_cli("explain", "--format", "json", str(tmp_path / "runs"))
    assert proc.returncode == 0
    lines = [json.loads(ln) for ln in proc.stdout.decode().splitlines()]
    assert [Path(o["source"]).name for o in lines[:-1]] == ["bad.log", "clean.log", "out.log", "out.log", "out.log", "out.log"]
    summary = lines[-1]["summary"]
    assert (summary["logs"], summary["crashes"], len(summary["nothing_recognised"])) == (6, 2, 1)
    top = summary["groups"][0]
    assert (top["rule"], top["count"], len(top["members"])) == ("cuda_oom", 4, 4)
    text = run_cli("explain", str(tmp_path / "runs" / "r*" / "*.log")).stdout.decode()
    assert "summary: 4 logs, 1 distinct crash" in text and "cuda_oom" in text.split("summary: ")[1]


def test_logs_diagnosed_in_worker_processes_render_as_json(tmp_path: Path) -> None:
    """From PARALLEL_MIN logs on, workers diagnose and the parent renders what they sent back."""
    from kbdebug.cli.batch import PARALLEL_MIN

    for i in range(PARALLEL_MIN + 2):
        (tmp_path / f"{i:03d}.log").write_text(EXAMPLE.read_text() if i % 2 else f"IndexError: Target {i + 10} is out of bounds.\n")
    proc = run_cli("explain", "--format", "json", "--quiet", str(tmp_path))
    assert proc.returncode == 0, proc.stderr.decode()[-800:]
    lines = [json.loads(ln) for ln in proc.stdout.decode().splitlines()]
    assert len(lines) == PARALLEL_MIN + 3
    assert {o["incidents"][0]["records"][0]["kind"] for o in lines[:-1]} == {"kernel_assert", "message"}
    assert lines[-1]["summary"]["crashes"] == 2


def test_many_logs_show_progress_on_a_terminal(tmp_path: Path) -> None:
    import os

    for i in range(25):
        (tmp_path / f"{i:02d}.log").write_text(f"RuntimeError: CUDA error: misaligned address {i}\n")
    shown, status = run_in_pty(
        [sys.executable, "-m", "kbdebug", "explain", str(tmp_path)], env={**os.environ, "TERM": "xterm", "COLUMNS": "100"}
    )
    text = shown.decode(errors="replace")
    assert status == 0
    assert "diagnosing" in text  # rich's bar, on the terminal's stderr
    assert "summary: 25 logs, 1 distinct crash" in text


def _command_paths() -> list[tuple[list[str], Any]]:
    """Every command and group of the CLI with its path, read from the app itself."""
    import typer

    from kbdebug.cli.app import app

    out, todo = [], [([], typer.main.get_command(app))]
    while todo:
        path, command = todo.pop()
        out.append((path, command))
        todo += [([*path, name], sub) for name, sub in getattr(command, "commands", {}).items()]
    return out


def test_every_help_shows_metavars_and_choices_not_type_tags() -> None:
    import os
    import re

    commands = _command_paths()
    assert {" ".join(p) for p, _ in commands} >= {"", "explain", "run", "parse", "rules", "rules list", "rules show", "rules lint"}
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    for path, command in commands:
        proc = run_cli(*path, "--help", env=env)
        shown = proc.stdout.decode()
        assert proc.returncode == 0 and "Show this message and exit." in shown, path
        assert re.findall(r"<[^<>|\s]*>", shown) == [], (path, shown)  # `<bool>`, `<list[str]>`, `<text>`, `<path>`
        usage = next(line for line in shown.splitlines() if "Usage:" in line)
        for param in command.params:
            if param.param_type_name == "argument":
                assert param.metavar and usage.rstrip().endswith(param.metavar) and param.metavar in shown.split("Usage:")[1]
                assert "{" not in usage and "..." * 2 not in usage
            elif getattr(param, "is_flag", False):
                row = next(line for line in shown.splitlines() if param.opts[0] in line)
                head = row.split((param.help or "").split()[0])[0]  # the names, then the help: nothing between
                for name in sorted([*param.opts, *param.secondary_opts], key=len, reverse=True):
                    head = head.replace(name, "")
                assert head.strip("│ ,") == "", row  # names of one option are listed with commas
    explain = run_cli("explain", "-h", env=env).stdout.decode()
    assert "<text|markdown|json|html>" in explain and "FILE..." in explain
    assert "<text|json>" in run_cli("parse", "-h", env=env).stdout.decode()


def test_shell_completion_offers_the_format_choices() -> None:
    import os

    env = {**os.environ, "_KBDEBUG_COMPLETE": "complete_bash", "COMP_WORDS": "kbdebug explain --format ", "COMP_CWORD": "3"}
    code = "import sys; sys.argv = ['kbdebug']; from kbdebug.cli.app import app; app(prog_name='kbdebug')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, cwd=ROOT, timeout=60)
    assert proc.stdout.decode().split() == ["text", "markdown", "json", "html"]


def test_many_logs_in_html_are_one_document(tmp_path: Path) -> None:
    """#30: one <html> with every diagnosis and the summary inside <body>, not a document per log."""
    for k in range(3):
        (tmp_path / f"r{k}.log").write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "clean.log").write_text("epoch 1\n")
    page = run_cli("explain", "-f", "html", str(tmp_path)).stdout.decode()
    assert page.startswith("<!DOCTYPE html>") and page.count("<html") == 1 and page.count("</body></html>") == 1
    body = page[page.index("<body>") : page.index("</body>")]
    assert body.count("<h2>Root cause") == 3 and 'class="summary"' in body and "clean.log" in body.split('class="summary"')[1]


def test_the_fast_reader_knows_every_option_of_explain() -> None:
    """`kbdebug explain` reads its options without typer (cli_explain.parse_explain_args); it must know exactly explain's options."""
    import typer.main

    from kbdebug.cli.app import app
    from kbdebug.cli.explain import FAST_OPTIONS

    command = typer.main.get_command(app).commands["explain"]  # type: ignore[attr-defined]
    names = {name for param in command.params for name in (*param.opts, *param.secondary_opts) if name.startswith("-")}
    assert names - {"-h", "--help"} == set(FAST_OPTIONS)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["a.log"], {"files": ["a.log"], "fmt": "text", "quiet": False, "kb": None, "report": None, "facts": False}),
        (["-v", "a.log"], {"files": ["a.log"], "facts": True}),
        (["a.log", "--format", "json", "b.log"], {"files": ["a.log", "b.log"], "fmt": "json"}),  # options between the logs
        (["-q", "-f=html", "--kb", "r", "--kb=s", "-"], {"files": ["-"], "quiet": True, "fmt": "html", "kb": [Path("r"), Path("s")]}),
        (["--report", "http://x", "--", "-q"], {"files": ["-q"], "report": "http://x"}),  # after --, a log named -q
        (["--format", "yaml", "a.log"], None),  # typer says what is wrong
        (["-qf", "json", "a.log"], None),
        (["--quiet=yes", "a.log"], None),
        (["--help"], None),
        (["-f"], None),
        ([], None),
    ],
)
def test_fast_explain_reader(args: list[str], expected: dict | None) -> None:
    from kbdebug.cli.explain import parse_explain_args

    got = parse_explain_args(args)
    if expected is None:
        assert got is None
        return
    assert got is not None
    assert {k: got[k] for k in expected} == expected


def test_explain_starts_without_typer() -> None:
    """The installed `kbdebug` and `python -m kbdebug` start at kbdebug.__main__: a plain `explain` needs no typer."""
    status, modules = explain_in_fresh_process("-q", "-f", "json", str(EXAMPLE), entry="kbdebug.__main__")
    assert status == 0, status
    assert "typer" not in modules, "typer imported"


def test_text_report_lists_facts_only_on_request() -> None:
    """#37: the text report is the cause, what it means, the fix and the evidence; the facts table (templates,
    shape relations) only with --facts/--verbose; JSON keeps every fact either way."""
    plain = run_cli("explain", str(EXAMPLE)).stdout.decode()
    assert "How to fix" in plain and "Evidence" in plain
    assert "Facts" not in plain and "message_template" not in plain
    for flag in ("--facts", "--verbose", "-v"):
        full = run_cli("explain", flag, str(EXAMPLE)).stdout.decode()
        assert "\nFacts\n" in full and "innermost_user_frame" in full
    data = json.loads(run_cli("explain", "--format", "json", str(EXAMPLE)).stdout)
    assert "innermost_user_frame" in data["incidents"][0]["facts"]


def test_a_run_that_exits_0_with_a_named_cause_is_diagnosed_through_the_pipe() -> None:
    """#37: torch warned that a loss broadcast its target and the run finished with 0: the pipe passes the run
    through, prints the diagnosis, and fails the pipeline (1, a named cause) as README's table says."""
    warn = (
        "import sys\n"
        "print('loss.py:610: UserWarning: Using a target size (torch.Size([4])) that is different to the input size "
        "(torch.Size([4, 1])). This will likely lead to incorrect results due to broadcasting.', file=sys.stderr)\n"
        "print('epoch 1 loss 0.3')\nsys.exit(0)\n"
    )
    proc = _pipeline(warn)
    out = proc.stdout.decode()
    assert proc.returncode == 1
    assert out.startswith("loss.py:610: UserWarning") and "epoch 1 loss 0.3\n" in out
    assert "[target_shape_mismatch, confidence" in out
