"""Typed records parsed out of crash output.

Every record keeps the source lines it came from (`first_line`, `last_line`, 1-based, as an
editor numbers them) and its raw text, so a diagnosis can always point back at the evidence.

The kinds of one family share a module (sanitizer.py, distributed.py, job.py; the Python and CUDA
errors and the message templates here), and this package's namespace holds them all: a reader imports
`kbdebug.records`, and each kind declares the facts it says beside its fields (kbdebug.core.facts declares which).
"""

# No `from __future__ import annotations`: pydantic reads these annotations as types, not strings it compiles.
import re
from functools import cache
from typing import Annotated, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field

from kbdebug.core.facts import Facts
from kbdebug.core.frames import basename, is_library_path, location
from kbdebug.core.quoting import quoted_message
from kbdebug.core.shapes import relation, shape_facts, shapes_in
from kbdebug.core.values import size_bytes
from kbdebug.records.base import Record, Triple
from kbdebug.records.distributed import ElasticFailure, NcclEvent
from kbdebug.records.job import JobEvent, ProcessExit
from kbdebug.records.sanitizer import SanitizerFrame, SanitizerReport, SanitizerSummary
from kbdebug.records.training import NonFiniteLoss

__all__ = [
    "AnyRecord",
    "ElasticFailure",
    "JobEvent",
    "NcclEvent",
    "NonFiniteLoss",
    "ProcessExit",
    "Record",
    "SanitizerFrame",
    "SanitizerReport",
    "SanitizerSummary",
    "Triple",
]

_MODULE_CALL = frozenset({"_call_impl", "_wrapped_call_impl"})  # torch.nn.Module.__call__'s own frames


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

    def facts(self) -> Facts:
        f = super().facts()
        f |= {
            "kernel_file": self.kernel_file,
            "kernel_line": self.kernel_line,
            "assertion": self.condition,
            "kernel_path": self.path,
            "kernel_function": self.function,
            "assert_lines": self.count,
            "distinct_blocks": self.distinct_blocks,
            "distinct_threads": self.distinct_threads,
        }
        if self.block is not None:
            f["first_block"] = list(self.block)
        if self.thread is not None:
            f["first_thread"] = list(self.thread)
        if self.message:
            f["assert_message"] = self.message
        return f


