"""DDP's reducer waiting for gradients of parameters that took no part in the loss (`Expected to have finished
reduction in the prior iteration ...`): no rule of its own names it (it is no NCCL failure: any backend raises it),
so the catch-all's page says which parameters got no gradient, how to name them, and what to change. Raised live on
CPU with the gloo backend in a group of one, and read from its printed traceback."""

from __future__ import annotations

import os
import socket

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from live_errors import guide, read, root  # noqa: E402

from kbdebug import diagnose_text  # noqa: E402


class _TwoHeads(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(2, 2)
        self.aux = torch.nn.Linear(2, 2)  # built, never called in forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x)


def _two_steps() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        model = torch.nn.parallel.DistributedDataParallel(_TwoHeads())
        for _ in range(2):
            model(torch.randn(3, 2)).sum().backward()
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not dist.is_available(), reason="torch without torch.distributed")
def test_parameters_no_loss_reaches_are_named_with_the_fix_for_ddp() -> None:
    inc = root(_two_steps)
    assert inc.rule == "other" and inc.facts["unused_param_indices"] == [2, 3]
    page = guide(inc)
    assert "the parameters at indices 2, 3 of `model.parameters()` got none" in page
    assert "print([names[i] for i in [2, 3]])" in page and "find_unused_parameters=True" in page
    names = [n for n, _ in _TwoHeads().named_parameters()]  # the page's confirmation, as written
    assert [names[i] for i in [2, 3]] == ["aux.weight", "aux.bias"]
    printed_root = read(_two_steps)
    assert printed_root.rule == "other" and printed_root.facts["unused_param_indices"] == [2, 3]


def test_the_names_torch_distributed_debug_prints_are_quoted() -> None:
    log = (
        "[rank1]: RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error "
        "indicates that your module has parameters that were not used in producing loss.\n"
        "[rank1]: Parameters which did not receive grad for rank 1: aux.weight, aux.bias\n"
    )
    root_ = diagnose_text(log).root
    assert root_ is not None and root_.rule == "other"
    assert "`aux.weight, aux.bias` got none" in str(root_.guide["what"])
