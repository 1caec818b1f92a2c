"""Hard wrapping undone whatever else the paste did (own fixtures, one per family of the signature misses the dev
corpus showed): the same crash keeps its signature wrapped, prefixed, amid noise, and a coincidence is no wrap."""

from __future__ import annotations

import pytest

from kbdebug.api import diagnose_text
from kbdebug.normalise import lines_of


def texts(text: str) -> list[str]:
    return [ln.text for ln in lines_of(text)]


def wrap(text: str, width: int) -> str:
    return "".join(ln[k : k + width] + "\n" for ln in text.splitlines() for k in range(0, max(len(ln), 1), width))


def key(text: str) -> str:
    root = diagnose_text(text).root
    assert root is not None
    return root.signature_key


ASSERTS = "".join(
    f"../aten/src/ATen/native/cuda/NLLLoss2d.cu:104: nll_loss2d_forward_kernel: block: [7,0,0], thread: [{t},0,0] "
    "Assertion `t >= 0 && t < n_classes` failed.\n"
    for t in range(40, 46)
)
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/home/someone/projects/segmentation-experiments/evaluation/metrics_iou.py", line 58, in add_batch\n'
    "    onehot.scatter_(1, labels, 1).float()\n"
    "RuntimeError: index 26 is out of bounds for dimension 1 with size 23\n"
)


def test_the_same_head_of_many_asserts_wrapped_at_80_is_rejoined() -> None:
    """Each thread's assert has the same first 80 columns: the distinct tails say it is a wrap."""
    assert texts(wrap(ASSERTS, 80)) == ASSERTS.splitlines()
    assert key(wrap(ASSERTS, 80)) == key(ASSERTS)


def test_one_cut_frame_line_is_rejoined() -> None:
    """Only the frame line is longer than 80 columns: the one cut line of the paste, its piece unindented."""
    lines = texts(wrap(TRACEBACK, 80))
    assert '  File "/home/someone/projects/segmentation-experiments/evaluation/metrics_iou.py", line 58, in add_batch' in lines
    assert key(wrap(TRACEBACK, 80)) == key(TRACEBACK)


def test_a_cut_number_is_not_a_rank_prefix() -> None:
    path = "C:\\Users\\me\\envs\\app\\lib\\site-packages\\torch\\cuda\\__init__.py"
    path = "C:\\" + "x" * (76 - len(path)) + path[2:]  # so that the wrap cuts `:209` after `:20`
    warning = (
        f"{path}:209: UserWarning: NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current "
        "PyTorch installation.\nThe current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_61 sm_70 sm_75 sm_80 sm_86.\n"
    )
    wrapped = wrap(warning, 80)
    assert wrapped.splitlines()[1].startswith("9: UserWarning")
    assert texts(wrapped)[0] == warning.splitlines()[0]


def test_a_prefixed_head_continues_into_what_looks_like_an_exception() -> None:
    """`... [multiproc_executor.py:375] to` + `rch.OutOfMemoryError: ...`: the prefix says which line is a line of its own."""
    oom = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.74 GiB. GPU 1 has a total capacity of 23.57 GiB of "
        "which 1.12 GiB is free."
    )
    log = "".join(f"(VllmWorker rank={r} pid=29{r}1) ERROR 03-19 07:27:53 [multiproc_executor.py:375] {oom}\n" for r in (1, 0))
    lines = texts(wrap(log, 80))
    assert lines == [oom, oom]
    assert key(wrap(log, 80)) == key(log)


def test_a_paste_wrapped_twice_is_undone_twice() -> None:
    long = [
        f"[E424 01:17:25.031978332 ProcessGroupNCCL.cpp:1895] [Rank {r}] Process group watchdog thread terminated with exception: "
        f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, "
        f"NumelOut=112, Timeout(ms)=1800000) ran for 18000{r}0 milliseconds before timing out."
        for r in (2, 3)
    ]
    width = next(k for k in range(120, len(long[0])) if long[0][k] == " ")
    once = wrap("\n".join(long) + "\n", width)
    assert once.splitlines()[1].startswith(" ")  # a cut before a space leaves one: still a continuation
    assert texts(once) == long
    assert texts(wrap(once, 80)) == long
    assert key(wrap(once, 80)) == key(once) == key("\n".join(long) + "\n")


