"""A worker process: its view of the other workers (:class:`Peers`, the engine's ``PeersLike``
seam) and its entry point (``_worker_main``: one :class:`~frontier_crawl.engine.Engine`)."""

from __future__ import annotations

import logging
import os
import sys
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized, SynchronizedArray
from pathlib import Path
from typing import Any

import msgspec

from frontier_crawl.cluster import (
    ClusterError,
    Keys,
    RemoteSender,
)
from frontier_crawl.cluster.crawlid import read_crawl_file
from frontier_crawl.cluster.view import summary_every
from frontier_crawl.config import CrawlSettings
from frontier_crawl.engine import Engine
from frontier_crawl.frontier.mailbox import INBOX_ENV, Mailbox
from frontier_crawl.logsetup import configure as configure_logging
from frontier_crawl.proctree import (
    StateLocked,
    die_with_parent,
    ignore_terminal_signals,
    watch_parent,
)
from frontier_crawl.workers.partition import (
    partition_of,
    redis_of,
    worker_dir,
)
from frontier_crawl.workers.seam import _FIELDS, PipeCommands

log = logging.getLogger(__name__)

class Peers:
    """A worker's view of the others: routing, sending, and its published status."""

    def __init__(
        self,
        index: int,
        local: range,
        total: int,
        root: Path,
        map_size: int,
        status: SynchronizedArray[int],
        stop: Synchronized[int],
        run_id: bytes,
        remote: RemoteSender | None = None,
        partition_by: str = "host",
        orders: SynchronizedArray[int] | None = None,
    ) -> None:
        self.worker = index  #: this worker's partition (of ``total``)
        self._by = partition_by
        self.run_id = run_id
        self.count = total
        self._slot = index - local.start  #: its place in this node's status array
        self._status = status
        self._words = status.get_obj()  #: the array itself (its lock taken once per write)
        self._published: tuple[int, ...] = ()  #: what this worker last wrote there
        self._stop = stop.get_obj()  #: one word, written by the coordinator (read without lock)
        #: the coordinator's orders: [stop requested, reloads ordered] (read without its lock:
        #: one word each, written by one process)
        self._orders = orders.get_obj() if orders is not None else None
        self._remote = remote  #: other nodes' partitions (cluster mode)
        envs = {j: worker_dir(root, j) / "state" / INBOX_ENV for j in local if j != index}
        self._mailbox = Mailbox(envs, map_size, run_id)
        self._local = local

    def route(self, origin: str) -> int:
        """The owning worker (not remembered here: the frontier keeps a bounded cache of it)."""
        return partition_of(origin, self.count, self._by)

    def send(self, dest: int, batch: bytes) -> bool:
        if dest in self._local or self._remote is None:
            self._mailbox.send(dest, batch)
            return True
        return self._remote.send(dest, batch)

    def held_up(self, batches: int) -> str:
        return self._remote.held_up(batches) if self._remote is not None else ""

    def publish(self, idle: bool, received: int) -> None:
        """Once a tick: this worker's words of the shared array, written (under its lock, as
        the coordinator reads them) only when they changed."""
        words = (int(idle), self._mailbox.sent, received)
        if words == self._published:
            return
        base = self._slot * _FIELDS
        with self._status.get_lock():
            self._words[base : base + _FIELDS] = list(words)
        self._published = words

    def should_stop(self) -> bool:
        return bool(self._stop.value)  # (the word itself: no lock taken once a tick)

    def orders(self) -> tuple[bool, int]:
        if self._orders is None:
            return False, 0
        return bool(self._orders[0]), int(self._orders[1])

    def close(self) -> None:
        self._mailbox.close()
        if self._remote is not None:
            self._remote.close()


def _worker_settings(settings: CrawlSettings, root: Path, index: int) -> CrawlSettings:
    """A worker's settings; in a cluster its progress snapshots (which feed the node's live
    summary, ``cluster/view.py``) come at least every summary interval."""
    s = settings
    every = s.output.progress_interval_s
    if s.cluster.redis_url:
        often = summary_every(s.cluster.heartbeat_ttl_s)
        every = min(every, often) if every > 0 else often
    return msgspec.structs.replace(
        s,
        crawl=msgspec.structs.replace(s.crawl, output_dir=str(worker_dir(root, index))),
        output=msgspec.structs.replace(
            s.output, warc_prefix=f"{s.output.warc_prefix}-w{index}", progress_interval_s=every
        ),
        workers=msgspec.structs.replace(s.workers, processes=1),
    )


def _worker_main(
    raw: bytes,
    index: int,
    local: range,
    total: int,
    status: SynchronizedArray[int],
    stop: Synchronized[int],
    run_id: bytes,
    conn: Connection | None = None,
    config_path: str | None = None,
    file_output_dir: str | None = None,
    orders: SynchronizedArray[int] | None = None,
    parent: int | None = None,
    progress: Any = None,
) -> None:
    """Entry point of one worker process (``settings.crawl.output_dir``: the node's root).

    The terminal's signals are ignored from its first instruction (``proctree.spawning``); it
    dies with its coordinator; ``orders`` are the coordinator's signals passed on; ``progress``
    (a queue) takes its progress snapshots for the coordinator's progress lines."""
    die_with_parent(parent)
    watch_parent()
    ignore_terminal_signals()
    if orders is not None:  # this worker holds the shared objects: their names may go
        with orders.get_lock():
            orders[2] += 1
    if progress is not None:  # snapshots only: never wait at exit for one to be read
        progress.cancel_join_thread()
    settings = msgspec.msgpack.decode(raw, type=CrawlSettings)
    configure_logging(settings.logging.format, settings.logging.level)
    root = Path(settings.crawl.output_dir)
    remote = None
    if settings.cluster.redis_url:
        # the crawl's keys: its id, kept by the coordinator when it joined (before any worker)
        crawl = read_crawl_file(root) or ""
        remote = RemoteSender(redis_of(settings), Keys(settings.cluster.key_prefix, crawl))
    peers = Peers(
        index, local, total, root, settings.frontier.lmdb_map_size_bytes, status, stop, run_id,
        remote, settings.workers.partition_by, orders,
    )  # fmt: skip
    profiled = os.environ.get("FRONTIER_CRAWL_PROFILE")  # bench/cpu_profile.py
    if profiled:
        import cProfile
        import time

        profile = cProfile.Profile(time.process_time)
        profile.enable()
    try:
        report = Engine(
            _worker_settings(settings, root, index),
            peers=peers,
            on_progress=(lambda p: progress.put({**p, "worker": index})) if progress else None,
            commands=PipeCommands(conn) if conn is not None else None,
            config_path=Path(config_path) if config_path else None,
            reshape=lambda s: _worker_settings(s, root, index),
            # a reload compares with the file as written ({node} not yet replaced)
            loaded=msgspec.structs.replace(
                settings,
                crawl=msgspec.structs.replace(
                    settings.crawl, output_dir=file_output_dir or settings.crawl.output_dir
                ),
            ),
        ).run()
    except ClusterError as exc:  # Redis gone for too long: this worker's state is committed
        log.error("worker %d: %s", index, exc)
        sys.exit(1)
    except StateLocked as exc:  # a process of an earlier run still holds this worker's state
        log.error("worker %d: %s", index, exc)
        sys.exit(2)
    finally:
        peers.close()
        if profiled:
            profile.disable()
            profile.dump_stats(str(Path(profiled) / f"worker-{index}.prof"))
        import gc

        gc.freeze()  # the worker exits next: its shutdown need not collect all it imported
    if report.get("write_error") or report.get("stopped_for_low_space"):
        sys.exit(1)  # the coordinator stops the others and lists this one as failed
