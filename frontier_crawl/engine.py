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
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from frontier_crawl import __version__
from frontier_crawl.config import ConfigError, CrawlSettings, load
from frontier_crawl.config.reload import reload_plan
from frontier_crawl.config.settings import FeedSection
from frontier_crawl.control.commands import Command
from frontier_crawl.control.status import (
    SAMPLE_EVERY_S,
    CrawlState,
    HostHold,
    LoopTimes,
    Recorder,
    Sample,
    Signals,
    classify,
    empty_status,
)
from frontier_crawl.fetch import (
    FETCH_TIME_BUCKETS,
    AddressPolicy,
    CacheUnusable,
    ErrorKind,
    Fetcher,
    FetchRequest,
    FetchResult,
)
from frontier_crawl.frontier import (
    Completion,
    DamagedState,
    Frontier,
    HostSignals,
    StateMismatch,
    Ticket,
)
from frontier_crawl.frontier.mailbox import Link
from frontier_crawl.frontier.robots import MAX_ROBOTS_BYTES
from frontier_crawl.frontier.scope import check_scope
from frontier_crawl.frontier.urls import canonicalize
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
    write_report_html,
)
from frontier_crawl.output.feeds import Feed, decode_offset, open_feed
from frontier_crawl.output.protocol import Output, blob_name
from frontier_crawl.output.recover import recover_lines, recover_warcs, set_aside
from frontier_crawl.output.space import RESUME_MARGIN, LowSpace, SpaceMonitor, human_bytes
from frontier_crawl.parse import LinkParser, PageLinks, Parser
from frontier_crawl.parse.charset import page_charset
from frontier_crawl.parse.resolve import resolve_location
from frontier_crawl.proctree import StateLock
from frontier_crawl.safefs import make_dir
from frontier_crawl.spider import Page, Problem, SpiderHost, Yielded

if TYPE_CHECKING:
    from frontier_crawl.control.server import ControlServer

log = logging.getLogger(__name__)

#: RFC 9309 2.3.1.2: five redirect hops followed for robots.txt, each a request of its own
#: through the frontier (scope) and the fetcher (address policy); a chain cut short there is
#: "unavailable", as one longer than this is
ROBOTS_REDIRECTS = 5
#: the status robots_done is given for a robots.txt redirect chain not followed to its end
#: (a refused hop has no status of its own): a 3xx, which RobotsCache reads as "unavailable"
_CHAIN_CUT = 300
MAX_WAIT_S = 1.0  # upper bound of one wait, so progress, checkpoints and signals stay timely
#: WARC fdatasyncs per group commit interval, at most (power-loss durability): two, so a
#: page's records wait for their sync half an interval on average, not a whole one (measured:
#: with one, kill -9 refetched about twice as many pages as without syncing; with two, about
#: as many), 40 a second at most with the default commit_interval_s, in the writer process
WARC_SYNCS_PER_COMMIT = 2
#: in worker mode, how often the inbox is looked at (a peer's batch does not wake the curl wait)
PEER_WAIT_S = 0.02
#: a batch the transport cannot take now (a full Redis) is tried again this much later; it
#: waits in the durable outbox meanwhile, and the crawl of this worker's own hosts goes on
DELIVER_RETRY_S = 0.5


STATS_BLOB = "engine.stats"
#: start-up repairs remembered for the report (the oldest are dropped past this many)
MAX_REPAIRS = 100
#: a status is built (hosts scanned for the busiest ones...) only while someone asked for one
#: in the last this many seconds (``Engine.status``); samples are taken regardless
STATUS_WANTED_S = 10.0
#: the busiest hosts are found by a scan of every host: at most this often, and at most 1% of
#: the time (the next scan waits 100 times as long as the last took: with a million hosts)
BUSIEST_EVERY_S = 5.0
BUSIEST_SHARE = 0.01
#: failing hosts remembered for the status (the least failing dropped past this many)
MAX_FAILING_HOSTS = 1000


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


def _completion(r: FetchResult) -> Completion:
    """The facts of a result the frontier decides retries and holds from."""
    error = r.error.value if r.error is not None else None
    return Completion(r.finished, r.status, error, r.header("retry-after"), r.duration_s, r.ip)


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

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"


class PeersLike(Protocol):
    """The other worker processes, as one worker sees them (``frontier_crawl.workers.Peers``)."""

    worker: int
    run_id: bytes

    def route(self, origin: str) -> int: ...
    def send(self, dest: int, batch: bytes) -> bool:
        """True once ``dest`` has the batch; False if the transport cannot take it now (a
        full Redis): it stays in the outbox and is sent again later."""
        ...

    def held_up(self, batches: int) -> str:
        """Why ``batches`` wait to be sent, for the status ("" if the transport is fine)."""
        ...

    def publish(self, idle: bool, received: int) -> None: ...
    def should_stop(self) -> bool: ...
    def orders(self) -> tuple[bool, int]:
        """(stop requested, reloads ordered so far): the coordinator's signals, passed on."""
        ...


