"""frontier/state.py on its own: the frontier's files opened, checkpointed and closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from frontier_crawl.frontier.damage import DamagedState
from frontier_crawl.frontier.options import FrontierHooks, FrontierOptions
from frontier_crawl.frontier.recrawl import Bounds, RecrawlPolicy
from frontier_crawl.frontier.state import FRESH_FRONTIER, FRONTIER_ENV, SNAPSHOT, StateFiles

OPTIONS = FrontierOptions(seen_capacity=1000, map_size=1 << 24)


def no_host(_origin: str) -> int:
    return -1


def test_open_checkpoint_close(tmp_path: Path) -> None:
    files = StateFiles.open(tmp_path, OPTIONS, FrontierHooks(), no_host)
    assert files.inbox is None and files.recrawl is None  # no routing, no recrawl
    assert (tmp_path / FRONTIER_ENV).is_dir() and (tmp_path / "robots").is_dir()
    with files.env.begin(write=True) as txn:
        txn.put(b"k", b"v", db=files.blobs)
    files.checkpoint()
    assert (tmp_path / SNAPSHOT).is_file() and not files.snapshot_failing
    files.close()
    again = StateFiles.open(tmp_path, OPTIONS, FrontierHooks(), no_host)
    with again.env.begin(db=again.blobs) as txn:
        assert txn.get(b"k") == b"v"
    again.close()


def test_worker_mode_and_recrawl_open_their_parts(tmp_path: Path) -> None:
    recrawl = RecrawlPolicy(default=Bounds(100.0, 10.0, 1000.0))
    options = FrontierOptions(seen_capacity=1000, map_size=1 << 24, recrawl=recrawl)
    files = StateFiles.open(tmp_path, options, FrontierHooks(route=lambda _o: 0), no_host)
    assert files.inbox is not None and files.recrawl is not None
    files.close()


def test_a_damaged_environment_is_refused_with_what_it_means(tmp_path: Path) -> None:
    env = tmp_path / FRONTIER_ENV
    env.mkdir()
    (env / "data.mdb").write_bytes(b"")  # its pages lost
    with pytest.raises(DamagedState) as raised:
        StateFiles.open(tmp_path, OPTIONS, FrontierHooks(), no_host)
    assert raised.value.consequence == FRESH_FRONTIER
