"""Host-partitioned worker processes (``workers.processes = N``) and their coordinator.

Each worker is an ordinary :class:`~frontier_crawl.engine.Engine` with its own output directory
``output_dir/worker-<i>/`` (frontier LMDB, seen-set, WARC files, crawl log, report). It owns the
hosts whose origin hashes to ``i`` (:func:`~frontier_crawl.frontier.mailbox.owner_of`); links to
other hosts go to their owner in durable batches (``frontier/mailbox.py``).

Termination without timeouts: every worker publishes, in shared memory, whether it is idle
(nothing queued or in flight, inbox empty), how many batches it has committed to others and how
many it has ingested. The coordinator declares the crawl over when two consecutive snapshots are
identical, every worker is idle in both, and batches sent equal batches received: a batch still in
an inbox makes the counts differ, and any activity between the snapshots changes them.
The coordinator then raises a shared flag, every worker finishes normally, and the coordinator
merges their reports into ``output_dir/report.json``.

Signals: the coordinator forwards SIGINT/SIGTERM to the workers (graceful stop, then the merged
report); a second signal is forwarded too and makes everyone exit at once.

Cluster mode (``cluster.redis_url`` set, ``--node n``): the coordinator is node ``n`` of
``cluster.nodes``; its workers run the partitions ``n*processes + i`` of ``nodes x
processes`` (directories ``worker-<partition>``). A link for a partition of this node takes
the LMDB path above; for another node's, the worker adds the batch to that partition's Redis
stream (``frontier_crawl.cluster``), and the owner node's coordinator moves it into the
worker's inbox. The coordinator's idea of "over" becomes this node's answer to the cluster's
termination probe, and the crawl ends when Redis says every node is over
(``frontier_crawl.cluster.node``).
"""

from __future__ import annotations

import functools
import json
import logging
import multiprocessing as mp
import os
import signal
import sys
import time
from collections.abc import Mapping
from multiprocessing.sharedctypes import Synchronized, SynchronizedArray
from pathlib import Path
from types import FrameType
from typing import Any

import msgspec
from publicsuffixlist import PublicSuffixList

from frontier_crawl.cluster import (
    ClusterError,
    ClusterNode,
    Keys,
    Redis,
    RemoteSender,
    partitions_of,
)
from frontier_crawl.config import CrawlSettings
from frontier_crawl.engine import Engine, set_aside_state
from frontier_crawl.frontier import DamagedState, StateMismatch
from frontier_crawl.frontier.frontier import LAYOUT_VERSION
from frontier_crawl.frontier.mailbox import INBOX_ENV, Inbox, Mailbox, decode_links, owner_of
from frontier_crawl.frontier.urls import host_of
from frontier_crawl.output import write_report

log = logging.getLogger(__name__)

COORDINATOR_TICK_S = 0.05
_FIELDS = 3  # per worker in the shared array: idle, sent, received


def worker_count(settings: CrawlSettings) -> int:
    """``workers.processes``, with 0 meaning one per core."""
    return settings.workers.processes or os.cpu_count() or 1


def worker_dir(root: Path, index: int) -> Path:
    return root / f"worker-{index}"


@functools.cache
def _suffixes() -> PublicSuffixList:
    return PublicSuffixList()


def partition_key(origin: str, by: str) -> str:
    """What a host's partition is hashed from (``workers.partition_by``): its origin, or its
    registered domain (an IP address, or a host that is itself a public suffix, by itself)."""
    if by == "host":
        return origin
    host = host_of(origin)
    if not host or host[-1].isdigit() or ":" in host:  # IPv4 (no TLD ends in a digit), IPv6
        return host
    return _suffixes().privatesuffix(host) or host


def partition_of(origin: str, partitions: int, by: str) -> int:
    """The partition that owns ``origin`` (the same in every process and on every node)."""
    return owner_of(partition_key(origin, by), partitions)


