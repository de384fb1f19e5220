"""Prometheus metrics, rendered from the snapshots the crawl loops publish (``render_metrics``).

Nothing here is updated per page: each loop keeps its plain counters and accumulators (the
crawl stats, the fetcher's histogram counts, ``LoopTimes``) and publishes a snapshot of them
with its status (``Engine.metrics()``); a scrape turns the latest snapshots into metric
families in a registry of its own (a custom collector), so a scrape costs the loop nothing.
Every metric has one label ``worker`` (the worker process's index, "0" with one process).

The metrics (all prefixed ``frontier_crawl_``):

=====================================  =========  ==============================================
name                                   type       what
=====================================  =========  ==============================================
pages_total{outcome}                   counter    crawl-log entries by outcome (all runs)
bytes_total                            counter    payload bytes received (decoded; all runs)
fetch_duration_seconds                 histogram  transfer time, submit to completion (this run)
requests_total                         counter    requests sent (this run)
queued_urls{where}                     gauge      URLs waiting, ``memory`` or ``disk``
hosts{state}                           gauge      hosts by state: ready, waiting, backoff,
                                                  robots, blocked, retired
transfers_in_flight                    gauge      requests in flight
fetch_slots                            gauge      the concurrency (slots in all)
admitted_urls_total                    counter    URLs admitted to the frontier (all runs)
admissions_per_second                  gauge      admitted over the last ~10 s
pages_per_second                       gauge      pages fetched over the last ~10 s
seen_urls                              gauge      URLs in the seen-set (all runs)
warc_bytes                             gauge      bytes in this crawl's WARC files
commit_seconds_total                   counter    time in group commits (outputs + LMDB)
commits_total                          counter    group commits
callback_seconds_total                 counter    time in user callbacks (spiders; 0 without)
loop_seconds_total{phase}              counter    loop time by phase: parse, callbacks, warc,
                                                  frontier, fetch
dns_seconds_total                      counter    name-lookup time of the transfers
loop_busy_ratio                        gauge      the loop's time not waiting, last ~5 s
bottleneck{name}                       gauge      1 for the bottleneck named now, else 0
paused                                 gauge      1 while an operator pause holds the crawl
=====================================  =========  ==============================================

A continuous crawl (``[recrawl] enabled``; the status's ``freshness``, docs/continuous.md) adds the
revisit schedule's figures (none of them without recrawl):

=====================================  =========  ==============================================
recrawl_scheduled_urls                 gauge      URLs on the revisit schedule
recrawl_due_urls                       gauge      revisits due now (counted up to a cap)
recrawl_next_due_seconds               gauge      seconds until the next revisit is due (absent
                                                  when none is scheduled)
recrawl_overdue_seconds{quantile}      gauge      how late the revisits started in the last
                                                  5 min were (started - due), 0.5 and 0.99
                                                  (absent when none started)
recrawl_visits_total{result}           counter    visits since the crawl began (all runs): new,
                                                  changed, unchanged, not_modified, gone, failed
recrawl_interval_urls{le}              gauge      scheduled URLs whose revisit interval is at
                                                  most ``le`` seconds (cumulative, as histogram
                                                  buckets are: ``histogram_quantile`` reads it)
=====================================  =========  ==============================================

In a cluster (``cluster.redis_url``) every node also serves the whole cluster's view, as it
last read it from Redis (a second old at most; label ``node``, not ``worker``):

=====================================  =========  ==============================================
cluster_nodes{state}                   gauge      nodes by state: starting, running, paused,
                                                  stopping, finished, stopped, silent,
                                                  never-joined
cluster_node_up{node}                  gauge      1 while the node is alive, else 0
cluster_node_missing_seconds{node}     gauge      how long it has been missing (silent, gone,
                                                  never joined; 0 while alive)
cluster_node_pages{node}               gauge      pages fetched (its last summary, all runs)
cluster_node_pages_per_second{node}    gauge      its pages per second, last ~10 s
cluster_node_queued_urls{node}         gauge      URLs queued on it
cluster_node_batches_waiting{node}     gauge      link batches for it waiting in Redis
=====================================  =========  ==============================================
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from frontier_crawl.control.status import BOTTLENECKS

PREFIX = "frontier_crawl_"
HOST_STATES = ("ready", "waiting", "backoff", "robots", "blocked")
PHASES = ("parse", "callbacks", "warc", "frontier", "fetch")


def _num(snap: Mapping[str, Any], key: str) -> float:
    value = snap.get(key, 0)
    return float(value) if isinstance(value, int | float) else 0.0


CLUSTER_STATES = ("starting", "running", "paused", "stopping", "finished", "stopped", "silent",
                  "never-joined")  # fmt: skip


class _Snapshots(Collector):
    """Metric families from the snapshots given (a registry of its own per scrape)."""

    def __init__(
        self, snapshots: Sequence[Mapping[str, Any]], cluster: Mapping[str, Any] | None = None
    ) -> None:
        self._snapshots = snapshots
        self._cluster = cluster

    def collect(self) -> Iterator[Metric]:
        snaps = self._snapshots

        def counter(name: str, doc: str, key: str) -> CounterMetricFamily:
            fam = CounterMetricFamily(PREFIX + name, doc, labels=["worker"])
            for s in snaps:
                fam.add_metric([_worker(s)], _num(s, key))
            return fam

        def gauge(name: str, doc: str, value: Any) -> GaugeMetricFamily:
            fam = GaugeMetricFamily(PREFIX + name, doc, labels=["worker"])
            for s in snaps:
                fam.add_metric([_worker(s)], float(value(s)))
            return fam

        pages = CounterMetricFamily(
            PREFIX + "pages", "Crawl-log entries by outcome (all runs).",
            labels=["worker", "outcome"],
        )  # fmt: skip
        for s in snaps:
            for outcome, n in sorted(_status(s).get("outcomes", {}).items()):
                pages.add_metric([_worker(s), str(outcome)], float(n))
        yield pages
        yield counter("bytes", "Payload bytes received, decoded (all runs).", "bytes")
        yield _histogram(snaps)
        yield counter("requests", "Requests sent (this run).", "requests")
        queued = GaugeMetricFamily(
            PREFIX + "queued_urls", "URLs waiting in the frontier.", labels=["worker", "where"]
        )
        hosts = GaugeMetricFamily(PREFIX + "hosts", "Hosts by state.", labels=["worker", "state"])
        for s in snaps:
            st, w = _status(s), _worker(s)
            queued.add_metric([w, "memory"], float(st.get("queued_memory", 0)))
            queued.add_metric([w, "disk"], float(st.get("queued_disk", 0)))
            for state in HOST_STATES:
                hosts.add_metric([w, state], float(st.get("hosts", {}).get(state, 0)))
            hosts.add_metric([w, "retired"], _num(s, "hosts_retired"))
        yield queued
        yield hosts
        yield gauge("transfers_in_flight", "Requests in flight.",
                    lambda s: _status(s).get("in_flight", 0))  # fmt: skip
        yield gauge("fetch_slots", "Fetch slots in all (the concurrency).",
                    lambda s: _status(s).get("concurrency", 0))  # fmt: skip
        yield counter("admitted_urls", "URLs admitted to the frontier (all runs).", "admitted")
        yield gauge("admissions_per_second", "URLs admitted per second, last ~10 s.",
                    lambda s: _num(s, "admitted_per_s"))  # fmt: skip
        yield gauge("pages_per_second", "Pages fetched per second, last ~10 s.",
                    lambda s: _status(s).get("pages_per_s", 0.0))  # fmt: skip
        yield gauge("seen_urls", "URLs in the seen-set (all runs).",
                    lambda s: _num(s, "seen_urls"))  # fmt: skip
        yield gauge("warc_bytes", "Bytes in the crawl's WARC files.",
                    lambda s: _num(s, "warc_bytes"))  # fmt: skip
        yield counter("commit_seconds", "Time in group commits (outputs, then LMDB).", "commit_s")
        yield counter("commits", "Group commits.", "commits")
        yield counter("callback_seconds", "Time in user callbacks (spiders).", "callback_s")
        phases = CounterMetricFamily(
            PREFIX + "loop_seconds", "Loop time by phase.", labels=["worker", "phase"]
        )
        for s in snaps:
            for phase in PHASES:
                phases.add_metric([_worker(s), phase], _num(s, f"{phase}_s"))
        yield phases
        yield counter("dns_seconds", "Name-lookup time of the transfers.", "dns_s")
        yield gauge("loop_busy_ratio", "The loop's time not spent waiting, last ~5 s.",
                    lambda s: _status(s).get("cpu", {}).get("loop_busy", 0.0))  # fmt: skip
        bottleneck = GaugeMetricFamily(
            PREFIX + "bottleneck", "1 for the bottleneck named now.", labels=["worker", "name"]
        )
        for s in snaps:
            now = _status(s).get("bottleneck", {}).get("name")
            for name in BOTTLENECKS:
                bottleneck.add_metric([_worker(s), name], 1.0 if name == now else 0.0)
        yield bottleneck
        yield gauge("paused", "1 while an operator pause holds the crawl.",
                    lambda s: bool(_status(s).get("paused")))  # fmt: skip
        fresh = [(_worker(s), f) for s in snaps if (f := _freshness(s)) is not None]
        if fresh:
            yield from _freshness_families(fresh)
        if self._cluster is not None:
            yield from _cluster_families(self._cluster)


#: the ``visits`` results of the freshness dict, always exported (0 until seen)
VISIT_RESULTS = ("new", "changed", "unchanged", "not_modified", "gone", "failed")


def _freshness(snap: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The snapshot's ``freshness`` dict when recrawl is on, else None."""
    fresh = _status(snap).get("freshness")
    return fresh if isinstance(fresh, Mapping) and fresh.get("enabled") else None


