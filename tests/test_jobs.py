"""How a training job dies beyond its kernels: the job-level causes, their facts and guides, root-first
ordering across them, and what rerunning does, said in every format.

tests/cases/jobs holds a small labelled set of job failures written for these tests (realistic wordings,
with rank prefixes, timestamps, journald and kernel prefixes); CASES says the cause each one shows.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from kbdebug.api import diagnose_text
from kbdebug.diagnosis import Diagnosis, Incident
from kbdebug.render import render
from kbdebug.render.words import retry_line

HERE = Path(__file__).parent / "cases" / "jobs"

CASES = {
    "host_oom_numpy.log": "host_oom",
    "host_oom_cpu_allocator_rank.log": "host_oom",
    "host_oom_windows_paging.log": "host_oom",
    "oom_killed_bare.log": "oom_killed",
    "oom_killed_bare_steps.log": "oom_killed",
    "oom_killed_dmesg.log": "oom_killed",
    "oom_killed_slurm.log": "oom_killed",
    "oom_killed_torchrun.log": "oom_killed",
    "oom_killed_worker.log": "oom_killed",
    "oom_killed_k8s.log": "oom_killed",
    "oom_killed_mp_spawn.log": "oom_killed",
    "oom_killed_slurm_memlimit.log": "oom_killed",
    "oom_killed_ide_sigkill.log": "oom_killed",
    "shm_bus_error.log": "dataloader_shm_exhausted",
    "shm_killed_bus_rank.log": "dataloader_shm_exhausted",
    "shm_write_file.log": "dataloader_shm_exhausted",
    "shm_too_many_files.log": "dataloader_shm_exhausted",
    "worker_segv.log": "dataloader_worker_crashed",
    "worker_timeout.log": "dataloader_worker_crashed",
    "worker_exited.log": "dataloader_worker_crashed",
    "native_segv_shell.log": "native_crash",
    "native_faulthandler.log": "native_crash",
    "native_double_free.log": "native_crash",
    "native_torchrun_segv.log": "native_crash",
    "native_glibc_wrapped.log": "native_crash",
    "native_windows_access_violation.log": "native_crash",
    "native_ide_sigsegv.log": "native_crash",
    "import_module.log": "import_failure",
    "import_libcudart.log": "import_failure",
    "import_undefined_symbol.log": "import_failure",
    "ckpt_zip.log": "checkpoint_unreadable",
    "ckpt_weights_only.log": "checkpoint_unreadable",
    "ckpt_lfs.log": "checkpoint_unreadable",
    "statedict_size.log": "state_dict_mismatch",
    "statedict_module_prefix.log": "state_dict_mismatch",
    "disk_full_save.log": "disk_full",
    "disk_full_errno.log": "disk_full",
    "fnf_data.log": "file_not_found",
    "fnf_worker.log": "file_not_found",
    "perm_denied.log": "permission_denied",
    "perm_readonly.log": "permission_denied",
    "zero_div.log": "zero_division",
    "zero_div_worker.log": "zero_division",
    "term_timelimit.log": "job_terminated",
    "term_preempt.log": "job_terminated",
    "term_sigterm.log": "job_terminated",
    "gpu_xid79.log": "gpu_hardware_fault",
    "gpu_ecc.log": "gpu_hardware_fault",
    "gpu_xid48_journal.log": "gpu_hardware_fault",
    "driver_container_toolkit.log": "driver_error",
    # how a rank or task ended, as torchrun's Root Cause row, srun and Kubernetes print its status
    "torchrun_table_exit137.log": "oom_killed",
    "torchrun_table_exit139.log": "native_crash",
    "torchrun_table_sigint.log": "job_terminated",
    "torchrun_table_exit2.log": "other",
    "srun_exit139.log": "native_crash",
    "k8s_exit139.log": "native_crash",
    "k8s_deadline.log": "job_terminated",
    "agent_sigint.log": "job_terminated",
    # a worker that died of a plain error it printed (spawn without a __main__ guard), the loader's report after it
    "worker_spawn_no_main_guard.log": "other",
    # a rank that died of a plain error, the others' watchdog timeouts its consequence
    "ddp_rank_plain_error_others_wait.log": "other",
    "ddp_unprefixed_error_before_watchdog.log": "other",
    "ddp_rank_unused_params_others_wait.log": "other",
    # root first: the OOM behind a worker's kill, the CUDA OOM inside a DataLoader worker
    "root_cuda_oom_then_killed.log": "cuda_oom",
    "root_worker_cuda_oom.log": "cuda_oom",
}


def diag_of(name: str) -> Diagnosis:
    return diagnose_text((HERE / name).read_text(encoding="utf-8"), source=name)


def root_of(name: str) -> Incident:
    root = diag_of(name).root
    assert root is not None, name
    return root


def test_every_fixture_is_labelled() -> None:
    assert {p.name for p in HERE.glob("*.log")} == set(CASES)


@pytest.mark.parametrize(("name", "rule"), sorted(CASES.items()))
def test_each_job_failure_is_named_by_its_cause(name: str, rule: str) -> None:
    assert root_of(name).rule == rule


def macro_f1(pairs: list[tuple[str, str | None]]) -> float:
    """Macro-F1 over the labels: the mean over causes of 2PR / (P + R)."""
    labels = {want for want, _ in pairs}
    tp, fp, fn = Counter[str](), Counter[str](), Counter[str]()
    for want, got in pairs:
        if got == want:
            tp[want] += 1
        else:
            fn[want] += 1
            if got is not None:
                fp[got] += 1
    scores = [2 * tp[c] / (2 * tp[c] + fp[c] + fn[c]) for c in labels]
    return sum(scores) / len(scores)


def test_macro_f1_over_the_labelled_job_failures() -> None:
    pairs = [(rule, getattr(diag_of(name).root, "rule", None)) for name, rule in CASES.items()]
    assert macro_f1(pairs) == 1.0


def test_macro_f1_counts_a_miss_and_a_false_alarm() -> None:
    assert macro_f1([("a", "a"), ("b", "a")]) == pytest.approx((2 / 3 + 0) / 2)


def rank_prefixed(text: str) -> str:
    return "".join(f"[rank3]: {line}\n" for line in text.splitlines())


def time_stamped(text: str) -> str:
    return "".join(f"2024-05-06 11:02:{i % 60:02d},{i:03d} {line}\n" for i, line in enumerate(text.splitlines()))


def wrapped(text: str, width: int = 80) -> str:
    """A terminal's hard wrap: every long line cut into pieces of `width` characters."""
    out = []
    for line in text.splitlines():
        out += [line[i : i + width] for i in range(0, max(len(line), 1), width)]
    return "\n".join(out) + "\n"


