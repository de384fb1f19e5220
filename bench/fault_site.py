"""The fault site at the default settings, by hand (not in CI): healthy pages and every kind of
bad URL on the same hosts (the site of tests/e2e/test_bad_urls_same_host.py), crawled with
every key at its default. Prints the wall time, the requests per URL kind from the server's
log, and the report's holds. The issue's goal: it ends by itself in under 15 minutes with
every healthy page fetched.

    .venv/bin/python bench/fault_site.py [--hosts 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from frontier_crawl.config import parse
from frontier_crawl.engine import Engine
from tests.e2e.test_bad_urls_same_host import BAD, HEALTHY, HOSTS, handler
from tests.hostile.server import RawHttpServer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", type=int, default=1, help="how many of the site's hosts (1-3)")
    args = ap.parse_args()
    hosts = HOSTS[: args.hosts]
    with tempfile.TemporaryDirectory() as tmp, RawHttpServer(handler, idle_timeout_s=60) as srv:
        s = parse({
            "crawl": {"seeds": [srv.url(h, "/") for h in hosts], "output_dir": tmp},
            "fetch": {"resolve": srv.resolve(*hosts)},
        })
        t0 = time.monotonic()
        report = Engine(s).run()
        wall = time.monotonic() - t0
        hits = srv.hits()
    per_path = Counter(h.path for h in hits)
    healthy = sum(per_path[p] for p in HEALTHY)
    print(f"wall {wall:.0f} s, complete {report['complete']}, fetched {report['fetched']}")
    print(f"healthy pages requested {healthy} of {len(HEALTHY) * len(hosts)}")
    for path in BAD:
        print(f"  {path:10} requested {per_path[path]:2}  ({BAD[path]})")
    print(f"host held {report['host_held_s']} s in all; by: {report['held_by'][:5]}")
    ok = report["complete"] and healthy == len(HEALTHY) * len(hosts) and wall < 900
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