def _is_batch(data: bytes) -> bool:
    """Whether stream bytes are a link batch (checked before they reach an inbox, whose
    every entry must decode)."""
    try:
        decode_links(data)
    except msgspec.DecodeError:
        return False
    return True


def node_root(settings: CrawlSettings, node: int | None) -> Path:
    """``crawl.output_dir``, in a cluster crawl with ``{node}`` replaced by the node's number."""
    if not settings.cluster.redis_url or node is None:
        return Path(settings.crawl.output_dir)
    return Path(settings.crawl.output_dir.replace("{node}", str(node)))


def cluster_identity(settings: CrawlSettings) -> dict[str, Any]:
    """What every node of a cluster crawl must agree on: the frontier's identity keys (layout
    version, seen-set sizing), the seeds, the scope and the partitioning."""
    return {
        "layout_version": LAYOUT_VERSION,
        "frontier.seen_capacity": settings.frontier.seen_capacity,
        "frontier.seen_error_rate": settings.frontier.seen_error_rate,
        "crawl.seeds": sorted(settings.crawl.seeds),
        "scope.allow_domains": list(settings.scope.allow_domains),
        "scope.exclude": list(settings.scope.exclude),
        "cluster.nodes": settings.cluster.nodes,
        "workers.processes": worker_count(settings),
        "workers.partition_by": settings.workers.partition_by,
    }


def redis_of(settings: CrawlSettings) -> Redis:
    c = settings.cluster
    return Redis(c.redis_url, c.unreachable_timeout_s)


class Peers:
    """A worker's view of the others: routing, sending, and its published status."""

    def __init__(
        self,
        index: int,
        local: range,
        total: int,
        root: Path,
        map_size: int,
        status: SynchronizedArray[int],
        stop: Synchronized[int],
        run_id: bytes,
        remote: RemoteSender | None = None,
        partition_by: str = "host",
    ) -> None:
        self.worker = index  #: this worker's partition (of ``total``)
        self._by = partition_by
        self.run_id = run_id
        self.count = total
        self._slot = index - local.start  #: its place in this node's status array
        self._status = status
        self._stop = stop
        self._remote = remote  #: other nodes' partitions (cluster mode)
        envs = {j: worker_dir(root, j) / "state" / INBOX_ENV for j in local if j != index}
        self._mailbox = Mailbox(envs, map_size, run_id)
        self._local = local

    def route(self, origin: str) -> int:
        """The owning worker (not remembered here: the frontier keeps a bounded cache of it)."""
        return partition_of(origin, self.count, self._by)

    def send(self, dest: int, batch: bytes) -> None:
        if dest in self._local or self._remote is None:
            self._mailbox.send(dest, batch)
        else:
            self._remote.send(dest, batch)

    def publish(self, idle: bool, received: int) -> None:
        base = self._slot * _FIELDS
        with self._status.get_lock():
            self._status[base] = int(idle)
            self._status[base + 1] = self._mailbox.sent
            self._status[base + 2] = received

    def should_stop(self) -> bool:
        return bool(self._stop.value)

    def close(self) -> None:
        self._mailbox.close()
        if self._remote is not None:
            self._remote.close()


def _worker_settings(settings: CrawlSettings, root: Path, index: int) -> CrawlSettings:
    s = settings
    return msgspec.structs.replace(
        s,
        crawl=msgspec.structs.replace(s.crawl, output_dir=str(worker_dir(root, index))),
        output=msgspec.structs.replace(
            s.output, warc_prefix=f"{s.output.warc_prefix}-w{index}", progress_interval_s=0.0
        ),
        workers=msgspec.structs.replace(s.workers, processes=1),
    )


