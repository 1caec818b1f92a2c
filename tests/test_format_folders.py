"""#29: a format is its folder (grammars/<format>/: grammar, cases, derived readings) and its reader
(kbdebug/parse/readers/<format>.py). Adding one touches nothing else: the registry finds it, the scanner
searches for its lines, the readings ship in its folder, and the rules read its records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# ROCm's report of a GPU page fault, a format kbdebug does not ship: written as a new folder and a reader only.
GRAMMAR = r"""// ROCm's HIP runtime on a GPU page fault: `Memory access fault by GPU node-2 (Agent handle: 0x55d0) on address
// 0x7f2a. Reason: Page not present or supervisor privilege.`
// parser: earley
// scan for: *

start: fault

fault: "Memory access fault by GPU node-" node "(Agent handle:" HEX ")" "on address" address "." REST?
node: INT
address: HEX

HEX: /0x[0-9a-fA-F]+/

%import _common (REST)
%import common.INT
%import common.WS_INLINE
%ignore WS_INLINE
"""

CASES = """[[line]]
kind = "fault"
text = "Memory access fault by GPU node-2 (Agent handle: 0x55d0c1a0) on address 0x7f2a00000000. Reason: Page not present or supervisor privilege."
"""

READER = '''"""ROCm's GPU page fault: the HIP runtime's word for CUDA's illegal memory access."""

from __future__ import annotations

from kbdebug.normalise import Line
from kbdebug.parse.derive import may_hold
from kbdebug.parse.lines import parse
from kbdebug.parse.reader import Reader, read_at
from kbdebug.records import CudaError


class HipFaultReader(Reader):
    order = 45

    def read(self, line: Line) -> bool:
        text = line.text.strip()
        if may_hold("hip_fault", text) and parse("hip_fault", text) is not None:
            self.sink.emit(CudaError(**read_at(line), error="an illegal memory access was encountered (GPU page fault)"))
        return False
'''

LOG = "epoch 3 step 120 loss 0.4312\n" * 50_000 + (
    "Memory access fault by GPU node-2 (Agent handle: 0x55d0c1a0) on address 0x7f2a00000000. Reason: Page not present.\n"
    "Aborted (core dumped)\n"
)


def test_a_new_format_is_its_folder_and_its_reader(tmp_path: Path) -> None:
    for name in ("kbdebug", "grammars", "knowledge"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    before = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()}
    folder = tmp_path / "grammars" / "hip_fault"
    folder.mkdir()
    (folder / "hip_fault.lark").write_text(GRAMMAR, encoding="utf-8")
    (folder / "cases.toml").write_text(CASES, encoding="utf-8")
    (tmp_path / "kbdebug" / "parse" / "readers" / "hip_fault.py").write_text(READER, encoding="utf-8")
    (tmp_path / "crash.log").write_text(LOG, encoding="utf-8")  # 1.4 MB: streamed, found by the derived needles
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "KBDEBUG_NO_CACHE": "1"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)

    assert run("-m", "kbdebug.parse").returncode == 0
    out = run("-m", "kbdebug", "explain", "--format", "json", "crash.log")
    diag = json.loads(out.stdout)
    assert [i["rule"] for i in diag["incidents"]][:1] == ["illegal_memory_access"], out.stdout[:2000] + out.stderr[-2000:]
    assert diag["incidents"][0]["facts"]["cuda_error"].startswith("an illegal memory access")
    added = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file() and "__pycache__" not in p.parts} - before
    assert added == {
        Path("grammars/hip_fault/hip_fault.lark"),
        Path("grammars/hip_fault/cases.toml"),
        Path("grammars/hip_fault/derived.json"),
        Path("kbdebug/parse/readers/hip_fault.py"),
        Path("crash.log"),
    }
    changed = [p for p in before if (tmp_path / p).read_bytes() != (ROOT / p).read_bytes()]
    assert changed == []