VARIED = "".join(
    f"../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [{b},0,0], thread: [{b + 40},0,0] "
    'Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.\n'
    for b in range(10, 16)
)


def test_longer_lines_elsewhere_and_a_rank_on_every_line_do_not_stop_the_rejoin() -> None:
    wrapped = wrap(VARIED, 100)
    noise = "W: " + "a long harmless warning line " * 8 + "\n"
    assert len(noise) > 100
    assert texts(noise * 3 + "step 1\n" * 5 + wrapped)[-6:] == VARIED.splitlines()
    prefixed = "".join(f"[rank5]: {ln}\n" for ln in wrapped.splitlines())
    assert texts(prefixed) == VARIED.splitlines()
    assert key(prefixed) == key(VARIED)


def test_bold_across_a_wrap_is_removed() -> None:
    msg = (
        "RuntimeError: CUDA out of memory. Tried to allocate 128.00 MiB (GPU 0; 983.69 MiB total capacity; 209.53 MiB already "
        "allocated; 69.56 MiB free; 6.47 MiB cached)"
    )
    assert texts(wrap(f"**{msg}**\n", 80)) == [msg]


def test_a_line_of_a_coincidental_width_does_not_swallow_a_longer_one() -> None:
    """Three log lines happen to share a width; the line after the last is wider, so it is no continuation."""
    progress = [f"Sun Jan 31 00:02:4{k} 2021 Epoch: 8 Sample 70{k}5/7200 Loss: 35{k}734.87{k}" for k in range(3)]
    assert len({len(p) for p in progress}) == 1
    log = "\n".join(progress) + "\n" + ASSERTS
    assert texts(log) == progress + ASSERTS.splitlines()


def test_training_output_after_a_cut_traceback_is_not_its_message() -> None:
    """An anomaly warning is located by the traceback after it; that traceback was cut, and what follows is noise."""
    head = (
        "[W python_anomaly_mode.cpp:104] Warning: Error detected in LogSoftmaxBackward0. Traceback of forward call that caused the error:\n"
        '  File "fit.py", line 88, in <module>\n    run_epoch(net, batches)\n'
        '  File "fit.py", line 41, in run_epoch\n    loss = criterion(net(x), y)\n'
        '  File "/opt/conda/lib/python3.10/site-packages/torch/nn/functional.py", line 1680, in log_softmax\n    ret = input.log_softmax(dim)\n'
        " (function _print_stack)\n"
        'Traceback (most recent call last):\n  File "fit.py", line 88, in <module>\n    run_epoch(net, batches)\n'
        '  File "fit.py", line 52, in run_epoch\n    loss.backward()\n'
        '  File "/opt/conda/lib/python3.10/site-packages/torch/_tensor.py", line 307, in backward\n    torch.autograd.backward(self, gra\n'
    )
    noisy = key(head + "Epoch 3:  41%|####      | 4100/10000 [12:01<17:18,  5.68it/s, loss=0.3121]\n" * 3)
    assert noisy == key(head) == "nan_inf_detected | Error detected in LogSoftmaxBackward<n> | at fit.py:run_epoch"


def test_the_one_long_line_of_a_paste_cut_mid_word_at_80_is_rejoined() -> None:
    """A paste with a single line over 80 columns has a single piece of 80: no second one shares the width,
    but a cut inside a word or a path is no line of its own."""
    text = (
        "RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1700000000000/work/torch/csrc/distributed/"
        "c10d/ProcessGroupNCCL.cpp:1275, unhandled cuda error, NCCL version 2.14.3\n"
        "ncclUnhandledCudaError: Call to CUDA function failed.\n"
    )
    assert texts(wrap(text, 80)) == text.splitlines()
    assert key(wrap(text, 80)) == key(text)
    message = "ValueError: y_pred must have shape (batch_size, num_classes, ...) and y must have shape (batch_size, ...)\n"
    assert texts(wrap(message, 80)) == [message.strip()]


