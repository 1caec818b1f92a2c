"""One or more lines per alternative of each grammar's `start` rule."""

from __future__ import annotations

import pickle
import re

import pytest
from lark.exceptions import LarkError

from kbdebug.parse.grammar import GRAMMARS, _build, _dumps, _Literal, _terminal, directive, first_alt, parse, source

CASES = [
    (
        "kernel_assert",
        "assert_line",
        '../aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [142,0,0], thread: [40,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.',
    ),
    (
        "kernel_assert",
        "assert_line",
        "C:\\actions-runner\\_work\\pytorch\\NLLLoss2d.cu:106: block: [4,0,0], thread: [580,0,0] Assertion `t >= 0 && t < n_classes` failed.",
    ),
    (
        "kernel_assert",
        "assert_line",
        '/x/IndexKernel.cu:53: lambda [](int)->auto::operator()(int)->auto: block: [502,0,0], thread: [2,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && "index out of bounds"` failed.',
    ),
    (
        "kernel_assert",
        "assert_line",
        "/x/TensorCompare.cu:112: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed.",
    ),
    (
        "kernel_assert",
        "assert_line",
        "unknown:0: unknown: block: [0,0,0], thread: [0,0,0] Assertion `index out of bounds: 0 <= tmp4 < 50257` failed.",
    ),
    (
        "kernel_assert",
        "assert_line",
        "/x/Indexing.cu:362: void indexSelectLargeIndex(TensorInfo<T, IndexType>, long) [with T = float, IndexType = unsigned int]: block: [123,0,0], thread: [64,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
    ),
    (
        "kernel_assert",
        "assert_line",
        "/x/Loss.cu：242：nll_loss_forward_reduce_cuda_kernel_2d：block：[0，0，0]，thread：[5，0，0] Assertion `t >= 0 && t < n_classes` failed.",
    ),
    (
        "kernel_assert",
        "assert_line",
        "/pytorch/c10/core/DynamicCast.h:112: fetch_and_cast: block: [0,0,0], thread: [0,0,0] Assertion `false` failed.",
    ),
    (
        "kernel_assert",
        "printf_line",
        "[CUDA_KERNEL_ASSERT] /x/IndexKernelUtils.cu:30: vectorized_gather_kernel: block: [1,0,0], thread: [2,0,0]: Assertion failed: `ind >=0 && ind < ind_dim_size`: Expected 0 <= index < ind_dim_size(10), but got index = 12",
    ),
    ("traceback", "header", "Traceback (most recent call last):"),
    ("traceback", "frame", '  File "train.py", line 172, in train'),
    ("traceback", "exception", "RuntimeError: CUDA error: device-side assert triggered"),
    ("traceback", "exception", "torch.OutOfMemoryError: CUDA out of memory."),
    ("traceback", "exception", "KeyboardInterrupt"),
    ("traceback", "warning", "C:\\x\\torch\\cuda\\__init__.py:209: UserWarning:"),
    ("traceback", "caret", "    ^^^^^^^^^^^^"),
    ("traceback", "repeated", "  [Previous line repeated 2 more times]"),
    ("traceback", "ide_exception", "Exception has occurred: RuntimeError"),
    ("traceback", "logged_exception", "<class 'ValueError'> at loop.py:12 - Expected input batch_size (4) to match target batch_size (8)."),
    ("traceback", "frame", 'seg/models/crf.py", line 598, in inference'),
    ("traceback", "ipython_frame", "~/miniconda3/lib/python3.7/site-packages/torch/nn/modules/conv.py in forward(self, input)"),
    ("traceback", "ipython_arrow", "--> 308                         self.padding, self.dilation, self.groups)"),
    ("traceback", "ipython_arrow", "-> 1501     return forward_call(*args, **kwargs)"),
    ("traceback", "ipython_frame", "Cell In[7], line 3"),
    ("traceback", "ipython8_frame", "File ~/work/train.py:42, in train(model, loader)"),
    ("traceback", "rich_frame", "/home/u/seg/train.py:31 in step"),
    ("traceback", "rich_frame", "C:\\Users\\u\\train.py:7 in <module>"),
    ("traceback", "rich_arrow", "❱ 31 │   │   loss = criterion(logits, y)"),
    ("traceback", "ipython_frame", "Cell In[12], line 5, in train(model, loader)"),
    ("traceback", "chain", "During handling of the above exception, another exception occurred:"),
    ("traceback", "chain", "The above exception was the direct cause of the following exception:"),
    ("cuda_error", "cuda_error", "RuntimeError: CUDA error: device-side assert triggered"),
    (
        "cuda_error",
        "legacy",
        "RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/aten/src/THCUNN/generic/ClassNLLCriterion.cu:116",
    ),
    ("cuda_error", "thc", "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCTensorCopy.cu line=84 error=74 : misaligned address"),
    ("cuda_error", "app_error", "d:\\projects\\runnerGPU.cc: 70: cuda error 4: unspecified launch failure"),
    ("cuda_error", "search_hint", "Search for `cudaErrorAssert' in https://docs.nvidia.com/x.html for more information."),
    ("cuda_error", "cudnn", "RuntimeError: CUDNN_STATUS_EXECUTION_FAILED"),
    (
        "cuda_error",
        "cublas_thc",
        "RuntimeError: cublas runtime error : the GPU program failed to execute at /opt/conda/aten/src/THC/THCBlas.cu:411",
    ),
    ("cuda_error", "cublas_entry", " ** On entry to SgemmStridedBatched parameter number 12 had an illegal value"),
    (
        "cuda_error",
        "async_hint",
        "CUDA kernel errors might be asynchronously reported at some other API call,so the stacktrace below might be incorrect.",
    ),
    ("cuda_error", "blocking_hint", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1."),
    ("cuda_error", "dsa_hint", "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."),
    ("cuda_error", "cuda_error", "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa)`"),
    (
        "cuda_error",
        "cudnn",
        "RuntimeError: CuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input.",
    ),
    ("cuda_error", "terminate", "terminate called after throwing an instance of 'c10::Error'"),
    ("cuda_error", "what_line", "what():  CUDA error: an illegal memory access was encountered"),
    (
        "cuda_error",
        "raised_at",
        "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:44 (most recent call first):",
    ),
    ("cuda_error", "cpp_frame", "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f in /x/libc10.so)"),
    ("sanitizer", "banner", "COMPUTE-SANITIZER"),
    ("sanitizer", "invalid_access", "Invalid __global__ read of size 4"),
    ("sanitizer", "invalid_access", "Invalid __shared__ write of size 16 bytes"),
    ("sanitizer", "at", "    at 0x00000ae8 in d:\\x/synapseKrnl.cc:148:learnSynapsesPost(float)"),
    ("sanitizer", "by_thread", "    by thread (103,0,0) in block (7,0,0)"),
    ("sanitizer", "address_line", "    Address 0x60052b338 is out of bounds"),
    ("sanitizer", "address_line", "    Access to 0x147267fff80 is out of bounds"),
    (
        "sanitizer",
        "allocation_line",
        "    and is 1,241,911,296 bytes before the nearest allocation at 0x7639e0000000 of size 5,033,164,800 bytes",
    ),
    ("sanitizer", "saved_backtrace", "    Saved host backtrace up to driver entry point at kernel launch time"),
    ("sanitizer", "host_frame", "        Host Frame:  [0x93c3fa] in libcusparse.so.12"),
    ("sanitizer", "module_line", "               in /usr/lib/x86_64-linux-gnu/libcuda.so.1"),
    (
        "sanitizer",
        "api_error",
        'Program hit CUDA_ERROR_INVALID_VALUE (error 1) due to "invalid argument" on CUDA API call to cuPointerGetAttribute. ',
    ),
    ("sanitizer", "race", "WARN: Race reported between Write access at 0x0002f6e0 in _ZN4raft"),
    ("sanitizer", "race", "Error: Race reported between Write access at cudf::x(unsigned int)+0xd790 in delta_binary.cuh:324"),
    ("sanitizer", "and_access", "    and Read access at 0x000302c0 in _ZN4raft [4 hazards]"),
    ("sanitizer", "hazard", "ERROR: Potential WAW hazard detected at __shared__ 0x0 in block (0,0,0) :"),
    ("sanitizer", "hazard", "WARN:(Warp Level Programming) Potential RAW hazard detected at __shared__ 0xf4 in block (0, 0, 0) :"),
    ("sanitizer", "hazard_access", "    Write Thread (24, 0, 0) at 0x00001ab0 in f.cu:12:kern"),
    ("sanitizer", "current_value", "    Current Value : 1, Incoming Value : 2"),
    ("sanitizer", "uninitialized", "Uninitialized __global__ memory read of size 4"),
    ("sanitizer", "host_api_access", "Host API memory access error at host access to 0x7f7fcdc01200 of size 400 bytes"),
    ("sanitizer", "uninit_access", "    Uninitialized access at 0x7f7fcdc01300 on access by cudaMemcpy source"),
    ("sanitizer", "unused_memory", " Unused memory in allocation 0x7fed9f400000 of size 100 bytes"),
    ("sanitizer", "barrier", "Barrier error detected. Missing wait."),
    ("sanitizer", "barrier_location", "    Barrier is located at shared address 0x20410"),
    ("sanitizer", "wgmma", "Warpgroup MMA sequence error detected"),
    ("sanitizer", "device_frame", "    Device Frame:__cuda_sm70_warpsync (__cuda_sm70_warpsync : 0x30)"),
    ("sanitizer", "malloc_free", "Malloc/Free error encountered : Double free"),
    ("sanitizer", "leak", "Leaked 1,024 bytes at 0x7f00 on the device heap"),
    ("sanitizer", "error_summary", "ERROR SUMMARY: 2 errors"),
    ("sanitizer", "leak_summary", "LEAK SUMMARY: 1024 bytes leaked in 1 allocations"),
    ("sanitizer", "race_summary", "RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)"),
    ("sanitizer_location", "location", "0x00000ae8 in d:\\x/synapseKrnl.cc:148:learnSynapsesPost(float)"),
    ("sanitizer", "internal", "Internal Sanitizer Error: The Sanitizer encountered an error while launching k"),
    (
        "distributed",
        "watchdog",
        "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.",
    ),
    (
        "distributed",
        "watchdog",
        "[E122 07:39:51.324142902 ProcessGroupNCCL.cpp:1515] [PG 3 Rank 0] Process group watchdog thread terminated with exception: CUDA error: x",
    ),
    (
        "distributed",
        "nccl_failure",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled cuda error",
    ),
    ("distributed", "nccl_warn", "NCCL WARN Socket recv failed while polling for opId=0x55a51966cc80"),
    ("elastic", "table_field", "  rank      : 3 (local_rank: 3)"),
    ("elastic", "table_field", "  traceback : Signal 9 (SIGKILL) received by PID 5100"),
    ("traceback", "fatal", "Fatal Python error: Segmentation fault"),
    ("traceback", "thread", "Current thread 0x00007f1c4a9b3740 (most recent call first):"),
    ("traceback", "frame", 'File "/home/me/proj/model.py", line 88 in forward'),
    ("job", "oom_killed_process", "Out of memory: Killed process 48211 (python) total-vm:98123456kB, anon-rss:61234567kB"),
    ("job", "oom_killed_process", "Memory cgroup out of memory: Killed process 48211 (python3) total-vm:1kB"),
    ("job", "oom_kill", "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,task=python,pid=48211,uid=1000"),
    ("job", "xid_report", "NVRM: Xid (PCI:0000:3b:00): 79, pid=48211, name=python, GPU has fallen off the bus."),
    ("job", "gpu_lost", "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus."),
    ("job", "gpu_lost", "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU"),
    ("job", "slurm_cancelled", "*** JOB 7781234 ON gpu-node-07 CANCELLED AT 2024-05-06T11:02:17 DUE TO TIME LIMIT ***"),
    ("job", "slurm_cancelled", "* STEP 7781234.0 ON gpu-node-07 CANCELLED AT 2024-05-06T11:02:17 *"),
    ("job", "slurm_oom", "Detected 1 oom_kill event in StepId=7781234.batch. Some of the step tasks have been OOM Killed."),
    ("job", "slurm_oom", "Detected 2 oom-kill event(s) in step 7781234.0 cgroup."),
    ("job", "slurm_mem_limit", "exceeded memory limit (81920000 > 81920000), being killed"),
    ("job", "slurm_mem_limit", "Exceeded step memory limit at some point."),
    ("job", "process_finished", "Process finished with exit code 139 (interrupted by signal 11: SIGSEGV)"),
    ("job", "process_finished", "Process finished with exit code -1073741819 (0xC0000005)"),
    ("job", "srun_task", "srun: error: gpu-node-07: task 0: Out Of Memory"),
    ("job", "srun_task", "srun: error: gpu-node-07: task 3: Segmentation fault (core dumped)"),
    ("job", "k8s_oomkilled", "OOMKilled"),
    ("job", "heap_corruption", "free(): invalid pointer"),
    ("job", "heap_corruption", "double free or corruption (!prev)"),
    ("job", "heap_corruption", "corrupted size vs. prev_size"),
    ("job", "stack_smashing", "*** stack smashing detected ***: terminated"),
    ("job", "worker_fault", "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm)."),
    ("job", "launcher_signal", "Received Signals.SIGTERM death signal, shutting down workers"),
    ("job", "launcher_failed", "failed (exitcode: -9) local_rank: 0 (pid: 5100) of binary: /usr/bin/python3"),
    ("shell", "shell_death", "Killed"),
    ("shell", "shell_death", "Segmentation fault (core dumped)"),
    ("shell", "shell_death", "./run.sh: line 14: 90211 Killed                  python train.py --config cfg.yaml"),
    ("shell", "shell_death", "zsh: segmentation fault (core dumped)  python train.py"),
    ("elastic", "table_head", "Root Cause (first observed failure):"),
]

MESSAGES = {
    "broadcast": "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1",
    "matmul": "mat1 and mat2 shapes cannot be multiplied (64x512 and 256x10)",
    "matmul_fake": "a and b must have same reduction dim, but got [64, 512] X [256, 10].",
    "matmul_old": "size mismatch, m1: [64 x 512], m2: [256 x 10]",
    "conv": "Given groups=1, weight of size [64, 3, 7, 7], expected input[1, 1, 224, 224] to have 3 channels, but got 1 channels instead",
    "batch_size": "Expected input batch_size (32) to match target batch_size (64).",
    "spatial_target": "only batches of spatial targets supported (3D tensors) but got targets of size: : [4, 1, 96, 96, 96]",
    "spatial_input": "only batches of spatial inputs supported (4D tensors), but got input of size: [4, 96, 96]",
    "multi_target": "0D or 1D target tensor expected, multi-target not supported",
    "target_size": "Target size (torch.Size([16])) must be the same as input size (torch.Size([16, 1]))",
    "target_size_warn": "Using a target size (torch.Size([16])) that is different to the input size (torch.Size([16, 1])) is deprecated.",
    "scalar_type": "expected scalar type Long but found Float",
    "scalar_type_old": "Expected object of scalar type Long but got scalar type Float for argument #2 'target'",
    "not_implemented": "\"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Float'",
    "target_oob": "Target 14 is out of bounds.",
    "bce_range": "all elements of input should be between 0 and 1",
    "one_hot": "Class values must be smaller than num_classes.",
    "index_range": "index out of range in self",
    "index_oob": "index 5 is out of bounds for dimension 0 with size 3",
    "device_mismatch": "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
    "device_mismatch_new": "Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA__index_select)",
    "input_weight_type": "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same",
    "invalid_device": "invalid device ordinal",
    "driver": "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU",
    "deterministic": "upsample_linear1d_backward_out_cuda does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms(True)'. You can",
    "cublas_workspace": "Deterministic behavior was enabled with either `torch.use_deterministic_algorithms(True)` or",
    "anomaly_nan": "Function 'LogSoftmaxBackward0' returned nan values in its 0th output.",
    "loss_nan": "loss is nan, stopping training",
    "multinomial": "probability tensor contains either `inf`, `nan` or element < 0",
    "multinomial_sum": "invalid multinomial distribution (sum of probabilities <= 0)",
    "monai_shape": "ground truth has different shape (torch.Size([4, 1, 96, 96, 96])) from input (torch.Size([4, 14, 96, 96, 96]))",
    "monai_channel": "labels should have a channel with length equal to one.",
    "monai_onehot_int": "the number of classes for One-Hot must be an integer, got <class 'bool'>.",
    "monai_single_channel": "single channel prediction, `softmax=True` ignored.",
    "monai_ndim": "the number of dimensions for input and target should be the same, got shape torch.Size([2, 3]) and torch.Size([2]).",
    "arch_incompatible": "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation.",
    "arch_supported": "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86 sm_90.",
    "target_size_nd": "Expected target size [2, 4, 4, 4], got [2, 1, 4, 4, 4]",
    "device_expected": "Tensor on device cpu is not on the expected device meta!",
    "broadcast_fake": "Attempting to broadcast a dimension of length 3 at -1! Mismatching argument at index 1 had torch.Size([2, 3]); but expected shape should be broadcastable to [2, 4]",
    "expand": "The expanded size of the tensor (3) must match the existing size (4) at non-singleton dimension 1.  Target sizes: [2, 3].  Tensor sizes: [2, 4]",
    "cat_sizes": "Sizes of tensors must match except in dimension 1. Expected size 32 but got size 31 for tensor number 1 in the list.",
    "matmul_dim": "mat1 dim 1 must match mat2 dim 0",
    "conv_dims": "Expected 4-dimensional input for 4-dimensional weight [64, 3, 7, 7], but got 3-dimensional input of size [3, 224, 224] instead",
    "conv_input": "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [2, 1, 3, 32, 32]",
    "device_fake": "Unhandled FakeTensor Device Propagation for aten.mm.default, found two different devices cuda:0, cpu",
    "device_type_old": "Expected object of device type cuda but got device type cpu for argument #1 'self' in call to _th_index_select",
    "spatial_sizes": "input and target batch or spatial sizes don't match: target [2, 4, 4], input [2, 14, 5, 5]",
    "nll_sizes": "size mismatch (got input: [4, 10], target: [5])",
    "gpu_too_old": "Found GPU0 Tesla K80 which is of cuda capability 3.7.",
    "bernoulli_p": "Expected p_in >= 0 && p_in <= 1 to be true, but got false.",
    "cudnn_engine": "GET was unable to find an engine to execute this computation",
    "driver_oom": "CUDA driver error: out of memory",
    "target_dtype": "expected target dtype to be Long or Byte, but got Float",
    "one_hot_dtype": "one_hot is only applicable to index tensor of type LongTensor.",
    "anomaly_detected": "Error detected in SoftmaxBackward0. Traceback of forward call that caused the error:",
    "scatter_invalid": "Invalid index in scatter at /opt/conda/aten/src/TH/generic/THTensorEvenMoreMath.cpp:151",
    "inconsistent": "inconsistent tensor size, expected r_ [4 x 10], t [4 x 10] and src [40] to have the same number of elements, but got 40, 40 and 40 elements respectively",
    "index_table": "index out of range: Tried to access index 512 out of table with 511 rows. at /pytorch/aten/src/TH/generic/THTensorEvenMoreMath.cpp:418",
    "th_shapes": "input and target shapes do not match: input [16 x 1], target [16] at /pytorch/aten/src/THCUNN/generic/MSECriterion.cu:15",
    "monai_same": "y_pred and y should have same shapes, got torch.Size([2, 3, 96, 96]) and torch.Size([2, 1, 96, 96]).",
    "metric_same": "Predictions and targets are expected to have the same shape, but got torch.Size([8, 10]) and torch.Size([8]).",
    "ignite_shape": "y_pred must have shape (batch_size, num_classes (currently set to 4), ...) and y must have shape of (batch_size, ...), but given torch.Size([8, 1]) vs torch.Size([8, 4]).",
    "device_mismatch_arg": "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! "
    "(when checking argument for argument target in method wrapper_CUDA_nll_loss2d_forward)",
    "dtype_pair": "mat1 and mat2 must have the same dtype, but got Double and Float",
    "dtype_pair_expected": "expected m1 and m2 to have the same dtype, but got: long int != float",
    "dtype_vectors": "expected both vectors to have same dtype, but found Float and Double",
    "input_bias_type": "Input type (c10::Half) and bias type (float) should be the same",
    "found_dtype": "Found dtype Double but expected Float",
    "result_cast": "result type Float can't be cast to the desired output type Long",
    "index_put_dtype": "Index put requires the source and destination dtypes match, got Float for the destination and Double for the source.",
    "rnn_dtype": "RNN input dtype (torch.float64) does not match weight dtype (torch.float32). Convert input: input.to(torch.float32)",
    "index_dtype": "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; "
    "but got torch.FloatTensor instead (while checking arguments for embedding)",
    "view_size": "shape '[-1, 3, 2047]' is invalid for input of size 24576",
    "view_stride": "view size is not compatible with input tensor's size and stride (at least one dimension spans across two "
    "contiguous subspaces). Use .reshape(...) instead.",
    "inplace_version": "one of the variables needed for gradient computation has been modified by an inplace operation: "
    "[torch.FloatTensor [4, 8]], which is output 0 of ReluBackward0, is at version 2; expected version 1 instead.",
    "backward_twice": "Trying to backward through the graph a second time (or directly access saved tensors after they have "
    "already been freed).",
    "no_grad_fn": "element 0 of tensors does not require grad and does not have a grad_fn",
    "collate_lengths": "each element in list of batch should be of equal size",
    "stack_sizes": "stack expects each tensor to be equal size, but got [3, 32, 32] at entry 0 and [3, 33, 32] at entry 1",
    "worker_killed": "DataLoader worker (pid 2213) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory.",
    "worker_exited": "DataLoader worker (pid(s) 2213, 2214) exited unexpectedly",
    "loader_timeout": "DataLoader timed out after 120 seconds",
    "caught_in_worker": "Caught FileNotFoundError in DataLoader worker process 3.",
    "param_size_mismatch": "size mismatch for fc.weight: copying a param with shape torch.Size([1000, 512]) from checkpoint, the shape in current model is torch.Size([10, 512]).",
}

OOM = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.78 GiB. GPU 0 has a total capacity of 31.47 GiB of which 12.73 GiB is free. Including non-PyTorch memory, this process has 18.73 GiB memory in use. Of the allocated memory 9.08 GiB is allocated by PyTorch, and 9.35 GiB is reserved by PyTorch but unallocated.",
    "RuntimeError: CUDA out of memory. Tried to allocate 26.00 MiB (GPU 0; 1024.00 MiB total capacity; 435.61 MiB already allocated; 24.17 MiB free; 26.39 MiB cached)",
    "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 4; 31.75 GiB total capacity; 3.75 MiB free; 30.40 GiB reserved in total by PyTorch)",
]


