"""Frontier at scale: queue N URLs over H hosts through the real Frontier, then drain them.

Checks the "flat memory" and per-page cost targets of DESIGN.md on disk (not tmpfs):

* RSS with 10^7 queued URLs under 400 MB (plus, in trees with one, the seen-set's Bloom
  filter's own size);
* at least 100,000 adds/s and 100,000 pops/s on one core;
* LMDB under 100 bytes per queued URL.

The frontier is built as ``tests/unit/test_frontier.py::make`` builds it: no robots.txt, no
delay, one connection per host, ``memory_urls`` 200,000 (and, in trees whose seen-set has a
Bloom filter, the filter sized to the URL count, or ``--capacity``, at error rate 1e-7: the
options a tree does not know are left out, so one script runs against both for an A/B).
URLs are added the way a crawler adds links: ``--links`` per ``add`` call
(one "page", most links to the page's own host, the rest to random hosts, the page URL as the
referrer), in rounds of ``--pages`` calls. The drain is the engine's loop with a zero delay:
rounds of ``next_ready(now, 256)`` then ``complete`` for each ticket.

Group commit. Both phases commit as the engine does (``engine/commit.py``: ``CommitGroup.open``/``commit``): one
``batch()`` is held open across rounds and committed once ``--commit-s`` (the engine's
``frontier.commit_interval_s``, default 0.05 s) has passed since it opened, so a commit's
fdatasync is shared by every change of the interval. Every cost the engine pays is still paid
and timed: the add() and next_ready()/complete() calls and the commits (the time inside
``batch()``'s exit, reported as "in commits"). ``--commit-s 0`` commits after every round
(before 2026-11: the only mode; 64 pages or 256 pops per commit).

Usage::

    .venv/bin/python bench/frontier_scale.py                  # 10^7 URLs over 10^5 hosts
    .venv/bin/python bench/frontier_scale.py --big            # 10^8 URLs over 10^6 hosts
    .venv/bin/python bench/frontier_scale.py --urls 1e6 --hosts 1e4

RSS figures come from /proc/self/status: ``rss`` is VmRSS, ``anon`` the process's own memory
(RssAnon), ``file`` the LMDB pages mapped and touched (RssFile: page cache, reclaimable).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import lmdb

from frontier_crawl.frontier import Completion, Frontier

try:
    from frontier_crawl.frontier.store import release_mapped_pages
except ImportError:  # an older store.py (A/B runs)

    def release_mapped_pages(env: lmdb.Environment) -> int:
        return 0


MB = 1 << 20


def rss() -> dict[str, int]:
    """VmRSS, RssAnon, RssFile and VmHWM of this process, in bytes."""
    out: dict[str, int] = {}
    with open("/proc/self/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[name] = int(value.split()[0]) * 1024
    return out


def rss_line() -> str:
    r = rss()
    return (
        f"rss {r['VmRSS'] / MB:7.1f} MB (anon {r['RssAnon'] / MB:7.1f}, "
        f"file {r['RssFile'] / MB:7.1f})"
    )


class AnonPeak:
    """The largest RssAnon seen by a thread sampling /proc/self/status every 5 ms."""

    def __init__(self) -> None:
        self.peak = rss()["RssAnon"]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss()["RssAnon"])

    def __enter__(self) -> AnonPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss()["RssAnon"])


def make_frontier(
    state: Path, urls: int, memory_urls: int, error_rate: float, no_sync: bool = False
) -> Frontier:
    """The frontier as the unit tests build it (``FrontierOptions``)."""
    options: dict[str, Any] = {
        "allow_domains": [],
        "exclude": [],
        "max_pages": 0,
        "connections_per_host": 1,
        "obey_robots": False,
        "user_agent": "bench",
        "robots_ttl_s": 3600.0,
        "robots_retry_s": 10.0,
        "robots_attempts": 2,
        "max_host_errors": 3,
        "memory_urls": memory_urls,
        "seen_capacity": urls,
        "seen_error_rate": error_rate,
        "map_size": max(1 << 34, urls * 1024),
    }
    if no_sync:  # measurement only: what the per-commit fdatasync costs
        import frontier_crawl.frontier.state as module
        from frontier_crawl.frontier.store import open_checked_env

        # the frontier opens its environment with open_checked_env (patching open_env, as
        # this did before, changed nothing: --no-sync measured the synced store)
        module.open_checked_env = functools.partial(  # type: ignore[attr-defined]
            open_checked_env, sync=False
        )
    from frontier_crawl.frontier.options import FrontierOptions
    from frontier_crawl.frontier.politeness import DelayPolicy
    from frontier_crawl.frontier.traps import Limits

    options["policy"] = DelayPolicy(min_delay_s=0.0, max_delay_s=0.0, backoff_s=0.0)
    options["limits"] = Limits(max_depth=1_000)
    known = {f.name for f in dataclasses.fields(FrontierOptions)}  # seen_*: older trees only
    return Frontier(state, FrontierOptions(**{k: v for k, v in options.items() if k in known}))


class Pages:
    """Deterministic pages of links: ``links`` URLs each, ``same_host`` of them on the page's
    own host. Every generated URL is distinct (a global counter is part of it)."""

    def __init__(self, hosts: int, links: int, same_host: int, seed: int = 1) -> None:
        self._hosts = hosts
        self._links = links
        self._same = min(same_host, links)
        self._rng = random.Random(seed)
        self._n = 0

    @staticmethod
    def url(host: int, n: int) -> str:
        return (
            f"http://h{host}.example{host % 1000}.com/section/{n % 997}/"
            f"page-{n}.html?id={(n * 2654435761) % 1_000_000_007}"
        )

    def next_page(self) -> tuple[str, list[str]]:
        rng = self._rng
        host = rng.randrange(self._hosts)
        referrer = self.url(host, rng.randrange(1 << 40))
        n = self._n
        out = [self.url(host, n + i) for i in range(self._same)]
        out += [self.url(rng.randrange(self._hosts), n + i) for i in range(self._same, self._links)]
        self._n = n + self._links
        return referrer, out


def lmdb_figures(frontier: Frontier, queued: int) -> list[str]:
    """Data file size and per-database page counts, per queued URL."""
    env = frontier._env
    info = env.info()
    psize = env.stat()["psize"]
    data = Path(env.path()) / "data.mdb"
    size = data.stat().st_size
    lines = [
        f"LMDB data.mdb: {size / MB:,.1f} MB = {size / max(queued, 1):.1f} bytes per queued URL "
        f"(last_pgno {info['last_pgno']:,}, page {psize} B, "
        f"{(info['last_pgno'] + 1) * psize / max(queued, 1):.1f} B/URL by last_pgno)"
    ]
    used = 0
    with env.begin() as txn:
        main = txn.stat()
        used += main["branch_pages"] + main["leaf_pages"] + main["overflow_pages"]
        for name in (b"queue", b"done", b"hosts", b"seen", b"seen_recent", b"meta"):
            try:
                db = env.open_db(name, txn=txn, create=False)
            except lmdb.NotFoundError:
                continue
            st = txn.stat(db)
            pages = st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"]
            used += pages
            lines.append(
                f"  db {name.decode():<12} entries {st['entries']:>12,}  pages {pages:>10,} "
                f"(leaf {st['leaf_pages']:,}, branch {st['branch_pages']:,}, overflow "
                f"{st['overflow_pages']:,}, depth {st['depth']}) = "
                f"{pages * psize / max(queued, 1):6.1f} B/URL"
            )
    free = info["last_pgno"] + 1 - 2 - used  # 2 meta pages
    lines.append(
        f"  free or freelist pages {free:,} = {free * psize / max(queued, 1):6.1f} B/URL "
        "(pages freed by copy-on-write (and by seen_recent's clearing, in trees with a Bloom "
        "filter), reused by later commits)"
    )
    return lines


def timed(label: str, fn: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    result = fn()
    print(f"{label}: {time.perf_counter() - t0:.2f} s", flush=True)
    return result


def run(args: argparse.Namespace) -> None:
    n_urls, n_hosts = int(args.urls), int(args.hosts)
    base = Path(args.dir) if args.dir else None
    tmp = Path(tempfile.mkdtemp(prefix="frontier-scale-", dir=base))
    print(
        f"frontier_scale: {n_urls:,} URLs over {n_hosts:,} hosts, {args.links} links per add, "
        f"{args.pages} adds per batch, memory_urls {args.memory_urls:,}, in {tmp}"
    )
    print(
        f"python {sys.version.split()[0]}, pid {os.getpid()}, checkpoint every "
        f"{args.checkpoint_s:g} s, group commit every {args.commit_s:g} s"
        f"{', unmapping LMDB pages' if args.release else ''}"
        f"{', LMDB sync=False' if args.no_sync else ''}"
    )
    total, _, free = shutil.disk_usage(tmp)
    print(f"disk: {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB")
    import frontier_crawl

    print(f"package {Path(frontier_crawl.__file__).parent}, load {os.getloadavg()[0]:.2f}")
    print(f"start: {rss_line()}", flush=True)
    try:

        def build() -> Frontier:
            return make_frontier(
                tmp / "state",
                int(args.capacity) or n_urls,
                args.memory_urls,
                args.error_rate,
                args.no_sync,
            )

        frontier = timed("construct", build)
        seen = frontier.view.seen_stats()
        bloom_bytes = int(seen.get("bloom_bytes", 0))  # trees with a Bloom filter only
        print(f"Bloom filter: {bloom_bytes / MB:.1f} MB; after construct: {rss_line()}")
        add_phase(frontier, n_urls, n_hosts, args)
        queued = frontier.view.queued
        peak = rss()
        for line in lmdb_figures(frontier, queued):
            print(line)
        print("frontier:", frontier.view.stats())
        print("seen:", {k: v for k, v in frontier.view.seen_stats().items()})
        timed("checkpoint at peak (sync, + Bloom snapshot if any)", frontier.checkpoint)
        if args.restart:
            timed("close", frontier.close)
            del frontier  # a restart is a new process: the closed frontier's memory goes
            gc.collect()
            print(f"after close: {rss_line()}")
            cpu0 = time.process_time()
            with AnonPeak() as reopen_peak:
                frontier = timed("reopen (resume: host counts, + Bloom snapshot if any)", build)
            print(f"reopen CPU: {time.process_time() - cpu0:.2f} s")
            print(
                f"after reopen: queued {frontier.view.queued:,}; {rss_line()}; RssAnon peak during "
                f"reopen {reopen_peak.peak / MB:.1f} MB (sampled every 5 ms)"
            )
        if not args.no_drain:
            drain_phase(frontier, args)
        timed("close", frontier.close)
        hwm = rss()["VmHWM"]
        budget = 400 * MB + bloom_bytes
        print()
        print(
            f"SUMMARY urls {n_urls:,} hosts {n_hosts:,}: peak RSS (VmHWM) {hwm / MB:.1f} MB; "
            f"at peak queue rss {peak['VmRSS'] / MB:.1f} MB, anon {peak['RssAnon'] / MB:.1f} MB "
            f"(target {budget / MB:.1f} MB = 400 + Bloom {bloom_bytes / MB:.1f})"
        )
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


class Checkpoints:
    """Checkpoint every ``interval_s`` of wall time as the engine does (0: never), and time it;
    with ``release`` also unmap LMDB's touched pages (``store.release_mapped_pages``)."""

    def __init__(self, frontier: Frontier, interval_s: float, release: bool) -> None:
        self._frontier = frontier
        self._interval_s = interval_s
        self._release = release
        self._next = time.perf_counter() + interval_s
        self.count = 0
        self.seconds = 0.0

    def maybe(self) -> None:
        if self._interval_s <= 0 or time.perf_counter() < self._next:
            return
        self.now()

    def now(self) -> None:
        t0 = time.perf_counter()
        self._frontier.checkpoint()
        if self._release:
            release_mapped_pages(self._frontier._env)
        t1 = time.perf_counter()
        self.count += 1
        self.seconds += t1 - t0
        self._next = t1 + self._interval_s

    def summary(self) -> str:
        avg = self.seconds / self.count if self.count else 0.0
        return f"{self.count} checkpoints, {self.seconds:.1f} s ({avg:.2f} s each)"


