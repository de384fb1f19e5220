"""The loop: the one event loop of a crawl process, over the parts it is given (``engine/``).

    next_ready -> submit -> poll -> write -> extract -> add / complete

One thread, no sleeps: the loop waits in ``Fetcher.poll`` for socket activity or curl's timer,
at most until the earliest snoozed host wakes. The crawl ends by itself exactly when the frontier
has nothing queued or in flight (retries wait in the frontier as queued URLs).

A tick: the coordinator's orders and the operator's commands (``steer.py``), the space guard
(``space.py``), the frontier's ready tickets submitted, the peer exchange (``exchange.py``),
the group commit when due (``commit.py``), one wait in ``poll``, each result handled
(``_handle``: the frontier's ``complete`` in one place), a status sample (``observe.py``).

Storage. A write that fails (``OSError``: the crawl log, the WARC writer, an LMDB commit as the
frontier's ``StorageError``, the report) aborts the open group commit, so no page whose outputs
were not written is marked done, and ends the run with one error message and the report of
what was committed (``write_error`` set; exit status 1). The same command resumes once the
cause is gone.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from functools import partial
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

from frontier_crawl.config import CrawlSettings
from frontier_crawl.control.commands import Command
from frontier_crawl.control.status import LoopTimes
from frontier_crawl.engine.build import load_stats, open_parts
from frontier_crawl.engine.commit import CommitGroup, Unsettled
from frontier_crawl.engine.deadline import StopDeadline
from frontier_crawl.engine.exchange import PeerExchange
from frontier_crawl.engine.observe import Observer
from frontier_crawl.engine.poison import Unreadable, read, report
from frontier_crawl.engine.seams import CommandSource, FetcherLike, Layout, PeersLike
from frontier_crawl.engine.sitemaps import SITEMAP_CALLBACK, SitemapFeed
from frontier_crawl.engine.space import SpaceGuard
from frontier_crawl.engine.state import LoopState, quiet
from frontier_crawl.engine.steer import Steering
from frontier_crawl.fetch import ErrorKind, FetchRequest, FetchResult
from frontier_crawl.fetch.types import sendable
from frontier_crawl.figures import Figures
from frontier_crawl.frontier import Completion, LastCapture, Ticket, changed
from frontier_crawl.frontier.faces import Scheduling
from frontier_crawl.frontier.mailbox import Link
from frontier_crawl.frontier.robots import MAX_ROBOTS_BYTES
from frontier_crawl.output import (
    IDENTICAL_PAYLOAD_DIGEST,
    SERVER_NOT_MODIFIED,
    ArchiveRecord,
    LogEntry,
    Outcome,
    ProblemEntry,
    Revisit,
    WarcWriter,
    config_warnings,
    iso_time,
    new_record_id,
    truncation_reason,
    write_report,
    write_report_html,
)
from frontier_crawl.parse import PageLinks, Parser
from frontier_crawl.parse.charset import page_charset
from frontier_crawl.parse.resolve import resolve_location
from frontier_crawl.proctree import StateLock
from frontier_crawl.safefs import make_dir
from frontier_crawl.spider import Abandoned, Page, Problem, SpiderHost, Yielded
from frontier_crawl.spider.api import (
    ENVELOPE,
    may_retry,
    redirected,
    request_headers,
    request_method,
)
from frontier_crawl.spider.cookies import COOKIES_BLOB, NO_COOKIES
from frontier_crawl.spider.host import CALLBACKS_BLOB

log = logging.getLogger(__name__)

#: RFC 9309 2.3.1.2: five redirect hops followed for robots.txt, each a request of its own
#: through the frontier (scope) and the fetcher (address policy); a chain cut short there is
#: "unavailable", as one longer than this is
ROBOTS_REDIRECTS = 5
#: the status robots_done is given for a robots.txt redirect chain not followed to its end
#: (a refused hop has no status of its own): a 3xx, which RobotsCache reads as "unavailable"
_CHAIN_CUT = 300
MAX_WAIT_S = 1.0  # upper bound of one wait, so progress, checkpoints and signals stay timely
#: in worker mode, how often the inbox is looked at (a peer's batch does not wake the curl wait)
PEER_WAIT_S = 0.02


#: what a start request is admitted with besides its URL (``start_requests``, grouped)
_REQUEST_KEY = attrgetter("callback", "meta", "priority")
_URL = attrgetter("url")
#: a finished WARC file's name (not one still ``.open``, nor one set aside as damaged)
_WARC_NAME = re.compile(r"\.warc(\.\w+)?$")
#: a failed transfer's (no) links, for its errback
_NO_LINKS = PageLinks((), False, "")
#: the exception type at the start of a Problem's message ("KeyError: 'from'"), or all of it
#: (an exception without a message: "KeyboardInterrupt")
_EXCEPTION_TYPE = re.compile(r"([A-Za-z_][\w.]*)(?:: |$)")


def _failure_name(r: FetchResult) -> str:
    """A failed result in one word for the status: its error kind, else its HTTP status."""
    return r.error.value if r.error is not None else f"http {r.status}"


def _completion(r: FetchResult) -> Completion:
    """The facts of a result the frontier decides retries and holds from."""
    error = r.error.value if r.error is not None else None
    return Completion(r.finished, r.status, error, r.header("retry-after"), r.duration_s, r.ip)


def _digest(r: FetchResult) -> bytes:
    """SHA-1 of a complete 2xx's payload as received (b"" for anything else): what a
    continuous crawl compares with the last capture's to tell a changed page."""
    if r.error is None and (200 <= r.status < 300 or r.not_modified is not None):
        return hashlib.sha1(r.raw_body, usedforsecurity=False).digest()
    return b""


