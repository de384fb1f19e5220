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
report); a second signal is forwarded too and makes everyone exit at once. SIGHUP is forwarded:
every worker reads crawl.toml again.

Control API: with ``[control] listen`` set, the coordinator serves the crawl's one API
(``control/server.py``). Each worker has a pipe from the coordinator, which its loop drains like
the API's queue (and which wakes its wait). Commands are routed: added seeds to the worker that
owns each URL's host (``owner_of``); block, unblock and host delays to every worker (they name a
host, and the owner is a function of the origin: each scheme and port of a host may belong to
another worker); pause, resume, stop, concurrency (per worker process) and reload to all. The
status is every worker's snapshot, merged.

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

import contextlib
import functools
import json
import logging
import multiprocessing as mp
import os
import signal
import socket
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized, SynchronizedArray
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import msgspec
from publicsuffixlist import PublicSuffixList

from frontier_crawl.cluster import (
    ClusterError,
    ClusterNode,
    Keys,
    RateWindow,
    Redis,
    RemoteSender,
    make_summary,
    partitions_of,
    waiting_sentence,
)
from frontier_crawl.cluster.view import summary_every
from frontier_crawl.config import CrawlSettings
from frontier_crawl.control.commands import Command
from frontier_crawl.control.metrics import render_metrics
from frontier_crawl.control.status import BOTTLENECKS, HISTORY_EVERY_S, HISTORY_S, empty_status
from frontier_crawl.engine import Engine, set_aside_state
from frontier_crawl.frontier import DamagedState, StateMismatch
from frontier_crawl.frontier.frontier import LAYOUT_VERSION
from frontier_crawl.frontier.mailbox import INBOX_ENV, Inbox, Mailbox, decode_links, owner_of
from frontier_crawl.frontier.urls import canonicalize, host_of, origin
from frontier_crawl.output import (
    LogHistogram,
    merge_rate_buckets,
    write_report,
    write_report_html,
)
from frontier_crawl.proctree import (
    StateLock,
    StateLocked,
    die_with_parent,
    ignore_terminal_signals,
    spawning,
    watch_parent,
)
from frontier_crawl.safefs import make_dir, open_regular, replace_file
from frontier_crawl.spider import SpiderHost

if TYPE_CHECKING:
    from frontier_crawl.control.server import ControlServer

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
        orders: SynchronizedArray[int] | None = None,
    ) -> None:
        self.worker = index  #: this worker's partition (of ``total``)
        self._by = partition_by
        self.run_id = run_id
        self.count = total
        self._slot = index - local.start  #: its place in this node's status array
        self._status = status
        self._stop = stop
        #: the coordinator's orders: [stop requested, reloads ordered] (read without its lock:
        #: one word each, written by one process)
        self._orders = orders.get_obj() if orders is not None else None
        self._remote = remote  #: other nodes' partitions (cluster mode)
        envs = {j: worker_dir(root, j) / "state" / INBOX_ENV for j in local if j != index}
        self._mailbox = Mailbox(envs, map_size, run_id)
        self._local = local

    def route(self, origin: str) -> int:
        """The owning worker (not remembered here: the frontier keeps a bounded cache of it)."""
        return partition_of(origin, self.count, self._by)

    def send(self, dest: int, batch: bytes) -> bool:
        if dest in self._local or self._remote is None:
            self._mailbox.send(dest, batch)
            return True
        return self._remote.send(dest, batch)

    def held_up(self, batches: int) -> str:
        return self._remote.held_up(batches) if self._remote is not None else ""

    def publish(self, idle: bool, received: int) -> None:
        base = self._slot * _FIELDS
        with self._status.get_lock():
            self._status[base] = int(idle)
            self._status[base + 1] = self._mailbox.sent
            self._status[base + 2] = received

    def should_stop(self) -> bool:
        return bool(self._stop.value)

    def orders(self) -> tuple[bool, int]:
        if self._orders is None:
            return False, 0
        return bool(self._orders[0]), int(self._orders[1])

    def close(self) -> None:
        self._mailbox.close()
        if self._remote is not None:
            self._remote.close()