def test_an_80_column_line_that_ends_a_word_is_no_wrap() -> None:
    """Lines of exactly 80 columns occur: one that ends where a word ends, or before an indented line, stays."""
    line = "step 4100 lr 1.0e-04 grad_norm 0.812 loss 0.3121 val_loss 0.2950 best 0.2810 ok."
    assert len(line) == 80
    assert texts(line + "\nnext epoch\n") == [line, "next epoch"]
    word = line[:-1] + "x"
    assert texts(word + '\n  File "/w/a.py", line 3, in f\n') == [word, '  File "/w/a.py", line 3, in f']


def test_a_flattened_traceback_wrapped_at_80_is_read_as_its_frames() -> None:
    """A traceback pasted as one paragraph, then hard-wrapped: its frames are told apart once the pieces
    are whole again, so the user's frame and the exception are read as from the paragraph."""
    flat = " ".join(ln.strip() for ln in TRACEBACK.splitlines()) + "\n"
    assert key(wrap(flat, 80)) == key(flat) == key(TRACEBACK)
    assert key(flat).endswith("| at metrics_iou.py:add_batch")


def test_a_frame_line_exactly_80_wide_is_not_joined_to_its_source_line() -> None:
    """At 80 columns a cut may fall anywhere, but a frame line that ends in its function's name, followed
    by its indented source line, is whole: the source line stays the frame's code, not part of its name."""
    frame = '  File "/w/proj/utils/common.py", line 9, in to_onehot'
    frame = frame.replace("/w/", "/w/" + "x" * (79 - len(frame)) + "/")
    assert len(frame) == 80
    text = (
        "Traceback (most recent call last):\n"
        '  File "/w/proj/train.py", line 46, in train\n'
        "    target = common.to_onehot(target, n_labels, dims=(0, 2, 3, 4), dtype=torch.float32, keep=True)\n"
        f"{frame}\n"
        "    out = torch.zeros(n, k, s, h, w).scatter_(1, labels.view(n, 1, s, h, w).long(), 1)\n"
        "RuntimeError: index 243 is out of bounds for dimension 1 with size 2\n"
    )
    assert frame in texts(wrap(text, 80))
    assert key(wrap(text, 80)) == key(text)
    assert key(text).endswith("| at common.py:to_onehot")


def test_a_progress_bar_after_the_exception_is_not_its_message() -> None:
    """The training goes on printing after the error (another rank, another worker): tqdm's bar, with
    `loss=` in its postfix, is not read as the message, so it cannot turn a plain broadcast clash into a
    loss's label/prediction mismatch."""
    text = (
        '  File "/w/crf.py", line 41, in refine\n'
        "    out = (self.alpha - self.beta) * unary + pairwise\n"
        "RuntimeError: The size of tensor a (256) must match the size of tensor b (21) at non-singleton dimension 1\n"
    )
    bar = "Epoch 2:  17%|##        | 170/1000 [01:02<05:04,  2.73it/s, loss=0.412, v_num=3]\n"
    clean, noisy = diagnose_text(text).root, diagnose_text(text + bar * 4).root
    assert clean is not None and noisy is not None
    assert (noisy.rule, noisy.signature) == (clean.rule, clean.signature) == ("broadcast_shape_mismatch", clean.signature)
    assert "loss=" not in noisy.facts["error_message"]


def test_an_exception_type_alone_is_a_line_of_its_own_after_a_stamped_source_line() -> None:
    """`assert a == b` fails with the bare `AssertionError` under it; stamped by a logging handler, the
    source line is the widest of its neighbourhood, but the type alone is a line of its own, not its end."""
    text = " in dice_loss\n    assert prediction.shape == label.shape, 'the shapes differ'\nAssertionError\n"
    stamped = "".join(f"2024-05-01 12:00:0{k},{k * 7:03d} - ERROR - {ln}\n" for k, ln in enumerate(text.splitlines()))
    assert texts(stamped)[-1] == "AssertionError"
    assert key(stamped) == key(text)


def test_the_source_line_after_a_finished_warning_is_still_the_failing_line() -> None:
    """A warning's message is its one line: the indented source line printed after it is no part of it and
    is read as the failing line of the bare error under it, as with no warning before."""
    text = "    assert prediction.shape == label.shape\nAssertionError\n"
    warning = (
        "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py:557: UserWarning: This DataLoader will create "
        "8 worker processes in total.\nINFO: resuming from the last checkpoint\n"
    )
    assert key(warning + text) == key(text)
    assert key(text).startswith("target_shape_mismatch | AssertionError")  # read from the assert's source line


