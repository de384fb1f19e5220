"""The frontier: which URL to fetch next, and when, so that every host is treated politely.

:class:`Frontier` is what the engine's loop calls for scheduling (``next_ready``, ``complete``,
``robots_done``), admission (``add``) and durability (``batch``, ``mark_done``,
``checkpoint``, ``close``); its other roles are objects of their own, reached from it:
``holds`` (the operator's, ``control.py``), ``view`` (the figures, read only, ``status.py``),
``mail`` (link batches to and from other workers, ``mailbox.py``) and ``revisits`` (a
continuous crawl's, or none, ``revisits.py``). Each of the engine's parts is typed with the
face it uses (``faces.py``). It decides from the facts of a result (:meth:`Frontier.complete`:
a ``Completion``) whether a URL is retried, finished or its host held, and hands the mechanism
to one part per job, each in its own module and given explicit references to what it needs:

==================  =========================================================================
``admission.py``    which links become queued URLs: scope, ownership, seen-set, trap limits
``intake.py``       where they are queued: hosts made, URLs queued, hosts retired, the counts
``buffer.py``       queued URLs in memory under one global budget, the rest in LMDB (flat
                    memory, guarantee 3); retries behind their host's other URLs (8)
``hosts.py``        the host queues, their :class:`HostState` and the one transition
``dispatch.py``     request starts and ends: ready hosts, IP groups, connections, holds (2)
``spacing.py``      the delays applied: configured, adaptive, Crawl-delay, the operator's (2)
``robotsgate.py``   robots.txt of each host: first fetch, refresh, redirects, stale copy (13)
``completion.py``   a result's facts, the retry policy (8)
``control.py``      the operator's blocks and host delays, durable
``revisits.py``     a continuous crawl's revisits over the host queues, or none: a strategy
                    chosen once (``recrawl.py``: the schedule)
``status.py``       read-only: hosts by state, the held ones, the next due, the busiest
``txn.py``          one LMDB write transaction per batch, and what is done around commits
``state.py``        the files on disk, opened, checkpointed and closed together (4)
``store.py``        the LMDB queue (key layout, blocks, done marks); ``seen.py`` the seen-set (1)
``identity.py``     what a crawl cannot change between runs (its state layout version)
``records.py``      the records handed out and kept: ``Ticket``, ``LastCapture``, ``Visit``
==================  =========================================================================

Every admitted URL is written to LMDB in the same transaction that records it in the
seen-set, and marked done only when its fetch is complete: LMDB is the truth about outstanding
work, so a process killed at any instant loses no URL and refetches only what was in flight or
completed in the transaction that was not committed.
"""

from __future__ import annotations

import bisect  # noqa: F401  (the priority tests patch bisect.bisect through this name)
import logging
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import lmdb
import msgspec

from frontier_crawl.frontier.admission import Admission
from frontier_crawl.frontier.buffer import QueueBuffer
from frontier_crawl.frontier.completion import (
    HOST_STATUSES,
    Completion,
    Failure,
    RetryPolicy,
    Settled,
    answer_s,
    decide,
    hold_for,
    retry_after_s,
)
from frontier_crawl.frontier.control import Control
from frontier_crawl.frontier.damage import DamagedState
from frontier_crawl.frontier.dispatch import Dispatch
from frontier_crawl.frontier.hosts import HostQueue, HostQueues, HostState
from frontier_crawl.frontier.identity import LAYOUT_VERSION as LAYOUT_VERSION  # (re-exported)
from frontier_crawl.frontier.identity import (
    check_identity,
)
from frontier_crawl.frontier.intake import HOST_UNREACHABLE as HOST_UNREACHABLE  # (re-exported)
from frontier_crawl.frontier.intake import Intake
from frontier_crawl.frontier.mailbox import Link, PeerMail
from frontier_crawl.frontier.options import FrontierHooks, FrontierOptions, no_variant
from frontier_crawl.frontier.politeness import DelayPolicy, delay_for
from frontier_crawl.frontier.records import Ticket
from frontier_crawl.frontier.revisits import OnePass, Revisits, RevisitStrategy
from frontier_crawl.frontier.robotsgate import RobotsGate
from frontier_crawl.frontier.scope import check_scope, scope_ports
from frontier_crawl.frontier.sitemapqueue import SitemapQueue
from frontier_crawl.frontier.spacing import Spacing
from frontier_crawl.frontier.state import FRESH_FRONTIER, StateFiles
from frontier_crawl.frontier.status import FrontierView
from frontier_crawl.frontier.status import HostSignals as HostSignals  # (re-exported)
from frontier_crawl.frontier.store import (
    QueueEntry,
)
from frontier_crawl.frontier.traps import Limits
from frontier_crawl.frontier.txn import Transactions
from frontier_crawl.safefs import make_dir