def _worker_settings(settings: CrawlSettings, root: Path, index: int) -> CrawlSettings:
    """A worker's settings; in a cluster its progress snapshots (which feed the node's live
    summary, ``cluster/view.py``) come at least every summary interval."""
    s = settings
    every = s.output.progress_interval_s
    if s.cluster.redis_url:
        often = summary_every(s.cluster.heartbeat_ttl_s)
        every = min(every, often) if every > 0 else often
    return msgspec.structs.replace(
        s,
        crawl=msgspec.structs.replace(s.crawl, output_dir=str(worker_dir(root, index))),
        output=msgspec.structs.replace(
            s.output, warc_prefix=f"{s.output.warc_prefix}-w{index}", progress_interval_s=every
        ),
        workers=msgspec.structs.replace(s.workers, processes=1),
    )


class _Remote:
    """A command from the coordinator, answered through the pipe it came by."""

    __slots__ = ("_conn", "_rid", "command")

    def __init__(self, conn: Connection, rid: int, command: Command) -> None:
        self._conn, self._rid, self.command = conn, rid, command

    def answer(self, reply: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):  # the coordinator is gone
            self._conn.send((self._rid, reply))


class PipeCommands:
    """A worker's command source: the coordinator's end of a pipe (engine.CommandSource)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.closed = False  #: the coordinator's end is gone (the fd would stay readable)

    @property
    def fileno(self) -> int:
        return self._conn.fileno()

    def take(self) -> Sequence[_Remote]:
        out: list[_Remote] = []
        try:
            while self._conn.poll(0):
                rid, command = self._conn.recv()
                out.append(_Remote(self._conn, rid, command))
        except (EOFError, OSError):
            self.closed = True
        return out


def _worker_main(
    raw: bytes,
    index: int,
    local: range,
    total: int,
    status: SynchronizedArray[int],
    stop: Synchronized[int],
    run_id: bytes,
    conn: Connection | None = None,
    config_path: str | None = None,
    file_output_dir: str | None = None,
    orders: SynchronizedArray[int] | None = None,
    parent: int | None = None,
    progress: Any = None,
) -> None:
    """Entry point of one worker process (``settings.crawl.output_dir``: the node's root).

    The terminal's signals are ignored from its first instruction (``proctree.spawning``); it
    dies with its coordinator; ``orders`` are the coordinator's signals passed on; ``progress``
    (a queue) takes its progress snapshots for the coordinator's progress lines."""
    die_with_parent(parent)
    watch_parent()
    ignore_terminal_signals()
    if progress is not None:  # snapshots only: never wait at exit for one to be read
        progress.cancel_join_thread()
    settings = msgspec.msgpack.decode(raw, type=CrawlSettings)
    root = Path(settings.crawl.output_dir)
    remote = None
    if settings.cluster.redis_url:
        remote = RemoteSender(redis_of(settings), Keys(settings.cluster.key_prefix))
    peers = Peers(
        index, local, total, root, settings.frontier.lmdb_map_size_bytes, status, stop, run_id,
        remote, settings.workers.partition_by, orders,
    )  # fmt: skip
    try:
        report = Engine(
            _worker_settings(settings, root, index),
            peers=peers,
            on_progress=(lambda p: progress.put({**p, "worker": index})) if progress else None,
            commands=PipeCommands(conn) if conn is not None else None,
            config_path=Path(config_path) if config_path else None,
            reshape=lambda s: _worker_settings(s, root, index),
            # a reload compares with the file as written ({node} not yet replaced)
            loaded=msgspec.structs.replace(
                settings,
                crawl=msgspec.structs.replace(
                    settings.crawl, output_dir=file_output_dir or settings.crawl.output_dir
                ),
            ),
        ).run()
    except ClusterError as exc:  # Redis gone for too long: this worker's state is committed
        log.error("worker %d: %s", index, exc)
        sys.exit(1)
    except StateLocked as exc:  # a process of an earlier run still holds this worker's state
        log.error("worker %d: %s", index, exc)
        sys.exit(2)
    finally:
        peers.close()
    if report.get("write_error") or report.get("stopped_for_low_space"):
        sys.exit(1)  # the coordinator stops the others and lists this one as failed


def _pin_worker_count(
    root: Path, count: int, cluster: dict[str, int] | None = None, by: str = "host"
) -> None:
    """Host ownership depends on the worker count (and in a cluster on the node count and
    this node's number): a crawl keeps the ones it started with."""
    make_dir(root)
    pin = root / "workers.json"
    mine: dict[str, int | str] = {"processes": count, **(cluster or {})}
    if by != "host":  # absent from pins written before the setting existed: "host"
        mine["partition_by"] = by
    if pin.exists() and not pin.is_symlink():  # a link is replaced below, never followed
        try:
            with open_regular(pin) as f:
                pinned = json.loads(f.read())
            if not isinstance(pinned, dict):
                raise ValueError(f"a JSON {type(pinned).__name__}, not an object")
        except (OSError, ValueError) as exc:
            raise StateMismatch(
                f"{pin} cannot be read ({exc}); it pins the worker count hosts are partitioned "
                f"by: if this crawl ran with {count} worker process(es), replace it with a file "
                f"holding {json.dumps(mine)}, else set workers.processes to the count it ran "
                "with or choose a new crawl.output_dir."
            ) from None
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
    replace_file(pin, json.dumps(mine).encode())


class Coordinator:
    """Starts the workers, detects the end of the crawl, merges the reports."""

    def __init__(
        self,
        settings: CrawlSettings,
        node: int | None = None,
        config_path: Path | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """``on_progress``: called with the workers' progress merged, every
        ``output.progress_interval_s``."""
        self.root = node_root(settings, node)
        file_output_dir = settings.crawl.output_dir
        self.settings = settings = msgspec.structs.replace(
            settings, crawl=msgspec.structs.replace(settings.crawl, output_dir=str(self.root))
        )
        self.count = worker_count(settings)
        SpiderHost.load(settings)  # a bad spider source: ConfigError here, before any worker
        #: one owner per output directory, before anything of it is read (each worker locks
        #: its own state directory besides)
        self._lock = StateLock.acquire(self.root / "state")
        try:
            self._prepare(settings, node, config_path, file_output_dir, on_progress)
        except BaseException:
            self._lock.release()
            raise

    def _prepare(
        self,
        settings: CrawlSettings,
        node: int | None,
        config_path: Path | None,
        file_output_dir: str,
        on_progress: Callable[[dict[str, Any]], None] | None,
    ) -> None:
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
        self._ctx = ctx = mp.get_context("spawn")
        # multiprocessing's resource tracker, a child of this process too, started now (by the
        # shared arrays below) and like the workers: ignoring the terminal's signals
        with spawning(ctx, self.root / "state"):
            resource_tracker.ensure_running()
        self._status: SynchronizedArray[int] = ctx.Array("q", _FIELDS * self.count)
        self._stop: Synchronized[int] = ctx.Value("i", 0)
        #: [stop requested, reloads ordered]: the signals the workers ignore, passed on
        self._orders: SynchronizedArray[int] = ctx.Array("q", 2)
        self._on_progress = on_progress
        every = settings.output.progress_interval_s
        self._progress_every = every if on_progress is not None and every > 0 else 0.0
        #: (in a cluster always: the snapshots feed the node's live summary)
        self._progress_q: Any = ctx.Queue() if self._progress_every or c.redis_url else None
        self._progress: dict[int, dict[str, Any]] = {}  #: each worker's latest snapshot
        self._next_progress = time.monotonic() + self._progress_every
        self._started = time.monotonic()
        raw = msgspec.msgpack.encode(settings)
        #: the coordinator's ends of the workers' command pipes (with the control API only), in
        #: the order of ``self.partitions``
        self._pipes: list[Connection] = []
        ends: list[Connection | None] = [None] * self.count
        if settings.control.listen:
            for i in range(self.count):
                mine, theirs = ctx.Pipe(duplex=True)
                self._pipes.append(mine)
                ends[i] = theirs
        self._pipe_locks = [threading.Lock() for _ in self._pipes]
        self._rid = 0
        path = str(config_path) if config_path is not None else None
        self._procs = [
            ctx.Process(
                target=_worker_main,
                args=(raw, p, self.partitions, self.total, self._status, self._stop, run_id,
                      ends[slot], path, file_output_dir, self._orders, os.getpid(),
                      self._progress_q),
                name=f"frontier-crawl-worker-{p}",
            )
            for slot, p in enumerate(self.partitions)
        ]
        self._signals = 0
        self._control: ControlServer | None = None
        self._history: deque[tuple[float, int]] = deque()
        self._history_lock = threading.Lock()
        self._cluster_error: ClusterError | None = None
        self._cluster_over = False  #: the cluster's crawl ended (``done``) while this node ran
        #: the cluster's view as last read (``cluster/view.py``) and when (monotonic)
        self._view: tuple[float, dict[str, Any]] | None = None
        self._rate = RateWindow()

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
        try:
            return self._run_node()
        finally:
            self._lock.release()

    def _run_node(self) -> dict[str, Any]:
        if self._cluster is not None:
            self._cluster.join(cluster_identity(self.settings))
            self._cluster.publish_summary(self._summary(self._cluster, "starting"))
        try:
            report = self._run()
            if self._cluster is not None and self._cluster_error is None:
                self._cluster.publish_report(report)
                over = self._cluster_over and not report.get("failed_workers")
                self._cluster.publish_summary(
                    self._summary(self._cluster, "finished" if over else "stopped", report)
                )
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
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._on_hangup)
        inboxes = Mailbox(
            {p: worker_dir(self.root, p) / "state" / INBOX_ENV for p in self.partitions},
            self.settings.frontier.lmdb_map_size_bytes,
            self._run_id,
        )
        try:
            if self._pipes:  # first: a listen address it cannot bind stops the crawl here
                from frontier_crawl.control.server import ControlServer

                self._control = ControlServer(
                    self.settings.control.listen, self.root, self.status, self.metrics,
                    dispatch=self.dispatch,
                )  # fmt: skip
            # the terminal's signals ignored from the workers' first instruction
            with spawning(self._ctx, self.root / "state"):
                for proc in self._procs:
                    proc.start()
            if self._cluster is not None:
                self._wait_for_the_cluster(self._cluster, inboxes)
            else:
                self._wait_for_the_end()
            for proc in self._procs:
                proc.join()
        finally:
            if self._control is not None:
                self._control.close()
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
        write_report_html(self.root / "report.html", report)
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
            self._show_progress()
            time.sleep(COORDINATOR_TICK_S)

    # -- the control API (HTTP threads) ------------------------------------------------------

    def _ask(self, index: int, command: Command, timeout_s: float = 10.0) -> dict[str, Any]:
        """Send ``command`` to worker ``index`` and wait for its reply."""
        conn = self._pipes[index]
        with self._pipe_locks[index]:
            self._rid += 1
            rid = self._rid
            try:
                conn.send((rid, command))
                deadline = time.monotonic() + timeout_s
                while (left := deadline - time.monotonic()) > 0 and conn.poll(left):
                    got, reply = conn.recv()
                    if got == rid:
                        return dict(reply)
            except (EOFError, OSError):
                return {"error": f"worker {index} has ended"}
        return {"error": f"worker {index} did not answer within {timeout_s:.0f} s"}

    def dispatch(self, command: Command) -> dict[str, Any]:
        """Route an API command to the workers it concerns and merge their replies."""
        if command.name == "seeds":
            groups: dict[int, list[str]] = {}
            first = self.partitions.start
            for url in command.urls:
                canonical = canonicalize(url)
                owner = (
                    partition_of(origin(canonical), self.total, self.settings.workers.partition_by)
                    if canonical
                    else first
                )
                if owner not in self.partitions:  # another node's (cluster mode): through Redis
                    owner = first  # this node's first worker sends it on like any link
                groups.setdefault(owner - first, []).append(url)
            replies = [self._ask(i, Command("seeds", urls=tuple(urls)))
                       for i, urls in sorted(groups.items())]  # fmt: skip
        else:
            replies = [self._ask(i, command) for i in range(self.count)]
        errors = [r["error"] for r in replies if "error" in r]
        if errors:
            return {"error": "; ".join(dict.fromkeys(errors)), "workers": replies}
        merged: dict[str, Any] = {"result": "applied", "command": command.name}
        for reply in replies:
            for key, value in reply.items():
                if key in ("held", "released", "origins", "admitted", "given", "in_flight"):
                    merged[key] = merged.get(key, 0) + value
                else:
                    merged.setdefault(key, value)
        if command.name == "seeds":
            merged["given"] = len(command.urls)
        merged["workers"] = replies
        return merged

    def _snapshots(self) -> list[dict[str, Any]]:
        """Every live worker's status (with its metrics snapshot under ``"metrics"``)."""
        snaps = []
        for i in range(self.count):
            reply = self._ask(i, Command("status"), timeout_s=2.0)
            if "error" not in reply and reply:
                snaps.append({**reply, "worker": self.partitions[i]})
        return snaps

    def status(self) -> dict[str, Any]:
        """The crawl's status: every worker's snapshot, merged (``workers`` lists them); its
        ``history`` is the coordinator's, one point per status asked for (every 2 s at most)."""
        snaps = [{k: v for k, v in s.items() if k != "metrics"} for s in self._snapshots()]
        merged = merge_status(snaps)
        if self._cluster is not None:
            view = merged["cluster"] = self.cluster_view()
            if view["waiting"] and merged["bottleneck"].get("name") == "idle":
                merged["bottleneck"] = {"name": "idle", "detail": view["waiting"]}
        with self._history_lock:
            history, now = self._history, time.time()
            if snaps and (not history or now - history[-1][0] >= HISTORY_EVERY_S):
                history.append((round(now, 3), int(merged.get("pages", 0))))
                while now - history[0][0] > HISTORY_S:
                    history.popleft()
            merged["history"] = [list(point) for point in history]
        return merged

    def metrics(self) -> bytes:
        """Prometheus text of every worker (label ``worker``)."""
        return render_metrics(
            [{**s["metrics"], "worker": str(s["worker"])} for s in self._snapshots()
             if "metrics" in s],
            cluster=self.cluster_view() if self._cluster is not None else None,
        )  # fmt: skip

    def _on_hangup(self, signum: int, frame: FrameType | None) -> None:
        """SIGHUP: every worker reads crawl.toml again."""
        del signum, frame
        self._orders[1] = self._orders[1] + 1

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
                    self._show_progress()
                    self._share_view(node)
                    snap = (*self._snapshot(), node.pumped)
                    if previous == snap and self._finished(snap[:-1], node.pumped):
                        # quiet so far: read the round, look again after reading it, answer.
                        # A busy node does not answer (no round completes without it) and
                        # costs Redis nothing but its batches.
                        if node.begin():
                            self._cluster_over = True
                            break  # the whole cluster is over
                        again = (*self._snapshot(), node.pumped)
                        if again == snap:
                            node.answer(True, self._totals(snap[:-1]))
                        snap = again
                    previous = snap
                node.pump(
                    inboxes.send, wait_s=max(0.0, next_tick - time.monotonic()), valid=_is_batch
                )
            node.publish_summary(self._summary(node, "stopping"))  # (while it drains)
        except ClusterError as exc:  # said once, by the command line, after the stop
            self._cluster_error = exc
        self._stop.value = 1

    # -- the cluster seen as one (cluster/view.py) -------------------------------------------

    def _share_view(self, node: ClusterNode) -> None:
        """Read the cluster's view and publish this node's summary, each when due."""
        now = time.monotonic()
        if node.view_due(now):
            self._view = (now, node.read_view())
        if node.summary_due(now):
            node.publish_summary(self._summary(node))

    def _latest_progress(self) -> dict[str, Any]:
        snaps = list(self._progress.values())
        return merge_progress(snaps, time.monotonic() - self._started) if snaps else {}

    def _summary(
        self, node: ClusterNode, state: str | None = None, report: Mapping[str, Any] | None = None
    ) -> bytes:
        """This node's live summary: its workers' latest progress merged (the final report's
        counts at the end); ``state`` None: from the progress (and a stop ordered)."""
        p = self._latest_progress()
        name, _, detail = str(p.get("bottleneck") or "").partition(": ")
        pages = int(report.get("fetched", 0)) if report is not None else int(p.get("pages", 0))
        if state is None:
            if not p:
                state = "starting"
            elif self._orders[0] or self._stop.value or name == "draining":
                state = "stopping"
            else:
                state = "paused" if name == "paused" else "running"
        waiting = [m["node"] for m in self.cluster_view().get("waiting_for", [])]
        ending = state in ("stopping", "finished", "stopped")
        return make_summary(
            node=node.node,
            state=state,
            pages=pages,
            pages_per_s=0.0 if ending else self._rate.add(time.monotonic(), pages),
            queued=0 if state == "finished" else int(p.get("queued", 0)),
            in_flight=0 if state in ("finished", "stopped") else int(p.get("in_flight", 0)),
            hosts=int(p.get("hosts", 0)),
            bottleneck={"name": name, "detail": detail},
            workers=self.count,
            # (draining may take crawl.stop_timeout_s without a summary: not silent)
            every_s=node.summary_every_s
            + (self.settings.crawl.stop_timeout_s if state == "stopping" else 0.0),
            machine=socket.gethostname(),
            pid=os.getpid(),
            waiting_for=waiting,
        )

    def cluster_view(self) -> dict[str, Any]:
        """The cluster's view as this node last read it (``cluster/view.py``), with its age
        (``age_s``), this node's number (``me``), and the nodes this node waits for
        (``waiting_for``; ``waiting``: the sentence). Safe from any thread (no Redis call)."""
        got = self._view
        if got is None:
            return {"count": self.settings.cluster.nodes, "me": self.node, "age_s": None,
                    "ended": False, "alive": [], "missing": [], "nodes": [],
                    "totals": {}, "waiting_for": [], "waiting": ""}  # fmt: skip
        read_at, view = got
        me = self.node
        return {
            **view,
            "me": me,
            "age_s": round(time.monotonic() - read_at, 3),
            "waiting_for": [] if view.get("ended") else
                           [m for m in view.get("missing", []) if m.get("node") != me],
            "waiting": waiting_sentence(view, me),
        }  # fmt: skip

    def _totals(self, snap: tuple[int, ...]) -> tuple[int, int]:
        sent = sum(snap[i * _FIELDS + 1] for i in range(self.count))
        received = sum(snap[i * _FIELDS + 2] for i in range(self.count))
        return sent, received

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """SIGINT/SIGTERM: the workers (which ignore the signals the terminal or a service
        manager sends to every process at once) are ordered to stop gracefully; a second
        signal ends them and this process at once (as safe as a kill -9)."""
        del frame
        self._signals += 1
        if self._signals > 1:
            os.write(2, b"frontier-crawl: second signal, exiting at once\n")
            for proc in self._procs:
                if proc.pid is not None and proc.exitcode is None:
                    with contextlib.suppress(OSError):
                        os.kill(proc.pid, signal.SIGKILL)
            os._exit(128 + signum)
        self._orders[0] = 1
        log.warning(
            "received %s: stopping the workers (in-flight transfers finish, up to %.0f s)",
            signal.Signals(signum).name, self.settings.crawl.stop_timeout_s,
        )  # fmt: skip

    def _show_progress(self) -> None:
        """Take the workers' progress snapshots; every ``progress_interval_s``, show them
        merged (``on_progress``)."""
        if self._progress_q is None:
            return
        with contextlib.suppress(Exception):  # queue.Empty, or a worker gone mid-message
            while not self._progress_q.empty():
                snap = self._progress_q.get_nowait()
                self._progress[int(snap.get("worker", 0))] = snap
        now = time.monotonic()
        if now < self._next_progress or self._on_progress is None or not self._progress_every:
            return
        self._next_progress = now + self._progress_every
        merged = merge_progress(list(self._progress.values()), now - self._started)
        if self._cluster is not None:  # which node it waits for, how long (cluster/view.py)
            merged["waiting"] = self.cluster_view()["waiting"]
        self._on_progress(merged)


_STATES = ("stopping", "running", "paused", "starting", "finished")


def merge_progress(snaps: list[dict[str, Any]], elapsed_s: float) -> dict[str, Any]:
    """One progress snapshot from the workers' latest ones: counts added, the bottleneck most
    workers name."""
    merged: dict[str, Any] = {"pages": 0, "queued": 0, "in_flight": 0, "hosts": 0}
    for snap in snaps:
        for key, value in snap.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                merged[key] = merged.get(key, 0) + value
    merged["elapsed_s"] = elapsed_s
    merged["pages_per_s"] = merged["pages"] / elapsed_s if elapsed_s > 0 else 0.0
    merged["paused_for_space"] = any(s.get("paused_for_space") for s in snaps)
    named = Counter(str(s["bottleneck"]).partition(":")[0] for s in snaps if s.get("bottleneck"))
    if named:
        name, count = named.most_common(1)[0]
        first = next(str(s["bottleneck"]) for s in snaps if str(s["bottleneck"]).startswith(name))
        who = "all workers" if count == len(snaps) else f"{count} of {len(snaps)} workers"
        detail = first.partition(":")[2].strip()
        merged["bottleneck"] = first if len(snaps) == 1 else f"{name}: {who}, e.g. {detail}"

    if any("items" in s for s in snaps):
        merged["callback_ms"] = max(tuple(s["callback_ms"]) for s in snaps if "items" in s)
        merged["pipeline_ms"] = max(tuple(s["pipeline_ms"]) for s in snaps if "items" in s)
        merged["spider_share"] = max(float(s.get("spider_share", 0)) for s in snaps)
    merged.pop("worker", None)
    return merged


def merge_status(snaps: list[dict[str, Any]]) -> dict[str, Any]:
    """One status from the workers' snapshots: counters added, the most telling state."""
    if not snaps:  # every key present all the same (the seam)
        empty = empty_status("starting")
        empty["bottleneck"] = {"name": "idle", "detail": "no worker has reported yet"}
        return empty
    merged: dict[str, Any] = {}
    for snap in snaps:
        for key, value in snap.items():
            if key in ("history", "worker", "workers", "state", "bottleneck", "busiest_hosts",
                       "failing_hosts", "cpu", "blocked_hosts", "host_delays", "paused"):
                continue
            merged[key] = _merge(merged.get(key), value)
    states = [s.get("state", "running") for s in snaps]
    merged["state"] = next((s for s in _STATES if s in states), states[0])
    merged["paused"] = all(s.get("paused") for s in snaps)
    merged["bottleneck"] = _merge_bottlenecks(snaps)
    merged["blocked_hosts"] = snaps[0].get("blocked_hosts", [])
    merged["host_delays"] = snaps[0].get("host_delays", {})
    merged["cpu"] = _merge_cpu([s.get("cpu", {}) for s in snaps])
    merged["elapsed_s"] = max(float(s.get("elapsed_s", 0.0)) for s in snaps)
    for key in ("busiest_hosts", "failing_hosts"):
        rows = [row for s in snaps for row in s.get(key, [])]
        sort = "pages" if key == "busiest_hosts" else "failures"
        merged[key] = sorted(rows, key=lambda r: -float(r.get(sort, 0)))[:10]
    merged["history"] = []
    merged["workers"] = [{k: v for k, v in s.items() if k != "history"} for s in snaps]
    return merged


def _merge_bottlenecks(snaps: list[dict[str, Any]]) -> dict[str, str]:
    """The bottleneck most workers name (ties: the first in ``BOTTLENECKS`` order, draining
    and paused before the rest), and what each of those workers says."""
    named = [(int(s.get("worker", i)), s.get("bottleneck") or {}) for i, s in enumerate(snaps)]
    counts = Counter(str(b.get("name", "idle")) for _w, b in named)
    order: dict[str, int] = {n: i for i, n in enumerate(("draining", "paused", *BOTTLENECKS))}
    name = min(counts, key=lambda n: (-counts[n], order.get(n, len(order))))
    if "redis-full" in counts:  # a fault that stops the node unless fixed: whoever names it
        name = "redis-full"
    details = [(w, str(b.get("detail", ""))) for w, b in named if b.get("name") == name]
    if len(snaps) == 1:
        return {"name": name, "detail": details[0][1]}
    who = "all workers" if len(details) == len(snaps) else f"{len(details)} of {len(snaps)} workers"
    said = "; ".join(f"worker {w}: {d}" for w, d in details[:3])
    return {"name": name, "detail": f"{who}: {said}" + ("; ..." if len(details) > 3 else "")}


def _merge_cpu(cpus: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean loop busy fraction; each share weighted by its worker's busy time."""
    busy = [float(c.get("loop_busy", 0.0)) for c in cpus]
    total = sum(busy)
    shares: dict[str, float] = {}
    for c, b in zip(cpus, busy, strict=True):
        for key, value in (c.get("shares") or {}).items():
            shares[key] = shares.get(key, 0.0) + float(value) * (b / total if total else 0.0)
    return {
        "loop_busy": round(total / len(cpus), 4) if cpus else 0.0,
        "shares": {k: round(v, 4) for k, v in shares.items()},
    }


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
    # each worker's pages over time, on the coarsest bucket width of them all, summed
    merged["rate_bucket_s"], merged["pages_over_time"] = merge_rate_buckets(
        [(float(r.get("rate_bucket_s", 60.0)), r.get("pages_over_time", [])) for r in reports]
    )
    merged["runs"] = max((int(r.get("runs", 0)) for r in reports), default=0)  # side by side
    for key, order in (("slowest_hosts", "mean_fetch_s"), ("failing_hosts", "failures")):
        rows = [row for r in reports for row in r.get(key, [])]  # hosts are partitioned
        merged[key] = sorted(rows, key=lambda row: -row.get(order, 0))[:10]
    spider = merged.get("spider")
    if isinstance(spider, dict):  # histograms merged bucket by bucket, quantiles read again
        busy = sum(float(r.get("elapsed_s", 0.0)) for r in reports)  # the workers' loops
        for key in ("callback", "pipelines"):
            if isinstance(spider.get(key), dict):
                spider[key] = LogHistogram.from_summary(spider[key]).summary(busy)
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