@pytest.mark.parametrize(("grammar", "alt", "line"), CASES)
def test_grammar_alternative(grammar: str, alt: str, line: str) -> None:
    if grammar == "sanitizer":  # the tool prints every line after its prefix
        line = "========= " + line.strip()
    tree = parse(grammar, line)
    assert tree is not None, line
    # the line kind is the alternative of `start`, or a rule under it (a sanitizer error under its check)
    assert alt in (first_alt(tree).data, first_alt(first_alt(tree)).data)


@pytest.mark.parametrize(("template", "line"), sorted(MESSAGES.items()))
def test_message_templates(template: str, line: str) -> None:
    tree = parse("messages", line)
    assert tree is not None
    assert first_alt(tree).data == template


def test_every_message_template_has_an_example() -> None:
    from kbdebug._resources import data_dir

    text = (data_dir("grammars") / "messages.lark").read_text()
    start = text[text.index("start:") : text.index(") REST?")]
    alternatives = set(re.findall(r"[a-z_0-9]+", start.split("(", 1)[1]))
    assert alternatives == set(MESSAGES)


@pytest.mark.parametrize("line", OOM)
def test_oom_wordings(line: str) -> None:
    assert parse("oom", line[line.index("CUDA out") :] if "Error" not in line else line) is not None


