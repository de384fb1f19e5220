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

This module imports no part of the frontier that does anything (records and figures only), so
the engine can type against it without importing the frontier's machinery.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    pass


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
