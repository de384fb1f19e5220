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
"""

from __future__ import annotations

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

from frontier_crawl.config import CrawlSettings
from frontier_crawl.engine import Engine, set_aside_state
from frontier_crawl.frontier import DamagedState, StateMismatch
from frontier_crawl.frontier.mailbox import INBOX_ENV, Inbox, Mailbox, owner_of
from frontier_crawl.output import LogHistogram, write_report
from frontier_crawl.spider import SpiderHost

log = logging.getLogger(__name__)

COORDINATOR_TICK_S = 0.05
_FIELDS = 3  # per worker in the shared array: idle, sent, received


def worker_count(settings: CrawlSettings) -> int:
    """``workers.processes``, with 0 meaning one per core."""
    return settings.workers.processes or os.cpu_count() or 1


def worker_dir(root: Path, index: int) -> Path:
    return root / f"worker-{index}"


class Peers:
    """A worker's view of the others: routing, sending, and its published status."""

    def __init__(
        self,
        index: int,
        count: int,
        root: Path,
        map_size: int,
        status: SynchronizedArray[int],
        stop: Synchronized[int],
        run_id: bytes,
    ) -> None:
        self.worker = index
        self.run_id = run_id
        self.count = count
        self._status = status
        self._stop = stop
        envs = {
            j: worker_dir(root, j) / "state" / INBOX_ENV for j in range(count) if j != index
        }
        self._mailbox = Mailbox(envs, map_size, run_id)

    def route(self, origin: str) -> int:
        """The owning worker (not remembered here: the frontier keeps a bounded cache of it)."""
        return owner_of(origin, self.count)

    def send(self, dest: int, batch: bytes) -> None:
        self._mailbox.send(dest, batch)

    def publish(self, idle: bool, received: int) -> None:
        base = self.worker * _FIELDS
        with self._status.get_lock():
            self._status[base] = int(idle)
            self._status[base + 1] = self._mailbox.sent
            self._status[base + 2] = received

    def should_stop(self) -> bool:
        return bool(self._stop.value)

    def close(self) -> None:
        self._mailbox.close()


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
    count: int,
    status: SynchronizedArray[int],
    stop: Synchronized[int],
    run_id: bytes,
) -> None:
    """Entry point of one worker process."""
    settings = msgspec.msgpack.decode(raw, type=CrawlSettings)
    root = Path(settings.crawl.output_dir)
    peers = Peers(index, count, root, settings.frontier.lmdb_map_size_bytes, status, stop, run_id)
    try:
        report = Engine(_worker_settings(settings, root, index), peers=peers).run()
    finally:
        peers.close()
    if report.get("write_error") or report.get("stopped_for_low_space"):
        sys.exit(1)  # the coordinator stops the others and lists this one as failed


def _pin_worker_count(root: Path, count: int) -> None:
    """Host ownership depends on the worker count: a crawl keeps the count it started with."""
    root.mkdir(parents=True, exist_ok=True)
    pin = root / "workers.json"
    if pin.exists():
        saved = json.loads(pin.read_text()).get("processes")
        if saved != count:
            raise StateMismatch(
                f"{root} holds a crawl run by {saved} worker process(es), this configuration asks "
                f"for {count}: hosts are partitioned by that number. Set workers.processes = "
                f"{saved} to resume it, or choose a new crawl.output_dir."
            )
        return
    pin.write_text(json.dumps({"processes": count}))


class Coordinator:
    """Starts the workers, detects the end of the crawl, merges the reports."""

    def __init__(self, settings: CrawlSettings) -> None:
        self.settings = settings
        self.root = Path(settings.crawl.output_dir)
        self.count = worker_count(settings)
        SpiderHost.load(settings)  # a bad spider source: ConfigError here, before any worker
        _pin_worker_count(self.root, self.count)
        ctx = mp.get_context("spawn")
        self._status: SynchronizedArray[int] = ctx.Array("q", _FIELDS * self.count)
        self._stop: Synchronized[int] = ctx.Value("i", 0)
        raw = msgspec.msgpack.encode(settings)
        run_id = os.urandom(8)
        self._procs = [
            ctx.Process(
                target=_worker_main,
                args=(raw, i, self.count, self._status, self._stop, run_id),
                name=f"frontier-crawl-worker-{i}",
            )
            for i in range(self.count)
        ]
        self._signals = 0

    def _repair_inboxes(self) -> list[str]:
        """Set aside each damaged worker inbox before any worker starts: peers write into it,
        so it must be usable before the first of them opens it (its owner would set it aside
        too, but only once it gets there). Returns warnings for the report."""
        warnings: list[str] = []
        for i in range(self.count):
            path = worker_dir(self.root, i) / "state" / INBOX_ENV
            if not path.exists():
                continue
            try:
                Inbox(path, self.settings.frontier.lmdb_map_size_bytes).close()
            except DamagedState as damage:
                warnings.append(set_aside_state(path, damage.problem, damage.consequence))
        return warnings

    def run(self) -> dict[str, Any]:
        repairs = self._repair_inboxes()
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            for proc in self._procs:
                proc.start()
            self._wait_for_the_end()
            for proc in self._procs:
                proc.join()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        failed = [p.name for p in self._procs if p.exitcode != 0]
        report = merge_reports(
            [json.loads((worker_dir(self.root, i) / "report.json").read_text())
             for i in range(self.count)
             if (worker_dir(self.root, i) / "report.json").exists()]
        )  # fmt: skip
        report["workers"] = self.count
        report["output_dir"] = str(self.root)
        report["warnings"] = [*repairs, *report.get("warnings", [])]
        if failed:
            report["complete"] = False
            report["failed_workers"] = failed
        write_report(self.root / "report.json", report)
        return report

    def _snapshot(self) -> tuple[int, ...]:
        with self._status.get_lock():
            return tuple(self._status[:])

    def _finished(self, snap: tuple[int, ...]) -> bool:
        idle = all(snap[i * _FIELDS] for i in range(self.count))
        sent = sum(snap[i * _FIELDS + 1] for i in range(self.count))
        received = sum(snap[i * _FIELDS + 2] for i in range(self.count))
        return idle and sent == received

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