def _freshness_families(fresh: Sequence[tuple[str, Mapping[str, Any]]]) -> Iterator[Metric]:
    """The ``recrawl_*`` families (module docstring) from ``(worker, freshness)`` pairs."""
    plain: list[tuple[str, str, str]] = [
        ("recrawl_scheduled_urls", "URLs on the revisit schedule.", "scheduled"),
        ("recrawl_due_urls", "Revisits due now (counted up to a cap).", "due_now"),
        ("recrawl_next_due_seconds", "Seconds until the next revisit is due.", "next_due_s"),
    ]
    for name, doc, key in plain:
        fam = GaugeMetricFamily(PREFIX + name, doc, labels=["worker"])
        for worker, f in fresh:
            if isinstance(f.get(key), int | float):  # next_due_s is None when none is due
                fam.add_metric([worker], float(f[key]))
        yield fam
    overdue = GaugeMetricFamily(
        PREFIX + "recrawl_overdue_seconds",
        "How late the revisits started in the last 5 min were (started - due), by quantile.",
        labels=["worker", "quantile"],
    )
    visits = CounterMetricFamily(
        PREFIX + "recrawl_visits", "Visits by result since the crawl began (all runs).",
        labels=["worker", "result"],
    )  # fmt: skip
    intervals = GaugeMetricFamily(
        PREFIX + "recrawl_interval_urls",
        "Scheduled URLs whose revisit interval is at most le seconds (cumulative).",
        labels=["worker", "le"],
    )
    for worker, f in fresh:
        for quantile, key in (("0.5", "overdue_p50_s"), ("0.99", "overdue_p99_s")):
            if isinstance(f.get(key), int | float):
                overdue.add_metric([worker, quantile], float(f[key]))
        counts = f.get("visits")
        counts = counts if isinstance(counts, Mapping) else {}
        for result in sorted({*VISIT_RESULTS, *map(str, counts)}):
            visits.add_metric([worker, result], _num(counts, result))
        for le, n in _interval_buckets(f.get("intervals")):
            intervals.add_metric([worker, le], n)
    yield overdue
    yield visits
    yield intervals


