"""What watching a crawl costs: CPU per page with the control API on and scraped every second
(``GET /api/status`` and ``GET /metrics``) against the API off. Target: at most 3% more.

    .venv/bin/python bench/control_cost.py                    # 5,000 pages, 50 hosts, 3 reps each
    .venv/bin/python bench/control_cost.py --pages 2000 --reps 1

Three variants: the API off; on but never asked (``on-idle``: what serving it costs by itself);
on and scraped every second (``on``). One crawler process (``workers.processes = 1``), WARC off, the bench site (``static_site.py``)
served by nginx on 127.0.0.1 (``nginx_server.py``; installed with apt-get if missing), the same
crawl settings as ``crawl_vs_scrapy.py``'s "frontier-crawl, WARC off" run. The two variants run
in turn within each repetition (off, on-idle, on; then again), each from a fresh output
directory. CPU is user + system time of the crawler process: in all (``os.wait4``, start-up and
the final report included), and in the steady state, between the 20% and the 80% marks of the
requests nginx logged (``/proc/<pid>/stat``, sampled every 20 ms), per request there. Pages are
the report's ``fetched``, checked against nginx's access log (status 200, robots.txt excluded). The scraper
runs in this process (its own CPU is not counted: a Prometheus server would do that work).
Prints each run, then the medians and their ratios.

``--components``: instead, one crawl in this process, and in its progress callback (the loop's
thread) the CPU of each piece the API adds, timed over 200 calls each: a sample and status
build (every 0.5 s while someone asks), the status as JSON and the metrics text (per scrape),
and the command queue's per-tick ``take()`` (with nothing posted). Deterministic where the
end-to-end ratio is at the mercy of the machine's load.
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
from collections.abc import Callable
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


def cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` in clock ticks (``/proc/<pid>/stat`` fields 14 and 15)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def steady(pid: int, log: Path, offset: int, expected: int, out: list[float],
           stop: threading.Event) -> None:  # fmt: skip
    """Sample the crawler's CPU at 20% and 80% of the ``expected`` requests in nginx's log."""
    marks = [int(expected * 0.2), int(expected * 0.8)]
    seen, at = 0, []
    with log.open("rb") as f:
        f.seek(offset)
        while not stop.is_set() and len(at) < 2:
            seen += f.read().count(b"\n")
            if seen >= marks[len(at)]:
                try:
                    at.append((seen, cpu_ticks(pid)))
                except OSError:
                    return
            stop.wait(0.02)
    if len(at) == 2:
        hz = os.sysconf("SC_CLK_TCK")
        out.append((at[1][1] - at[0][1]) / hz / (at[1][0] - at[0][0]) * 1000)


def run_once(work: Path, site: SiteInfo, nginx: Nginx, args: argparse.Namespace, variant: str,
             rep: int) -> tuple[float, float]:  # fmt: skip
    """One crawl: (CPU seconds per 1,000 pages in all, per 1,000 requests in steady state)."""
    on = variant != "off"
    run_dir = work / f"{variant}-{rep}"
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
    if variant == "on":
        scraper.start()
    mid: list[float] = []
    expected = sum(site.requests_per_host().values())
    monitor = threading.Thread(target=steady, daemon=True,
                               args=(proc.pid, nginx.access_log, before, expected, mid, stop))
    monitor.start()  # fmt: skip
    _pid, status, usage = os.wait4(proc.pid, 0)
    stop.set()
    monitor.join(5)
    wall = time.monotonic() - started
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"crawl failed ({proc.returncode}): {err[-2000:]}")
    if variant == "on":
        scraper.join(5)
    report = json.loads((run_dir / "out" / "report.json").read_text())
    pages = int(report["fetched"])
    logged = sum(1 for e in nginx.read_log(before) if e.status == 200
                 and e.uri != "/robots.txt")  # fmt: skip
    cpu = usage.ru_utime + usage.ru_stime
    per_k = cpu / pages * 1000
    steady_k = mid[0] if mid else float("nan")
    print(f"  rep {rep} API {variant:7}: {pages} pages (nginx: {logged}), wall {wall:.1f} s, "
          f"CPU {cpu:.2f} s = {per_k:.3f} s/1000 pages, steady {steady_k:.3f} s/1000 requests"
          + (f", scrapes {counts}" if variant == "on" else ""), flush=True)  # fmt: skip
    if variant == "on" and not any(k.endswith(" 200") for k in counts):
        raise SystemExit("the API was never scraped successfully")
    return per_k, steady_k


def components(work: Path, site: SiteInfo, args: argparse.Namespace) -> None:
    """Time each piece the API adds, in a crawl of the bench site in this process."""
    from frontier_crawl.config import load
    from frontier_crawl.control.commands import CommandQueue
    from frontier_crawl.control.metrics import render_metrics
    from frontier_crawl.engine import Engine

    cfg = config(work / "components", site, args.concurrency, None)
    text = cfg.read_text().replace("progress_interval_s = 0", "progress_interval_s = 2")
    cfg.write_text(text)
    os.chdir(cfg.parent)
    engine = Engine(load(cfg))
    times: dict[str, float] = {}
    queue = CommandQueue()

    def timed(name: str, fn: Callable[[], object], n: int = 200) -> None:
        t0 = time.process_time()
        for _ in range(n):
            fn()
        times[name] = (time.process_time() - t0) / n * 1000

    def measure(_progress: dict[str, object]) -> None:
        if times:
            return
        timed("sample + status build", lambda: engine._observe.sample(time.monotonic(), force=True))
        timed("status as JSON", lambda: json.dumps(engine.status()))
        timed("metrics text", lambda: render_metrics([engine.metrics()]))
        timed("command take(), per tick", queue.take, 20_000)

    engine._on_progress = measure
    report = engine.run()
    queue.close()
    print(f"crawled {report['fetched']} pages; CPU per call: " + ", ".join(
        f"{k} {v * 1000:.1f} us" for k, v in times.items()))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=5_000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--components", action="store_true",
                    help="time each piece the API adds instead (in this process)")  # fmt: skip
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fc-control-cost-"))
    nginx: Nginx | None = None
    try:
        port = free_port()
        site = build_site(work / "site", port, hosts=args.hosts, pages=args.pages)
        nginx = Nginx(work, work / "site", port)
        nginx.start(ensure_nginx())
        print(f"site: {args.pages} pages over {args.hosts} hosts; load {os.getloadavg()[0]:.2f}")
        if args.components:
            components(work, site, args)
            return
        variants = ("off", "on-idle", "on")
        runs: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
        for rep in range(args.reps):
            for variant in variants:
                runs[variant].append(run_once(work, site, nginx, args, variant, rep))
        for i, what in enumerate(("in all, per 1000 pages", "steady state, per 1000 requests")):
            med = {v: statistics.median(r[i] for r in runs[v]) for v in variants}
            print(f"median CPU {what}: " + ", ".join(
                f"{v} {med[v]:.3f} s" + ("" if v == "off" else
                                         f" (ratio {med[v] / med['off']:.3f})")
                for v in variants))  # fmt: skip
        print(f"load {os.getloadavg()[0]:.2f}")
    finally:
        if nginx is not None:
            nginx.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
