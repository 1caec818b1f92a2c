"""torch.distributed's rendezvous store failing before any collective ran: its port already taken, and processes
that never joined it. No rule of their own (no NCCL call failed); the catch-all's page says which and what to
change. Raised live on CPU (a TCPStore on a taken port, a master waiting for a second process) and read from the
older wording."""

from __future__ import annotations

import datetime
import socket

import pytest

dist = pytest.importorskip("torch.distributed")

from live_errors import guide, root  # noqa: E402

from kbdebug import diagnose_text  # noqa: E402


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_taken_master_port_names_the_port_and_a_free_one() -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        inc = root(lambda: dist.TCPStore("127.0.0.1", port, 1, True, wait_for_workers=False))
    finally:
        holder.close()
    assert inc.rule == "other" and inc.facts["master_port"] == port
    page = guide(inc)
    assert f"could not listen on port {port}" in page and f"--master_port={port + 1}" in page
    older = (
        "RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed "
        "to bind to [::]:29500 (errno: 98 - Address already in use).\n"
    )
    assert diagnose_text(older).incidents[0].facts["master_port"] == 29500


def test_a_rendezvous_nobody_else_joined_says_how_many_came() -> None:
    inc = root(lambda: dist.TCPStore("127.0.0.1", _port(), 2, True, timeout=datetime.timedelta(seconds=1)))
    assert inc.rule == "other" and (inc.facts["clients_joined"], inc.facts["clients_expected"]) == (1, 2)
    page = guide(inc)
    assert "1 of the 2 processes it waited for joined it" in page and "ranks must run from 0 to 1" in page