def _interval_buckets(value: object) -> list[tuple[str, float]]:
    """``intervals`` (``le_s``: upper bounds, the last None; ``counts`` per bucket) as
    cumulative ``(le, count)`` pairs, ``le`` written as the fetch histogram's bounds are."""
    if not isinstance(value, Mapping):
        return []
    bounds, counts = value.get("le_s"), value.get("counts")
    if not isinstance(bounds, list) or not isinstance(counts, list) or len(bounds) != len(counts):
        return []
    out, total = [], 0.0
    for bound, n in zip(bounds, counts, strict=True):
        total += float(n) if isinstance(n, int | float) else 0.0
        le = "+Inf" if bound is None else repr(float(bound))  # as _histogram writes them
        out.append((le, total))
    return out


def _cluster_families(view: Mapping[str, Any]) -> Iterator[Metric]:
    """The cluster's view (``cluster/view.py``'s shape: ``nodes``, one row per node)."""
    rows = [r for r in view.get("nodes", []) if isinstance(r, Mapping)]
    states = GaugeMetricFamily(PREFIX + "cluster_nodes", "Cluster nodes by state.",
                               labels=["state"])  # fmt: skip
    for state in CLUSTER_STATES:
        states.add_metric([state], float(sum(1 for r in rows if r.get("state") == state)))
    yield states
    alive = ("starting", "running", "paused", "stopping")
    per_node: list[tuple[str, str, Any]] = [
        ("up", "1 while the node is alive.", lambda r: r.get("state") in alive),
        ("missing_seconds", "How long the node has been missing (0 while alive).",
         lambda r: (r.get("for_s") or 0.0) if r.get("missing") else 0.0),
        ("pages", "Pages fetched by the node (its last summary, all runs).",
         lambda r: _num(r, "pages")),
        ("pages_per_second", "The node's pages per second, last ~10 s.",
         lambda r: _num(r, "pages_per_s")),
        ("queued_urls", "URLs queued on the node.", lambda r: _num(r, "queued")),
        ("batches_waiting", "Link batches for the node waiting in Redis.",
         lambda r: _num(r, "batches_waiting")),
    ]  # fmt: skip
    for name, doc, value in per_node:
        fam = GaugeMetricFamily(PREFIX + "cluster_node_" + name, doc, labels=["node"])
        for r in rows:
            fam.add_metric([str(r.get("node", ""))], float(value(r)))
        yield fam