def test_every_grammar_is_exercised() -> None:
    used = {g for g, _, _ in CASES} | {"messages", "oom"}
    assert used == set(GRAMMARS)


@pytest.mark.parametrize("grammar", GRAMMARS)
def test_non_matching_text_gives_none(grammar: str) -> None:
    assert parse(grammar, "Epoch 3: 41%|####      | 412/1000 [02:11<03:07, loss=0.43]") is None


@pytest.mark.parametrize("template", sorted(MESSAGES))
def test_every_template_is_found_where_it_starts(template: str) -> None:
    """The anchors derived from messages.lark find each template's start, inside a longer line too."""
    from kbdebug.parse.derive import anchors

    line = "RuntimeError: " + MESSAGES[template]
    found = [first_alt(tree).data for s in anchors("messages").starts(line) if (tree := parse("messages", line[s:]))]
    assert template in found[:1] or (found and found[0] == template), (template, found)


def test_oom_sentences_are_figures_not_rest() -> None:
    """Every sentence of the 2.x wording is read into its field, where REST could have taken them all."""
    from kbdebug.parse import parse_text

    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 23.65 GiB "
        "of which 1.20 GiB is free. Process 77 has 3.00 GiB memory in use. Including non-PyTorch memory, this process has "
        "22.10 GiB memory in use. 10.00 GiB allowed; Of the allocated memory 20.10 GiB is allocated by PyTorch, with 1.00 GiB "
        "allocated in private pools (e.g., CUDA Graphs), and 1.50 GiB is reserved by PyTorch but unallocated. If reserved"
    )
    (oom,) = [r for r in parse_text(line) if r.kind == "oom"]
    assert oom.model_dump(include={"exc_type", "gpu_index", "total_capacity", "free", "process_memory_in_use", "allowed"}) == {
        "exc_type": "torch.OutOfMemoryError",
        "gpu_index": 1,
        "total_capacity": "23.65 GiB",
        "free": "1.20 GiB",
        "process_memory_in_use": "22.10 GiB",
        "allowed": "10.00 GiB",
    }
    assert (oom.allocated_by_pytorch, oom.private_pools, oom.reserved_but_unallocated) == ("20.10 GiB", "1.00 GiB", "1.50 GiB")


