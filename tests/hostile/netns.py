"""DNS experiments inside a private network namespace, where a real resolver path is safe.

libcurl here uses its threaded resolver (getaddrinfo; no c-ares, so ``DNS_SERVERS`` cannot
point it at a test server). To see what a crawl does against a name server that never answers,
or to count the queries it sends, the test runs a child process in new network and mount
namespaces (``unshare --net --mount``; root only): the only interface is a loopback, and
``/etc/resolv.conf`` and ``/etc/nsswitch.conf`` are bind-mounted to point glibc at a UDP
server on 127.0.0.1:53 run by the child itself. No packet can leave the namespace.

Run as ``python -m tests.hostile.netns MODE ARGS`` inside the namespace (see
:func:`run_in_netns`); it prints one JSON object.

* ``silent OUT_DIR``: a name server that reads queries and never replies; one crawl of
  ``http://never-answers.example/`` (retries 1, connect timeout 1 s).
* ``answer TTL``: a name server answering ``*.ttl.test`` A queries with 127.0.0.1 (NXDOMAIN for
  other names); 4 sequential fetches (new connection each) of ``a.ttl.test`` with
  ``fetch.dns_cache_ttl_s = TTL``, and one of ``missing.example``.
* ``expire TTL``: the same, with a pause of TTL + 1.5 s after the second fetch (the fetcher lets
  libcurl prune its DNS cache on one transfer a second only: the TTL must still hold).
* ``bound``: ``fetch.dns_cache_ttl_s = 60`` and the fetcher's ``DNS_CACHE_NAMES`` lowered to
  10; 40 names of ``*.ttl.test`` fetched at once, a pause of 1.2 s, a fetch of another name
  (the transfer that prunes), then the first name again.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["netns_unavailable", "run_in_netns"]

_ROOT = Path(__file__).resolve().parents[2]


def netns_unavailable() -> str | None:
    """Why the namespace experiments cannot run here (None if they can)."""
    if sys.platform != "linux":
        return "Linux only"
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare/mount not installed"
    if os.path.exists("/var/run/nscd/socket"):
        return "nscd would answer from outside the namespace"
    probe = subprocess.run(
        ["unshare", "--net", "--mount", "true"], capture_output=True, timeout=10, check=False
    )
    if probe.returncode != 0:
        return f"cannot create namespaces: {probe.stderr.decode(errors='replace').strip()}"
    return None


def run_in_netns(*args: str, timeout_s: float = 60) -> tuple[dict[str, Any], float]:
    """Run this module with ``args`` in fresh namespaces: (its JSON output, wall seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        resolv, nsswitch = Path(tmp) / "resolv.conf", Path(tmp) / "nsswitch.conf"
        resolv.write_text("nameserver 127.0.0.1\n")
        nsswitch.write_text("hosts: files dns\n")
        script = (
            f"mount --bind {resolv} /etc/resolv.conf && "
            f"mount --bind {nsswitch} /etc/nsswitch.conf && "
            f'exec "$0" -m tests.hostile.netns "$@"'
        )
        started = time.monotonic()
        proc = subprocess.run(
            ["unshare", "--net", "--mount", "sh", "-c", script, sys.executable, *args],
            cwd=_ROOT,
            env={**os.environ, "PYTHONPATH": str(_ROOT)},
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        wall = time.monotonic() - started
    if proc.returncode != 0:
        raise AssertionError(f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


# -- inside the namespace -------------------------------------------------------------------


def _loopback_up() -> None:
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, siocgifflags, ifreq))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sh", b"lo", flags | iff_up))


class NameServer:
    """UDP 127.0.0.1:53. ``answer``: A 127.0.0.1 for ``*.ttl.test``; else never replies."""

    def __init__(self, answer: bool) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 53))
        self.sock.settimeout(0.1)
        self.answer = answer
        self.queries: list[tuple[str, int]] = []  # (name, qtype)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                packet, peer = self.sock.recvfrom(4096)
            except TimeoutError:
                continue
            name, qtype, question_end = _question(packet)
            self.queries.append((name, qtype))
            if self.answer:
                self.sock.sendto(_reply(packet, name, qtype, question_end), peer)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def _question(packet: bytes) -> tuple[str, int, int]:
    labels, i = [], 12
    while packet[i]:
        labels.append(packet[i + 1 : i + 1 + packet[i]].decode("ascii", "replace"))
        i += 1 + packet[i]
    qtype = struct.unpack("!H", packet[i + 1 : i + 3])[0]
    return ".".join(labels).lower(), qtype, i + 5


def _reply(query: bytes, name: str, qtype: int, question_end: int) -> bytes:
    known = name.endswith(".ttl.test")
    answers = b""
    if known and qtype == 1:
        answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 300, 4) + socket.inet_aton("127.0.0.1")
    flags = 0x8180 | (0 if known else 3)  # response, RD, RA; NXDOMAIN for unknown names
    header = query[:2] + struct.pack("!HHHHH", flags, 1, 1 if answers else 0, 0, 0)
    return header + query[12:question_end] + answers


