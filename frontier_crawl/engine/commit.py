"""The group commit over the output protocol (``output/protocol.py``): WARC files, the crawl
log and the feeds alike.

The loop's ticks share one frontier transaction (``open``), committed at most once per
``frontier.commit_interval_s`` (``commit``): every output first prepares its appends (handed
to the OS, or fdatasynced with ``output.durability = "power-loss"``) and records its commit
point, then the counters are saved, then one LMDB commit. So a kill (or, power-loss durable, a
power cut) at any instant leaves either both the outputs and the frontier change (URL done), or
the outputs without the change (URL fetched again: a duplicate line or record, never a lost
one). If an output fails, the transaction is aborted (LMDB keeps the last commit).

A page whose records went to the archive (the WARC writer, written by a child process at its
own pace) waits there: the commit does not wait for it. Its entry is marked done, its counters
counted and its items appended to the feeds only in the first commit after the archive
reports its records durable (``settle``); until then a kill fetches it again. The outputs are
prepared in commit order, the archive first, so the items of the pages it settles reach the
feeds before those are prepared. The exceptions wait: a commit that needs a record (a
robots.txt fetch, whose outcome is committed with it: ``needed``) and the ``final`` commit.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import msgspec

from frontier_crawl.control.status import LoopTimes
from frontier_crawl.engine.build import STATS_BLOB, SavedStats
from frontier_crawl.figures import Figures
from frontier_crawl.frontier.faces import Durability
from frontier_crawl.output import CrawlStats
from frontier_crawl.output.feeds import Feed
from frontier_crawl.output.protocol import Output, blob_name

_ENCODER = msgspec.msgpack.Encoder()

#: a page's CrawlStats.record arguments: outcome, status, error, bytes, a revisit
Counted = tuple[str, int, str | None, int, bool]


@dataclass(slots=True, frozen=True)
class Unsettled:
    """A finished page whose archive write ``seq`` is not yet reported durable."""

    seq: int
    key: bytes  #: its frontier entry, marked done once settled
    counted: Counted
    #: what its spider callback gave: items (appended to the feeds when the page is marked
    #: done, in that commit) and the outcomes of its problems (counted then)
    items: list[dict[str, Any]] | None = None
    problems: tuple[str, ...] = ()


class CommitGroup:
    """The open group commit, the outputs it commits, and the counters saved with it."""

    def __init__(
        self,
        frontier: Durability,
        outputs: Sequence[Output],
        *,
        archive: Output | None,
        feeds: Sequence[Feed],
        stats: CrawlStats,
        elapsed_before: float,
        repairs: list[str],
        interval_s: float,
        times: LoopTimes,
        waited: Callable[[], float],
        started: float,
    ) -> None:
        """``outputs``: in commit order, ``archive`` (the output pages wait for) first, and
        the ``feeds`` (which get the items of the pages marked done) after it. ``stats``,
        ``elapsed_before``, ``repairs``: the counters so far (``open_parts``). ``times``: the
        loop's seconds by phase (the commit's own are added to it); they and ``waited`` (the
        fetcher's seconds spent waiting) are folded into the saved counters. ``started``:
        when this run began (``time.monotonic``)."""
        self.frontier = frontier
        self._outputs = tuple(outputs)
        self._archive = archive
        self._feeds = tuple(feeds)
        self.stats = stats
        self.elapsed_before = elapsed_before
        self.repairs = repairs
        self.interval_s = interval_s
        self._times = times
        self._waited = waited
        self.started = started
        #: the counters when this run began (its own figures: ``figures``)
        self.run_base = (stats.pages, stats.revisits)
        self._folded: dict[str, float] = {}  #: the loop times last added to the stats
        self._txn: ExitStack | None = None  #: the open frontier transaction
        self.commit_at = 0.0  #: when the open group is due
        #: something in the open group needs committing (pages, log lines, links)
        self.dirty = False
        #: pages whose archive records are not yet reported durable (``settle``)
        self.unsettled: deque[Unsettled] = deque()
        self.needed = 0  #: archive writes that must be durable before the next commit
        #: called in the transaction just before it commits, and after each commit
        self.before_commit: list[Callable[[], None]] = []
        self.after_commit: list[Callable[[], None]] = []

    @property
    def is_open(self) -> bool:
        return self._txn is not None

    def open(self, now: float) -> None:
        """Open the frontier transaction that the next ticks share (if none is open)."""
        if self._txn is None:
            self._txn = ExitStack()
            self._txn.enter_context(self.frontier.batch())
            self.commit_at = now + self.interval_s

    def commit(self, final: bool = False) -> None:
        """Commit the open group: outputs first, then one LMDB commit, then the after-commit
        work (outbox deliveries: never inside a transaction). If the outputs fail, the group
        is aborted and the error raised."""
        if self._txn is not None:
            t0 = time.perf_counter()
            try:
                self.sync(final)
            except BaseException as exc:
                self.abort(exc)
                raise
            txn, self._txn = self._txn, None
            txn.close()
            spent = time.perf_counter() - t0
            times = self._times
            times.commit += spent
            times.frontier += spent
            times.commits += 1
        for after in self.after_commit:
            after()

    def abort(self, exc: BaseException) -> None:
        """Abort the open group because of ``exc``: LMDB keeps the last commit. Raises what
        the frontier made of ``exc`` if it translated it (an LMDB error)."""
        txn, self._txn = self._txn, None
        if txn is not None:
            txn.__exit__(type(exc), exc, exc.__traceback__)

    def finish(self) -> None:
        """The final commit of a run: every page settled (the archive waited for), even when
        no group is open."""
        if self.unsettled and self._txn is None:
            self.open(time.monotonic())
        self.commit(final=True)

    def sync(self, final: bool = False) -> None:
        """Prepare every output for the commit of the enclosing frontier batch and save the
        counters in it (module docstring). ``final``: every archive write waited for."""
        if not self.dirty:
            return
        upto = None if final else self.needed
        archive = self._archive
        for output in self._outputs:
            output.prepare_commit(upto)
            if output is archive:  # before the feeds: settled pages append their items
                self._settle(output.durable())
            point = output.commit_point()
            if point is not None:  # in this commit: start-up cuts the output back to it
                self.frontier.save_blob(blob_name(output.name), point)
        self.fold_loop_times()
        self.stats.ran_until(time.time())  # the run's span in the pages-over-time series
        elapsed = self.elapsed_before + time.monotonic() - self.started
        saved = SavedStats(self.stats, elapsed, self.repairs)
        self.frontier.save_blob(STATS_BLOB, _ENCODER.encode(saved))
        for before in self.before_commit:
            before()
        self.dirty = bool(self.unsettled)

    def fold_loop_times(self) -> None:
        """Add the loop's seconds by phase since the last fold to the saved counters (the
        report's "where time went", over every run of the crawl)."""
        t = self._times
        now = {"run": time.monotonic() - self.started, "waiting": self._waited(),
               "parse": t.parse, "callbacks": t.callbacks, "warc": t.warc,
               "frontier": t.frontier, "fetch": t.fetch}  # fmt: skip
        folded = self._folded
        self.stats.add_loop_time({k: v - folded.get(k, 0.0) for k, v in now.items()})
        self._folded = now

    def figures(self, now: float) -> Figures:
        """The crawl's headline figures at ``now`` (monotonic; ``figures.py``): every run's,
        and this run's apart."""
        stats, (pages0, revisits0) = self.stats, self.run_base
        run_s = now - self.started
        return Figures(stats.pages, stats.revisits, self.elapsed_before + run_s,
                       stats.pages - pages0, stats.revisits - revisits0, run_s)  # fmt: skip

    def page(
        self,
        key: bytes,
        archived: int,
        counted: Counted,
        items: list[dict[str, Any]] | None,
        problems: tuple[str, ...],
    ) -> None:
        """A final page: counted now, or, if its records went to the archive as write
        ``archived``, once they are durable there (the frontier marks it done then)."""
        if archived:
            self.unsettled.append(Unsettled(archived, key, counted, items, problems))
        else:
            self.count(counted, items, problems)

    def _settle(self, written: int) -> None:
        """Mark done, and count, the pages whose archive records are now durable."""
        unsettled = self.unsettled
        done: list[bytes] = []
        while unsettled and unsettled[0].seq <= written:
            page = unsettled.popleft()
            done.append(page.key)
            self.count(page.counted, page.items, page.problems)
        if done:
            self.frontier.mark_done(done)

    def count(
        self,
        counted: Counted,
        items: list[dict[str, Any]] | None,
        problems: tuple[str, ...],
    ) -> None:
        """A page marked done (in the open group): its counters, its items to the feeds (so
        the commit that marks it done holds its items' offsets: exactly once, feeds.py)."""
        stats = self.stats
        stats.record(*counted)
        if items:
            for feed in self._feeds:
                feed.append(items)
            stats.items += len(items)
        for outcome in problems:
            stats.record(outcome, 0, None, 0)
        stats.spider_problems += len(problems)
        if problems and "callback-error" in problems:
            stats.failed_callback_pages += 1
