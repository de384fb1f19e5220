"""The command pipes between the coordinator and its workers: a status asks every worker at
once (workers/pipes.py), and a worker answers it from its pipe's thread (workers/seam.py)."""

from __future__ import annotations

import select
import threading
from multiprocessing import Pipe
from multiprocessing.connection import Connection

import pytest

from frontier_crawl.control.commands import Command
from frontier_crawl.workers.pipes import WorkerPipes
from frontier_crawl.workers.seam import PipeCommands

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


# ------------------------------------------------------------------ a worker's end (seam.py)


def _pair() -> tuple[Connection, PipeCommands]:
    coordinator, worker = Pipe()
    return coordinator, PipeCommands(worker)


def test_a_status_is_answered_by_the_reader_while_the_loop_is_busy() -> None:
    """With a recent snapshot, the reader thread answers a status without the loop's take;
    other commands wait for the loop, which the wake fd tells."""
    coordinator, commands = _pair()
    commands.serve_status(lambda: {"pages": 7, "metrics": {}})
    coordinator.send((1, Command("status")))
    assert coordinator.poll(10.0) and coordinator.recv() == (1, {"pages": 7, "metrics": {}})
    coordinator.send((2, Command("pause")))
    readable, _, _ = select.select([commands.fileno], [], [], 10.0)
    assert readable == [commands.fileno]
    (pending,) = commands.take()
    assert pending.command.name == "pause" and not coordinator.poll(0.2)
    pending.answer({"result": "applied"})
    assert coordinator.recv() == (2, {"result": "applied"})
    assert select.select([commands.fileno], [], [], 0)[0] == []  # drained: the loop sleeps


def test_a_status_without_a_recent_snapshot_goes_to_the_loop() -> None:
    coordinator, commands = _pair()
    commands.serve_status(lambda: None)
    coordinator.send((1, Command("status")))
    assert select.select([commands.fileno], [], [], 10.0)[0] == [commands.fileno]
    (pending,) = commands.take()
    assert pending.command.name == "status"


def test_the_coordinator_gone_is_seen_at_the_next_take() -> None:
    coordinator, commands = _pair()
    commands.serve_status(lambda: None)
    coordinator.close()
    assert select.select([commands.fileno], [], [], 10.0)[0] == [commands.fileno]
    assert commands.take() == [] and commands.closed
