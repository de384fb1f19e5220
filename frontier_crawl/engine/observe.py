"""Observing the crawl, read-only: the status (``control/status.py``; ``GET /api/status``),
the metrics (``control/metrics.py``) and the progress line, from the loop's timings
(``LoopTimes``), its state (``LoopState``) and the counters of the commit group.

The loop takes a sample of its accumulators every SAMPLE_EVERY_S (``sample``); a status is
built from the samples only while someone asked for one lately (STATUS_WANTED_S) and is
published whole (other threads read the last one published; never mutated once published).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

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
from frontier_crawl.engine.commit import CommitGroup
from frontier_crawl.engine.seams import FetcherLike, PeersLike
from frontier_crawl.engine.state import LoopState
from frontier_crawl.fetch import FETCH_TIME_BUCKETS, ErrorKind
from frontier_crawl.frontier import HostSignals
from frontier_crawl.frontier.faces import Watched
from frontier_crawl.output import WarcWriter

#: a status is built only while someone asked for one in the last this many seconds
#: (``Observer.status``); samples are taken regardless
STATUS_WANTED_S = 10.0
#: failing hosts remembered for the status (the least failing dropped past this many)
MAX_FAILING_HOSTS = 1000
#: the freshness rates (``per_hour``) are over this window (or since the run began), from
#: points of the visit totals kept at most every FRESHNESS_POINT_S
FRESHNESS_WINDOW_S = 3600.0
FRESHNESS_POINT_S = 10.0


@dataclass(slots=True)
class Failing:
    """A host's failed fetches this run, for the status's ``failing_hosts``."""

    failures: int = 0
    held_s: float = 0.0  #: seconds its failures held it (backoff, Retry-After)
    error: str = ""  #: the latest failure's error kind ("dns-error"...) or "http 503"


class FreshnessRates:
    """The ``per_hour`` rates of a continuous crawl's ``freshness``: changes seen, revisits
    and new pages per hour, from the frontier's visit totals (which survive restarts: the
    rates are this run's, over the last hour or since the run began when shorter)."""

    def __init__(self) -> None:
        #: (monotonic time, changes, revisits, new pages), oldest first, within the window
        self._points: deque[tuple[float, int, int, int]] = deque()

    def rates(self, now: float, visits: Mapping[str, int]) -> dict[str, float]:
        new = int(visits.get("new", 0))
        changes = int(visits.get("changed", 0))
        revisits = sum(int(n) for kind, n in visits.items() if kind != "new")
        points = self._points
        if not points or now - points[-1][0] >= FRESHNESS_POINT_S:
            points.append((now, changes, revisits, new))
        while len(points) > 1 and now - points[1][0] >= FRESHNESS_WINDOW_S:
            points.popleft()
        t0, c0, r0, n0 = points[0]
        span = now - t0
        per_hour = 3600.0 / span if span > 0 else 0.0
        return {
            "changes": round((changes - c0) * per_hour, 1),
            "revisits": round((revisits - r0) * per_hour, 1),
            "new_pages": round((new - n0) * per_hour, 1),
        }


