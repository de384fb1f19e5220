"""Steering (``engine/steer.py``) from the parts alone: commands through a real command queue,
applied to a real LMDB frontier in the group commit, and reloads of a real crawl.toml."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontier_crawl.config import CrawlSettings, load
from frontier_crawl.control.commands import Command, CommandQueue
from frontier_crawl.control.status import LoopTimes
from frontier_crawl.engine.commit import CommitGroup
from frontier_crawl.engine.deadline import StopDeadline
from frontier_crawl.engine.observe import Observer
from frontier_crawl.engine.state import LoopState
from frontier_crawl.engine.steer import Steering
from frontier_crawl.fetch import FetchRequest, FetchResult
from frontier_crawl.frontier import Frontier
from frontier_crawl.output import CrawlStats
from tests.waiting import wait_until

TOML = """
[crawl]
seeds = ["http://h.test/"]
output_dir = "{out}"
[scope]
allow_domains = ["h.test"]
[politeness]
min_delay_s = {delay}
"""


class IdleFetcher:
    free_slots = 4
    in_flight = 0

    def submit(self, req: FetchRequest) -> None: ...
    def poll(self, timeout_s: float) -> list[FetchResult]:
        return []

    def close(self) -> None: ...


class Parts:
    """A steering over real parts, and what its reconfigure callback was given."""

    def __init__(self, config: Path) -> None:
        self.settings = load(config)
        self.frontier = Frontier.from_settings(self.settings, config.parent / "state")
        self.run = LoopState(state="running", thread=threading.get_ident())
        times = LoopTimes()
        self.group = CommitGroup(
            self.frontier, (), archive=None, feeds=(), stats=CrawlStats(), elapsed_before=0.0,
            repairs=[], interval_s=0.05, times=times, waited=lambda: 0.0,
            started=time.monotonic(),
        )  # fmt: skip
        fetcher = IdleFetcher()
        observe = Observer(self.frontier, fetcher, self.group, times, self.run, waited=lambda: 0.0)
        self.reconfigured: list[CrawlSettings] = []
        self.queue = CommandQueue()
        self.steer = Steering(
            self.settings, frontier=self.frontier, fetcher=fetcher, group=self.group,
            run=self.run, deadline=StopDeadline(self.run), observe=observe, root=config.parent,
            commands=self.queue,
            reconfigure=lambda new, now: self.reconfigured.append(new), config_path=config,
        )  # fmt: skip


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    config = tmp_path / "crawl.toml"
    config.write_text(TOML.format(out=tmp_path / "out", delay=1.0))
    p = Parts(config)
    yield p
    p.queue.close()
    p.frontier.close(checkpoint=False)


def test_pause_resume_stop_write_the_loop_state(parts: Parts) -> None:
    steer, run = parts.steer, parts.run
    assert steer.apply(Command("pause"), 0.0)["paused"] is True and run.paused
    assert steer.apply(Command("resume"), 0.0)["paused"] is False and not run.paused
    steer.apply(Command("stop"), 0.0)
    assert run.stop_requested == 1 and run.stopping


def test_commands_taken_once_per_tick_and_answered(parts: Parts) -> None:
    """Posted from another thread, applied by ``take`` in the loop's: a block goes into the
    open group commit (durable with it), and each poster gets its reply."""
    replies: list[dict[str, object]] = []
    poster = threading.Thread(
        target=lambda: replies.append(parts.queue.call(Command("block", host="h.test")))
    )
    poster.start()
    wait_until("the posted command taken", lambda: parts.steer.take(time.monotonic()), 30.0)
    poster.join(30)
    assert replies and replies[0]["result"] == "applied" and replies[0]["host"] == "h.test"
    assert parts.group.is_open and parts.group.dirty
    parts.group.commit()
    assert parts.frontier.holds.blocked_hosts == ["h.test"]


def test_unknown_command_and_status(parts: Parts) -> None:
    assert "error" in parts.steer.apply(Command("no-such"), 0.0)
    status = parts.steer.apply(Command("status"), 0.0)
    assert status["state"] == "running" and "metrics" in status


def test_reload_applies_changes_or_refuses(parts: Parts, tmp_path: Path) -> None:
    config = tmp_path / "crawl.toml"
    config.write_text(TOML.format(out=tmp_path / "out", delay=2.5))
    reply = parts.steer.reload(0.0)
    assert reply["changed"] == ["politeness.min_delay_s"]
    assert [s.politeness.min_delay_s for s in parts.reconfigured] == [2.5]
    config.write_text(TOML.format(out=tmp_path / "elsewhere", delay=2.5))  # identity: refused
    assert "crawl.output_dir" in parts.steer.reload(0.0)["refused"]
    config.write_text("[crawl]\nseeds = 3\n")  # a bad file: the running config stays
    assert "not reloaded" in parts.steer.reload(0.0)["error"]
    assert len(parts.reconfigured) == 1