class Group:
    """One ``batch()`` held open across rounds, committed once ``interval_s`` has passed since
    it opened (the engine's group commit; 0: after every round)."""

    def __init__(self, frontier: Frontier, interval_s: float) -> None:
        self._frontier = frontier
        self._interval_s = interval_s
        self._stack: ExitStack | None = None
        self._commit_at = 0.0
        self.commits = 0

    def open(self) -> None:
        if self._stack is None:
            self._stack = ExitStack()
            self._stack.enter_context(self._frontier.batch())
            self._commit_at = time.perf_counter() + self._interval_s

    def maybe_commit(self, force: bool = False) -> bool:
        """Commit if the interval has passed (or ``force``); True if it did."""
        if self._stack is None or not (force or time.perf_counter() >= self._commit_at):
            return False
        stack, self._stack = self._stack, None
        stack.close()
        self.commits += 1
        return True


def add_phase(frontier: Frontier, n_urls: int, n_hosts: int, args: argparse.Namespace) -> None:
    pages = Pages(n_hosts, args.links, args.same_host)
    checkpoints = Checkpoints(frontier, args.checkpoint_s, args.release)
    every = int(args.every)
    next_report = every
    added = 0
    add_s = commit_s = 0.0
    t_start = time.perf_counter()
    cpu_start = time.process_time()
    clock = time.perf_counter
    group = Group(frontier, args.commit_s)
    while added < n_urls:
        todo = []
        for _ in range(args.pages):
            if added + len(todo) * args.links >= n_urls:
                break
            todo.append(pages.next_page())
        t0 = clock()
        group.open()
        for referrer, links in todo:
            added += frontier.add(links, depth=1, referrer=referrer)
        t1 = clock()
        last = added >= n_urls
        committed = group.maybe_commit(force=last)
        t2 = clock()
        add_s += t2 - t0
        commit_s += t2 - t1 if committed else 0.0
        if committed:
            checkpoints.maybe()
        if added >= next_report or added >= n_urls:
            wall = clock() - t_start
            print(
                f"added {added:>12,}  {added / add_s:>9,.0f} adds/s ({commit_s / add_s:4.0%} in "
                f"commits; {added / wall:,.0f}/s with URL generation)  {rss_line()}",
                flush=True,
            )
            next_report += every
    wall = clock() - t_start
    cpu = time.process_time() - cpu_start
    print(
        f"ADD: {added:,} URLs in {add_s:.1f} s of frontier time ({wall:.1f} s wall, {cpu:.1f} s "
        f"CPU with URL generation: {added / cpu:,.0f} adds per CPU second): "
        f"{added / add_s:,.0f} adds/s, {add_s / added * 1e6:.2f} us per URL, of which "
        f"{commit_s / added * 1e6:.2f} us in commits ({group.commits:,} commits); "
        f"{checkpoints.summary()} (not included)",
        flush=True,
    )


