"""Building a crawl's parts from its settings: :func:`open_parts`, a frozen record of them.

Each subsystem is built by its own factory (``Frontier.from_settings``, ``Fetcher.from_settings``,
``LinkParser.from_settings``, ``output.open_outputs``), in the order start-up repair needs: the
frontier first (it refuses a state directory this config cannot continue), then the fetcher
(its HTTP cache), the parser, and the outputs (recovered, then cut back to what the frontier's
last commit recorded of them). What start-up repair sets aside is named in ``repairs`` (the
report's warnings), after those of earlier runs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec

from frontier_crawl.config import CrawlSettings
from frontier_crawl.engine.seams import FetcherLike, Layout, PeersLike
from frontier_crawl.fetch import AddressPolicy, CacheUnusable, Fetcher
from frontier_crawl.frontier import DamagedState, StateMismatch, Ticket
from frontier_crawl.frontier.faces import Durability
from frontier_crawl.frontier.frontier import Frontier
from frontier_crawl.frontier.mailbox import Link
from frontier_crawl.frontier.urls import canonicalize
from frontier_crawl.output import CrawlStats
from frontier_crawl.output.open import Outputs, open_outputs
from frontier_crawl.output.recover import set_aside
from frontier_crawl.output.space import SpaceMonitor
from frontier_crawl.parse import LinkParser, Parser
from frontier_crawl.spider.api import request_variant

log = logging.getLogger(__name__)

#: the frontier blob holding the counters (``SavedStats``) of the crawl so far
STATS_BLOB = "engine.stats"
#: start-up repairs remembered for the report (the oldest are dropped past this many)
MAX_REPAIRS = 100


class SavedStats(msgspec.Struct):
    """The counters kept in LMDB with the frontier state they describe."""

    stats: CrawlStats
    elapsed_s: float
    #: what start-up repair set aside, in this and earlier runs (the report's warnings)
    repairs: list[str] = msgspec.field(default_factory=list)


def load_stats(frontier: Durability) -> tuple[CrawlStats, float, list[str]]:
    """Counters (and start-up repairs) of earlier runs, so the report covers the crawl."""
    blob = frontier.load_blob(STATS_BLOB)
    if blob is None:
        return CrawlStats(), 0.0, []
    try:
        saved = msgspec.msgpack.decode(blob, type=SavedStats)
    except msgspec.DecodeError:
        log.warning("unreadable saved counters: the report covers this run only")
        return CrawlStats(), 0.0, []
    return saved.stats, saved.elapsed_s, saved.repairs


def set_aside_state(path: Path, problem: str, consequence: str) -> str:
    """Rename damaged state ``path`` to ``<name>.damaged-<time>`` and say so, loudly: the
    warning, for the report. StateMismatch (exit 2, saying what to do) if it cannot be moved."""
    try:
        moved = set_aside(path)
    except OSError as exc:
        raise StateMismatch(
            f"{path}: {problem}; it could not be set aside ({exc}): move it out of the way "
            f"by hand and start the crawl again. {consequence}"
        ) from None
    message = f"{path}: {problem}; set aside as {moved.name}. {consequence}"
    log.warning("%s", message)
    return message


@dataclass(slots=True, frozen=True)
class Parts:
    """A crawl process's parts, opened (``open_parts``)."""

    frontier: Frontier
    fetcher: FetcherLike
    parser: Parser
    outputs: Outputs
    stats: CrawlStats  #: the counters of earlier runs (empty on a fresh crawl)
    elapsed_before: float  #: seconds the earlier runs crawled
    repairs: tuple[str, ...]  #: start-up repairs, earlier runs' first (at most MAX_REPAIRS)
    space: SpaceMonitor  #: free space on every filesystem the crawl writes to


