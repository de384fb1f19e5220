"""The seen-set's reopen alone: time and memory to load a Bloom snapshot of a large filter.

A restart at 10^8 URLs holds a 419 MB Bloom filter (capacity 10^8, error 1e-7). This builds a
SeenSet of ``--capacity`` over a real LMDB in a temporary directory on disk, stores ``--urls``
digests, saves the snapshot, then, in a fresh child process (a restart), constructs the set
and loads the snapshot, and reports the wall and CPU time of each step and the child's RssAnon
before, after and at its peak (VmHWM minus the file pages is not exact, so a thread samples
RssAnon every 2 ms). The target (issue 20): no memory peak above the filter's own size.

Usage::

    .venv/bin/python bench/seen_reopen.py                      # capacity 1e8, 10^6 digests
    .venv/bin/python bench/seen_reopen.py --capacity 1e7
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from frontier_crawl.frontier.seen import SeenSet
from frontier_crawl.frontier.store import open_env

MB = 1 << 20


def anon() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def build(state: Path, capacity: int, urls: int) -> None:
    env = open_env(state / "lmdb", max(1 << 32, urls * 64))
    seen = SeenSet(env, capacity, 1e-7)
    for start in range(0, urls, 100_000):
        with env.begin(write=True) as txn:
            for i in range(start, min(urls, start + 100_000)):
                seen.add_new(txn, hashlib.blake2b(b"%d" % i, digest_size=16).digest())
            seen.flush(txn)
    t0 = time.perf_counter()
    seen.save_snapshot(state / "seen.bloom")
    print(f"save_snapshot: {time.perf_counter() - t0:.2f} s, "
          f"{(state / 'seen.bloom').stat().st_size / MB:.1f} MB")  # fmt: skip
    env.close()


def reopen(state: Path, capacity: int) -> None:
    peak = [anon()]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.002):
            peak[0] = max(peak[0], anon())

    before = anon()
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    env = open_env(state / "lmdb", 1 << 32)
    w0, c0 = time.perf_counter(), time.process_time()
    seen = SeenSet(env, capacity, 1e-7)
    w1, c1 = time.perf_counter(), time.process_time()
    with env.begin() as txn:
        count = seen.exact_count(txn)
    ok = seen.load_snapshot(state / "seen.bloom", count)
    w2, c2 = time.perf_counter(), time.process_time()
    stop.set()
    thread.join()
    peak[0] = max(peak[0], anon())
    size = int(seen.stats()["bloom_bytes"])
    print(f"construct: {w1 - w0:.2f} s ({c1 - c0:.2f} s CPU); load_snapshot: {w2 - w1:.2f} s "
          f"({c2 - c1:.2f} s CPU), loaded {ok}")  # fmt: skip
    print(f"RssAnon: before {before / MB:.1f} MB, after {anon() / MB:.1f} MB, peak "
          f"{peak[0] / MB:.1f} MB; filter {size / MB:.1f} MB; peak above the start "
          f"{(peak[0] - before) / size:.2f} x the filter")  # fmt: skip
    env.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--capacity", type=float, default=1e8)
    p.add_argument("--urls", type=float, default=1e6)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        reopen(Path(args.child), int(args.capacity))
        return
    state = Path(tempfile.mkdtemp(prefix="seen-reopen-"))
    try:
        build(state, int(args.capacity), int(args.urls))
        cmd = [sys.executable, __file__, "--capacity", str(args.capacity), "--child", str(state)]
        subprocess.run(cmd, check=True)
    finally:
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