DAMAGE = {"rank_prefixed": rank_prefixed, "time_stamped": time_stamped, "wrapped": wrapped}
# a log whose cause is told only by which rank printed what (a rank's error printed after the others' watchdog): one
# rank's prefix on every line says they all came from one process
TOLD_BY_RANK = {"ddp_rank_unused_params_others_wait.log"}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_pastes_keep_their_cause(damage: str) -> None:
    pairs = []
    for name, rule in CASES.items():
        if damage == "rank_prefixed" and name in TOLD_BY_RANK:
            continue
        root = diagnose_text(DAMAGE[damage]((HERE / name).read_text(encoding="utf-8"))).root
        pairs.append((rule, root.rule if root is not None else None))
    kept = [name for name in CASES if not (damage == "rank_prefixed" and name in TOLD_BY_RANK)]
    assert [(name, got) for (name, (want, got)) in zip(kept, pairs, strict=True) if got != want] == []
    assert macro_f1(pairs) == 1.0


# -- facts ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "facts"),
    [
        ("oom_killed_bare.log", {"signal": "SIGKILL", "exit_code": 137, "retry": "smaller"}),
        ("oom_killed_dmesg.log", {"pid": 48211, "process": "python", "signal": "SIGKILL"}),
        ("oom_killed_slurm.log", {"job_id": "7781234.batch", "job_event": "slurm_oom"}),
        ("oom_killed_torchrun.log", {"signal": "SIGKILL", "exit_code": -9}),
        ("oom_killed_worker.log", {"signal": "SIGKILL", "worker_pid": 2213}),
        ("shm_killed_bus_rank.log", {"signal": "SIGBUS", "worker_pid": 2213, "rank": 1}),
        ("worker_exited.log", {"worker_pids": "2213, 2214, 2215, 2216"}),
        ("worker_timeout.log", {"timeout_s": 300}),
        ("native_segv_shell.log", {"signal": "SIGSEGV", "exit_code": 139, "pid": 90211, "retry": "no"}),
        ("native_windows_access_violation.log", {"signal": "SIGSEGV", "exit_code": -1073741819, "retry": "no"}),
        ("oom_killed_slurm_memlimit.log", {"signal": "SIGKILL", "retry": "smaller"}),
        ("native_faulthandler.log", {"error_type": "Fatal Python error", "innermost_user_frame": "/home/me/proj/model.py:88"}),
        ("native_double_free.log", {"event_text": "double free or corruption (!prev)", "signal": "SIGABRT"}),
        ("native_torchrun_segv.log", {"signal": "SIGSEGV", "exit_code": -11}),
        ("import_module.log", {"module": "apex", "retry": "after-install"}),
        ("import_libcudart.log", {"library": "libcudart.so.12"}),
        ("import_undefined_symbol.log", {"symbol": "_ZN3c104cuda9SetDeviceEi"}),
        ("statedict_size.log", {"param": "fc.weight", "checkpoint_shape": "[1000, 512]", "model_shape": "[10, 512]"}),
        ("statedict_module_prefix.log", {"unexpected_prefix": "module.", "model_class": "UNet"}),
        ("disk_full_errno.log", {"path": "/scratch/me/run7/metrics.json", "retry": "smaller"}),
        ("fnf_worker.log", {"path": "/data/imagenet/train/n01440764/img_0042.JPEG", "worker": 3}),
        ("perm_readonly.log", {"path": "/data/outputs/run3", "read_only": "Read-only file system"}),
        ("zero_div_worker.log", {"worker": 1, "innermost_user_frame": "/home/me/proj/dataset.py:31"}),
        ("term_timelimit.log", {"reason": "TIME LIMIT", "job_id": "7781234", "node": "gpu-node-07", "retry": "smaller"}),
        ("term_preempt.log", {"reason": "PREEMPTION", "retry": "yes"}),
        ("gpu_xid79.log", {"xid": 79, "pci": "PCI:0000:3b:00", "retry": "yes"}),
        ("root_worker_cuda_oom.log", {"worker": 0, "tried_to_allocate": "512.00 MiB"}),
    ],
)
def test_facts_are_read_from_the_log(name: str, facts: dict[str, object]) -> None:
    got = root_of(name).facts
    assert {k: got.get(k) for k in facts} == facts