def _visit(facts: Completion, r: FetchResult, digest: bytes, record_id: str) -> Completion:
    """``facts`` with what the schedule keeps of a visit (``[recrawl]`` on only): the
    validators, the payload digest, the response record's id, the fetch time, a redirect's
    target."""
    location = ""
    if 300 <= r.status < 400 and r.status != 304 and (given := r.header("location")):
        location = _location(r.url, given) or ""
    return msgspec.structs.replace(
        facts, etag=r.validator("etag"), last_modified=r.validator("last-modified"), digest=digest,
        record_id=record_id, fetched_at=r.started_at, location=location,
    )  # fmt: skip


def _location(url: str, given: str) -> str | None:
    """A redirect's target, None if it has none (a Location the resolver cannot read
    included: reported, as a parse-error would be, but the URL's outcome is its own)."""
    try:
        return read(resolve_location, url, given)
    except Unreadable as problem:
        report(url, problem)
        return None


def _validators(last: LastCapture) -> tuple[tuple[str, str], ...]:
    """A revisit's conditional request headers: the last capture's validators (those that
    can be sent: a state kept before unusable ones were refused may hold some)."""
    etag = last.etag if last.etag and sendable(last.etag) else None
    modified = last.last_modified if last.last_modified and sendable(last.last_modified) else None
    if etag and modified:
        return (("If-None-Match", etag), ("If-Modified-Since", modified))
    if etag:
        return (("If-None-Match", etag),)
    return (("If-Modified-Since", modified),) if modified else ()


