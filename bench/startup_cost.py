"""What a crawl costs before its first page and after its last: the real ``frontier-crawl``
command on a 2-URL loopback site whose every answer is a 404 (robots.txt too), so nearly all of
the run is start and stop.

Configurations: 1 and 2 worker processes, WARC on and off; each run from this tree and (with
``--baseline DIR``) from another tree of the code, alternated, ``--reps`` times. The figure is
the CPU (user + system) of the crawl's whole process tree, from ``wait4`` of the command (a
process's usage includes its waited-for children: workers, the WARC writer, multiprocessing's
resource tracker). Medians are printed with the load average seen before each run.

    .venv/bin/python bench/startup_cost.py --baseline DIR --reps 5
    .venv/bin/python bench/startup_cost.py --configs n1-off,n2-on --reps 9
    .venv/bin/python bench/startup_cost.py --tree DIR2 --baseline DIR --reps 5  # two copies

``--per-process`` also splits it by process: a ``sitecustomize`` put first on the path of
every run appends, at each Python process's exit, its own CPU (``RUSAGE_SELF``) and module
count, as the main process (coordinator, or the one process), a worker, or multiprocessing's
resource tracker; "rest" is the tree's total less the main process and the workers: what
runs after the hook (each interpreter's teardown), the WARC writers (run with ``-S``, so
without the hook) and ``sh`` wrappers. The resource tracker is not in the tree's total: it
outlives the main process (which never waits for it), so ``wait4`` does not count it.

Compile both trees first (``python -m compileall -q frontier_crawl DIR/frontier_crawl``): this
machine sets ``PYTHONDONTWRITEBYTECODE=1``, so an uncompiled tree recompiles at every start.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CONFIGS = {  # name: (processes, warc)
    "n1-off": (1, False),
    "n1-on": (1, True),
    "n2-off": (2, False),
    "n2-on": (2, True),
}


class _NotFound(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"not here\n"
        self.send_response(404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@contextmanager
def serve_404() -> Iterator[int]:
    """A loopback HTTP server on a free port answering 404 to everything; yields the port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def write_config(run_dir: Path, port: int, processes: int, warc: bool) -> Path:
    seeds = [f"http://127.0.0.1:{port}/a", f"http://127.0.0.1:{port}/b"]
    text = f"""[crawl]
seeds = {json.dumps(seeds)}
output_dir = "out"

[output]
warc = {"true" if warc else "false"}
progress_interval_s = 0

[workers]
processes = {processes}
"""
    path = run_dir / "crawl.toml"
    path.write_text(text)
    return path


def fc_binary() -> str:
    local = Path(sys.executable).with_name("frontier-crawl")
    return str(local) if local.exists() else (shutil.which("frontier-crawl") or "frontier-crawl")


_HOOK = """
import atexit, os, sys


def _startup_cost_log():
    import resource
    mp = sys.modules.get("multiprocessing.process")
    if mp is not None and getattr(mp, "_parent_process", None) is not None:
        role = "worker"
    elif sys.argv == ["-c"]:
        role = "tracker"
    else:
        role = "main"
    r = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.path.join(os.environ["STARTUP_COST_LOG"], str(os.getpid())), "w") as f:
        f.write(f"{role} {r.ru_utime + r.ru_stime:.4f} {len(sys.modules)}\\n")


if os.environ.get("STARTUP_COST_LOG"):
    atexit.register(_startup_cost_log)
"""


@dataclass
class Sample:
    cpu_s: float
    user_s: float
    sys_s: float
    load1: float
    #: role -> (CPU s, modules) of each process seen (``--per-process``)
    parts: dict[str, list[tuple[float, int]]] = field(default_factory=dict)


@dataclass
class Series:
    config: str
    tree: str
    samples: list[Sample] = field(default_factory=list)


