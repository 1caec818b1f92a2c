"""The declaration of every fact: `Facts`, a TypedDict whose keys are the facts, each `Annotated` with its type,
its meaning and its producers (kbdebug.core.facts.fact).

mypy reads it wherever facts are made or read; at run time it is read only when facts are checked or a rule's
vocabulary is asked for (`kbdebug.core.facts.declarations`): a diagnosis handles facts as plain dicts, and
building this class (two hundred annotations, each checked by `typing`) was a tenth of a first
`diagnose(exc)`'s own work.
"""

# No `from __future__ import annotations`: the declarations are read at run time (`declarations`), and
# typing would compile each of some 200 string annotations back into a type (a fifth of reading them).
from typing import Annotated, Literal, TypedDict

from kbdebug.core.facts.fact import Fact, Number, Producer, Scalar, Shape


def _f(meaning: str, *by: Producer) -> Fact:
    return Fact(meaning, by)


class TensorInfo(TypedDict, total=False):
    """A tensor named on the failing line: metadata, and on the CPU its smallest and largest value."""

    shape: Shape
    dtype: str
    device: str
    min: Number
    max: Number


class InplaceWrite(TypedDict):
    code: str
    line: int


class ModuleCounts(TypedDict):
    parameters: int
    trainable: int


class Facts(TypedDict, total=False):
    """The facts of one incident. Every key is optional: a fact is present only when known."""

    # -- the exception the user saw, and where
    error_type: Annotated[str, _f("the exception type as printed", "exception", "cuda_error", "cpp_exception", "oom", "live")]
    error_message: Annotated[
        str, _f("the first line of the exception message", "exception", "cuda_error", "cpp_exception", "sanitizer", "live", "message")
    ]
    innermost_user_frame: Annotated[str, _f("`file.py:LINE` of the innermost frame of the user's own code", "exception", "live", "guard")]
    user_function: Annotated[str, _f("the function of that frame", "exception", "live")]
    user_code: Annotated[str, _f("the source line of that frame", "exception", "live", "guard")]
    raised_at: Annotated[str, _f("`file:LINE` of the innermost frame", "exception")]
    raised_code: Annotated[str, _f("the source line of the innermost frame that printed one", "exception")]
    raised_function: Annotated[
        str, _f("the function of the innermost frame: the op that raised (`binary_cross_entropy_with_logits`)", "exception")
    ]
    raised_from: Annotated[str, _f("the C++ function and file:line an exception was raised from", "cpp_exception")]
    worker: Annotated[int, _f("the DataLoader worker an exception was raised in", "exception", "message")]
    rank: Annotated[int, _f("the rank that printed the evidence", "records")]
    # -- shapes a prediction/label pair or an op names
    shapes: Annotated[list[Shape], _f("the shapes an error names, as lists of ints", "exception", "message")]
    input_shape: Annotated[Shape, _f("the prediction's shape in a prediction/label pair", "exception", "message")]
    target_shape: Annotated[Shape, _f("the label's shape in a prediction/label pair", "exception", "message")]
    shape_relation: Annotated[str, _f("how prediction and label differ: channel, class, spatial, rank or batch", "exception", "message")]
    differing_dims: Annotated[list[int], _f("the dims in which prediction and label differ", "exception", "message")]
    input_channels: Annotated[int, _f("dim 1 of the prediction", "exception", "message")]
    target_channels: Annotated[int, _f("dim 1 of the label", "exception", "message")]
    channels_last: Annotated[
        Literal["label", "prediction"],
        _f(
            "which side has the other's channel dim moved last: a permute apart (`[2, 32, 32, 4]` vs `[2, 4, 32, 32]`)",
            "exception",
            "message",
        ),
    ]
    # -- a kernel's device-side assert
    kernel_file: Annotated[str, _f("the kernel's source file", "kernel_assert", "cuda_error", "library_error", "sanitizer")]
    kernel_line: Annotated[
        int | None,
        _f(
            "the line of the kernel's source file (None when the report names none)",
            "kernel_assert",
            "cuda_error",
            "library_error",
            "sanitizer",
        ),
    ]
    kernel_path: Annotated[str, _f("the kernel's source path as printed", "kernel_assert", "sanitizer")]
    kernel_function: Annotated[str | None, _f("the kernel function the assert names", "kernel_assert")]
    assertion: Annotated[str, _f("the condition that failed", "kernel_assert")]
    assert_message: Annotated[str, _f("the message a device-side assert printed with its condition", "kernel_assert")]
    assert_lines: Annotated[int, _f("how many assert lines the kernel printed", "kernel_assert")]
    distinct_blocks: Annotated[int, _f("how many blocks asserted", "kernel_assert")]
    distinct_threads: Annotated[int, _f("how many threads asserted", "kernel_assert")]
    first_block: Annotated[list[int], _f("the first asserting block's coordinates", "kernel_assert", "sanitizer")]
    first_thread: Annotated[list[int], _f("the first asserting thread's coordinates", "kernel_assert", "sanitizer")]
    # -- CUDA's and its libraries' errors
    cuda_error: Annotated[str, _f("the CUDA error text", "cuda_error")]
    async_hint: Annotated[bool, _f("the error said it may be reported asynchronously", "cuda_error")]
    cuda_error_name: Annotated[str, _f("the CUDA error's name (`cudaErrorIllegalAddress`)", "cuda_error")]
    cuda_error_code: Annotated[int, _f("the CUDA error's number", "cuda_error")]
    cublas_status: Annotated[str, _f("the cuBLAS status returned", "library_error")]
    cublas_call: Annotated[str, _f("the cuBLAS call that returned it", "library_error")]
    cudnn_status: Annotated[str, _f("the cuDNN status returned", "library_error")]
    cudnn_call: Annotated[str, _f("the cuDNN call that returned it", "library_error")]
    gpu_name: Annotated[str, _f("the GPU's name", "arch_warning", "message")]
    device_capability: Annotated[str, _f("the GPU's compute capability (`sm_90`)", "arch_warning", "message")]
    supported_archs: Annotated[list[str], _f("the architectures this torch build was compiled for", "arch_warning", "message")]
    # -- compute-sanitizer
    tool: Annotated[str | None, _f("the compute-sanitizer tool that reported", "sanitizer", "sanitizer_summary")]
    check: Annotated[str, _f("the sanitizer check (memcheck, racecheck, initcheck, synccheck)", "sanitizer", "sanitizer_summary")]
    category: Annotated[str, _f("the report's category (`Invalid __global__ read`)", "sanitizer")]
    access: Annotated[str, _f("read or write", "sanitizer")]
    access_size_bytes: Annotated[int, _f("the bytes one access touched", "sanitizer")]
    address: Annotated[str, _f("the address accessed", "sanitizer")]
    address_phrase: Annotated[str, _f("where the address lies (`is out of bounds`)", "sanitizer")]
    allocation: Annotated[str, _f("the allocation the address lies near", "sanitizer")]
    memory_space: Annotated[str, _f("global, shared or local memory", "sanitizer")]
    kernel_name: Annotated[str, _f("the kernel that made the access", "sanitizer")]
    pc_offset: Annotated[str, _f("the faulting instruction's offset in the kernel", "sanitizer")]
    severity: Annotated[str, _f("the report's severity (error, warning)", "sanitizer")]
    hazard_type: Annotated[str, _f("the race's kind (write-after-read ...)", "sanitizer")]
    hazards: Annotated[int, _f("how many hazards racecheck counted", "sanitizer")]
    api_call: Annotated[str, _f("the CUDA API call a report names", "sanitizer")]
    api_error: Annotated[str, _f("the error that call returned", "sanitizer")]
    error_summary_count: Annotated[int, _f("the errors the sanitizer's summary counts", "sanitizer_summary")]
    leaked_bytes: Annotated[int, _f("bytes leaked at exit", "sanitizer_summary")]
    leaked_allocations: Annotated[int, _f("allocations leaked at exit", "sanitizer_summary")]
    # -- out of memory (figures as printed: `2.00 GiB`)
    tried_to_allocate: Annotated[str, _f("the request that failed", "oom")]
    total_capacity: Annotated[str, _f("the card's capacity", "oom")]
    free: Annotated[str, _f("memory free on the card", "oom")]
    gpu_index: Annotated[int, _f("the GPU the OOM was on", "oom")]
    already_allocated: Annotated[str, _f("memory already allocated", "oom")]
    reserved_in_total: Annotated[str, _f("memory the caching allocator reserved", "oom")]
    cached: Annotated[str, _f("memory cached (old wording)", "oom")]
    allowed: Annotated[str, _f("the allowed memory of a capped process", "oom")]
    process_memory_in_use: Annotated[str, _f("memory this process has in use", "oom")]
    allocated_by_pytorch: Annotated[str, _f("memory allocated by PyTorch", "oom")]
    reserved_but_unallocated: Annotated[str, _f("memory reserved but unallocated (fragmentation)", "oom")]
    private_pools: Annotated[str, _f("memory held by private pools (CUDA graphs)", "oom")]
    other_allocations: Annotated[str, _f("MPS: memory of the process's other allocations on the shared memory", "oom")]
    oom_device: Annotated[str, _f("the device out of memory when it is not CUDA, as the message names it (XPU, HIP, MPS)", "oom")]
    fragmented: Annotated[bool, _f("the spare cached memory would have held the request", "oom")]
    # -- distributed
    nccl_event: Annotated[str, _f("the NCCL event (timeout, error, abort)", "nccl")]
    nccl_error: Annotated[str, _f("NCCL's error text", "nccl")]
    op_type: Annotated[str, _f("the collective (`ALLREDUCE`)", "nccl")]
    seq_num: Annotated[int, _f("the collective's sequence number", "nccl")]
    timeout_ms: Annotated[int, _f("the watchdog's timeout", "nccl")]
    ran_for_ms: Annotated[int, _f("how long the collective ran", "nccl")]
    local_rank: Annotated[int, _f("the failed worker's local rank", "elastic_failure")]
    exitcode: Annotated[int, _f("the failed worker's exit code as torchrun prints it", "elastic_failure")]
    host: Annotated[str, _f("the host the worker ran on", "elastic_failure")]
    time: Annotated[str, _f("when the worker failed, as torchrun prints it", "elastic_failure")]
    # -- how a process or job ended
    exit_code: Annotated[int, _f("the process's exit status", "elastic_failure", "process_exit")]
    signal: Annotated[str, _f("the signal that ended it (`SIGKILL`)", "elastic_failure", "process_exit", "job_event", "message")]
    command: Annotated[str, _f("the command that ended", "process_exit")]
    pid: Annotated[int, _f("its process id", "process_exit", "job_event")]
    exit_reporter: Annotated[str, _f("what reported the exit (a shell, kbdebug run)", "process_exit")]
    job_event: Annotated[str, _f("how the job ended from outside (oom_kill, xid, preempted ...)", "job_event")]
    event_text: Annotated[str, _f("the line that said so", "job_event")]
    process: Annotated[str, _f("the process the event names", "job_event")]
    xid: Annotated[int, _f("the NVIDIA Xid error number", "job_event")]
    pci: Annotated[str, _f("the GPU's PCI address", "job_event")]
    job_id: Annotated[str, _f("the scheduler's job id", "job_event")]
    node: Annotated[str, _f("the node the job ran on", "job_event")]
    reason: Annotated[str, _f("the reason the scheduler gave", "job_event")]
    task: Annotated[str, _f("the scheduler's task or step", "job_event")]
    # -- a message template's values (grammars/messages/messages.lark: each named after the rule that reads it)
    message_template: Annotated[str, _f("the message template that matched", "message")]
    op: Annotated[str, _f("the op the message (or guard) names", "message", "guard")]
    argument: Annotated[str, _f("the argument that failed its check", "message", "guard")]
    argument_index: Annotated[int, _f("its position in the call", "message")]
    argument_name: Annotated[str, _f("its name", "message")]
    backward_function: Annotated[str, _f("the backward function that failed (`LogBackward0`)", "message")]
    device_a: Annotated[str, _f("the first device a device clash names", "message")]
    device_b: Annotated[str, _f("the second device", "message")]
    indexed_device: Annotated[str, _f("the device of the indexed tensor", "message")]
    dim: Annotated[int, _f("the dim the message (or guard) names", "message", "guard")]
    dtype_a: Annotated[str, _f("the first dtype a dtype clash names", "message")]
    dtype_b: Annotated[str, _f("the second dtype", "message")]
    element: Annotated[int, _f("the element of a list the message names", "message")]
    entry_a: Annotated[int, _f("the first entry of a size mismatch", "message")]
    entry_b: Annotated[int, _f("the second entry", "message")]
    expected: Annotated[Scalar, _f("what the op expected", "message")]
    found: Annotated[Scalar, _f("what it found", "message")]
    expected_channels: Annotated[int, _f("the channels a layer expected", "message")]
    got_channels: Annotated[int, _f("the channels it got", "message")]
    expected_dims: Annotated[int, _f("the dims an op expected", "message")]
    got_dims: Annotated[int, _f("the dims it got", "message")]
    expected_version: Annotated[int, _f("the version autograd saved a tensor at", "message")]
    version: Annotated[int, _f("the version it found", "message")]
    grad_fn: Annotated[str, _f("the grad_fn a message names", "message")]
    groups: Annotated[int, _f("a convolution's groups", "message")]
    index: Annotated[int, _f("the out-of-range index", "message", "guard")]
    inner_error: Annotated[str, _f("the error wrapped inside another", "message")]
    input_batch: Annotated[int, _f("the input's batch size", "message")]
    target_batch: Annotated[int, _f("the target's batch size", "message")]
    input_type: Annotated[str, _f("the input's type", "message")]
    weight_type: Annotated[str, _f("the weight's type", "message")]
    weight_dims: Annotated[int, _f("the weight's dims", "message")]
    kind: Annotated[str, _f("the kind of thing a message names", "message")]
    mat1_dim: Annotated[str, _f("mat1's shape in a matmul clash", "message")]
    mat2_dim: Annotated[str, _f("mat2's shape", "message")]
    method: Annotated[str, _f("the method a message names", "message")]
    norm_type: Annotated[str, _f("the norm of a non-finite gradient norm", "message")]
    numel: Annotated[int, _f("the element count a view or guard names", "message", "guard")]
    operand_a: Annotated[str, _f("the first operand of a clash (`mat1`, `input`)", "message")]
    operand_b: Annotated[str, _f("the second operand", "message")]
    output_index: Annotated[int, _f("the output of a function a message names", "message")]
    param: Annotated[str, _f("the parameter a message names", "message")]
    signal_text: Annotated[str, _f("the signal as a message prints it", "message")]
    size: Annotated[int, _f("the size of the indexed dim", "message", "guard")]
    size_a: Annotated[int, _f("the first size of a size clash", "message")]
    size_b: Annotated[int, _f("the second size", "message")]
    target: Annotated[int, _f("the out-of-range target", "message", "guard")]
    tensor_number: Annotated[int, _f("the tensor of a list that failed", "message")]
    tensor_shape: Annotated[Shape, _f("the shape of the tensor a message names", "message")]
    tensor_type: Annotated[str, _f("the type of that tensor", "message")]
    timeout_s: Annotated[int, _f("a timeout in seconds", "message")]
    view_shape: Annotated[Shape, _f("the shape a view asked for", "message")]
    which: Annotated[str, _f("which of two things a message names", "message")]
    worker_pid: Annotated[int, _f("the DataLoader worker's pid", "message")]
    worker_pids: Annotated[str, _f("the DataLoader workers' pids", "message")]
    mismatch_dim: Annotated[int, _f("the dim whose sizes differ in a concatenation", "message")]
    rank_a: Annotated[int, _f("the first tensor's number of dims in a concatenation", "message")]
    rank_b: Annotated[int, _f("the other tensor's number of dims", "message")]
    input_height: Annotated[int, _f("the input's height a model checked", "message")]
    input_width: Annotated[int, _f("the input's width", "message")]
    divisible_by: Annotated[int, _f("what the input's height and width must be divisible by", "message")]
    extra_singleton_dim: Annotated[int, _f("the label carries an extra dim of size 1 at this position", "message")]
    flattened_classes: Annotated[int, _f("the class count read from flattened sizes' ratio", "message")]
    view_numel: Annotated[int, _f("the element count of the viewed tensor", "message")]
    view_infers: Annotated[bool, _f("the view asks to infer a dim (-1)", "message")]
    inplace_writes: Annotated[int, _f("how many in-place writes changed a saved tensor", "message")]
    last_op: Annotated[str, _f("the op that last wrote the tensor", "message")]
    # -- the matcher
    retry: Annotated[str, _f("what rerunning does: no, smaller, yes or after-install", "match")]
    inferred_from: Annotated[list[str], _f("the phrases an inferred cause was recognised by (only below confidence 0.8)", "match")]
    # -- what the caller knows
    script: Annotated[str, _f("the script to rerun: the user's frame's file, or the command's", "caller")]
    launch: Annotated[str, _f("the command the run was launched with, for commands that rerun it", "caller")]
    rerun: Annotated[str, _f("the command that reruns the job as it was launched (`launch`, else `python SCRIPT`): guides only", "caller")]
    # -- the context stage (kbdebug.diagnoser.context)
    origin: Annotated[str, _f("where the text came from: log, script, notebook, run or rerun", "context")]
    device: Annotated[str, _f("cuda or cpu, where the evidence says", "context")]
    launch_blocking: Annotated[bool, _f("kernel launches were already synchronous (CUDA_LAUNCH_BLOCKING=1)", "context")]
    libraries: Annotated[list[str], _f("the installed packages the traceback's frames run through", "context")]
    launcher: Annotated[str, _f("the launcher the log shows the job ran under (`torchrun`)", "context")]
    index_tensor: Annotated[str, _f("the integer tensor on the failing line (a target, an index)", "context")]
    index_min: Annotated[Number, _f("its smallest value", "context")]
    index_max: Annotated[Number, _f("its largest value", "context")]
    scores_tensor: Annotated[str, _f("the floating tensor of rank >= 2 on the failing line (the scores)", "context")]
    num_classes: Annotated[int, _f("the class count: the call's literal setting, or the scores' dim 1", "context", "guard")]
    call_settings: Annotated[dict[str, Scalar], _f("the literal keyword arguments on the failing line", "context")]
    select_source: Annotated[str, _f("the tensor an `index_select` on the failing line selects from (`feats`)", "context")]
    select_dim: Annotated[int, _f("the dim it selects along, as the line writes it", "context")]
    select_index: Annotated[str, _f("the name of the index tensor it is given (`keep`)", "context")]
    label_name: Annotated[str, _f("the label's name on the failing line (by how code names labels)", "context")]
    pred_name: Annotated[str, _f("the prediction's name on the failing line", "context")]
    dtype_found: Annotated[str, _f("the dtype that clashed, as torch names it (`float64`)", "context")]
    dtype_wanted: Annotated[str, _f("the dtype the op wanted", "context")]
    cast_call: Annotated[str, _f("the call that converts to the wanted dtype (`.float()`)", "context")]
    odd_operand: Annotated[str, _f("which operand of the message holds the odd dtype (`mat1`, `input`)", "context")]
    cast_tensor: Annotated[str, _f("the failing line's tensor to convert", "context")]
    viewed_tensor: Annotated[str, _f("the tensor the failing line views or reshapes", "context")]
    viewed_shape: Annotated[Shape, _f("its shape", "context")]
    # -- the live frames (kbdebug.runtime.live)
    frame_tensors: Annotated[
        dict[str, TensorInfo], _f("shape, dtype, device (and min/max on the CPU) of the failing line's tensors", "live")
    ]
    frame_modules: Annotated[dict[str, ModuleCounts], _f("the modules the failing function holds, with their parameter counts", "live")]
    inplace_candidates: Annotated[list[InplaceWrite], _f("the failing function's in-place writes to a tensor of the saved shape", "live")]
    inplace_layers: Annotated[list[str], _f("layers built with inplace=True in the failing function's modules", "live")]
    # -- a training run's own progress lines (the `training` format): the first loss that is not a number
    loss_name: Annotated[str, _f("the loss as its progress line names it (`loss`, `train_loss`)", "nonfinite_loss")]
    loss_value: Annotated[str, _f("its value as printed (`nan`, `inf`)", "nonfinite_loss")]
    nonfinite_epoch: Annotated[str, _f("the epoch that line printed, as printed", "nonfinite_loss")]
    nonfinite_step: Annotated[str, _f("the step that line printed, as printed", "nonfinite_loss")]
    nonfinite_loss_lines: Annotated[int, _f("how many progress lines print a non-finite loss", "nonfinite_loss")]
    replica: Annotated[int, _f("the DataParallel replica an exception was raised in", "exception", "message")]
    replica_device: Annotated[str, _f("the device of that replica", "message")]
    # -- a plain Python error, from its message and failing line (kbdebug.diagnoser.plain) and, live, its values
    inner_error_type: Annotated[str, _f("the type of the error a multi-line message re-raises (a DataLoader worker's)", "context")]
    inner_error_message: Annotated[str, _f("its message", "context")]
    inner_code: Annotated[str, _f("its failing line, as the message prints it", "context")]
    missing_key: Annotated[str, _f("the key a KeyError names, as printed (`'image'`)", "context")]
    looked_up_in: Annotated[str, _f('the expression the key was looked up in (`cfg["training"]`)', "context", "live")]
    available_keys: Annotated[list[str], _f("live: the first keys that mapping holds, as repr()", "live")]
    key_count: Annotated[int, _f("live: how many keys it holds", "live")]
    indexed: Annotated[list[str], _f("the subscripts of the failing line of an IndexError (`sys.argv[1]`)", "context")]
    sequence_name: Annotated[str, _f("live: the subscripted expression that is too short (or the call that returned it)", "live")]
    sequence_length: Annotated[int, _f("live: its length", "live")]
    index_value: Annotated[int, _f("live: the index it was asked for", "live")]
    sequence_items: Annotated[list[str], _f("live: the first items of a list unpacked or searched, as repr()", "live")]
    sequence_from_call: Annotated[bool, _f("live: the too-short sequence is a call's result, not read again", "live")]
    attribute_of: Annotated[str, _f("the expression whose attribute (or subscript) failed (`img`)", "context")]
    attribute_of_type: Annotated[str, _f("its type as the message names it (`NoneType`)", "context")]
    missing_attribute: Annotated[str, _f("the attribute an AttributeError names", "context")]
    none_from: Annotated[str, _f("live: the right-hand side of the last assignment of that None before the failing line", "live")]
    attribute_module: Annotated[str, _f("the module an AttributeError says has no such attribute (`torch`)", "context")]
    unpack_expected: Annotated[int, _f("how many names a value was unpacked into (`too many values to unpack (expected 2)`)", "context")]
    unpack_got: Annotated[int, _f("how many values it held, where Python says (`not enough values ... got 2`)", "context")]
    unpack_targets: Annotated[str, _f("the names of the failing line it was unpacked into (`images, labels`)", "context")]
    unpacked: Annotated[str, _f("the expression unpacked (`train_loader`, each of its items in a loop)", "context")]
    unpack_loop: Annotated[bool, _f("each item of a `for` loop is unpacked, not the value itself", "context")]
    undefined_name: Annotated[str, _f("the name a NameError names", "context")]
    hidden_expected: Annotated[
        list[int], _f("the hidden state an RNN expects for its input: (layers * directions, batch, hidden size)", "message")
    ]
    hidden_given: Annotated[list[int], _f("the hidden state it was given", "message")]
    overflow_type: Annotated[str, _f("the C++ type a number did not fit when written into a tensor (`c10::Half`)", "message")]
    model_output_keys: Annotated[str, _f("transformers: the keys of the model's outputs (no `loss`), comma-separated", "message")]
    model_input_keys: Annotated[str, _f("transformers: the keys of the batch the model was given, comma-separated", "message")]
    bmm_expected: Annotated[
        list[int],
        _f("the (batch, contraction) dims a batched matmul needed of its second operand: the first's batch and last dim", "message"),
    ]
    bmm_given: Annotated[list[int], _f("the second operand's first two dims as they were", "message")]
    inplace_shape: Annotated[list[int], _f("the shape of the tensor an op wrote its result into (in place, or out=)", "message")]
    broadcast_result: Annotated[list[int], _f("the shape the op's result broadcast to, larger than that tensor", "message")]
    norm_input_channels: Annotated[int, _f("the channels (dim 1) of the input a batch norm was given", "message")]
    norm_features: Annotated[int, _f("the num_features a batch norm was built for (its running stats' size)", "message")]
    normalized_shape: Annotated[list[int], _f("a LayerNorm's normalized_shape: the input's last dims it expects", "message")]
    rnn_input_expected: Annotated[int, _f("an RNN's input_size: the feature count its input's last dim must have", "message")]
    rnn_input_given: Annotated[int, _f("the feature count of the input it was given", "message")]
    tensor_elements: Annotated[int, _f("the elements of a tensor turned into a Python number (`.item()`)", "message")]
    loss_classes: Annotated[int, _f("the classes a loss's scores have, which its class weights must match", "message")]
    pool_input: Annotated[list[int], _f("a pooling's input per sample as it names it: channels, then spatial sizes", "message")]
    pool_output: Annotated[list[int], _f("the output it computed for that input (a size of 0: the window is larger)", "message")]
    dim_low: Annotated[int, _f("the lowest dim a tensor has (-rank)", "message")]
    dim_high: Annotated[int, _f("the highest dim it has (rank - 1)", "message")]
    dim_asked: Annotated[int, _f("the dim the code asked of it", "message")]
    pad_before: Annotated[int, _f("reflection padding before the input, along the dim it names", "message")]
    pad_after: Annotated[int, _f("... and after it", "message")]
    pad_dim: Annotated[int, _f("the dim that padding is along", "message")]
    pad_input: Annotated[list[int], _f("the padded input's sizes, as the message prints them", "message")]
    unfold_dim: Annotated[int, _f("the dim `Tensor.unfold` cut windows along", "message")]
    unfold_max: Annotated[int, _f("that dim's size", "message")]
    unfold_window: Annotated[int, _f("the window size it was asked for", "message")]
    grid_input_shape: Annotated[list[int], _f("the input grid_sample samples from", "message")]
    grid_shape: Annotated[list[int], _f("the sampling grid it was given (`[N, H, W, 2]`)", "message")]
    einsum_subscript: Annotated[str, _f("the einsum subscript letter whose sizes disagree", "message")]
    einsum_size_given: Annotated[int, _f("its size in the operand that disagrees", "message")]
    einsum_operand: Annotated[int, _f("that operand's position (0-based)", "message")]
    einsum_size_seen: Annotated[int, _f("its size in the operands before", "message")]
    permute_tensor_dims: Annotated[int, _f("the dims a tensor given to permute has", "message")]
    permute_given_dims: Annotated[int, _f("the dims the permutation names", "message")]
    master_addr: Annotated[str, _f("the rendezvous host a process could not reach (MASTER_ADDR)", "message")]
    grad_given: Annotated[list[int], _f("the shape of the gradient given to backward()", "message")]
    grad_expected: Annotated[list[int], _f("the shape of the output it was given for", "message")]
    optimizer_given: Annotated[
        str, _f("what an optimizer was given instead of an iterable of parameters (`torch.FloatTensor`, `method`)", "message")
    ]
    split_total: Annotated[int, _f("the size of the dim `split` cuts", "message")]
    split_dim: Annotated[int, _f("the dim `split` cuts along", "message")]
    split_sizes: Annotated[list[int], _f("the sizes `split` was asked for", "message")]
    gn_channels: Annotated[int, _f("the channels a GroupNorm was built for", "message")]
    gn_groups: Annotated[int, _f("the groups it was asked to split them into", "message")]
    device_given: Annotated[str, _f("a string given as a device that torch cannot read as one (`float16`, `gpu`)", "message")]
    config_key: Annotated[
        str, _f("the configuration key the code or an override named and the config lacks (`trainer.gpus`)", "exception", "message")
    ]
    view_backward: Annotated[str, _f("the backward node of the view an in-place op changed (`UnbindBackward0`)", "message")]
    value_shape: Annotated[list[int], _f("the shape of a value assigned into an indexed slice (`x[idx] = value`)", "message")]
    index_result_shape: Annotated[list[int], _f("the shape of the slice that index selects", "message")]
    dist_param: Annotated[str, _f("the torch.distributions parameter that failed its check (`loc`, `scale`, `probs`)", "message")]
    dist_name: Annotated[str, _f("the distribution it belongs to (`Normal`, `Categorical`)", "message")]
    dist_constraint: Annotated[str, _f("the constraint it failed (`Real()`, `GreaterThan(lower_bound=0.0)`)", "message")]
    cv_function: Annotated[str, _f("the OpenCV function given an empty image (`cvtColor`, `resize`)", "message")]
    unused_param_indices: Annotated[list[int], _f("the indices in `model.parameters()` of those DDP got no gradient for", "message")]
    unused_params: Annotated[str, _f("the names of the parameters DDP got no gradient for (TORCH_DISTRIBUTED_DEBUG)", "message")]
    pickled_object: Annotated[str, _f("what pickle could not name (`main.<locals>.<lambda>`)", "message")]
    master_port: Annotated[int, _f("the port torch.distributed's store could not listen on (MASTER_PORT)", "message")]
    clients_joined: Annotated[int, _f("the processes that reached the rendezvous before it timed out", "message")]
    clients_expected: Annotated[int, _f("the processes the rendezvous waited for (the world size)", "message")]
    env_var: Annotated[str, _f("the launcher's variable an env:// rendezvous found unset (RANK, WORLD_SIZE, MASTER_ADDR)", "message")]
    none_in_batch: Annotated[
        bool, _f("a list collated or stacked into a batch holds None (a Dataset's `__getitem__` that returned None)", "context")
    ]
    none_element: Annotated[int, _f("the position of that None in the list, when the message names it", "context")]
    similar_names: Annotated[list[str], _f("live: names defined there that are close to it", "live")]
    kbdebug_failure: Annotated[str, _f("what kbdebug itself failed on while reading a live exception (it never raises)", "kbdebug")]
    # -- what kbdebug.guard() reports with the error it raises
    bad_value: Annotated[Number, _f("the first bad value", "guard")]
    position: Annotated[list[int], _f("its position", "guard")]
    positions: Annotated[list[list[int]], _f("the first bad positions", "guard")]
    bad_count: Annotated[int, _f("how many values are bad", "guard")]
    bad_values: Annotated[list[Number], _f("the distinct bad values (the first ten)", "guard")]
    shape: Annotated[Shape, _f("the argument's shape", "guard")]
    valid_range: Annotated[list[int], _f("the range the values must be in", "guard")]
    num_embeddings: Annotated[int, _f("the embedding's row count", "guard")]
    ignore_index: Annotated[int, _f("the loss's ignore_index", "guard")]
    min: Annotated[Number, _f("the argument's smallest value", "guard")]
    max: Annotated[Number, _f("the argument's largest value", "guard")]
    zero_rows: Annotated[int, _f("rows of a probability tensor that sum to zero", "guard")]
    fix_hint: Annotated[str, _f("the change guard() suggests for the bad values", "guard")]