def test_traceback_lines_become_frames_and_the_exception() -> None:
    """Each traceback line kind gives its fields by the grammar's names (plain, IPython and IPython 8 frames)."""
    from kbdebug.parse import parse_text

    log = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/home/u/train.py", line 12, in main',
            "    loss = criterion(out, y)",
            "File ~/nb/model.py:7, in forward(self, x)",
            "Cell In[3], line 5, in step(batch)",
            "ValueError: Expected input batch_size (4) to match target batch_size (8).",
        ]
    )
    (exc,) = [r for r in parse_text(log) if r.kind == "exception"]
    assert [(f.file, f.line, f.function) for f in exc.frames] == [
        ("/home/u/train.py", 12, "main"),
        ("~/nb/model.py", 7, "forward"),
        ("Cell In[3]", 5, "step"),
    ]
    assert exc.frames[0].code == "loss = criterion(out, y)"
    assert (exc.exc_type, exc.message) == ("ValueError", "Expected input batch_size (4) to match target batch_size (8).")


@pytest.mark.parametrize(
    ("line", "at_file", "at_line"),
    [
        (
            "RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/aten/src/THC/x.cu:265",
            "/pytorch/aten/src/THC/x.cu",
            265,
        ),
        ("RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorc", "/pytorc", None),
        ("RuntimeError: cuda runtime error (59) : device-side assert triggered", None, None),
    ],
)
def test_legacy_cuda_error_cut_anywhere_in_its_location(line: str, at_file: str | None, at_line: int | None) -> None:
    from kbdebug.parse import parse_text

    (err,) = [r for r in parse_text(line) if r.kind == "cuda_error"]
    assert (err.error, err.code, err.at_file, err.at_line) == ("device-side assert triggered", 59, at_file, at_line)


