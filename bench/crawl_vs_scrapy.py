"""frontier-crawl against Scrapy and a bare pycurl loop, on a static site served by nginx on
127.0.0.1. Pages are counted from nginx's access log, never from the crawlers' claims.

    .venv/bin/python bench/crawl_vs_scrapy.py                      # 10,000 pages, 50 hosts, 3 reps
    .venv/bin/python bench/crawl_vs_scrapy.py --pages 2000 --reps 1
    .venv/bin/python bench/crawl_vs_scrapy.py --politeness         # 5,000 pages, min_delay_s 0.2

Installs nginx with apt-get if missing and Scrapy into its own virtualenv
(``~/.cache/frontier-crawl-bench/scrapy-venv``); Scrapy is never a project dependency. Host names
``h<i>.bench`` are mapped to 127.0.0.1: curl-style resolve entries for frontier-crawl and the bare
loop, a resolver that knows only ``*.bench`` for Scrapy. See bench/README.md.
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
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from nginx_server import LogEntry, Nginx, ensure_nginx, free_port
from static_site import SiteInfo, build_site, host_name

BENCH = Path(__file__).resolve().parent
DEFAULT_SCRAPY_VENV = Path.home() / ".cache" / "frontier-crawl-bench" / "scrapy-venv"
GAP_TOLERANCE_S = 0.002  #: $msec and $request_time have 1 ms resolution each
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "ftp_proxy")


@dataclass(frozen=True, slots=True)
class Crawler:
    key: str
    label: str
    command: Callable[[Path], list[str]]  #: run dir -> argv


@dataclass(slots=True)
class RunResult:
    crawler: Crawler
    rep: int
    rc: int
    wall_s: float
    cpu_s: float
    maxrss_mb: float
    nginx_cpu_s: float
    load1: float
    log: list[LogEntry]
    pages: int = 0  #: status 200, robots.txt excluded, from nginx's log
    distinct: int = 0
    missing: int = 0
    unexpected: int = 0
    not_found: int = 0
    robots: int = 0
    span_s: float = 0.0
    warnings: list[str] = field(default_factory=list)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.wall_s if self.wall_s else 0.0

    @property
    def cpu_ms_per_page(self) -> float:
        return 1e3 * self.cpu_s / self.pages if self.pages else float("nan")


def child_env() -> dict[str, str]:
    """The environment with every proxy variable removed: loopback traffic only."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARS}
    env["NO_PROXY"] = env["no_proxy"] = "*"
    return env


