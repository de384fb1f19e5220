"""The coordinator's command pipes (workers/pipes.py): a status asks every worker at once."""

from __future__ import annotations

import threading
from multiprocessing import Pipe
from multiprocessing.connection import Connection

import pytest

from frontier_crawl.control.commands import Command
from frontier_crawl.workers.pipes import WorkerPipes

pytestmark = pytest.mark.timeout(30)


def _worker(conn: Connection, index: int, barrier: threading.Barrier | None) -> None:
    """Answer one command, after every worker has received its own (``barrier``): a caller
    that waits for one reply before it sends the next command never gets one."""
    try:
        rid, command = conn.recv()
    except (EOFError, OSError):  # never asked (the caller is gone)
        return
    if barrier is not None:
        try:
            barrier.wait(timeout=3.0)
        except threading.BrokenBarrierError:
            return  # the commands did not all arrive: no reply (the caller times out)
    conn.send((rid, {"worker": index, "command": command.name}))


def _start(count: int, barrier: threading.Barrier | None, ended: int = -1) -> WorkerPipes:
    """``count`` workers answering on threads; worker ``ended`` has ended (its end closed)."""
    ours, theirs = zip(*(Pipe() for _ in range(count)), strict=True)
    for i, conn in enumerate(theirs):
        if i == ended:
            conn.close()
        else:
            threading.Thread(target=_worker, args=(conn, i, barrier), daemon=True).start()
    return WorkerPipes(list(ours))


def test_ask_all_sends_every_command_before_it_waits() -> None:
    pipes = _start(3, threading.Barrier(3))
    replies = pipes.ask_all(Command("status"), timeout_s=10.0)
    assert replies == [{"worker": i, "command": "status"} for i in range(3)]


def test_one_worker_at_a_time_would_not_get_there() -> None:
    """The same workers asked one after another (``ask``): the first never answers, which
    is what the test above would meet if ``ask_all`` waited for each reply in turn."""
    pipes = _start(2, threading.Barrier(2))
    assert "did not answer" in pipes.ask(0, Command("status"), timeout_s=1.0)["error"]


def test_an_ended_worker_is_named_and_the_others_answer() -> None:
    pipes = _start(2, None, ended=1)
    replies = pipes.ask_all(Command("status"), timeout_s=5.0)
    assert replies[0] == {"worker": 0, "command": "status"}
    assert replies[1] == {"error": "worker 1 has ended"}