@pytest.mark.parametrize(
    ("text", "function", "file", "line", "pc", "hazards"),
    [
        ("0x00000ae8 in d:\\x/k.cc:148:learn(float)", "learn(float)", "d:\\x/k.cc", 148, "0x00000ae8", None),
        ("0x000302c0 in _ZN4raft [4 hazards]", "_ZN4raft", None, None, "0x000302c0", 4),
        ("void f<T, (int)2>(T*, int)+0x1a0 in /x/k.cuh:118", "void f<T, (int)2>(T*, int)", "/x/k.cuh", 118, "+0x1a0", None),
        ("row_kernel(const uchar4 *, unsigned int *)+0x490", "row_kernel(const uchar4 *, unsigned int *)", None, None, "+0x490", None),
        ("kern:0x1a0 in k.cu:12", "kern", "k.cu", 12, "0x1a0", None),
        ("copy_tile in tile_copy.h:88", "copy_tile", "tile_copy.h", 88, None, None),
        ("void f<float>(float*, int) in /x/k.cu:12 [2 hazards]", "void f<float>(float*, int)", "/x/k.cu", 12, None, 2),
        (
            "/x/k.hpp:689:ns::g(Max const &, int*) (ns::g(Max const &, int*) : 0xff0)",
            "ns::g(Max const &, int*)",
            "/x/k.hpp",
            689,
            None,
            None,
        ),
        ("__cuda_sm70_warpsync (__cuda_sm70_warpsync : 0x30)", "__cuda_sm70_warpsync", None, None, "0x30", None),
        ("something the tools never printed", "something the tools never printed", None, None, None, None),
    ],
)
def test_sanitizer_locations_in_each_layout(
    text: str, function: str, file: str | None, line: int | None, pc: str | None, hazards: int | None
) -> None:
    from kbdebug.parse.sanitizer import location

    frame, count = location(text)
    assert (frame.function, frame.file, frame.line, frame.module, count) == (function, file, line, pc, hazards)


