"""Typed records parsed out of crash output.

Every record keeps the source lines it came from (`first_line`, `last_line`, 1-based, as an
editor numbers them) and its raw text, so a diagnosis can always point back at the evidence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Triple = tuple[int, int, int]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    first_line: int = 0
    last_line: int = 0
    raw: str = ""
    rank: int | None = None
    if TYPE_CHECKING:  # each record type declares its own Literal `kind`, the union's discriminator
        kind: str


class KernelAssert(Record):
    """`FILE:LINE: FUNC: block: [..], thread: [..] Assertion `COND` failed.`, grouped over threads."""

    kind: Literal["kernel_assert"] = "kernel_assert"
    path: str
    kernel_file: str
    kernel_line: int | None = None
    function: str | None = None
    block: Triple | None = None
    thread: Triple | None = None
    condition: str
    message: str | None = None
    source: Literal["printf", "dsa", "legacy", "fuzzy"] = "printf"
    count: int = 1
    distinct_blocks: int = 1
    distinct_threads: int = 1


class Frame(BaseModel):
    file: str
    line: int | None = None
    function: str | None = None
    code: str | None = None


class PyException(Record):
    """A Python traceback, or a lone `Type: message` line when the frames were not pasted."""

    kind: Literal["exception"] = "exception"
    exc_type: str
    message: str
    frames: list[Frame] = Field(default_factory=list)
    chained: Literal["cause", "context"] | None = None
    has_header: bool = False


class CudaError(Record):
    """Host-side CUDA error text: `CUDA error: ...`, legacy `cuda runtime error (N)`, THCudaCheck."""

    kind: Literal["cuda_error"] = "cuda_error"
    error: str
    error_name: str | None = None
    code: int | None = None
    at_file: str | None = None
    at_line: int | None = None
    async_hint: bool = False
    dsa_hint: bool = False
    blocking_hint: bool = False
    legacy: bool = False


class CppException(Record):
    """`terminate called after throwing ...`, `what():` and `Exception raised from ...` blocks."""

    kind: Literal["cpp_exception"] = "cpp_exception"
    exc_type: str | None = None
    what: str | None = None
    raised_from: str | None = None
    raised_file: str | None = None
    raised_line: int | None = None
    frames: int = 0


class SanitizerFrame(BaseModel):
    function: str | None = None
    file: str | None = None
    line: int | None = None
    module: str | None = None


class SanitizerReport(Record):
    """One compute-sanitizer / cuda-memcheck error report with its detail lines."""

    kind: Literal["sanitizer"] = "sanitizer"
    tool: Literal["compute-sanitizer", "cuda-memcheck"] | None = None
    check: Literal["memcheck", "racecheck", "initcheck", "synccheck", "leakcheck"]
    category: str
    severity: str | None = None
    memory_space: str | None = None
    access: str | None = None
    access_size_bytes: int | None = None
    function: str | None = None
    pc: str | None = None
    file: str | None = None
    line: int | None = None
    thread: Triple | None = None
    block: Triple | None = None
    address: str | None = None
    address_phrase: str | None = None
    allocation: str | None = None
    hazard_type: str | None = None
    hazards: int | None = None
    api_error: str | None = None
    api_code: int | None = None
    api_message: str | None = None
    api_call: str | None = None
    device_frames: list[SanitizerFrame] = Field(default_factory=list)
    host_frames: list[SanitizerFrame] = Field(default_factory=list)


class SanitizerSummary(Record):
    kind: Literal["sanitizer_summary"] = "sanitizer_summary"
    tool: str | None = None
    errors: int | None = None
    hazards: int | None = None
    leaked_bytes: int | None = None
    leaked_allocations: int | None = None


class Oom(Record):
    """A CUDA out-of-memory message; figures kept as printed (`2.00 GiB`)."""

    kind: Literal["oom"] = "oom"
    exc_type: str | None = None
    device: str = "CUDA"
    tried_to_allocate: str | None = None
    gpu_index: int | None = None
    total_capacity: str | None = None
    free: str | None = None
    already_allocated: str | None = None
    reserved_in_total: str | None = None
    cached: str | None = None
    allowed: str | None = None
    process_memory_in_use: str | None = None
    allocated_by_pytorch: str | None = None
    reserved_but_unallocated: str | None = None
    private_pools: str | None = None


class LibraryError(Record):
    """`CUBLAS_STATUS_*` / `CUDNN_STATUS_*` failures and the call that returned them."""

    kind: Literal["library_error"] = "library_error"
    library: Literal["cublas", "cudnn"]
    status: str
    call: str | None = None
    message: str


class NcclEvent(Record):
    kind: Literal["nccl"] = "nccl"
    event: Literal["watchdog_timeout", "nccl_error", "aborted", "watchdog_exception"]
    text: str
    op_type: str | None = None
    seq_num: int | None = None
    timeout_ms: int | None = None
    ran_for_ms: int | None = None
    nccl_error: str | None = None


class ElasticFailure(Record):
    """One row of torch.distributed.elastic's `Root Cause` / `Other Failures` table."""

    kind: Literal["elastic_failure"] = "elastic_failure"
    root: bool
    failed_rank: int | None = None
    local_rank: int | None = None
    exitcode: int | None = None
    host: str | None = None
    time: str | None = None
    error_file: str | None = None


class TorchMessage(Record):
    """A known PyTorch / MONAI message template, with its values (shapes as lists of ints)."""

    kind: Literal["message"] = "message"
    template: str
    text: str
    values: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    shapes: list[list[int]] = Field(default_factory=list)


class ArchWarning(Record):
    kind: Literal["arch_warning"] = "arch_warning"
    gpu_name: str
    device_capability: str
    supported_archs: list[str] = Field(default_factory=list)


AnyRecord = Annotated[
    KernelAssert | PyException | CudaError | CppException | SanitizerReport | SanitizerSummary
    | Oom | LibraryError | NcclEvent | ElasticFailure | TorchMessage | ArchWarning,
    Field(discriminator="kind"),
]
