"""The engine: the only module that knows every subsystem, and the one event loop that drives them.

    next_ready -> submit -> poll -> write -> extract -> add / complete

One thread, no sleeps: the loop waits in ``Fetcher.poll`` for socket activity or curl's timer,
at most until the earliest snoozed host wakes. The crawl ends by itself exactly when the frontier
has nothing queued or in flight (retries wait in the frontier as queued URLs).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from collections import deque
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

import msgspec

from frontier_crawl import __version__
from frontier_crawl.config import CrawlSettings
from frontier_crawl.fetch import CacheUnusable, ErrorKind, Fetcher, FetchRequest, FetchResult
from frontier_crawl.frontier import DamagedState, Failure, Frontier, StateMismatch, Ticket
from frontier_crawl.frontier.mailbox import Link
from frontier_crawl.frontier.politeness import parse_retry_after, retry_delay
from frontier_crawl.output import (
    ArchiveRecord,
    CrawlLog,
    CrawlStats,
    LogEntry,
    Outcome,
    Revisit,
    WarcWriter,
    config_warnings,
    iso_time,
    truncation_reason,
    write_report,
)
from frontier_crawl.output.recover import recover_lines, recover_warcs, set_aside
from frontier_crawl.parse import LinkParser, Parser
from frontier_crawl.parse.resolve import resolve_location

log = logging.getLogger(__name__)

ROBOTS_REDIRECTS = 5  # RFC 9309: follow at least five redirect hops for robots.txt
MAX_WAIT_S = 1.0  # upper bound of one wait, so progress, checkpoints and signals stay timely
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
        self._recover_outputs()
        self.stats, self._elapsed_before, earlier = self._load_stats()
        self._repairs = [*earlier, *self._repairs][-MAX_REPAIRS:]
        self._dirty = False
        #: pages whose WARC records the writer has not yet reported handed to the OS: their
        #: entries are marked done, and their counters counted, once it has (``_settle``)
        self._unsettled: deque[_Unsettled] = deque()
        self._warc_needed = 0  #: WARC writes that must be on disk before the next commit
        #: seconds each URL still being retried has held its host so far (Retry-After, backoff)
        self._held: dict[bytes, float] = {}
        self._log = CrawlLog(self.layout.crawl_log)
        self.fetcher: FetcherLike = fetcher or self._open_fetcher(settings)
        self.parser: Parser = parser or LinkParser(settings.fetch.parse_types)
        self._warc = (
            WarcWriter(
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
            )
            if settings.output.warc
            else None
        )
        self._on_progress = on_progress
        self._stop_requested = 0
        self._started = time.monotonic()

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

    def _recover_outputs(self) -> None:
        """Close WARC files and the crawl log left unfinished by a killed run (never raises:
        what cannot be repaired is set aside, with a warning for the report)."""
        warcs = recover_warcs(self.layout.warc_dir)
        self._repairs += warcs.warnings
        self._repairs += recover_lines(self.layout.crawl_log)
        if warcs.recovered:
            log.warning("recovered %d unfinished WARC file(s)", len(warcs.recovered))

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
        """Make the group's log lines and WARC records visible before its LMDB commit.

        Called inside the frontier batch, just before it commits (not once per tick: only the
        commit needs the outputs on disk before it), so a kill at any instant leaves either
        both the outputs and the frontier change (URL done), or the outputs without the change
        (URL fetched again: a duplicate line or record, never a lost one).

        A page's WARC records are written by the writer's child process at its own pace, and
        the commit does not wait for them: the page's entry is marked done (and its counters
        counted, so the saved report stays exact) only in the first commit after the child
        reports them handed to the OS. Until then a kill fetches it again. The exceptions wait:
        robots.txt records (their outcome is committed with them) and the ``final`` commit.
        """
        if not self._dirty:
            return
        self._log.flush()
        if self._warc is not None:
            if final or self._warc.written() < self._warc_needed:
                self._warc.flush()
            self._settle(self._warc.written())
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
            self.stats.record(*page.counted)
        if done:
            self.frontier.mark_done(done)

    # ----------------------------------------------------------------------------- the loop

    def run(self) -> dict[str, Any]:
        """Crawl until nothing is left (or a stop signal), then write and return the report."""
        s = self.settings
        self.frontier.add(s.crawl.seeds, depth=0, now=time.monotonic())
        previous = self._install_signals()
        try:
            self._loop()
        finally:
            self._restore_signals(previous)
            report = self._finish()
        return report

    def _loop(self) -> None:
        try:
            self._run_loop()
        finally:
            if self._unsettled and self._group is None:
                self._open_group(time.monotonic())
            self._commit(final=True)

    def _open_group(self, now: float) -> None:
        """Open the frontier transaction that the next ticks share (group commit)."""
        if self._group is None:
            self._group = ExitStack()
            self._group.enter_context(self.frontier.batch())
            self._commit_at = now + self.settings.frontier.commit_interval_s

    def _commit(self, final: bool = False) -> None:
        """Commit the open group: outputs first (flushed, so a kill after the commit finds
        them), then one LMDB commit, then outbox deliveries (never inside a transaction)."""
        if self._group is not None:
            self._sync_outputs(final)
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
            if self._stop_requested:
                if drain_deadline == float("inf"):
                    drain_deadline = now + self.settings.crawl.stop_timeout_s
                    log.warning("stop requested: draining %d transfers", fetcher.in_flight)
                if fetcher.in_flight == 0 or now >= drain_deadline:
                    return
            elif fetcher.free_slots:
                self._open_group(now)
                for ticket in frontier.next_ready(now, fetcher.free_slots):
                    fetcher.submit(self._request(ticket))
            idle = frontier.pending == 0 and fetcher.in_flight == 0
            if self._peers is not None:
                if self._exchange(now, idle):
                    return
            elif idle:
                return
            wait = self._wait_s(now)
            if self._group is not None and (
                now >= self._commit_at
                or wait >= self.settings.frontier.commit_interval_s
                or (idle and (self._undelivered or self._outbox))
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
        if self._stop_requested:
            return 0.1
        if self.fetcher.free_slots and self.frontier.has_ready:
            return 0.0
        longest = MAX_WAIT_S if self._peers is None else PEER_WAIT_S
        wake = self.frontier.next_wake()
        if wake is None:
            if self.fetcher.in_flight == 0 and self.frontier.pending:
                raise RuntimeError(f"frontier stalled: {self.frontier.stats()}")
            return longest
        return min(longest, max(0.0, wake - now))

    def _request(self, ticket: Ticket) -> FetchRequest:
        return FetchRequest(
            ticket.url, token=ticket, follow_redirects=ROBOTS_REDIRECTS if ticket.robots else 0
        )

    # ----------------------------------------------------------------------------- results

    def _handle(self, r: FetchResult) -> None:
        ticket = r.request.token
        assert isinstance(ticket, Ticket)
        if ticket.robots:
            self.frontier.robots_done(
                ticket, r.finished, r.status if r.error is None else 0, r.body, r.duration_s, r.ip
            )
            self._warc_needed = self._archive(r) or self._warc_needed
            self._record(ticket, r, Outcome.ROBOTS_TXT)
            return
        f = self.settings.fetch
        after = (
            parse_retry_after(r.header("retry-after"), time.time())
            if r.status in _HOST_STATUSES
            else None
        )
        hold = min(after, f.max_retry_delay_s) if after is not None else 0.0
        if self._should_retry(ticket, r, after):
            return
        archived = self._archive(r)  # a failure whose response had begun: as truncated
        outcome = self._dispose(ticket, r)
        held = self.frontier.complete(
            ticket, r.finished, r.duration_s, _failure(r), r.ip, mark_done=not archived,
            hold_s=hold,
        )  # fmt: skip
        self._record(ticket, r, outcome, archived, self._held.pop(ticket.key, 0.0) + held)

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
            ticket, r.finished, delay, r.duration_s, _failure(r), r.ip, hold_s=after or 0.0
        )
        if held > 0:
            self._held[ticket.key] = self._held.get(ticket.key, 0.0) + held
        return True

    def _dispose(self, ticket: Ticket, r: FetchResult) -> Outcome:
        """Feed a final result's links or redirect target back; return its outcome."""
        if r.error is not None:
            return Outcome.FAILED
        if 300 <= r.status < 400 and r.header("location") and r.not_modified is None:
            return self._redirect(ticket, r)
        if 200 <= r.status < 300 or r.not_modified is not None:
            links = self.parser.parse(r.url, r.header("content-type") or "", r.body)
            if links.links:
                self.frontier.add(
                    links.links, depth=ticket.depth + 1, referrer=ticket.url, now=r.finished
                )
            return Outcome.FETCHED if r.not_modified is None else Outcome.NOT_MODIFIED
        return Outcome.HTTP_ERROR if r.status >= 400 else Outcome.REDIRECT

    def _redirect(self, ticket: Ticket, r: FetchResult) -> Outcome:
        if ticket.hops >= self.settings.fetch.max_redirects:
            return Outcome.TOO_MANY_REDIRECTS
        target = resolve_location(r.url, r.header("location") or "")
        if target is None:
            return Outcome.REDIRECT
        self.frontier.add(
            [target], depth=ticket.depth, referrer=ticket.url, hops=ticket.hops + 1, now=r.finished
        )
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
                truncated=truncation_reason(r.error.value) if r.error is not None else None,
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
        if archived:
            self._unsettled.append(_Unsettled(archived, ticket.key, counted))
        else:
            self.stats.record(*counted)
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
            **self.frontier.stats(),
        }

    def _finish(self) -> dict[str, Any]:
        elapsed = self._elapsed_before + time.monotonic() - self._started
        self.fetcher.close()  # abandoned transfers stay queued in LMDB: fetched on resume
        self._dirty = True
        with self.frontier.batch():
            self._sync_outputs()
        if self._warc is not None:
            self._warc.close()
        self._log.close()
        report = self.stats.report(elapsed, self.frontier.seen_stats())
        report["frontier"] = self.frontier.stats()
        report["complete"] = self.frontier.pending == 0
        report["stopped_by_signal"] = bool(self._stop_requested)
        report["warnings"] = config_warnings(self.settings) + self._repairs
        report["output_dir"] = str(self.layout.root)
        report["warc_files"] = [str(p) for p in self._warc.paths] if self._warc else []
        self.frontier.close()
        write_report(self.layout.report, report)
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
