"""The kill -9 soak: one long crawl of a static site served by nginx on 127.0.0.1, killed with
SIGKILL at random moments and restarted each time with the same command, then checked.

    .venv/bin/python bench/soak.py                              # 100,000 pages, 50 hosts, 10 kills
    .venv/bin/python bench/soak.py --pages 5000 --kills 3       # a quick run, about a minute

Not run by CI. Needs nginx (installed with apt-get when missing, as root). See bench/README.md.

**Crawl settings** are frontier-crawl's defaults (WARC on, default gzip compressor and level,
1 connection per host, concurrency 256, group commit 0.05 s, depth 20) except for what a
loopback crawl of a generated site needs:
``crawl.seeds`` (each host's ``/``), ``scope.allow_domains = ["bench"]``, ``fetch.resolve``
(``h<i>.bench:<port>:127.0.0.1``) and one shortened politeness key,
``politeness.min_delay_s = 0`` (default 1.0: 2,000 pages per host at one per second would take
33 minutes per run; ``--min-delay-s`` sets it). The adaptive delay stays on at its default
(``delay_factor = 2`` times the last fetch time, a few ms on loopback).

**Kill moments.** The ``--kills`` kill points are drawn from ``--seed``: page counts uniform in
[1, 95% of the pages], sorted. A run is killed (SIGKILL, to the crawler's PID) as soon as
nginx's access log shows that many page fetches (status 200, robots.txt excluded, over the whole
soak, duplicates included): so the kills fall at random points of the crawl whatever its speed.
Two equal points kill the second run right at start-up (during recovery). The run after the
last kill is left to end by itself.

**Checks** (exit status 1 if any fails):

- pages, from nginx's log and from the WARC response records: every page of the site fetched and
  archived at least once, no unknown URI, no page fetched twice within one run; a page fetched
  again in a later run is a duplicate of the kill that ended the run it was first fetched in.
  Each kill's duplicates must stay within its bound, ``in flight + unsettled``:
  ``F = min(fetch.concurrency, hosts x connections_per_host)`` transfers in flight, plus the
  pages finished but not yet marked done: those in the WARC writer's socket
  (``2 x min(4 MiB, net.core.wmem_max) / smallest page``, the kernel doubling SO_SNDBUF, plus
  one batch of 16 in the child's hands and one in the loop's), plus those finished since the last
  group commit (``commit_interval_s x`` the run's peak page rate over one second, plus one
  poll's worth, F). The measured ``unsettled`` column is the exact count: pages nginx served in
  the run minus the pages the run's saved counters (LMDB, read after the kill) count as done.
- ``report.json`` exact: ``fetched`` = pages, 404s = distinct broken links, robots.txt fetches =
  hosts, no failure, timeout or 5xx, ``bytes`` = the site's bytes, ``complete`` true.
- every WARC file passes ``warcio check`` and none is left ``.open``.
- the crawl log's ``fetched`` lines cover every page.

Peak resident memory of each run: ``VmHWM`` of the crawler process and of its children (the
WARC writer process), read from ``/proc`` every 0.05 s and just before the kill. Not
``ru_maxrss`` from ``wait4``: Linux carries the RSS high-water mark over ``execve`` from the
forking process (``setmax_mm_hiwater_rss`` in ``exec_mmap``), so a child of this script would
report this script's own peak whenever it is larger (it was, at 265 MB, for every run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import lmdb
import msgspec
from crawl_vs_scrapy import child_env, fc_binary, toml_list
from nginx_server import LogEntry, Nginx, ensure_nginx, free_port
from static_site import ROBOTS, SiteInfo, build_site, host_name
from warcio.archiveiterator import ArchiveIterator

KILL_SPAN = 0.95  #: kill points fall within the first 95% of the pages
WARC_SOCKET_ASKED = 4 << 20  #: frontier_crawl.output.warc._SOCKET_BUFFER, SO_SNDBUF asked
WARC_BATCH = 16  #: frontier_crawl.output.warc._BATCH_RECORDS, pages per message to the writer
STATS_KEY = b"engine.stats"  #: frontier_crawl.engine.STATS_BLOB, in the LMDB "blobs" db
POLL_S = 0.01  #: how often the access log is read while a run goes
SAMPLE_S = 0.05  #: how often VmHWM is read from /proc (and once more just before a kill)

Key = tuple[str, str]  #: (host, request URI)


@dataclass(slots=True)
class Run:
    index: int
    target: int | None  #: kill when the soak's page fetches reach this; None: the last run
    wall_s: float = 0.0
    rc: int = 0
    killed: bool = False
    crawler_hwm_mb: float = 0.0  #: the crawler process, its VmHWM last sampled
    child_hwm_mb: float = 0.0  #: its children (the WARC writer), largest VmHWM sampled
    log: list[LogEntry] = field(default_factory=list)
    settled_total: int = 0  #: pages counted done in the saved counters after this run
    warc_files: list[str] = field(default_factory=list)  #: WARC files this run wrote
    peak_rate: float = 0.0  #: pages/s over the busiest second (nginx log)
    dup_nginx: int = 0
    dup_warc: int = 0
    bound: int = 0

    def pages(self) -> list[Key]:
        return [(e.host, e.uri) for e in self.log if e.status == 200 and e.uri != "/robots.txt"]


def write_config(crawl_dir: Path, site: SiteInfo, min_delay_s: float) -> Path:
    resolve = [f"{host_name(i)}:{site.port}:127.0.0.1" for i in range(site.hosts)]
    text = f"""# Written by bench/soak.py: defaults except the loopback keys and min_delay_s (shortened).
