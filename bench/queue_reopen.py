"""The restart's queue work at 10^6 hosts: per-host counts read vs every block scanned.

``frontier_scale.py --big --restart`` (10^8 URLs over 10^6 hosts) takes hours to build on this
machine; what its reopen reads from the queue depends on the hosts and the blocks, not on the
URLs. This builds a queue state of ``--hosts`` hosts with ``--blocks`` blocks of ``--per-block``
URLs each (one transaction per block round, as a crawl writes one block per host per
transaction) through the real ``QueueStore`` into a frontier state directory, then, each in a
fresh process:

* ``counts``: ``QueueStore`` construction plus ``host_counts`` (layout 6: one ``b"counts"``
  entry per host);
* ``scan``: ``scan_host_counts``, the scan of every block (what layout 5's reopen did, and what
  a layout-5 state's first start still does once);
* ``frontier``: a real ``Frontier`` constructed on the state (its ``_resume``: the counts and
  origins, ``QueueStore.iter_queued_hosts``, and the per-host set-up, ``HostQueues.restore``),
  with RssAnon sampled; then one full ``gc.collect()`` timed (every later full collection of
  the crawl visits each host object).

Usage::

    .venv/bin/python bench/queue_reopen.py                          # 10^6 hosts x 3 blocks x 2
    .venv/bin/python bench/queue_reopen.py --hosts 1e5 --blocks 30  # more blocks per host
    .venv/bin/python bench/queue_reopen.py --state /tmp/qr          # keep the state (built once)

At 10^8 URLs over 10^6 hosts ``frontier_scale.py`` writes about 30 blocks per host: the scan's
time there is this one's per block times 3e7 (a linear extrapolation: the scan is one cursor
pass, its cost per block does not depend on the number of blocks but on the page cache).
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from frontier_crawl.frontier.store import DEFAULT_RANK, QueueEntry, QueueStore, open_env

MB = 1 << 20


def build(state: Path, hosts: int, blocks: int, per_block: int) -> None:
    env = open_env(state / "frontier.lmdb", 1 << 36)
    store = QueueStore(env)
    ids: list[int] = []
    t0 = time.perf_counter()
    for round_ in range(blocks):
        for start in range(0, hosts, 20_000):  # 20,000 host blocks per transaction
            with env.begin(write=True) as txn:
                for h in range(start, min(hosts, start + 20_000)):
                    origin = f"http://h{h}.example{h % 1000}.com"
                    if round_ == 0:
                        ids.append(store.host_id(txn, origin))
                    for i in range(per_block):
                        url = f"{origin}/section/{round_}/page-{i}.html?id={h * 7919 + i}"
                        store.add(txn, ids[h], origin, DEFAULT_RANK, QueueEntry(url, 1), False)
                store.flush(txn)
            store.committed()
    with env.begin() as txn:
        n_blocks = store.blocks(txn)
    env.close()
    size = (state / "frontier.lmdb" / "data.mdb").stat().st_size
    print(f"built {hosts:,} hosts x {blocks} blocks x {per_block} URLs = {n_blocks:,} blocks in "
          f"{time.perf_counter() - t0:.1f} s; data.mdb {size / MB:,.0f} MB", flush=True)  # fmt: skip


def rss_anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def child(state: Path, what: str) -> None:
    """One measurement in this (fresh) process."""
    if what == "frontier":  # imported before the clock starts
        sys.path.insert(0, str(Path(__file__).parent))
        from frontier_scale import AnonPeak, make_frontier
    anon0 = rss_anon()
    t0, c0 = time.perf_counter(), time.process_time()
    if what == "frontier":
        with AnonPeak() as peak:
            frontier = make_frontier(state, 1_000_000, 200_000, 1e-7)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        c1 = time.process_time()
        gc.collect()  # what each full collection of the crawl then costs (it visits every host)
        full = time.process_time() - c1
        print(f"frontier: reopen {wall:.2f} s wall, {cpu:.2f} s CPU; queued {frontier.view.queued:,} "
              f"over {frontier.view.stats()['hosts']:,} hosts; RssAnon {anon0 / MB:.0f} -> peak "
              f"{peak.peak / MB:.0f} MB, {rss_anon() / MB:.0f} MB after; a full GC pass after: "
              f"{full:.2f} s CPU")  # fmt: skip
        frontier.close()
        return
    env = open_env(state / "frontier.lmdb", 1 << 36)
    store = QueueStore(env)
    with env.begin() as txn:
        counts = store.host_counts(txn) if what == "counts" else store.scan_host_counts(txn)
        n_blocks = store.blocks(txn)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{what}: {wall:.2f} s wall, {cpu:.2f} s CPU for {len(counts):,} hosts, "
          f"{sum(counts.values()):,} URLs ({cpu / n_blocks * 1e6:.2f} us CPU per block of "
          f"{n_blocks:,})")  # fmt: skip
    env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=float, default=1e6)
    parser.add_argument("--blocks", type=int, default=3)
    parser.add_argument("--per-block", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dir", default=None, help="where the temporary state goes")
    parser.add_argument("--state", default=None, help="a state directory kept (built if absent)")
    parser.add_argument("--child", nargs=2, metavar=("STATE", "WHAT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1])
        return
    with tempfile.TemporaryDirectory(prefix="queue-reopen-", dir=args.dir) as tmp:
        state = Path(args.state) if args.state else Path(tmp) / "state"
        if not (state / "frontier.lmdb").exists():
            state.mkdir(parents=True, exist_ok=True)
            build(state, int(args.hosts), args.blocks, args.per_block)
        for _ in range(args.repeat):
            for what in ("counts", "scan", "frontier"):
                subprocess.run([sys.executable, __file__, "--child", str(state), what],
                               check=True, env=os.environ)  # fmt: skip


if __name__ == "__main__":
    main()
