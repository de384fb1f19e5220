"""A crawl of the web in a box (bench/webbox/), sampled every 10 s: the large-crawl harness.

    .venv/bin/python bench/webbox_run.py --hosts 10000 --duration 120          # a quick check
    .venv/bin/python bench/webbox_run.py --hosts 1000000 --duration 7200 --processes 2 \\
        --kill-at 0.7 --profile-at 0.2,0.9 --work-dir /var/tmp/webbox-1e6     # the big run
    .venv/bin/python bench/webbox_run.py --proxy --hosts 1000000 --duration 600  # no DNS

Run as root. Not run by CI. By default everything runs in private network and mount
namespaces (bench/webbox/netns.py): the generator (bench/webbox/server.py) listens on
0.0.0.0:80 there, every generated host's address (198.18.0.0/15) is local, and the name
server (bench/webbox/dns.py) on 127.0.0.1:53 is the only one the namespace's resolv.conf
names, so the crawler resolves every host name through it and no query leaves the machine.
``--proxy`` instead runs on the machine's loopback with ``fetch.proxy`` set to the generator
(absolute-form requests, no DNS at all; a name that would fail DNS is a 502/504).

**The crawl**: ``frontier-crawl --config crawl.toml`` with the defaults (WARC on, default
durability, default politeness, robots.txt obeyed, concurrency 256) except: ``crawl.seeds``
(the ``/`` of the first ``--seeds`` hosts that resolve and answer at once), ``crawl.output_dir``, ``scope.allow_domains =
["test"]`` (every generated host; the default is the seeds' hosts only), ``workers.processes``
(``--processes``), ``control.listen = "127.0.0.1:0"`` (the status API the sampler reads),
``fetch.proxy`` with ``--proxy``, and every ``--set section.key=VALUE`` (TOML values).
The crawl runs until it ends by itself or ``--duration`` s have passed (then SIGTERM: a
graceful stop).

**Samples** (``samples.jsonl``, every ``--interval`` s): pages, pages/s, queued URLs, hosts
with queued URLs and by state, URLs admitted, requests, hosts retired, DNS seconds (metrics), the crawl log's outcomes and DNS failures (lines with ``"error":"dns-error"``, counted
by tailing ``crawl.jsonl``), the name server's queries, answers, NXDOMAINs and dropped
queries, CPU seconds and RssAnon of every process of the crawl (from /proc), the generator's
and name server's CPU, disk bytes of the output (frontier, WARC, logs, other), the load
average. At the end: a per-decile table (by time) of pages/s, crawler CPU ms per page (and per
request the generator answered: robots.txt, redirects and errors included), RssAnon
(the largest process and the sum) and disk bytes per page, and ``summary.json``.

**--kill-at F**: at F x ``--duration`` the crawl's main process is killed (SIGKILL) and the
same command started at once. Recorded: the time from the restart to the first new page
request the generator logs (robots.txt excluded), the CPU seconds and the peak RssAnon (the
sum over the new crawl's processes and the largest one) until then (sampled every 0.1 s),
beside the running crawl's RssAnon just before the kill, and, from the generator's own
log, every URL fetched more than once (final answers; retried 429/5xx/resets not counted).

**--profile-at F1,F2**: ``py-spy record --subprocesses`` of the crawl for ``--profile-s`` s at
those fractions of ``--duration`` (``profile-<F>.txt``: collapsed stacks, for flamegraph.pl or
``bench/webbox_run.py --top profile-<F>.txt``, which prints the functions with most samples).
``--profile-reopen S`` with ``--kill-at``: the same of the restarted crawl's first S s
(``profile-reopen.txt``), and the reopen's CPU by process in ``summary.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.webbox import access, netns  # noqa: E402
from bench.webbox.server import web_from_json  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- /proc -----------------------------------------------------------------------------------


def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def tree(pid: int, kids: dict[int, list[int]]) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, ()))
    return out


def proc_sample(pid: int) -> dict[str, Any] | None:
    """CPU seconds (user + system) and RssAnon (bytes) of one process, its name."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
    rss = 0
    for line in status.splitlines():
        if line.startswith("RssAnon:"):
            rss = int(line.split()[1]) * 1024
            break
    name = " ".join(c.decode(errors="replace") for c in cmd[:6] if c)[-80:]
    return {"pid": pid, "cpu_s": cpu, "rss_anon": rss, "cmd": name}


