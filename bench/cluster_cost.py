"""What going through Redis costs: 2 nodes x 1 process (a cluster crawl, link batches for the
other node's hosts over a real redis-server) against 1 node x 2 processes (the same two
partitions, batches through LMDB inboxes), on the bench site served by nginx, same machine,
same run, alternating. Pages are counted from nginx's access log.

    .venv/bin/python bench/cluster_cost.py                      # 10,000 pages, 50 hosts, 3 reps
    .venv/bin/python bench/cluster_cost.py --pages 3000 --reps 1

Prints each run's wall time (process start to the last node's exit), the log span (first
request to last response), pages/s, the crawler's CPU per page (every node process and its
workers, from ``RUSAGE_CHILDREN``; redis-server not included), and for the
cluster runs Redis's memory at the crawl's peak (``INFO memory`` used_memory sampled every
20 ms, minus its value before the run) and the most stream entries pending at once; then the
median ratio cluster / one node (target >= 0.9). Redis: Debian's redis-server on a free port,
own directory, AOF with appendfsync always (the settings the README recommends).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crawl_vs_scrapy import child_env, fc_binary, write_fc_config
from nginx_server import Nginx, ensure_nginx, free_port
from static_site import SiteInfo, build_site

from tests.redis_server import RedisServer


class Sampler(threading.Thread):
    """Redis used_memory and pending entries, every 20 ms, until stopped."""

    def __init__(self, server: RedisServer, prefix: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.client = server.client()
        self.prefix, self.partitions = prefix, partitions
        self.base = int(self.client.info("memory")["used_memory"])
        self.peak = self.base
        self.peak_pending = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.02):
            pipe = self.client.pipeline(transaction=False)
            pipe.info("memory")
            for p in range(self.partitions):
                pipe.xlen(f"{self.prefix}:p:{p}")
            info, *lens = pipe.execute()
            self.peak = max(self.peak, int(info["used_memory"]))
            self.peak_pending = max(self.peak_pending, sum(lens))


def run(label: str, cfg: Path, nodes: int, nginx: Nginx, site: SiteInfo,
        sampler: Sampler | None, timeout: float) -> float:  # fmt: skip
    offset = nginx.log_offset()
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    args = [[fc_binary(), "--config", str(cfg), "--node", str(n)] for n in range(nodes)]
    if nodes == 1:
        args = [[fc_binary(), "--config", str(cfg)]]
    if sampler is not None:
        sampler.start()
    procs = [
        subprocess.Popen(a, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for a in args
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=timeout)
        if proc.returncode != 0:
            raise SystemExit(f"{label}: exit {proc.returncode}: {err.decode()[-2000:]}")
    wall = time.monotonic() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    if sampler is not None:
        sampler.halt.set()
        sampler.join()
    entries = nginx.read_log(offset)
    span = max(e.end for e in entries) - min(e.start for e in entries) if entries else 0.0
    log = [e for e in entries if e.status == 200 and e.uri != "/robots.txt"]
    got = {(e.host, e.uri) for e in log}
    note = ""
    if got != site.expected or len(log) != len(got):
        note = f"  CHECK: {len(site.expected - got)} missing, {len(log) - len(got)} refetched"
    extra = ""
    if sampler is not None:
        extra = (
            f", Redis peak +{(sampler.peak - sampler.base) / 1024:.0f} KiB over "
            f"{sampler.base / 1024:.0f} KiB, at most {sampler.peak_pending} entries pending"
        )
    print(f"{label}: {len(log)} pages in {wall:.2f} s (log span {span:.2f} s) = "
          f"{len(log) / wall:.0f} pages/s, crawler CPU {1000 * cpu / max(len(log), 1):.2f} "
          f"ms/page{extra}{note}", flush=True)  # fmt: skip
    return len(log) / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    args.fanout, args.page_kb = 20, (10, 30)
    work = Path(tempfile.mkdtemp(prefix="fc-cluster-bench-"))
    try:
        port = free_port()
        site = build_site(work / "site", port, hosts=args.hosts, pages=args.pages)
        nginx = Nginx(work, work / "site", port)
        nginx.start(ensure_nginx())
        redis_server = RedisServer(work / "redis")
        redis_server.start()
        try:
            ratios: list[float] = []
            for rep in range(args.reps):
                one_dir, two_dir = work / f"one-{rep}", work / f"two-{rep}"
                one = write_fc_config(one_dir, site, args, warc=True, delay_s=0.0, per_host=2,
                                      processes=2)  # fmt: skip
                two = write_fc_config(two_dir, site, args, warc=True, delay_s=0.0, per_host=2,
                                      processes=1)  # fmt: skip
                prefix = f"bench-{rep}"
                two.write_text(
                    two.read_text().replace('output_dir = "out"', 'output_dir = "out-{node}"')
                    + f'\n[cluster]\nredis_url = "{redis_server.url}"\nnodes = 2\n'
                    f'key_prefix = "{prefix}"\n'
                )
                a = run(f"rep {rep} 1 node x 2 processes", one, 1, nginx, site, None, args.timeout)
                sampler = Sampler(redis_server, prefix, 2)
                b = run(
                    f"rep {rep} 2 nodes x 1 process", two, 2, nginx, site, sampler, args.timeout
                )
                ratios.append(b / a)
                shutil.rmtree(one_dir / "out", ignore_errors=True)
            print(f"cluster / one node, pages/s: median {statistics.median(ratios):.2f}x "
                  f"({', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip
        finally:
            redis_server.stop()
            nginx.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