def _worker_main(
    raw: bytes,
    index: int,
    local: range,
    total: int,
    status: SynchronizedArray[int],
    stop: Synchronized[int],
    run_id: bytes,
) -> None:
    """Entry point of one worker process (``settings.crawl.output_dir``: the node's root)."""
    settings = msgspec.msgpack.decode(raw, type=CrawlSettings)
    root = Path(settings.crawl.output_dir)
    remote = None
    if settings.cluster.redis_url:
        remote = RemoteSender(redis_of(settings), Keys(settings.cluster.key_prefix))
    peers = Peers(
        index, local, total, root, settings.frontier.lmdb_map_size_bytes, status, stop, run_id,
        remote, settings.workers.partition_by,
    )  # fmt: skip
    try:
        report = Engine(_worker_settings(settings, root, index), peers=peers).run()
    except ClusterError as exc:  # Redis gone for too long: this worker's state is committed
        log.error("worker %d: %s", index, exc)
        sys.exit(1)
    finally:
        peers.close()
    if report.get("write_error") or report.get("stopped_for_low_space"):
        sys.exit(1)  # the coordinator stops the others and lists this one as failed


def _pin_worker_count(
    root: Path, count: int, cluster: dict[str, int] | None = None, by: str = "host"
) -> None:
    """Host ownership depends on the worker count (and in a cluster on the node count and
    this node's number): a crawl keeps the ones it started with."""
    root.mkdir(parents=True, exist_ok=True)
    pin = root / "workers.json"
    mine: dict[str, int | str] = {"processes": count, **(cluster or {})}
    if by != "host":  # absent from pins written before the setting existed: "host"
        mine["partition_by"] = by
    if pin.exists():
        pinned = json.loads(pin.read_text())
        saved = pinned.get("processes")
        if saved != count:
            raise StateMismatch(
                f"{root} holds a crawl run by {saved} worker process(es), this configuration asks "
                f"for {count}: hosts are partitioned by that number. Set workers.processes = "
                f"{saved} to resume it, or choose a new crawl.output_dir."
            )
        if pinned.get("partition_by", "host") != by:
            raise StateMismatch(
                f"{root} holds a crawl partitioned by {pinned.get('partition_by', 'host')}, this "
                f"configuration asks for {by}. Set workers.partition_by = "
                f"{pinned.get('partition_by', 'host')!r} to resume it, or choose a new "
                "crawl.output_dir."
            )
        changed = [k for k in ("nodes", "node") if pinned.get(k, mine.get(k)) != mine.get(k)]
        if changed:
            raise StateMismatch(
                f"{root} holds the state of node {pinned.get('node')} of a "
                f"{pinned.get('nodes')}-node crawl, this is node {mine.get('node')} of "
                f"{mine.get('nodes')} ({', '.join(changed)} differ): hosts are partitioned by "
                "them. Use that node's output directory, or a new crawl.output_dir."
            )
        return
    pin.write_text(json.dumps(mine))


