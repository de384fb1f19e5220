"""The group commit (``engine/commit.py``) over real outputs and a real LMDB frontier, without
a crawl loop: what a commit makes durable, and when a page waiting for its archive record is
marked done and its items reach the feeds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.config import CrawlSettings, parse
from frontier_crawl.control.status import LoopTimes
from frontier_crawl.engine.build import load_stats
from frontier_crawl.engine.commit import CommitGroup
from frontier_crawl.frontier import Frontier
from frontier_crawl.output import CrawlStats, LogEntry
from frontier_crawl.output.feeds import decode_offset
from frontier_crawl.output.open import Outputs, open_outputs
from frontier_crawl.output.protocol import blob_name


class Archive:
    """An archive output whose records become durable when the test says so."""

    name = "archive"

    def __init__(self) -> None:
        self.sent = 0
        self.written = 0
        self.prepared: list[int | None] = []

    def prepare_commit(self, upto: int | None = None) -> None:
        self.prepared.append(upto)
        if upto is None or self.written < upto:
            self.written = self.sent

    def durable(self) -> int:
        return self.written

    def commit_point(self) -> bytes | None:
        return None

    def discard(self) -> None: ...
    def close(self) -> None: ...


def settings(tmp_path: Path) -> CrawlSettings:
    return parse(
        {
            "crawl": {"seeds": ["http://h.test/"], "output_dir": str(tmp_path)},
            "scope": {"allow_domains": ["h.test"]},
            "output": {"warc": False},
        }
    )


@pytest.fixture
def frontier(tmp_path: Path) -> Iterator[Frontier]:
    f = Frontier.from_settings(settings(tmp_path), tmp_path / "state")
    yield f
    f.close(checkpoint=False)


def group_of(frontier: Frontier, tmp_path: Path, archive: Archive) -> tuple[CommitGroup, Outputs]:
    """A commit group over ``archive`` (which pages wait for), the crawl log and a feed."""
    s = settings(tmp_path)
    outputs = open_outputs(
        s, warc_dir=tmp_path / "warc", crawl_log=tmp_path / "crawl.jsonl", feed_root=tmp_path,
        with_feeds=True, load_blob=frontier.load_blob,
    )  # fmt: skip
    group = CommitGroup(
        frontier, (archive, *outputs.all), archive=archive, feeds=outputs.feeds,
        stats=CrawlStats(), elapsed_before=0.0, repairs=["a repair"], interval_s=0.05,
        times=LoopTimes(), waited=lambda: 0.0, started=time.monotonic(),
    )  # fmt: skip
    return group, outputs


def line(url: str) -> LogEntry:
    return LogEntry(time="t", url=url, status=200, outcome="fetched", error=None, bytes=1,
                    duration_s=0.0, depth=0, referrer=None, content_type="text/html")  # fmt: skip


def test_page_waits_for_its_archive_record(frontier: Frontier, tmp_path: Path) -> None:
    archive = Archive()
    group, outputs = group_of(frontier, tmp_path, archive)
    group.open(time.monotonic())
    archive.sent = 1  # the page's record is written, not yet durable (the commit needs none)
    group.dirty = True
    group.page(b"k1", 1, ("fetched", 200, None, 5), [{"a": 1}], ())
    outputs.log.write(line("http://h.test/"))
    group.needed = 0
    group.commit()
    assert archive.prepared == [0]  # every output prepared alike: what the commit needs
    assert group.stats.pages == 0 and len(group.unsettled) == 1  # not counted yet
    assert decode_offset(frontier.load_blob(blob_name("feed:items.jsonl"))) == 0
    assert (tmp_path / "crawl.jsonl").read_bytes().count(b"\n") == 1  # handed over
    archive.written = 1  # now durable: the next commit counts it, its items in that commit
    group.open(time.monotonic())
    group.commit()
    assert group.stats.pages == 1 and group.stats.items == 1 and not group.unsettled
    offset = decode_offset(frontier.load_blob(blob_name("feed:items.jsonl")))
    assert offset == (tmp_path / "items.jsonl").stat().st_size > 0
    stats, _elapsed, repairs = load_stats(frontier)  # saved with the commit
    assert stats.pages == 1 and repairs == ["a repair"]
    for output in outputs.all:
        output.close()


def test_final_commit_waits_for_every_record(frontier: Frontier, tmp_path: Path) -> None:
    archive = Archive()
    group, outputs = group_of(frontier, tmp_path, archive)
    archive.sent = 3
    group.dirty = True
    for seq in (1, 2, 3):
        group.page(b"k%d" % seq, seq, ("fetched", 200, None, 1), None, ())
    group.finish()  # opens a group for the unsettled pages, waits for the archive
    assert archive.prepared == [None]
    assert group.stats.pages == 3 and not group.unsettled and not group.is_open
    for output in outputs.all:
        output.close()


def test_failed_output_aborts_the_group(frontier: Frontier, tmp_path: Path) -> None:
    archive = Archive()
    group, outputs = group_of(frontier, tmp_path, archive)
    group.open(time.monotonic())
    group.dirty = True
    group.page(b"k", 0, ("fetched", 200, None, 1), None, ())  # counted at once (no archive)

    def fail(upto: int | None = None) -> None:
        raise OSError(28, "No space left on device")

    archive.prepare_commit = fail  # type: ignore[method-assign]
    with pytest.raises(OSError, match="No space"):
        group.commit()
    assert not group.is_open
    assert load_stats(frontier)[0].pages == 0  # nothing of the aborted group committed
    for output in outputs.all:
        output.close()