[crawl]
seeds = {toml_list(site.seeds())}
output_dir = "out"

[scope]
allow_domains = ["bench"]

[politeness]
min_delay_s = {min_delay_s}

[fetch]
resolve = {toml_list(resolve)}
"""
    crawl_dir.mkdir(parents=True, exist_ok=True)
    path = crawl_dir / "crawl.toml"
    path.write_text(text)
    return path


def effective_settings(conf: Path) -> tuple[int, int, float]:
    """``fetch.concurrency``, ``politeness.connections_per_host`` and
    ``frontier.commit_interval_s`` of the crawl, as the product reads its config."""
    from frontier_crawl.config import load

    s = load(conf)
    return s.fetch.concurrency, s.politeness.connections_per_host, s.frontier.commit_interval_s


def children_of(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        with contextlib.suppress(OSError):
            out.extend(int(c) for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split())
    return out


def vm_hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class LogTail:
    """Reads nginx's access log as it grows; counts page fetches (200, not robots.txt)."""

    def __init__(self, nginx: Nginx) -> None:
        self.nginx = nginx
        self.offset = nginx.log_offset()
        self.pages = 0

    def read(self) -> list[LogEntry]:
        size = self.nginx.log_offset()
        if size <= self.offset:
            return []
        with self.nginx.access_log.open("rb") as f:
            f.seek(self.offset)
            data = f.read(size - self.offset)
        end = data.rfind(b"\n") + 1  # whole lines only; the rest next time
        self.offset += end
        entries: list[LogEntry] = []
        for line in data[:end].decode("utf-8", "replace").splitlines():
            e = LogEntry.parse(line)
            if e is not None:
                entries.append(e)
                self.pages += e.status == 200 and e.uri != "/robots.txt"
        return entries