class Coordinator:
    """Starts the workers, detects the end of the crawl, merges the reports."""

    def __init__(self, settings: CrawlSettings, node: int | None = None) -> None:
        self.root = node_root(settings, node)
        self.settings = settings = msgspec.structs.replace(
            settings, crawl=msgspec.structs.replace(settings.crawl, output_dir=str(self.root))
        )
        self.count = worker_count(settings)
        c = settings.cluster
        self.node = node if c.redis_url else None
        self.partitions = partitions_of(node or 0, self.count) if c.redis_url else range(self.count)
        self.total = self.count * (c.nodes if c.redis_url else 1)
        self._run_id = run_id = os.urandom(8)
        self._cluster: ClusterNode | None = None
        if c.redis_url:
            if node is None:
                raise ClusterError("cluster.redis_url is set: start each node with --node N")
            self._cluster = ClusterNode(
                redis_of(settings),
                Keys(c.key_prefix),
                nodes=c.nodes,
                node=node,
                processes=self.count,
                heartbeat_ttl_s=c.heartbeat_ttl_s,
                ledger_path=self.root / "cluster.lmdb",
                map_size=settings.frontier.lmdb_map_size_bytes,
                run_id=run_id,
            )  # refuses a --node out of range, before anything is written
            _pin_worker_count(
                self.root,
                self.count,
                {"nodes": c.nodes, "node": node},
                settings.workers.partition_by,
            )
        else:
            _pin_worker_count(self.root, self.count, None, settings.workers.partition_by)
        ctx = mp.get_context("spawn")
        self._status: SynchronizedArray[int] = ctx.Array("q", _FIELDS * self.count)
        self._stop: Synchronized[int] = ctx.Value("i", 0)
        raw = msgspec.msgpack.encode(settings)
        self._procs = [
            ctx.Process(
                target=_worker_main,
                args=(raw, p, self.partitions, self.total, self._status, self._stop, run_id),
                name=f"frontier-crawl-worker-{p}",
            )
            for p in self.partitions
        ]
        self._signals = 0
        self._cluster_error: ClusterError | None = None

    def _repair_inboxes(self) -> list[str]:
        """Set aside each damaged worker inbox before any worker starts: peers write into it,
        so it must be usable before the first of them opens it (its owner would set it aside
        too, but only once it gets there). Returns warnings for the report."""
        warnings: list[str] = []
        for i in self.partitions:
            path = worker_dir(self.root, i) / "state" / INBOX_ENV
            if not path.exists():
                continue
            try:
                Inbox(path, self.settings.frontier.lmdb_map_size_bytes).close()
            except DamagedState as damage:
                warnings.append(set_aside_state(path, damage.problem, damage.consequence))
        return warnings

    def run(self) -> dict[str, Any]:
        """Run the workers to the end of the crawl; in cluster mode join the cluster first
        (``ClusterRefused``, ``ClusterUnavailable`` before any request) and publish the
        node's report to it at the end."""
        if self._cluster is not None:
            self._cluster.join(cluster_identity(self.settings))
        try:
            report = self._run()
            if self._cluster is not None and self._cluster_error is None:
                self._cluster.publish_report(report)
        finally:
            if self._cluster is not None:
                try:
                    self._cluster.leave()
                except ClusterError as exc:
                    log.warning("node %s: %s", self.node, exc)
        if self._cluster_error is not None:
            raise self._cluster_error
        return report

    def _run(self) -> dict[str, Any]:
        repairs = self._repair_inboxes()
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        inboxes = Mailbox(
            {p: worker_dir(self.root, p) / "state" / INBOX_ENV for p in self.partitions},
            self.settings.frontier.lmdb_map_size_bytes,
            self._run_id,
        )
        try:
            for proc in self._procs:
                proc.start()
            if self._cluster is not None:
                self._wait_for_the_cluster(self._cluster, inboxes)
            else:
                self._wait_for_the_end()
            for proc in self._procs:
                proc.join()
        finally:
            inboxes.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        failed = [p.name for p in self._procs if p.exitcode != 0]
        report = merge_reports(
            [json.loads((worker_dir(self.root, i) / "report.json").read_text())
             for i in self.partitions
             if (worker_dir(self.root, i) / "report.json").exists()]
        )  # fmt: skip
        report["workers"] = self.count
        report["output_dir"] = str(self.root)
        report["warnings"] = [*repairs, *report.get("warnings", [])]
        if failed:
            report["complete"] = False
            report["failed_workers"] = failed
        if self._cluster is not None:
            report["node"] = self.node
            report["cluster_duplicate_batches"] = self._cluster.duplicates
            report["cluster_rejected_batches"] = self._cluster.rejected
        if self._cluster_error is not None:
            report["complete"] = False
            report["cluster_error"] = str(self._cluster_error)
        write_report(self.root / "report.json", report)
        return report

    def _snapshot(self) -> tuple[int, ...]:
        with self._status.get_lock():
            return tuple(self._status[:])

    def _finished(self, snap: tuple[int, ...], pumped: int = 0) -> bool:
        """Every worker idle, and every batch delivered into an inbox (by a worker of this
        node, or by the coordinator from the node's streams: ``pumped``) ingested."""
        idle = all(snap[i * _FIELDS] for i in range(self.count))
        sent, received = self._totals(snap)
        return idle and sent + pumped == received

    def _wait_for_the_end(self) -> None:
        previous: tuple[int, ...] | None = None
        while True:
            if any(p.exitcode is not None for p in self._procs):
                self._stop.value = 1  # a worker ended (signal or failure): end them all
                return
            snap = self._snapshot()
            if previous == snap and self._finished(snap):
                self._stop.value = 1
                return
            previous = snap
            time.sleep(COORDINATOR_TICK_S)

    def _wait_for_the_cluster(self, node: ClusterNode, inboxes: Mailbox) -> None:
        """Cluster mode: move batches from this node's streams into its inboxes, answer the
        termination probe, stop the workers once the cluster is over (``cluster/node.py``)."""
        previous: tuple[int, ...] | None = None
        next_tick = 0.0
        try:
            while True:
                if any(p.exitcode is not None for p in self._procs):
                    break  # a worker ended (signal or failure): end them all
                if time.monotonic() >= next_tick:  # the probe once a tick, batches at once
                    next_tick = time.monotonic() + COORDINATOR_TICK_S
                    node.heartbeat(time.monotonic())
                    snap = (*self._snapshot(), node.pumped)
                    if previous == snap and self._finished(snap[:-1], node.pumped):
                        # quiet so far: read the round, look again after reading it, answer.
                        # A busy node does not answer (no round completes without it) and
                        # costs Redis nothing but its batches.
                        if node.begin():
                            break  # the whole cluster is over
                        again = (*self._snapshot(), node.pumped)
                        if again == snap:
                            node.answer(True, self._totals(snap[:-1]))
                        snap = again
                    previous = snap
                node.pump(
                    inboxes.send, wait_s=max(0.0, next_tick - time.monotonic()), valid=_is_batch
                )
        except ClusterError as exc:
            log.error("node %s: %s", self.node, exc)
            self._cluster_error = exc
        self._stop.value = 1

    def _totals(self, snap: tuple[int, ...]) -> tuple[int, int]:
        sent = sum(snap[i * _FIELDS + 1] for i in range(self.count))
        received = sum(snap[i * _FIELDS + 2] for i in range(self.count))
        return sent, received

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        del frame
        self._signals += 1
        for proc in self._procs:
            if proc.pid is not None and proc.exitcode is None:
                os.kill(proc.pid, signum)
        if self._signals > 1:
            os._exit(128 + signum)


