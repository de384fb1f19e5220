"""What the frontier keeps on disk, opened and closed in one place (guarantee 4: nothing lost).

The state directory holds ``frontier.lmdb`` (the queue, the seen-set, blobs, the outbox and,
in a continuous crawl, the schedule), ``inbox.lmdb`` (worker mode: batches from other
workers), the robots.txt cache (``robots/``), the seen-set's Bloom snapshot (``seen.bloom``)
and ``identity.json`` (``identity.py``). :meth:`StateFiles.open` opens them all or none: a
full or failing disk is a :class:`StorageError`, a damaged environment a
:class:`DamagedState` naming what the crawl does about it. :meth:`StateFiles.checkpoint`
makes LMDB durable and writes the snapshot (skipped, with a warning, when there is no room:
it only saves restart time); :meth:`StateFiles.close` releases everything.
"""

from __future__ import annotations

import errno
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import lmdb

from frontier_crawl.frontier.damage import DamagedState
from frontier_crawl.frontier.mailbox import INBOX_ENV, Inbox
from frontier_crawl.frontier.recrawl import Recrawl
from frontier_crawl.frontier.robots import MAX_ROBOTS_TTL_S, RobotsCache, product_token
from frontier_crawl.frontier.seen import SeenSet
from frontier_crawl.frontier.store import (
    QueueStore,
    open_checked_env,
    storage_errno,
    storage_error,
    storage_errors,
)

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from frontier_crawl.frontier.options import FrontierHooks, FrontierOptions

log = logging.getLogger(__name__)

FRONTIER_ENV = "frontier.lmdb"  #: the frontier's LMDB environment, in the state directory
SNAPSHOT = "seen.bloom"  #: the seen-set's Bloom filter snapshot, in the state directory
#: errnos of a write without room: a skipped Bloom snapshot, not a failed crawl
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)
#: what a damaged frontier environment, set aside, means for the crawl
FRESH_FRONTIER = (
    "The crawl starts afresh from the seeds: pages fetched before are fetched again (the "
    "earlier runs' WARC files and crawl-log lines stay; the report counts from now on). In "
    "worker mode, this worker's pages reachable only through other workers' pages are not "
    "crawled again. To go back instead, stop the crawl and move the set-aside directory back "
    "(LMDB's mdb_dump may read what is left of it)."
)


@dataclass(slots=True, eq=False)
class StateFiles:
    """The frontier's open state (see the module)."""

    directory: Path
    env_path: Path
    env: lmdb.Environment
    store: QueueStore
    seen: SeenSet
    blobs: lmdb._Database  #: small named records (counts, control, the engine's counters)
    outbox: lmdb._Database  #: batches for other workers, delivered after their commit
    recrawl: Recrawl | None  #: the schedule of a continuous crawl (None: recrawl off)
    inbox: Inbox | None  #: batches from other workers (worker mode only: ``route`` given)
    robots: RobotsCache
    snapshot_failing: bool = False  #: the last checkpoint had no room for the snapshot

    @classmethod
    def open(
        cls,
        directory: Path,
        o: FrontierOptions,
        hooks: FrontierHooks,
        host_id_of: Callable[[str], int],
    ) -> StateFiles:
        """Open every file of the frontier in ``directory`` (StorageError, DamagedState).
        ``host_id_of``: the store's id of a host (-1: none yet), for referrers."""
        env_path = directory / FRONTIER_ENV
        env = open_checked_env(env_path, o.map_size, FRESH_FRONTIER)
        try:
            store = QueueStore(env, host_id_of)
            seen = SeenSet(env, o.seen_capacity, o.seen_error_rate)
            blobs = env.open_db(b"blobs")
            outbox = env.open_db(b"outbox")
            recrawl = (
                Recrawl(env, blobs, o.recrawl, hooks.wall_clock) if o.recrawl is not None else None
            )
        except lmdb.Error as exc:
            env.close()
            if storage_errno(exc) is not None:  # a full or failing disk, not damage
                raise storage_error(env_path, exc) from exc
            raise DamagedState(
                env_path, f"damaged LMDB environment ({exc})", FRESH_FRONTIER
            ) from exc
        inbox = None
        try:
            inbox = Inbox(directory / INBOX_ENV, o.map_size) if hooks.route is not None else None
            robots = RobotsCache(
                directory / "robots",
                o.robots_token or product_token(o.user_agent),
                min(o.robots_ttl_s, MAX_ROBOTS_TTL_S),
                o.robots_stale_s,
                hooks.wall_clock,
            )
        except DamagedState:
            if inbox is not None:
                inbox.close()
            env.close()
            raise
        return cls(directory, env_path, env, store, seen, blobs, outbox, recrawl, inbox, robots)

    def checkpoint(self) -> None:
        """Flush LMDB to disk and snapshot the Bloom filter (StorageError, or OSError from
        the snapshot, if writing fails). A snapshot without room (ENOSPC, EDQUOT) is skipped
        with a warning, not raised: it only saves a restart time (``seen.py``: the next start
        loads the previous snapshot and the digests logged since, or rebuilds the filter from
        LMDB), so it must not fail a crawl, least of all one that has ended. The robots.txt
        cache's pending writes are written first (``RobotsCache.flush``)."""
        self.robots.flush()
        with storage_errors(self.env_path):
            self.env.sync(True)
            try:
                self.seen.save_snapshot(self.directory / SNAPSHOT)
            except OSError as exc:
                if exc.errno not in _NO_ROOM:
                    raise
                self._snapshot_skipped(exc)
                return
        if self.snapshot_failing:
            self.snapshot_failing = False
            log.warning("seen-set snapshot written again in %s", self.directory)

    def _snapshot_skipped(self, exc: OSError) -> None:
        """Say once (until a snapshot is written again) that snapshots are being skipped."""
        if self.snapshot_failing:
            return
        self.snapshot_failing = True
        size = self.seen.stats()["bloom_bytes"]
        log.warning(
            "seen-set snapshot not written (%s: %s; it needs %.1f MB free in %s): the crawl "
            "goes on, nothing is lost (a restart loads the previous snapshot and the URLs "
            "recorded since, or rebuilds the set from LMDB: slower); tried again at each "
            "checkpoint",
            os.strerror(exc.errno or 0), exc.filename or "", int(size) / 1e6, self.directory,
        )  # fmt: skip

    def close(self) -> None:
        """Close what the frontier holds open (LMDB environments, the robots cache)."""
        self.robots.close()
        if self.inbox is not None:
            self.inbox.close()
        self.env.close()