def ensure_scrapy(venv: Path) -> Path:
    """Python of a virtualenv with Scrapy 2.x, created with pip when missing."""
    py = venv / "bin" / "python"
    if (
        py.exists()
        and subprocess.run([py, "-c", "import scrapy"], capture_output=True).returncode == 0
    ):
        return py
    print(f"creating {venv} with Scrapy 2.x (pip) ...", flush=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([py, "-m", "pip", "install", "-q", "scrapy>=2,<3"], check=True)
    return py


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def write_fc_config(
    run_dir: Path,
    site: SiteInfo,
    args: argparse.Namespace,
    *,
    warc: bool,
    delay_s: float,
    per_host: int,
    processes: int = 1,
    compressor: str | None = None,
    durability: str = "power-loss",
) -> Path:
    resolve = [f"{host_name(i)}:{site.port}:127.0.0.1" for i in range(site.hosts)]
    text = f"""[crawl]
seeds = {toml_list(site.seeds())}
output_dir = "out"
max_depth = 1000

[scope]
allow_domains = ["bench"]

[politeness]
min_delay_s = {delay_s}
connections_per_host = {per_host}
obey_robots = true

[fetch]
concurrency = {args.concurrency}
resolve = {toml_list(resolve)}

[output]
warc = {"true" if warc else "false"}
progress_interval_s = 0
{f'warc_compressor = "{compressor}"' if compressor else "# warc_compressor: the default"}
durability = "{durability}"

[workers]
processes = {processes}
"""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "crawl.toml"
    path.write_text(text)
    return path


def fc_binary() -> str:
    local = Path(sys.executable).with_name("frontier-crawl")
    return str(local) if local.exists() else (shutil.which("frontier-crawl") or "frontier-crawl")


def multi_process_available(work: Path, site: SiteInfo, args: argparse.Namespace) -> bool:
    """Whether ``frontier-crawl --check`` accepts ``workers.processes = 2``."""
    conf = write_fc_config(
        work / "check-n2", site, args, warc=True, delay_s=0.0, per_host=args.per_host, processes=2
    )
    r = subprocess.run(
        [fc_binary(), "--config", str(conf), "--check"], capture_output=True, env=child_env()
    )
    return r.returncode == 0


def fc_crawler(
    key: str,
    label: str,
    site: SiteInfo,
    args: argparse.Namespace,
    *,
    warc: bool,
    delay_s: float = 0.0,
    per_host: int | None = None,
    processes: int = 1,
    compressor: str | None = None,
    durability: str = "power-loss",
    code: Path | None = None,
) -> Crawler:
    def command(run_dir: Path) -> list[str]:
        conf = write_fc_config(
            run_dir,
            site,
            args,
            warc=warc,
            delay_s=delay_s,
            per_host=per_host or args.per_host,
            processes=processes,
            compressor=compressor,
            durability=durability,
        )
        wrap = []
        if args.profile:  # every process of the crawl sampled, raw stacks per run
            wrap = [str(Path(sys.executable).with_name("py-spy")), "record", "--subprocesses",
                    "--nonblocking", "-r", "250", "-f", "raw", "-o", str(run_dir / "profile.txt"),
                    "--"]  # fmt: skip
        if code is not None:  # another tree of the code (e.g. main, for before/after)
            return ["env", f"PYTHONPATH={code}", *wrap, fc_binary(), "--config", str(conf)]
        return [*wrap, fc_binary(), "--config", str(conf)]

    return Crawler(key, label, command)


_TIME = shutil.which("time", path="/usr/bin:/bin")  #: GNU time (apt: time), for peak RSS


def _maxrss_kb(rss_file: Path, fallback_kb: int) -> int:
    """The largest peak RSS of the crawl's processes (kB), as time wrote it; wait4's figure
    (which may be this script's own) when time did not run or was killed."""
    try:
        return int(rss_file.read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return fallback_kb


def run_one(crawler: Crawler, rep: int, work: Path, nginx: Nginx, timeout_s: float) -> RunResult:
    """Run one crawl as a child process; measure it with wait4 and nginx's log."""
    run_dir = work / "runs" / f"{crawler.key}-{rep}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    cmd = crawler.command(run_dir)
    # The peak RSS through /usr/bin/time: Linux carries the RSS high-water mark over execve
    # from the forking process (``setmax_mm_hiwater_rss``), so wait4 on a child of this script
    # reports this script's own peak whenever it is larger (on the 100,000-page site it grew
    # run by run, 212 to 403 MB). time's child is forked from time's small image instead.
    rss_file = run_dir / "maxrss.txt"
    if _TIME is not None:
        cmd = [_TIME, "-f", "%M", "-o", str(rss_file), *cmd]
    load1 = os.getloadavg()[0]
    offset, ngx0 = nginx.log_offset(), nginx.cpu_s()
    with (run_dir / "output.txt").open("wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            start_new_session=True,  # the timeout ends time and the crawl it runs alike
            cwd=run_dir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=child_env(),
        )
        timer = threading.Timer(timeout_s, os.killpg, (proc.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # Ctrl-C or SIGTERM of the bench: end the crawl we started
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    time.sleep(0.3)  # let nginx finish logging requests the client abandoned
    res = RunResult(
        crawler=crawler,
        rep=rep,
        rc=proc.returncode,
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        maxrss_mb=_maxrss_kb(rss_file, usage.ru_maxrss) / 1024,
        nginx_cpu_s=nginx.cpu_s() - ngx0,
        load1=load1,
        log=nginx.read_log(offset),
    )
    if res.rc != 0:
        tail = (run_dir / "output.txt").read_text(errors="replace")[-2000:]
        res.warnings.append(f"exit status {res.rc}; output tail:\n{tail}")
    shutil.rmtree(run_dir / "out", ignore_errors=True)  # WARC files and frontier state
    return res


def check_log(res: RunResult, site: SiteInfo) -> None:
    """Count pages from the access log and compare them with the reachable set."""
    pages = [e for e in res.log if e.status == 200 and e.uri != "/robots.txt"]
    got = {(e.host, e.uri) for e in pages}
    res.pages, res.distinct = len(pages), len(got)
    res.missing = len(site.expected - got)
    res.unexpected = len(got - site.expected)
    res.not_found = sum(1 for e in res.log if e.status == 404)
    res.robots = sum(1 for e in res.log if e.uri == "/robots.txt")
    if res.log:
        res.span_s = max(e.end for e in res.log) - min(e.start for e in res.log)
    if res.missing:
        sample = sorted(site.expected - got)[:3]
        res.warnings.append(
            f"INCOMPLETE: {res.missing} of {len(site.expected)} reachable pages not fetched, e.g. {sample}"
        )
    if res.unexpected:
        res.warnings.append(
            f"{res.unexpected} unexpected URIs answered 200, e.g. {sorted(got - site.expected)[:3]}"
        )
    if res.pages != res.distinct:
        res.warnings.append(f"{res.pages - res.distinct} pages fetched more than once")
    other = sorted({e.status for e in res.log} - {200, 404})
    if other:
        res.warnings.append(f"unexpected statuses in the log: {other}")


def print_run(res: RunResult) -> None:
    print(
        f"  rep {res.rep + 1} {res.crawler.label:<28} {res.pages:>7,} pages {res.wall_s:7.2f} s "
        f"{res.pages_per_s:7,.0f}/s  CPU {res.cpu_ms_per_page:6.3f} ms/page  RSS {res.maxrss_mb:5.0f} MB  "
        f"| log span {res.span_s:.2f} s, 404 {res.not_found}, robots {res.robots}, "
        f"nginx {1e3 * res.nginx_cpu_s / max(res.pages, 1):.3f} ms/page, load {res.load1:.2f}",
        flush=True,
    )
    for w in res.warnings:
        print(f"    WARNING {res.crawler.label}: {w}", flush=True)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def print_table(crawlers: list[Crawler], results: list[RunResult]) -> None:
    rows: dict[str, tuple[float, float, float, float, int]] = {}
    for c in crawlers:
        rs = [r for r in results if r.crawler.key == c.key and r.pages]
        if rs:
            rows[c.key] = (
                median([r.pages_per_s for r in rs]),
                median([r.cpu_ms_per_page for r in rs]),
                median([r.maxrss_mb for r in rs]),
                median([r.wall_s for r in rs]),
                len(rs),
            )

    def ratio(key: str, ref: str, i: int) -> str:
        if key not in rows or ref not in rows:
            return "-"
        return f"{rows[key][i] / rows[ref][i]:.2f}x"

    print(
        "\nmedians over repetitions (pages counted from nginx's access log; CPU = crawler process tree):"
    )
    head = (
        f"{'crawler':<28} {'runs':>4} {'wall s':>7} {'pages/s':>8} {'CPU ms/page':>11} {'peak RSS MB':>11} "
        f"{'speed/Scrapy':>12} {'CPU/Scrapy':>10} {'speed/bare':>10} {'CPU/bare':>8}"
    )
    print(head)
    print("-" * len(head))
    for c in crawlers:
        if c.key not in rows:
            print(f"{c.label:<28} no successful run")
            continue
        pps, cpu, rss, wall, n = rows[c.key]
        print(
            f"{c.label:<28} {n:>4} {wall:>7.2f} {pps:>8,.0f} {cpu:>11.3f} {rss:>11.0f} "
            f"{ratio(c.key, 'scrapy', 0):>12} {ratio(c.key, 'scrapy', 1):>10} "
            f"{ratio(c.key, 'bare', 0):>10} {ratio(c.key, 'bare', 1):>8}"
        )


def throughput(args: argparse.Namespace, work: Path, site: SiteInfo, nginx: Nginx) -> None:
    crawlers: list[Crawler] = []
    wanted = set(args.crawlers.split(","))
    if "fc" in wanted:
        crawlers.append(fc_crawler("fc", "frontier-crawl, WARC off", site, args, warc=False))
    if "fc-base" in wanted:  # 1 process, WARC off, the --baseline tree: before/after of fc
        if args.baseline is None:
            raise SystemExit("fc-base needs --baseline DIR (a checkout of the code to compare)")
        crawlers.append(
            fc_crawler("fc-base", f"WARC off, {args.baseline.name}", site, args, warc=False,
                       code=args.baseline.resolve())
        )  # fmt: skip
    if "fc-warc" in wanted:
        crawlers.append(fc_crawler("fc-warc", "frontier-crawl, WARC on", site, args, warc=True))
    if "fc-warc-pc" in wanted:
        crawlers.append(
            fc_crawler(
                "fc-warc-pc",
                "frontier-crawl, WARC on, process-crash durability",
                site,
                args,
                warc=True,
                durability="process-crash",
            )
        )
    if "fc-warc-isal" in wanted:
        crawlers.append(
            fc_crawler(
                "fc-warc-isal",
                "frontier-crawl, WARC isal",
                site,
                args,
                warc=True,
                compressor="isal",
            )
        )
    n2_keys = {"fc-n2", "fc-n2-isal", "fc-n2-zlib", "fc-n2-base", "fc-n2-off", "fc-n2-off-base"}
    n2 = bool(n2_keys & wanted) and multi_process_available(work, site, args)
    if n2 and "fc-n2-off" in wanted:  # what WARC itself costs with 2 processes
        crawlers.append(
            fc_crawler("fc-n2-off", "frontier-crawl N=2, WARC off", site, args, warc=False,
                       processes=2)
        )  # fmt: skip
    if n2 and "fc-n2-off-base" in wanted:  # the same, the --baseline tree's code
        if args.baseline is None:
            raise SystemExit("fc-n2-off-base needs --baseline DIR (a checkout of the code)")
        crawlers.append(
            fc_crawler("fc-n2-off-base", f"N=2, WARC off, {args.baseline.name}", site, args,
                       warc=False, processes=2, code=args.baseline.resolve())
        )  # fmt: skip
    if n2 and "fc-n2-base" in wanted:
        if args.baseline is None:
            raise SystemExit("fc-n2-base needs --baseline DIR (a checkout of the code to compare)")
        crawlers.append(
            fc_crawler("fc-n2-base", f"N=2, WARC on, {args.baseline.name}", site, args,
                       warc=True, processes=2, code=args.baseline.resolve())
        )  # fmt: skip
    if n2 and "fc-n2-zlib" in wanted:
        crawlers.append(
            fc_crawler("fc-n2-zlib", "frontier-crawl N=2, WARC zlib-ng", site, args, warc=True,
                       processes=2, compressor="zlib-ng")
        )  # fmt: skip
    if n2 and "fc-n2" in wanted:
        crawlers.append(
            fc_crawler("fc-n2", "frontier-crawl N=2, WARC on", site, args, warc=True, processes=2)
        )
    if n2 and "fc-n2-isal" in wanted:
        crawlers.append(
            fc_crawler(
                "fc-n2-isal",
                "frontier-crawl N=2, WARC isal",
                site,
                args,
                warc=True,
                processes=2,
                compressor="isal",
            )
        )
    if "scrapy" in wanted:
        scrapy_py = ensure_scrapy(args.scrapy_venv)
        version = subprocess.run(
            [scrapy_py, "-c", "import scrapy; print(scrapy.__version__)"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        print(f"Scrapy {version} from {args.scrapy_venv}")
        seeds = work / "seeds.txt"
        seeds.write_text("\n".join(site.seeds()) + "\n")
        crawlers.append(
            Crawler(
                "scrapy",
                f"Scrapy {version}",
                lambda _d: [
                    str(scrapy_py),
                    str(BENCH / "scrapy_spider.py"),
                    "--seeds-file",
                    str(seeds),
                    "--concurrency",
                    str(args.concurrency),
                    "--per-host",
                    str(args.per_host),
                ],
            )
        )
    if "bare" in wanted:
        crawlers.append(
            Crawler(
                "bare",
                "bare pycurl loop",
                lambda _d: [
                    sys.executable,
                    str(BENCH / "bare_loop.py"),
                    "--port",
                    str(site.port),
                    "--hosts",
                    str(site.hosts),
                    "--concurrency",
                    str(args.concurrency),
                ],
            )
        )
    if "fc-n2" in wanted and not n2:
        print("N=2: not available yet (frontier-crawl --check rejects workers.processes = 2)")
    print(
        f"concurrency {args.concurrency}, {args.per_host} per host (frontier-crawl connections_per_host, "
        f"Scrapy CONCURRENT_REQUESTS_PER_DOMAIN; the bare loop has no per-host limit)\n",
        flush=True,
    )
    results: list[RunResult] = []
    for rep in range(args.reps):
        for c in crawlers:
            res = run_one(c, rep, work, nginx, args.timeout)
            check_log(res, site)
            print_run(res)
            results.append(res)
    print_table(crawlers, results)
    if "fc-n2" in wanted and not n2:
        print("N=2: not available yet")


def service_time_s(site: SiteInfo, n: int = 300) -> float:
    """Mean time of one sequential keep-alive GET of a page, measured with pycurl."""
    import pycurl

    c = pycurl.Curl()
    c.setopt(pycurl.RESOLVE, [f"{host_name(i)}:{site.port}:127.0.0.1" for i in range(site.hosts)])
    c.setopt(pycurl.NOPROXY, "*")
    c.setopt(pycurl.WRITEFUNCTION, lambda b: len(b))
    pages = sorted(site.expected)
    times: list[float] = []
    for i in range(n):
        host, uri = pages[(i * 7919) % len(pages)]
        c.setopt(pycurl.URL, f"http://{host}:{site.port}{uri}")
        c.perform()
        times.append(float(c.getinfo(pycurl.TOTAL_TIME)))
    c.close()
    return statistics.mean(times[10:])


def quantiles(sorted_values: list[float]) -> Callable[[float], float]:
    """``q(p)``: the p-quantile (nearest rank) of an already sorted list."""

    def q(p: float) -> float:
        if not sorted_values:
            return float("nan")
        return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]

    return q


def politeness(args: argparse.Namespace, work: Path, site: SiteInfo, nginx: Nginx) -> None:
    delay = args.delay
    svc = service_time_s(site)
    need = site.requests_per_host()
    ideal_by_host = {h: n * svc + (n - 1) * delay for h, n in need.items()}
    slow_host = max(ideal_by_host, key=lambda h: ideal_by_host[h])
    ideal = ideal_by_host[slow_host]
    print(
        f"min_delay_s {delay}, connections_per_host 1, concurrency {args.concurrency}; "
        f"mean service time {1e3 * svc:.2f} ms (sequential keep-alive GETs)"
    )
    print(
        f"ideal: slowest host {slow_host} needs {need[slow_host]} requests (pages + 404 links + robots.txt) "
        f"-> {need[slow_host]} x {1e3 * svc:.2f} ms + {need[slow_host] - 1} x {delay} s = {ideal:.2f} s\n"
    )
    crawler = fc_crawler(
        "fc-polite", "frontier-crawl, polite", site, args, warc=False, delay_s=delay, per_host=1
    )
    results = []
    for rep in range(args.reps):
        res = run_one(crawler, rep, work, nginx, args.timeout)
        check_log(res, site)
        print_run(res)
        by_host: dict[str, list[LogEntry]] = defaultdict(list)
        for e in res.log:
            by_host[e.host].append(e)
        gaps: list[float] = []
        violations: list[str] = []
        for host, entries in sorted(by_host.items()):
            entries.sort(key=lambda e: e.start)
            for a, b in pairwise(entries):
                gap = b.start - a.end
                gaps.append(gap)
                if gap < delay - GAP_TOLERANCE_S:
                    violations.append(f"{host}: {b.uri} started {gap:.3f} s after {a.uri} ended")
        gaps.sort()
        q = quantiles(gaps)
        print(
            f"    actual/ideal: wall {res.wall_s / ideal:.2f} ({res.wall_s:.2f} s), "
            f"log span {res.span_s / ideal:.2f} ({res.span_s:.2f} s)"
        )
        print(
            f"    gaps end->next start per host: min {q(0):.3f} s, median {q(0.5):.3f} s, "
            f"p95 {q(0.95):.3f} s, max {q(1):.3f} s over {len(gaps):,} gaps"
        )
        print(
            f"    delay violations (gap < {delay} s - {1e3 * GAP_TOLERANCE_S:.0f} ms log resolution): {len(violations)}"
        )
        for v in violations[:10]:
            print(f"      {v}")
        results.append(res)
    if results:
        walls = [r.wall_s for r in results]
        print(
            f"\nmedian actual/ideal over {len(results)} run(s): {median(walls) / ideal:.2f} (ideal {ideal:.2f} s)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--pages",
        type=int,
        default=None,
        help="pages over all hosts (default 10000, 5000 with --politeness)",
    )
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--fanout", type=int, default=20, help="links per page (about)")
    ap.add_argument("--page-kb", default="10-30", help="page size range in KB, e.g. 10-30")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each crawler, alternating")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument(
        "--per-host", type=int, default=2, help="connections per host (frontier-crawl and Scrapy)"
    )
    ap.add_argument(
        "--crawlers",
        default="fc,fc-warc,fc-warc-isal,fc-n2,fc-n2-isal,scrapy,bare",
        help="subset of fc,fc-warc,fc-warc-pc,fc-warc-isal,fc-n2,fc-n2-isal,fc-n2-zlib,"
        "fc-n2-base,fc-n2-off,fc-n2-off-base,fc-base,scrapy,bare (the -isal and -zlib ones set "
        "output.warc_compressor to isal or zlib-ng, the others keep the default; fc-warc-pc sets output.durability = "
        "process-crash, the others keep the default power-loss; fc-n2-base runs the code of "
        "--baseline; fc-base: the same with 1 process, WARC off; fc-n2-off is 2 processes "
        "without WARC, fc-n2-off-base the same with the code of --baseline)",
    )
    ap.add_argument(
        "--politeness",
        action="store_true",
        help="the politeness scenario instead (frontier-crawl only)",
    )
    ap.add_argument(
        "--delay", type=float, default=0.2, help="min_delay_s of the politeness scenario"
    )
    ap.add_argument("--nginx-workers", type=int, default=1)
    ap.add_argument(
        "--profile",
        action="store_true",
        help="run frontier-crawl under `py-spy record --subprocesses -f raw` (pip install "
        "py-spy): RUN_DIR/profile.txt per run (with --keep; bench/profile_split.py sums it)",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        help="a tree of the code (e.g. `git archive main | tar -x -C DIR`) run as fc-n2-base or fc-base, "
        "alternated with this tree's runs",
    )
    ap.add_argument("--scrapy-venv", type=Path, default=DEFAULT_SCRAPY_VENV)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds before a crawl is killed")
    ap.add_argument(
        "--keep", action="store_true", help="keep the work dir (site, nginx logs, run outputs)"
    )
    args = ap.parse_args()
    pages = args.pages or (5_000 if args.politeness else 10_000)
    lo, _, hi = args.page_kb.partition("-")
    page_kb = (int(lo), int(hi or lo))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up below
    load_start = os.getloadavg()
    nginx_bin = ensure_nginx()
    work = Path(tempfile.mkdtemp(prefix="fc-bench-"))
    nginx: Nginx | None = None
    try:
        port = free_port()
        t0 = time.perf_counter()
        site = build_site(work / "site", port, args.hosts, pages, args.fanout, page_kb)
        print(
            f"site: {pages:,} pages on {args.hosts} hosts, {site.total_bytes / pages / 1024:.1f} KB/page, "
            f"{len(site.broken)} distinct 404 links, built in {time.perf_counter() - t0:.1f} s under {work}"
        )
        nginx = Nginx(work, work / "site", port, args.nginx_workers)
        nginx.start(nginx_bin)
        print(
            f"nginx ({args.nginx_workers} worker) on 127.0.0.1:{port}; hosts h0.bench..h{args.hosts - 1}.bench -> 127.0.0.1"
        )
        print(
            f"machine: {os.cpu_count()} cores, load average at start {' '.join(f'{x:.2f}' for x in load_start)}",
            flush=True,
        )
        if args.politeness:
            politeness(args, work, site, nginx)
        else:
            throughput(args, work, site, nginx)
    finally:
        if nginx is not None:
            nginx.stop()
        print(f"load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
