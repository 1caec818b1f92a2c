#!/usr/bin/env bash
# GPU checks: real device-side asserts (gather, nll target 255, embedding id >= vocab, BCE on
# logits) diagnosed by `kbdebug run`, diagnose() and guard(), and compute-sanitizer on a small
# out-of-bounds kernel. Skips cleanly (exit 0) where there is no CUDA device. A few minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
python - <<'PY'
import sys
try:
    import torch
except ImportError:
    print("gpu-check: torch is not installed: pip install -e '.[torch,dev]' (with a CUDA build of torch)")
    sys.exit(2)
if not torch.cuda.is_available():
    print(f"gpu-check: no CUDA device (torch {torch.__version__}, cuda {torch.version.cuda}): skipped")
    sys.exit(3)
print(f"gpu-check: torch {torch.__version__}, cuda {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
PY
rc=$?
if [ "$rc" -eq 3 ]; then exit 0; fi
if [ "$rc" -ne 0 ]; then exit "$rc"; fi
command -v compute-sanitizer >/dev/null || echo "gpu-check: compute-sanitizer not on PATH: its test will skip"
python -m pytest -m gpu -v -rs -s tests/test_gpu.py "$@"
rc=$?
if [ "$rc" -eq 5 ]; then echo "gpu-check: no GPU tests were collected"; exit 1; fi
exit "$rc"
