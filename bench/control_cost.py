"""What watching a crawl costs: CPU per page with the control API on and scraped every second
(``GET /api/status`` and ``GET /metrics``) against the API off. Target: at most 3% more.

    .venv/bin/python bench/control_cost.py                    # 5,000 pages, 50 hosts, 3 reps each
    .venv/bin/python bench/control_cost.py --pages 2000 --reps 1

One crawler process (``workers.processes = 1``), WARC off, the bench site (``static_site.py``)
served by nginx on 127.0.0.1 (``nginx_server.py``; installed with apt-get if missing), the same
crawl settings as ``crawl_vs_scrapy.py``'s "frontier-crawl, WARC off" run. The two variants run
in turn within each repetition (off, on; then again), each from a fresh output directory. CPU
is user + system time of the crawler process from ``os.wait4``; pages are the report's
``fetched``, checked against nginx's access log (status 200, robots.txt excluded). The scraper
runs in this process (its own CPU is not counted: a Prometheus server would do that work).
Prints each run, then the medians and their ratio.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from nginx_server import Nginx, ensure_nginx, free_port
from static_site import SiteInfo, build_site, host_name

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy")


def config(run_dir: Path, site: SiteInfo, concurrency: int, listen: str | None) -> Path:
    resolve = [f"{host_name(i)}:{site.port}:127.0.0.1" for i in range(site.hosts)]
    text = f"""[crawl]
seeds = {json.dumps(site.seeds())}
output_dir = "out"
max_depth = 1000

[scope]
allow_domains = ["bench"]

[politeness]
min_delay_s = 0.0
connections_per_host = 2
obey_robots = true

[fetch]
concurrency = {concurrency}
resolve = {json.dumps(resolve)}

[output]
warc = false
progress_interval_s = 0

[workers]
processes = 1
"""
    if listen:
        text += f'\n[control]\nlisten = "{listen}"\n'
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "crawl.toml"
    path.write_text(text)
    return path


def scrape(out: Path, stop: threading.Event, counts: dict[str, int]) -> None:
    """GET /api/status and /metrics once a second, as a dashboard and Prometheus would."""
    addr_file, token_file = out / "control.addr", out / "control.token"
    while not stop.is_set() and not (addr_file.exists() and token_file.exists()):
        time.sleep(0.02)
    if stop.is_set():
        return
    time.sleep(0.05)
    host, _, port = addr_file.read_text().strip().rpartition(":")
    token = token_file.read_text().strip()
    headers = {"Authorization": f"Bearer {token}", "Host": f"{host}:{port}"}
    while not stop.is_set():
        for path in ("/api/status", "/metrics"):
            try:
                conn = http.client.HTTPConnection(host, int(port), timeout=5)
                conn.request("GET", path, headers=headers)
                reply = conn.getresponse()
                reply.read()
                conn.close()
                counts[f"{path} {reply.status}"] = counts.get(f"{path} {reply.status}", 0) + 1
            except OSError:
                counts["error"] = counts.get("error", 0) + 1
        stop.wait(1.0)


def run_once(work: Path, site: SiteInfo, nginx: Nginx, args: argparse.Namespace, on: bool,
             rep: int) -> tuple[float, int]:  # fmt: skip
    """One crawl: (CPU seconds per 1,000 pages, pages)."""
    run_dir = work / f"{'on' if on else 'off'}-{rep}"
    listen = f"127.0.0.1:{free_port()}" if on else None
    cfg = config(run_dir, site, args.concurrency, listen)
    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARS}
    before = nginx.log_offset()
    binary = Path(sys.executable).with_name("frontier-crawl")
    started = time.monotonic()
    proc = subprocess.Popen([str(binary), "--config", str(cfg)], cwd=run_dir, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    stop, counts = threading.Event(), {}
    scraper = threading.Thread(target=scrape, args=(run_dir / "out", stop, counts), daemon=True)
    if on:
        scraper.start()
    _pid, status, usage = os.wait4(proc.pid, 0)
    stop.set()
    wall = time.monotonic() - started
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"crawl failed ({proc.returncode}): {err[-2000:]}")
    if on:
        scraper.join(5)
    report = json.loads((run_dir / "out" / "report.json").read_text())
    pages = int(report["fetched"])
    logged = sum(1 for e in nginx.read_log(before) if e.status == 200
                 and e.uri != "/robots.txt")  # fmt: skip
    cpu = usage.ru_utime + usage.ru_stime
    per_k = cpu / pages * 1000
    print(f"  rep {rep} API {'on ' if on else 'off'}: {pages} pages (nginx: {logged}), "
          f"wall {wall:.1f} s, CPU {cpu:.2f} s = {per_k:.3f} s/1000 pages"
          + (f", scrapes {counts}" if on else ""), flush=True)  # fmt: skip
    if on and not any(k.endswith(" 200") for k in counts):
        raise SystemExit("the API was never scraped successfully")
    return per_k, pages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=5_000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fc-control-cost-"))
    nginx: Nginx | None = None
    try:
        port = free_port()
        site = build_site(work / "site", port, hosts=args.hosts, pages=args.pages)
        nginx = Nginx(work, work / "site", port)
        nginx.start(ensure_nginx())
        print(f"site: {args.pages} pages over {args.hosts} hosts; load {os.getloadavg()[0]:.2f}")
        off: list[float] = []
        on: list[float] = []
        for rep in range(args.reps):
            off.append(run_once(work, site, nginx, args, False, rep)[0])
            on.append(run_once(work, site, nginx, args, True, rep)[0])
        m_off, m_on = statistics.median(off), statistics.median(on)
        print(f"median CPU per 1000 pages: API off {m_off:.3f} s, on and scraped every second "
              f"{m_on:.3f} s; ratio {m_on / m_off:.3f} ({(m_on / m_off - 1) * 100:+.1f}%); "
              f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
    finally:
        if nginx is not None:
            nginx.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