def test_training_output_after_a_traceback_cut_at_its_raise_is_not_the_message() -> None:
    """The paste stops at the frame that raises a literal, and the job's output goes on below it: that output
    is not the error's message; the raised literal is, as when the paste ends there."""
    cut = (
        "Traceback (most recent call last):\n"
        '  File "C:\\\\work\\\\seq\\\\run_copy.py", line 51, in <module>\n'
        "    net.cuda()\n"
        '  File "C:\\\\envs\\\\t\\\\lib\\\\site-packages\\\\torch\\\\cuda\\\\__init__.py", line 208, in _lazy_init\n'
        '    raise AssertionError("Torch not compiled with CUD\n'
    )
    noisy = cut + "step 4100 lr 1.0e-04 grad_norm 0.812\nINFO: validation loss did not improve (best 0.2810)\n" * 5
    assert key(noisy) == key(cut)
    assert "AssertionError: Torch not compiled with CUD | at run_copy.py:<module>" in key(cut)


def test_a_wrap_right_after_a_workers_log_prefix_leaves_the_line_to_the_next_row() -> None:
    """vLLM's worker prefix `(Worker rank=N pid=N) ERROR <time> [file.py:N] ` is as wide as the console: the
    wrap falls on the space after its `]`, the row holds the prefix alone and the line goes on below it."""
    head = "(Worker rank={r} pid=9123{r}) ERROR 11-02 08:14:55 [{f}.py:612]"
    pad = "w" * (80 - len(head.format(r=1, f="")))
    body = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app/lib/python3.10/site-packages/vllm/worker/model_runner_for_tests.py", line 1548, in profile_run\n'
        "    raise RuntimeError(\n"
        "RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests.\n"
    )
    lines = ("WorkerProc hit an exception.", *body.splitlines())
    text = "".join(f"{head.format(r=r, f=pad)} {ln}\n" for r in (1, 0) for ln in lines)
    assert len(head.format(r=1, f=pad)) == 80
    assert key(wrap(text, 80)) == key(text)
    assert key(text).startswith("cuda_oom | RuntimeError: CUDA out of memory occurred when warming up")


def test_a_sanitizer_report_whose_newlines_were_lost_is_still_read() -> None:
    """Markdown joined the report into one paragraph, an empty `=========` line included: each `=========` of the
    tool's starts one of its lines again."""
    report = [
        "========= COMPUTE-SANITIZER",
        "=========",
        "========= Invalid __shared__ write of size 8 bytes",
        "=========     at reduce_rows(double *, int)+0x2f0 in /src/kern/reduce.cu:77",
        "=========     by thread (31,0,0) in block (2,0,0)",
        "=========     Address 0x400 is out of bounds",
        "=========",
        "========= ERROR SUMMARY: 1 error",
    ]
    root = diagnose_text(" ".join(report) + "\n").incidents[0]
    assert (root.rule, root.facts["kernel_path"], root.facts["kernel_line"], root.facts["address"]) == (
        "sanitizer_memcheck",
        "/src/kern/reduce.cu",
        77,
        "0x400",
    )
    assert root.facts == diagnose_text("\n".join(report) + "\n").incidents[0].facts


def test_a_row_of_equals_signs_inside_a_joined_line_is_no_sanitizer_line() -> None:
    """torchrun's failure table drawn with `=` borders, joined onto the exception before it: the exception is read."""
    from kbdebug.parse.regions import parse_text

    joined = (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "
        + "=" * 60
        + " main.py FAILED "
        + "-" * 60
        + " Failures: <NO_OTHER_FAILURES>"
    )
    excs = [r for r in parse_text(joined) if r.kind == "exception"]
    assert [e.exc_type for e in excs] == ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError"]


def test_python_s_caret_markers_are_never_a_wrapped_line() -> None:
    """`^^^^` under a source line is printed whole: the message after it (its type not pasted) is a line of its own,
    however wide the markers were."""
    from kbdebug.parse.regions import parse_text

    log = (
        '  File "/srv/app/pipeline.py", line 41, in render\n'
        "    images = self.decoder(latents.to(self.device, dtype=torch.float16)).sample.clamp(-1, 1).float().cpu()\n"
        "             " + "^" * 96 + "\n"
        "Allocation on device 0 would exceed allowed memory. (out of memory)\n"
    )
    (exc,) = [r for r in parse_text(log) if r.kind == "exception"]
    assert exc.message == "Allocation on device 0 would exceed allowed memory. (out of memory)"
    assert exc.frames[-1].code.startswith("images = self.decoder(")
    assert diagnose_text(log).incidents[0].rule == "cuda_oom"