class Frame(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built with the first traceback read (see Record)

    file: str
    line: int | None = None
    function: str | None = None
    code: str | None = None


class PyException(Record):
    """A Python traceback, or a lone `Type: message` line when the frames were not pasted."""

    kind: Literal["exception"] = "exception"
    exc_type: str
    message: str
    frames: list[Frame] = []
    chained: Literal["cause", "context"] | None = None
    has_header: bool = False
    # Shapes of the tensors named on the failing line, when a live frame was there to read them.
    frame_shapes: list[list[int]] = []
    # ... and which of them is the label and which the prediction, when the code's names say so
    frame_target_shape: list[int] | None = None
    frame_input_shape: list[int] | None = None
    # Raised in DataLoader worker N and re-raised in the main process (`Caught X in DataLoader worker process N`)
    worker: int | None = None
    # Raised in DataParallel's replica N and re-raised in the main process (`Caught X in replica N on device D`)
    replica: int | None = None
    # Printed under `Original Traceback (most recent call last):`: the exception that the one before it re-raised
    # (a DataLoader worker's, a replica's). How it was read, not a fact: never dumped.
    original: bool = Field(default=False, exclude=True)
    # The message template kbdebug.parse read off its message, when one did (`expand`, `target_size`): what the
    # shapes the message prints are is then that template's to say (a TorchMessage's own shapes and roles), not
    # a prediction/label pair read off any two shapes. How it was read, not a fact: never dumped.
    template: str | None = Field(default=None, exclude=True)
    # Printed under `Exception ignored in: ...` by Python's unraisable hook: raised where it could not propagate (a
    # `__del__`, a callback, atexit) and ignored, so the program went on; it is no failure by itself. Never dumped.
    ignored: bool = Field(default=False, exclude=True)
    # Printed as `Type:` with its message from the next line on (a text that begins with a newline, as transformers'
    # import errors do): the message is that paragraph, not whatever follows a bare `Type`. Never dumped.
    paragraph: bool = Field(default=False, exclude=True)

    @property
    def folded_message(self) -> str:
        """The message as one line: what a console split into sentences or wrapped is one message."""
        return " ".join(self.message.split())

    @property
    def shapes(self) -> list[list[int]]:
        """Shapes printed in the message (a metric's `ValueError`, a user's own assert)."""
        return shapes_in(self.folded_message)

    @property
    def pair_shapes(self) -> list[list[int]]:
        """The two shapes that clashed: named in the message, else those of the tensors on the failing line."""
        shapes = self.shapes
        if len(shapes) == 2:
            return [] if self.template is not None else shapes
        distinct = [s for i, s in enumerate(self.frame_shapes) if len(s) >= 2 and s not in self.frame_shapes[:i]]
        return distinct if len(distinct) == 2 else []

    @property
    def shape_relation(self) -> str | None:
        """How the two shapes the message names relate (see kbdebug.core.shapes), None unless it names two. A
        message a template reads says itself what its shapes are: an op's own check of one tensor (`expand`'s
        target and tensor sizes, an LSTM's expected and given hidden state) names no prediction/label pair."""
        shapes = self.shapes
        return relation(shapes[0], shapes[1]) if len(shapes) == 2 and self.template is None else None

    @property
    def frame_shape_relation(self) -> str | None:
        """The same, read from the two tensors on the failing line when the message names no shapes:
        weaker evidence (the line may hold other tensors), so rules give it less weight."""
        if len(self.shapes) == 2:
            return None
        pair = self.pair_shapes
        return relation(pair[0], pair[1]) if pair else None

    @property
    def context_text(self) -> str:
        """The message with the source lines and function names of its last frames (never their file paths): what
        tells a loss's prediction/label pair from any other two tensors. nn.Module's call plumbing (`_call_impl`,
        `_wrapped_call_impl`), two frames under every module call since torch 2.0, names no op and is passed over."""
        frames = [f for f in self.frames if f.function not in _MODULE_CALL]
        parts = [self.folded_message]
        parts += [f"{f.function or ''} {f.code or ''}" for f in frames[-4:]]
        return "\n".join(parts)

    @property
    def user_frame(self) -> Frame | None:
        """The innermost frame outside the stdlib, installed packages and torch."""
        for frame in reversed(self.frames):
            if frame.line is not None and not is_library_path(frame.file):
                return frame
        return None

    @property
    def user_code(self) -> str | None:
        """The source line of the user's frame: the op that failed, as the user wrote it."""
        frame = self.user_frame
        return frame.code if frame is not None else None

    @property
    def raised_function(self) -> str | None:
        """The function of the innermost frame: what the failing op was for (`one_hot`, `label_onehot`,
        `dice_coeff`), when the op's own wording says only what it is (a scatter, a broadcast)."""
        return self.frames[-1].function if self.frames else None

    @property
    def raised_code(self) -> str | None:
        """The source line of the innermost frame that printed one."""
        for frame in reversed(self.frames):
            if frame.code:
                return frame.code
        return None

    def facts(self) -> Facts:
        f = super().facts() | {"error_message": quoted_message(self.message) if self.paragraph else self.message.split("\n")[0].strip()}
        if self.worker is not None:
            f["worker"] = self.worker
        if self.replica is not None:
            f["replica"] = self.replica
        if self.exc_type:  # a message pasted without its `Type: ` has none
            f["error_type"] = self.exc_type
        user = self.user_frame
        if user is not None:
            f["innermost_user_frame"] = location(user.file, user.line)
            if user.code:
                f["user_code"] = user.code
            if user.function:
                f["user_function"] = user.function
        if self.frames and self.frames[-1].line is not None:
            f["raised_at"] = f"{self.frames[-1].file}:{self.frames[-1].line}"
            if self.frames[-1].code:
                f["raised_code"] = self.frames[-1].code
            if self.frames[-1].function and not self.frames[-1].function.startswith("<"):
                f["raised_function"] = self.frames[-1].function
        shapes = self.shapes or self.pair_shapes
        if len(shapes) >= 2:
            f["shapes"] = shapes
        if len(self.shapes) != 2 and self.frame_input_shape and self.frame_target_shape:
            f |= shape_facts(self.frame_input_shape, self.frame_target_shape)
        if (rel := self.shape_relation or self.frame_shape_relation) is not None:
            f["shape_relation"] = rel
        return f


def _native(file: str | None) -> bool:
    """Whether a location a legacy (THC) error names is in PyTorch's native sources (`THCBlas.cu`), not a script."""
    return bool(file and re.search(r"\.(?:cuh?|c|cpp)$", file))


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

    def facts(self) -> Facts:
        f = super().facts() | {"cuda_error": self.error, "async_hint": self.async_hint}
        if self.error_name:
            f["cuda_error_name"] = self.error_name
        if self.code is not None:
            f["cuda_error_code"] = self.code
        if self.legacy and _native(self.at_file) and not (self.error_name or "").startswith("cuda error"):
            f["kernel_file"], f["kernel_line"] = basename(self.at_file or ""), self.at_line
        if self.error_name and self.error_name.startswith("cuda error"):
            f["error_type"] = self.error_name
            f["error_message"] = self.error
        return f


class CppException(Record):
    """`terminate called after throwing ...`, `what():` and `Exception raised from ...` blocks."""

    kind: Literal["cpp_exception"] = "cpp_exception"
    exc_type: str | None = None
    what: str | None = None
    raised_from: str | None = None
    raised_file: str | None = None
    raised_line: int | None = None
    frames: int = 0

    def facts(self) -> Facts:
        f = super().facts()
        if self.exc_type:
            f["error_type"] = self.exc_type
        if self.what:
            f["error_message"] = self.what
        if self.raised_from:
            f["raised_from"] = f"{self.raised_from} at {basename(self.raised_file or '')}:{self.raised_line}"
        return f


class Oom(Record):
    """A GPU out-of-memory message (CUDA, XPU, HIP, Apple's MPS); figures kept as printed (`2.00 GiB`)."""

    kind: Literal["oom"] = "oom"
    FIELD_FACTS = (
        "tried_to_allocate",
        "total_capacity",
        "free",
        "gpu_index",
        "already_allocated",
        "reserved_in_total",
        "cached",
        "allowed",
        "process_memory_in_use",
        "allocated_by_pytorch",
        "reserved_but_unallocated",
        "private_pools",
        "other_allocations",
    )
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
    # MPS only: read as a fact, and not dumped with the record, whose JSON stays as it was for every other device
    other_allocations: str | None = Field(default=None, exclude=True)

    def facts(self) -> Facts:
        f = super().facts() | self._fields(*self.FIELD_FACTS)
        if self.device != "CUDA":
            f["oom_device"] = self.device
        if self.exc_type:
            f["error_type"] = self.exc_type
        spare, want, total = (size_bytes(x) for x in (self.reserved_but_unallocated, self.tried_to_allocate, self.total_capacity))
        if spare is not None and want is not None:
            # fragmentation: the spare cached memory would have held the request, and is a real share of the card
            f["fragmented"] = spare >= want and (total is None or spare >= total // 10)
        return f


class LibraryError(Record):
    """`CUBLAS_STATUS_*` / `CUDNN_STATUS_*` failures and the call that returned them."""

    kind: Literal["library_error"] = "library_error"
    library: Literal["cublas", "cudnn"]
    status: str
    call: str | None = None
    message: str
    at_file: str | None = None  # THC's `cublas runtime error : ... at FILE:LINE`
    at_line: int | None = None

    def facts(self) -> Facts:
        f = super().facts()
        if _native(self.at_file):
            f["kernel_file"], f["kernel_line"] = basename(self.at_file or ""), self.at_line
        call = re.split(r"[(\s]", self.call.strip())[0] if self.call else None
        if self.library == "cublas":
            f["cublas_status"] = self.status
            if call:
                f["cublas_call"] = call
        else:
            f["cudnn_status"] = self.status
            if call:
                f["cudnn_call"] = call
        return f


class TorchMessage(Record):
    """A known PyTorch / MONAI message template, with its values (shapes as lists of ints)."""

    kind: Literal["message"] = "message"
    # and the values messages.lark reads (each named after the field it fills), and those its reader
    # derives from them (kbdebug/parse/readers/messages.py: _DERIVED, _calling_op)
    template: str
    text: str
    values: dict[str, str | int | float | bool | list[int] | None] = {}
    shapes: list[list[int]] = []
    input_shape: list[int] | None = None
    target_shape: list[int] | None = None
    # The source lines and function names of the exception the message was printed in (PyException.context_text):
    # what a template's values mean depends on the op and the names there (two flattened sizes in a Dice loss).
    # Evidence for matching, not a fact: never dumped.
    context_text: str = Field(default="", exclude=True)

    @property
    def shape_relation(self) -> str | None:
        """How prediction and label relate when the template names both (see kbdebug.core.shapes)."""
        if self.input_shape is not None and self.target_shape is not None:
            return relation(self.input_shape, self.target_shape)
        return relation(self.shapes[0], self.shapes[1]) if len(self.shapes) == 2 else None

    def facts(self) -> Facts:
        # the message as printed, for an incident that has no exception to say it (a message pasted without its
        # type): its notes and signature tell one such failure from another; an exception's own message wins
        f = super().facts() | {"error_message": self.text.split("\n")[0].strip()}
        f["message_template"] = self.template
        f |= cast(Facts, self.values)  # each value a grammar rule named after its declared fact (tests/test_facts_typed.py)
        if self.shapes:
            f["shapes"] = self.shapes
        f |= shape_facts(self.input_shape, self.target_shape)
        if "shape_relation" not in f and (rel := self.shape_relation) is not None:
            f["shape_relation"] = rel
        return f


class ArchWarning(Record):
    kind: Literal["arch_warning"] = "arch_warning"
    gpu_name: str
    device_capability: str
    supported_archs: list[str] = []

    def facts(self) -> Facts:
        return super().facts() | {
            "gpu_name": self.gpu_name,
            "device_capability": self.device_capability,
            "supported_archs": self.supported_archs,
        }


AnyRecord = Annotated[
    KernelAssert
    | PyException
    | CudaError
    | CppException
    | SanitizerReport
    | SanitizerSummary
    | Oom
    | LibraryError
    | NcclEvent
    | ElasticFailure
    | TorchMessage
    | ArchWarning
    | ProcessExit
    | JobEvent
    | NonFiniteLoss,
    Field(discriminator="kind"),
]


@cache
def record_classes() -> dict[str, type[Record]]:
    """Each record kind's class, read off `AnyRecord`'s members: the one list of record kinds."""
    union = get_args(AnyRecord)[0]
    return {cls.model_fields["kind"].default: cls for cls in get_args(union)}


def record_kinds() -> tuple[str, ...]:
    """The kinds of record a rule's match may name (`kind = "exception"`)."""
    return tuple(record_classes())


@cache
def record_field_names(kind: str) -> frozenset[str]:
    """What a rule's match may read off a record of `kind`: its fields and its properties (`folded_message`).
    Kept once asked: each of a rule's matches asks it when the rule is validated."""
    cls = record_classes()[kind]
    props = {
        name
        for klass in cls.__mro__
        for name, value in vars(klass).items()
        if isinstance(value, property) and not name.startswith(("_", "model_"))
    }
    return frozenset(cls.model_fields) | frozenset(props)
