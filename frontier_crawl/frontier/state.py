"""What the frontier keeps on disk, opened and closed in one place (guarantee 4: nothing lost).

The state directory holds ``frontier.lmdb`` (the queue, the seen-set, blobs, the outbox and,
in a continuous crawl, the schedule), ``inbox.lmdb`` (worker mode: batches from other
workers), the robots.txt cache (``robots/``) and ``identity.json`` (``identity.py``).
:meth:`StateFiles.open` opens them all or none: a full or failing disk is a
:class:`StorageError`, a damaged environment a :class:`DamagedState` naming what the crawl
does about it; it also removes the seen-set's Bloom filter snapshot (``seen.bloom``, and its
``.tmp``) that older versions left (``RETIRED_FILES``). :meth:`StateFiles.checkpoint` makes
LMDB durable; :meth:`StateFiles.close` releases everything.
"""

from __future__ import annotations

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
from frontier_crawl.safefs import remove_leftover

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from frontier_crawl.frontier.options import FrontierHooks, FrontierOptions

FRONTIER_ENV = "frontier.lmdb"  #: the frontier's LMDB environment, in the state directory
#: files older versions kept in the state directory (the seen-set's Bloom filter snapshot and
#: its temporary file): removed at open, the seen-set is exact in LMDB (``seen.py``)
RETIRED_FILES = ("seen.bloom", "seen.bloom.tmp")
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
            seen = SeenSet(env)
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
        for name in RETIRED_FILES:
            remove_leftover(directory / name)
        return cls(directory, env_path, env, store, seen, blobs, outbox, recrawl, inbox, robots)

    def checkpoint(self) -> None:
        """Flush LMDB to disk (StorageError if writing fails). The robots.txt cache's pending
        writes are written first (``RobotsCache.flush``)."""
        self.robots.flush()
        with storage_errors(self.env_path):
            self.env.sync(True)

    def close(self) -> None:
        """Close what the frontier holds open (LMDB environments, the robots cache)."""
        self.robots.close()
        if self.inbox is not None:
            self.inbox.close()
        self.env.close()