def run_once(
    work: Path, port: int, config: str, code: Path | None, hook: Path | None = None
) -> Sample:
    """One crawl from ``code`` (None: the installed tree); its process tree's CPU (and with
    ``hook``, a directory holding the ``sitecustomize``, each process's)."""
    processes, warc = CONFIGS[config]
    run_dir = Path(tempfile.mkdtemp(prefix=f"{config}-", dir=work))
    conf = write_config(run_dir, port, processes, warc)
    env = dict(os.environ)
    path = [str(p) for p in (hook, code) if p is not None]
    if path:
        env["PYTHONPATH"] = os.pathsep.join(path)
    log = run_dir / "processes"
    if hook is not None:
        log.mkdir()
        env["STARTUP_COST_LOG"] = str(log)
    load1 = os.getloadavg()[0]
    with (run_dir / "output.txt").open("wb") as out:
        proc = subprocess.Popen(
            [fc_binary(), "--config", str(conf)],
            cwd=run_dir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
        _, status, usage = os.wait4(proc.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        tail = (run_dir / "output.txt").read_text(errors="replace")[-2000:]
        raise SystemExit(f"{config} ({code or 'this tree'}): exit status {rc}\n{tail}")
    report = json.loads((run_dir / "out" / "report.json").read_text())
    if report.get("not_found_404") != 2 or not report.get("complete"):
        raise SystemExit(f"{config} ({code or 'this tree'}): not a complete crawl of the 2 "
                         f"URLs: {json.dumps(report)[:1000]}")  # fmt: skip
    parts: dict[str, list[tuple[float, int]]] = {}
    if hook is not None:
        time.sleep(0.5)  # the resource tracker ends once the main process has (not waited for)
        for entry in log.iterdir():
            role, cpu, mods = entry.read_text().split()
            parts.setdefault(role, []).append((float(cpu), int(mods)))
    shutil.rmtree(run_dir)
    return Sample(usage.ru_utime + usage.ru_stime, usage.ru_utime, usage.ru_stime, load1, parts)


def print_parts(series: dict[tuple[str, str], Series]) -> None:
    """Per process role: median CPU (of the sum over that role's processes) and modules."""
    print()
    print("| config | tree | main | workers (each) | tracker | rest | modules main/worker |")
    print("|---|---|---|---|---|---|---|")
    for (c, t), s in series.items():

        def med(role: str, each: bool = False, samples: list[Sample] = s.samples) -> str:
            if not any(role in x.parts for x in samples):
                return "-"
            xs = []
            for x in samples:
                cpus = [p[0] for p in x.parts.get(role, [])]
                xs.append(sum(cpus) / len(cpus) if each and cpus else sum(cpus))
            return f"{statistics.median(xs):.3f}"

        rest = statistics.median(  # (the tracker is not in the total: see the module)
            x.cpu_s - sum(p[0] for r in ("main", "worker") for p in x.parts.get(r, []))
            for x in s.samples
        )
        mods = [
            str(statistics.median(p[1] for x in s.samples for p in x.parts.get(role, [])))
            if any(role in x.parts for x in s.samples) else "-"
            for role in ("main", "worker")
        ]  # fmt: skip
        print(f"| {c} | {t} | {med('main')} | {med('worker', True)} | {med('tracker')} | "
              f"{rest:.3f} | {'/'.join(mods)} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", type=Path, help="another tree of the code (before/after)")
    ap.add_argument(
        "--tree", type=Path, help="the tree measured as 'this' (default: the installed one)"
    )
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--configs", default=",".join(CONFIGS), help="of " + ", ".join(CONFIGS))
    ap.add_argument("--work", type=Path, help="scratch directory (default: a temporary one)")
    ap.add_argument("--per-process", action="store_true", help="also split the CPU by process")
    args = ap.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            raise SystemExit(f"unknown config {c!r}: one of {', '.join(CONFIGS)}")
    trees: list[tuple[str, Path | None]] = [
        ("this", args.tree.resolve() if args.tree is not None else None)
    ]
    if args.baseline is not None:
        trees.append(("base", args.baseline.resolve()))
    work = args.work or Path(tempfile.mkdtemp(prefix="startup-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    series = {(c, t): Series(c, t) for c in configs for t, _ in trees}
    hook = None
    if args.per_process:
        hook = work / "hook"
        hook.mkdir(exist_ok=True)
        (hook / "sitecustomize.py").write_text(_HOOK)
    with serve_404() as port:
        for rep in range(args.reps):
            for c in configs:
                order = trees if rep % 2 == 0 else trees[::-1]  # alternated
                for name, code in order:
                    s = run_once(work, port, c, code, hook)
                    series[(c, name)].samples.append(s)
                    print(f"rep {rep} {c:7} {name:5} cpu {s.cpu_s:.3f} s "
                          f"(user {s.user_s:.3f} sys {s.sys_s:.3f}) load {s.load1:.1f}",
                          flush=True)  # fmt: skip
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print("| config | tree | CPU s (median) | runs | load (min-max) |")
    print("|---|---|---|---|---|")
    for (c, t), s in series.items():
        cpus = [x.cpu_s for x in s.samples]
        loads = [x.load1 for x in s.samples]
        print(f"| {c} | {t} | {statistics.median(cpus):.3f} | "
              f"{', '.join(f'{x:.2f}' for x in cpus)} | {min(loads):.1f}-{max(loads):.1f} |")  # fmt: skip
    if args.per_process:
        print_parts(series)
    if args.baseline is not None:
        print()
        for c in configs:
            this = statistics.median(x.cpu_s for x in series[(c, "this")].samples)
            base = statistics.median(x.cpu_s for x in series[(c, "base")].samples)
            print(f"{c}: this/base {this / base:.3f} ({this - base:+.3f} s)")


if __name__ == "__main__":
    main()
