"""The same extraction as a frontier-crawl spider, as frontier-crawl [[extract]] rules and as a
Scrapy spider, on a shop catalogue served by nginx on 127.0.0.1: items per second and CPU ms
per item, medians of the repetitions, the crawlers alternating within each repetition.

    .venv/bin/python bench/spider_vs_scrapy.py                       # 8 hosts x 1,000 products, 3 reps
    .venv/bin/python bench/spider_vs_scrapy.py --products 200 --reps 1   # quick check

Site: the demo web's catalogue (frontier_crawl/demo/catalogue.py) rendered to files, one
catalogue per host ``shop<i>.bench`` (index, listing pages of 12 with pagination, product
pages; a fifth of them 20 to 40 KB), robots.txt allowing everything. Crawlers, each a child
process measured with ``os.wait4`` (CPU = user + system of it and its children):

- ``fc-spider``: ``frontier-crawl --config`` with ``examples/catalogue/catalogue_spider.py``
  (index -> listings, following ``a.next`` -> products; the item's category and listing from
  meta), items to ``items.jsonl``;
- ``fc-rules``: the ``[[extract]]`` rule of ``examples/catalogue/rules.toml`` with the default
  spider (every link followed: also the numbered pagination and related-product links, so it
  fetches a few 404s more; its items have no ``listing``);
- ``scrapy``: ``bench/scrapy_catalogue_spider.py``, the same spider in Scrapy 2.x with a JSON
  Lines feed, in the bench's own virtualenv (see crawl_vs_scrapy.py).

Common settings: concurrency 64, 2 connections per host, no delay, robots.txt obeyed; WARC off
for frontier-crawl (items only, as Scrapy). Each run's items are read back and checked against
the generator (count, URLs, and for fc-spider and scrapy every field). Wall time is from the
start of the process to its exit, so start-up is included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawl_vs_scrapy import DEFAULT_SCRAPY_VENV, child_env, ensure_scrapy, fc_binary, toml_list
from nginx_server import Nginx, ensure_nginx, free_port

from frontier_crawl.demo.catalogue import SHOP, Catalogue

BENCH = Path(__file__).resolve().parent
EXAMPLE = BENCH.parent / "examples" / "catalogue"
ROBOTS = b"User-agent: *\nAllow: /\n"


def host_name(i: int) -> str:
    return f"shop{i}.bench"


@dataclass(slots=True)
class ShopSite:
    port: int
    hosts: int
    truth: dict[str, dict[str, Any]] = field(default_factory=dict)  #: url -> item
    pages: int = 0
    total_bytes: int = 0

    def seeds(self) -> list[str]:
        return [f"http://{host_name(i)}:{self.port}{SHOP}" for i in range(self.hosts)]


def build_shop(root: Path, port: int, hosts: int, products: int) -> ShopSite:
    """Write every catalogue page of every host as files nginx serves (``root/<host>/...``)."""
    site = ShopSite(port, hosts)
    for i in range(hosts):
        host = host_name(i)
        shop = Catalogue(host, products, per_page=12, categories=5, seed=i + 1)
        base = root / host
        base.mkdir(parents=True)
        (base / "robots.txt").write_bytes(ROBOTS)
        paths = [SHOP, *shop.listings(), *(p.path for p in shop.products)]
        for path in paths:
            body = shop.render(path, port)
            assert body is not None
            target = base / path.lstrip("/")
            if path.endswith("/"):
                target = target / "index.html"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body)
            site.pages += 1
            site.total_bytes += len(body)
        for item in shop.truth(port):
            site.truth[str(item["url"])] = item
    return site


@dataclass(slots=True)
class Result:
    key: str
    rep: int
    rc: int
    wall_s: float
    cpu_s: float
    items: int
    requests: int
    problems: list[str]

    @property
    def items_per_s(self) -> float:
        return self.items / self.wall_s if self.wall_s else 0.0

    @property
    def cpu_ms_per_item(self) -> float:
        return 1e3 * self.cpu_s / self.items if self.items else float("nan")


def fc_config(run_dir: Path, site: ShopSite, args: argparse.Namespace, *, rules: bool) -> Path:
    resolve = [f"{host_name(i)}:{site.port}:127.0.0.1" for i in range(site.hosts)]
    text = f"""[crawl]
seeds = {toml_list(site.seeds())}
output_dir = "out"
max_depth = 1000

[scope]
allow_domains = ["bench"]

[politeness]
min_delay_s = 0.0
delay_factor = 0.0
connections_per_host = {args.per_host}

[fetch]
concurrency = {args.concurrency}
resolve = {toml_list(resolve)}