@pytest.mark.parametrize(
    ("code", "pasted", "message"),
    [
        (
            "assert input.size() == target.size(), \"'input' and 'target' must have the same shape\"",
            "AssertionError: 'input' and 'target' must have t",
            "'input' and 'target' must have the same shape",
        ),
        (
            'raise ValueError("labels should have a channel with length equal to one.")',
            "ValueError: labels should have a chan",
            "labels should have a channel with length equal to one.",
        ),
        # values in the message (an f-string, a format) cannot be completed: kept as pasted
        ('assert a.shape == b.shape, f"{a.shape} != {b.shape}"', "AssertionError: torch.Size([2, 3]) != to", "torch.Size([2, 3]) != to"),
        (
            'raise ValueError("Target size ({}) must be".format(t))',
            "ValueError: Target size (torch.Size([1, 3",
            "Target size (torch.Size([1, 3",
        ),
    ],
)
def test_a_message_cut_off_is_completed_from_the_literal_on_its_raising_line(code: str, pasted: str, message: str) -> None:
    from kbdebug.parse import parse_text

    log = f'Traceback (most recent call last):\n  File "/x/m.py", line 9, in f\n    {code}\n{pasted}\n'
    (exc,) = [r for r in parse_text(log) if r.kind == "exception"]
    assert exc.message == message


