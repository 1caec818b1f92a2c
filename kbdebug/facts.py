"""Facts (the JSON contract of rule-ids.md) read off each kind of record."""

from __future__ import annotations

import re
from typing import Any

from kbdebug.parse.transform import basename
from kbdebug.records import (
    ArchWarning,
    CppException,
    CudaError,
    ElasticFailure,
    Frame,
    KernelAssert,
    LibraryError,
    NcclEvent,
    Oom,
    PyException,
    Record,
    SanitizerReport,
    TorchMessage,
)

_LIBRARY_PATH = re.compile(
    r"site-packages|dist-packages|[\\/]lib[\\/]python\d|^<frozen|^<string>|[\\/]torch[\\/](?:nn|autograd|cuda|utils|_tensor|"
    r"functional|distributed|_dynamo|_inductor|optim|serialization|_utils|_ops|amp|__init__)|^/usr/lib/python"
)


def innermost_user_frame(frames: list[Frame]) -> str | None:
    for frame in reversed(frames):
        if frame.line is not None and not _LIBRARY_PATH.search(frame.file.replace("\\\\", "\\")):
            return f"{frame.file}:{frame.line}"
    return None


def facts_of(rec: Record) -> dict[str, Any]:
    f: dict[str, Any] = {}
    if isinstance(rec, KernelAssert):
        f.update(kernel_file=rec.kernel_file, kernel_line=rec.kernel_line, assertion=rec.condition,
                 kernel_path=rec.path, kernel_function=rec.function, assert_lines=rec.count,
                 distinct_blocks=rec.distinct_blocks, distinct_threads=rec.distinct_threads)
        if rec.block is not None:
            f["first_block"] = list(rec.block)
        if rec.thread is not None:
            f["first_thread"] = list(rec.thread)
        if rec.message:
            f["assert_message"] = rec.message
    elif isinstance(rec, PyException):
        f.update(error_type=rec.exc_type, error_message=rec.message.split("\n")[0].strip())
        user = innermost_user_frame(rec.frames)
        if user:
            f["innermost_user_frame"] = user
            code = next((fr.code for fr in reversed(rec.frames) if f"{fr.file}:{fr.line}" == user), None)
            if code:
                f["user_code"] = code
        if rec.frames and rec.frames[-1].line is not None:
            f["raised_at"] = f"{rec.frames[-1].file}:{rec.frames[-1].line}"
            if rec.frames[-1].code:
                f["raised_code"] = rec.frames[-1].code
    elif isinstance(rec, CudaError):
        f["cuda_error"] = rec.error
        if rec.error_name:
            f["cuda_error_name"] = rec.error_name
        if rec.code is not None:
            f["cuda_error_code"] = rec.code
        native = rec.at_file and re.search(r"\.(?:cuh?|c|cpp)$", rec.at_file)
        if rec.legacy and native and not (rec.error_name or "").startswith("cuda error"):
            f.update(kernel_file=basename(rec.at_file or ""), kernel_line=rec.at_line)
        if rec.error_name and rec.error_name.startswith("cuda error"):
            f["error_type"] = rec.error_name
            f["error_message"] = rec.error
        f["async_hint"] = rec.async_hint
    elif isinstance(rec, CppException):
        if rec.exc_type:
            f["error_type"] = rec.exc_type
        if rec.what:
            f["error_message"] = rec.what
        if rec.raised_from:
            f["raised_from"] = f"{rec.raised_from} at {basename(rec.raised_file or '')}:{rec.raised_line}"
    elif isinstance(rec, SanitizerReport):
        f.update(tool=rec.tool, check=rec.check, category=rec.category)
        for key, val in (("memory_space", rec.memory_space), ("access", rec.access),
                         ("access_size_bytes", rec.access_size_bytes), ("kernel_name", rec.function),
                         ("pc_offset", rec.pc), ("address", rec.address), ("address_phrase", rec.address_phrase),
                         ("allocation", rec.allocation), ("hazard_type", rec.hazard_type), ("hazards", rec.hazards),
                         ("api_error", rec.api_error), ("api_call", rec.api_call), ("severity", rec.severity)):
            if val is not None:
                f[key] = val
        if rec.file:
            f.update(kernel_file=basename(rec.file), kernel_line=rec.line, kernel_path=rec.file)
        if rec.thread is not None:
            f["first_thread"] = list(rec.thread)
        if rec.block is not None:
            f["first_block"] = list(rec.block)
        if rec.api_message:
            f["error_message"] = rec.api_message
    elif isinstance(rec, Oom):
        for key in ("tried_to_allocate", "total_capacity", "free", "gpu_index", "already_allocated",
                    "reserved_in_total", "cached", "allowed", "process_memory_in_use", "allocated_by_pytorch",
                    "reserved_but_unallocated", "private_pools"):
            val = getattr(rec, key)
            if val is not None:
                f[key] = val
        if rec.exc_type:
            f["error_type"] = rec.exc_type
    elif isinstance(rec, LibraryError):
        f[f"{rec.library}_status"] = rec.status
        if rec.call:
            f[f"{rec.library}_call"] = re.split(r"[(\s]", rec.call.strip())[0]
    elif isinstance(rec, NcclEvent):
        for key in ("op_type", "seq_num", "timeout_ms", "ran_for_ms", "nccl_error"):
            val = getattr(rec, key)
            if val is not None:
                f[key] = val
        f["nccl_event"] = rec.event
    elif isinstance(rec, ElasticFailure):
        if rec.failed_rank is not None:
            f["rank"] = rec.failed_rank
        for key in ("local_rank", "exitcode", "host", "time"):
            val = getattr(rec, key)
            if val is not None:
                f[key] = val
    elif isinstance(rec, TorchMessage):
        f["message_template"] = rec.template
        if rec.shapes:
            f["shapes"] = rec.shapes
        for key, val in rec.values.items():
            f[key] = val
    elif isinstance(rec, ArchWarning):
        f.update(gpu_name=rec.gpu_name, device_capability=rec.device_capability,
                 supported_archs=rec.supported_archs)
    if rec.rank is not None and "rank" not in f:
        f["rank"] = rec.rank
    return f
