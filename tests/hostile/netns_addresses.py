"""The address policy against names that resolve, or rebind, to loopback, in a private network
namespace (as ``tests/hostile/netns.py``; root only, no packet leaves it).

Inside, the loopback interface also carries 198.51.100.7 (a documentation address: "public"
to the policy), where the seed's server listens; a second server listens on 127.0.0.1, the
same port, and must never be asked anything. A name server on 127.0.0.1:53 answers
``rebind.site.test`` with 198.51.100.7 the first time and 127.0.0.1 from then on (TTL 0).

Run as ``python -m tests.hostile.netns_addresses OUT_DIR`` in the namespace (:func:`run`);
it prints one JSON object: the crawl log, both servers' request logs, the A queries seen.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.hostile.netns import _loopback_up, _question

PUBLIC = "198.51.100.7"
_ROOT = Path(__file__).resolve().parents[2]


def run(out_dir: str, timeout_s: float = 60) -> dict[str, Any]:
    """Run this module in fresh network and mount namespaces; its JSON output."""
    with tempfile.TemporaryDirectory() as tmp:
        resolv, nsswitch = Path(tmp) / "resolv.conf", Path(tmp) / "nsswitch.conf"
        resolv.write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
        nsswitch.write_text("hosts: dns\n")
        script = (
            f"mount --bind {resolv} /etc/resolv.conf && "
            f"mount --bind {nsswitch} /etc/nsswitch.conf && "
            f'exec "$0" -m tests.hostile.netns_addresses "$@"'
        )
        proc = subprocess.run(
            ["unshare", "--net", "--mount", "sh", "-c", script, sys.executable, out_dir],
            cwd=_ROOT,
            env={**os.environ, "PYTHONPATH": str(_ROOT)},
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    if proc.returncode != 0:
        raise AssertionError(f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


class _Rebinder:
    """UDP 127.0.0.1:53: ``rebind.site.test`` A -> 198.51.100.7 once, then 127.0.0.1."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 53))
        self.sock.settimeout(0.1)
        self.a_queries = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                packet, peer = self.sock.recvfrom(4096)
            except TimeoutError:
                continue
            name, qtype, end = _question(packet)
            answers = b""
            if name == "rebind.site.test" and qtype == 1:
                self.a_queries += 1
                address = PUBLIC if self.a_queries == 1 else "127.0.0.1"
                record = struct.pack("!HHIH", 1, 1, 0, 4) + socket.inet_aton(address)
                answers = b"\xc0\x0c" + record
            known = name == "rebind.site.test"
            flags = 0x8180 | (0 if known else 3)
            header = packet[:2] + struct.pack("!HHHHH", flags, 1, 1 if answers else 0, 0, 0)
            self.sock.sendto(header + packet[12:end] + answers, peer)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


class _Server:
    """HTTP on ``address``: ``/`` of site.test links to ``links``; every answer closes the
    connection (so each request needs a new one, and a new name lookup)."""

    def __init__(self, address: str, port: int, links: list[str]) -> None:
        log: list[list[str]] = []
        self.log = log

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                host = (self.headers.get("Host") or "").split(":")[0]
                log.append([host, self.path])
                body = b"not found"
                status = 404
                if self.path == "/" and host == "site.test":
                    status = 200
                    body = "".join(f'<a href="{u}">x</a>' for u in links).encode()
                elif self.path != "/robots.txt":
                    status, body = 200, b"<html>secret</html>"
                self.send_response(status)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((address, port), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main(out_dir: str) -> None:
    _loopback_up()
    subprocess.run(["ip", "addr", "add", f"{PUBLIC}/32", "dev", "lo"], check=True)
    from frontier_crawl.config import parse
    from frontier_crawl.engine import Engine

    dns = _Rebinder()
    site = _Server(PUBLIC, 0, [])
    port = site.port
    links = [f"http://inner.site.test:{port}/latest/meta-data/",
             f"http://rebind.site.test:{port}/a", f"http://rebind.site.test:{port}/b"]  # fmt: skip
    site.close()
    site = _Server(PUBLIC, port, links)
    inner = _Server("127.0.0.1", port, [])
    settings = parse(
        {
            "crawl": {"seeds": [f"http://site.test:{port}/"], "output_dir": out_dir},
            "politeness": {"min_delay_s": 0.0, "delay_factor": 0.0},
            "fetch": {
                "resolve": [f"site.test:{port}:{PUBLIC}", f"inner.site.test:{port}:127.0.0.1"],
                "dns_cache_ttl_s": 0,
                "connect_timeout_s": 2.0,
                "timeout_s": 5.0,
                "retries": 1,
                "retry_backoff_s": 0.05,
            },
            "output": {"progress_interval_s": 0.0},
        }
    )
    report = Engine(settings).run()
    site.close()
    inner.close()
    dns.close()
    lines = [json.loads(x) for x in (Path(out_dir) / "crawl.jsonl").read_text().splitlines()]
    result = {"lines": lines, "public": site.log, "loopback": inner.log,
              "a_queries": dns.a_queries, "complete": report["complete"]}  # fmt: skip
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
