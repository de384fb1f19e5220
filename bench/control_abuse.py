"""What an abusive client of the control API takes from the crawl's loop.

    .venv/bin/python bench/control_abuse.py              # 4 s per phase
    .venv/bin/python bench/control_abuse.py --seconds 10

A ControlServer runs in this process, as in a crawl, and this process's main thread runs a
stand-in for the crawl's loop (CPU-bound: JSON-encode a small status dict, again and again); its
rate is what the API leaves the loop. The abuse comes from another process (so its own CPU does
not count against the loop), one phase at a time:

* ``quiet``: nobody connects;
* ``slow``: 150 clients that each send one header line per second and never finish;
* ``flood``: 4 clients that connect and close as fast as they can (most are answered 503
  once the slots are full of ``slow``-style clients: 40 of them stay open throughout);
* ``401s``: 4 keep-alive clients sending requests without a token as fast as they can.

Prints, per phase, the loop's rate against ``quiet`` (noisy on a shared machine), the CPU the
API's threads took (this process's CPU time less the loop thread's, per second of wall time:
the steadier figure), the API's threads and open connections
at the end of the phase, and the warnings the API logged in it (401 and 503 lines are counted
per client per minute, so these stay few).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from frontier_crawl.control.server import ControlServer


def _slow(port: int, seconds: float, clients: int) -> None:
    socks = []
    for _ in range(clients):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(b"GET /api/status HTTP/1.1\r\n")
            socks.append(sock)
        except OSError:
            pass
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for sock in list(socks):
            try:
                sock.sendall(b"X-Slow: 1\r\n")
            except OSError:
                socks.remove(sock)
        time.sleep(1.0)


def _flood(port: int, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                sock.recv(4096)
        except OSError:
            pass


def _unauthorised(port: int, seconds: float) -> None:
    request = f"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                for _ in range(1000):
                    sock.sendall(request)
                    data = b""
                    while b"}" not in data:
                        chunk = sock.recv(4096)
                        if not chunk:
                            raise OSError("closed")
                        data += chunk
        except OSError:
            pass


def _attack(kind: str, port: int, seconds: float) -> None:
    if kind == "slow":
        _slow(port, seconds, 150)
        return
    procs = []
    if kind == "flood":
        procs.append(multiprocessing.Process(target=_slow, args=(port, seconds, 40)))
    target = _flood if kind == "flood" else _unauthorised
    procs += [multiprocessing.Process(target=target, args=(port, seconds)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.n = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.n += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    count = _Count()
    logging.getLogger("frontier_crawl.control.server").addHandler(count)
    status = {"state": "running", "pages": 12345, "hosts": {"ready": 3, "waiting": 40}}
    with tempfile.TemporaryDirectory() as tmp:
        server = ControlServer("127.0.0.1:0", Path(tmp), lambda: status, lambda: b"",
                               dispatch=lambda c: {"result": "applied"})  # fmt: skip
        try:
            base = 0.0
            for kind in ("quiet", "slow", "flood", "401s"):
                before = count.n
                attacker = None
                if kind != "quiet":
                    attacker = multiprocessing.Process(
                        target=_attack, args=(kind, server.port, args.seconds))
                    attacker.start()
                    time.sleep(0.5)  # the attack under way
                n, start = 0, time.monotonic()
                cpu, own = time.process_time(), time.thread_time()
                while time.monotonic() - start < args.seconds - 1.0:
                    json.dumps(status)
                    n += 1
                wall = time.monotonic() - start
                rate = n / wall
                api_cpu = (time.process_time() - cpu - (time.thread_time() - own)) / wall
                base = base or rate
                threads, conns = threading.active_count() - 1, server.connections
                if attacker is not None:
                    attacker.join()
                print(f"{kind:6s} loop {rate / base:6.1%} of quiet  API CPU {api_cpu:5.1%} of a "
                      f"core  threads {threads:3d}  connections {conns:3d}  warnings "
                      f"{count.n - before}")  # fmt: skip
                time.sleep(1.5)  # the phase's connections closed (lingering 1 s at most)
        finally:
            server.close()


if __name__ == "__main__":
    main()