def open_parts(
    settings: CrawlSettings,
    layout: Layout,
    *,
    lock_fd: int,
    with_feeds: bool,
    on_reject: Callable[[Ticket, str], None],
    on_foreign: Callable[[int, Link], None],
    wall_clock: Callable[[], float],
    fetcher: FetcherLike | None = None,
    peers: PeersLike | None = None,
    parser: Parser | None = None,
) -> Parts:
    """Open every part of the crawl in ``layout`` (whose state directory this process holds
    the lock of, ``lock_fd``). ``fetcher``, ``parser``: given ones instead of those of the
    settings (a test's, a benchmark's null fetcher). ``with_feeds``: a spider runs, so items
    go to ``[[output.feeds]]`` (or ``output_dir/items.jsonl``). ``on_reject``, ``on_foreign``:
    the frontier's callbacks (a URL refused; a link to a host another worker owns)."""
    repairs: list[str] = []

    def set_aside_(path: Path, problem: str, consequence: str) -> None:
        repairs.append(set_aside_state(path, problem, consequence))

    frontier = _open_frontier(
        settings, layout, peers, on_reject, on_foreign, wall_clock, set_aside_, repairs
    )
    with contextlib.ExitStack() as undo:  # a later part that fails: the earlier ones closed
        undo.callback(frontier.close, checkpoint=False)
        if fetcher is None:
            fetcher = _open_fetcher(settings, set_aside_)
            undo.callback(fetcher.close)
        parser = parser or LinkParser.from_settings(settings)
        outputs = open_outputs(
            settings,
            warc_dir=layout.warc_dir,
            crawl_log=layout.crawl_log,
            feed_root=layout.root,
            with_feeds=with_feeds,
            load_blob=frontier.load_blob,
            keep_fds=(lock_fd,),
        )
        undo.pop_all()
    stats, elapsed_before, earlier = load_stats(frontier)
    repaired = (*earlier, *repairs, *outputs.warnings)[-MAX_REPAIRS:]
    paths = [layout.root, layout.state_dir, layout.warc_dir]
    if settings.fetch.cache:
        paths.append(Path(settings.fetch.cache_dir))
    space = SpaceMonitor(paths, settings.output.min_free_bytes)
    return Parts(frontier, fetcher, parser, outputs, stats, elapsed_before, repaired, space)


def _open_frontier(
    settings: CrawlSettings,
    layout: Layout,
    peers: PeersLike | None,
    on_reject: Callable[[Ticket, str], None],
    on_foreign: Callable[[int, Link], None],
    wall_clock: Callable[[], float],
    set_aside_: Callable[[Path, str, str], None],
    repairs: list[str],
) -> Frontier:
    """The frontier, after setting aside each part of its state it finds damaged (at most
    one attempt per part: identity, frontier and inbox environments, robots.txt cache)."""
    for _attempt in range(5):
        try:
            return Frontier.from_settings(
                settings,
                layout.state_dir,
                on_reject=on_reject,
                route=peers.route if peers is not None else None,
                worker=peers.worker if peers is not None else 0,
                on_foreign=on_foreign,
                wall_clock=wall_clock,
                variant=request_variant,  # a spider's POST: its own seen-set key
            )
        except DamagedState as damage:
            set_aside_(damage.path, damage.problem, damage.consequence)
    raise StateMismatch(f"{layout.state_dir}: still damaged after setting parts of it "
                        f"aside ({'; '.join(repairs)}); move it away by hand to start "
                        "the crawl afresh")  # fmt: skip


def _open_fetcher(
    settings: CrawlSettings, set_aside_: Callable[[Path, str, str], None]
) -> Fetcher:
    """The fetcher; an HTTP cache it cannot open is set aside and started afresh."""
    f = settings.fetch
    seeds = [canonicalize(seed) or seed for seed in settings.crawl.seeds]
    addresses = AddressPolicy.for_crawl(f.allow_addresses, seeds, f.resolve)

    def build() -> Fetcher:
        return Fetcher.from_settings(
            f, settings.politeness, capture_requests=settings.output.warc, addresses=addresses
        )

    try:
        return build()
    except CacheUnusable as damage:
        set_aside_(
            damage.path,
            damage.problem,
            "A fresh HTTP cache starts now: URLs it held are fetched in full, not "
            "revalidated (it is only a cache).",
        )
    return build()
