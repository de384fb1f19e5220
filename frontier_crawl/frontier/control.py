"""The operator's holds on hosts (the control API's crawl-state commands), durable in LMDB.

* :meth:`Control.block` / :meth:`Control.unblock`: hand out no URLs of a host name (every
  scheme and port) until unblocked; its queued and newly admitted URLs are kept, requests in
  flight finish (``HostQueues.blocked``, the BLOCKED state);
* :meth:`Control.set_host_delay`: space requests to a host name by the operator's delay in
  place of min_delay_s and the adaptive delay, never below its Crawl-delay
  (``Spacing.host_delays``).

Both are written to the ``blobs`` database, as JSON, in the transaction open when they are
applied (``control:blocked``: the blocked host names; ``control:host-delays``: host name ->
delay in seconds), and read back by :meth:`Control.load` when the frontier resumes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from frontier_crawl.frontier.hosts import HostState
from frontier_crawl.frontier.urls import host_of

if TYPE_CHECKING:
    import lmdb

    from frontier_crawl.frontier.hosts import HostQueue, HostQueues
    from frontier_crawl.frontier.spacing import Spacing

log = logging.getLogger(__name__)

BLOCKED_KEY = b"control:blocked"  #: blobs: the blocked host names, JSON
HOST_DELAYS_KEY = b"control:host-delays"  #: blobs: host name -> delay (seconds), JSON

Write = Callable[[], AbstractContextManager["lmdb.Transaction[bytes]"]]


class Control:
    """Blocks and host delays over the frontier's host queues (see the module). ``write``
    gives the open batch's transaction (``Transactions.write``); ``blobs`` is its database."""

    __slots__ = ("_blobs", "_queues", "_spacing", "_write")

    def __init__(
        self, queues: HostQueues, spacing: Spacing, write: Write, blobs: lmdb._Database
    ) -> None:
        self._queues = queues
        self._spacing = spacing
        self._write = write
        self._blobs = blobs

    @property
    def blocked_hosts(self) -> list[str]:
        """Host names the operator blocked (``block``), sorted."""
        return sorted(self._queues.blocked)

    @property
    def host_delays(self) -> dict[str, float]:
        """Host name -> the delay the operator set for it (``set_host_delay``)."""
        return {name: delay for name, (delay, _p) in sorted(self._spacing.host_delays.items())}

    @property
    def held_by_blocks(self) -> int:
        """URLs queued for blocked hosts (not handed out until unblocked)."""
        return sum(host.queued for host in self._queues.parked.values())

    @property
    def blocked_queues(self) -> int:
        """Hosts with queued work held by a block."""
        return len(self._queues.parked)

    def matching(self, name: str) -> list[HostQueue]:
        """Every known host (origin) whose host name is ``name``: O(hosts), for commands."""
        return [host for key, host in self._queues.hosts.items() if host_of(key) == name]

    def knows_host(self, name: str) -> bool:
        """Whether any host (origin) of host name ``name`` is known to this frontier: queued,
        fetched or waiting (O(hosts), for the operator's commands)."""
        return bool(self.matching(name))

    def block(self, name: str, now: float) -> int:
        """Hand out no more URLs of host name ``name`` (every scheme and port) until
        :meth:`unblock`: its queued and newly admitted URLs are kept (in LMDB, as always),
        requests in flight finish. Durable with the open transaction. Returns the URLs held."""
        self._queues.blocked.add(name)
        self.save()
        held = 0
        for host in self.matching(name):
            if host.state in (HostState.READY, HostState.SNOOZED):
                self._queues.move(host, HostState.BLOCKED)  # its FIFO or heap entry is stale
            held += host.queued
        return held

    def unblock(self, name: str, now: float) -> int:
        """Undo :meth:`block`; the host's URLs are handed out again. Returns how many are
        queued (0 and no change if ``name`` was not blocked)."""
        blocked = self._queues.blocked
        if name not in blocked:
            return 0
        blocked.discard(name)
        self.save()
        released = 0
        for host in [h for h in self._queues.parked.values() if host_of(h.origin) == name]:
            released += host.queued
            self._queues.settle(host, now)
        return released

    def set_host_delay(self, name: str, delay_s: float | None, now: float) -> int:
        """Space requests to host name ``name`` by ``delay_s`` (None: back to the configured
        delay), never below its robots.txt Crawl-delay. Applies at once: the host's next
        request moves by the difference (a backoff it is serving stays). Durable with the open
        transaction. Returns the hosts (origins) it applies to now."""
        delays = self._spacing.host_delays
        if delay_s is None:
            delays.pop(name, None)
        else:
            delays[name] = (delay_s, self._spacing.own(delay_s))
        self.save()
        hosts = self.matching(name)
        for host in hosts:
            self._spacing.respace(host, now)
        return len(hosts)

    def reapply(self, now: float) -> None:
        """After a reload changed the configured policy: each operator delay's policy takes
        the new backoff and Crawl-delay cap."""
        for name, (delay, _own) in list(self._spacing.host_delays.items()):
            self.set_host_delay(name, delay, now)

    def save(self) -> None:
        """Write the blocks and host delays in the open transaction."""
        with self._write() as txn:
            txn.put(BLOCKED_KEY, json.dumps(sorted(self._queues.blocked)).encode(), db=self._blobs)
            delays = {name: delay for name, (delay, _p) in self._spacing.host_delays.items()}
            txn.put(HOST_DELAYS_KEY, json.dumps(delays, sort_keys=True).encode(), db=self._blobs)

    def load(self, txn: lmdb.Transaction[bytes]) -> None:
        """The operator's blocks and host delays of earlier runs (see :meth:`save`); an
        unreadable blob is ignored with a warning."""
        blocked = txn.get(BLOCKED_KEY, db=self._blobs)
        delays = txn.get(HOST_DELAYS_KEY, db=self._blobs)
        try:
            names = json.loads(bytes(blocked)) if blocked is not None else []
            saved = json.loads(bytes(delays)) if delays is not None else {}
            self._queues.blocked = {str(n) for n in names}
            pairs = {str(k): float(v) for k, v in saved.items()}
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("unreadable operator blocks or host delays, ignored: %r", exc)
            self._queues.blocked, pairs = set(), {}
        for name, delay in pairs.items():
            self._spacing.host_delays[name] = (delay, self._spacing.own(delay))