def merge_reports(reports: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One report from the workers' reports: counts added, dicts merged, rates recomputed."""
    merged: dict[str, Any] = {}
    for report in reports:
        for key, value in report.items():
            merged[key] = _merge(merged.get(key), value)
    elapsed = max((float(r.get("elapsed_s", 0.0)) for r in reports), default=0.0)
    merged["elapsed_s"] = elapsed
    merged["pages_per_s"] = round(merged.get("fetched", 0) / elapsed, 3) if elapsed else 0.0
    merged["complete"] = all(r.get("complete") for r in reports) and bool(reports)
    merged["stopped_by_signal"] = any(r.get("stopped_by_signal") for r in reports)
    merged["stopped_for_low_space"] = any(r.get("stopped_for_low_space") for r in reports)
    merged["write_error"] = next((r["write_error"] for r in reports if r.get("write_error")), None)
    return merged


def _merge(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if isinstance(a, bool) or isinstance(b, bool):
        return a and b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a + b
    if isinstance(a, dict) and isinstance(b, dict):
        return {k: _merge(a.get(k), b.get(k)) if k in a and k in b else a.get(k, b.get(k))
                for k in {**a, **b}}  # fmt: skip
    if isinstance(a, list) and isinstance(b, list):
        return a + b
    return a if a == b else [a, b] if not isinstance(a, list) else [*a, b]