def run_crawl(run: Run, cmd: list[str], crawl_dir: Path, tail: LogTail, timeout_s: float) -> None:
    """One run of the crawler: until it exits, or until the kill point (SIGKILL by PID)."""
    out = (crawl_dir / f"output-{run.index}.txt").open("wb")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=crawl_dir,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        env=child_env(),
    )
    hwm: dict[int, int] = {}  #: pid -> largest VmHWM seen, kB (the crawler and its children)
    next_sample = 0.0
    status: int | None = None

    def sample() -> None:
        for p in (proc.pid, *children_of(proc.pid)):
            hwm[p] = max(hwm.get(p, 0), vm_hwm_kb(p))

    try:
        while True:
            pid, st = os.waitpid(proc.pid, os.WNOHANG)
            if pid:
                status = st
                break
            run.log.extend(tail.read())
            now = time.perf_counter()
            if now >= next_sample:
                sample()
                next_sample = now + SAMPLE_S
            if run.target is not None and tail.pages >= run.target:
                sample()  # the peak up to the kill
                os.kill(proc.pid, signal.SIGKILL)
                run.killed = True
                status = os.waitpid(proc.pid, 0)[1]
                break
            if now - t0 > timeout_s:
                os.kill(proc.pid, signal.SIGKILL)
                status = os.waitpid(proc.pid, 0)[1]
                raise SystemExit(f"run {run.index} still going after {timeout_s} s: killed")
            time.sleep(POLL_S)
    except BaseException:
        if status is None:
            proc.kill()
            proc.wait()
        raise
    finally:
        out.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    run.wall_s = time.perf_counter() - t0
    run.rc = proc.returncode
    run.crawler_hwm_mb = hwm.get(proc.pid, 0) / 1024
    run.child_hwm_mb = max((v for p, v in hwm.items() if p != proc.pid), default=0) / 1024
    time.sleep(0.3)  # nginx logs a request the killed client abandoned when it notices
    run.log.extend(tail.read())


def saved_pages(state: Path) -> int:
    """Pages the crawl's saved counters count as done (read-only, after the crawler died)."""
    path = state / "frontier.lmdb"
    if not path.exists():
        return 0
    env = lmdb.open(str(path), readonly=True, lock=False, subdir=True, max_dbs=16)
    try:
        try:
            db = env.open_db(b"blobs", create=False)
        except lmdb.NotFoundError:
            return 0
        with env.begin(db=db) as txn:
            blob = txn.get(STATS_KEY)
    finally:
        env.close()
    if blob is None:
        return 0
    return int(msgspec.msgpack.decode(blob)["stats"]["pages"])


def warc_names(warc_dir: Path) -> set[str]:
    """WARC file names, ``.open`` stripped (recovery closes a file under its final name)."""
    if not warc_dir.exists():
        return set()
    return {p.name.removesuffix(".open") for p in warc_dir.iterdir() if ".warc" in p.name}


def warc_responses(path: Path) -> list[Key]:
    keys: list[Key] = []
    with path.open("rb") as f:
        for rec in ArchiveIterator(f):
            if rec.rec_type != "response" or rec.http_headers.get_statuscode() != "200":
                continue  # pages only, as counted from nginx's log (404s are archived too)
            u = urlsplit(rec.rec_headers.get_header("WARC-Target-URI"))
            uri = u.path + (f"?{u.query}" if u.query else "")
            if uri != "/robots.txt":
                keys.append((u.hostname or "", uri))
    return keys


def peak_rate(entries: list[LogEntry]) -> float:
    per_s = Counter(int(e.end) for e in entries if e.status == 200)
    return float(max(per_s.values(), default=0))


