"""Crawl counters and the final report (``report.json`` plus a table on the console).

:class:`CrawlStats` is fed one call per crawl-log entry. robots.txt fetches (outcome
``robots-txt``) count towards ``bytes``, ``errors_by_kind`` and ``timeouts`` (they are network
work) but not towards page counters such as ``status_classes`` or ``not_found_404``: a missing
robots.txt is not a broken page.
"""

from __future__ import annotations

import json
import math
import time
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frontier_crawl.figures import (
    Figures,
    count_text,
    duration_text,
    rate_text,
    this_run_text,
)
from frontier_crawl.output.fsync import write_atomic
from frontier_crawl.output.outcomes import Outcome

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from frontier_crawl.config import CrawlSettings

_STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
HOLDS_KEPT = 20  #: the URLs that held their hosts longest, kept for the report
_TIMEOUT = "timeout"
RATE_BUCKET_S = 60.0  #: width of a pages-over-time bucket at first (doubled as they merge)
MAX_RATE_BUCKETS = 1000  #: past this many buckets, neighbours are merged pairwise
MAX_RUNS = 1000  #: runs remembered (for the rate of each bucket); the oldest merge past this
#: hosts tallied for the report's slowest and most failing hosts; past twice this many, the
#: table is cut back to the most failing and the slowest, HOSTS_KEPT / 2 of each (a bounded
#: sketch: a host cut early and failing later is counted from then on)
HOSTS_KEPT = 200
HOSTS_SHOWN = 10  #: hosts listed in the report, per list


def _zero_classes() -> dict[str, int]:
    return dict.fromkeys(_STATUS_CLASSES, 0)


#: LogHistogram: buckets per decade, and the range (1 us to 1000 s; outside: the end buckets)
_PER_DECADE = 20
_LOW_S = 1e-6
_BUCKETS = 9 * _PER_DECADE + 1


#: upper bounds of buckets 0 .. _BUCKETS - 2 (the last bucket takes everything above)
_EDGES = tuple(_LOW_S * 10 ** (i / _PER_DECADE) for i in range(_BUCKETS - 1))


def _zero_buckets() -> list[int]:
    return [0] * _BUCKETS


@dataclass(slots=True)
class LogHistogram:
    """Durations in fixed logarithmic buckets (20 a decade, 1 us to 1000 s: each bucket about
    12% wide), so memory is fixed (181 counters) however long the crawl, the counts persist
    with the crawl's other counters, and a quantile is read back within half a bucket
    (about 6%) of the true one."""

    counts: list[int] = field(default_factory=_zero_buckets)
    n: int = 0
    total_s: float = 0.0

    def add(self, seconds: float) -> None:
        self.n += 1
        self.total_s += seconds
        self.counts[bisect_left(_EDGES, seconds)] += 1  # C: cheaper than a log per page

    def quantile(self, q: float) -> float:
        """The ``q`` quantile (0..1) in seconds: the geometric middle of its bucket."""
        if self.n == 0:
            return 0.0
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for i, count in enumerate(self.counts):
            seen += count
            if seen >= rank:
                if i == 0:
                    return _LOW_S
                return _LOW_S * 10 ** ((i - 0.5) / _PER_DECADE)
        return _LOW_S * 10 ** ((_BUCKETS - 1) / _PER_DECADE)

    def summary(self, elapsed_s: float) -> dict[str, Any]:
        """Pages, median and p99 per page in ms, the total, its share of ``elapsed_s`` (the
        crawl loop's wall time, all runs), and the non-empty buckets as ``[index, count]``
        pairs (so worker processes' histograms can be merged: :meth:`from_summary`)."""
        return {
            "pages": self.n,
            "median_ms": round(self.quantile(0.5) * 1e3, 4),
            "p99_ms": round(self.quantile(0.99) * 1e3, 4),
            "total_s": round(self.total_s, 6),
            "share_of_loop": round(self.total_s / elapsed_s, 4) if elapsed_s > 0 else 0.0,
            "buckets": [[i, c] for i, c in enumerate(self.counts) if c],
        }

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> LogHistogram:
        """The histogram of a :meth:`summary` (or of summaries merged: pairs concatenated,
        totals added)."""
        h = cls()
        for i, c in summary.get("buckets", ()):
            if 0 <= int(i) < _BUCKETS:
                h.counts[int(i)] += int(c)
        h.n = sum(h.counts)
        h.total_s = float(summary.get("total_s", 0.0))
        return h