[output]
warc = false
progress_interval_s = 0
"""
    if rules:
        rule = (EXAMPLE / "rules.toml").read_text().split("\n[[extract]]\n", 1)[1]
        text += "\n[[extract]]\n" + rule
    else:
        spider = EXAMPLE / "catalogue_spider.py"
        text += f'\n[spider]\nsource = {json.dumps(str(spider))}\nclass = "CatalogueSpider"\n'
    path = run_dir / "crawl.toml"
    path.write_text(text)
    return path


def command(key: str, run_dir: Path, site: ShopSite, args: argparse.Namespace) -> list[str]:
    if key == "scrapy":
        seeds = run_dir / "seeds.txt"
        seeds.write_text("\n".join(site.seeds()) + "\n")
        return [
            str(args.scrapy_python),
            str(BENCH / "scrapy_catalogue_spider.py"),
            "--seeds-file", str(seeds),
            "--out", str(run_dir / "out" / "items.jsonl"),
            "--concurrency", str(args.concurrency),
            "--per-host", str(args.per_host),
        ]  # fmt: skip
    return [fc_binary(), "--config", str(fc_config(run_dir, site, args, rules=key == "fc-rules"))]


def read_items(out: Path) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for feed in sorted(out.rglob("items.jsonl")):
        with feed.open(encoding="utf-8") as fh:
            items += [json.loads(line) for line in fh if line.strip()]
    return items


def check(key: str, items: list[dict[str, Any]], site: ShopSite) -> list[str]:
    problems = []
    urls = [i.get("url") for i in items]
    if len(urls) != len(set(urls)):
        problems.append(f"{len(urls) - len(set(urls))} duplicate items")
    if set(urls) != set(site.truth):
        problems.append(f"items for {len(set(urls) & set(site.truth))}/{len(site.truth)} products")
    wrong = 0
    for item in items:
        truth = site.truth.get(str(item.get("url")))
        if truth is None:
            continue
        if key == "fc-rules":
            truth = {k: v for k, v in truth.items() if k != "listing"}
        wrong += item != truth
    if wrong:
        problems.append(f"{wrong} items differ from the ground truth")
    return problems


def run_one(key: str, rep: int, work: Path, site: ShopSite, nginx: Nginx, args: Any) -> Result:
    run_dir = work / "runs" / f"{key}-{rep}"
    shutil.rmtree(run_dir, ignore_errors=True)
    (run_dir / "out").mkdir(parents=True)
    cmd = command(key, run_dir, site, args)
    offset = nginx.log_offset()
    with (run_dir / "output.txt").open("wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, cwd=run_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=child_env(),
        )  # fmt: skip
        timer = threading.Timer(args.timeout, proc.send_signal, (signal.SIGKILL,))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # Ctrl-C of the bench: end the crawl we started
            proc.kill()
            proc.wait()
            raise
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    time.sleep(0.2)
    items = read_items(run_dir / "out")
    problems = check(key, items, site)
    if rc != 0:
        tail = (run_dir / "output.txt").read_text(errors="replace")[-1500:]
        problems.append(f"exit status {rc}; output tail:\n{tail}")
    res = Result(
        key, rep, rc, wall, usage.ru_utime + usage.ru_stime, len(items),
        len(nginx.read_log(offset)), problems,
    )  # fmt: skip
    if not args.keep:
        shutil.rmtree(run_dir / "out", ignore_errors=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--products", type=int, default=1000, help="products per host")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--per-host", type=int, default=2)
    ap.add_argument("--crawlers", default="fc-spider,fc-rules,scrapy")
    ap.add_argument("--scrapy-venv", type=Path, default=DEFAULT_SCRAPY_VENV)
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    args = ap.parse_args()
    keys = [k for k in args.crawlers.split(",") if k]
    if "scrapy" in keys:
        args.scrapy_python = ensure_scrapy(args.scrapy_venv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    nginx_bin = ensure_nginx()
    work = Path(tempfile.mkdtemp(prefix="fc-spider-bench-"))
    nginx: Nginx | None = None
    try:
        port = free_port()
        site = build_shop(work / "site", port, args.hosts, args.products)
        print(
            f"site: {args.hosts} hosts x {args.products} products = {len(site.truth):,} items, "
            f"{site.pages:,} pages, {site.total_bytes / site.pages / 1024:.1f} KB/page"
        )
        nginx = Nginx(work, work / "site", port)
        nginx.start(nginx_bin)
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"machine: {os.cpu_count()} cores, load average {load}", flush=True)
        results: list[Result] = []
        for rep in range(args.reps):
            for key in keys:
                res = run_one(key, rep, work, site, nginx, args)
                results.append(res)
                print(
                    f"  rep {rep} {key:10s} {res.wall_s:6.1f} s  {res.items:6d} items "
                    f"{res.items_per_s:7.0f} items/s  {res.cpu_ms_per_item:5.2f} CPU ms/item  "
                    f"{res.requests} requests" + "".join(f"\n    ! {p}" for p in res.problems),
                    flush=True,
                )
        print(f"\nmedians of {args.reps} (load average now "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}):")  # fmt: skip
        print(f"  {'crawler':10s} {'items/s':>9s} {'CPU ms/item':>12s} {'wall s':>8s}")
        medians: dict[str, tuple[float, float]] = {}
        for key in keys:
            mine = [r for r in results if r.key == key]
            ips = statistics.median(r.items_per_s for r in mine)
            cpu = statistics.median(r.cpu_ms_per_item for r in mine)
            wall = statistics.median(r.wall_s for r in mine)
            medians[key] = (ips, cpu)
            print(f"  {key:10s} {ips:9.0f} {cpu:12.3f} {wall:8.1f}")
        if "scrapy" in medians:
            s_ips, s_cpu = medians["scrapy"]
            for key, (ips, cpu) in medians.items():
                if key != "scrapy":
                    print(f"  {key} / scrapy: {ips / s_ips:.2f}x items/s, "
                          f"{cpu / s_cpu:.2f}x CPU per item")  # fmt: skip
    finally:
        if nginx is not None:
            nginx.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
