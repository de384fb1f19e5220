"""The coordinator: starts the worker processes, serves the crawl's one control API and routes
its commands, detects the end of the crawl (two identical snapshots of the shared status array,
every worker idle, batches sent equal to batches received), and merges the workers' reports.
See the package docstring."""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing as mp
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.sharedctypes import Synchronized, SynchronizedArray
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import msgspec

from frontier_crawl.cluster import (
    ClusterError,
    ClusterNode,
    Keys,
    RateWindow,
    make_summary,
    partitions_of,
    waiting_sentence,
)
from frontier_crawl.config import CrawlSettings
from frontier_crawl.control.commands import Command
from frontier_crawl.frontier import DamagedState, StateMismatch
from frontier_crawl.frontier.mailbox import INBOX_ENV, Inbox, Mailbox
from frontier_crawl.frontier.urls import canonicalize, origin
from frontier_crawl.output import (
    write_report,
    write_report_html,
)
from frontier_crawl.proctree import (
    StateLock,
    spawning,
    unlink_semaphores,
)
from frontier_crawl.safefs import make_dir, open_regular, replace_file
from frontier_crawl.spider import SpiderHost

if TYPE_CHECKING:
    from frontier_crawl.control.server import ControlServer

from frontier_crawl.workers.merge import merge_reports, merge_status
from frontier_crawl.workers.partition import (
    CLUSTER_UPGRADABLE,
    _is_batch,
    cluster_identity,
    node_root,
    partition_of,
    redis_of,
    worker_count,
    worker_dir,
)
from frontier_crawl.workers.pipes import WorkerPipes
from frontier_crawl.workers.progress import History, ProgressFeed
from frontier_crawl.workers.seam import _FIELDS
from frontier_crawl.workers.stopping import StopDeadline

log = logging.getLogger(__name__)

COORDINATOR_TICK_S = 0.05