class PendingLike(Protocol):
    """A posted command waiting for the loop's answer (``control.commands.Pending``)."""

    @property
    def command(self) -> Command: ...
    def answer(self, reply: dict[str, Any]) -> None: ...


class CommandSource(Protocol):
    """Where operator commands come from: the control API's queue (``control/commands.py``),
    or, in a worker process, the coordinator's pipe (``workers.py``)."""

    @property
    def fileno(self) -> int: ...
    def take(self) -> Sequence[PendingLike]: ...


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
        config_path: Path | None = None,
        commands: CommandSource | None = None,
        reshape: Callable[[CrawlSettings], CrawlSettings] | None = None,
        loaded: CrawlSettings | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """``config_path``: the crawl.toml a reload (SIGHUP, the control API) reads again;
        ``reshape`` turns what it loads into this process's settings (a worker's), ``loaded``
        being the file's settings before that (what a reload is compared with). ``commands``:
        operator commands from elsewhere (a worker's coordinator); without it, the engine
        serves its own control API when ``[control] listen`` is set. ``wall_clock``: what
        the frontier dates its robots.txt cache by (a test runs it ahead)."""
        self._wall_clock = wall_clock
        self.settings = settings
        self._config_path = config_path
        self._reshape = reshape
        self._loaded = loaded or settings  #: the file's settings, before ``reshape``
        self._commands: CommandSource | None = commands
        self._control: ControlServer | None = None
        self._paused = False  #: by the operator (pause/resume)
        self._reload_requested = False  #: SIGHUP received
        #: the spider (and [[extract]] rules), None without them: today's path, untouched.
        #: Loaded first: a source that does not import is a ConfigError before anything else
        self._spider = SpiderHost.load(settings)
        self.layout = Layout(Path(settings.crawl.output_dir))
        make_dir(self.layout.root)
        #: one owner per state directory, before anything of it is read (StateLocked if not)
        self._lock = StateLock.acquire(self.layout.state_dir)
        try:
            self._open(settings, fetcher, peers, parser)
        except BaseException:
            self._lock.release()
            raise
        self._on_progress = on_progress

    def _open(
        self,
        settings: CrawlSettings,
        fetcher: FetcherLike | None,
        peers: PeersLike | None,
        parser: Parser | None,
    ) -> None:
        """Open the crawl's parts (``__init__``, once the state directory is this run's)."""
        #: start-up repairs of this run: warnings naming what was set aside (``_set_aside``)
        self._repairs: list[str] = []
        # the frontier first: it refuses a state directory this config cannot continue
        self.frontier = self._open_frontier(settings, peers)
        self._peers = peers
        self._outbox: dict[int, list[Link]] = {}
        self._received = 0  #: link batches ingested from other workers (this run)
        self._undelivered = peers is not None  # an earlier run may have left outbox batches
        self._deliver_at = 0.0  #: when a batch the transport could not take is tried again
        self._held_up = 0  #: outbox batches the transport could not take (at the last try)
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
        self._stop_requested = 0
        self._reloads_seen = 0  #: a worker's reload orders from its coordinator, obeyed
        self._started = time.monotonic()
        self._status_at = float("-inf")
        self._space = SpaceMonitor(self._written_paths(), settings.output.min_free_bytes)
        self._low_space: LowSpace | None = None  #: set while fetching is paused for space
        self._paused_at = 0.0
        self._space_pauses = 0
        self._space_paused_s = 0.0
        self._halt = ""  #: why the loop stops without a signal ("low-disk-space")
        self._write_error = ""  #: the failed write that ended the run, if one did
        # the status (control/status.py): accumulators the loop keeps, samples of them every
        # SAMPLE_EVERY_S, and the latest published snapshot (read by other threads: replaced
        # whole, never mutated once published)
        self._times = LoopTimes()
        self._folded: dict[str, float] = {}  #: the loop times last added to the stats
        self._recorder = Recorder()
        self._state: CrawlState = "starting"
        self._loop_thread = 0
        self._next_sample = 0.0
        self._last_request = time.monotonic()
        self._status_wanted = float("-inf")
        self._status: dict[str, Any] | None = None
        self._metrics: dict[str, Any] | None = None
        self._busiest: list[dict[str, Any]] = []
        self._busiest_at = float("-inf")
        #: origin -> [failures, seconds held] (failed fetches and the holds they caused)
        self._failing: dict[str, list[float]] = {}

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
                    wall_clock=self._wall_clock,
                )
            except DamagedState as damage:
                self._set_aside(damage.path, damage.problem, damage.consequence)
        raise StateMismatch(f"{self.layout.state_dir}: still damaged after setting parts of it "
                            f"aside ({'; '.join(self._repairs)}); move it away by hand to start "
                            "the crawl afresh")  # fmt: skip

    def _open_fetcher(self, settings: CrawlSettings) -> Fetcher:
        """The fetcher; an HTTP cache it cannot open is set aside and started afresh."""

        f = settings.fetch
        seeds = [canonicalize(seed) or seed for seed in settings.crawl.seeds]
        addresses = AddressPolicy.for_crawl(f.allow_addresses, seeds, f.resolve)

        def build() -> Fetcher:
            return Fetcher.from_settings(
                f, settings.politeness, capture_requests=settings.output.warc,
                addresses=addresses,
            )  # fmt: skip

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
            keep_fds=(self._lock.fileno,),  # the directory is not free while the writer lives
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
        self._fold_loop_times()
        saved = _SavedStats(self.stats, elapsed, self._repairs)
        self.frontier.save_blob(STATS_BLOB, _ENCODER.encode(saved))
        if self._outbox:  # in this tick's transaction; delivered after its commit
            for dest, links in self._outbox.items():
                self.frontier.queue_outgoing(dest, links)
            self._outbox.clear()
            self._undelivered = True
        self._dirty = bool(self._unsettled)

    def _fold_loop_times(self) -> None:
        """Add the loop's seconds by phase since the last fold to the saved counters (the
        report's "where time went", over every run of the crawl)."""
        t = self._times
        now = {"run": time.monotonic() - self._started, "waiting": self._waited(),
               "parse": t.parse, "callbacks": t.callbacks, "warc": t.warc,
               "frontier": t.frontier, "fetch": t.fetch}  # fmt: skip
        folded = self._folded
        self.stats.add_loop_time({k: v - folded.get(k, 0.0) for k, v in now.items()})
        self._folded = now

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
        self.stats.begin_run(time.time())  # the report's pages over time: when it ran
        self._loop_thread = threading.get_ident()
        self._state = "running"
        try:
            self._start_control()
            self._wake_on_commands()
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
            self._stop_control()
        try:
            return self._finish()
        finally:
            self._lock.release()

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
        self._lock.release()

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
            t0 = time.perf_counter()
            try:
                self._sync_outputs(final)
            except BaseException as exc:
                self._abort_group(exc)
                raise
            group, self._group = self._group, None
            group.close()
            spent = time.perf_counter() - t0
            times = self._times
            times.commit += spent
            times.frontier += spent
            times.commits += 1
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
            if self._peers is not None:
                self._obey_coordinator()
            if self._commands is not None or self._reload_requested:
                self._take_commands(now)
                now = time.monotonic()
            paused = self._short_of_space(now) or self._paused
            if self._stop_requested or self._halt:
                if drain_deadline == float("inf"):
                    drain_deadline = now + self.settings.crawl.stop_timeout_s
                    if not self._halt:  # (a halt has said why it stops, and that it drains)
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
                    self._last_request = now
            idle = frontier.pending == 0 and fetcher.in_flight == 0
            if not idle and frontier.blocked_queues and fetcher.in_flight == 0:
                # all that is left is held by blocks: over, unless an operator can unblock
                idle = frontier.pending == frontier.held_by_blocks and self._commands is None
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
            t0, waited = time.perf_counter(), self._waited()
            results = fetcher.poll(wait)
            self._times.fetch += time.perf_counter() - t0 - (self._waited() - waited)
            if results:
                self._open_group(now)
                for result in results:
                    self._handle(result)
            now = time.monotonic()
            if now >= self._next_sample:
                self._sample(now)
            if now >= next_ckpt:
                self._commit()
                self._checkpoint()
                next_ckpt = now + self.settings.frontier.checkpoint_interval_s
            if now >= next_progress:
                self._progress()
                progress_every = self.settings.output.progress_interval_s
                next_progress = now + progress_every if progress_every else float("inf")

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
        is open here, so two workers delivering to each other cannot deadlock). Those the
        transport cannot take now stay in the outbox, tried again DELIVER_RETRY_S later."""
        assert self._peers is not None
        now = time.monotonic()
        if now < self._deliver_at:
            return
        while True:
            pending = self.frontier.outgoing()
            sent = []
            for key, dest, batch in pending:
                if not self._peers.send(dest, batch):
                    break
                sent.append(key)
            self.frontier.delivered(sent)  # one commit for them all
            if len(sent) < len(pending):
                self._held_up, self._deliver_at = len(pending) - len(sent), now + DELIVER_RETRY_S
                return
            if len(pending) < 256:
                break
        self._undelivered = False
        self._held_up = 0

    def _exchange(self, now: float, idle: bool) -> bool:
        """Worker mode: deliver and ingest link batches, publish status; True to stop."""
        assert self._peers is not None
        if self._held_up and self._group is None:  # (else the group's commit tries again)
            self._deliver()
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
        if self._low_space is not None or self._paused:  # only in-flight transfers to wait for
            return longest
        if self.fetcher.free_slots and self.frontier.has_ready:
            return 0.0
        wake = self.frontier.next_wake()
        if wake is None:
            frontier = self.frontier
            if self.fetcher.in_flight == 0 and frontier.pending > frontier.held_by_blocks:
                raise RuntimeError(f"frontier stalled: {self.frontier.stats()}")
            return longest
        return min(longest, max(0.0, wake - now))

    def _request(self, ticket: Ticket) -> FetchRequest:
        if ticket.robots:  # RFC 9309: the first 500 KiB parsed, whatever the page cap (the
            return FetchRequest(ticket.url, token=ticket, keep_bytes=MAX_ROBOTS_BYTES)  # rest
        return FetchRequest(ticket.url, token=ticket)  # is not read); redirects: _robots_hop

    # ----------------------------------------------------------------------------- results

    def _handle(self, r: FetchResult) -> None:
        ticket = r.request.token
        assert isinstance(ticket, Ticket)
        if ticket.robots:
            self._robots_result(ticket, r)
            return
        facts = _completion(r)  # the frontier decides retries and holds from these
        if r.error is ErrorKind.ADDRESS_REFUSED:  # never retried: the host is given up
            self.frontier.complete(ticket, facts)
            self._record(ticket, r, Outcome.ADDRESS_REFUSED)
            self.frontier.retire(ticket.origin, Outcome.ADDRESS_REFUSED.value)
            return
        if self.frontier.will_retry(ticket, facts):
            self._retry(ticket, facts)
            return
        archived = self._archive(r)  # a failure whose response had begun: as truncated
        outcome, yielded = self._dispose(ticket, r)
        t0 = time.perf_counter()
        settled = self.frontier.complete(ticket, facts, mark_done=not archived)
        held = settled.held_s
        self._times.frontier += time.perf_counter() - t0
        if settled.failed or held > 0:
            self._failed_at(ticket.origin, held)
        self._record(ticket, r, outcome, archived, self._held.pop(ticket.key, 0.0) + held,
                     yielded)  # fmt: skip

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
        elif not self._robots_hop(ticket, r):
            status = r.status if r.error is None else 0
            frontier.robots_done(ticket, r.finished, status, r.body, r.duration_s, r.ip,
                                 retry_after=r.header("retry-after"))  # fmt: skip
        self._times.frontier += time.perf_counter() - t0
        self._warc_needed = self._archive(r) or self._warc_needed
        self._record(ticket, r, Outcome.ROBOTS_TXT)

    def _robots_hop(self, ticket: Ticket, r: FetchResult) -> bool:
        """A robots.txt redirect: its target handed back to the frontier as the host's next
        robots ticket, if it is within ROBOTS_REDIRECTS hops and in scope. False (the fetch
        is finished with this answer) for anything else."""
        if r.error is not None or not 300 <= r.status < 400 or r.not_modified is not None:
            return False
        location = r.header("location")
        if not location or ticket.hops >= ROBOTS_REDIRECTS:
            return False
        target = resolve_location(r.url, location)
        if target is not None and self.frontier.robots_redirect(ticket, target):
            return True
        log.info("robots.txt of %s redirects to %r, not followed (not an http(s) URL in "
                 "scope): unavailable", ticket.origin, location)  # fmt: skip
        return False

    def _retry(self, ticket: Ticket, facts: Completion) -> None:
        """A transient failure the frontier retries (``Frontier.will_retry``): back to it."""
        t0 = time.perf_counter()
        held = self.frontier.complete(ticket, facts).held_s
        self._times.frontier += time.perf_counter() - t0
        self._failed_at(ticket.origin, held)
        if held > 0:
            self._held[ticket.key] = self._held.get(ticket.key, 0.0) + held

    def _dispose(self, ticket: Ticket, r: FetchResult) -> tuple[Outcome, Yielded | None]:
        """Feed a final result's links (or what its spider callback yields) or redirect target
        back; return its outcome, and what the callback gave if the page went to one."""
        if r.error is not None:
            return Outcome.FAILED, None
        if 300 <= r.status < 400 and r.header("location") and r.not_modified is None:
            return self._redirect(ticket, r), None  # never to a callback: the target is
        spider = self._spider
        if 200 <= r.status < 300 or r.not_modified is not None:
            t0 = time.perf_counter()
            ctype = r.header("content-type") or ""
            links = self.parser.parse(r.url, ctype, r.body)
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
        t0 = time.perf_counter()
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
        t1 = time.perf_counter()
        yielded = spider.run(page)
        t2 = time.perf_counter()
        times = self._times
        times.frontier += t1 - t0  # the page's links, canonical and in scope
        times.callbacks += t2 - t1  # callbacks, rules and pipelines
        self.stats.spider_time(yielded.callback_s, yielded.pipeline_s)
        # one add per run of requests that share callback, meta and priority (groupby and
        # attrgetter run in C: most pages yield one run)
        add, depth = self.frontier.add, ticket.depth + 1
        for (callback, meta, priority), run in groupby(yielded.requests, _REQUEST_KEY):
            add(list(map(_URL, run)), depth=depth, referrer=ticket.url, now=r.finished,
                callback=callback, meta=meta, priority=priority)  # fmt: skip
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
        t0 = time.perf_counter()
        seen = r.not_modified
        seq = self._warc.write(
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
        self._times.warc += time.perf_counter() - t0
        return seq

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
        if not ticket.robots:  # the report's slowest and most failing hosts
            failed = outcome is Outcome.FAILED or r.status >= 500
            self.stats.record_host(ticket.origin, r.duration_s, failed)
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

    # ----------------------------------------------------------------------------- operator

    def _start_control(self) -> None:
        """Serve the control API if ``[control] listen`` is set (not in a worker process: its
        coordinator serves the crawl's one API and forwards commands)."""
        listen = self.settings.control.listen
        if not listen or self._commands is not None or self._peers is not None:
            return
        from frontier_crawl.control.server import ControlServer  # http.server: ~50 ms

        self._control = ControlServer(
            listen, self.layout.root, self._fresh_status, self._metrics_text
        )
        self._commands = self._control.queue

    def _wake_on_commands(self) -> None:
        wake_on = getattr(self.fetcher, "wake_on", None)
        if wake_on is not None and self._commands is not None:  # a command ends a wait in poll
            wake_on(self._commands.fileno)

    def _stop_control(self) -> None:
        if self._control is not None:
            with _quiet():
                self._control.close()
            self._control = None

    def _fresh_status(self) -> dict[str, Any]:
        """``status()`` for the API (HTTP thread): the loop publishes only while someone asks,
        so after a quiet spell (or at the first request) wait, briefly, for a snapshot taken
        after this request came, rather than answer with an old or empty one."""
        asked = time.monotonic()
        snapshot = self.status()
        deadline = asked + 3 * SAMPLE_EVERY_S
        while (self._status is None or self._status_at < asked - SAMPLE_EVERY_S) and (
            self._state != "finished" and time.monotonic() < deadline
        ):
            time.sleep(0.01)
            snapshot = self.status()
        return snapshot

    def _metrics_text(self) -> bytes:
        """Prometheus text from the latest published metrics snapshot (any thread)."""
        from frontier_crawl.control.metrics import render_metrics

        self._fresh_status()  # published together with the metrics
        return render_metrics([self.metrics()])

    def _take_commands(self, now: float) -> bool:
        """Apply the operator's commands posted since the last tick (and a SIGHUP's reload);
        True if any was applied."""
        pending = self._commands.take() if self._commands is not None else ()
        if getattr(self._commands, "closed", False):  # a worker's pipe whose other end is gone
            wake_on = getattr(self.fetcher, "wake_on", None)
            if wake_on is not None:
                wake_on(None)
            self._commands = None
        if self._reload_requested:
            self._reload_requested = False
            reply = self._reload(time.monotonic())  # logs what it applied or refused
            if "error" not in reply and not reply.get("changed"):
                log.warning("SIGHUP: %s read again: nothing changed", self._config_path)
        replies = []
        for item in pending:
            try:
                replies.append(self.apply(item.command, time.monotonic()))
            except ConfigError as exc:
                replies.append({"error": str(exc)})
            except OSError:  # a failed write (LMDB, outputs): the run ends as for any other
                for rest in pending:
                    rest.answer({"error": "a write failed: the crawl is stopping"})
                raise
            except Exception as exc:  # a bad command must not end the crawl: say so, go on
                log.exception("operator command %s failed", item.command.name)
                replies.append({"error": f"{item.command.name} failed: {exc!r}"})
        if pending:  # a status read after the reply shows the change
            self._sample(time.monotonic(), force=True)
        for item, reply in zip(pending, replies, strict=True):
            item.answer(reply)
        return bool(pending)

    def apply(self, command: Command, now: float) -> dict[str, Any]:
        """Apply one operator command in the loop; the reply for the API. Crawl-state changes
        (blocks, host delays, seeds) go into the open group commit, durable with it."""
        name = command.name
        applied: dict[str, Any] = {"result": "applied", "command": name}
        if name == "pause":
            if not self._paused:
                log.warning("paused by the operator: no new requests (in-flight ones finish)")
            self._paused = True
            return {**applied, "paused": True, "in_flight": self.fetcher.in_flight}
        if name == "resume":
            if self._paused:
                log.warning("resumed by the operator")
            self._paused = False
            return {**applied, "paused": False}
        if name == "stop":
            if not self._stop_requested:
                self._stop_requested = 1
                log.warning("stop requested by the operator: finishing in-flight transfers "
                            "(up to %.0f s), then stopping",
                            self.settings.crawl.stop_timeout_s)  # fmt: skip
            return {**applied, "in_flight": self.fetcher.in_flight}
        if name == "concurrency":
            set_concurrency = getattr(self.fetcher, "set_concurrency", None)
            if set_concurrency is None:
                return {"error": "this fetcher's concurrency cannot be changed"}
            set_concurrency(command.value)
            log.warning("concurrency set to %d by the operator", command.value)
            return {**applied, "concurrency": command.value}
        if name == "reload":
            return self._reload(now)
        if name == "status":  # from a worker's coordinator: a fresh snapshot (the loop's thread)
            return {**self.status(), "metrics": self.metrics()}
        self._dirty = True
        if self._group is None:
            self._open_group(now)
        frontier = self.frontier
        if name == "seeds":
            admitted = frontier.add(command.urls, depth=0, now=now)
            log.warning("%d of %d seed(s) added by the operator admitted", admitted,
                        len(command.urls))  # fmt: skip
            return {**applied, "given": len(command.urls), "admitted": admitted}
        if name == "block":
            held = frontier.block(command.host, now)
            log.warning("host %s blocked by the operator (%d URLs held)", command.host, held)
            return {**applied, "host": command.host, "held": held}
        if name == "unblock":
            released = frontier.unblock(command.host, now)
            log.warning("host %s unblocked by the operator", command.host)
            return {**applied, "host": command.host, "released": released}
        if name == "host-delay":
            hosts = frontier.set_host_delay(command.host, command.delay_s, now)
            log.warning("host %s: delay %s by the operator", command.host,
                        "back to the config" if command.delay_s is None
                        else f"set to {command.delay_s:g} s")  # fmt: skip
            return {**applied, "host": command.host, "delay_s": command.delay_s, "origins": hosts}
        return {"error": f"unknown command {name!r}"}

    def _reload(self, now: float) -> dict[str, Any]:
        """Read crawl.toml again: apply its changed tunables, or refuse it all (a bad file, a
        changed identity or fixed key) and keep the running config."""
        if self._config_path is None:
            return {"error": "not reloaded: this crawl was not started from a config file"}
        try:
            new = load(self._config_path)
            check_scope(new)
        except ConfigError as exc:
            log.error("config not reloaded, the running config stays: %s", exc)
            return {"error": f"config not reloaded, the running config stays: {exc}"}
        plan = reload_plan(self._loaded, new)
        if plan.refused:
            log.error("%s", plan.message)
            return {"error": plan.message, "refused": list(plan.refused)}
        if plan.changed:
            self._loaded = new
            if self._reshape is not None:
                new = self._reshape(new)
            self.settings = new
            self.frontier.reconfigure(new, now)
            reconfigure = getattr(self.fetcher, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(new.fetch, new.politeness)
            self._space.min_free_bytes = new.output.min_free_bytes
            log.warning("config reloaded: %s", ", ".join(plan.changed))
        return {"result": "applied", "command": "reload", "changed": list(plan.changed)}

    # ----------------------------------------------------------------------------- lifecycle

    def _checkpoint(self) -> None:
        self._log.flush()
        self.frontier.checkpoint()

    def _progress(self) -> None:
        if self._on_progress is not None:
            self._on_progress(self.progress())

    def progress(self) -> dict[str, Any]:
        """A snapshot for progress displays (``bottleneck``: the status's, as one line)."""
        elapsed = time.monotonic() - self._started
        pages = self.stats.pages
        bottleneck = self.status()["bottleneck"]
        return {
            "elapsed_s": elapsed,
            "pages": pages,
            "pages_per_s": pages / elapsed if elapsed > 0 else 0.0,
            "in_flight": self.fetcher.in_flight,
            "paused_for_space": self._low_space is not None,
            "bottleneck": f"{bottleneck['name']}: {bottleneck['detail']}",
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

    # ----------------------------------------------------------------------------- status

    def status(self) -> dict[str, Any]:
        """The crawl's status (``control/status.py``; the shape of ``GET /api/status``).

        Safe from any thread: another thread gets the snapshot the loop published last (at
        most SAMPLE_EVERY_S old while someone keeps asking; the first call only starts the
        publishing and gets the one before, or an empty status). The loop's own thread (a
        progress callback) gets a fresh one. Never mutate the dict returned."""
        self._status_wanted = time.monotonic()
        if threading.get_ident() == self._loop_thread and self._state != "finished":
            snapshot = self._status
            if snapshot is None or self._status_wanted - self._status_at >= SAMPLE_EVERY_S:
                self._sample(self._status_wanted, force=True)
        return self._status or empty_status(self._state)

    def metrics(self) -> dict[str, Any]:
        """Counters for ``control.metrics.render_metrics`` (published with the status; same
        rules as :meth:`status`)."""
        self.status()
        return self._metrics or {"worker": str(self._worker_label), "status": self.status()}

    @property
    def _worker_label(self) -> int:
        return self._peers.worker if self._peers is not None else 0

    def _waited(self) -> float:
        waited: float = getattr(self.fetcher, "waited_s", 0.0)  # a null fetcher never waits
        return waited

    def _failed_at(self, origin: str, held: float) -> None:
        """Count a failed fetch of ``origin`` (and the hold it caused) for ``failing_hosts``."""
        failing = self._failing
        entry = failing.get(origin)
        if entry is None:
            if len(failing) >= MAX_FAILING_HOSTS:
                for key in sorted(failing, key=lambda k: failing[k][0])[: MAX_FAILING_HOSTS // 2]:
                    del failing[key]
            entry = failing[origin] = [0.0, 0.0]
        entry[0] += 1
        entry[1] += max(0.0, held)

    def _sample(self, now: float, force: bool = False) -> None:
        """Take a sample of the accumulators; publish a status if someone asked lately."""
        self._next_sample = now + SAMPLE_EVERY_S
        t, f = self._times, self.fetcher
        sample = Sample(
            t=now, wall=time.time(), pages=self.stats.pages, waited=self._waited(),
            parse=t.parse, callbacks=t.callbacks, warc=t.warc, frontier=t.frontier,
            fetch=t.fetch, dns=getattr(f, "dns_s", 0.0), transfer=getattr(f, "transfer_s", 0.0),
            admitted=self.frontier.admitted,
        )  # fmt: skip
        self._recorder.add(sample)
        if force or now - self._status_wanted < STATUS_WANTED_S:
            self._build_status(now, sample)

    def _crawl_state(self) -> CrawlState:
        if self._state != "running":
            return self._state
        if self._stop_requested or self._halt:
            return "stopping"
        return "paused" if self._paused else "running"

    def _signals(self, now: float, window_busy: float, shares: dict[str, float],
                 dns_share: float) -> tuple[Signals, HostSignals]:  # fmt: skip
        hs = self.frontier.host_signals(now)
        holds: tuple[HostHold, ...] = ()
        if hs.next_due is not None:
            origin_, reason, wait = hs.next_due
            holds = (HostHold(origin_, reason, wait),)
        elif hs.robots:
            holds = (HostHold("", "robots", 0.0),)
        elif hs.blocked and hs.blocked >= hs.total:
            holds = (HostHold("", "blocked", 0.0),)
        fetcher = self.fetcher
        sig = Signals(
            state=self._crawl_state(),
            stop_requested=bool(self._stop_requested or self._halt),
            paused=self._paused,
            low_space=self._low_space is not None,
            held_up=self._peers.held_up(self._held_up) if self._held_up and self._peers else "",
            in_flight=fetcher.in_flight,
            # the configured number (in flight + free is more while a lowered one drains)
            concurrency=getattr(fetcher, "concurrency", fetcher.in_flight + fetcher.free_slots),
            queued=self.frontier.queued,
            hosts_total=hs.total,
            hosts_ready=hs.ready,
            hosts_waiting=hs.waiting,
            hosts_backoff=hs.backoff,
            hosts_robots=hs.robots,
            hosts_blocked=hs.blocked,
            loop_busy=window_busy,
            shares=shares,
            dns_share=dns_share,
            since_request_s=now - self._last_request,
            holds=holds,
            worst_backoff=tuple(HostHold(o, r, w) for o, r, w in hs.worst),
        )
        return sig, hs

    def _build_status(self, now: float, sample: Sample) -> None:
        """Build the status and metrics snapshots and publish them (replaced whole)."""
        window = self._recorder.window(sample)
        sig, hs = self._signals(now, window.loop_busy, window.shares, window.dns_share)
        frontier = self.frontier
        if now >= self._busiest_at:
            t0 = time.perf_counter()
            self._busiest = [
                {"host": h, "pages": started, "queued": queued}
                for h, started, queued in frontier.busiest(10)
            ]
            spent = time.perf_counter() - t0
            self._busiest_at = now + max(BUSIEST_EVERY_S, spent / BUSIEST_SHARE)
        failing = sorted(self._failing.items(), key=lambda kv: kv[1][0], reverse=True)[:10]
        queued, hot = frontier.queued, frontier.hot_total
        status: dict[str, Any] = {
            "state": sig.state,
            "bottleneck": classify(sig).as_dict(),
            "elapsed_s": round(self._elapsed_before + now - self._started, 3),
            "pages": sample.pages,
            "pages_per_s": round(window.pages_per_s, 3),
            "queued": queued,
            "queued_memory": min(hot, queued),
            "queued_disk": max(0, queued - hot),
            "in_flight": sig.in_flight,
            "concurrency": sig.concurrency,
            "hosts": {
                "total": hs.total,
                "ready": hs.ready,
                "waiting": hs.waiting,
                "backoff": hs.backoff,
                "robots": hs.robots,
                "blocked": hs.blocked,
            },
            "outcomes": dict(self.stats.outcomes),
            "busiest_hosts": self._busiest,
            "failing_hosts": [
                {"host": h, "failures": int(n), "held_s": round(held, 3)}
                for h, (n, held) in failing
            ],
            "cpu": {
                "loop_busy": round(window.loop_busy, 4),
                "shares": {k: round(v, 4) for k, v in window.shares.items()},
            },
            "history": [list(point) for point in self._recorder.history],
            "paused": self._paused,
            "blocked_hosts": frontier.blocked_hosts,
            "host_delays": frontier.host_delays,
            "workers": [],
        }
        self._status, self._status_at = status, now
        self._metrics = self._metrics_snapshot(status, window.admitted_per_s, hs.retired)

    def _metrics_snapshot(
        self, status: dict[str, Any], admitted_per_s: float, retired: int
    ) -> dict[str, Any]:
        """The counters ``render_metrics`` turns into Prometheus metrics (worker's label)."""
        f, t, seen = self.fetcher, self._times, self.frontier.seen_stats()
        warc_bytes = 0
        if self._warc is not None:
            for path in self._warc.paths:
                with suppress(OSError):  # renamed from .open meanwhile: counted next time
                    warc_bytes += path.stat().st_size
        return {
            "worker": str(self._worker_label),
            "status": status,
            "bytes": self.stats.bytes,
            "fetch_time_buckets": list(FETCH_TIME_BUCKETS),
            "fetch_time_counts": list(getattr(f, "fetch_times", [])),
            "fetch_time_sum": getattr(f, "transfer_s", 0.0),
            "requests": t.requests,
            "admitted": self.frontier.admitted,
            "admitted_per_s": admitted_per_s,
            "hosts_retired": retired,
            "bloom_fill": float(seen.get("bloom_fill", 0.0)),
            "bloom_count": int(seen.get("count", 0)),
            "bloom_capacity": int(seen.get("capacity", 0)),
            "bloom_false_positives": float(seen.get("estimated_false_positives", 0.0)),
            "warc_bytes": warc_bytes,
            "commit_s": t.commit,
            "commits": t.commits,
            "callback_s": t.callbacks,
            "parse_s": t.parse,
            "warc_s": t.warc,
            "frontier_s": t.frontier,
            "fetch_s": t.fetch,
            "dns_s": getattr(f, "dns_s", 0.0),
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
        self._state = "finished"
        with _quiet():  # the last status: finished, with the final counters
            self._sample(time.monotonic(), force=True)
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

    def _install_signals(self) -> dict[int, Any]:
        """The main process's handlers; a worker ignores the terminal's signals (sent to
        every process of the crawl at once): its coordinator orders it (``_obey_coordinator``)."""
        previous: dict[int, Any] = {}
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                handler = self._on_hangup if sig == signal.SIGHUP else self._on_signal
                ours = handler if self._peers is None else signal.SIG_IGN
                previous[sig] = signal.signal(sig, ours)
            except ValueError:  # not the main thread
                break
        return previous

    def _obey_coordinator(self) -> None:
        """A worker: its coordinator's stop and reload orders (its signals, passed on)."""
        assert self._peers is not None
        stop, reloads = self._peers.orders()
        if stop and not self._stop_requested:
            self._stop_requested = 1
            log.warning(
                "worker %d: stopping: finishing in-flight transfers (up to %.0f s)",
                self._peers.worker, self.settings.crawl.stop_timeout_s,
            )  # fmt: skip
        if reloads != self._reloads_seen:
            self._reloads_seen = reloads
            self._reload_requested = True

    def _on_hangup(self, signum: int, frame: FrameType | None) -> None:
        """SIGHUP: read crawl.toml again (in the loop, at its next tick)."""
        del signum, frame
        self._reload_requested = True

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