#: a worker answers its coordinator's status from its pipe's thread with the loop's latest
#: published snapshot if it is at most this old (``workers/seam.py``), else from the loop
STATUS_MAX_AGE_S = 1.0


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
        config_path: Path | None = None,
        commands: CommandSource | None = None,
        reshape: Callable[[CrawlSettings], CrawlSettings] | None = None,
        loaded: CrawlSettings | None = None,
        wall_clock: Callable[[], float] = time.time,
        on_listening: Callable[[str], None] | None = None,
    ) -> None:
        """``config_path``: the crawl.toml a reload (SIGHUP, the control API) reads again;
        ``reshape`` turns what it loads into this process's settings (a worker's), ``loaded``
        being the file's settings before that (what a reload is compared with). ``commands``:
        operator commands from elsewhere (a worker's coordinator); without it, the engine
        serves its own control API when ``[control] listen`` is set. ``wall_clock``: what
        the frontier dates its robots.txt cache by (a test runs it ahead). ``on_listening``:
        told the control API's ``host:port`` once it listens (the console says where)."""
        self._on_listening = on_listening
        self.settings = settings
        #: a continuous crawl: the visit facts are gathered (digest, validators, record ids)
        self._recrawl = settings.recrawl.enabled
        self._run = LoopState()  #: what the loop is doing (read by the status)
        #: the spider (and [[extract]] rules), None without them: today's path, untouched.
        #: Loaded first: a source that does not import is a ConfigError before anything else
        self._spider = SpiderHost.load(settings)
        #: the spider's cookie jars (NO_COOKIES without a spider: an archive crawl's requests
        #: carry none): each request's Cookie header, each response's Set-Cookie
        self._cookies = self._spider.cookies if self._spider is not None else NO_COOKIES
        self.layout = Layout(Path(settings.crawl.output_dir))
        make_dir(self.layout.root)
        #: one owner per state directory, before anything of it is read (StateLocked if not)
        try:
            self._lock = StateLock.acquire(self.layout.state_dir)
        except BaseException:
            if self._spider is not None:
                self._spider.close()
            raise
        opened = False
        try:
            self._open(settings, fetcher, peers, parser, wall_clock)
            opened = True
            #: what bounds a stop whatever user code does (deadline.py)
            self._deadline = StopDeadline(
                self._run,
                abandon=self._spider.abandon if self._spider is not None else lambda: None,
                wind_up=self._wind_up,
            )
            self._steer = Steering(
                settings,
                frontier=self.frontier,
                fetcher=self.fetcher,
                group=self._group,
                run=self._run,
                deadline=self._deadline,
                observe=self._observe,
                reconfigure=self._reconfigure,
                root=self.layout.root,
                commands=commands,
                peers=peers,
                config_path=config_path,
                reshape=reshape,
                loaded=loaded,
            )
        except BaseException:
            if opened:  # every part closed, nothing committed, the lock released
                self._abandon()
            else:  # open_parts closed what it had opened
                if self._spider is not None:
                    self._spider.close()
                self._lock.release()
            raise
        self._on_progress = on_progress
        serve_status = getattr(commands, "serve_status", None)  # a worker's pipe (workers/seam)
        if serve_status is not None:
            serve_status(partial(self._observe.published, STATUS_MAX_AGE_S))

    def _open(
        self,
        settings: CrawlSettings,
        fetcher: FetcherLike | None,
        peers: PeersLike | None,
        parser: Parser | None,
        wall_clock: Callable[[], float],
    ) -> None:
        """Open the crawl's parts (``__init__``, once the state directory is this run's)."""
        parts = open_parts(
            settings,
            self.layout,
            lock_fd=self._lock.fileno,
            with_feeds=self._spider is not None,
            on_reject=self._rejected,
            on_foreign=self._foreign,
            wall_clock=wall_clock,
            fetcher=fetcher,
            peers=peers,
            parser=parser,
        )
        self.frontier = parts.frontier
        self._sitemaps = SitemapFeed(parts.frontier, settings)  #: [sitemaps]: their bodies
        self.fetcher: FetcherLike = parts.fetcher
        self.parser: Parser = parts.parser
        outputs = parts.outputs
        self._warc, self._log = outputs.archive, outputs.log
        #: every output a commit depends on (protocol.py), in commit order
        self._outputs = outputs.all
        #: seconds each URL still being retried has held its host so far (Retry-After, backoff)
        self._held: dict[bytes, float] = {}
        # the status (control/status.py): accumulators the loop keeps, samples of them every
        # SAMPLE_EVERY_S, and the latest published snapshot (read by other threads: replaced
        # whole, never mutated once published)
        self._times = LoopTimes()
        waited = partial(_waited_s, self.fetcher)
        self._group = group = CommitGroup(
            self.frontier,
            outputs.all,
            archive=outputs.archive,
            feeds=outputs.feeds,
            stats=parts.stats,
            elapsed_before=parts.elapsed_before,
            repairs=list(parts.repairs),
            interval_s=settings.frontier.commit_interval_s,
            times=self._times,
            waited=waited,
            started=time.monotonic(),
        )
        group.before_commit.append(self._save_cookies)
        #: a worker's outbox and inbox (none outside worker mode)
        self._exchange: PeerExchange | None = None
        if peers is not None:
            self._exchange = PeerExchange(
                peers, self.frontier, self._group, self._run,
                settings.cluster.max_batch_bytes,
            )  # fmt: skip
        self._space = SpaceGuard(parts.space, self._run, settings.output)
        self._write_error = ""  #: the failed write that ended the run, if one did
        self._run.last_request = time.monotonic()
        self._observe = Observer(
            self.frontier,
            self.fetcher,
            self._group,
            self._times,
            self._run,
            waited=waited,
            peers=peers,
            archive=self._warc,
            with_spider=self._spider is not None,
        )

    # ----------------------------------------------------------------------------- the loop

    def run(self) -> dict[str, Any]:
        """Crawl until nothing is left (or a stop signal), then write and return the report.

        A failed write (``OSError``) ends the run early: see the module docstring. Any other
        exception aborts the open group commit and propagates. The stop signals' handlers
        stay until the report is written (a second signal exits at once)."""
        steer = self._steer
        previous = steer.install_signals()
        self._group.stats.begin_run(time.time())  # the report's pages over time: when it ran
        self._run.thread = threading.get_ident()
        self._run.state = "running"
        try:
            try:
                steer.start_control()
                if self._on_listening is not None and steer.control_address:
                    self._on_listening(steer.control_address)
                steer.wake_on_commands()
                self._observe.begin(time.monotonic())  # the run's first freshness figures
                self._loop()
            except OSError as exc:
                self._failed(exc)
            except BaseException:
                self._deadline.disarm()
                self._abandon()
                raise
            finally:
                steer.stop_control()
            try:
                return self._finish()
            finally:
                self._lock.release()
        finally:
            self._deadline.disarm()
            steer.restore_signals(previous)

    def _begin(self) -> None:
        """The spider opened, its start requests and the seeds admitted."""
        if self._spider is not None:  # queued requests naming callbacks it has not:
            self._spider.check_stored(  # ConfigError (exit 2) before anything is sent
                self.frontier.load_blob(CALLBACKS_BLOB), self.frontier.queued_callbacks
            )
            self._spider.open()  # spider.open, pipelines' open(spider): ConfigError if not
            self._cookies.load(self.frontier.load_blob(COOKIES_BLOB))  # the sessions
        # in the first group: a seed's crawl-log line (a rejected one) is synced with it
        self._group.open(time.monotonic())
        if self._spider is not None:  # start_requests(), with their callbacks: before the
            for (callback, meta, priority), run in groupby(  # seeds, so that they win
                self._spider.start_requests(), _REQUEST_KEY
            ):
                self.frontier.add(list(map(_URL, run)), depth=0, now=time.monotonic(),
                                  callback=callback, meta=meta, priority=priority)  # fmt: skip
            if self._spider.names_changed:
                self.frontier.save_blob(CALLBACKS_BLOB, self._spider.names_blob())
        self.frontier.add(self.settings.crawl.seeds, depth=0, now=time.monotonic())

    def _loop(self) -> None:
        """The run from its start to the final commit. User code that held the stop past its
        deadline (``deadline.py``) is a stop like any: the page it handled is left
        unfinished (not marked done: fetched again on resume), every page finished before is
        committed."""
        try:
            self._begin()
            self._run_loop()
        except Abandoned:
            log.warning("stop: the page whose callback or pipelines were interrupted is left "
                        "unfinished (fetched again on resume)")  # fmt: skip
        except BaseException as exc:
            self._group.abort(exc)
            raise
        self._group.finish()

    def _wind_up(self) -> None:
        """User code refuses to be interrupted past the stop's deadline (``deadline.py``):
        the final commit and the report from here, in the signal handler, without returning
        to it (the loop's state is whole between two steps of user code); then exit, status
        1."""
        self._deadline.disarm()
        try:
            self._group.finish()
        except OSError as exc:
            self._failed(exc)
        try:
            report = self._finish(close_spider=False)
            log.error("stopped around user code that would not end: report in %s",
                      self.layout.report)  # fmt: skip
            if report.get("write_error"):
                log.error("stopping: %s", report["write_error"])
        finally:
            logging.shutdown()
            os._exit(1)

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
        with quiet():
            self.fetcher.close()
        if self._spider is not None:
            self._spider.close()
        for output in self._outputs:
            with quiet():
                output.discard()
        with quiet():
            self.frontier.close(checkpoint=False)
        self._lock.release()

    def _run_loop(self) -> None:
        frontier, fetcher, group, run = self.frontier, self.fetcher, self._group, self._run
        steer, space, exchange = self._steer, self._space, self._exchange
        ckpt_every = self.settings.frontier.checkpoint_interval_s
        progress_every = self.settings.output.progress_interval_s
        next_ckpt = time.monotonic() + ckpt_every
        next_progress = time.monotonic() + progress_every if progress_every else float("inf")
        drain_deadline = float("inf")
        while True:
            now = time.monotonic()
            if exchange is not None:
                steer.obey_coordinator()
            if steer.commands is not None or steer.reload_requested:
                steer.take(now)
                now = time.monotonic()
            paused = space.short(now) or run.paused
            if run.stop_requested or run.halt:
                if drain_deadline == float("inf"):
                    self._deadline.arm(self.settings.crawl.stop_timeout_s)
                    drain_deadline = self._deadline.at
                    if not run.halt:  # (a halt has said why it stops, and that it drains)
                        log.warning("stop requested: draining %d transfers", fetcher.in_flight)
                if fetcher.in_flight == 0 or now >= drain_deadline or run.past_deadline:
                    return
            submitted = 0
            if not run.stopping and fetcher.free_slots and not paused:
                if group.is_open and now >= group.commit_at:
                    # before this tick's requests, not between their take and their send (in
                    # poll): a commit's fdatasync there would delay one request to a host and
                    # shorten the gap to the next, which the frontier spaced from the take
                    group.commit()
                    now = time.monotonic()
                group.open(now)
                t0 = time.perf_counter()
                tickets = frontier.next_ready(now, fetcher.free_slots)
                t1 = time.perf_counter()
                for ticket in tickets:
                    fetcher.submit(self._request(ticket))
                submitted = len(tickets)
                times = self._times
                times.frontier += t1 - t0
                if submitted:
                    times.fetch += time.perf_counter() - t1
                    times.requests += submitted
                    run.last_request = now
            idle = frontier.pending == 0 and fetcher.in_flight == 0
            if not idle and frontier.holds.blocked_queues and fetcher.in_flight == 0:
                # all that is left is held by blocks: over, unless an operator can unblock
                idle = frontier.pending == frontier.holds.held_by_blocks and steer.commands is None
            if idle and frontier.view.continuous:  # never over by itself: revisits come due
                idle = False
            if exchange is not None:
                if exchange.swap(now, idle):
                    return
            elif idle:
                return
            wait = self._wait_s(now)
            if group.unsettled and not group.is_open:  # pages waiting for the archive are
                group.open(now)  # counted at a commit even when nothing else comes (paused)
            if (
                group.is_open
                and not submitted  # then at the next tick's start (see above)
                and (
                    now >= group.commit_at
                    or wait >= group.interval_s
                    or (idle and exchange is not None and exchange.waiting)
                )
            ):
                group.commit()  # one fdatasync per group, not per tick
            t0, waited = time.perf_counter(), _waited_s(fetcher)
            results = fetcher.poll(wait)
            self._times.fetch += time.perf_counter() - t0 - (_waited_s(fetcher) - waited)
            if results:
                group.open(now)
                for result in results:
                    self._handle(result)
            now = time.monotonic()
            if now >= self._observe.next_sample:
                self._observe.sample(now)
            if now >= next_ckpt:
                group.commit()
                self._log.flush()
                frontier.checkpoint()
                next_ckpt = now + self.settings.frontier.checkpoint_interval_s
            if now >= next_progress:
                if self._on_progress is not None:
                    self._on_progress(self._observe.progress())
                progress_every = self.settings.output.progress_interval_s
                next_progress = now + progress_every if progress_every else float("inf")

    def _save_cookies(self) -> None:
        """The cookie jars, in the commit of the pages that set them (a resumed crawl keeps
        its sessions), when they changed."""
        if self._cookies.changed:
            self.frontier.save_blob(COOKIES_BLOB, self._cookies.dump())

    def _foreign(self, dest: int, link: Link) -> None:
        """A link to a host another worker owns: batched, sent before this tick commits."""
        assert self._exchange is not None  # (only a worker's frontier has foreign links)
        self._exchange.foreign(dest, link)

    def _wait_s(self, now: float) -> float:
        """How long poll may block: until the next host wakes, or work is ready now."""
        if self._run.stop_requested or self._run.halt:
            return 0.1
        longest = MAX_WAIT_S if self._exchange is None else PEER_WAIT_S
        if self._run.low_space is not None or self._run.paused:  # only in-flight ones to wait for
            return longest
        if self.fetcher.free_slots and self.frontier.has_ready:
            return 0.0
        wake = self.frontier.next_wake()
        if wake is None:
            frontier = self.frontier
            if self.fetcher.in_flight == 0 and frontier.pending > frontier.holds.held_by_blocks:
                raise RuntimeError(f"frontier stalled: {self.frontier.view.stats()}")
            return longest
        return min(longest, max(0.0, wake - now))

    def _request(self, ticket: Ticket) -> FetchRequest:
        if ticket.robots:  # RFC 9309: the first 500 KiB parsed, whatever the page cap (the
            return FetchRequest(ticket.url, token=ticket, keep_bytes=MAX_ROBOTS_BYTES)  # rest
        # a revisit: conditional on the last capture's validators (the fetcher's cache then
        # adds none of its own); robots.txt redirects: _robots_hop
        validators = _validators(ticket.last) if ticket.last is not None else ()
        if ticket.callback == SITEMAP_CALLBACK:  # up to sitemaps.max_bytes
            return self._sitemaps.request(ticket, validators)
        cookie = self._cookies.request_headers(ticket.url, ticket.meta)  # (a spider's jar)
        if ticket.meta[:1] == ENVELOPE:  # a spider's Request(headers=, method=, body=...)
            headers = request_headers(ticket.meta, ticket.url)
            method, body = request_method(ticket.meta)
            if method != "GET":
                validators = ()  # (a revisit of a form's answer is not conditional)
            return FetchRequest(ticket.url, token=ticket,
                                headers=(*headers, *cookie, *validators), method=method,
                                body=body)  # fmt: skip
        if cookie:
            validators = (*cookie, *validators)
        return FetchRequest(ticket.url, token=ticket, headers=validators)

    # ----------------------------------------------------------------------------- results

    def _handle(self, r: FetchResult) -> None:
        ticket = r.request.token
        assert isinstance(ticket, Ticket)
        if ticket.robots:
            self._robots_result(ticket, r)
            return
        self._cookies.response(r.url, r.headers, ticket.meta)  # its Set-Cookie, to the jar
        facts = _completion(r)  # the frontier decides retries and holds from these
        if ticket.meta and (r.error is not None or r.status >= 500 or r.status == 429) and (
            not may_retry(ticket.meta, r.error.value if r.error is not None else None)
        ):  # a POST that may have reached the server (or meta dont_retry): never sent again
            facts = msgspec.structs.replace(facts, no_retry=True)
        if r.error is ErrorKind.ADDRESS_REFUSED:  # never retried: the host is given up
            self.frontier.complete(ticket, facts)
            self._record(ticket, r, Outcome.ADDRESS_REFUSED)
            self.frontier.retire(ticket.origin, Outcome.ADDRESS_REFUSED.value)
            return
        if self.frontier.will_retry(ticket, facts):
            self._retry(ticket, facts)
            return
        digest, unchanged = b"", False
        if self._recrawl:  # a revisit that found the page as it was: a revisit record, no
            digest = _digest(r)  # callback, nothing parsed (nothing new in it)
            unchanged = r.error is None and changed(ticket.last, r.status, digest) is False
        # a failure whose response had begun: as truncated
        archived, record_id = self._archive(r, ticket, digest, unchanged)
        message = r.error_detail if r.error is ErrorKind.OTHER else ""  # (says nothing alone)
        try:
            outcome, yielded = self._dispose(ticket, r, unchanged)
        except Unreadable as problem:  # a parser raised on this response: its outcome alone
            report(r.url, problem)
            outcome, yielded, message = Outcome.PARSE_ERROR, None, problem.message
        if self._recrawl:
            facts = _visit(facts, r, digest, record_id)
        t0 = time.perf_counter()
        settled = self.frontier.complete(ticket, facts, mark_done=not archived)
        held = settled.held_s
        self._times.frontier += time.perf_counter() - t0
        if settled.failed or held > 0:
            self._observe.failed_at(ticket.origin, held, _failure_name(r))
        self._record(ticket, r, outcome, archived, self._held.pop(ticket.key, 0.0) + held,
                     yielded, message)  # fmt: skip

    def _robots_result(self, ticket: Ticket, r: FetchResult) -> None:
        """A robots.txt fetch (or one hop of its redirect chain) came back.

        RFC 9309 as applied here: a redirect is followed as a request of its own (scope, the
        address policy) for up to ROBOTS_REDIRECTS hops; a chain cut short (more hops, a
        target out of scope, a hop's address refused) is "unavailable": allow all (2.3.1.2
        says a crawler that stops following MAY; the host's own server chose to send us
        away, as a 404 would). Any other failure is "unreachable" (retried). The host's own
        robots.txt address refused: the host is retired (address-refused)."""
        frontier = self.frontier
        t0 = time.perf_counter()
        if r.error is ErrorKind.ADDRESS_REFUSED:
            if ticket.hops:
                frontier.robots_done(ticket, r.finished, _CHAIN_CUT, b"", 0.0, r.ip)
            else:
                frontier.robots_done(ticket, r.finished, 0, b"", 0.0, r.ip,
                                     retire=Outcome.ADDRESS_REFUSED.value)  # fmt: skip
        elif not _robots_hop(frontier, ticket, r):
            status = r.status if r.error is None else 0
            frontier.robots_done(ticket, r.finished, status, r.body, r.duration_s, r.ip,
                                 retry_after=r.header("retry-after"))  # fmt: skip
        self._times.frontier += time.perf_counter() - t0
        if r.error is not None or r.status >= 500 or r.status == 429:  # robots.txt unreachable
            self._observe.failed_at(ticket.origin, 0.0, _failure_name(r))
        group = self._group
        group.needed = self._archive(r)[0] or group.needed
        self._record(ticket, r, Outcome.ROBOTS_TXT)

    def _retry(self, ticket: Ticket, facts: Completion) -> None:
        """A transient failure the frontier retries (``Frontier.will_retry``): back to it."""
        t0 = time.perf_counter()
        held = self.frontier.complete(ticket, facts).held_s
        self._times.frontier += time.perf_counter() - t0
        self._observe.failed_at(ticket.origin, held, facts.error or f"http {facts.status}")
        if held > 0:
            self._held[ticket.key] = self._held.get(ticket.key, 0.0) + held

    def _dispose(
        self, ticket: Ticket, r: FetchResult, unchanged: bool = False
    ) -> tuple[Outcome, Yielded | None]:
        """Feed a final result's links (or what its spider callback yields) or redirect target
        back; return its outcome, and what the callback gave if the page went to one.
        ``unchanged``: a revisit found the page as it was (a 304, or the same payload)."""
        if ticket.callback == SITEMAP_CALLBACK:  # [sitemaps]: never to the HTML parser or a
            return self._sitemaps.dispose(ticket, r, self._redirect), None  # spider
        spider = self._spider
        if r.error is not None:
            if spider is not None and ticket.meta[:1] == ENVELOPE:  # to its errback, if any
                return Outcome.FAILED, self._run_spider(spider, ticket, r, _NO_LINKS, r.status,
                                                        "", failure=r.error.value)  # fmt: skip
            return Outcome.FAILED, None
        if unchanged:
            return (Outcome.NOT_MODIFIED if r.status == 304 else Outcome.UNCHANGED), None
        if 300 <= r.status < 400 and r.header("location") and r.not_modified is None:
            return self._redirect(ticket, r), None  # never to a callback: the target is
        if 200 <= r.status < 300 or r.not_modified is not None:
            t0 = time.perf_counter()
            ctype = r.header("content-type") or ""
            links = read(self.parser.parse, r.url, ctype, r.body)
            t1 = time.perf_counter()
            self._times.parse += t1 - t0
            outcome = Outcome.FETCHED if r.not_modified is None else Outcome.NOT_MODIFIED
            if spider is not None:  # with a spider, only what its callbacks yield is followed
                status = r.status if r.not_modified is None else 200
                return outcome, self._run_spider(spider, ticket, r, links, status, ctype)
            if links.links:
                self.frontier.add(
                    links.links, depth=ticket.depth + 1, referrer=ticket.url, now=r.finished
                )
            self._times.frontier += time.perf_counter() - t1
            return outcome, None
        outcome = Outcome.HTTP_ERROR if r.status >= 400 else Outcome.REDIRECT
        if spider is not None and spider.wants(r.status, ticket.callback):  # handle_status
            ctype = r.header("content-type") or ""
            links = read(self.parser.parse, r.url, ctype, r.body)
            return outcome, self._run_spider(spider, ticket, r, links, r.status, ctype)
        if spider is not None and ticket.meta[:1] == ENVELOPE:  # an HTTP error to its errback
            return outcome, self._run_spider(spider, ticket, r, _NO_LINKS, r.status,
                                             r.header("content-type") or "", failure="http")
        return outcome, None

    def _run_spider(
        self, spider: SpiderHost, ticket: Ticket, r: FetchResult, parsed: PageLinks,
        status: int, ctype: str, failure: str | None = None,
    ) -> Yielded:  # fmt: skip
        """Give the page to its request's callback; admit the requests it yields (through the
        frontier like any link: canonical, in scope, unseen, robots, politeness, traps, each
        with its callback, meta and priority), record its problems; return what it gave."""
        t0 = time.perf_counter()
        # the default parse, no rules: the page's links are admitted as the plain path admits
        # them (what that parse yields: SpiderHost.follows_links), not scoped here first
        plain = failure is None and spider.follows_links(ticket.callback)
        page = Page(  # positional (cheaper than keywords, once per page): the fields in order
            r.url,
            status,
            r.headers,
            r.body,
            ctype.partition(";")[0].strip().lower(),  # content_type
            # charset: the parser's choice if it parsed the page (None: lexbor's detection)
            parsed.charset if parsed.tree is not None else read(page_charset, r.body, ctype),
            self.frontier.in_scope_links(parsed.links) if parsed.links and not plain else [],
            ticket.depth,
            ticket.callback,
            ticket.meta,
            parsed.tree,  # the parser's document: Response.css does not parse again
            r.started_at,  # fetched_at: the items' fetch time ([recrawl] item_time_field)
        )
        t1 = time.perf_counter()
        yielded = spider.run(page, failure)  # failure: the errback's (Request(errback=))
        t2 = time.perf_counter()
        times = self._times
        times.frontier += t1 - t0  # the page's links, canonical and in scope
        times.callbacks += t2 - t1  # callbacks, rules and pipelines
        self._group.stats.spider_time(yielded.callback_s, yielded.pipeline_s)
        if yielded.dropped:  # items a pipeline dropped (DropItem, or it returned None)
            self._group.stats.count_dropped(yielded.dropped)
        # one add per run of requests that share callback, meta and priority (the host gives
        # them so: most pages yield one run)
        add, depth = self.frontier.add, ticket.depth + 1
        if plain and parsed.links:
            add(parsed.links, depth=depth, referrer=ticket.url, now=r.finished)
        for callback, meta, priority, urls in yielded.runs:
            add(urls, depth=depth, referrer=ticket.url, now=r.finished, callback=callback,
                meta=meta, priority=priority)  # fmt: skip
        if spider.names_changed:  # a callback name new to the queue: saved with its requests
            self.frontier.save_blob(CALLBACKS_BLOB, spider.names_blob())
        times.frontier += time.perf_counter() - t2
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
        target = read(resolve_location, r.url, r.header("location") or "")
        if target is None:
            return Outcome.REDIRECT
        meta = ticket.meta  # a spider request's callback and meta go with it (to the target;
        if meta[:1] == ENVELOPE:  # a 302/303 of a POST: a GET, as Scrapy and browsers do)
            meta = redirected(meta, r.status)
        self.frontier.add(
            [target], depth=ticket.depth, referrer=ticket.url, hops=ticket.hops + 1,
            now=r.finished, callback=ticket.callback, meta=meta, priority=ticket.priority,
        )  # fmt: skip
        return Outcome.REDIRECT

    def _archive(
        self, r: FetchResult, ticket: Ticket | None = None, digest: bytes = b"",
        unchanged: bool = False,
    ) -> tuple[int, str]:  # fmt: skip
        """Write ``r``'s WARC records, if it has any: the write's sequence number (else 0),
        and the WARC-Record-ID the engine chose for its response record ("": none chosen).

        A continuous crawl's revisit that found the page ``unchanged`` is a revisit record
        referring to the last capture (a 304: server-not-modified; the same payload again:
        identical-payload-digest, with no payload); a changed or new 2xx a response record
        whose id is chosen here, for the schedule to keep as the next revisits' referent."""
        if self._warc is None or r.status == 0:
            return 0, ""
        t0 = time.perf_counter()
        seen = r.not_modified
        revisit = Revisit(seen.url, seen.fetched_at) if seen is not None else None
        record_id, payload = "", r.raw_body
        last = ticket.last if ticket is not None else None
        if unchanged and last is not None and last.uri:
            profile = SERVER_NOT_MODIFIED if r.status == 304 else IDENTICAL_PAYLOAD_DIGEST
            revisit = Revisit(last.uri, last.date, last.record_id, profile, last.digest)
            payload = b""  # (a revisit archives none: not even sent to the writer)
        elif digest and revisit is None:
            record_id = new_record_id()
        seq = self._warc.write(
            ArchiveRecord(
                url=r.url,
                ip=r.ip,
                fetched_at=r.started_at,
                request_bytes=r.request_bytes,
                header_bytes=r.header_bytes,
                payload=payload,
                truncated=(
                    truncation_reason(r.error.value) if r.error is not None
                    else "length" if r.cut else None
                ),
                revisit_of=revisit,
                record_id=record_id,
                payload_digest=digest,
                request_body=r.request.body if r.request_bytes else b"",  # (a form's POST)
            )
        )
        self._times.warc += time.perf_counter() - t0
        return seq, record_id

    def _record(
        self,
        ticket: Ticket,
        r: FetchResult,
        outcome: Outcome,
        archived: int = 0,
        held_s: float = 0.0,
        yielded: Yielded | None = None,
        message: str = "",
    ) -> None:
        """The page's crawl-log line, and its counters (once its WARC write ``archived``, if
        any, is settled: see ``commit.py``). ``held_s``: how long its responses held its
        host beyond the politeness delay (Retry-After, backoff), over all its attempts.
        ``message``: what the outcome and error kind do not say (a parse-error's exception, an
        other-error's detail), else none."""
        group = self._group
        group.dirty = True
        stats = group.stats
        if held_s > 0:
            stats.record_hold(ticket.url, held_s)
        if not ticket.robots:  # the report's slowest and most failing hosts
            failed = outcome is Outcome.FAILED or r.status >= 500
            stats.record_host(ticket.origin, r.duration_s, failed)
        error = r.error.value if r.error is not None else None
        if outcome is Outcome.PARSE_ERROR:
            error = message.partition(":")[0].partition(" ")[0]  # the exception's type
        nbytes = len(r.body) if r.not_modified is None else 0  # a 304 brought no payload
        counted = (outcome.value, r.status, error, nbytes, ticket.last is not None)
        items = yielded.items if yielded is not None else None
        problems = (
            tuple(p.outcome for p in yielded.problems)
            if yielded is not None and yielded.problems
            else ()
        )
        if archived:
            group.unsettled.append(Unsettled(archived, ticket.key, counted, items, problems))
        else:
            group.count(counted, items, problems)
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
                visit=ticket.last.visits if ticket.last is not None else 0,
                method=request_method(ticket.meta)[0] if ticket.meta[:1] == ENVELOPE else "GET",
                message=message or msgspec.UNSET,
            )
        )

    def _rejected(self, ticket: Ticket, reason: str) -> None:
        """A URL the frontier refused or gave up on: it still gets its crawl-log line."""
        group = self._group
        group.dirty = True
        group.stats.record(reason, 0, None, 0)
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

    # ----------------------------------------------------------------------------- operator

    # ----------------------------------------------------------------------------- lifecycle

    # ----------------------------------------------------------------------------- status

    def apply(self, command: Command, now: float) -> dict[str, Any]:
        """Apply one operator command (in the loop's thread): ``steer.py``."""
        return self._steer.apply(command, now)

    def _reconfigure(self, new: CrawlSettings, now: float) -> None:
        """Reloaded settings (``steer.py``), applied to the parts that follow them."""
        self.settings = new
        self.frontier.reconfigure(new, now)
        self._group.interval_s = new.frontier.commit_interval_s
        reconfigure = getattr(self.fetcher, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(new.fetch, new.politeness)
        self._space.reconfigure(new.output)

    def request_stop(self) -> None:
        """Stop as on a first SIGTERM (any thread): in-flight transfers drain, then the
        report."""
        self._run.stop_requested = max(1, self._run.stop_requested)

    def status(self) -> dict[str, Any]:
        """The crawl's status (``observe.py``; the shape of ``GET /api/status``): safe from any
        thread; never mutate the dict returned."""
        return self._observe.status()

    def metrics(self) -> dict[str, Any]:
        """Counters for ``control.metrics.render_metrics`` (as :meth:`status`)."""
        return self._observe.metrics()

    def progress(self) -> dict[str, Any]:
        """A snapshot for progress displays (``observe.py``)."""
        return self._observe.progress()

    def _finish(self, close_spider: bool = True) -> dict[str, Any]:
        """Final commit, close the outputs, write the report. After a failed write, nothing
        more is committed (the in-memory state may be ahead of LMDB): the report shows the
        committed counters, and the outputs and frontier are released as they are.
        ``close_spider``: False when its user code would not end (``_wind_up``)."""
        now = time.monotonic()
        figures: Figures | None = self._group.figures(now)
        elapsed = self._group.elapsed_before + now - self._group.started
        if self._spider is not None and close_spider:
            self._spider.close()  # pipelines' close(spider); never raises (bounded by the
        self._deadline.disarm()  # stop's deadline, which is over with the user code)
        self._space.close(now)
        self.fetcher.close()  # abandoned transfers stay queued in LMDB: fetched on resume
        if not self._write_error:
            try:
                self._group.dirty = True
                with self.frontier.batch():
                    self._group.sync()
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
            # what LMDB holds: exact on resume
            self._group.stats, elapsed, _repairs = load_stats(self.frontier)
            figures = None
        report = self._group.stats.report(elapsed, self.frontier.view.seen_stats(), figures)
        report["frontier"] = self.frontier.view.stats()
        report["complete"] = (  # (a continuous crawl never is: its revisits come due)
            self.frontier.pending == 0 and not self._run.halt and not failed
            and not self.frontier.view.continuous
        )  # fmt: skip
        report["stopped_by_signal"] = bool(self._run.stop_requested)
        report["stopped_for_low_space"] = self._run.halt == "low-disk-space"
        report["disk_space_pauses"] = self._space.pauses
        report["disk_space_paused_s"] = round(self._space.paused_s, 3)
        report["warnings"] = config_warnings(self.settings) + self._group.repairs
        report["output_dir"] = str(self.layout.root)
        report["warc_files"] = _warc_files(self._warc, self.layout.warc_dir)
        report["crawl_logs"] = [str(self.layout.crawl_log)]
        report["freshness"] = self._observe.freshness(time.monotonic())
        self._run.state = "finished"
        with quiet():  # the last status: finished, with the final counters
            self._observe.sample(time.monotonic(), force=True)
        try:
            self.frontier.close(checkpoint=not failed)
        except OSError as exc:
            self._failed(exc)
        report["write_error"] = self._write_error or None
        try:
            write_report(self.layout.report, report)
            write_report_html(self.layout.report_html, report)
        except OSError as exc:
            self._failed(OSError(exc.errno, f"writing {self.layout.report}: {exc}"))
            report["write_error"] = self._write_error
        return report


def _robots_hop(frontier: Scheduling, ticket: Ticket, r: FetchResult) -> bool:
    """A robots.txt redirect: its target handed back to the frontier as the host's next
    robots ticket, if it is within ROBOTS_REDIRECTS hops and in scope. False (the fetch
    is finished with this answer) for anything else."""
    if r.error is not None or not 300 <= r.status < 400 or r.not_modified is not None:
        return False
    location = r.header("location")
    if not location or ticket.hops >= ROBOTS_REDIRECTS:
        return False
    target = _location(r.url, location)
    if target is not None and frontier.robots_redirect(ticket, target):
        return True
    log.info("robots.txt of %s redirects to %r, not followed (not an http(s) URL in "
             "scope): unavailable", ticket.origin, location)  # fmt: skip
    return False


def _warc_files(warc: WarcWriter | None, warc_dir: Path) -> list[str]:
    """Every WARC file of the crawl, every run's (the writer names its files so that
    their names sort in the order they were written), complete or still marked open."""
    if warc is None:
        return []
    names = {str(p) for p in warc.paths}
    try:
        with os.scandir(warc_dir) as entries:
            names.update(e.path for e in entries if _WARC_NAME.search(e.name) and e.is_file())
    except OSError:
        pass
    return sorted(names)


def _waited_s(fetcher: FetcherLike) -> float:
    """The fetcher's seconds spent waiting so far (a null fetcher never waits)."""
    waited: float = getattr(fetcher, "waited_s", 0.0)
    return waited