def _worker(snap: Mapping[str, Any]) -> str:
    return str(snap.get("worker", "0"))


def _status(snap: Mapping[str, Any]) -> Mapping[str, Any]:
    status = snap.get("status")
    return status if isinstance(status, Mapping) else {}


def _histogram(snaps: Sequence[Mapping[str, Any]]) -> HistogramMetricFamily:
    fam = HistogramMetricFamily(
        PREFIX + "fetch_duration_seconds",
        "Transfer time, submit to completion (this run).",
        labels=["worker"],
    )
    for s in snaps:
        bounds = list(s.get("fetch_time_buckets", []))
        counts = list(s.get("fetch_time_counts", []))
        if len(counts) != len(bounds) + 1:
            counts = [0] * (len(bounds) + 1)
        buckets: list[tuple[str, float]] = []
        total = 0
        for bound, n in zip([*bounds, float("inf")], counts, strict=True):
            total += n
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), total))
        fam.add_metric([_worker(s)], buckets, sum_value=_num(s, "fetch_time_sum"))
    return fam


def render_metrics(
    snapshots: Sequence[Mapping[str, Any]], cluster: Mapping[str, Any] | None = None
) -> bytes:
    """The Prometheus text exposition of the crawl from one metrics snapshot per worker
    process (``Engine.metrics()``; ``Coordinator.metrics()`` with worker processes): each has
    a ``"worker"`` key, the label value ("0" with one process); ``cluster``: the cluster's
    view (a cluster node's)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshots(snapshots, cluster))
    return generate_latest(registry)
