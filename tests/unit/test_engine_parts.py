"""The loop's small parts on real storage: the peer exchange (``engine/exchange.py``) over a
real LMDB outbox, and the space guard (``engine/space.py``) over the real filesystem."""

from __future__ import annotations

import time
from pathlib import Path

from frontier_crawl.config import parse
from frontier_crawl.control.status import LoopTimes
from frontier_crawl.engine.commit import CommitGroup
from frontier_crawl.engine.exchange import DELIVER_RETRY_S, PeerExchange
from frontier_crawl.engine.space import SpaceGuard
from frontier_crawl.engine.state import LoopState
from frontier_crawl.frontier import Frontier
from frontier_crawl.frontier.mailbox import Link, decode_links
from frontier_crawl.output import CrawlStats
from frontier_crawl.output.space import SpaceMonitor
from tests.waiting import wait_until

A, B = "http://a.test", "http://b.test"


class TwoPeers:
    """Worker 0 of two: hosts of b.test belong to worker 1. ``full``: the transport refuses."""

    worker = 0
    run_id = b"run"

    def __init__(self) -> None:
        self.full = False
        self.sent: list[tuple[int, list[Link]]] = []
        self.published: list[tuple[bool, int]] = []

    def route(self, origin: str) -> int:
        return 1 if origin == B else 0

    def send(self, dest: int, batch: bytes) -> bool:
        if self.full:
            return False
        self.sent.append((dest, decode_links(batch)))
        return True

    def held_up(self, batches: int) -> str:
        return f"{batches} held" if batches else ""

    def publish(self, idle: bool, received: int) -> None:
        self.published.append((idle, received))

    def should_stop(self) -> bool:
        return False

    def orders(self) -> tuple[bool, int]:
        return False, 0


def test_foreign_links_delivered_after_their_commit(tmp_path: Path) -> None:
    s = parse({"crawl": {"seeds": [f"{A}/"], "output_dir": str(tmp_path)},
               "scope": {"allow_domains": ["a.test", "b.test"]}})  # fmt: skip
    peers, run = TwoPeers(), LoopState()
    exchange: list[PeerExchange] = []
    frontier = Frontier.from_settings(
        s, tmp_path / "state", route=peers.route, worker=0,
        on_foreign=lambda dest, link: exchange[0].foreign(dest, link),
    )  # fmt: skip
    group = CommitGroup(
        frontier, (), archive=None, feeds=(), stats=CrawlStats(), elapsed_before=0.0,
        repairs=[], interval_s=0.05, times=LoopTimes(), waited=lambda: 0.0,
        started=time.monotonic(),
    )  # fmt: skip
    exchange.append(PeerExchange(peers, frontier, group, run))
    try:
        group.open(time.monotonic())
        frontier.add([f"{A}/1", f"{B}/1"], depth=0, now=time.monotonic())
        assert exchange[0].waiting and peers.sent == []  # batched, not sent in a transaction
        peers.full = True  # the transport cannot take it: it stays in the durable outbox
        group.commit()
        assert run.held_up == 1 and exchange[0].waiting and peers.sent == []
        assert len(frontier.outgoing()) == 1
        peers.full = False

        def delivered() -> bool:  # tried again DELIVER_RETRY_S later, by the next commit
            group.commit()
            return not exchange[0].waiting

        wait_until("the held-up batch sent by a later commit", delivered, 30.0,
                   every_s=DELIVER_RETRY_S / 5)  # fmt: skip
        assert [(dest, [link[0] for link in links]) for dest, links in peers.sent] == [
            (1, [f"{B}/1"])
        ]
        assert run.held_up == 0 and frontier.outgoing() == []
        assert exchange[0].swap(time.monotonic(), idle=True) is False
        assert peers.published[-1] == (True, 0)  # idle: nothing of ours left to hand over
    finally:
        frontier.close(checkpoint=False)


def test_space_guard_pauses(tmp_path: Path) -> None:
    s = parse({"crawl": {"seeds": [f"{A}/"], "output_dir": str(tmp_path)},
               "output": {"min_free_bytes": 1 << 60}})  # fmt: skip
    run = LoopState()
    guard = SpaceGuard(SpaceMonitor([tmp_path], 1 << 60), run, s.output)
    assert guard.short(0.0) is True  # nobody has an exabyte free
    assert run.low_space is not None and run.low_space.free_bytes < 1 << 60
    assert guard.pauses == 1 and not run.halt
    assert guard.short(0.5) is True and guard.pauses == 1  # said once, counted once
    guard.close(100.0)  # the run ends paused: counted up to its end
    assert guard.paused_s == 100.0


def test_space_guard_stops_when_told(tmp_path: Path) -> None:
    s = parse({"crawl": {"seeds": [f"{A}/"], "output_dir": str(tmp_path)},
               "output": {"min_free_bytes": 1 << 60, "low_space_action": "stop"}})  # fmt: skip
    run = LoopState()
    guard = SpaceGuard(SpaceMonitor([tmp_path], 1 << 60), run, s.output)
    assert guard.short(0.0) is True
    assert run.halt == "low-disk-space" and run.stopping and guard.pauses == 0
