"""What a name lookup costs the fetcher as the names it has resolved grow (issue 29).

    git archive <commit> | tar -x -C DIR
    .venv/bin/python bench/dns_cache_scale.py --baseline DIR [--warm 1000,30000] \\
        [--measure 2000] [--rounds 3]

Run as root: the script re-runs itself in private network and mount namespaces
(``bench/webbox/netns.py``), starts the web in a box's name server (``bench/webbox/dns.py``,
every name answered) and its HTTP generator on 0.0.0.0:80, and in that process alternates
two trees' ``Fetcher`` (this one and ``--baseline``), round after round. Each run: a fresh
fetcher (64 transfers at once, ``dns_cache_ttl_s`` 120) fetches ``/robots.txt`` of ``--warm``
hosts never asked before (each a real lookup through glibc's resolver), then of ``--measure``
more: the CPU time of this process (``time.process_time``: libcurl, its resolver threads and
the fetcher's Python; the servers are other processes) over those last ones, per transfer.
Every transfer is a new name, a lookup and a new connection, so the difference between two
``--warm`` sizes is what the names already cached cost each lookup. Also printed: the
resolver threads libcurl started per lookup (new thread ids seen in ``/proc/self/task`` after
each ``poll``, which sees every thread of its pool: idle ones live 2 s), and the CPU time of
the threads other than the main one (the resolver's: ``getaddrinfo``) per lookup.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.webbox.netns import run_in_namespace, setup_inside, unavailable  # noqa: E402

_INSIDE = "FC_DNS_CACHE_SCALE_INSIDE"
#: every host answers, at once, and has a name (the lookups are what is measured)
WEB = {"seed": 7, "hosts": 1_000_000, "slow": 0.0, "never": 0.0, "reset": 0.0, "throttle": 0.0,
       "nxdomain": 0.0, "dns_timeout": 0.0, "robots_slow": 0.0}  # fmt: skip


def _forget() -> dict[str, ModuleType]:
    mods = {n: sys.modules[n] for n in list(sys.modules) if n.split(".")[0] == "frontier_crawl"}
    for name in mods:
        del sys.modules[name]
    return mods


def thread_cpu_s() -> float:
    """CPU seconds of this process's threads other than the main one (those alive now)."""
    ticks, me = 0, str(os.getpid())
    for tid in os.listdir("/proc/self/task"):
        if tid != me:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def load(tree: str) -> Callable[[range, range], tuple[float, float, float]]:
    """A run of ``tree``'s Fetcher: (CPU s per transfer over the measured hosts, resolver
    threads started per measured lookup, their CPU s per lookup)."""
    _forget()
    sys.path.insert(0, tree)
    try:
        fetch = importlib.import_module("frontier_crawl.fetch")
        assert fetch.__file__ is not None and fetch.__file__.startswith(tree), fetch.__file__
    finally:
        del sys.path[0]
    mods = _forget()

    def run(warm: range, measure: range) -> tuple[float, float, float]:
        _forget()
        sys.modules.update(mods)
        fetcher: Any = fetch.Fetcher(concurrency=64, capture_requests=False, dns_cache_ttl_s=120)
        with fetcher:
            crawl(fetch, fetcher, warm, set())
            threads: set[str] = set(os.listdir("/proc/self/task"))
            before = len(threads)
            cpu0, resolver0 = time.process_time(), thread_cpu_s()
            crawl(fetch, fetcher, measure, threads)
            cpu, resolver = time.process_time() - cpu0, thread_cpu_s() - resolver0
        n = len(measure)
        return cpu / n, (len(threads) - before) / n, resolver / n

    return run


def crawl(fetch: Any, fetcher: Any, hosts: range, threads: set[str]) -> None:
    todo = [f"http://h{i}.test/robots.txt" for i in reversed(hosts)]
    done = ok = 0
    while done < len(hosts):
        while todo and fetcher.free_slots:
            fetcher.submit(fetch.FetchRequest(todo.pop()))
        for result in fetcher.poll(1.0):
            done += 1
            ok += result.error is None
        if threads:
            threads.update(os.listdir("/proc/self/task"))
    assert ok >= len(hosts) * 0.99, f"only {ok} of {len(hosts)} answered"


@contextlib.contextmanager
def servers(work: Path) -> Iterator[None]:
    """The name server on 127.0.0.1:53 and the generator on 0.0.0.0:80, stopped by PID."""
    web = json.dumps(WEB)
    py = sys.executable
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    dns = subprocess.Popen([py, "-m", "bench.webbox.dns", "--web", web, "--listen",
                            "127.0.0.1:53", "--stats", str(work / "dns.json")], cwd=ROOT, env=env)  # fmt: skip
    http = subprocess.Popen([py, "-m", "bench.webbox.server", "--web", web, "--listen",
                             "0.0.0.0:80", "--log-dir", str(work)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert http.stdout is not None
        json.loads(http.stdout.readline())  # every child listens
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.getaddrinfo("h0.test", 80, socket.AF_INET)
                break
            except socket.gaierror:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield
    finally:
        for proc in (http, dns):
            proc.terminate()
            proc.wait(10)


def inside(args: argparse.Namespace) -> None:
    setup_inside()
    warms = [int(x) for x in args.warm.split(",")]
    with tempfile.TemporaryDirectory(prefix="fc-dnsscale-") as tmp, servers(Path(tmp)):
        runs = {"before": load(str(Path(args.baseline).resolve())), "after": load(str(ROOT))}
        samples: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
        offset = 0

        def hosts(n: int) -> range:
            nonlocal offset
            offset += n
            return range(offset - n, offset)

        for name in runs:  # warm: imports, the generator's and the resolver's first answers
            runs[name](hosts(200), hosts(200))
        for r in range(args.rounds):
            for name in list(runs) if r % 2 == 0 else list(reversed(runs)):
                for warm in warms:
                    sample = runs[name](hosts(warm), hosts(args.measure))
                    samples.setdefault((name, warm), []).append(sample)
                    print(f"round {r} {name} warm {warm}: {sample[0] * 1e6:.1f} us/lookup, "
                          f"{sample[1]:.3f} threads/lookup, resolver threads "
                          f"{sample[2] * 1e6:.1f} us/lookup", flush=True)  # fmt: skip
    load_avg = os.getloadavg()
    print(f"\n{args.measure} lookups a run after --warm names, {args.rounds} alternated rounds "
          f"(load {load_avg[0]:.1f}); CPU us per lookup (median, all), resolver threads "
          "started per lookup, their CPU us per lookup (median)")  # fmt: skip
    for (name, warm), values in sorted(samples.items()):
        cpu = [v[0] * 1e6 for v in values]
        print(f"{name:6} warm {warm:>7,}: {statistics.median(cpu):7.1f}  "
              f"({' '.join(f'{x:.1f}' for x in cpu)})  "
              f"threads {statistics.median(v[1] for v in values):.3f}, "
              f"{statistics.median(v[2] for v in values) * 1e6:.1f} us")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="a tree of the code (git archive)")
    ap.add_argument("--warm", default="1000,30000", help="names resolved before, comma-separated")
    ap.add_argument("--measure", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if os.environ.get(_INSIDE):
        inside(args)
        return
    why = unavailable()
    if why is not None:
        sys.exit(f"cannot run: {why}")
    os.environ[_INSIDE] = "1"
    sys.exit(run_in_namespace([sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]]))


if __name__ == "__main__":
    main()
