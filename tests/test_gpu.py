"""Real GPU output: device-side asserts in child processes and compute-sanitizer on a small
out-of-bounds kernel, diagnosed by `kbdebug run`, `diagnose()` and `guard()`.

Marked `gpu` (deselected by default); run with scripts/gpu-check.sh or `pytest -m gpu`.
Every test skips cleanly where there is no CUDA device.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

ROOT = Path(__file__).resolve().parent.parent
CHILD = Path(__file__).resolve().parent / "gpu_child.py"
CASES = {
    # case: (rule, kernel file regex)
    "gather": ("scatter_gather_index_oob", r"ScatterGatherKernel\.cu"),
    "nll255": ("nll_target_out_of_range", r"Loss"),
    "embedding": ("embedding_index_oob", r"Indexing\.cu"),
    "bce_logits": ("bce_input_out_of_range", r"Loss\.cu"),
}
OOB_CU = r"""
#include <cstdio>
__global__ void oob_kernel(float *a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n + 32) a[i] = 1.0f;
}
int main() {
    float *d;
    cudaMalloc(&d, 256 * sizeof(float));
    oob_kernel<<<1, 288>>>(d, 256);
    cudaError_t e = cudaDeviceSynchronize();
    printf("sync: %s\n", cudaGetErrorString(e));
    cudaFree(d);
    return e == cudaSuccess ? 0 : 1;
}
"""


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k != "CUDA_LAUNCH_BLOCKING"}
    e["PYTHONPATH"] = str(ROOT)
    return e


def line_of(marker: str) -> int:
    for no, text in enumerate(CHILD.read_text().splitlines(), 1):
        if marker in text:
            return no
    raise AssertionError(marker)


@pytest.mark.parametrize("case", list(CASES))
def test_kbdebug_run_on_a_real_device_assert(case: str, tmp_path: Path) -> None:
    import re

    rule, kernel = CASES[case]
    res = subprocess.run(
        [sys.executable, "-m", "kbdebug", "run", "--no-rerun", "--save", str(tmp_path), "--", sys.executable, str(CHILD), case],
        capture_output=True,
        text=True,
        timeout=180,
        env=env(),
        stdin=subprocess.DEVNULL,
    )
    assert res.returncode != 0, res.stderr[-3000:]
    summary = json.loads((tmp_path / "diagnosis.json").read_text())
    root = summary["runs"][0]["diagnosis"]["incidents"][0]
    print(case, json.dumps(root["facts"], default=str)[:600])
    assert root["rule"] == rule, res.stderr[-3000:]
    assert re.search(kernel, root["facts"]["kernel_file"])
    assert root["facts"]["assertion"]
    assert len(root["facts"]["first_block"]) == 3 and len(root["facts"]["first_thread"]) == 3


@pytest.mark.parametrize("case", list(CASES))
def test_diagnose_inside_capture_on_a_real_device_assert(case: str) -> None:
    import re

    rule, kernel = CASES[case]
    res = subprocess.run([sys.executable, str(CHILD), case, "diagnose"], capture_output=True, text=True, timeout=180, env=env())
    assert res.returncode == 0, res.stderr[-3000:]
    root = json.loads(res.stdout.strip().splitlines()[-1])["incidents"][0]
    print(case, json.dumps(root["facts"], default=str)[:600])
    assert root["rule"] == rule
    assert re.search(kernel, root["facts"]["kernel_file"])
    frame = root["facts"]["innermost_user_frame"]
    assert frame.startswith(str(CHILD)), frame


@pytest.mark.parametrize("case", list(CASES))
def test_guard_on_cuda_names_the_op_line(case: str) -> None:
    rule, _ = CASES[case]
    res = subprocess.run([sys.executable, str(CHILD), case, "guard"], capture_output=True, text=True, timeout=180, env=env())
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    print(case, out)
    assert out["rule"] == rule
    assert out["facts"]["innermost_user_frame"] == f"{CHILD}:{line_of(f'# OP-LINE {case}')}"


def test_audit_with_sync_names_the_module_whose_kernel_asserted() -> None:
    res = subprocess.run([sys.executable, str(CHILD), "embedding", "audit"], capture_output=True, text=True, timeout=180, env=env())
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out == {"module": "0", "type": "Embedding"}


def test_build_and_oom_context_on_the_gpu() -> None:
    from kbdebug.verify import check_build, check_oom_context, describe

    build = check_build()
    assert build.passed is True, build.finding
    assert build.values["devices"][0]["capability"].startswith("sm_")
    big = torch.empty(64, 1024, 1024, device="cuda")  # 256 MiB, the largest tensor alive
    ctx = check_oom_context()
    assert ctx.passed is not None
    assert ctx.values["largest_tensors"][0]["shape"] == [64, 1024, 1024]
    assert "allocated" in ctx.finding
    assert describe(big[:1, :1, :4].fill_(2.0), "x") == "x: [1, 1, 4] float32 cuda:0 min=2 max=2 mean=2"
    del big


def test_compute_sanitizer_on_an_out_of_bounds_kernel(tmp_path: Path) -> None:
    from kbdebug.runtime.runner import find_sanitizer

    nvcc = shutil.which("nvcc") or (shutil.which("nvcc", path="/usr/local/cuda/bin"))
    if find_sanitizer() is None or nvcc is None:
        pytest.skip("compute-sanitizer and nvcc are needed (CUDA toolkit)")
    src = tmp_path / "oob.cu"
    src.write_text(OOB_CU)
    exe = tmp_path / "oob"
    subprocess.run([nvcc, "-lineinfo", "-o", str(exe), str(src)], check=True, timeout=240)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "kbdebug",
            "run",
            "--sanitizer",
            "memcheck",
            "-f",
            "json",
            "--save",
            str(tmp_path / "saved"),
            "--",
            str(exe),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env(),
        stdin=subprocess.DEVNULL,
    )
    summary = json.loads((tmp_path / "saved" / "diagnosis.json").read_text())
    root = summary["runs"][0]["diagnosis"]["incidents"][0]
    print(json.dumps(root["facts"], default=str)[:800])
    assert root["rule"] == "sanitizer_memcheck", res.stdout[-3000:]
    facts = root["facts"]
    assert facts["access"] == "write" and facts["access_size_bytes"] == 4
    assert "oob_kernel" in facts["kernel_name"]
    assert facts["kernel_file"] == "oob.cu" and facts["kernel_line"] == 5
    assert facts["first_thread"][0] >= 256 and facts["first_block"] == [0, 0, 0]