def disk_usage(out: Path) -> dict[str, int]:
    sizes = {"frontier": 0, "warc": 0, "logs": 0, "other": 0}
    for dirpath, _dirs, files in os.walk(out):
        for name in files:
            try:
                size = os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
            if ".warc" in name:
                sizes["warc"] += size
            elif name.endswith((".mdb", ".bloom")) or "frontier" in dirpath or "seen" in name:
                sizes["frontier"] += size
            elif name.endswith((".jsonl", ".log")):
                sizes["logs"] += size
            else:
                sizes["other"] += size
    return sizes


class LogTail:
    """Counts lines and DNS failures of the crawl logs (``crawl*.jsonl``) as they grow."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.offsets: dict[Path, int] = {}
        self.lines = 0
        self.dns_errors = 0

    def poll(self) -> None:
        for path in self.out.rglob("crawl*.jsonl"):
            start = self.offsets.get(path, 0)
            try:
                with path.open("rb") as f:
                    f.seek(start)
                    chunk = f.read()
            except OSError:
                continue
            cut = chunk.rfind(b"\n") + 1
            chunk = chunk[:cut]
            self.offsets[path] = start + cut
            self.lines += chunk.count(b"\n")
            self.dns_errors += chunk.count(b'"error":"dns-error"')


# -- the crawl's status API --------------------------------------------------------------------


def api_get(out: Path, path: str) -> bytes | None:
    try:
        addr = (out / "control.addr").read_text().strip()
        token = (out / "control.token").read_text().strip()
    except OSError:
        return None
    req = urllib.request.Request(f"http://{addr}{path}", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            body: bytes = r.read()
            return body
    except OSError:
        return None


#: Prometheus series summed over the workers: (metric name, label filter or "")
METRICS = {
    "dns_seconds": ("frontier_crawl_dns_seconds_total", ""),
    "admitted": ("frontier_crawl_admitted_urls_total", ""),
    "requests": ("frontier_crawl_requests_total", ""),
    "hosts_retired": ("frontier_crawl_hosts", 'state="retired"'),
}


def read_metrics(metrics: bytes | None) -> dict[str, float]:
    out = dict.fromkeys(METRICS, 0.0)
    for line in (metrics or b"").decode().splitlines():
        for key, (name, label) in METRICS.items():
            if line.startswith(name) and (line[len(name)] in " {") and label in line:
                out[key] += float(line.rsplit(" ", 1)[1])
    return out


# -- the run -------------------------------------------------------------------------------------


def toml_value(v: Any) -> str:
    return json.dumps(v)


def write_config(args: argparse.Namespace, work: Path, proxy: str | None) -> Path:
    out = work / "crawl"
    web = web_from_json(json.dumps({"seed": args.seed, "hosts": args.hosts, **json.loads(args.web)}))
    quick = (i for i in range(args.hosts) if web.host_info(i).kind == "ok" and web.host_info(i).dns == "ok")
    seeds = [f"http://{web.name(i)}/" for _, i in zip(range(args.seeds), quick, strict=False)]
    sections: dict[str, dict[str, str]] = {
        "crawl": {"seeds": toml_value(seeds), "output_dir": toml_value(str(out))},
        "scope": {"allow_domains": toml_value(["test"])},  # the whole generated web
        "workers": {"processes": str(args.processes)},
        "control": {"listen": toml_value("127.0.0.1:0")},
    }
    if proxy:
        sections.setdefault("fetch", {})["proxy"] = toml_value(proxy)
    for item in args.set:
        key, _, value = item.partition("=")
        section, _, name = key.partition(".")
        sections.setdefault(section, {})[name] = value
    text = "".join(
        f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items()) + "\n" for s, keys in sections.items()
    )
    path = work / "crawl.toml"
    path.write_text(text)
    return path


def start_json_child(cmd: list[str], log: Path) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"{cmd[2]} did not start: {log.read_text()[-2000:]}")
    return proc, json.loads(line)


class Run:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.logs = work / "generator"
        self.out = work / "crawl"
        self.samples_path = work / "samples.jsonl"
        self.web = json.dumps({"seed": args.seed, "hosts": args.hosts, **json.loads(args.web)})
        self.dns: subprocess.Popen[str] | None = None
        self.crawl: subprocess.Popen[bytes] | None = None
        self.kill: dict[str, Any] = {}
        self.profiles: list[str] = []
        self.profilers: list[subprocess.Popen[bytes]] = []
        self.cpu_before = 0.0  # CPU seconds of the crawls killed before this one

    def start_services(self) -> str | None:
        """The name server and the generator; the proxy URL in proxy mode."""
        a = self.args
        if not a.proxy:
            self.dns, _ = start_json_child(
                [sys.executable, "-m", "bench.webbox.dns", "--web", self.web, "--listen", "127.0.0.1:53",
                 "--stats", str(self.work / "dns-stats.json")], self.work / "dns.err")  # fmt: skip
        listen = "127.0.0.1:0" if a.proxy else "0.0.0.0:80"
        cmd = [sys.executable, "-m", "bench.webbox.server", "--web", self.web, "--listen", listen,
               "--procs", str(a.generator_procs), "--log-dir", str(self.logs)]  # fmt: skip
        if a.proxy:
            cmd.append("--proxy")
        self.gen, info = start_json_child(cmd, self.work / "generator.err")
        self.gen_pids = [self.gen.pid, *info["pids"]]
        return f"http://127.0.0.1:{info['port']}" if a.proxy else None

    def crawl_cmd(self) -> list[str]:
        return [sys.executable, "-m", "frontier_crawl.cli", "--config", str(self.work / "crawl.toml")]

    def start_crawl(self, n: int) -> None:
        self.crawl = subprocess.Popen(
            self.crawl_cmd(), cwd=self.work, stdout=(self.work / f"crawl-{n}.out").open("w"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip

    def sample(self, t0: float, tail: LogTail) -> dict[str, Any]:
        assert self.crawl is not None
        kids = children_map()
        procs = [p for p in (proc_sample(pid) for pid in tree(self.crawl.pid, kids)) if p]
        gen = [p for p in (proc_sample(pid) for pid in self.gen_pids) if p]
        dns = proc_sample(self.dns.pid) if self.dns else None
        t_status = time.perf_counter()
        status_raw = api_get(self.out, "/api/status")
        status_ms = 1000 * (time.perf_counter() - t_status)
        status = json.loads(status_raw) if status_raw else {}
        tail.poll()
        try:
            dns_stats = json.loads((self.work / "dns-stats.json").read_text())
        except (OSError, ValueError):
            dns_stats = {}
        gen_stats = generator_totals(self.logs)
        hosts = status.get("hosts") or {}
        return {
            "t": round(time.monotonic() - t0, 3),
            "pages": status.get("pages"),
            "pages_per_s": status.get("pages_per_s"),
            "queued": status.get("queued"),
            "queued_disk": status.get("queued_disk"),
            "hosts": hosts.get("total"),  # hosts with queued URLs
            "hosts_by_state": hosts,
            "outcomes": status.get("outcomes"),
            "bottleneck": (status.get("bottleneck") or {}).get("name"),
            "log_lines": tail.lines,
            "dns_errors": tail.dns_errors,
            "metrics": read_metrics(api_get(self.out, "/metrics")),
            "dns_server": dns_stats,
            "procs": procs,
            "crawl_cpu_s": self.cpu_before + sum(p["cpu_s"] for p in procs),
            "crawl_rss_anon": sum(p["rss_anon"] for p in procs),
            "generator": {**gen_stats, "cpu_s_proc": sum(p["cpu_s"] for p in gen)},
            "dns_cpu_s": dns["cpu_s"] if dns else None,
            "disk": disk_usage(self.out),
            "load": os.getloadavg(),
            "status_ms": round(status_ms, 2),  # GET /api/status, answered
            "tcp_active_opens": tcp_active_opens(),  # this namespace's new TCP connections
        }

    def run(self) -> dict[str, Any]:
        a = self.args
        proxy = self.start_services()
        write_config(a, self.work, proxy)
        t0 = time.monotonic()
        self.start_crawl(0)
        tail = LogTail(self.out)
        kill_at = a.kill_at * a.duration if a.kill_at else None
        profile_at = sorted(float(f) * a.duration for f in a.profile_at.split(",") if f) if a.profile_at else []
        samples = []
        next_sample = t0
        with self.samples_path.open("w") as f:
            while True:
                now = time.monotonic()
                if now >= next_sample:
                    s = self.sample(t0, tail)
                    samples.append(s)
                    f.write(json.dumps(s) + "\n")
                    f.flush()
                    next_sample += a.interval
                    print(f"t={s['t']:7.1f} pages={s['pages']} queued={s['queued']} hosts={s['hosts']} "
                          f"adm={s['metrics']['admitted']:.0f} crawl_cpu={s['crawl_cpu_s']:.1f}s rss={s['crawl_rss_anon'] >> 20}MiB "
                          f"gen_cpu={s['generator']['cpu_s']:.1f}s dns_q={s['dns_server'].get('queries')} "
                          f"load={s['load'][0]:.1f} {s['bottleneck']}", flush=True)  # fmt: skip
                assert self.crawl is not None
                if self.crawl.poll() is not None:
                    break
                elapsed = now - t0
                if kill_at is not None and elapsed >= kill_at:
                    kill_at = None
                    self.kill_and_restart(t0)
                    continue
                if profile_at and elapsed >= profile_at[0]:
                    self.profile(profile_at.pop(0) / a.duration)
                if a.duration and elapsed >= a.duration:
                    self.crawl.send_signal(signal.SIGTERM)
                    try:
                        self.crawl.wait(a.stop_timeout)
                    except subprocess.TimeoutExpired:
                        self.crawl.kill()
                    break
                time.sleep(min(0.2, max(0.0, next_sample - time.monotonic())))
            wall = time.monotonic() - t0
            samples.append(last := self.sample(t0, tail))
            f.write(json.dumps(last) + "\n")
        return {"wall_s": wall, "exit": self.crawl.returncode, "samples": samples}

    def profile(self, fraction: float) -> None:
        """py-spy in the background (collapsed stacks, ``profile-<F>.txt``)."""
        self.profile_pid(f"{fraction:.2f}", self.args.profile_s)

    def profile_pid(self, label: str, seconds: int) -> None:
        assert self.crawl is not None
        pyspy = Path(sys.executable).parent / "py-spy"
        path = self.work / f"profile-{label}.txt"
        cmd = [str(pyspy) if pyspy.exists() else "py-spy", "record", "--subprocesses", "--nonblocking",
               "-p", str(self.crawl.pid), "-d", str(seconds), "-f", "raw", "-o", str(path)]  # fmt: skip
        self.profilers.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.profiles.append(str(path))

    def kill_and_restart(self, t0: float) -> None:
        assert self.crawl is not None
        before = self.sample(t0, LogTail(self.out))
        os.kill(self.crawl.pid, signal.SIGKILL)
        self.crawl.wait()
        self.cpu_before = before["crawl_cpu_s"]
        killed_at = time.time()
        self.start_crawl(1)
        restarted_at = time.time()
        if self.args.profile_reopen:
            self.profile_pid("reopen", self.args.profile_reopen)
        reopen_samples: list[tuple[float, float, int, int]] = []
        reopen_procs: list[dict[str, Any]] = []
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and self.crawl.poll() is None:
            kids = children_map()
            procs = [p for p in (proc_sample(pid) for pid in tree(self.crawl.pid, kids)) if p]
            cpu = sum(p["cpu_s"] for p in procs)
            rss = sum(p["rss_anon"] for p in procs)
            largest = max((p["rss_anon"] for p in procs), default=0)
            reopen_samples.append((time.time(), cpu, rss, largest))
            reopen_procs = procs
            if first_page_after(self.logs, restarted_at) is not None:
                break
            time.sleep(0.1)
        self.kill = {
            "killed_at": killed_at, "restarted_at": restarted_at, "reopen_samples": reopen_samples,
            "reopen_procs": reopen_procs,
            "running_peak_rss_anon": max(p["rss_anon"] for p in before["procs"]),
            "running_rss_anon_sum": before["crawl_rss_anon"],
        }  # fmt: skip

    def stop_services(self) -> None:
        for proc in (self.gen, self.dns):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()


def generator_totals(logs: Path) -> dict[str, Any]:
    """The generator children's own counts: responses, body bytes, CPU seconds."""
    totals: dict[str, Any] = {"responses": 0, "bytes": 0, "cpu_s": 0.0}
    for path in logs.glob("stats-*.json"):
        try:
            s = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        totals["responses"] += s["responses"]
        totals["bytes"] += s["bytes"]
        totals["cpu_s"] += s["user_s"] + s["sys_s"]
    return totals