@contextlib.contextmanager
def _main_not_rerun() -> Iterator[None]:
    """Workers started meanwhile do not run this process's main script again.

    multiprocessing's spawn runs the parent's ``__main__`` file in every child (as
    ``__mp_main__``) when it has no module name: the ``frontier-crawl`` script, so every worker
    imported the command line (and rich's console) it never uses, about 0.1 s of CPU each. A
    worker's entry point is ``workers.peers._worker_main``, found by its module name; nothing
    of ``__main__`` is pickled to it.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        yield  # run as a module (-m): spawn imports it by name; nothing to hide
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def _worker_entry(*args: Any) -> None:
    """A worker process's target: ``workers.peers._worker_main``, imported in the worker (the
    coordinator runs no engine: it never imports the engine, fetcher and parser peers need)."""
    from frontier_crawl.workers.peers import _worker_main

    _worker_main(*args)


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
        on_listening: Callable[[str], None] | None = None,
    ) -> None:
        """``on_progress``: called with the workers' progress merged, every
        ``output.progress_interval_s``; ``on_listening``: told the control API's
        ``host:port`` once it listens."""
        self._on_listening = on_listening
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
        #: [stop requested, reloads ordered]: the signals the workers ignore, passed on; then
        #: the workers started (each adds 1 once it holds the objects above: ``_unlinked``)
        self._orders: SynchronizedArray[int] = ctx.Array("q", 3)
        #: the workers' progress (in a cluster always: it feeds the node's live summary)
        self._progress = ProgressFeed(ctx, on_progress, settings.output.progress_interval_s,
                                      bool(c.redis_url))  # fmt: skip
        raw = msgspec.msgpack.encode(settings)
        #: the coordinator's ends of the workers' command pipes (with the control API only), in
        #: the order of ``self.partitions``
        pipes: list[Connection] = []
        ends: list[Connection | None] = [None] * self.count
        if settings.control.listen:
            for i in range(self.count):
                mine, theirs = ctx.Pipe(duplex=True)
                pipes.append(mine)
                ends[i] = theirs
        self._pipes = WorkerPipes(pipes)
        path = str(config_path) if config_path is not None else None
        self._procs = [
            ctx.Process(
                target=_worker_entry,
                args=(raw, p, self.partitions, self.total, self._status, self._stop, run_id,
                      ends[slot], path, file_output_dir, self._orders, os.getpid(),
                      self._progress.queue),
                name=f"frontier-crawl-worker-{p}",
            )
            for slot, p in enumerate(self.partitions)
        ]
        #: the stop signals received, and the deadline the first set (``stopping.py``)
        self._stopping = StopDeadline(settings.crawl.stop_timeout_s)
        self._semaphores_named = True  #: the shared objects' semaphores still have names
        self._control: ControlServer | None = None
        self._history = History()  #: the status's pages over time
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
                from frontier_crawl.engine import set_aside_state  # (the engine: only here)

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
            self._cluster.join(cluster_identity(self.settings), CLUSTER_UPGRADABLE)
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
                if self._on_listening is not None:
                    self._on_listening(self._control.address)
            # the terminal's signals ignored from the workers' first instruction
            with spawning(self._ctx, self.root / "state"), _main_not_rerun():
                for proc in self._procs:
                    proc.start()
            if self._cluster is not None:
                self._wait_for_the_cluster(self._cluster, inboxes)
            else:
                self._wait_for_the_end()
            killed = self._stopping.join(self._procs)
        finally:
            if self._control is not None:
                self._control.close()
            inboxes.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        failed = [p.name for p in self._procs if p.exitcode != 0]
        report = merge_reports(
            [json.loads((worker_dir(self.root, i) / "report.json").read_text())
             for slot, i in enumerate(self.partitions)
             if slot not in killed and (worker_dir(self.root, i) / "report.json").exists()]
        )  # fmt: skip
        report["workers"] = self.count
        signalled = self._stopping.signals
        report["stopped_by_signal"] = bool(report.get("stopped_by_signal") or signalled)
        report["output_dir"] = str(self.root)
        report["warnings"] = [
            *repairs,
            *(f"{self._procs[slot].name} was killed at the stop's deadline "
              "(crawl.stop_timeout_s): its figures are not in this report; its state is as of "
              "its last commit, resumed by the same command" for slot in sorted(killed)),
            *report.get("warnings", []),
        ]  # fmt: skip
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

    def _unlinked(self) -> None:
        """Once every worker holds the shared objects (``_orders[2]``), their semaphores'
        names are removed, as an open file is unlinked: the semaphores live while a process
        holds them, and no way this process ends (a second signal's ``os._exit``, a kill -9)
        leaves one behind for the resource tracker to find leaked (``proctree``)."""
        if self._semaphores_named and self._orders[2] >= self.count:
            self._semaphores_named = False
            unlink_semaphores([self._status, self._stop, self._orders, self._progress.queue])

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
            if any(p.exitcode is not None for p in self._procs) or self._stopping.overdue():
                self._stop.value = 1  # a worker ended (signal or failure): end them all
                return
            self._unlinked()
            snap = self._snapshot()
            if previous == snap and self._finished(snap):
                self._stop.value = 1
                return
            previous = snap
            self._show_progress()
            time.sleep(COORDINATOR_TICK_S)

    # -- the control API (HTTP threads) ------------------------------------------------------

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
            replies = [self._pipes.ask(i, Command("seeds", urls=tuple(urls)))
                       for i, urls in sorted(groups.items())]  # fmt: skip
        else:
            replies = [self._pipes.ask(i, command) for i in range(self.count)]
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
        replies = self._pipes.ask_all(Command("status"), timeout_s=2.0)
        return [{**reply, "worker": self.partitions[i]}
                for i, reply in enumerate(replies) if reply and "error" not in reply]  # fmt: skip

    def status(self) -> dict[str, Any]:
        """The crawl's status: every worker's snapshot, merged (``workers`` lists them); its
        ``history`` is the coordinator's, one point per status asked for (every 2 s at most)."""
        snaps = [{k: v for k, v in s.items() if k != "metrics"} for s in self._snapshots()]
        merged = merge_status(snaps)
        if self._cluster is not None:
            view = merged["cluster"] = self.cluster_view()
            if view["waiting"] and merged["bottleneck"].get("name") == "idle":
                merged["bottleneck"] = {"name": "idle", "detail": view["waiting"]}
            self._name_redis(merged, bool(snaps))
        merged["history"] = self._history.add(int(merged.get("pages", 0)),
                                              int(merged.get("revisits", 0)),
                                              answered=bool(snaps))  # fmt: skip
        return merged

    def _name_redis(self, merged: dict[str, Any], answered: bool) -> None:
        """While Redis does not answer this node (its coordinator retrying), the status's
        bottleneck says so, whatever the workers say (nothing moves between nodes, the crawl
        cannot end); workers that did not answer wait for it too (their link batches)."""
        assert self._cluster is not None
        down = self._cluster.redis.unreachable(time.monotonic())
        if not down:
            return
        if not answered:  # (not "starting": the crawl ran; its workers wait for Redis)
            merged["state"] = "stopping" if self._orders[0] or self._stop.value else "running"
            down += "; the workers wait for it too (no worker status meanwhile)"
        merged["bottleneck"] = {"name": "redis-unreachable", "detail": down}

    def metrics(self) -> bytes:
        """Prometheus text of every worker (label ``worker``)."""
        # prometheus_client (~50 ms with the http.server it imports) only once scraped
        from frontier_crawl.control.metrics import render_metrics

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
                if any(p.exitcode is not None for p in self._procs) or self._stopping.overdue():
                    break  # a worker ended (signal or failure): end them all
                if time.monotonic() >= next_tick:  # the probe once a tick, batches at once
                    next_tick = time.monotonic() + COORDINATOR_TICK_S
                    self._unlinked()
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
        return self._progress.latest()

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
        if self._stopping.signalled() > 1:
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
        feed = self._progress
        feed.take()
        now = time.monotonic()
        if not feed.due(now):
            return
        merged = feed.merged()
        if self._cluster is not None:  # which node it waits for, how long (cluster/view.py)
            merged["waiting"] = self.cluster_view()["waiting"]
        feed.show(merged)