def drain_phase(frontier: Frontier, args: argparse.Namespace) -> None:
    every = int(args.every)
    next_report = every
    checkpoints = Checkpoints(frontier, args.checkpoint_s, args.release)
    popped = 0
    rounds = 0
    commit_s = 0.0
    clock = time.perf_counter
    mono = time.monotonic
    t_start = clock()
    cpu_start = time.process_time()
    group = Group(frontier, args.commit_s)
    limit = int(args.drain_max) if args.drain_max else None
    while frontier.pending and (limit is None or popped < limit):
        group.open()
        now = mono()
        tickets = frontier.next_ready(now, args.drain_batch)
        force_last = limit is not None and popped + len(tickets) >= limit
        for ticket in tickets:
            frontier.complete(ticket, Completion(now, 200))  # as the engine completes a page
        t1 = clock()
        if group.maybe_commit(force=not frontier.pending or not tickets or force_last):
            commit_s += clock() - t1
            checkpoints.maybe()
        popped += len(tickets)
        rounds += 1
        if not tickets and not frontier.has_ready and frontier.next_wake() is None:
            print(f"drain stuck with {frontier.pending:,} pending: {frontier.view.stats()}")
            break
        if popped >= next_report:
            elapsed = clock() - t_start
            print(
                f"drained {popped:>12,}  {popped / elapsed:>9,.0f} pops/s  "
                f"queued {frontier.view.queued:>12,}  {rss_line()}",
                flush=True,
            )
            next_report += every
    elapsed = clock() - t_start
    cpu = time.process_time() - cpu_start
    print(
        f"DRAIN: {popped:,} URLs in {elapsed:.1f} s ({cpu:.1f} s CPU: "
        f"{popped / max(cpu, 1e-9):,.0f} pops per CPU second): "
        f"{popped / max(elapsed, 1e-9):,.0f} pops/s, "
        f"{elapsed / max(popped, 1) * 1e6:.2f} us per URL, of which "
        f"{commit_s / max(popped, 1) * 1e6:.2f} us in commits ({rounds:,} rounds, "
        f"{group.commits:,} commits); "
        f"{checkpoints.summary()} (not included)",
        flush=True,
    )
    print("frontier:", frontier.view.stats())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--urls", type=float, default=1e7, help="URLs to queue (default 1e7)")
    p.add_argument("--hosts", type=float, default=1e5, help="hosts (default 1e5)")
    p.add_argument("--big", action="store_true", help="1e8 URLs over 1e6 hosts")
    p.add_argument("--links", type=int, default=20, help="links per add call (default 20)")
    p.add_argument("--same-host", type=int, default=15, help="of which on the page's host")
    p.add_argument("--pages", type=int, default=64, help="add calls per batch (default 64)")
    p.add_argument("--drain-batch", type=int, default=256, help="next_ready limit (256)")
    p.add_argument(
        "--commit-s",
        type=float,
        default=0.05,
        help="group commit interval as the engine's (0.05 s; 0: commit every round)",
    )
    p.add_argument("--memory-urls", type=int, default=200_000)
    p.add_argument("--error-rate", type=float, default=1e-7)
    p.add_argument(
        "--capacity",
        type=float,
        default=0,
        help="frontier.seen_capacity, in trees with a Bloom filter (default: --urls)",
    )
    p.add_argument("--every", type=float, default=1e6, help="progress line every N URLs")
    p.add_argument("--dir", help="parent of the temporary state dir (default: $TMPDIR or /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the state dir")
    p.add_argument("--restart", action="store_true", help="close and reopen at the peak")
    p.add_argument(
        "--drain-max",
        type=float,
        default=0,
        help="stop the drain after this many pops (0: drain all): pops at the peak's size",
    )
    p.add_argument("--no-drain", action="store_true")
    p.add_argument(
        "--checkpoint-s", type=float, default=30.0, help="checkpoint interval (30 s; 0: never)"
    )
    p.add_argument(
        "--no-sync", action="store_true", help="LMDB without per-commit fdatasync (measurement)"
    )
    p.add_argument(
        "--release", action="store_true", help="unmap LMDB pages at each checkpoint (RssFile)"
    )
    args = p.parse_args(argv)
    if args.big:
        args.urls, args.hosts = 1e8, 1e6
    run(args)


if __name__ == "__main__":
    main()
