"""A worker's published status (``workers/peers.py``): the words the coordinator's end of
the crawl reads, written when they change."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from frontier_crawl.workers import Peers


def test_publish_writes_this_workers_words(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    status = ctx.Array("q", 3 * 2)
    stop = ctx.Value("i", 0)
    peers = Peers(1, range(2), 2, tmp_path, 1 << 20, status, stop, b"run-0001")
    try:
        peers.publish(False, 4)
        assert list(status[:]) == [0, 0, 0, 0, 0, 4]  # slot 1: idle, sent, received
        peers.publish(False, 4)  # unchanged: nothing to write
        assert list(status[:]) == [0, 0, 0, 0, 0, 4]
        peers.publish(True, 5)
        assert list(status[:]) == [0, 0, 0, 1, 0, 5]
        status[3] = 7  # (not a worker's doing: shows the next write is not skipped)
        peers.publish(False, 5)
        assert list(status[:]) == [0, 0, 0, 0, 0, 5]
        assert peers.should_stop() is False
        stop.value = 1
        assert peers.should_stop() is True
    finally:
        peers.close()