def first_page_after(logs: Path, t: float) -> float | None:
    """The time of the first request after ``t`` in the generator's logs (robots.txt aside)."""
    first = None
    for path in logs.glob("requests-*.log"):
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - (1 << 20)))
            for line in f:
                parts = line.split(b"\t")
                if len(parts) < 5 or parts[2] == b"/robots.txt":
                    continue
                try:
                    ts = float(parts[0])
                except ValueError:
                    continue
                if ts > t and (first is None or ts < first):
                    first = ts
    return first


# -- the report ----------------------------------------------------------------------------------


def tcp_active_opens() -> int | None:
    """TCP connections opened from this network namespace so far (``/proc/net/snmp``): with
    the crawl the only client in it, new connections per request is this over requests."""
    try:
        lines = [ln.split() for ln in Path("/proc/self/net/snmp").read_text().splitlines()
                 if ln.startswith("Tcp:")]  # fmt: skip
        return int(lines[1][lines[0].index("ActiveOpens")])
    except (OSError, IndexError, ValueError):
        return None


def decile_table(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    good = [s for s in samples if s.get("pages") is not None]
    if len(good) < 2:
        return []
    t_end = good[-1]["t"]
    rows = []
    for d in range(10):
        lo, hi = t_end * d / 10, t_end * (d + 1) / 10
        inside = [s for s in good if lo <= s["t"] <= hi]
        before = [s for s in good if s["t"] <= lo]
        first = before[-1] if before else good[0]
        if not inside:
            continue
        last = inside[-1]
        dt = last["t"] - first["t"]
        dp = (last["pages"] or 0) - (first["pages"] or 0)
        dcpu = last["crawl_cpu_s"] - first["crawl_cpu_s"]
        dgen = last["generator"]["cpu_s"] - first["generator"]["cpu_s"]
        dreq = last["generator"]["responses"] - first["generator"]["responses"]
        disk = sum(last["disk"].values())
        rows.append({
            "decile": d + 1, "t_end": last["t"], "pages": last["pages"],
            "pages_per_s": dp / dt if dt > 0 else 0.0,
            "cpu_ms_per_page": 1000 * dcpu / dp if dp > 0 else None,
            "cpu_ms_per_request": 1000 * dcpu / dreq if dreq > 0 else None,
            "generator_cpu_ms_per_page": 1000 * dgen / dp if dp > 0 else None,
            "rss_anon_max_mib": max(max((p["rss_anon"] for p in s["procs"]), default=0) for s in inside) / 2**20,
            "rss_anon_sum_mib": max(s["crawl_rss_anon"] for s in inside) / 2**20,
            "disk_bytes_per_page": disk / last["pages"] if last["pages"] else None,
            "queued": last["queued"], "hosts": last["hosts"], "load1": last["load"][0],
        })  # fmt: skip
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'decile':>6} {'t_end s':>8} {'pages':>9} {'pages/s':>8} {'CPU ms/pg':>9} {'ms/req':>6} {'gen ms/pg':>9} "
          f"{'RssAnon max':>11} {'RssAnon sum':>11} {'disk B/pg':>9} {'queued':>10} {'hosts':>9} {'load1':>5}")  # fmt: skip

    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    for r in rows:
        print(f"{r['decile']:>6} {r['t_end']:>8.0f} {r['pages'] or 0:>9} {r['pages_per_s']:>8.1f} "
              f"{num(r['cpu_ms_per_page'], '.3f'):>9} {num(r['cpu_ms_per_request'], '.3f'):>6} {num(r['generator_cpu_ms_per_page'], '.3f'):>9} "
              f"{r['rss_anon_max_mib']:>9.0f}Mi {r['rss_anon_sum_mib']:>9.0f}Mi "
              f"{num(r['disk_bytes_per_page'], '.0f'):>9} {r['queued'] or 0:>10} {r['hosts'] or 0:>9} "
              f"{r['load1']:>5.1f}")  # fmt: skip