@dataclass(slots=True)
class HostTally:
    """One host's counts, for the slowest and most failing hosts of the report."""

    pages: int = 0  #: final results (any outcome but robots.txt fetches)
    failures: int = 0  #: final results that failed (transfer error or HTTP status >= 500)
    fetch_s: float = 0.0  #: transfer time of those results, summed


@dataclass(slots=True)
class CrawlStats:
    """Running totals of a crawl (mutable; owned by the engine loop)."""

    pages: int = 0  #: outcome fetched
    http_errors: int = 0
    redirects: int = 0
    too_many_redirects: int = 0
    robots_denied: int = 0
    robots_unavailable: int = 0
    address_refused: int = 0  #: outcome address-refused (fetch.allow_addresses)
    robots_txt: int = 0  #: robots.txt fetches
    failed: int = 0  #: outcome failed, any error kind
    other_errors: int = 0  #: outcome failed with an error other than timeout
    timeouts: int = 0  #: any entry with error "timeout"
    not_found: int = 0  #: pages answered 404
    not_modified: int = 0  #: outcome not-modified: a 304 confirmed the cached response
    #: outcome unchanged: a 2xx revisit with the last capture's payload (not in ``pages``, as
    #: a 304 is not: ``pages`` counts new and changed content)
    unchanged: int = 0
    #: final results of revisits (a continuous crawl's visits of a URL fetched before, any
    #: outcome: figures.py); a changed page counts in ``pages`` too
    revisits: int = 0
    bytes: int = 0
    status_classes: dict[str, int] = field(default_factory=_zero_classes)
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)  #: every crawl-log outcome, counted
    #: URL -> seconds it held its host beyond the politeness delay (the longest HOLDS_KEPT)
    holds: dict[str, float] = field(default_factory=dict)
    held_s: float = 0.0  #: all such holds, summed
    #: pages fetched over the crawl's whole life (every run): ``[bucket start (unix s), pages,
    #: revisits]`` in time order, each bucket ``rate_bucket_s`` wide (bounded: see
    #: ``record_page_at``; a bucket saved before revisits were counted has two elements)
    rate_buckets: list[list[float]] = field(default_factory=list)
    rate_bucket_s: float = RATE_BUCKET_S
    #: ``[start, end]`` (unix s) of each run (its end moved on at each commit and at its end:
    #: ``ran_until``), so a bucket's rate divides by the time the crawl was running in it, not
    #: its width (the oldest merge past MAX_RUNS)
    runs: list[list[float]] = field(default_factory=list)
    hosts: dict[str, HostTally] = field(default_factory=dict)  #: bounded: HOSTS_KEPT
    #: the loop's seconds over every run, by phase: ``run`` (wall time), ``waiting`` (blocked
    #: in poll: on politeness delays or the network), ``parse``, ``callbacks``, ``warc``,
    #: ``frontier``, ``fetch`` (the rest of ``run`` is other work)
    loop_s: dict[str, float] = field(default_factory=dict)

    def add_loop_time(self, spent: Mapping[str, float]) -> None:
        """Add seconds by phase (see ``loop_s``)."""
        loop = self.loop_s
        for phase, seconds in spent.items():
            if seconds > 0:
                loop[phase] = loop.get(phase, 0.0) + seconds

    def begin_run(self, now: float) -> None:
        """A run (this process's part of the crawl) starts at unix time ``now``."""
        self.runs.append([now, now])
        if len(self.runs) > MAX_RUNS:
            first, second = self.runs[0], self.runs.pop(1)
            first[1] = second[1]

    def ran_until(self, now: float) -> None:
        """The current run was running at unix time ``now`` (its span in the series)."""
        if not self.runs:
            self.runs.append([now, now])
        run = self.runs[-1]
        run[1] = max(run[1], now)

    def record_page_at(self, when: float, page: int = 1, revisit: int = 0) -> None:
        """A page fetched (``page``) or a revisit (``revisit``) at unix time ``when`` (its
        bucket of the pages-over-time series).

        At most MAX_RATE_BUCKETS buckets: past that, the width doubles and neighbours merge,
        so a crawl of any length keeps its whole life at a coarser grain."""
        self.ran_until(when)
        width = self.rate_bucket_s
        start = when - when % width
        buckets = self.rate_buckets
        if buckets and buckets[-1][0] >= start:  # this bucket (or the clock went back)
            last = buckets[-1]
            last[1] += page
            if revisit:
                if len(last) < 3:
                    last.append(0)
                last[2] += revisit
            return
        buckets.append([start, page, revisit])
        if len(buckets) > MAX_RATE_BUCKETS:
            self._coarsen()

    def _coarsen(self) -> None:
        """Double the bucket width, merging the buckets that fall into one."""
        self.rate_bucket_s, self.rate_buckets = _rebucket(self.rate_buckets, self.rate_bucket_s * 2)

    def pages_over_time(self) -> list[list[float]]:
        """``[bucket start, pages, seconds the crawl ran in it, revisits]`` per bucket (for the
        report)."""
        width, runs = self.rate_bucket_s, self.runs
        out: list[list[float]] = []
        for bucket in self.rate_buckets:
            start, pages = bucket[0], bucket[1]
            revisits = bucket[2] if len(bucket) > 2 else 0
            end = start + width
            ran = sum(max(0.0, min(end, b) - max(start, a)) for a, b in runs)
            out.append([int(start), int(pages), round(ran, 3), int(revisits)])
        return out

    def record_host(self, host: str, fetch_s: float, failed: bool) -> None:
        """One final result of ``host`` (for the slowest and most failing hosts)."""
        tally = self.hosts.get(host)
        if tally is None:
            tally = self.hosts[host] = HostTally()
            if len(self.hosts) > 2 * HOSTS_KEPT:
                self._prune_hosts()
        tally.pages += 1
        tally.failures += failed
        tally.fetch_s += fetch_s

    def _prune_hosts(self) -> None:
        """Keep the HOSTS_KEPT / 2 most failing and the HOSTS_KEPT / 2 slowest hosts (at most
        HOSTS_KEPT: the table grows by as many new hosts again before the next cut)."""
        hosts, half = self.hosts, HOSTS_KEPT // 2
        keep = set(sorted(hosts, key=lambda h: -hosts[h].failures)[:half])
        keep.update(sorted(hosts, key=lambda h: -_mean_s(hosts[h]))[:half])
        self.hosts = {h: t for h, t in hosts.items() if h in keep}
    items: int = 0  #: items written to the feeds (pages marked done)
    spider_problems: int = 0  #: callback-error, pipeline-error, bad-yield... lines
    #: pages (marked done) whose callback raised: the report's spider.failed_pages
    failed_callback_pages: int = 0
    #: items dropped by pipelines: "Name" (DropItem), "Name (returned None)" -> count
    dropped: dict[str, int] = field(default_factory=dict)
    #: per page given to a spider: seconds in its callback (with the [[extract]] rules), and
    #: in its pipelines
    callback_time: LogHistogram = field(default_factory=LogHistogram)
    pipeline_time: LogHistogram = field(default_factory=LogHistogram)

    def record_hold(self, url: str, seconds: float) -> None:
        """A URL whose responses held its host (Retry-After, backoff) for ``seconds``."""
        self.held_s += seconds
        holds = self.holds
        holds[url] = holds.get(url, 0.0) + seconds
        if len(holds) > HOLDS_KEPT:
            del holds[min(holds, key=holds.__getitem__)]

    def record(
        self, outcome: str, status: int, error: str | None, nbytes: int, revisit: bool = False
    ) -> None:
        """Count one crawl-log entry (``revisit``: of a URL fetched before)."""
        self.bytes += nbytes
        if revisit and outcome != Outcome.ROBOTS_TXT:
            self.revisits += 1
            self.record_page_at(time.time(), page=0, revisit=1)
        key = str(outcome)
        self.outcomes[key] = self.outcomes.get(key, 0) + 1
        if error is not None:
            self.errors_by_kind[error] = self.errors_by_kind.get(error, 0) + 1
            self.timeouts += error == _TIMEOUT
        if outcome == Outcome.ROBOTS_TXT:
            self.robots_txt += 1
            return
        if 100 <= status <= 599:
            self.status_classes[_STATUS_CLASSES[status // 100 - 1]] += 1
            self.not_found += status == 404
        self._count_outcome(outcome, error)

    def _count_outcome(self, outcome: str, error: str | None) -> None:
        """Bump the counter of ``outcome`` (unknown outcomes are ignored)."""
        if outcome == Outcome.FETCHED:
            self.pages += 1
            self.record_page_at(time.time())
        elif outcome == Outcome.NOT_MODIFIED:
            self.not_modified += 1
        elif outcome == Outcome.UNCHANGED:
            self.unchanged += 1
        elif outcome == Outcome.HTTP_ERROR:
            self.http_errors += 1
        elif outcome == Outcome.REDIRECT:
            self.redirects += 1
        elif outcome == Outcome.FAILED:
            self.failed += 1
            self.other_errors += error != _TIMEOUT
        elif outcome == Outcome.TOO_MANY_REDIRECTS:
            self.too_many_redirects += 1
        elif outcome == Outcome.ROBOTS_DENIED:
            self.robots_denied += 1
        elif outcome == Outcome.ROBOTS_UNAVAILABLE:
            self.robots_unavailable += 1
        elif outcome == Outcome.ADDRESS_REFUSED:
            self.address_refused += 1

    def spider_report(self, elapsed_s: float) -> dict[str, object]:
        """The spider's part of the report: items, problems, time in callbacks and pipelines
        per page (median, p99) and their share of the crawl's wall time."""
        return {
            "items": self.items,
            "problems": self.spider_problems,
            # pages given to callbacks, and those whose callback raised (callback-error): all
            # of them with no item is the CLI's exit status 3 (cli.exit_status)
            "pages": self.callback_time.n,
            "failed_pages": self.failed_callback_pages,
            "dropped": dict(self.dropped),
            "callback": self.callback_time.summary(elapsed_s),
            "pipelines": self.pipeline_time.summary(elapsed_s),
        }

    def count_dropped(self, dropped: dict[str, int]) -> None:
        """Items a page's pipelines dropped, by pipeline."""
        for name, n in dropped.items():
            self.dropped[name] = self.dropped.get(name, 0) + n

    def spider_time(self, callback_s: float, pipeline_s: float) -> None:
        """One page given to a spider: its time in the callback and in the pipelines (the
        two ``LogHistogram.add`` inlined: this runs once per page)."""
        cb, pl = self.callback_time, self.pipeline_time
        cb.n += 1
        cb.total_s += callback_s
        cb.counts[bisect_left(_EDGES, callback_s)] += 1
        pl.n += 1
        pl.total_s += pipeline_s
        pl.counts[bisect_left(_EDGES, pipeline_s)] += 1

    def report(
        self, elapsed_s: float, seen: Mapping[str, float | int], figures: Figures | None = None
    ) -> dict[str, object]:
        """The final report as a JSON-able dict; ``seen`` (the seen-set's counters) is passed
        through. ``figures``: the headline figures (``figures.py``; without them, those of
        these counters as one run)."""
        if figures is None:
            figures = Figures(self.pages, self.revisits, elapsed_s, self.pages, self.revisits,
                              elapsed_s)  # fmt: skip
        spider = {"spider": self.spider_report(elapsed_s)} if self.callback_time.n else {}
        return {
            **spider,
            **figures.as_dict(),
            "status_classes": dict(self.status_classes),
            "not_found_404": self.not_found,
            "timeouts": self.timeouts,
            "too_many_redirects": self.too_many_redirects,
            "robots_denied": self.robots_denied,
            "robots_unavailable": self.robots_unavailable,
            "address_refused": self.address_refused,
            "other_errors": self.other_errors,
            "errors_by_kind": dict(sorted(self.errors_by_kind.items())),
            "outcomes": dict(sorted(self.outcomes.items())),
            "not_modified": self.not_modified,
            "unchanged": self.unchanged,
            "redirects": self.redirects,
            "http_errors": self.http_errors,
            "robots_txt_fetches": self.robots_txt,
            "bytes": self.bytes,
            "seen": dict(seen),
            "host_held_s": round(self.held_s, 3),
            "held_by": [
                {"url": url, "held_s": round(held, 3)}
                for url, held in sorted(self.holds.items(), key=lambda kv: -kv[1])
            ],
            "rate_bucket_s": self.rate_bucket_s,
            "loop_s": {k: round(v, 3) for k, v in self.loop_s.items()},
            "pages_over_time": self.pages_over_time(),
            "runs": len(self.runs),
            "slowest_hosts": self._host_rows(lambda t: (_mean_s(t), t.pages)),
            "failing_hosts": self._host_rows(lambda t: (t.failures, t.pages), failing=True),
        }

    def _host_rows(
        self, key: Callable[[HostTally], tuple[float, int]], failing: bool = False
    ) -> list[dict[str, object]]:
        """The HOSTS_SHOWN hosts first by ``key``, as report rows."""
        rows = sorted(self.hosts.items(), key=lambda kv: key(kv[1]), reverse=True)
        return [
            {
                "host": host,
                "pages": t.pages,
                "failures": t.failures,
                "mean_fetch_s": round(_mean_s(t), 4),
            }
            for host, t in rows[:HOSTS_SHOWN]
            if not failing or t.failures
        ]


def _rebucket(buckets: list[list[float]], width: float) -> tuple[float, list[list[float]]]:
    """``[start, pages, revisits]`` buckets (in time order) regrouped ``width`` wide."""
    merged: list[list[float]] = []
    for bucket in buckets:
        start, pages = bucket[0] - bucket[0] % width, bucket[1]
        revisits = bucket[2] if len(bucket) > 2 else 0
        if merged and merged[-1][0] == start:
            merged[-1][1] += pages
            merged[-1][2] += revisits
        else:
            merged.append([start, pages, revisits])
    return width, merged


def merge_rate_buckets(series: list[tuple[float, object]]) -> tuple[float, list[list[float]]]:
    """Several reports' ``(rate_bucket_s, pages_over_time)`` as one (worker processes): on
    the widest bucket width of them, pages summed, the running time the longest of them."""
    width = max((w for w, _ in series if w > 0), default=RATE_BUCKET_S)
    while True:
        merged: dict[int, list[float]] = {}
        for _, points in series:
            for point in points if isinstance(points, list) else ():
                if isinstance(point, list | tuple) and len(point) in (3, 4):
                    start = int(point[0] - point[0] % width)
                    slot = merged.setdefault(start, [0.0, 0.0, 0.0])
                    slot[0] += point[1]
                    slot[1] = max(slot[1], point[2])
                    slot[2] += point[3] if len(point) == 4 else 0
        if len(merged) <= MAX_RATE_BUCKETS:
            return width, [[t, int(n), ran, int(rv)]
                           for t, (n, ran, rv) in sorted(merged.items())]  # fmt: skip
        width *= 2


def _mean_s(t: HostTally) -> float:
    return t.fetch_s / t.pages if t.pages else 0.0


def config_warnings(settings: CrawlSettings) -> list[str]:
    """Settings an operator should know were in force (the report's ``warnings`` list)."""
    warnings: list[str] = []
    if not settings.fetch.verify_tls:
        warnings.append(
            "fetch.verify_tls = false: TLS certificates were not verified, "
            "https responses are not authenticated"
        )
    if settings.politeness.robots_ttl_s > 86_400:
        warnings.append(
            f"politeness.robots_ttl_s = {settings.politeness.robots_ttl_s:g} acts as 86400: "
            "robots.txt was fetched again at least every 24 hours (RFC 9309 2.4)"
        )
    if settings.output.feeds and settings.spider.source is None and not settings.extract:
        warnings.append(
            "output.feeds is set but there is neither a [spider] nor [[extract]] rules: "
            "nothing yields items, the feeds stay empty"
        )
    return warnings


def write_report(path: Path, report: Mapping[str, object]) -> None:
    """Write ``report`` as indented JSON, atomically (temporary file, fsync, rename)."""
    text = json.dumps(report, indent=2) + "\n"  # serialise first: a TypeError leaves no file
    write_atomic(path, text)


def render_report(report: Mapping[str, object], console: Console) -> None:
    """Print the report as label / value lines (and a cluster's live view: the ``report``
    command's ``live``, one row per node). Each value follows its label column, never wrapped
    by us: on a terminal the terminal wraps a long one, in a pipe or a file (journald, tee)
    a line is a line. rich is imported here, where a report is printed: the worker
    processes, which never print one, do without it."""
    from rich.text import Text

    live = report.get("live")
    rows = [*_rows(report), *_cluster_rows(report)]
    title = "crawl report"
    if report.get("running"):  # the cluster's live totals first: it is still crawling
        title = "crawl report (the cluster is running: its live totals first)"
        now = [r for r in rows if r[0] == "cluster now"]
        rows = now + [("fetched (reports published)" if label == "fetched" else label, value)
                      for label, value in rows if label != "cluster now"]  # fmt: skip
    console.print(Text(title, style="bold"), soft_wrap=True)
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        for i, part in enumerate(str(value).split("\n")):
            line = Text("  ")
            line.append(f"{label if i == 0 else '':<{width}}", style="bold")
            line.append("  " + part)
            console.print(line, soft_wrap=True, highlight=False)
    if isinstance(live, Mapping) and live.get("nodes"):
        console.print(_live_table(live))


def _cluster_rows(report: Mapping[str, object]) -> list[tuple[str, str]]:
    """A cluster's report: the nodes reported, those not, and the live totals."""
    if not report.get("nodes"):
        return []
    get = report.get
    reported = get("nodes_reported")
    rows = [("nodes", str(get("nodes"))),
            ("reports published by", _nodes(reported) or "no node yet")]  # fmt: skip
    if get("nodes_missing"):
        rows.append(("no report yet from", _nodes(get("nodes_missing"))))
    live = get("live")
    if isinstance(live, Mapping):
        totals = live.get("totals")
        alive = live.get("alive")
        if isinstance(totals, Mapping):
            rows.append((
                "cluster now" if not live.get("ended") else "cluster (ended)",
                f"{_nodes(alive) or 'no node'} running; pages {totals.get('pages', 0):,} "
                f"({totals.get('pages_per_s', 0)}/s), queued {totals.get('queued', 0):,}, in "
                f"flight {totals.get('in_flight', 0):,}, link batches in Redis "
                f"{totals.get('batches_waiting', 0):,}",
            ))  # fmt: skip
    said = get("nodes_not_reporting")
    if isinstance(said, list) and said:
        rows.append(("not reporting now", "\n".join(str(x) for x in said)))
    return rows


def _nodes(value: object) -> str:
    if not isinstance(value, list) or not value:
        return ""
    return ("node " if len(value) == 1 else "nodes ") + ", ".join(str(n) for n in value)


def _live_table(live: Mapping[str, object]) -> Table:
    """One row per node of the cluster's live view (the bottleneck by its name: ``ctl status``
    gives the sentence)."""
    from rich import box
    from rich.table import Table

    table = Table(title="cluster nodes now", box=box.SIMPLE, title_justify="left")
    for name in ("node", "state", "pages", "pages/s", "queued", "heard", "bottleneck"):
        right = name not in ("state", "bottleneck")
        table.add_column(name, justify="right" if right else "left", no_wrap=name == "state")
    rows = live.get("nodes")
    for r in rows if isinstance(rows, list) else []:
        if not isinstance(r, Mapping):
            continue
        state = str(r.get("state", ""))
        if r.get("for_s") is not None:
            state += f" {_seconds(r.get('for_s'))}"
        b = r.get("bottleneck")
        heard = r.get("heard_s")
        table.add_row(
            str(r.get("node")), state, f"{r.get('pages', 0):,}", f"{r.get('pages_per_s', 0)}",
            f"{r.get('queued', 0):,}", _seconds(heard) + " ago" if heard is not None else "never",
            str(b.get("name", "")) if isinstance(b, Mapping) else "",
        )  # fmt: skip
    return table


def _seconds(value: object) -> str:
    if not isinstance(value, int | float):
        return ""
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def _rows(report: Mapping[str, object]) -> list[tuple[str, str]]:
    """(label, formatted value) for each line of the table."""
    from rich.filesize import decimal

    get = report.get
    nbytes = get("bytes", 0)
    rows = [
        ("fetched", f"{count_text(get('fetched', 0))} pages ({rate_text(get('pages_per_s', 0))}"
                    f"/s over {duration_text(get('elapsed_s', 0))}, all runs)"),
        ("bytes", decimal(nbytes) if isinstance(nbytes, int) else str(nbytes)),
        *([("revisits", count_text(get("revisits", 0)))] if get("revisits") else []),
        *([("this run", this_run_text(get("this_run")).removeprefix("this run: "))]
          if _resumed(report) else []),
        ("status", _pairs(get("status_classes"))),
        ("404 / http errors", f"{get('not_found_404', 0)} / {get('http_errors', 0)}"),
        ("redirects (too many)", f"{get('redirects', 0)} ({get('too_many_redirects', 0)})"),
        ("timeouts / other errors", f"{get('timeouts', 0)} / {get('other_errors', 0)}"),
        ("errors by kind", _pairs(get("errors_by_kind")) or "none"),
        ("not modified (304) / unchanged (same payload)",
         f"{get('not_modified', 0)} / {get('unchanged', 0)}"),
        ("outcomes", _pairs(get("outcomes")) or "none"),
        ("robots denied / unavailable",
         f"{get('robots_denied', 0)} / {get('robots_unavailable', 0)}"),
        ("addresses refused", str(get("address_refused", 0))),
        ("seen URLs", _seen(get("seen"), get("bloom"))),
        ("hosts held (Retry-After, backoff)", _holds(get("held_by"), get("host_held_s"))),
    ]  # fmt: skip
    spider = get("spider")
    if isinstance(spider, Mapping):
        rows.append(("items / spider problems",
                     f"{spider.get('items', 0)} / {spider.get('problems', 0)}"))  # fmt: skip
        for key in ("callback", "pipelines"):
            t = spider.get(key)
            if isinstance(t, Mapping):
                share = 100 * float(t.get("share_of_loop", 0))
                rows.append((f"time in {key} per page",
                             f"median {t.get('median_ms')} ms, p99 {t.get('p99_ms')} ms, "
                             f"{share:.1f}% of the crawl"))  # fmt: skip
    rows += freshness_rows(get("freshness"))
    if get("disk_space_pauses"):
        rows.append(("paused for disk space",
                     f"{get('disk_space_pauses')} time(s), {get('disk_space_paused_s', 0)} s"))
    if get("stopped_for_low_space"):
        rows.append(("stopped", "free space below output.min_free_bytes: resume with the "
                                "same command"))
    if get("write_error"):
        rows.append(("stopped: write failed", f"{get('write_error')}: the counts above are "
                                              "committed; resume with the same command"))
    warnings = get("warnings")
    if isinstance(warnings, list) and warnings:
        rows.append(("warnings", "\n".join(str(w) for w in warnings)))
    return rows


def how_it_ended(report: Mapping[str, Any]) -> str:
    """How the run ended, in one line: complete, or stopped (why, what is queued, how to go
    on)."""
    frontier, fresh = _mapping(report.get("frontier")), _mapping(report.get("freshness"))
    queued = int(frontier.get("queued", 0))
    scheduled = int(fresh.get("scheduled") or 0)
    if report.get("complete"):
        return "complete: every URL found was crawled"
    if report.get("write_error"):
        why = f"a write failed ({report['write_error']}): fix the cause (free space, the disk)"
    elif report.get("stopped_for_low_space"):
        why = "free space fell below output.min_free_bytes"
    elif report.get("failed_workers"):
        why = f"worker process(es) failed: {', '.join(map(str, report['failed_workers']))}"
    elif report.get("cluster_error"):
        why = f"the cluster failed: {report['cluster_error']}"
    elif report.get("stopped_by_signal"):
        why = "on request (a signal such as Ctrl-C, or ctl stop)"
    elif report.get("missing_nodes") or report.get("nodes_missing"):
        why = "nodes have not reported"
    else:
        why = "before the end"
    left = f"{count_text(queued)} URLs queued"
    if fresh.get("enabled"):
        left += f", {count_text(scheduled)} on the revisit schedule (a continuous crawl)"
    return f"stopped {why}; {left}; run the same command to resume"


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _resumed(report: Mapping[str, object]) -> bool:
    """The crawl had earlier runs (this run's figures differ from the whole crawl's)."""
    run, elapsed = report.get("this_run"), report.get("elapsed_s")
    if not isinstance(run, Mapping) or not isinstance(elapsed, int | float):
        return False
    return float(elapsed) - float(run.get("elapsed_s", 0.0)) >= 0.5


def freshness_rows(value: object) -> list[tuple[str, str]]:
    """The console's lines of a continuous crawl's ``freshness`` (docs/continuous.md's dict; none
    when recrawl is off or the report has none)."""
    if not isinstance(value, Mapping) or not value.get("enabled"):
        return []
    get = value.get
    due = f"{_count(get('due_now'))}{'+' if get('due_now_capped') else ''} due now"
    nxt = get("next_due_s")
    due += f", next in {_seconds(nxt)}" if isinstance(nxt, int | float) else ", none scheduled"
    p50, p99 = get("overdue_p50_s"), get("overdue_p99_s")
    late = (f"p50 {_seconds(p50)}, p99 {_seconds(p99)}"
            if isinstance(p50, int | float) and isinstance(p99, int | float)
            else "no revisit started")  # fmt: skip
    return [
        ("revisit schedule", f"{_count(get('scheduled'))} URLs, {due}"),
        ("overdue (revisits, last 5 min)", late),
        ("visits (all runs)", _pairs(get("visits")) or "none"),
        ("per hour", _per_hour(get("per_hour")) or "none"),
        ("revisit intervals", _intervals(get("intervals")) or "none"),
    ]


def interval_label(bound: object, previous: object = None) -> str:
    """A revisit-interval bucket's label: ``<= 1 min``, ``<= 6 h``... ``> 30 d`` for the last
    (bound None, ``previous`` the bound before it)."""
    if not isinstance(bound, int | float):
        return f"> {_span(previous)}" if isinstance(previous, int | float) else "longer"
    return f"<= {_span(bound)}"


def _span(seconds: float) -> str:
    """60 -> ``1 min``, 86400 -> ``1 d``: the largest unit that divides it."""
    s = float(seconds)
    for unit, size in (("d", 86_400), ("h", 3600), ("min", 60)):
        if s >= size and s % size == 0:
            return f"{s / size:g} {unit}"
    return f"{s:g} s"


def _intervals(value: object) -> str:
    """``<= 1 min 3, <= 5 min 10, ...`` for the non-empty buckets."""
    if not isinstance(value, Mapping):
        return ""
    bounds, counts = value.get("le_s"), value.get("counts")
    if not isinstance(bounds, list) or not isinstance(counts, list):
        return ""
    parts = []
    for i, (bound, n) in enumerate(zip(bounds, counts, strict=False)):
        if isinstance(n, int) and n > 0:
            parts.append(f"{interval_label(bound, bounds[i - 1] if i else None)} {n:,}")
    return ", ".join(parts)


def _per_hour(value: object) -> str:
    """``400 changes, 5,900 revisits, 1,000 new pages`` from ``per_hour``."""
    if not isinstance(value, Mapping):
        return ""
    return ", ".join(
        f"{v:,.0f} {k.replace('_', ' ')}" if v >= 10 else f"{v:.1f} {k.replace('_', ' ')}"
        for k, v in value.items() if isinstance(v, int | float)
    )  # fmt: skip


def _count(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else "0"


def _holds(value: object, total: object) -> str:
    """The URLs that held their hosts longest, and the total."""
    if not isinstance(value, list) or not value:
        return "none"
    top = ", ".join(f"{h['url']} {h['held_s']} s" for h in value[:3] if isinstance(h, dict))
    return f"{total} s in all; longest: {top}"


def _seen(value: object, older: object) -> str:
    """The seen-set line: URLs in it (``older``: the ``bloom`` object of the reports of
    versions with a Bloom filter, which held the same count)."""
    value = value if isinstance(value, Mapping) else older
    if not isinstance(value, Mapping):
        return ""
    return f"{value.get('count', 0):,}"


def _pairs(value: object) -> str:
    """``k v, k v`` for a mapping, the plain string otherwise."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_number(v)}" for k, v in value.items())
    return "" if value is None else str(value)


def _number(value: object) -> str:
    """Floats in short scientific-or-plain form, everything else as str()."""
    return f"{value:.3g}" if isinstance(value, float) else str(value)