class Observer:
    """Status, metrics and progress of one crawl process, from the parts it is given."""

    def __init__(
        self,
        frontier: Watched,
        fetcher: FetcherLike,
        group: CommitGroup,
        times: LoopTimes,
        run: LoopState,
        *,
        waited: Callable[[], float],
        peers: PeersLike | None = None,
        archive: WarcWriter | None = None,
        with_spider: bool = False,
    ) -> None:
        """``waited``: the fetcher's seconds spent waiting so far; ``peers``: the other
        workers (this worker's label, why batches are held up); ``archive``: the WARC writer
        (its files' bytes); ``with_spider``: the progress line shows the spider's share."""
        self.frontier = frontier
        self.fetcher = fetcher
        self._group = group
        self._times = times
        self._run = run
        self._waited = waited
        self._peers = peers
        self._archive = archive
        self._with_spider = with_spider
        self._recorder = Recorder()
        self.next_sample = 0.0  #: when the loop takes the next sample
        self._status_wanted = float("-inf")
        self._status_at = float("-inf")
        self._status: dict[str, Any] | None = None
        self._metrics: dict[str, Any] | None = None
        #: bytes of the finished WARC files, and how many of them are counted in it
        self._warc_bytes = 0
        self._warc_files = 0
        #: origin -> [failures, seconds held, the last failure's error kind or HTTP status]
        self._failing: dict[str, Failing] = {}
        self._rates = FreshnessRates()

    def published(self, max_age_s: float) -> dict[str, Any] | None:
        """The latest published status with its metrics under ``"metrics"`` (a worker's reply
        to its coordinator), if the loop took it within ``max_age_s``; None otherwise (the loop
        then answers with a fresh one). Safe from any thread; marks the status wanted, so the
        loop goes on publishing while someone asks."""
        now = time.monotonic()
        self._status_wanted = now
        status, metrics, taken = self._status, self._metrics, self._status_at
        if status is None or metrics is None or now - taken > max_age_s:
            return None
        if self._run.state == "finished":
            return None
        return {**status, "metrics": metrics}

    def fresh_status(self) -> dict[str, Any]:
        """``status()`` for the API (HTTP thread): the loop publishes only while someone asks,
        so after a quiet spell (or at the first request) wait, briefly, for a snapshot taken
        after this request came, rather than answer with an old or empty one."""
        asked = time.monotonic()
        snapshot = self.status()
        deadline = asked + 3 * SAMPLE_EVERY_S
        while (self._status is None or self._status_at < asked - SAMPLE_EVERY_S) and (
            self._run.state != "finished" and time.monotonic() < deadline
        ):
            time.sleep(0.01)
            snapshot = self.status()
        return snapshot

    def metrics_text(self) -> bytes:
        """Prometheus text from the latest published metrics snapshot (any thread)."""
        from frontier_crawl.control.metrics import render_metrics

        self.fresh_status()  # published together with the metrics
        return render_metrics([self.metrics()])

    def progress(self) -> dict[str, Any]:
        """A snapshot for progress displays: the status's figures (``figures.py``: pages,
        revisits, elapsed over every run, the rate over the last ten seconds, this run's
        apart), its bottleneck as one line."""
        status = self.status()
        bottleneck = status["bottleneck"]
        return {
            **self.frontier.view.stats(),
            "elapsed_s": status["elapsed_s"],
            "pages": status["pages"],
            "revisits": status["revisits"],
            "pages_per_s": status["pages_per_s"],
            "revisits_per_s": status["revisits_per_s"],
            "this_run": status["this_run"],
            "continuous": bool(status["freshness"].get("enabled")),
            "in_flight": status["in_flight"],
            "queued": status["queued"],
            "paused_for_space": self._run.low_space is not None,
            "bottleneck": f"{bottleneck['name']}: {bottleneck['detail']}",
            **self._spider_progress(float(status["elapsed_s"])),
        }

    def _spider_progress(self, total: float) -> dict[str, Any]:
        """With a spider: items so far, and time per page in callbacks and pipelines (median
        and p99 in ms over the whole crawl) and their share of the crawl's time (``total``:
        every run's seconds)."""
        if not self._with_spider:
            return {}
        cb, pl = self._group.stats.callback_time, self._group.stats.pipeline_time
        return {
            "items": self._group.stats.items,
            "callback_ms": (cb.quantile(0.5) * 1e3, cb.quantile(0.99) * 1e3),
            "pipeline_ms": (pl.quantile(0.5) * 1e3, pl.quantile(0.99) * 1e3),
            "spider_share": (cb.total_s + pl.total_s) / total if total > 0 else 0.0,
        }

    def status(self) -> dict[str, Any]:
        """The crawl's status (``control/status.py``; the shape of ``GET /api/status``).

        Safe from any thread: another thread gets the snapshot the loop published last (at
        most SAMPLE_EVERY_S old while someone keeps asking; the first call only starts the
        publishing and gets the one before, or an empty status). The loop's own thread (a
        progress callback) gets a fresh one. Never mutate the dict returned."""
        self._status_wanted = time.monotonic()
        if threading.get_ident() == self._run.thread and self._run.state != "finished":
            snapshot = self._status
            if snapshot is None or self._status_wanted - self._status_at >= SAMPLE_EVERY_S:
                self.sample(self._status_wanted, force=True)
        return self._status or empty_status(self._run.state)

    def metrics(self) -> dict[str, Any]:
        """Counters for ``control.metrics.render_metrics`` (published with the status; same
        rules as :meth:`status`)."""
        self.status()
        return self._metrics or {"worker": str(self._worker_label), "status": self.status()}

    @property
    def _worker_label(self) -> int:
        return self._peers.worker if self._peers is not None else 0

    def failed_at(self, origin: str, held: float, error: str) -> None:
        """Count a failed fetch of ``origin`` (and the hold it caused) for ``failing_hosts``;
        ``error``: its error kind ("dns-error"...) or HTTP status ("http 503"), which names a
        host held by DNS failures as such in the bottleneck (:meth:`_signals`)."""
        failing = self._failing
        entry = failing.get(origin)
        if entry is None:
            if len(failing) >= MAX_FAILING_HOSTS:
                by_count = sorted(failing, key=lambda k: failing[k].failures)
                for key in by_count[: MAX_FAILING_HOSTS // 2]:
                    del failing[key]
            entry = failing[origin] = Failing()
        entry.failures += 1
        entry.held_s += max(0.0, held)
        entry.error = error

    _CONNECTION_ERRORS = frozenset({ErrorKind.DNS.value, ErrorKind.CONNECT.value,
                                    ErrorKind.TLS.value})  # fmt: skip

    def _why_held(self, origin: str, reason: str) -> str:
        """A backoff after connection failures says which ("dns-error", "connect-error",
        "tls-error": the host's last failure), so the bottleneck names a name that does not
        resolve as such; other holds as the frontier names them."""
        if reason != "backoff":
            return reason
        entry = self._failing.get(origin)
        if entry is not None and entry.error in self._CONNECTION_ERRORS:
            return entry.error
        return reason

    def sample(self, now: float, force: bool = False) -> None:
        """Take a sample of the accumulators; publish a status if someone asked lately."""
        self.next_sample = now + SAMPLE_EVERY_S
        t, f = self._times, self.fetcher
        sample = Sample(
            t=now, wall=time.time(), pages=self._group.stats.pages,
            revisits=self._group.stats.revisits, waited=self._waited(),
            parse=t.parse, callbacks=t.callbacks, warc=t.warc, frontier=t.frontier,
            fetch=t.fetch, dns=getattr(f, "dns_s", 0.0), transfer=getattr(f, "transfer_s", 0.0),
            admitted=self.frontier.view.admitted,
        )  # fmt: skip
        self._recorder.add(sample)
        if force or now - self._status_wanted < STATUS_WANTED_S:
            self._build_status(now, sample)

    def begin(self, now: float) -> None:
        """The run begins: the freshness rates count from here (not from the first status
        someone asks for)."""
        if self.frontier.view.continuous:
            self.freshness(now)

    def freshness(self, now: float) -> dict[str, Any]:
        """The ``freshness`` dict of the status and the report (docs/continuous.md): the frontier's,
        with the ``per_hour`` rates; ``{"enabled": false}`` without ``[recrawl]``."""
        fresh: dict[str, Any] = dict(self.frontier.view.freshness(time.time()))
        if fresh.get("enabled"):
            fresh["per_hour"] = self._rates.rates(now, fresh.get("visits") or {})
        return fresh

    def _crawl_state(self) -> CrawlState:
        if self._run.state != "running":
            return self._run.state
        if self._run.stopping:
            return "stopping"
        return "paused" if self._run.paused else "running"

    def _signals(
        self, now: float, window_busy: float, shares: dict[str, float], dns_share: float,
        fresh: Mapping[str, Any],
    ) -> tuple[Signals, HostSignals]:  # fmt: skip
        hs = self.frontier.view.host_signals(now)
        holds: tuple[HostHold, ...] = ()
        if hs.next_due is not None:
            origin_, reason, wait = hs.next_due
            holds = (HostHold(origin_, self._why_held(origin_, reason), wait),)
        elif hs.robots:
            holds = (HostHold("", "robots", 0.0),)
        elif hs.blocked and hs.blocked >= hs.total:
            holds = (HostHold("", "blocked", 0.0),)
        fetcher, run = self.fetcher, self._run
        sig = Signals(
            state=self._crawl_state(),
            stop_requested=self._run.stopping,
            paused=self._run.paused,
            low_space=self._run.low_space is not None,
            held_up=self._peers.held_up(run.held_up) if run.held_up and self._peers else "",
            in_flight=fetcher.in_flight,
            # the configured number (in flight + free is more while a lowered one drains)
            concurrency=getattr(fetcher, "concurrency", fetcher.in_flight + fetcher.free_slots),
            queued=self.frontier.view.queued,
            hosts_total=hs.total,
            hosts_ready=hs.ready,
            hosts_waiting=hs.waiting,
            hosts_backoff=hs.backoff,
            hosts_robots=hs.robots,
            hosts_blocked=hs.blocked,
            loop_busy=window_busy,
            shares=shares,
            dns_share=dns_share,
            since_request_s=now - self._run.last_request,
            holds=holds,
            worst_backoff=tuple(HostHold(o, self._why_held(o, r), w) for o, r, w in hs.worst),
            revisits_due=int(fresh.get("due_now") or 0),
            next_due_s=fresh.get("next_due_s"),
        )
        return sig, hs

    def _build_status(self, now: float, sample: Sample) -> None:
        """Build the status and metrics snapshots and publish them (replaced whole)."""
        window = self._recorder.window(sample)
        fresh = self.freshness(now)
        sig, hs = self._signals(now, window.loop_busy, window.shares, window.dns_share, fresh)
        frontier = self.frontier
        busiest = [  # kept as requests start: no scan of the hosts
            {"host": h, "pages": started, "queued": queued}
            for h, started, queued in frontier.view.busiest(10)
        ]
        failing = sorted(self._failing.items(), key=lambda kv: kv[1].failures, reverse=True)[:10]
        queued, hot = frontier.view.queued, frontier.view.hot_total
        figures = self._group.figures(now)
        status: dict[str, Any] = {
            "state": sig.state,
            "bottleneck": classify(sig).as_dict(),
            "elapsed_s": round(figures.elapsed_s, 3),
            "pages": figures.pages,
            "pages_per_s": round(window.pages_per_s, 3),
            "revisits": figures.revisits,
            "revisits_per_s": round(window.revisits_per_s, 3),
            "this_run": figures.this_run(),
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
            "outcomes": dict(self._group.stats.outcomes),
            "busiest_hosts": busiest,
            "failing_hosts": [
                {"host": h, "failures": f.failures, "held_s": round(f.held_s, 3), "error": f.error}
                for h, f in failing
            ],
            "cpu": {
                "loop_busy": round(window.loop_busy, 4),
                "shares": {k: round(v, 4) for k, v in window.shares.items()},
            },
            "history": [list(point) for point in self._recorder.history],
            "paused": self._run.paused,
            "blocked_hosts": frontier.holds.blocked_hosts,
            "host_delays": frontier.holds.host_delays,
            "workers": [],
            "freshness": fresh,
        }
        self._status, self._status_at = status, now
        self._metrics = self._metrics_snapshot(status, window.admitted_per_s, hs.retired)

    def _metrics_snapshot(
        self, status: dict[str, Any], admitted_per_s: float, retired: int
    ) -> dict[str, Any]:
        """The counters ``render_metrics`` turns into Prometheus metrics (worker's label)."""
        f, t, seen = self.fetcher, self._times, self.frontier.view.seen_stats()
        if self._archive is not None:  # finished files keep their size: each is read once
            paths = self._archive.paths
            for path in paths[self._warc_files :]:
                with suppress(OSError):  # removed by someone since: not counted
                    self._warc_bytes += path.stat().st_size
            self._warc_files = len(paths)
        return {
            "worker": str(self._worker_label),
            "status": status,
            "bytes": self._group.stats.bytes,
            "fetch_time_buckets": list(FETCH_TIME_BUCKETS),
            "fetch_time_counts": list(getattr(f, "fetch_times", [])),
            "fetch_time_sum": getattr(f, "transfer_s", 0.0),
            "requests": t.requests,
            "admitted": self.frontier.view.admitted,
            "admitted_per_s": admitted_per_s,
            "hosts_retired": retired,
            "seen_urls": int(seen.get("count", 0)),
            "warc_bytes": self._warc_bytes,
            "commit_s": t.commit,
            "commits": t.commits,
            "callback_s": t.callbacks,
            "parse_s": t.parse,
            "warc_s": t.warc,
            "frontier_s": t.frontier,
            "fetch_s": t.fetch,
            "dns_s": getattr(f, "dns_s", 0.0),
        }
