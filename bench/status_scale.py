"""The status's host tables at 10^6 hosts: ``host_signals`` and the busiest hosts, read from
host queues built directly (no LMDB, no crawl).

    .venv/bin/python bench/status_scale.py [--hosts 1000000] [--held 0.1]

Every host has one URL queued and a random politeness time in the next 1,000 s, up to three
requests started, and a share ``--held`` of them is held by a backoff (pruned as they come
due). Prints the time of one status's reads at a few moments, and the build time.
"""

from __future__ import annotations

import argparse
import random
import time

from frontier_crawl.frontier.hosts import HostQueue, HostQueues
from frontier_crawl.frontier.status import Busiest, HeldHosts, host_signals
from frontier_crawl.frontier.store import QueueEntry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=1_000_000)
    ap.add_argument("--held", type=float, default=0.1, help="share of hosts held by a backoff")
    args = ap.parse_args()
    rnd = random.Random(1)
    t0 = time.perf_counter()
    queues, holds, busiest = HostQueues(1), HeldHosts(), Busiest()
    every = max(1, round(1 / args.held)) if args.held > 0 else 0
    for i in range(args.hosts):
        host = queues.add(HostQueue(f"http://h{i}.test"))
        host.hot = [(b"k", QueueEntry(f"http://h{i}.test/", 0))]
        host.next_at = rnd.uniform(0, 1000)
        queues.settle(host, 1.0)
        for _ in range(rnd.randint(0, 3)):
            host.starts += 1
            busiest.started(host)
        if every and i % every == 0:
            holds.hold(host, "backoff", 1.0)
    print(f"{args.hosts:,} hosts built in {time.perf_counter() - t0:.1f} s")
    for now in (1.5, 2.5, 100.0, 101.0):
        t = time.perf_counter()
        signals = host_signals(queues, holds, 0, 1.0, now)
        top = busiest.top(10)
        ms = (time.perf_counter() - t) * 1000
        print(f"at {now:>6} s: host_signals + busiest {ms:.3f} ms (backoff {signals.backoff:,}, "
              f"busiest {top[0][1]} starts)")  # fmt: skip


if __name__ == "__main__":
    main()