# -- guides --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "section", "sentence"),
    [
        ("oom_killed_dmesg.log", "what", "The process python (pid 48211) was killed from outside by the kernel's OOM killer with SIGKILL"),
        ("oom_killed_bare.log", "why", "The log names no memory report"),
        ("shm_killed_bus_rank.log", "what", "DataLoader worker (pid 2213) died of SIGBUS"),
        ("shm_killed_bus_rank.log", "fix", "`docker run --shm-size=16g`"),
        ("worker_timeout.log", "what", "The DataLoader waited 300 seconds for a batch and gave up"),
        ("native_segv_shell.log", "confirm", "Rerun with `PYTHONFAULTHANDLER=1`"),
        ("native_faulthandler.log", "what", "in your code at `/home/me/proj/model.py:88` (`forward`)"),
        ("import_module.log", "what", "Python cannot import `apex`"),
        ("import_undefined_symbol.log", "fix", "Reinstall or rebuild the extension against the installed torch"),
        ("statedict_size.log", "what", "`fc.weight` is [1000, 512] in the checkpoint and [10, 512] in the model"),
        ("statedict_module_prefix.log", "fix", 'k.removeprefix("module.")'),
        ("ckpt_lfs.log", "what", "its first byte is `v`"),
        ("fnf_worker.log", "what", "`/data/imagenet/train/n01440764/img_0042.JPEG` does not exist (read in DataLoader worker 3)"),
        ("fnf_data.log", "why", "`data/train.csv` is relative"),
        ("perm_readonly.log", "what", "the file system is mounted read-only"),
        ("term_timelimit.log", "what", "Slurm cancelled job 7781234 on gpu-node-07 due to time limit"),
        ("term_timelimit.log", "fix", "Ask for a longer limit (`--time`)"),
        ("gpu_xid79.log", "what", "The NVIDIA driver reported Xid 79 on the GPU at PCI:0000:3b:00"),
        ("disk_full_errno.log", "confirm", "`df -h /scratch/me/run7/metrics.json`"),
    ],
)
def test_guide_quotes_the_users_values(name: str, section: str, sentence: str) -> None:

    diag = diag_of(name)
    assert diag.root is not None
    assert sentence in diag.root.guide[section]


def test_faulthandler_is_suggested_only_without_a_dump() -> None:

    with_dump = diag_of("native_faulthandler.log").root
    without = diag_of("native_double_free.log").root
    assert with_dump is not None and without is not None
    assert "PYTHONFAULTHANDLER=1" not in with_dump.guide["confirm"]
    assert "PYTHONFAULTHANDLER=1" in without.guide["confirm"]


# -- root first ----------------------------------------------------------------------------------
def test_a_worker_killed_after_a_cuda_oom_is_the_oom() -> None:
    diag = diag_of("root_cuda_oom_then_killed.log")
    assert [i.rule for i in diag.incidents] == ["cuda_oom"]
    assert [c.rule for c in diag.incidents[0].consequences] == ["oom_killed"]


def test_nccl_timeouts_of_other_ranks_fold_under_the_rank_that_segfaulted() -> None:
    diag = diag_of("native_torchrun_segv.log")
    assert diag.root is not None and diag.root.rule == "native_crash"
    assert [c.rule for c in diag.root.consequences] == ["nccl_error"]


def test_an_error_caught_in_a_dataloader_worker_is_that_error_with_the_worker_as_a_fact() -> None:
    root = root_of("root_worker_cuda_oom.log")
    assert (root.rule, root.facts["worker"]) == ("cuda_oom", 0)