if TYPE_CHECKING:
    from frontier_crawl.config import CrawlSettings

log = logging.getLogger(__name__)

#: what reading a damaged environment's pages raises while the frontier resumes
_STATE_ERRORS = (lmdb.Error, msgspec.DecodeError, struct.error, ValueError, IndexError,
                 OverflowError, KeyError)  # fmt: skip

#: reasons passed to the reject callback (they become crawl-log outcomes)
ROBOTS_DENIED = "robots-denied"
ROBOTS_UNAVAILABLE = "robots-unavailable"

_NO_HOOKS = FrontierHooks()
_DONE = Settled(False, 0.0, False)  #: a response the host meant, holding it no longer


class Frontier:
    """Admission (scope, dedup, traps), per-host queues in LMDB, and politeness scheduling."""

    def __init__(
        self, state_dir: Path, options: FrontierOptions, hooks: FrontierHooks = _NO_HOOKS
    ) -> None:
        """A frontier over ``state_dir`` (created if need be), resumed from what an earlier
        run left there. ``options``: the tunables (``FrontierOptions.from_settings``);
        ``hooks``: the collaborators (rejected URLs, worker routing, the wall clock)."""
        o = options
        make_dir(state_dir, private=True)
        check_identity(state_dir)
        self._retry_policy = o.retry_policy
        self._wall_clock = hooks.wall_clock
        #: ``[sitemaps]``: each host's sitemaps, queued once its robots.txt is known
        self._sitemaps = SitemapQueue(o.sitemap_paths, o.sitemap_robots, self.add)
        self._on_reject = hooks.on_reject
        #: the host queues, where each waits, and how many are in each state (``hosts.py``)
        self._queues = HostQueues(o.connections_per_host)
        self._hosts: dict[str, HostQueue] = self._queues.hosts  #: origin -> queue (read only)
        #: LMDB, the robots.txt cache, the inbox: opened (and closed) together (``state.py``)
        files = self._files = StateFiles.open(state_dir, o, hooks, self._queues.host_id_of)
        self._env, self._store, self._seen = files.env, files.store, files.seen
        self._blobs = files.blobs
        #: the write transactions (one per batch) and what is done around their commits
        self._tx = Transactions(self._env, files.env_path, flush=self._flush, aborted=self._aborted,
                                committed=self._committed)  # fmt: skip
        self._write = self._tx.write
        #: the queued URLs in memory, under the global budget (``buffer.py``)
        self._buffer = QueueBuffer(self._store, self._tx, o.memory_urls)
        #: the delays: configured, the operator's per host name (``spacing.py``)
        self._spacing = Spacing(o.policy, o.host_error_urls, self._queues)
        #: the operator's holds: blocks and host delays, durable (``control.py``)
        self.holds = Control(self._queues, self._spacing, self._tx.write, self._blobs)
        #: robots.txt of every host: first fetch, refresh, redirects, the copy it falls back on
        #: (a redirect's target is checked against the scope built below)
        self._gate = RobotsGate(files.robots, lambda url: self._admission.origin_allowed(url),
                                obey=o.obey_robots, ttl_s=o.robots_ttl_s, stale_s=o.robots_stale_s,
                                retry_s=o.robots_retry_s, attempts=o.robots_attempts)  # fmt: skip
        #: request starts and ends: ready hosts, IP groups, connections, holds (``dispatch.py``)
        self._dispatch = Dispatch(self._queues, self._spacing, self._gate, per_ip=o.per_ip,
                                  known_ips=o.known_ips)  # fmt: skip
        #: hosts made, admitted URLs queued, hosts retired, the admission counts (``intake.py``)
        self._intake = Intake(self._queues, self._buffer, self._dispatch, self._store, self._blobs,
                              per_host_limit=lambda: self._admission.limits.max_pages_per_host,
                              put_back=lambda txn, revisits: self.revisits.put_back(txn, revisits),
                              max_host_errors=o.max_host_errors, on_reject=hooks.on_reject,
                              batch=self._tx.batch,
                              write=self._tx.write)  # fmt: skip
        #: scope, ownership, dedup and traps: which links become queued URLs
        self._admission = Admission(
            allow_domains=o.allow_domains,
            allow_ports=o.allow_ports,
            exclude=o.exclude,
            limits=o.limits,
            max_pages=o.max_pages,
            settled_links=o.settled_links,
            route=hooks.route,
            worker=hooks.worker,
            seen=self._seen,
            hosts=self._hosts,
            enqueue=self._intake.enqueue,
            stored_admitted=self._intake.stored_admitted,
            on_reject=hooks.on_reject,
            on_foreign=hooks.on_foreign,
            variant=hooks.variant,
        )
        #: a continuous crawl's revisits over the host queues, or none (``revisits.py``); the
        #: engine's sitemaps give it their ``<lastmod>`` dates (``sitemap_lastmod``)
        self.revisits: RevisitStrategy = OnePass(self._store)
        if files.recrawl is not None:
            self.revisits = Revisits(files.recrawl, self._queues, self._store,
                                      write=self._tx.write, read=self._tx.read,
                                      in_scope=self._admission.in_scope,
                                      host_for=self._intake.host_for, on_reject=hooks.on_reject,
                                      wall_clock=hooks.wall_clock)  # fmt: skip
        #: link batches to and from other workers (``mailbox.py``; worker mode)
        self.mail = PeerMail(self._env, files.outbox, files.inbox, self._tx.batch, self._write,
                             self.add)  # fmt: skip
        #: the frontier read, never written: the status's, the report's (``status.py``)
        self.view = FrontierView(self._queues, self._buffer, self._dispatch, self._gate,
                                 self._spacing, self.holds, self._intake, self.revisits,
                                 self._seen.stats)  # fmt: skip
        try:
            self._resume()
        except _STATE_ERRORS as exc:  # pages of the queue or seen-set unreadable
            files.close()
            raise DamagedState(files.env_path, f"damaged LMDB data ({exc!r})",
                               FRESH_FRONTIER) from exc  # fmt: skip

    @classmethod
    def from_settings(
        cls,
        s: CrawlSettings,
        state_dir: Path,
        on_reject: Callable[[Ticket, str], None] | None = None,
        *,
        route: Callable[[str], int] | None = None,
        worker: int = 0,
        on_foreign: Callable[[int, Link], None] | None = None,
        wall_clock: Callable[[], float] = time.time,
        variant: Callable[[bytes], str] = no_variant,
    ) -> Frontier:
        """Build a frontier from the crawl settings (``FrontierOptions.from_settings`` is the
        only place that reads them)."""
        hooks = FrontierHooks(route=route, worker=worker, wall_clock=wall_clock,
                              variant=variant)  # fmt: skip
        if on_reject is not None:
            hooks = replace(hooks, on_reject=on_reject)
        if on_foreign is not None:
            hooks = replace(hooks, on_foreign=on_foreign)
        return cls(state_dir, FrontierOptions.from_settings(s), hooks)

    # ----------------------------------------------------------------------------- transactions

    def batch(self) -> AbstractContextManager[None]:
        """Group every frontier change made inside into one LMDB write transaction
        (``txn.Transactions.batch``): the engine wraps one loop tick in a batch so a commit's
        fdatasync is paid once per tick, not once per URL. An exception aborts the batch: LMDB
        keeps the state before it."""
        return self._tx.batch()

    def _flush(self, txn: lmdb.Transaction[bytes]) -> None:
        """What the parts buffered, written into ``txn`` before it commits."""
        self._store.flush(txn)
        self._intake.flush(txn)
        self.revisits.flush(txn)

    def _aborted(self) -> None:
        """A transaction was aborted: the parts forget what they staged for it."""
        self._admission.aborted()
        self.revisits.aborted()
        self._intake.aborted()
        self._store.aborted()
        self._seen.aborted()
        self.mail.aborted()

    def _committed(self) -> None:
        """A transaction committed: what the parts learn only once it is durable."""
        self._store.committed()
        self._seen.committed()
        self._admission.committed()
        self.revisits.committed()
        self.mail.committed()

    def save_blob(self, name: str, data: bytes) -> None:
        """Store a small named blob (e.g. the engine's counters) in the current transaction,
        so it is durable exactly when the frontier changes it goes with are."""
        with self._write() as txn:
            txn.put(name.encode(), data, db=self._blobs)

    def load_blob(self, name: str) -> bytes | None:
        """A blob saved by :meth:`save_blob` in this or an earlier run."""
        with self._env.begin(db=self._blobs) as txn:
            data = txn.get(name.encode())
        return bytes(data) if data is not None else None

    def queued_callbacks(self) -> dict[str, int]:
        """Queued (unfinished) URLs per spider callback name ("": the default), from one scan
        of the stored queue: for the start-up check of a changed spider (costly on a large
        queue: called only when a stored callback name is missing from the spider)."""
        with self._env.begin() as txn:
            return self._store.callback_counts(txn)

    # ----------------------------------------------------------------------------- admission

    def in_scope(self, url: str) -> bool:
        """Is a canonical URL inside the allowed domains and not excluded?"""
        return self._admission.in_scope(url)

    def in_scope_links(self, links: Sequence[str]) -> list[str]:
        """The canonical, in-scope forms of a page's links, deduplicated, in order (what a
        spider's callback sees; nothing is admitted: ``Admission.in_scope_links``)."""
        return self._admission.in_scope_links(links)

    def add(
        self,
        urls: Iterable[str],
        *,
        depth: int,
        referrer: str | None = None,
        hops: int = 0,
        now: float = 0.0,
        callback: str = "",
        meta: bytes = b"",
        priority: int = 0,
    ) -> int:
        """Admit new URLs (canonical, in scope, unseen, within the trap limits).

        ``callback``, ``meta``, ``priority``: a spider's request (``callback``: the name of the
        callback its response goes to, "" the default; ``meta`` msgpack), stored with each URL
        admitted, through retries and redirects (the engine passes them on) and to the owner
        of a host another worker owns. A URL already seen keeps what it was first admitted with.
        ``priority``: within its host, a higher priority is fetched sooner, FIFO among equal
        ones (clamped to +-65535, ``store.rank_of``); due retries still go first.

        Returns how many were queued. A new URL that breaks a trap limit is recorded through the
        reject callback once (it is marked seen, so later links to it are silent).

        Settled links. A link (as given, before canonicalisation) whose fate cannot change for
        the rest of the run is remembered in a bounded two-generation set once the transaction
        that decided it has committed, and later occurrences are skipped at the cost of one set
        lookup: links that are not crawlable or not in scope (pure functions of the link and
        the configuration), links another worker owns (sent in a committed outbox batch, which
        reaches the owner's seen-set; a repeat would only be a duplicate there), and links
        that went through the seen-set (committed there, and the seen database is
        append-only, so every later answer is "seen"). Until that commit they are not
        remembered, so an aborted transaction loses nothing. This is what makes the repeated
        navigation links of every page cheap. The one place a repeat is not a pure no-op,
        ``max_pages`` reached (the loop stops at the next owned link), bypasses the set.
        """
        request = (callback, meta, priority) if callback or meta or priority else None
        txn = self._tx.txn
        if txn is None:
            with self._tx.transaction() as txn:
                return self._admit(txn, urls, depth, referrer, hops, now, request)
        return self._admit(txn, urls, depth, referrer, hops, now, request)

    def _admit(
        self,
        txn: lmdb.Transaction[bytes],
        urls: Iterable[str],
        depth: int,
        referrer: str | None,
        hops: int,
        now: float,
        request: tuple[str, bytes, int] | None = None,
    ) -> int:
        """:meth:`add` inside the transaction ``txn`` (``Admission.admit``)."""
        intake = self._intake
        added = self._admission.admit(txn, urls, depth, referrer, hops, now, request,
                                      intake.admitted)  # fmt: skip
        intake.admitted += added
        return added

    # ----------------------------------------------------------------------------- scheduling

    def next_wake(self) -> float | None:
        """Monotonic time at which a snoozed host, or the next revisit of a continuous crawl,
        becomes due (None if no host is snoozed and no revisit is scheduled)."""
        host = self._queues.first_snoozed()
        wake = host.wake_at if host is not None else None
        at = self.revisits.next_wake()
        if at is not None:
            wake = at if wake is None else min(wake, at)
        return wake

    @property
    def has_ready(self) -> bool:
        """Is any host ready right now (as of the last next_ready call), or a robots.txt
        redirect hop waiting to be handed out?"""
        return self._queues.has_ready or bool(self._gate.hops)

    def next_ready(self, now: float, limit: int) -> list[Ticket]:
        """Up to ``limit`` tickets from hosts whose politeness slot is open at ``now``."""
        self.revisits.pump(now)
        out = self._dispatch.hand_out(now, limit, self._take)
        self._sitemaps.queue_due(now)
        return out

    def _take(self, host: HostQueue, now: float) -> Ticket | None:
        """The host's next ticket: robots.txt first, then a retry that is due, then its queue;
        robots-denied URLs are recorded and skipped."""
        if host.rules is None:
            host.rules = self._gate.known_rules(host, now)
            if host.rules is not None and self._sitemaps.enabled:
                self._sitemaps.later(host)  # queued once next_ready is done with hosts
        if host.rules is None:  # nothing else until robots.txt is known
            return self._gate.first_fetch(host)
        if host.rules.refresh_at <= now:  # fetched again in this request slot
            return self._gate.refresh(host, now)
        revisits = host.revisits
        if revisits is not None and self.revisits.turn(host, revisits, now):
            revisit = self.revisits.take(host, revisits, now, ROBOTS_DENIED)
            if revisit is not None:
                return revisit
        buffer = self._buffer
        while (item := buffer.pop(host, now)) is not None:
            key, entry = item
            buffer.queued -= 1
            ticket = (
                Ticket(key, host.origin, entry.url, entry.depth, entry.hops, entry.attempt,
                       entry.referrer)
                if not (entry.callback or entry.meta or entry.priority)
                else Ticket(key, host.origin, entry.url, entry.depth, entry.hops, entry.attempt,
                            entry.referrer, False, entry.callback, entry.meta, entry.priority)
            )  # fmt: skip
            if host.rules.allowed(entry.url):
                host.in_flight += 1
                return ticket
            self._on_reject(ticket, ROBOTS_DENIED)
            with self._write():
                self._store.done(key)
        revisits = host.revisits
        if revisits is not None and revisits.ready_at() <= now:
            return self.revisits.take(host, revisits, now, ROBOTS_DENIED)  # nothing new
        return None

    # ----------------------------------------------------------------------------- completion

    def complete(self, ticket: Ticket, outcome: Completion, *, mark_done: bool = True) -> Settled:
        """A page ticket's fetch came back with ``outcome`` (its facts): the frontier decides.

        A transient failure with retries left (``completion.decide``) goes back into its
        host's retry heap (:meth:`retry`); anything else is finished (:meth:`finish`). A
        429/503's Retry-After holds the host (capped at fetch.max_retry_delay_s; a longer one
        is not retried). Connection failures, 429/503 and runs of failing URLs back the host
        off (``Spacing.after``). ``mark_done``: as for :meth:`finish` (a retry is never done).
        """
        d = decide(outcome, ticket.attempt, self._retry_policy, self._wall_clock)
        failure = d.failure
        if d.retry_s is not None:
            held = self.retry(ticket, outcome.finished, d.retry_s, answer_s(outcome), failure,
                              outcome.ip, hold_s=d.hold_s)  # fmt: skip
            return Settled(True, held, failure is not Failure.NONE)
        self.revisits.stage(ticket, outcome)
        held = self.finish(ticket, outcome.finished, answer_s(outcome), failure, outcome.ip,
                           mark_done=mark_done, hold_s=d.hold_s)  # fmt: skip
        if failure is Failure.NONE:
            return _DONE if held == 0.0 else Settled(False, held, False)
        return Settled(False, held, True)

    def will_retry(self, ticket: Ticket, outcome: Completion) -> bool:
        """Would :meth:`complete` retry this ticket (nothing changes)? The engine asks first
        when a final result needs work (archiving, links) before it is completed."""
        d = decide(outcome, ticket.attempt, self._retry_policy, self._wall_clock)
        return d.retry_s is not None

    def finish(
        self,
        ticket: Ticket,
        now: float,
        fetch_s: float = 0.0,
        failure: Failure = Failure.NONE,
        ip: str = "",
        *,
        mark_done: bool = True,
        hold_s: float = 0.0,
    ) -> float:
        """A page ticket is finished for good (fetched, or failed for the last time): the
        mechanism under :meth:`complete`, which decides ``failure`` and ``hold_s`` from a
        result's facts.

        ``mark_done=False``: the host is released now, but the URL's entry stays unfinished
        until :meth:`mark_done` is given its ``ticket.key`` (the engine does that once the
        page's WARC record is on its way to disk). Until then a kill makes it fetched again.
        ``hold_s``: hold the host this long from now (a 429/503's Retry-After). Returns how long
        this response holds the host beyond its politeness delay (backoff or ``hold_s``).
        """
        host = self._hosts[ticket.origin]
        if mark_done:
            self.mark_done((ticket.key,))
        polite, backoff = self._spacing.after(host, ticket, fetch_s, failure)
        held = self._dispatch.release(host, ticket, now, polite, backoff, hold_s, ip)
        if failure is Failure.CONNECTION:
            self._intake.connection_failed(host)
        return held

    def mark_done(self, keys: Iterable[bytes]) -> None:
        """Record completed tickets' entries as finished (durable at the next commit); a
        continuous crawl's next visits, staged when they completed, are written with them."""
        txn = self._tx.txn
        if txn is not None:  # the usual case (the engine's group): no context manager
            self.revisits.done(txn, keys)
        else:
            with self._write() as txn:
                self.revisits.done(txn, keys)

    def retry(
        self,
        ticket: Ticket,
        now: float,
        delay_s: float,
        fetch_s: float = 0.0,
        failure: Failure = Failure.NONE,
        ip: str = "",
        *,
        hold_s: float = 0.0,
    ) -> float:
        """Fetch this ticket again, no earlier than ``delay_s`` from now (the mechanism under
        :meth:`complete`, which decides the delay from a result's facts).

        The URL waits in its host's retry heap for its own time, and then until another of the
        host's queued URLs has started, so the healthy ones go on at the host's usual pace; the
        host itself is held only by host-wide trouble (see :meth:`finish`, whose return value
        this returns too).
        """
        host = self._hosts[ticket.origin]
        if ticket.last is not None:  # a revisit: back to its host's revisits
            self.revisits.retry(host, ticket, now + delay_s)
        else:
            entry = QueueEntry(
                ticket.url, ticket.depth, ticket.hops, ticket.attempt + 1, ticket.referrer,
                ticket.callback, ticket.meta, ticket.priority,
            )  # fmt: skip
            self._buffer.requeue(host, ticket.key, entry, now + delay_s)
        polite, backoff = self._spacing.after(host, ticket, fetch_s, failure)
        held = self._dispatch.release(host, ticket, now, polite, backoff, hold_s, ip)
        if failure is Failure.CONNECTION:
            self._intake.connection_failed(host)
        return held

    def robots_redirect(self, ticket: Ticket, target: str) -> bool:
        """robots.txt (``ticket``) answered with a redirect to ``target``: fetch that next, for
        the same host (which goes on waiting), if it is crawlable and inside the allowed
        domains; the hop comes out of the next :meth:`next_ready` first. False when it is not
        (nothing changes: the caller finishes the fetch with :meth:`robots_done`). The
        ``exclude`` patterns are not applied: they select pages, and robots.txt is none."""
        return self._gate.redirect(ticket, target)

    def retire(self, origin: str, reason: str) -> None:
        """Give up on a host for the rest of the run: its queued URLs, and those found later,
        are recorded with ``reason`` (requests in flight come back as usual)."""
        host = self._hosts.get(origin)
        if host is not None and host.state is not HostState.RETIRED:
            log.warning("%s: host retired (%s)", origin, reason)
            self._intake.retire(host, reason)

    def robots_done(
        self,
        ticket: Ticket,
        now: float,
        status: int,
        body: bytes,
        fetch_s: float = 0.0,
        ip: str = "",
        *,
        retry_after: str | None = None,
        retire: str = "",
    ) -> None:
        """Record a robots.txt fetch (``status`` 0: no response; ``retry_after``: the
        response's Retry-After header, which holds the host after a 429/503, capped at
        fetch.max_retry_delay_s): new rules, or, robots.txt being unreachable, the copy at
        hand while it is usable (robots_stale_s), else a retry later, or the host retired.

        The fetch was either the host's first (nothing else was issued meanwhile) or a refresh
        (it took one of the host's request slots; the others went on with the old rules).
        ``retire``: the host is given up at once with this reason (its address is refused).
        """
        host = self._hosts[ticket.origin]
        hold = (
            hold_for(retry_after_s(status, retry_after, self._wall_clock()), self._retry_policy)
            if retry_after and status in HOST_STATUSES
            else 0.0
        )
        refresh, fallback = self._gate.landed(host)
        mine = ticket if refresh else None  # a refresh counted in the host's in_flight
        if retire:
            self._dispatch.release(host, mine, now, 0.0, 0.0, 0.0, ip)
            if host.state is not HostState.RETIRED:
                log.warning("%s: host retired (%s)", host.origin, retire)
                self._intake.retire(host, retire)
            return
        answer = self._gate.answer(host, status, body, now, hold, fallback)
        if answer.give_up:
            self._dispatch.release(host, mine, now, 0.0, 0.0, 0.0, ip)
            self._intake.retire(host, ROBOTS_UNAVAILABLE)
            return
        delay = delay_for(fetch_s, answer.crawl_delay_s, self._spacing.policy)
        self._dispatch.release(host, mine, now, delay, answer.retry_s, 0.0, ip)
        if answer.rules is not None and self._sitemaps.enabled:
            self._sitemaps.queue(host, answer.rules, now)

    # ----------------------------------------------------------------------------- revisits

    def reconfigure(self, s: CrawlSettings, now: float) -> None:
        """Apply a reloaded config's tunables: politeness delays and limits, connections per
        host, robots timings, host error limits, the scope and exclude patterns, the trap
        limits, max_pages and memory_urls. Identity and fixed keys (the LMDB map size...) are
        refused before this is called (``engine.reload``). A changed scope applies to
        links found from now on (links remembered as settled are forgotten)."""
        p = s.politeness
        self._admission.reconfigure(check_scope(s), s.scope.exclude, Limits.from_settings(s.crawl),
                                    s.crawl.max_pages, scope_ports(s))  # fmt: skip
        spacing = self._spacing
        policy, spacing.policy = spacing.policy, DelayPolicy.from_settings(p)
        self._retry_policy = RetryPolicy.from_settings(s.fetch)
        self._queues.connections_per_host = p.connections_per_host
        gate = self._gate
        gate.obey, gate.retry_s, gate.attempts = (p.obey_robots, p.robots_retry_s,
                                                  p.robots_attempts)  # fmt: skip
        self._intake.max_host_errors = p.max_host_errors
        spacing.host_error_urls = p.host_error_urls
        self._buffer.memory_urls = s.frontier.memory_urls
        self.revisits.reconfigure(s.recrawl)
        if spacing.policy == policy:
            return  # the hosts' spacing stands (the adaptive part of it too)
        self.holds.reapply(now)  # the operator's delays keep the new backoff
        for host in list(self._hosts.values()):
            spacing.respace(host, now)

    # ----------------------------------------------------------------------------- lifecycle

    @property
    def pending(self) -> int:
        """URLs queued or in flight; the crawl is over when this is 0."""
        return self._buffer.queued + self._dispatch.in_flight

    def _resume(self) -> None:
        """Rebuild in-memory state from LMDB left by an earlier run of this crawl.

        The hosts with queued URLs are built as their rows are read (``HostQueues.restore``:
        one pass, no list of rows beside them), each READY (or held by a block), its queue
        in LMDB (``unloaded``), read back when it is first taken (``QueueBuffer``)."""
        with self._env.begin() as txn:
            self._intake.load(txn)
            self.holds.load(txn)  # the blocks: a blocked host is parked, not READY
            hosts = self._queues.restore(self._store.iter_queued_hosts(txn))
            if self._admission.limits.max_pages_per_host:
                for host in hosts:
                    host.admitted = self._intake.stored_admitted(txn, host.origin)
        self._dispatch.join_all(hosts)
        self._buffer.queued += sum(host.unloaded for host in hosts)
        self.view.resumed = queued = self._buffer.queued
        if hosts:
            log.info("resumed: %d URLs queued over %d hosts", queued, len(hosts))

    def checkpoint(self) -> None:
        """Flush LMDB to disk (``StateFiles.checkpoint``)."""
        self._files.checkpoint()

    def close(self, checkpoint: bool = True) -> None:
        """Checkpoint (unless told not to: after a failed write, when the in-memory state may
        be ahead of the last commit) and release the LMDB environment and the robots cache.
        They are released even if the checkpoint fails."""
        try:
            if checkpoint:
                self._files.checkpoint()
        finally:
            self._files.close()