def _silent(out_dir: str) -> dict[str, Any]:
    from frontier_crawl.config import PolitenessSection, parse
    from frontier_crawl.engine import Engine

    server = NameServer(answer=False)
    known = PolitenessSection.__struct_fields__  # the host backoff would add its own wait
    quick = {k: v for k, v in {"backoff_s": 0.0, "delay_factor": 0.0}.items() if k in known}
    settings = parse(
        {
            "crawl": {"seeds": ["http://never-answers.example/"], "output_dir": out_dir},
            "politeness": {"obey_robots": False, "min_delay_s": 0.0, **quick},
            "fetch": {
                "connect_timeout_s": 1.0,
                "timeout_s": 3.0,
                "retries": 1,
                "retry_backoff_s": 0.1,
            },
            "output": {"progress_interval_s": 0.0},
        }
    )
    started = time.monotonic()
    report = Engine(settings).run()
    duration = time.monotonic() - started
    lines = [json.loads(x) for x in (Path(out_dir) / "crawl.jsonl").read_text().splitlines()]
    queries = len(server.queries)
    return {"duration_s": duration, "report": report, "lines": lines, "queries": queries}


def _answer(ttl: int, pause_after: int | None = None) -> dict[str, Any]:
    from frontier_crawl.config import FetchSection, PolitenessSection
    from frontier_crawl.fetch import Fetcher, FetchRequest
    from tests.hostile.server import Exchange, RawHttpServer

    def close_each(ex: Exchange) -> None:
        ex.keep_alive = False  # every fetch needs a new connection, hence a name lookup
        ex.reply(200, b"<html>ok</html>")

    server, http = NameServer(answer=True), RawHttpServer(close_each)
    fetch = FetchSection(dns_cache_ttl_s=ttl, connect_timeout_s=2.0, timeout_s=5.0)
    results = []
    with Fetcher.from_settings(fetch, PolitenessSection()) as fetcher:
        urls = [f"http://a.ttl.test:{http.port}/{i}" for i in range(4)]
        urls.append(f"http://missing.example:{http.port}/")
        for i, url in enumerate(urls):
            if i == pause_after:  # the TTL's expiry is what is tested: time must pass
                time.sleep(ttl + 1.5)
            fetcher.submit(FetchRequest(url))
            done: list[Any] = []
            while not done:
                done = fetcher.poll(1.0)
            results.append((done[0].status, str(done[0].error)))
    http.close()
    server.close()
    a_queries = sum(1 for name, qtype in server.queries if name == "a.ttl.test" and qtype == 1)
    return {"results": results, "a_queries": a_queries, "connections": http.connections}


def _bound() -> dict[str, Any]:
    from frontier_crawl.config import FetchSection, PolitenessSection
    from frontier_crawl.fetch import Fetcher, FetchRequest, fetcher
    from tests.hostile.server import Exchange, RawHttpServer

    def close_each(ex: Exchange) -> None:
        ex.keep_alive = False  # every fetch needs a new connection, hence a name lookup
        ex.reply(200, b"<html>ok</html>")

    fetcher.DNS_CACHE_NAMES = 10  # (the suite's size for the bound of a few hundred names)
    server, http = NameServer(answer=True), RawHttpServer(close_each)
    fetch = FetchSection(dns_cache_ttl_s=60, connect_timeout_s=2.0, timeout_s=5.0)

    def fetch_all(client: Fetcher, urls: list[str]) -> list[int]:
        for url in urls:
            client.submit(FetchRequest(url))
        statuses: list[int] = []
        while len(statuses) < len(urls):
            statuses.extend(result.status for result in client.poll(1.0))
        return statuses

    with Fetcher.from_settings(fetch, PolitenessSection()) as client:
        many = fetch_all(client, [f"http://n{i}.ttl.test:{http.port}/" for i in range(40)])
        time.sleep(1.2)  # what is tested is the lifetime of the entries: time must pass
        then = fetch_all(client, [f"http://fresh.ttl.test:{http.port}/"])
        then += fetch_all(client, [f"http://n0.ttl.test:{http.port}/"])
    http.close()
    server.close()
    n0 = sum(1 for name, qtype in server.queries if name == "n0.ttl.test" and qtype == 1)
    return {"statuses": many + then, "n0_queries": n0, "connections": http.connections}


def main(argv: list[str]) -> None:
    _loopback_up()
    mode = argv[0]
    if mode == "silent":
        result = _silent(argv[1])
    elif mode == "bound":
        result = _bound()
    elif mode == "expire":  # two fetches, then the TTL and more passes, then two more
        result = _answer(int(argv[1]), pause_after=2)
    else:
        result = _answer(int(argv[1]))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
