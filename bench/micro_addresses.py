"""What the address policy costs (fetch/addresses.py): the check runs once per new connection.

    .venv/bin/python bench/micro_addresses.py

1. ``AddressPolicy.why_refused`` for a remembered address, and for a new one (classified);
2. ``Transfer.open_socket`` (the check and the socket libcurl would otherwise create itself);
3. CPU per fetch over loopback with a new connection each time (``Connection: close``, the
   worst case: a crawl over keep-alive opens one connection per host slot, not per page),
   with and without a policy (loopback allowed), best of 5 rounds of 500 fetches.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Any

import pycurl

from frontier_crawl.fetch import AddressPolicy, Fetcher, FetchRequest
from frontier_crawl.fetch.transfer import Transfer


def per_call_us(fn: Any, n: int = 100_000) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


_SERVER = """
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def fetch_cpu_us(policy: AddressPolicy | None, url: str, n: int = 500) -> float:
    best = float("inf")
    with Fetcher(concurrency=8, capture_requests=False, addresses=policy) as fetcher:
        for _ in range(5):
            t0 = time.process_time()
            pending, done = n, 0
            while done < n:
                while pending and fetcher.free_slots:
                    fetcher.submit(FetchRequest(url))
                    pending -= 1
                for r in fetcher.poll(1.0):
                    assert r.status == 200, r.error_detail
                    done += 1
            best = min(best, (time.process_time() - t0) / n * 1e6)
    return best


def main() -> None:
    policy = AddressPolicy(["loopback"])
    policy.why_refused("127.0.0.1", "http://a.test/")
    remembered = per_call_us(lambda: policy.why_refused("127.0.0.1", "http://a.test/"))
    print(f"why_refused, remembered address: {remembered:.2f} us")
    fresh = AddressPolicy()
    it = iter([f"10.{i >> 8 & 255}.{i & 255}.1" for i in range(4000)] * 25)
    new = per_call_us(lambda: fresh._decide(next(it)), 50_000)
    print(f"why_refused, new address (classified): {new:.2f} us")
    transfer = Transfer(FetchRequest("http://a.test/"), 1000, policy)
    addr = (socket.AF_INET, socket.SOCK_STREAM, 6, ("127.0.0.1", 80))

    def open_close() -> None:
        fd = transfer.open_socket(pycurl.SOCKTYPE_IPCXN, addr)
        assert fd >= 0
        os.close(fd)

    print(f"Transfer.open_socket (check + socket + close): {per_call_us(open_close, 20_000):.2f} us")
    plain = per_call_us(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 6).close(), 20_000)
    print(f"socket.socket + close alone: {plain:.2f} us")
    server = subprocess.Popen(  # in a process of its own: only the crawler's CPU is counted
        [sys.executable, "-c", _SERVER], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    url = f"http://127.0.0.1:{server.stdout.readline().strip()}/"
    runs: dict[str, list[float]] = {"without": [], "with": []}
    for _ in range(3):  # interleaved: the machine's load drifts
        runs["without"].append(fetch_cpu_us(None, url))
        runs["with"].append(fetch_cpu_us(AddressPolicy(["loopback"]), url))
    without, with_policy = min(runs["without"]), min(runs["with"])
    print(f"CPU per fetch, new connection each: {without:.0f} us without a policy, "
          f"{with_policy:.0f} us with one")
    server.kill()
    server.wait()


if __name__ == "__main__":
    main()
