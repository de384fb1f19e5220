"""The engine: the only module that knows every subsystem, and the one event loop that drives them.

    next_ready -> submit -> poll -> write -> extract -> add / complete

One thread, no sleeps: the loop waits in ``Fetcher.poll`` for socket activity or curl's timer,
at most until the earliest snoozed host wakes. The crawl ends by itself exactly when the frontier
has nothing queued or in flight (retries wait in the frontier as queued URLs).

Storage. Below ``output.min_free_bytes`` on any filesystem the crawl writes to, the loop submits
nothing new (in-flight transfers finish and are committed) until space is back, or stops as on
SIGTERM (``output.low_space_action``). A write that fails anyway (``OSError``: the crawl log,
the WARC writer, an LMDB commit as the frontier's ``StorageError``, the report) aborts the open
group commit, so no page whose outputs were not written is marked done, and ends the run with
one error message and the report of what was committed (``write_error`` set; exit status 1).
The same command resumes once the cause is gone.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import msgspec

from frontier_crawl import __version__
from frontier_crawl.config import CrawlSettings
from frontier_crawl.config.settings import FeedSection
from frontier_crawl.fetch import CacheUnusable, ErrorKind, Fetcher, FetchRequest, FetchResult
from frontier_crawl.frontier import DamagedState, Failure, Frontier, StateMismatch, Ticket
from frontier_crawl.frontier.mailbox import Link
from frontier_crawl.frontier.politeness import parse_retry_after, retry_delay
from frontier_crawl.frontier.robots import MAX_ROBOTS_BYTES
from frontier_crawl.output import (
    ArchiveRecord,
    CrawlLog,
    CrawlStats,
    LogEntry,
    Outcome,
    ProblemEntry,
    Revisit,
    WarcWriter,
    config_warnings,
    iso_time,
    truncation_reason,
    write_report,
)
from frontier_crawl.output.feeds import Feed, decode_offset, open_feed
from frontier_crawl.output.protocol import Output, blob_name
from frontier_crawl.output.recover import recover_lines, recover_warcs, set_aside
from frontier_crawl.output.space import RESUME_MARGIN, LowSpace, SpaceMonitor, human_bytes
from frontier_crawl.parse import LinkParser, PageLinks, Parser
from frontier_crawl.parse.charset import page_charset
from frontier_crawl.parse.resolve import resolve_location
from frontier_crawl.spider import Page, Problem, SpiderHost, Yielded

log = logging.getLogger(__name__)

ROBOTS_REDIRECTS = 5  # RFC 9309: follow at least five redirect hops for robots.txt
MAX_WAIT_S = 1.0  # upper bound of one wait, so progress, checkpoints and signals stay timely
#: WARC fdatasyncs per group commit interval, at most (power-loss durability): two, so a
#: page's records wait for their sync half an interval on average, not a whole one (measured:
#: with one, kill -9 refetched about twice as many pages as without syncing; with two, about
#: as many), 40 a second at most with the default commit_interval_s, in the writer process
WARC_SYNCS_PER_COMMIT = 2
#: in worker mode, how often the inbox is looked at (a peer's batch does not wake the curl wait)
PEER_WAIT_S = 0.02


STATS_BLOB = "engine.stats"
#: start-up repairs remembered for the report (the oldest are dropped past this many)
MAX_REPAIRS = 100


class _SavedStats(msgspec.Struct):
    """The counters kept in LMDB with the frontier state they describe."""

    stats: CrawlStats
    elapsed_s: float
    #: what start-up repair set aside, in this and earlier runs (the report's warnings)
    repairs: list[str] = msgspec.field(default_factory=list)


_ENCODER = msgspec.msgpack.Encoder()


@dataclass(slots=True, frozen=True)
class _Unsettled:
    """A finished page whose WARC write ``seq`` is not yet reported handed to the OS."""

    seq: int
    key: bytes  #: its frontier entry, marked done once settled
    counted: tuple[str, int, str | None, int]  #: its CrawlStats.record arguments
    #: what its spider callback gave: items (appended to the feeds when the page is marked
    #: done, in that commit) and the outcomes of its problems (counted then)
    items: list[dict[str, Any]] | None = None
    problems: tuple[str, ...] = ()

#: what a yielded request is admitted with besides its URL (engine._run_spider)
_REQUEST_KEY = attrgetter("callback", "meta", "priority")
_URL = attrgetter("url")
#: the exception type at the start of a Problem's message ("KeyError: 'from'")
_EXCEPTION_TYPE = re.compile(r"([A-Za-z_][\w.]*): ")

#: errors that say the host (not this URL) is in trouble: the name does not resolve, the
#: connection (TCP or TLS) cannot be made. A timeout or reset once connected is the URL's.
_CONNECTION_ERRORS = frozenset({ErrorKind.DNS, ErrorKind.CONNECT, ErrorKind.TLS})
#: statuses that speak for the whole host (and whose Retry-After holds it)
_HOST_STATUSES = frozenset({429, 503})


def _failure(r: FetchResult) -> Failure:
    """How a result bears on its host's politeness (backoff, retirement): host-wide signals
    (connection failures, 429, 503) or a failure of this URL only (timeouts, resets, other
    5xx), which backs the host off only when several distinct URLs fail in a row."""
    if r.error is not None:
        if r.error in _CONNECTION_ERRORS:
            return Failure.CONNECTION
        return Failure.URL if r.error.transient else Failure.NONE
    if r.status in _HOST_STATUSES:
        return Failure.SERVER
    return Failure.URL if r.status >= 500 else Failure.NONE


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


def _answer_s(r: FetchResult) -> float:
    """The fetch time the adaptive delay follows: that of a complete response. A transfer that
    failed (timed out, cut, reset) says how long one URL hung, not how fast the host answers:
    counting it would snooze the whole host for delay_factor x the timeout per attempt."""
    return r.duration_s if r.error is None else 0.0


@dataclass(slots=True, frozen=True)
class Layout:
    """Where a crawl keeps its files, all under ``output_dir``."""

    root: Path

    @property
    def warc_dir(self) -> Path:
        return self.root / "warc"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def crawl_log(self) -> Path:
        return self.root / "crawl.jsonl"

    @property
    def report(self) -> Path:
        return self.root / "report.json"


class PeersLike(Protocol):
    """The other worker processes, as one worker sees them (``frontier_crawl.workers.Peers``)."""

    worker: int
    run_id: bytes

    def route(self, origin: str) -> int: ...
    def send(self, dest: int, batch: bytes) -> None: ...
    def publish(self, idle: bool, received: int) -> None: ...
    def should_stop(self) -> bool: ...


class FetcherLike(Protocol):
    """The fetch seam: what the engine needs of a fetcher (``fetch.Fetcher``, or a null one)."""

    @property
    def free_slots(self) -> int: ...
    @property
    def in_flight(self) -> int: ...
    def submit(self, req: FetchRequest) -> None: ...
    def poll(self, timeout_s: float) -> list[FetchResult]: ...
    def close(self) -> None: ...


class Engine:
    """Wires frontier, fetcher, parser and outputs for one crawl process."""

    def __init__(
        self,
        settings: CrawlSettings,
        *,
        fetcher: FetcherLike | None = None,
        peers: PeersLike | None = None,
        parser: Parser | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.settings = settings
        #: the spider (and [[extract]] rules), None without them: today's path, untouched.
        #: Loaded first: a source that does not import is a ConfigError before anything else
        self._spider = SpiderHost.load(settings)
        self.layout = Layout(Path(settings.crawl.output_dir))
        self.layout.root.mkdir(parents=True, exist_ok=True)
        #: start-up repairs of this run: warnings naming what was set aside (``_set_aside``)
        self._repairs: list[str] = []
        # the frontier first: it refuses a state directory this config cannot continue
        self.frontier = self._open_frontier(settings, peers)
        self._peers = peers
        self._outbox: dict[int, list[Link]] = {}
        self._received = 0  #: link batches ingested from other workers (this run)
        self._undelivered = peers is not None  # an earlier run may have left outbox batches
        self._group: ExitStack | None = None  #: the open group-commit transaction
        self._commit_at = 0.0
        self._repairs += self._recover_outputs()
        self.stats, self._elapsed_before, earlier = self._load_stats()
        self._repairs = [*earlier, *self._repairs][-MAX_REPAIRS:]
        self._dirty = False
        #: pages whose WARC records the writer has not yet reported handed to the OS: their
        #: entries are marked done, and their counters counted, once it has (``_settle``)
        self._unsettled: deque[_Unsettled] = deque()
        self._warc_needed = 0  #: WARC writes that must be on disk before the next commit
        #: seconds each URL still being retried has held its host so far (Retry-After, backoff)
        self._held: dict[bytes, float] = {}
        self._durable = settings.output.durability == "power-loss"
        self._log = CrawlLog(self.layout.crawl_log, durable=self._durable)
        self.fetcher: FetcherLike = fetcher or self._open_fetcher(settings)
        self.parser: Parser = parser or LinkParser(settings.fetch.parse_types)
        self._warc = self._open_warc(settings) if settings.output.warc else None
        self._feeds: list[Feed] = self._open_feeds(self._feed_specs())
        #: every output a commit depends on (protocol.py): the WARC writer first, since the
        #: pages it settles append their items to the feeds before those are handed over
        self._outputs: list[Output] = [
            *([self._warc] if self._warc is not None else []), self._log, *self._feeds
        ]
        self._on_progress = on_progress
        self._stop_requested = 0
        self._started = time.monotonic()
        self._space = SpaceMonitor(self._written_paths(), settings.output.min_free_bytes)
        self._low_space: LowSpace | None = None  #: set while fetching is paused for space
        self._paused_at = 0.0
        self._space_pauses = 0
        self._space_paused_s = 0.0
        self._halt = ""  #: why the loop stops without a signal ("low-disk-space")
        self._write_error = ""  #: the failed write that ended the run, if one did

    def _written_paths(self) -> list[Path]:
        """Every directory the crawl writes into (the space monitor counts each fs once)."""
        paths = [self.layout.root, self.layout.state_dir, self.layout.warc_dir]
        if self.settings.fetch.cache:
            paths.append(Path(self.settings.fetch.cache_dir))
        return paths

    # ----------------------------------------------------------------------------- start-up repair

    def _open_frontier(self, settings: CrawlSettings, peers: PeersLike | None) -> Frontier:
        """The frontier, after setting aside each part of its state it finds damaged (at most
        one attempt per part: identity, frontier and inbox environments, robots.txt cache)."""
        for _attempt in range(5):
            try:
                return Frontier.from_settings(
                    settings,
                    self.layout.state_dir,
                    on_reject=self._rejected,
                    route=peers.route if peers is not None else None,
                    worker=peers.worker if peers is not None else 0,
                    on_foreign=self._foreign,
                )
            except DamagedState as damage:
                self._set_aside(damage.path, damage.problem, damage.consequence)
        raise StateMismatch(f"{self.layout.state_dir}: still damaged after setting parts of it "
                            f"aside ({'; '.join(self._repairs)}); move it away by hand to start "
                            "the crawl afresh")  # fmt: skip

    def _open_fetcher(self, settings: CrawlSettings) -> Fetcher:
        """The fetcher; an HTTP cache it cannot open is set aside and started afresh."""

        def build() -> Fetcher:
            return Fetcher.from_settings(
                settings.fetch, settings.politeness, capture_requests=settings.output.warc
            )

        try:
            return build()
        except CacheUnusable as damage:
            self._set_aside(
                damage.path,
                damage.problem,
                "A fresh HTTP cache starts now: URLs it held are fetched in full, not "
                "revalidated (it is only a cache).",
            )
        return build()

    def _set_aside(self, path: Path, problem: str, consequence: str) -> None:
        self._repairs.append(set_aside_state(path, problem, consequence))

    def _recover_outputs(self) -> list[str]:
        """Close WARC files and the crawl log left unfinished by a killed run (never raises:
        what cannot be repaired is set aside, with a warning for the report). The feeds are
        recovered as they are opened (``_open_feeds``: cut back to their committed offsets)."""
        warcs = recover_warcs(self.layout.warc_dir)
        if warcs.recovered:
            log.warning("recovered %d unfinished WARC file(s)", len(warcs.recovered))
        return warcs.warnings + recover_lines(self.layout.crawl_log)

    def _open_warc(self, settings: CrawlSettings) -> WarcWriter:
        return WarcWriter(
            self.layout.warc_dir,
            settings.output.warc_prefix,
            settings.output.warc_max_bytes,
            {
                "software": f"frontier-crawl/{__version__}",
                "format": "WARC File Format 1.1",
                "hostname": socket.gethostname(),
                "http-header-user-agent": settings.politeness.user_agent,
                "robots": "obey" if settings.politeness.obey_robots else "ignore",
            },
            gzip_level=settings.output.warc_gzip_level,
            compressor=settings.output.warc_compressor,
            durable=self._durable,
            sync_interval_s=settings.frontier.commit_interval_s / WARC_SYNCS_PER_COMMIT,
        )

    def _feed_specs(self) -> tuple[FeedSection, ...]:
        """The feeds this crawl writes: none without a spider; with one, [[output.feeds]] or
        else ``output_dir/items.jsonl``."""
        if self._spider is None:
            return ()
        return self.settings.output.feeds or (FeedSection(),)

    def _open_feeds(self, specs: tuple[FeedSection, ...]) -> list[Feed]:
        """Each feed cut back to the offset the last commit recorded for it (feeds.py)."""
        feeds: list[Feed] = []
        for spec in specs:
            name = f"feed:{spec.path}"
            committed = decode_offset(self.frontier.load_blob(blob_name(name)))
            feed, warnings = open_feed(
                self.layout.root / spec.path, name, spec.format, spec.fields, committed,
                durable=self._durable,
            )  # fmt: skip
            self._repairs += warnings
            feeds.append(feed)
        return feeds

    def _load_stats(self) -> tuple[CrawlStats, float, list[str]]:
        """Counters (and start-up repairs) of earlier runs, so the report covers the crawl."""
        blob = self.frontier.load_blob(STATS_BLOB)
        if blob is None:
            return CrawlStats(), 0.0, []
        try:
            saved = msgspec.msgpack.decode(blob, type=_SavedStats)
        except msgspec.DecodeError:
            log.warning("unreadable saved counters: the report covers this run only")
            return CrawlStats(), 0.0, []
        return saved.stats, saved.elapsed_s, saved.repairs

    def _sync_outputs(self, final: bool = False) -> None:
        """Make the group's log lines and WARC records durable before its LMDB commit:
        fdatasynced with ``output.durability = "power-loss"``, handed to the OS with
        ``"process-crash"``.

        Called inside the frontier batch, just before it commits (not once per tick: only the
        commit needs the outputs on disk before it), so a kill (or, power-loss durable, a power
        cut) at any instant leaves either both the outputs and the frontier change (URL done),
        or the outputs without the change (URL fetched again: a duplicate line or record, never
        a lost one). If an output fails, the commit is not made (``_commit``).

        A page's WARC records are written by the writer's child process at its own pace, and
        the commit does not wait for them: the page's entry is marked done (and its counters
        counted, so the saved report stays exact) only in the first commit after the child
        reports them durable. Until then a kill fetches it again. The exceptions wait:
        robots.txt records (their outcome is committed with them) and the ``final`` commit.
        """
        if not self._dirty:
            return
        if self._warc is not None:  # the one output pages wait for (see above)
            self._warc.prepare_commit(None if final else self._warc_needed)
            self._settle(self._warc.durable())
        for output in self._outputs:
            if output is not self._warc:
                output.prepare_commit()
            point = output.commit_point()
            if point is not None:  # in this commit: start-up cuts the output back to it
                self.frontier.save_blob(blob_name(output.name), point)
        elapsed = self._elapsed_before + time.monotonic() - self._started
        saved = _SavedStats(self.stats, elapsed, self._repairs)
        self.frontier.save_blob(STATS_BLOB, _ENCODER.encode(saved))
        if self._outbox:  # in this tick's transaction; delivered after its commit
            for dest, links in self._outbox.items():
                self.frontier.queue_outgoing(dest, links)
            self._outbox.clear()
            self._undelivered = True
        self._dirty = bool(self._unsettled)

    def _settle(self, written: int) -> None:
        """Mark done, and count, the pages whose WARC records are now handed to the OS."""
        unsettled = self._unsettled
        done: list[bytes] = []
        while unsettled and unsettled[0].seq <= written:
            page = unsettled.popleft()
            done.append(page.key)
            self._count(page.counted, page.items, page.problems)
        if done:
            self.frontier.mark_done(done)

    def _count(
        self,
        counted: tuple[str, int, str | None, int],
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

    # ----------------------------------------------------------------------------- the loop

    def run(self) -> dict[str, Any]:
        """Crawl until nothing is left (or a stop signal), then write and return the report.

        A failed write (``OSError``) ends the run early: see the module docstring. Any other
        exception aborts the open group commit and propagates."""
        s = self.settings
        previous = self._install_signals()
        try:
            if self._spider is not None:
                self._spider.open()  # spider.open, pipelines' open(spider): ConfigError if not
            # in the first group: a seed's crawl-log line (a rejected one) is synced with it
            self._open_group(time.monotonic())
            self.frontier.add(s.crawl.seeds, depth=0, now=time.monotonic())
            self._loop()
        except OSError as exc:
            self._failed(exc)
        except BaseException:
            self._abandon()
            raise
        finally:
            self._restore_signals(previous)
        return self._finish()

    def _loop(self) -> None:
        try:
            self._run_loop()
        except BaseException as exc:
            self._abort_group(exc)
            raise
        if self._unsettled and self._group is None:
            self._open_group(time.monotonic())
        self._commit(final=True)

    def _abort_group(self, exc: BaseException) -> None:
        """Abort the open group commit because of ``exc``: LMDB keeps the last commit. Raises
        what the frontier made of ``exc`` if it translated it (an LMDB error)."""
        group, self._group = self._group, None
        if group is not None:
            group.__exit__(type(exc), exc, exc.__traceback__)

    def _failed(self, exc: OSError) -> None:
        """A write failed: say so once (the first failure is the cause; later ones follow)."""
        log.debug("write failure", exc_info=exc)
        if self._write_error:
            return
        self._write_error = str(exc)
        log.error(
            "stopping: a write failed (%s). Every page marked done so far is safe and the "
            "crawl state is consistent: fix the cause (free space, the disk, the mount) and "
            "run the same command to resume.",
            exc,
        )

    def _abandon(self) -> None:
        """Release everything without committing (the in-memory state may be ahead of LMDB)."""
        with _quiet():
            self.fetcher.close()
        if self._spider is not None:
            self._spider.close()
        for output in self._outputs:
            with _quiet():
                output.discard()
        with _quiet():
            self.frontier.close(checkpoint=False)

    def _open_group(self, now: float) -> None:
        """Open the frontier transaction that the next ticks share (group commit)."""
        if self._group is None:
            self._group = ExitStack()
            self._group.enter_context(self.frontier.batch())
            self._commit_at = now + self.settings.frontier.commit_interval_s

    def _commit(self, final: bool = False) -> None:
        """Commit the open group: outputs first (flushed, so a kill after the commit finds
        them; fdatasynced with power-loss durability), then one LMDB commit, then outbox
        deliveries (never inside a transaction). If the outputs fail, the group is aborted."""
        if self._group is not None:
            try:
                self._sync_outputs(final)
            except BaseException as exc:
                self._abort_group(exc)
                raise
            group, self._group = self._group, None
            group.close()
        if self._undelivered and self._peers is not None:
            self._deliver()

    def _run_loop(self) -> None:
        frontier, fetcher = self.frontier, self.fetcher
        ckpt_every = self.settings.frontier.checkpoint_interval_s
        progress_every = self.settings.output.progress_interval_s
        next_ckpt = time.monotonic() + ckpt_every
        next_progress = time.monotonic() + progress_every if progress_every else float("inf")
        drain_deadline = float("inf")
        while True:
            now = time.monotonic()
            paused = self._short_of_space(now)
            if self._stop_requested or self._halt:
                if drain_deadline == float("inf"):
                    drain_deadline = now + self.settings.crawl.stop_timeout_s
                    log.warning("stop requested: draining %d transfers", fetcher.in_flight)
                if fetcher.in_flight == 0 or now >= drain_deadline:
                    return
            submitted = 0
            if not (self._stop_requested or self._halt) and fetcher.free_slots and not paused:
                if self._group is not None and now >= self._commit_at:
                    # before this tick's requests, not between their take and their send (in
                    # poll): a commit's fdatasync there would delay one request to a host and
                    # shorten the gap to the next, which the frontier spaced from the take
                    self._commit()
                    now = time.monotonic()
                self._open_group(now)
                for ticket in frontier.next_ready(now, fetcher.free_slots):
                    fetcher.submit(self._request(ticket))
                    submitted += 1
            idle = frontier.pending == 0 and fetcher.in_flight == 0
            if self._peers is not None:
                if self._exchange(now, idle):
                    return
            elif idle:
                return
            wait = self._wait_s(now)
            if (
                self._group is not None
                and not submitted  # then at the next tick's start (see above)
                and (
                    now >= self._commit_at
                    or wait >= self.settings.frontier.commit_interval_s
                    or (idle and (self._undelivered or self._outbox))
                )
            ):
                self._commit()  # one fdatasync per group, not per tick
            results = fetcher.poll(wait)
            if results:
                self._open_group(now)
                for result in results:
                    self._handle(result)
            now = time.monotonic()
            if now >= next_ckpt:
                self._commit()
                self._checkpoint()
                next_ckpt = now + ckpt_every
            if now >= next_progress:
                self._progress()
                next_progress = now + progress_every

    def _short_of_space(self, now: float) -> bool:
        """Whether fetching is paused for lack of disk space (``output.min_free_bytes``); says
        so once when it pauses (or stops) and once when it resumes."""
        low = self._space.check(now)
        if low is None:
            if self._low_space is not None:
                self._space_paused_s += now - self._paused_at
                log.info(
                    "free space is back on %s: fetching resumed after %.0f s paused",
                    self._low_space.path,
                    now - self._paused_at,
                )
                self._low_space = None
            return False
        if self._low_space is None and not self._halt:
            stop = self.settings.output.low_space_action == "stop"
            log.warning(
                "%s left on %s, below output.min_free_bytes (%s): %s",
                human_bytes(low.free_bytes),
                low.path,
                human_bytes(self._space.min_free_bytes),
                "stopping (in-flight transfers finish; the same command resumes)"
                if stop
                else "fetching paused (in-flight transfers finish) until "
                f"{human_bytes(int(self._space.min_free_bytes * (1 + RESUME_MARGIN)))} are free",
            )
            if stop:
                self._halt = "low-disk-space"
                return True
            self._low_space, self._paused_at = low, now
            self._space_pauses += 1
        return True

    def _deliver(self) -> None:
        """Move committed outbox batches into their owners' inboxes (no transaction of ours
        is open here, so two workers delivering to each other cannot deadlock)."""
        assert self._peers is not None
        while True:
            pending = self.frontier.outgoing()
            for _key, dest, batch in pending:
                self._peers.send(dest, batch)
            self.frontier.delivered([key for key, _, _ in pending])  # one commit for them all
            if len(pending) < 256:
                break
        self._undelivered = False

    def _exchange(self, now: float, idle: bool) -> bool:
        """Worker mode: deliver and ingest link batches, publish status; True to stop."""
        assert self._peers is not None
        with self.frontier.batch():
            ingested, counted = self.frontier.ingest_inbox(now, self._peers.run_id)
            if ingested:
                self._dirty = True
                self._sync_outputs()
        self._received += counted
        # idle only with no link of ours left to hand over: none in the in-memory outbox
        # (waiting for the group commit) and none committed but not yet delivered
        idle = idle and ingested == 0 and not self._outbox and not self._undelivered
        self._peers.publish(idle, self._received)
        return self._peers.should_stop()

    def _foreign(self, dest: int, link: Link) -> None:
        """A link to a host another worker owns: batched, sent before this tick commits."""
        self._outbox.setdefault(dest, []).append(link)
        self._dirty = True

    def _wait_s(self, now: float) -> float:
        """How long poll may block: until the next host wakes, or work is ready now."""
        if self._stop_requested or self._halt:
            return 0.1
        longest = MAX_WAIT_S if self._peers is None else PEER_WAIT_S
        if self._low_space is not None:  # paused: only in-flight transfers to wait for
            return longest
        if self.fetcher.free_slots and self.frontier.has_ready:
            return 0.0
        wake = self.frontier.next_wake()
        if wake is None:
            if self.fetcher.in_flight == 0 and self.frontier.pending:
                raise RuntimeError(f"frontier stalled: {self.frontier.stats()}")
            return longest
        return min(longest, max(0.0, wake - now))

    def _request(self, ticket: Ticket) -> FetchRequest:
        if ticket.robots:  # RFC 9309: five hops followed; the first 500 KiB parsed, whatever
            return FetchRequest(  # the page cap (the rest is not read)
                ticket.url, token=ticket, follow_redirects=ROBOTS_REDIRECTS,
                keep_bytes=MAX_ROBOTS_BYTES,
            )  # fmt: skip
        return FetchRequest(ticket.url, token=ticket)

    # ----------------------------------------------------------------------------- results

    def _handle(self, r: FetchResult) -> None:
        ticket = r.request.token
        assert isinstance(ticket, Ticket)
        f = self.settings.fetch
        after = (
            parse_retry_after(r.header("retry-after"), time.time())
            if r.status in _HOST_STATUSES
            else None
        )
        hold = min(after, f.max_retry_delay_s) if after is not None else 0.0
        if ticket.robots:
            # a chain of more than ROBOTS_REDIRECTS hops ends at a 3xx: "unavailable" (RFC
            # 9309 2.3.1.2); any other failure is "unreachable"
            answered = r.error is None or r.error is ErrorKind.REDIRECTS
            self.frontier.robots_done(ticket, r.finished, r.status if answered else 0, r.body,
                                      r.duration_s, r.ip, hold_s=hold)  # fmt: skip
            self._warc_needed = self._archive(r) or self._warc_needed
            self._record(ticket, r, Outcome.ROBOTS_TXT)
            return
        if self._should_retry(ticket, r, after):
            return
        archived = self._archive(r)  # a failure whose response had begun: as truncated
        outcome, yielded = self._dispose(ticket, r)
        held = self.frontier.complete(
            ticket, r.finished, _answer_s(r), _failure(r), r.ip, mark_done=not archived,
            hold_s=hold,
        )  # fmt: skip
        self._record(ticket, r, outcome, archived, self._held.pop(ticket.key, 0.0) + held,
                     yielded)  # fmt: skip

    def _should_retry(self, ticket: Ticket, r: FetchResult, after: float | None) -> bool:
        """Send a transient failure back to the frontier, if it has retries left.

        ``after``: the response's Retry-After (429/503). One longer than fetch.max_retry_delay_s
        is not waited out cap after cap: the URL is given up (its host is held for the cap).
        """
        f = self.settings.fetch
        transient = r.error.transient if r.error is not None else r.status == 429 or r.status >= 500
        if not transient or ticket.attempt >= f.retries:
            return False
        if after is not None and after > f.max_retry_delay_s:
            return False
        delay = retry_delay(ticket.attempt, f.retry_backoff_s, f.max_retry_delay_s, after)
        held = self.frontier.retry(
            ticket, r.finished, delay, _answer_s(r), _failure(r), r.ip, hold_s=after or 0.0
        )
        if held > 0:
            self._held[ticket.key] = self._held.get(ticket.key, 0.0) + held
        return True

    def _dispose(self, ticket: Ticket, r: FetchResult) -> tuple[Outcome, Yielded | None]:
        """Feed a final result's links (or what its spider callback yields) or redirect target
        back; return its outcome, and what the callback gave if the page went to one."""
        if r.error is not None:
            return Outcome.FAILED, None
        if 300 <= r.status < 400 and r.header("location") and r.not_modified is None:
            return self._redirect(ticket, r), None  # never to a callback: the target is
        spider = self._spider
        if 200 <= r.status < 300 or r.not_modified is not None:
            ctype = r.header("content-type") or ""
            links = self.parser.parse(r.url, ctype, r.body)
            outcome = Outcome.FETCHED if r.not_modified is None else Outcome.NOT_MODIFIED
            if spider is not None:  # with a spider, only what its callbacks yield is followed
                status = r.status if r.not_modified is None else 200
                return outcome, self._run_spider(spider, ticket, r, links, status, ctype)
            if links.links:
                self.frontier.add(
                    links.links, depth=ticket.depth + 1, referrer=ticket.url, now=r.finished
                )
            return outcome, None
        outcome = Outcome.HTTP_ERROR if r.status >= 400 else Outcome.REDIRECT
        if spider is not None and spider.wants(r.status, ticket.callback):  # handle_status
            ctype = r.header("content-type") or ""
            links = self.parser.parse(r.url, ctype, r.body)
            return outcome, self._run_spider(spider, ticket, r, links, r.status, ctype)
        return outcome, None

    def _run_spider(
        self, spider: SpiderHost, ticket: Ticket, r: FetchResult, parsed: PageLinks,
        status: int, ctype: str,
    ) -> Yielded:  # fmt: skip
        """Give the page to its request's callback; admit the requests it yields (through the
        frontier like any link: canonical, in scope, unseen, robots, politeness, traps, each
        with its callback, meta and priority), record its problems; return what it gave."""
        page = Page(  # positional (cheaper than keywords, once per page): the fields in order
            r.url,
            status,
            r.headers,
            r.body,
            ctype.partition(";")[0].strip().lower(),  # content_type
            # charset: the parser's choice if it parsed the page (None: lexbor's detection)
            parsed.charset if parsed.tree is not None else page_charset(r.body, ctype),
            self.frontier.in_scope_links(parsed.links) if parsed.links else [],
            ticket.depth,
            ticket.callback,
            ticket.meta,
            parsed.tree,  # the parser's document: Response.css does not parse again
        )
        yielded = spider.run(page)
        self.stats.spider_time(yielded.callback_s, yielded.pipeline_s)
        # one add per run of requests that share callback, meta and priority (groupby and
        # attrgetter run in C: most pages yield one run)
        add, depth, requests = self.frontier.add, ticket.depth + 1, yielded.requests
        if not requests:
            pass
        elif len(set(map(_REQUEST_KEY, requests))) == 1:  # the usual page: one kind of request
            first = requests[0]
            add(list(map(_URL, requests)), depth=depth, referrer=ticket.url, now=r.finished,
                callback=first.callback, meta=first.meta, priority=first.priority)  # fmt: skip
        else:
            for (callback, meta, priority), run in groupby(requests, _REQUEST_KEY):
                add(list(map(_URL, run)), depth=depth, referrer=ticket.url, now=r.finished,
                    callback=callback, meta=meta, priority=priority)  # fmt: skip
        for problem in yielded.problems:
            self._problem(ticket, r, problem)
        return yielded

    def _problem(self, ticket: Ticket, r: FetchResult, problem: Problem) -> None:
        """A spider's problem with a page: a crawl-log line of its own (the page's line says
        how the page was fetched); its traceback in the log, once per code location."""
        if problem.traceback is not None:
            log.error("%s in %s (page %s): %s\n%s", problem.outcome, problem.where, r.url,
                      problem.message, problem.traceback.rstrip())  # fmt: skip
        kind = _EXCEPTION_TYPE.match(problem.message)
        self._log.write(
            ProblemEntry(
                time=iso_time(time.time()),
                url=r.url,
                status=r.status,
                outcome=problem.outcome,
                error=kind.group(1) if kind is not None else None,
                bytes=0,
                duration_s=0.0,
                depth=ticket.depth,
                referrer=ticket.referrer,
                content_type=r.content_type,
                message=problem.message,
                where=problem.where,
            )
        )

    def _redirect(self, ticket: Ticket, r: FetchResult) -> Outcome:
        if ticket.hops >= self.settings.fetch.max_redirects:
            return Outcome.TOO_MANY_REDIRECTS
        target = resolve_location(r.url, r.header("location") or "")
        if target is None:
            return Outcome.REDIRECT
        self.frontier.add(  # a spider request's callback and meta go with it (to the target)
            [target], depth=ticket.depth, referrer=ticket.url, hops=ticket.hops + 1,
            now=r.finished, callback=ticket.callback, meta=ticket.meta, priority=ticket.priority,
        )  # fmt: skip
        return Outcome.REDIRECT

    def _archive(self, r: FetchResult) -> int:
        """Write ``r``'s WARC records, if it has any: the write's sequence number, else 0."""
        if self._warc is None or r.status == 0:
            return 0
        seen = r.not_modified
        return self._warc.write(
            ArchiveRecord(
                url=r.url,
                ip=r.ip,
                fetched_at=r.started_at,
                request_bytes=r.request_bytes,
                header_bytes=r.header_bytes,
                payload=r.raw_body,
                truncated=(
                    truncation_reason(r.error.value) if r.error is not None
                    else "length" if r.cut else None
                ),
                revisit_of=Revisit(seen.url, seen.fetched_at) if seen is not None else None,
            )
        )

    def _record(
        self,
        ticket: Ticket,
        r: FetchResult,
        outcome: Outcome,
        archived: int = 0,
        held_s: float = 0.0,
        yielded: Yielded | None = None,
    ) -> None:
        """The page's crawl-log line, and its counters (once its WARC write ``archived``, if
        any, is settled: see ``_sync_outputs``). ``held_s``: how long its responses held its
        host beyond the politeness delay (Retry-After, backoff), over all its attempts."""
        self._dirty = True
        if held_s > 0:
            self.stats.record_hold(ticket.url, held_s)
        error = r.error.value if r.error is not None else None
        nbytes = len(r.body) if r.not_modified is None else 0  # a 304 brought no payload
        counted = (outcome.value, r.status, error, nbytes)
        items = yielded.items if yielded is not None else None
        problems = (
            tuple(p.outcome for p in yielded.problems)
            if yielded is not None and yielded.problems
            else ()
        )
        if archived:
            self._unsettled.append(_Unsettled(archived, ticket.key, counted, items, problems))
        else:
            self._count(counted, items, problems)
        self._log.write(
            LogEntry(
                time=iso_time(time.time()),
                url=ticket.url,
                status=r.status,
                outcome=outcome.value,
                error=error,
                bytes=nbytes,
                duration_s=round(r.duration_s, 6),
                depth=ticket.depth,
                referrer=ticket.referrer,
                content_type=r.content_type,
                held_s=round(held_s, 3),
            )
        )

    def _rejected(self, ticket: Ticket, reason: str) -> None:
        """A URL the frontier refused or gave up on: it still gets its crawl-log line."""
        self._dirty = True
        self.stats.record(reason, 0, None, 0)
        self._log.write(
            LogEntry(
                time=iso_time(time.time()),
                url=ticket.url,
                status=0,
                outcome=reason,
                error=None,
                bytes=0,
                duration_s=0.0,
                depth=ticket.depth,
                referrer=ticket.referrer,
                content_type="",
            )
        )

    # ----------------------------------------------------------------------------- lifecycle

    def _checkpoint(self) -> None:
        self._log.flush()
        self.frontier.checkpoint()

    def _progress(self) -> None:
        if self._on_progress is not None:
            self._on_progress(self.progress())

    def progress(self) -> dict[str, Any]:
        """A snapshot for progress displays."""
        elapsed = time.monotonic() - self._started
        pages = self.stats.pages
        return {
            "elapsed_s": elapsed,
            "pages": pages,
            "pages_per_s": pages / elapsed if elapsed > 0 else 0.0,
            "in_flight": self.fetcher.in_flight,
            "paused_for_space": self._low_space is not None,
            **self.frontier.stats(),
            **self._spider_progress(elapsed),
        }

    def _spider_progress(self, elapsed: float) -> dict[str, Any]:
        """With a spider: items so far, and time per page in callbacks and pipelines (median
        and p99 in ms over the whole crawl) and their share of the crawl's time."""
        if self._spider is None:
            return {}
        cb, pl = self.stats.callback_time, self.stats.pipeline_time
        total = self._elapsed_before + elapsed
        return {
            "items": self.stats.items,
            "callback_ms": (cb.quantile(0.5) * 1e3, cb.quantile(0.99) * 1e3),
            "pipeline_ms": (pl.quantile(0.5) * 1e3, pl.quantile(0.99) * 1e3),
            "spider_share": (cb.total_s + pl.total_s) / total if total > 0 else 0.0,
        }

    def _finish(self) -> dict[str, Any]:
        """Final commit, close the outputs, write the report. After a failed write, nothing
        more is committed (the in-memory state may be ahead of LMDB): the report shows the
        committed counters, and the outputs and frontier are released as they are."""
        now = time.monotonic()
        elapsed = self._elapsed_before + now - self._started
        if self._low_space is not None:
            self._space_paused_s += now - self._paused_at
        self.fetcher.close()  # abandoned transfers stay queued in LMDB: fetched on resume
        if self._spider is not None:
            self._spider.close()  # pipelines' close(spider); never raises
        if not self._write_error:
            try:
                self._dirty = True
                with self.frontier.batch():
                    self._sync_outputs()
            except OSError as exc:
                self._failed(exc)
        failed = bool(self._write_error)
        for output in self._outputs:
            try:
                if failed:  # what they buffer belongs to pages not committed: fetched again
                    output.discard()
                else:  # after the final commit: nothing of a committed page is left to hand
                    output.close()  # over (the WARC's records are in its .open file)
            except OSError as exc:
                self._failed(exc)
        if failed:
            self.stats, elapsed, _repairs = self._load_stats()  # what LMDB holds: exact on resume
        report = self.stats.report(elapsed, self.frontier.seen_stats())
        report["frontier"] = self.frontier.stats()
        report["complete"] = self.frontier.pending == 0 and not self._halt and not failed
        report["stopped_by_signal"] = bool(self._stop_requested)
        report["stopped_for_low_space"] = self._halt == "low-disk-space"
        report["disk_space_pauses"] = self._space_pauses
        report["disk_space_paused_s"] = round(self._space_paused_s, 3)
        report["warnings"] = config_warnings(self.settings) + self._repairs
        report["output_dir"] = str(self.layout.root)
        report["warc_files"] = [str(p) for p in self._warc.paths] if self._warc else []
        try:
            self.frontier.close(checkpoint=not failed)
        except OSError as exc:
            self._failed(exc)
        report["write_error"] = self._write_error or None
        try:
            write_report(self.layout.report, report)
        except OSError as exc:
            self._failed(OSError(exc.errno, f"writing {self.layout.report}: {exc}"))
            report["write_error"] = self._write_error
        return report

    def _install_signals(self) -> dict[int, Any]:
        previous: dict[int, Any] = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not the main thread
                break
        return previous

    @staticmethod
    def _restore_signals(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """First signal: stop gracefully. Second: exit at once (as safe as a kill -9)."""
        del frame
        self._stop_requested += 1
        if self._stop_requested > 1:
            os.write(2, b"frontier-crawl: second signal, exiting at once\n")
            os._exit(128 + signum)
        log.warning(
            "received %s: finishing in-flight transfers (up to %.0f s), then stopping",
            signal.Signals(signum).name,
            self.settings.crawl.stop_timeout_s,
        )


@contextmanager
def _quiet() -> Iterator[None]:
    """Suppress (and debug-log) an exception while releasing resources after a failure."""
    try:
        yield
    except Exception:
        log.debug("while releasing resources after a failure", exc_info=True)