def test_the_shm_bus_error_explains_the_worker_that_exited() -> None:
    diag = diag_of("shm_bus_error.log")
    assert [i.rule for i in diag.incidents] == ["dataloader_shm_exhausted"]
    assert [c.rule for c in diag.incidents[0].consequences] == ["dataloader_worker_crashed"]


def test_child_failed_error_joins_the_workers_own_cause() -> None:
    diag = diag_of("oom_killed_torchrun.log")
    assert [i.rule for i in diag.incidents] == ["oom_killed"]
    assert diag.incidents[0].facts["error_type"].endswith("ChildFailedError")


def test_an_abort_after_a_cuda_error_is_the_cuda_error() -> None:
    text = (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: an illegal memory access was encountered\n"
        "Aborted (core dumped)\n"
    )
    diag = diagnose_text(text)
    assert [i.rule for i in diag.incidents] == ["illegal_memory_access"]


def test_a_bare_kill_after_a_slurm_time_limit_is_the_time_limit() -> None:
    text = "slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT 2024-05-06T11:02:17 DUE TO TIME LIMIT ***\nKilled\n"
    diag = diagnose_text(text)
    assert [i.rule for i in diag.incidents] == ["job_terminated"]


def test_an_application_xid_is_not_a_hardware_fault() -> None:
    text = (
        "[ 9121.000112] NVRM: Xid (PCI:0000:3b:00): 13, pid=48211, name=python, Graphics Exception: ESR 0x50df30=0x102000e\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    root = diagnose_text(text).root
    assert root is not None and root.rule == "illegal_memory_access"


def test_a_sentence_that_starts_with_a_signal_word_is_no_death() -> None:
    assert diagnose_text("Terminated early: no improvement for 5 epochs\n").root is None


# -- retry in every format -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "retry"),
    [("zero_div.log", "no"), ("oom_killed_dmesg.log", "smaller"), ("gpu_xid79.log", "yes"), ("import_module.log", "after-install")],
)
def test_retry_is_said_at_the_top_of_the_guide_in_every_format(name: str, retry: str) -> None:

    diag = diag_of(name)
    line = retry_line(retry)
    text = render([diag], "text")
    assert line in text and text.index(line) < text.index("What it means")
    markdown = render([diag], "markdown")
    assert f"**{line}**" in markdown and markdown.index(line) < markdown.index("**What it means**")
    assert line in render([diag], "html")
    incident = json.loads(render([diag], "json"))["incidents"][0]
    assert (incident["retry"], incident["facts"]["retry"]) == (retry, retry)
    assert incident["fix"].startswith(line)


# -- real errors ---------------------------------------------------------------------------------
torch = pytest.importorskip("torch")


def test_a_real_state_dict_size_mismatch(capsys: pytest.CaptureFixture[str]) -> None:
    from kbdebug import diagnose

    saved = torch.nn.Linear(512, 1000).state_dict()
    with pytest.raises(RuntimeError) as info:
        torch.nn.Linear(512, 10).load_state_dict(saved)
    root = diagnose(info.value).root
    assert root is not None
    assert (root.rule, root.facts["param"], root.facts["checkpoint_shape"], root.facts["model_shape"]) == (
        "state_dict_mismatch",
        "weight",
        "[1000, 512]",
        "[10, 512]",
    )


def test_a_real_truncated_checkpoint(tmp_path: Path) -> None:
    from kbdebug import diagnose

    path = tmp_path / "last.pt"
    torch.save({"w": torch.zeros(1000)}, path)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(RuntimeError) as info:
        torch.load(path)
    root = diagnose(info.value).root
    assert root is not None and root.rule == "checkpoint_unreadable"


def test_a_real_zero_division_from_an_empty_loader() -> None:
    from kbdebug import diagnose

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(0, 3)), batch_size=4)
    with pytest.raises(ZeroDivisionError) as info:
        _ = 1.0 / len(loader)
    root = diagnose(info.value).root
    assert root is not None and (root.rule, root.facts["retry"]) == ("zero_division", "no")


def test_a_container_that_cannot_get_its_gpu_is_sent_to_the_host_toolkit() -> None:
    root = root_of("driver_container_toolkit.log")
    assert root.title == "the container cannot get the GPU (NVIDIA Container Toolkit)"
    text = " ".join(" ".join(str(root.guide.get(k, "")) for k in ("what", "why", "confirm", "fix")).split())
    assert 'could not select device driver "" with capabilities: [[gpu]]`' in text
    assert "nvidia-ctk runtime configure --runtime=docker" in text and "docker run --rm --gpus all ubuntu nvidia-smi" in text
    assert "pip install" not in text  # not torch's build: the host's container runtime
