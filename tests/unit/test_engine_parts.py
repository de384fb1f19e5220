"""The loop's small parts on real storage: the peer exchange (``engine/exchange.py``) over a
real LMDB outbox, and the space guard (``engine/space.py``) over the real filesystem."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from frontier_crawl.config import parse
from frontier_crawl.control.status import LoopTimes
from frontier_crawl.engine.commit import CommitGroup
from frontier_crawl.engine.exchange import DELIVER_RETRY_S, PeerExchange
from frontier_crawl.engine.space import SpaceGuard
from frontier_crawl.engine.state import LoopState
from frontier_crawl.frontier import Frontier
from frontier_crawl.frontier.mailbox import INBOX_ENV, Link, decode_links, encode_links
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
    exchange.append(PeerExchange(peers, frontier, group, run, 1 << 20))
    try:
        group.open(time.monotonic())
        frontier.add([f"{A}/1", f"{B}/1"], depth=0, now=time.monotonic())
        assert exchange[0].waiting and peers.sent == []  # batched, not sent in a transaction
        peers.full = True  # the transport cannot take it: it stays in the durable outbox
        group.commit()
        assert run.held_up == 1 and exchange[0].waiting and peers.sent == []
        assert len(frontier.mail.outgoing()) == 1
        peers.full = False

        def delivered() -> bool:  # tried again DELIVER_RETRY_S later, by the next commit
            group.commit()
            return not run.held_up

        wait_until("the held-up batch sent by a later commit", delivered, 30.0,
                   every_s=DELIVER_RETRY_S / 5)  # fmt: skip
        assert [(dest, [link[0] for link in links]) for dest, links in peers.sent] == [
            (1, [f"{B}/1"])
        ]
        # delivered; it leaves the outbox with the next transaction, and is not sent again
        assert len(frontier.mail.outgoing()) == 1 and exchange[0].waiting
        group.commit()
        assert len(peers.sent) == 1
        assert exchange[0].swap(time.monotonic(), idle=True) is False  # no group open: deleted
        assert run.held_up == 0 and frontier.mail.outgoing() == []
        assert peers.published[-1] == (True, 0)  # idle: nothing of ours left to hand over
    finally:
        frontier.close(checkpoint=False)


def _two_workers(
    tmp_path: Path, max_batch_bytes: int = 1 << 20
) -> tuple[TwoPeers, Frontier, CommitGroup, PeerExchange]:
    s = parse({"crawl": {"seeds": [f"{A}/"], "output_dir": str(tmp_path)},
               "scope": {"allow_domains": ["a.test", "b.test"]}})  # fmt: skip
    peers = TwoPeers()
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
    exchange.append(PeerExchange(peers, frontier, group, LoopState(), max_batch_bytes))
    return peers, frontier, group, exchange[0]


def test_one_commits_links_are_split_into_capped_batches(tmp_path: Path) -> None:
    """cluster.max_batch_bytes: the links one group commit finds for one peer leave in
    several batches of at most the cap, each sent on its own, all of them, once."""
    peers, frontier, group, _exchange = _two_workers(tmp_path, max_batch_bytes=4096)
    urls = [f"{B}/{i:04d}/" + "x" * 100 for i in range(300)]
    try:
        group.open(time.monotonic())
        frontier.add(urls, depth=0, now=time.monotonic())
        group.commit()
        assert len(peers.sent) > 5
        assert sorted(link[0] for _dest, links in peers.sent for link in links) == urls
        assert all(len(encode_links(links)) <= 4096 for _dest, links in peers.sent)
    finally:
        frontier.close(checkpoint=False)


def test_an_outbox_batch_over_the_cap_is_split_before_it_is_sent(tmp_path: Path) -> None:
    """A batch left in the outbox by an earlier version (no cap: Redis refused it for memory
    at every restart) is split in the outbox, in one transaction, then sent in pieces."""
    urls = [f"{B}/{i:04d}/" + "x" * 100 for i in range(300)]
    links: list[Link] = [(u, 1, f"{A}/", 0, "", b"", 0) for u in urls]
    peers, frontier, group, _exchange = _two_workers(tmp_path, max_batch_bytes=4096)
    try:
        frontier.mail.queue_outgoing(1, links, 1 << 30)  # as the earlier version did: one batch
        assert len(frontier.mail.outgoing()) == 1
        group.commit()  # (nothing open: the after-commit delivery alone)
        assert len(peers.sent) > 5
        assert sorted(link for _dest, batch in peers.sent for link in batch) == links
        assert all(len(encode_links(batch)) <= 4096 for _dest, batch in peers.sent)
    finally:
        frontier.close(checkpoint=False)


def test_a_delivery_costs_the_sender_no_commit_of_its_own(tmp_path: Path) -> None:
    """A busy worker's group commits deliver their foreign links, and the delivered batches
    leave the outbox in the next group's transaction: one LMDB commit (one fdatasync) per
    group, not two (before: a commit of its own after every delivery)."""
    peers, frontier, group, exchange = _two_workers(tmp_path)
    try:
        txnid = frontier._env.info()["last_txnid"]
        for i in range(5):
            group.open(time.monotonic())
            frontier.add([f"{A}/{i}", f"{B}/{i}"], depth=0, now=time.monotonic())
            group.commit()
        assert [links[0][0] for _, links in peers.sent] == [f"{B}/{i}" for i in range(5)]
        assert frontier._env.info()["last_txnid"] - txnid == 5  # one per group
        assert len(frontier.mail.outgoing()) == 1  # the last one: deleted by the next transaction
        assert exchange.swap(time.monotonic(), idle=True) is False
        assert frontier.mail.outgoing() == [] and not exchange.waiting
        assert peers.published[-1] == (True, 0)
    finally:
        frontier.close(checkpoint=False)


_DELIVER = """
import sys
from pathlib import Path
from frontier_crawl.frontier.mailbox import Mailbox, encode_links
mailbox = Mailbox({0: Path(sys.argv[1])}, 1 << 24, b"run")
mailbox.send(0, encode_links([(url, 1, "http://a.test/", 0) for url in sys.argv[2:]]))
mailbox.close()
"""


def test_links_ingested_into_an_open_group_are_committed_with_it(tmp_path: Path) -> None:
    """A batch from a peer, ingested while the group is open, joins the group's transaction:
    the group stays dirty (its commit prepares the outputs once), no output is prepared in
    the middle of it (before: ``sync`` there, an fdatasync per batch received, and the group
    no longer dirty)."""
    peers, frontier, group, exchange = _two_workers(tmp_path)
    try:
        subprocess.run([sys.executable, "-c", _DELIVER, str(tmp_path / "state" / INBOX_ENV),
                        f"{A}/x", f"{A}/y"], check=True, timeout=60)  # fmt: skip
        group.open(time.monotonic())
        txnid = frontier._env.info()["last_txnid"]
        assert exchange.swap(time.monotonic(), idle=False) is False
        assert frontier.pending == 2 and group.dirty and group.is_open
        assert peers.published[-1] == (False, 1)
        assert frontier._env.info()["last_txnid"] == txnid  # nothing committed yet
        group.commit()
        assert frontier._env.info()["last_txnid"] == txnid + 1
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