def test_a_whole_source_line_and_the_message_after_it_are_two_lines() -> None:
    """Only the frames and the message were pasted (no `Type: `): a source line whose brackets all close, then a
    sentence, is no line cut in two; a line cut inside its brackets still is."""
    from kbdebug.parse.regions import parse_text

    frame = '  File "/home/kim/seg/util.py", line 28, in to_one_hot\n'
    whole = "    one_hot = torch.zeros(n, classes, h, w, device=labels.device).scatter_(1, labels.view(n, 1, h, w), 1)\n"
    log = frame + whole + "Invalid index in scatter at /pytorch/aten/src/TH/generic/THTensorEvenMoreMath.cpp:551\n"
    (exc,) = [r for r in parse_text(log) if r.kind == "exception"]
    assert exc.frames[-1].code == whole.strip()
    assert exc.message.startswith("Invalid index in scatter")
    cut = "    one_hot = torch.zeros(n, classes, h, w, device=labels.device).scatter_(1, labels.view(n, 1, h, w),\n"
    joined = texts(frame + cut + "1)\n")
    assert joined[-1].strip() == cut.strip() + "1)"


RANKED_NCCL = (
    "[rank1]: Traceback (most recent call last):\n"
    '[rank1]:   File "/srv/train/ddp_step.py", line 88, in <module>\n'
    "[rank1]:     dist.all_reduce(grad, op=dist.ReduceOp.SUM)\n"
    '[rank1]:   File "/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2501, in all_reduce\n'
    "[rank1]:     work = group.allreduce(\n"
    "[rank1]: {message}\n"
    "W0302 11:40:02.118000 140021 torch/distributed/elastic/multiprocessing/api.py:858] Sending process 4410 closing signal SIGTERM\n"
    "E0302 11:40:02.901000 140021 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1) local_rank: 1 (pid: 4411) "
    "of binary: /usr/bin/python3\n"
)


@pytest.mark.parametrize(
    "message",
    [
        "RuntimeError: NCCL Error 2: unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
    ],
)
def test_rank_prefixed_lines_joined_into_one_paragraph_are_read_apart(message: str) -> None:
    """Markdown made the newlines spaces: each `[rankN]: ` and each glog prefix (`W0302 11:40:02.118000 140021
    file.py:858] `) starts a line again, even after a source line left open (`allreduce(`), so the rank's error is
    read as it was printed."""
    log = RANKED_NCCL.format(message=message)
    joined = " ".join(line.strip() for line in log.splitlines()) + "\n"
    printed, pasted = diagnose_text(log).incidents[0], diagnose_text(joined).incidents[0]
    assert (pasted.rule, pasted.facts["rank"], pasted.facts["error_message"]) == ("nccl_error", 1, message.split(": ", 1)[1])
    assert pasted.facts == printed.facts
    assert "Sending process 4410 closing signal SIGTERM" in texts(joined)


def test_cublas_s_own_line_with_the_next_glued_on_is_still_read() -> None:
    """cuBLAS prints `** On entry to CALL parameter number N had an illegal value` on stderr, then the caller's
    error; joined into one paragraph, the next line follows on the same line and cuBLAS's is still read."""
    log = (
        " ** On entry to DgemmBatched parameter number 9 had an illegal value\n"
        "matmul extension failed with status 7\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/bench/batched.py", line 14, in <module>\n'
        "    out = ext.batched_gemm(a, b)\n"
        "RuntimeError: matmul extension failed\n"
    )
    joined = " ".join(line.strip() for line in log.splitlines()) + "\n"
    for text in (log, joined):
        root = diagnose_text(text).incidents[0]
        assert (root.rule, root.facts["cublas_call"], root.facts["cublas_status"]) == (
            "cublas_failure",
            "DgemmBatched",
            "CUBLAS_STATUS_INVALID_VALUE",
        )