def test_a_paste_that_lost_its_newlines_is_read_as_the_lines_it_was() -> None:
    """`terminate called ...` and `what():` always start a line of their own: found mid-line, the line was glued."""
    from kbdebug.parse import parse_text

    glued = (
        "[E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire process down. "
        "terminate called after throwing an instance of 'std::runtime_error' what(): NCCL error: unhandled system error, "
        "NCCL version 2.18.1 Exception raised from checkForNCCLErrors at ../torch/csrc/ProcessGroupNCCL.cpp:1275 (most recent call first):"
    )
    records = parse_text(glued)
    (cpp,) = [r for r in records if r.kind == "cpp_exception"]
    assert (cpp.exc_type, cpp.what, cpp.raised_from, cpp.raised_line) == (
        "std::runtime_error",
        "NCCL error: unhandled system error, NCCL version 2.18.1",
        "checkForNCCLErrors",
        1275,
    )
    assert [r.event for r in records if r.kind == "nccl"] == ["aborted", "failure"]
    # a CUDA error inside an exception's own line is not a glue point
    (exc,) = [r for r in parse_text("RuntimeError: CUDA error: device-side assert triggered") if r.kind == "exception"]
    assert exc.message == "CUDA error: device-side assert triggered"


EARLEY = [g for g in GRAMMARS if "lalr" not in (directive(source(g), "parser") or [])]


