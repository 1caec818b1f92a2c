"""Checks on the machine rather than on the user's tensors: the torch build against the GPU it runs on, and
what holds the GPU's memory at an out-of-memory error."""

from __future__ import annotations

import gc
from typing import Any

import torch

from kbdebug.core.values import dtype_name
from kbdebug.verify.result import CheckResult


# -- build and memory ---------------------------------------------------------------------------------
def _arch_ok(cap: tuple[int, int], archs: list[str]) -> bool:
    major, minor = cap
    for a in archs:
        kind, _, num = a.partition("_")
        if not num[:2].isdigit() and not num.isdigit():
            continue
        digits = "".join(ch for ch in num if ch.isdigit())
        amaj, amin = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and amaj == major and amin <= minor:
            return True  # SASS runs on later minors of the same major
        if kind == "compute" and (amaj, amin) <= (major, minor):
            return True  # PTX is JIT-compiled for newer GPUs
    return False


def check_build() -> CheckResult:
    """The torch build against the machine: CUDA compiled in, a device visible, kernels for its arch."""
    values: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": None}
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        return CheckResult(
            name="build",
            passed=False,
            values=values,
            finding=f"torch {torch.__version__} is a CPU-only build: it has no CUDA kernels",
            fix="install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu128 "
            "(pick the CUDA version your driver supports)",
        )
    try:
        values["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        pass
    get_driver = getattr(torch._C, "_cuda_getDriverVersion", None)
    if get_driver is not None:
        try:
            v = int(get_driver())
            values["driver_cuda"] = f"{v // 1000}.{(v % 1000) // 10}" if v else None
        except Exception:
            pass
    if not torch.cuda.is_available():
        return CheckResult(
            name="build",
            passed=False,
            values=values,
            finding=f"CUDA {torch.version.cuda} build, but torch.cuda.is_available() is False "
            f"(driver supports CUDA {values.get('driver_cuda') or 'unknown'})",
            fix="check nvidia-smi, CUDA_VISIBLE_DEVICES, and that the driver supports this CUDA version",
        )
    archs = torch.cuda.get_arch_list()
    values["arch_list"] = archs
    devices, bad = [], []
    for i in range(torch.cuda.device_count()):
        cap = torch.cuda.get_device_capability(i)
        name = torch.cuda.get_device_name(i)
        devices.append({"index": i, "name": name, "capability": f"sm_{cap[0]}{cap[1]}"})
        if not _arch_ok(cap, archs):
            bad.append(f"{name} (sm_{cap[0]}{cap[1]})")
    values["devices"] = devices
    if bad:
        return CheckResult(
            name="build",
            passed=False,
            values=values,
            finding=f"no kernels for {', '.join(bad)} in this build (arch list {' '.join(archs)})",
            fix="install a torch build whose arch list covers the GPU (newer GPUs need a newer CUDA wheel)",
        )
    return CheckResult(
        name="build",
        passed=True,
        values=values,
        finding=f"torch {torch.__version__}, CUDA {torch.version.cuda}, kernels for "
        + ", ".join(f"{d['name']} ({d['capability']})" for d in devices),
    )


def largest_tensors(top: int = 10, device: str = "cuda") -> list[dict[str, Any]]:
    """The biggest live tensors on `device`, one entry per storage."""
    seen: dict[int, dict[str, Any]] = {}
    for obj in gc.get_objects():
        try:
            if isinstance(obj, torch.Tensor) and obj.device.type == device and not obj.is_meta:
                storage = obj.untyped_storage()
                key = storage.data_ptr()
                size = storage.nbytes()
                if key not in seen or seen[key]["bytes"] < size:
                    seen[key] = {
                        "shape": list(obj.shape),
                        "dtype": dtype_name(obj.dtype),
                        "device": str(obj.device),
                        "bytes": size,
                        "requires_grad": obj.requires_grad,
                    }
        except Exception:
            continue
    return sorted(seen.values(), key=lambda d: -d["bytes"])[:top]


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def check_oom_context(top: int = 10, device: int | None = None) -> CheckResult:
    """Memory figures and the largest live tensors, to tell a leak from a too-large batch."""
    if not torch.cuda.is_available():
        return CheckResult(name="oom_context", passed=None, finding="no CUDA device: memory context is read on the GPU")
    dev = torch.cuda.current_device() if device is None else device
    free, total = torch.cuda.mem_get_info(dev)
    values: dict[str, Any] = {
        "device": dev,
        "total": _gib(total),
        "free": _gib(free),
        "allocated": _gib(torch.cuda.memory_allocated(dev)),
        "reserved": _gib(torch.cuda.memory_reserved(dev)),
        "max_allocated": _gib(torch.cuda.max_memory_allocated(dev)),
        "largest_tensors": largest_tensors(top),
        "summary": torch.cuda.memory_summary(dev, abbreviated=True),
    }
    reserved = torch.cuda.memory_reserved(dev)
    allocated = torch.cuda.memory_allocated(dev)
    frag = reserved - allocated
    hints = []
    if reserved and frag > 0.3 * reserved:
        hints.append(f"{_gib(frag)} reserved but unallocated: try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    grads = [t for t in values["largest_tensors"] if t["requires_grad"]]
    if grads:
        hints.append("large tensors that require grad are alive: do not keep losses/outputs across steps without .detach()")
    finding = (
        f"GPU {dev}: {values['allocated']} allocated, {values['reserved']} reserved, {values['free']} free of "
        f"{values['total']}; peak {values['max_allocated']}"
    )
    return CheckResult(
        name="oom_context",
        passed=not hints,
        values=values,
        finding=finding,
        fix="; ".join(hints) or "reduce batch size, use AMP (torch.autocast) or gradient checkpointing",
    )