def kill_report(kill: dict[str, Any], logs: Path, dupes: dict[tuple[str, str], list[float]]) -> dict[str, Any]:
    restarted, killed = kill["restarted_at"], kill["killed_at"]
    first = access.first_request_after(logs, restarted)
    samples = kill["reopen_samples"]
    upto = [s for s in samples if first is None or s[0] <= first] or samples[:1]
    across = sorted(url for url, times in dupes.items() if min(times) <= killed < max(times))
    return {
        "first_page_s": None if first is None else first - restarted,
        "reopen_cpu_s": upto[-1][1] if upto else None,
        "reopen_peak_rss_anon_sum_mib": max((s[2] for s in upto), default=0) / 2**20,
        "reopen_peak_rss_anon_max_mib": max((s[3] for s in upto), default=0) / 2**20,
        "running_rss_anon_max_mib": kill["running_peak_rss_anon"] / 2**20,
        "running_rss_anon_sum_mib": kill["running_rss_anon_sum"] / 2**20,
        "reopen_cpu_by_process": [(p["cmd"], p["cpu_s"]) for p in kill.get("reopen_procs", [])],
        "refetched_across_kill": len(across),
        "refetched_examples": [f"http://{h}{t}" for h, t in across[:10]],
    }


def inner(args: argparse.Namespace) -> int:
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="webbox-run-"))
    work.mkdir(parents=True, exist_ok=True)
    if not args.proxy:
        netns.setup_inside()
    run = Run(args, work)
    try:
        result = run.run()
    finally:
        if run.crawl is not None and run.crawl.poll() is None:
            run.crawl.kill()
        run.stop_services()
    dupes = access.duplicate_times(run.logs, work)
    rows = decile_table(result["samples"])
    print(f"\nwork dir {work}; crawl exit {result['exit']}; wall {result['wall_s']:.0f} s")
    print_table(rows)
    last = result["samples"][-1]
    gen = generator_totals(run.logs)  # written by each child as it stopped
    served = gen["responses"]
    summary: dict[str, Any] = {
        "args": vars(args), "wall_s": result["wall_s"], "exit": result["exit"], "deciles": rows,
        "generator_requests": served, "fetched_more_than_once": len(dupes),
        "duplicate_examples": [f"http://{h}{t} x{len(n)}" for (h, t), n in list(dupes.items())[:10]],
        "generator_cpu_ms_per_response": 1000 * gen["cpu_s"] / served if served else None,
        "dns_server": last["dns_server"], "dns_server_cpu_s": last["dns_cpu_s"], "disk": last["disk"],
        "profiles": run.profiles,
    }  # fmt: skip
    if run.kill:
        summary["kill"] = kill_report(run.kill, run.logs, dupes)
    print(json.dumps({k: v for k, v in summary.items() if k not in ("deciles", "args")}, indent=1))
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