@pytest.mark.parametrize("grammar", EARLEY)
def test_a_parser_read_back_from_the_cache_parses_as_the_one_just_built(grammar: str) -> None:
    """Earley parsers are pickled with their terminals as text (plain text found by startswith, regexes
    compiled on first use): read back, they must give every example line the same tree."""
    built = _build(source(grammar))
    read_back = pickle.loads(_dumps(built))
    lines = [line for g, _, line in CASES if g == grammar] + (list(MESSAGES.values()) if grammar == "messages" else [])
    lines += [line for line in OOM if grammar == "oom"]
    lines.append("Epoch 3: 41%|####      | 412/1000 [02:11<03:07, loss=0.43]")  # and fail alike
    assert len(lines) > 1
    for line in lines:
        try:
            want = built.parse(line.strip())
        except LarkError:
            want = None
        try:
            got = read_back.parse(line.strip())
        except LarkError:
            got = None
        assert got == want, line


def test_pickled_terminals_are_plain_text_or_compiled_on_first_use() -> None:
    plain = _terminal(re.escape("is out of bounds"), re.UNICODE)
    assert isinstance(plain, _Literal)
    found = plain.match("index 5 is out of bounds", 8)
    assert found is not None and (found.group(0), found.start(), found.end()) == ("is out of bounds", 8, 24)
    assert plain.match("index 5 is out of bounds", 7) is None
    rx = _terminal(r"\d+(?:\.\d+)?", re.UNICODE)
    assert not isinstance(rx, _Literal)
    m = rx.match("size 12.5 GiB", 5)
    assert m is not None and m.group(0) == "12.5"
    assert rx.groups == 0  # anything else asked of it is the compiled pattern's
    assert plain.match("index 5 is out of bounds", 8, 20) is None  # endpos, as re has it
    assert not isinstance(_terminal(re.escape("Error"), re.UNICODE | re.IGNORECASE), _Literal)