def duplicates_per_run(per_run: list[list[Key]]) -> tuple[list[int], int]:
    """Per run, its pages fetched again in a later run; and pages fetched twice within a run."""
    later: set[Key] = set()
    dups = [0] * len(per_run)
    within = 0
    for i in range(len(per_run) - 1, -1, -1):
        keys = per_run[i]
        distinct = set(keys)
        within += len(keys) - len(distinct)
        dups[i] = len(distinct & later)
        later |= distinct
    return dups, within


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1, help="site and kill points")
    ap.add_argument("--page-kb", default="10-30", help="page size range in KB (keep under 60)")
    ap.add_argument("--fanout", type=int, default=20, help="links per page (about)")
    ap.add_argument("--min-delay-s", type=float, default=0.0, help="politeness.min_delay_s")
    ap.add_argument("--nginx-workers", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=3600, help="seconds before a run is killed")
    ap.add_argument("--keep", action="store_true", help="keep the work dir")
    args = ap.parse_args()
    lo, _, hi = args.page_kb.partition("-")
    page_kb = (int(lo), int(hi or lo))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up below
    rnd = random.Random(args.seed)
    targets = sorted(rnd.randint(1, max(1, int(KILL_SPAN * args.pages))) for _ in range(args.kills))
    nginx_bin = ensure_nginx()
    work = Path(tempfile.mkdtemp(prefix="fc-soak-"))
    nginx: Nginx | None = None
    try:
        port = free_port()
        t0 = time.perf_counter()
        site = build_site(
            work / "site", port, args.hosts, args.pages, args.fanout, page_kb, args.seed
        )
        min_page = min(
            p.stat().st_size
            for h in range(site.hosts)
            for p in (work / "site" / host_name(h)).rglob("*.html")
        )
        print(
            f"site: {args.pages:,} pages on {args.hosts} hosts, {site.total_bytes / args.pages / 1024:.1f} KB/page "
            f"(smallest {min_page:,} B), {len(site.broken)} distinct 404 links, built in "
            f"{time.perf_counter() - t0:.0f} s under {work}",
            flush=True,
        )
        nginx = Nginx(work, work / "site", port, args.nginx_workers)
        nginx.start(nginx_bin)
        crawl_dir = work / "crawl"
        conf = write_config(crawl_dir, site, args.min_delay_s)
        cmd = [fc_binary(), "--config", str(conf)]
        concurrency, cph, commit_s = effective_settings(conf)
        in_flight = min(concurrency, site.hosts * cph)
        try:
            wmem_max = int(Path("/proc/sys/net/core/wmem_max").read_text())
        except OSError:
            wmem_max = WARC_SOCKET_ASKED
        pipeline = math.ceil(2 * min(WARC_SOCKET_ASKED, wmem_max) / min_page) + 2 * WARC_BATCH
        print(f"command (every run, cwd {crawl_dir}): {' '.join(cmd)}")
        print(f"kill points (page fetches seen by nginx): {targets}")
        print(
            f"duplicate bound per kill = in flight F + WARC socket P + commit window: "
            f"F = min({concurrency}, {site.hosts} x {cph}) = {in_flight}, "
            f"P = 2 x min(4 MiB, wmem_max {wmem_max:,}) / {min_page:,} B + 2 x {WARC_BATCH} "
            f"= {pipeline}, "
            f"window = ceil({commit_s} s x peak pages/s) + F",
            flush=True,
        )
        tail = LogTail(nginx)
        runs: list[Run] = []
        seen_names: set[str] = set()
        for i in range(args.kills + 1):
            run = Run(i, targets[i] if i < args.kills else None)
            run_crawl(run, cmd, crawl_dir, tail, args.timeout)
            run.settled_total = saved_pages(crawl_dir / "out" / "state")
            names = warc_names(crawl_dir / "out" / "warc")
            run.warc_files = sorted(names - seen_names)
            seen_names |= names
            run.peak_rate = peak_rate(run.log)
            run.bound = in_flight + pipeline + math.ceil(commit_s * run.peak_rate) + in_flight
            runs.append(run)
            print(
                f"  run {i:>2}: {'killed' if run.killed else f'exit {run.rc}'} after {run.wall_s:6.1f} s, "
                f"{len(run.pages()):>7,} pages fetched, saved counter {run.settled_total:>7,}, "
                f"RSS {run.crawler_hwm_mb:.0f} MB (WARC child {run.child_hwm_mb:.0f} MB)",
                flush=True,
            )
            if not run.killed:
                break
        return check(args, site, crawl_dir, runs, work)
    finally:
        if nginx is not None:
            nginx.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def check(
    args: argparse.Namespace, site: SiteInfo, crawl_dir: Path, runs: list[Run], work: Path
) -> int:
    failures: list[str] = []
    out = crawl_dir / "out"
    warc_dir = out / "warc"
    last = runs[-1]
    kills = sum(r.killed for r in runs)
    if kills != args.kills:
        failures.append(
            f"{kills} kills of {args.kills}: the crawl ended before the kill point {runs[-1].target}"
        )
    if last.killed or last.rc != 0:
        output = (crawl_dir / f"output-{last.index}.txt").read_text(errors="replace")
        failures.append(
            f"run {last.index}: exit status {last.rc}; the end of its output:\n{output[-1500:]}"
        )
    # pages, from nginx's log
    per_run = [r.pages() for r in runs]
    nginx_count = Counter(k for keys in per_run for k in keys)
    dups, within = duplicates_per_run(per_run)
    for r, d in zip(runs, dups, strict=True):
        r.dup_nginx = d
    missing = site.expected - nginx_count.keys()
    unknown = nginx_count.keys() - site.expected
    if missing:
        failures.append(f"nginx: {len(missing)} pages never fetched, e.g. {sorted(missing)[:3]}")
    if unknown:
        failures.append(
            f"nginx: {len(unknown)} unknown URIs answered 200, e.g. {sorted(unknown)[:3]}"
        )
    if within:
        failures.append(f"nginx: {within} fetches of a page already fetched in the same run")
    statuses = sorted({e.status for r in runs for e in r.log} - {200, 404})
    if statuses:
        failures.append(f"nginx: unexpected statuses {statuses}")
    # pages, from the WARC files
    t0 = time.perf_counter()
    all_files = sorted(warc_dir.iterdir()) if warc_dir.exists() else []
    open_files = [p.name for p in all_files if p.name.endswith(".open")]
    if open_files:
        failures.append(f"WARC files left open: {open_files}")
    per_run_warc: list[list[Key]] = []
    for r in runs:
        keys: list[Key] = []
        for name in r.warc_files:
            path = warc_dir / name
            if not path.exists():
                path = warc_dir / f"{name}.open"  # not recovered: the next run failed first
            try:
                keys.extend(warc_responses(path))
            except Exception as exc:  # a damaged file: a check failure, not a soak crash
                failures.append(f"WARC: {path.name} unreadable: {exc!r}")
        per_run_warc.append(keys)
    warc_count = Counter(k for keys in per_run_warc for k in keys)
    wdups, wwithin = duplicates_per_run(per_run_warc)
    for r, d in zip(runs, wdups, strict=True):
        r.dup_warc = d
    wmissing = site.expected - warc_count.keys()
    if wmissing:
        failures.append(
            f"WARC: {len(wmissing)} pages without a response record, e.g. {sorted(wmissing)[:3]}"
        )
    if wwithin:
        failures.append(
            f"WARC: {wwithin} response records of a page already archived in the same run"
        )
    over = [k for k, n in warc_count.items() if n > nginx_count.get(k, 0)]
    if over:
        failures.append(
            f"WARC: {len(over)} pages with more response records than fetches, e.g. {over[:3]}"
        )
    read_s = time.perf_counter() - t0
    # warcio check
    t0 = time.perf_counter()
    warcio = Path(sys.executable).with_name("warcio")
    closed = [str(p) for p in all_files if p.name.endswith(".warc.gz")]
    if not closed:
        failures.append("warcio check: no closed WARC file to check")
    else:
        wc = subprocess.run([str(warcio), "check", *closed], capture_output=True, text=True)
        if wc.returncode != 0:
            failures.append(
                f"warcio check: exit {wc.returncode} on {len(closed)} files: {(wc.stdout + wc.stderr)[-1500:]}"
            )
    check_s = time.perf_counter() - t0
    warc_bytes = sum(p.stat().st_size for p in all_files)
    # the report
    report: dict[str, object] = {}
    try:
        report = json.loads((out / "report.json").read_text())
    except (OSError, ValueError) as exc:
        failures.append(f"report.json unreadable: {exc!r}")
    pages, broken = len(site.expected), len(site.broken)
    expected = {
        "fetched": pages,
        "not_found_404": broken,
        "http_errors": broken,
        "robots_txt_fetches": site.hosts,
        "timeouts": 0,
        "other_errors": 0,
        "too_many_redirects": 0,
        "robots_denied": 0,
        "robots_unavailable": 0,
        "redirects": 0,
        "complete": True,
    }
    for key, want in expected.items():
        if report and report.get(key) != want:
            failures.append(f"report.json: {key} = {report.get(key)!r}, expected {want!r}")
    classes = report.get("status_classes") if report else None
    if report and classes != {"1xx": 0, "2xx": pages, "3xx": 0, "4xx": broken, "5xx": 0}:
        failures.append(
            f"report.json: status_classes = {classes}, expected 2xx {pages}, 4xx {broken}"
        )
    size_404 = max((e.bytes for r in runs for e in r.log if e.status == 404), default=0)
    want_bytes = site.total_bytes + broken * size_404 + site.hosts * len(ROBOTS)
    if report and report.get("bytes") != want_bytes:
        failures.append(
            f"report.json: bytes = {report.get('bytes')}, expected {want_bytes} (pages + 404 bodies + robots.txt)"
        )
    if report and report.get("warnings"):
        failures.append(f"report.json: warnings {report.get('warnings')}")
    # the crawl log
    fetched_lines: Counter[Key] = Counter()
    if not (out / "crawl.jsonl").exists():
        failures.append("crawl.jsonl: missing (did the first run start at all?)")
    with contextlib.suppress(FileNotFoundError), (out / "crawl.jsonl").open("rb") as f:
        for line in f:
            entry = json.loads(line)
            if entry.get("outcome") == "fetched":
                u = urlsplit(entry["url"])
                fetched_lines[(u.hostname or "", u.path + (f"?{u.query}" if u.query else ""))] += 1
    if site.expected - fetched_lines.keys():
        failures.append(
            f"crawl.jsonl: {len(site.expected - fetched_lines.keys())} pages without a fetched line"
        )
    # per-kill duplicates against their bound
    for r in runs:
        if r.dup_nginx > r.bound or r.dup_warc > r.bound:
            failures.append(
                f"run {r.index}: {r.dup_nginx} duplicate fetches ({r.dup_warc} in WARC) > bound {r.bound}"
            )

    print(
        f"\nsoak: {args.pages:,} pages, {args.hosts} hosts, {args.kills} kills, seed {args.seed}; "
        f"{pages:,} reachable pages, {broken} 404 links; WARC {len(all_files)} files, {warc_bytes / 2**20:,.0f} MiB "
        f"(read in {read_s:.0f} s, warcio check {check_s:.0f} s)"
    )
    head = (
        f"{'run':>3} {'end':>7} {'wall s':>7} {'kill at':>8} {'fetched':>8} {'settled':>8} {'unsettled':>9} "
        f"{'dup nginx':>9} {'dup WARC':>8} {'bound':>6} {'peak/s':>6} {'RSS MB':>6} {'WARC child MB':>13}"
    )
    print(head)
    print("-" * len(head))
    before = 0
    for r in runs:
        fetched = len(r.pages())
        settled = r.settled_total - before
        before = r.settled_total
        print(
            f"{r.index:>3} {'kill' if r.killed else f'exit {r.rc}':>7} {r.wall_s:>7.1f} "
            f"{r.target if r.target is not None else '-':>8} {fetched:>8,} {settled:>8,} {fetched - settled:>9,} "
            f"{r.dup_nginx:>9,} {r.dup_warc:>8,} {r.bound:>6,} {r.peak_rate:>6.0f} {r.crawler_hwm_mb:>6.0f} {r.child_hwm_mb:>13.0f}"
        )
    extra_nginx = sum(nginx_count.values()) - len(nginx_count)
    extra_warc = sum(warc_count.values()) - len(warc_count)
    extra_lines = sum(fetched_lines.values()) - len(fetched_lines)
    robots = sum(1 for r in runs for e in r.log if e.uri == "/robots.txt")
    print(
        f"totals: {sum(nginx_count.values()):,} page fetches for {len(nginx_count):,} pages "
        f"({extra_nginx:,} duplicates; WARC {extra_warc:,}, crawl log {extra_lines:,}), "
        f"robots.txt requests {robots}, total wall {sum(r.wall_s for r in runs):.0f} s"
    )
    if report:
        print(
            "report.json: "
            + ", ".join(
                f"{k} {report.get(k)}"
                for k in (
                    "fetched",
                    "not_found_404",
                    "robots_txt_fetches",
                    "bytes",
                    "complete",
                    "elapsed_s",
                )
            )
        )
    for msg in failures:
        print(f"FAIL {msg}")
    print(
        "all checks passed"
        if not failures
        else f"{len(failures)} check(s) failed (work dir {work})"
    )
    if failures and not args.keep:
        print("(rerun with --keep to keep the work dir)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
