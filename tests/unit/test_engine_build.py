"""Building a crawl's parts (``engine/build.py``, ``output/open.py``) without running a crawl:
real LMDB, real files, the WARC writer's real child process, in ``tmp_path``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from frontier_crawl.config import CrawlSettings, parse
from frontier_crawl.engine import STATS_BLOB, Engine, Layout, Parts, open_parts
from frontier_crawl.engine.build import SavedStats
from frontier_crawl.fetch import Fetcher
from frontier_crawl.output import CrawlLog, CrawlStats, WarcWriter
from frontier_crawl.output.feeds import Feed, encode_offset
from frontier_crawl.output.open import open_outputs, power_loss_durable
from frontier_crawl.output.protocol import blob_name
from frontier_crawl.parse import LinkParser
from frontier_crawl.proctree import StateLock


def settings(tmp_path: Path, **output: Any) -> CrawlSettings:
    return parse(
        {
            "crawl": {"seeds": ["http://h.test/"], "output_dir": str(tmp_path / "out")},
            "scope": {"allow_domains": ["h.test"]},
            "fetch": {"parse_types": ["text/html", "application/xhtml+xml"]},
            "output": output,
        }
    )


def close(parts: Parts) -> None:
    parts.fetcher.close()
    for output in parts.outputs.all:
        output.close()
    parts.frontier.close(checkpoint=False)


@pytest.fixture
def lock(tmp_path: Path) -> Iterator[StateLock]:
    held = StateLock.acquire(Layout(tmp_path / "out").state_dir)
    yield held
    held.release()


def build(s: CrawlSettings, lock: StateLock, *, with_feeds: bool = False) -> Parts:
    return open_parts(
        s,
        Layout(Path(s.crawl.output_dir)),
        lock_fd=lock.fileno,
        with_feeds=with_feeds,
        on_reject=lambda ticket, reason: None,
        on_foreign=lambda dest, link: None,
        wall_clock=lambda: 0.0,
    )


def test_each_part_from_its_settings(tmp_path: Path, lock: StateLock) -> None:
    s = settings(tmp_path, warc=True)
    parts = build(s, lock, with_feeds=True)
    try:
        assert isinstance(parts.fetcher, Fetcher)
        assert isinstance(parts.parser, LinkParser)
        assert parts.parser.parse_types == ("text/html", "application/xhtml+xml")
        outputs = parts.outputs
        assert isinstance(outputs.archive, WarcWriter)
        assert isinstance(outputs.log, CrawlLog)
        (feed,) = outputs.feeds  # a spider without [[output.feeds]]: items.jsonl
        assert feed.path == tmp_path / "out" / "items.jsonl"
        # the commit order: the archive first (the pages it settles feed the feeds)
        assert outputs.all == (outputs.archive, outputs.log, feed)
        assert parts.stats == CrawlStats() and parts.elapsed_before == 0.0
        assert parts.repairs == ()
    finally:
        close(parts)


def test_no_warc_no_feeds(tmp_path: Path, lock: StateLock) -> None:
    parts = build(settings(tmp_path, warc=False), lock)
    try:
        assert parts.outputs.archive is None and parts.outputs.feeds == ()
        assert parts.outputs.all == (parts.outputs.log,)
    finally:
        close(parts)


@pytest.mark.parametrize(
    ("durability", "durable"), [("power-loss", True), ("process-crash", False)]
)
def test_outputs_read_their_durability(tmp_path: Path, durability: str, durable: bool) -> None:
    s = settings(tmp_path, durability=durability, warc=False)
    assert power_loss_durable(s) is durable
    outputs = open_outputs(
        s, warc_dir=tmp_path / "warc", crawl_log=tmp_path / "crawl.jsonl", feed_root=tmp_path,
        with_feeds=True, load_blob=lambda name: None,
    )  # fmt: skip
    try:
        (feed,) = outputs.feeds
        assert outputs.log._durable is durable
        assert feed._durable is durable
    finally:
        for output in outputs.all:
            output.close()


def test_feed_cut_back_to_its_commit_point(tmp_path: Path) -> None:
    """A feed longer than its committed offset (a kill after the append, before the commit)
    is cut back to that offset as it is opened."""
    (tmp_path / "items.jsonl").write_bytes(b'{"a": 1}\n{"a": 2}\n')
    s = settings(tmp_path, warc=False)
    blobs = {blob_name("feed:items.jsonl"): encode_offset(len(b'{"a": 1}\n'))}
    outputs = open_outputs(
        s, warc_dir=tmp_path / "warc", crawl_log=tmp_path / "crawl.jsonl", feed_root=tmp_path,
        with_feeds=True, load_blob=blobs.get,
    )  # fmt: skip
    for output in outputs.all:
        output.close()
    assert isinstance(outputs.feeds[0], Feed)
    assert (tmp_path / "items.jsonl").read_bytes() == b'{"a": 1}\n'


def test_earlier_runs_counters_and_repairs_first(tmp_path: Path, lock: StateLock) -> None:
    s = settings(tmp_path, warc=False)
    parts = build(s, lock)
    earlier = CrawlStats()
    earlier.record("fetched", 200, None, 10)
    saved = SavedStats(earlier, 12.5, ["an earlier repair"])
    with parts.frontier.batch():
        parts.frontier.save_blob(STATS_BLOB, msgspec.msgpack.encode(saved))
    close(parts)
    # a crawl log that is not a regular file: set aside, and said so
    log = Layout(tmp_path / "out").crawl_log
    log.unlink()
    log.mkdir()
    parts = build(s, lock)
    try:
        assert parts.stats.pages == 1 and parts.elapsed_before == 12.5
        assert parts.repairs[0] == "an earlier repair"
        assert len(parts.repairs) == 2 and "crawl.jsonl" in parts.repairs[1]
    finally:
        close(parts)


def _children() -> set[int]:
    """This process's child PIDs (from /proc: the WARC writer's child is one)."""
    pids: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        pids.update(int(p) for p in (task / "children").read_text().split())
    return pids


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_a_part_that_fails_to_open_leaves_nothing_open(tmp_path: Path) -> None:
    """A feed that cannot be created (its directory is a file someone planted) fails the
    Engine's start after the frontier, the fetcher, the crawl log and the WARC writer's child
    were opened: they are all closed again, no child lives on, and the state lock is free (the
    same command after the cause is gone starts; before the fix, the writer's child and the
    LMDB environment stayed open and a second Engine in the process could not start)."""
    s = parse(
        {
            "crawl": {"seeds": ["http://h.test/"], "output_dir": str(tmp_path / "out")},
            "scope": {"allow_domains": ["h.test"]},
            "extract": [{"url": ".", "fields": {"title": {"css": "title"}}}],
            "output": {"feeds": [{"path": "sub/items.jsonl"}]},
        }
    )
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "sub").write_text("planted")
    children, fds = _children(), _fds()
    with pytest.raises(OSError):
        Engine(s)
    assert _children() == children
    assert _fds() == fds
    StateLock.acquire(Layout(tmp_path / "out").state_dir).release()
