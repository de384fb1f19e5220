"""The schedule of a continuous crawl at scale: N scheduled URLs over H hosts, then due pops.

Checks issue 22's "memory flat however many URLs are scheduled" on disk (not tmpfs):

* scheduling: N first visits completed the way ``Frontier.complete`` + ``mark_done`` do it
  (``Recrawl.stage`` then ``Recrawl.apply`` in the frontier's own LMDB environment, one
  transaction per ``--batch``), URLs ``http://h<k>.bench/p/<i>.html`` over H hosts in random
  host order, each with an ETag, a payload digest and a WARC record id, the wall clock moving
  so the due times spread over ``--spread-s``. The host queues are not involved (first visits
  are the frontier's ordinary queue, measured by ``frontier_scale.py``).
* popping: the wall clock jumps past every due time, so all N are due at once (the worst
  case for the pump); then the engine's loop with a zero delay through the real Frontier:
  ``next_ready(now, 1024)`` (the pump loads due keys into per-host revisit queues, a bounded
  number at a time) and ``complete`` with a 304 for each revisit ticket (the next visit
  scheduled: old due key deleted, record and new due key written), one ``batch()`` committed
  every ``--commit-s``. It stops after ``--pops`` revisits or ``--pop-s`` seconds.

Prints RSS (``anon``: RssAnon, the process's own memory; LMDB's mapped pages are RssFile, page
cache) every 10% of the scheduling and every few seconds of popping, pops per second, and the
bytes of ``data.mdb`` per scheduled URL.

Usage::

    .venv/bin/python bench/recrawl_scale.py                           # 10^7 URLs, 10^5 hosts
    .venv/bin/python bench/recrawl_scale.py --urls 1e6 --hosts 1e4    # smaller
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import msgspec

from frontier_crawl.frontier import Completion, Frontier, Ticket
from frontier_crawl.frontier.options import FrontierHooks, FrontierOptions
from frontier_crawl.frontier.politeness import DelayPolicy
from frontier_crawl.frontier.recrawl import Bounds, RecrawlPolicy


def status(field: str) -> int:
    """A /proc/self/status figure in bytes (kB there)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def rss() -> str:
    return f"rss {status('VmRSS') / 1e6:.0f} MB, anon {status('RssAnon') / 1e6:.0f} MB"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--urls", type=float, default=1e7)
    ap.add_argument("--hosts", type=float, default=1e5)
    ap.add_argument("--batch", type=int, default=2_000, help="first visits per transaction")
    ap.add_argument("--spread-s", type=float, default=86_400.0)
    ap.add_argument("--pops", type=float, default=1e6)
    ap.add_argument("--pop-s", type=float, default=120.0)
    ap.add_argument("--commit-s", type=float, default=0.05)
    ap.add_argument("--dir", default="", help="work directory (default: a temp dir, removed)")
    args = ap.parse_args()
    n, hosts = int(args.urls), int(args.hosts)
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="fc-recrawl-"))
    clock = Clock(1_700_000_000.0)
    policy = RecrawlPolicy(default=Bounds(3_600.0, 60.0, 2_592_000.0))
    options = FrontierOptions(
        allow_domains=("bench",),
        policy=DelayPolicy(min_delay_s=0.0, max_delay_s=0.0, delay_factor=0.0),
        obey_robots=False,
        map_size=1 << 40,
        recrawl=policy,
    )
    print(f"{n:,} URLs over {hosts:,} hosts in {work}")
    f = Frontier(work / "state", options, FrontierHooks(wall_clock=clock))
    rc = f._files.recrawl
    assert rc is not None
    data = work / "state" / "frontier.lmdb" / "data.mdb"
    base = data.stat().st_size
    rng = random.Random(22)
    print(f"start: {rss()}")
    t0, c0 = time.perf_counter(), time.process_time()
    step = clock.now
    tick = args.spread_s / max(n, 1)
    done = 0
    report_every = max(n // 10, 1)
    digest = bytes(20)
    while done < n:
        with f._env.begin(write=True) as txn:
            for i in range(done, min(n, done + args.batch)):
                host = rng.randrange(hosts)
                url = f"http://h{host}.bench/p/{i}.html"
                key = i.to_bytes(14, "big")
                t = Ticket(key, f"http://h{host}.bench", url, 1, referrer=f"http://h{host}.bench/")
                c = Completion(0.0, 200, etag=f'"{i:x}"', digest=digest,
                               record_id=f"<urn:uuid:{i:032x}>", fetched_at=clock.now)  # fmt: skip
                rc.stage(t, c)
                rc.apply(txn, key)
                clock.now += tick
            rc.flush(txn)
        rc.committed()
        before, done = done, min(n, done + args.batch)
        if done // report_every != before // report_every or done == n:
            elapsed = time.perf_counter() - t0
            print(f"scheduled {done:>11,}  {done / elapsed:>8,.0f}/s  {rss()}", flush=True)
    sched_s, sched_cpu = time.perf_counter() - t0, time.process_time() - c0
    f._env.sync(True)
    size = data.stat().st_size - base
    with f._env.begin() as txn:
        pages = sum(
            st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"]
            for st in (txn.stat(rc._visits), txn.stat(rc._due))
        )
        psize = txn.stat(rc._due)["psize"]
    print(f"scheduling: {n:,} in {sched_s:.0f} s ({n / sched_s:,.0f}/s; {sched_cpu:.0f} CPU s, "
          f"{n / sched_cpu:,.0f} per CPU second); schedule pages "
          f"{pages * psize / n:.0f} bytes per scheduled URL (data.mdb grew {size / 1e6:.0f} MB, "
          f"{size / n:.0f} bytes per URL, free pages included)")  # fmt: skip
    gc.collect()
    # ------------------------------------------------------------------ pops
    clock.now = step + args.spread_s + policy.default.initial_s + 1.0  # everything due
    fresh = f.view.freshness(clock.now)
    print(f"due now: {fresh['due_now']:,}{' (capped)' if fresh['due_now_capped'] else ''}, "
          f"scheduled {fresh['scheduled']:,}")  # fmt: skip
    pops, now = 0, 0.0
    t0 = last = time.perf_counter()
    c0 = time.process_time()
    limit = int(args.pops)
    batch_cm = f.batch()
    batch_cm.__enter__()
    opened = t0
    peak_present = 0
    while pops < limit:
        tickets = f.next_ready(now, 1024)
        peak_present = max(peak_present, len(rc.present))
        if not tickets:
            if f.next_wake() is None:
                break
            now += 0.001
            continue
        for t in tickets:
            f.complete(t, Completion(now, 304, fetched_at=clock.now))
        pops += len(tickets)
        now += 0.001
        tick_t = time.perf_counter()
        if tick_t - opened >= args.commit_s:
            batch_cm.__exit__(None, None, None)
            batch_cm = f.batch()
            batch_cm.__enter__()
            opened = time.perf_counter()
        if tick_t - last >= 10.0:
            last = tick_t
            print(f"popped {pops:>11,}  {pops / (tick_t - t0):>8,.0f}/s  {rss()}  "
                  f"in memory {len(rc.present):,}", flush=True)  # fmt: skip
        if tick_t - t0 >= args.pop_s:
            break
    batch_cm.__exit__(None, None, None)
    pop_s, pop_cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"popping: {pops:,} revisits in {pop_s:.0f} s ({pops / pop_s:,.0f}/s, next_ready + "
          f"complete + commits; {pop_cpu:.0f} CPU s, {pops / pop_cpu:,.0f} per CPU second); "
          f"most in memory at once {peak_present:,}; {rss()}")  # fmt: skip
    fresh = f.view.freshness(clock.now)
    print("freshness:", msgspec.json.encode(fresh).decode())
    f.close()
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