def top(path: Path, n: int = 25) -> None:
    """The functions with most samples in a collapsed-stack profile: self and total."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames, k = stack.split(";"), int(count)
        samples += k
        own[frames[-1]] = own.get(frames[-1], 0) + k
        for frame in set(frames):
            total[frame] = total.get(frame, 0) + k
    print(f"{samples} samples; self %, total %, function")
    for frame, k in sorted(own.items(), key=lambda kv: -kv[1])[:n]:
        print(f"{100 * k / samples:5.1f} {100 * total[frame] / samples:5.1f}  {frame[:150]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--web", default="{}", help="more model.Web parameters, JSON (alpha, max_pages, shares)")
    ap.add_argument("--seeds", type=int, default=100, help="seed URLs: the / of the first N hosts that resolve and answer")
    ap.add_argument("--processes", type=int, default=1, help="workers.processes")
    ap.add_argument("--generator-procs", type=int, default=1)
    ap.add_argument("--duration", type=float, default=300.0, help="stop the crawl (SIGTERM) after this many s; 0: let it end")
    ap.add_argument("--stop-timeout", type=float, default=120.0)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--kill-at", type=float, default=0.0)
    ap.add_argument("--profile-at", default="")
    ap.add_argument("--profile-s", type=int, default=30)
    ap.add_argument("--profile-reopen", type=int, default=0,
                    help="with --kill-at: py-spy the restarted crawl for this many s (profile-reopen.txt)")
    ap.add_argument("--proxy", action="store_true")
    ap.add_argument("--set", action="append", default=[], help="section.key=TOML value, e.g. politeness.min_delay_s=0.1")
    ap.add_argument("--resolv-options", default="", help="resolv.conf options line in the namespace (default: none)")
    ap.add_argument("--work-dir", default="")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--top", type=Path, help="print a profile's functions with most samples, and exit")
    args = ap.parse_args()
    if args.top:
        top(args.top)
        return 0
    if args.inside or args.proxy:
        return inner(args)
    why = netns.unavailable()
    if why:
        raise SystemExit(f"cannot make the network namespace ({why}); --proxy runs without it")
    return netns.run_in_namespace([sys.executable, str(Path(__file__).resolve()), *sys.argv[1:], "--inside"],
                                  args.resolv_options)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
