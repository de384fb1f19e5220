"""Observing (``engine/observe.py``) from the parts alone: the status, metrics and progress of
a loop that is not running, from its state record, timings and a real LMDB frontier."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.config import parse
from frontier_crawl.control.status import LoopTimes
from frontier_crawl.engine.commit import CommitGroup
from frontier_crawl.engine.observe import MAX_FAILING_HOSTS, Observer
from frontier_crawl.engine.state import LoopState
from frontier_crawl.fetch import FetchRequest, FetchResult
from frontier_crawl.frontier import Frontier
from frontier_crawl.output import CrawlStats
from frontier_crawl.output.space import LowSpace


class IdleFetcher:
    """A fetcher with ``slots`` free and nothing in flight."""

    def __init__(self, slots: int) -> None:
        self.free_slots = slots
        self.in_flight = 0

    def submit(self, req: FetchRequest) -> None:
        raise AssertionError("observing never submits")

    def poll(self, timeout_s: float) -> list[FetchResult]:
        raise AssertionError("observing never polls")

    def close(self) -> None: ...


@pytest.fixture
def frontier(tmp_path: Path) -> Iterator[Frontier]:
    s = parse(
        {
            "crawl": {"seeds": ["http://h.test/"], "output_dir": str(tmp_path)},
            "scope": {"allow_domains": ["h.test"]},
        }
    )
    f = Frontier.from_settings(s, tmp_path / "state")
    with f.batch():
        f.add(["http://h.test/", "http://h.test/a"], depth=0, now=time.monotonic())
    yield f
    f.close(checkpoint=False)


def observer(frontier: Frontier, run: LoopState) -> tuple[Observer, CommitGroup]:
    times = LoopTimes()
    stats = CrawlStats()
    stats.record("fetched", 200, None, 10)
    group = CommitGroup(
        frontier, (), archive=None, feeds=(), stats=stats, elapsed_before=5.0, repairs=[],
        interval_s=0.05, times=times, waited=lambda: 0.0, started=time.monotonic() - 1.0,
    )  # fmt: skip
    return Observer(frontier, IdleFetcher(4), group, times, run, waited=lambda: 0.0), group


def test_status_reads_the_loop_state(frontier: Frontier) -> None:
    run = LoopState(state="running", last_request=time.monotonic())
    obs, _group = observer(frontier, run)
    obs.sample(time.monotonic(), force=True)
    status = obs.status()
    assert status["state"] == "running" and status["paused"] is False
    assert status["queued"] == 2 and status["pages"] == 1 and status["concurrency"] == 4
    assert status["elapsed_s"] >= 6.0  # earlier runs' 5 s and this run's second
    run.paused = True
    obs.sample(time.monotonic(), force=True)
    assert obs.status()["state"] == "paused" and obs.status()["paused"] is True
    run.stop_requested = 1
    obs.sample(time.monotonic(), force=True)
    assert obs.status()["state"] == "stopping"
    assert obs.status()["bottleneck"]["name"] == "draining"


def test_status_published_whole(frontier: Frontier) -> None:
    """Another thread's status is the snapshot last published: a later sample replaces it,
    never changes it in place."""
    run = LoopState(state="running", last_request=time.monotonic())
    obs, _group = observer(frontier, run)
    obs.sample(time.monotonic(), force=True)
    first = obs.status()
    run.low_space = LowSpace(Path("/"), 0)
    obs.sample(time.monotonic(), force=True)
    assert obs.status() is not first and first["state"] == "running"


def test_failing_hosts_bounded(frontier: Frontier) -> None:
    obs, _group = observer(frontier, LoopState(state="running"))
    for i in range(MAX_FAILING_HOSTS + 10):
        obs.failed_at(f"http://h{i}.test", 0.0, "timeout")
    obs.failed_at("http://worst.test", 2.5, "http 503")
    obs.failed_at("http://worst.test", 0.5, "http 503")
    obs.sample(time.monotonic(), force=True)
    failing = obs.status()["failing_hosts"]
    assert failing[0] == {"host": "http://worst.test", "failures": 2, "held_s": 3.0,
                          "error": "http 503"}
    assert len(obs._failing) <= MAX_FAILING_HOSTS


def test_metrics_and_progress(frontier: Frontier) -> None:
    run = LoopState(state="running")
    obs, _group = observer(frontier, run)
    # another thread, nothing published yet: an empty status (the asking starts publishing)
    assert obs.metrics()["status"]["pages"] == 0
    run.thread = threading.get_ident()  # the loop's own thread (a progress callback): fresh
    metrics = obs.metrics()
    assert metrics["worker"] == "0" and metrics["status"]["pages"] == 1
    progress = obs.progress()
    assert progress["pages"] == 1 and progress["in_flight"] == 0
    assert "items" not in progress  # no spider
    assert progress["bottleneck"].count(":") >= 1


class _StatCounted(type(Path())):  # type: ignore[misc]
    """A path that counts its ``stat()`` calls."""

    stats: list[str] = []  # noqa: RUF012 - one list per test, set by the test

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        self.stats.append(self.name)
        return super().stat(follow_symlinks=follow_symlinks)


class _Archive:
    """The WARC writer as observe sees it: its finished files."""

    def __init__(self) -> None:
        self.paths: tuple[Path, ...] = ()


def test_warc_bytes_read_each_finished_file_once(frontier: Frontier, tmp_path: Path) -> None:
    """Issue 29: every metrics snapshot stat()ed every finished WARC file of the run (tens of
    thousands on a long crawl); a finished file keeps its size, so each is read once."""
    stats: list[str] = []
    _StatCounted.stats = stats
    archive = _Archive()
    run = LoopState(state="running")
    obs, _group = observer(frontier, run)
    obs._archive = archive  # type: ignore[assignment]
    files = []
    for i in range(3):
        path = _StatCounted(tmp_path / f"w{i}.warc.gz")
        path.write_bytes(b"x" * (100 + i))
        files.append(path)
        archive.paths = tuple(files)
        for _ in range(4):
            obs.sample(time.monotonic(), force=True)
    assert obs.metrics()["warc_bytes"] == 303
    assert sorted(stats) == ["w0.warc.gz", "w1.warc.gz", "w2.warc.gz"]
