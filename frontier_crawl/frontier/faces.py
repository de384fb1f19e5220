"""The frontier's faces: what each of the engine's parts may ask of it, as ``Protocol``s.

The engine's parts are given a face each, never the whole :class:`Frontier` (the engine's
core, which builds them, wires one to the other):

==================  ========================================================================
:class:`Scheduling` which URL to fetch next and when (``next_ready``), and a result's facts
                    back (``complete``): the loop
:class:`Admission`  new URLs in (``add``): the loop, the operator's seeds, sitemaps, peers
:class:`Holds`      the operator's blocks and host delays (``Frontier.holds``): steering
:class:`View`       the figures, read only (``Frontier.view``): the status and the report
:class:`Durability` the transactions, the blobs saved with them, the checkpoint and the close:
                    the group commit
:class:`Mail`       link batches to and from other workers (``Frontier.mail``): the exchange
:class:`Lastmod`    a sitemap's ``<lastmod>`` dates for the revisit schedule
                    (``Frontier.revisits``): sitemaps
==================  ========================================================================

Below them, the faces each engine part is typed with (:class:`Watched`, :class:`Steered`,
:class:`Exchanged`, :class:`SitemapTarget`): the frontier's role objects (``holds``, ``view``,
``mail``, ``revisits``) reached from it, nothing else. This module imports only records and
figures, for types, so the engine can type against it without the frontier's machinery.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from frontier_crawl.frontier.completion import Completion, Settled
    from frontier_crawl.frontier.records import Link, Ticket
    from frontier_crawl.frontier.status import HostSignals


class Add(Protocol):
    """``Frontier.add``: admit new URLs, with a spider's request (callback, meta, priority)."""

    def __call__(
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
    ) -> int: ...


class Admission(Protocol):
    """New URLs in (``Frontier.add``), and the scope a spider's callback sees."""

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
    ) -> int: ...
    def in_scope(self, url: str) -> bool: ...
    def in_scope_links(self, links: Sequence[str]) -> list[str]: ...


class Scheduling(Protocol):
    """Which URL next, and when; a result's facts back (the frontier decides retries, holds)."""

    @property
    def pending(self) -> int: ...
    @property
    def has_ready(self) -> bool: ...
    def next_ready(self, now: float, limit: int) -> list[Ticket]: ...
    def next_wake(self) -> float | None: ...
    def complete(
        self, ticket: Ticket, outcome: Completion, *, mark_done: bool = True
    ) -> Settled: ...
    def will_retry(self, ticket: Ticket, outcome: Completion) -> bool: ...
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
    ) -> None: ...
    def robots_redirect(self, ticket: Ticket, target: str) -> bool: ...
    def retire(self, origin: str, reason: str) -> None: ...


class Durability(Protocol):
    """The frontier's transactions and what is made durable with them."""

    def batch(self) -> AbstractContextManager[None]: ...
    def save_blob(self, name: str, data: bytes) -> None: ...
    def load_blob(self, name: str) -> bytes | None: ...
    def mark_done(self, keys: Iterable[bytes]) -> None: ...
    def checkpoint(self) -> None: ...
    def close(self, checkpoint: bool = True) -> None: ...


class Holds(Protocol):
    """The operator's blocks and host delays (``control.Control``)."""

    @property
    def blocked_hosts(self) -> list[str]: ...
    @property
    def host_delays(self) -> dict[str, float]: ...
    @property
    def held_by_blocks(self) -> int: ...
    @property
    def blocked_queues(self) -> int: ...
    def knows_host(self, name: str) -> bool: ...
    def block(self, name: str, now: float) -> int: ...
    def unblock(self, name: str, now: float) -> int: ...
    def set_host_delay(self, name: str, delay_s: float | None, now: float) -> int: ...


class View(Protocol):
    """The frontier read, never written (``status.FrontierView``)."""

    @property
    def admitted(self) -> int: ...
    @property
    def queued(self) -> int: ...
    @property
    def hot_total(self) -> int: ...
    @property
    def continuous(self) -> bool: ...
    def stats(self) -> dict[str, float | int]: ...
    def host_signals(self, now: float, worst: int = 5) -> HostSignals: ...
    def busiest(self, n: int = 10) -> list[tuple[str, int, int]]: ...
    def seen_stats(self) -> dict[str, float | int]: ...
    def freshness(self, now_wall: float) -> dict[str, object]: ...


class Mail(Protocol):
    """Link batches to and from other workers (``mailbox.PeerMail``)."""

    def ingest_inbox(
        self, now: float, run_id: bytes = b"", limit: int = 64
    ) -> tuple[int, int]: ...
    def queue_outgoing(self, dest: int, links: list[Link], max_bytes: int) -> None: ...
    def outgoing(self, limit: int = 256) -> list[tuple[bytes, int, bytes]]: ...
    def split_outgoing(self, key: bytes, dest: int, batches: Sequence[bytes]) -> None: ...
    def delivered(self, keys: Iterable[bytes]) -> None: ...


class Lastmod(Protocol):
    """A sitemap's ``<lastmod>`` dates for the revisit schedule (``revisits.py``)."""

    def sitemap_lastmod(self, pairs: Iterable[tuple[str, float]]) -> int: ...


# ----------------------------------------------------------------------------- per engine part


class Watched(Protocol):
    """What the engine's status reads: the figures and the operator's holds."""

    @property
    def view(self) -> View: ...
    @property
    def holds(self) -> Holds: ...


class Steered(Admission, Protocol):
    """What the operator's commands change: seeds in, and the holds."""

    @property
    def holds(self) -> Holds: ...


class Exchanged(Protocol):
    """What the peer exchange uses: the mail, and a transaction to ingest in."""

    @property
    def mail(self) -> Mail: ...
    def batch(self) -> AbstractContextManager[None]: ...


class SitemapTarget(Admission, Protocol):
    """What a fetched sitemap feeds: its URLs in, its lastmod dates to the revisits."""

    @property
    def revisits(self) -> Lastmod: ...
