"""A name server for the generated web: UDP, one process, a blocking loop.

    python -m bench.webbox.dns --web '{"seed": 1, "hosts": 1000000}' --listen 127.0.0.1:53 \\
        --stats STATS.json

``h<i>.test`` (``i`` below the web's host count) gets an A record with the host's address in
198.18.0.0/15 (TTL 3600), unless the model makes its name fail: ``nxdomain`` (NXDOMAIN) or
``timeout`` (no reply at all). AAAA and other types of a known name: no data (NOERROR, no
answer). Any other name: NXDOMAIN (counted as ``foreign``: nothing but the web should be
asked). The counters are written to ``--stats`` (JSON) about once a second and at exit.

``peak_unanswered``: the most distinct never-answered names queried within any
:data:`WINDOW_S` seconds. A stub resolver asks again for a name it got no reply for only after
its own timeout (glibc: 5 s), and a resolver thread works on one name at a time, so this is
at least the number of lookups the crawler had waiting on a dead name server at once: with
libcurl's default pool of 20 resolver threads it cannot pass 20 (tests/e2e/test_dns_threads.py).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import struct
import time
from collections import deque
from pathlib import Path
from typing import Any

from bench.webbox.server import web_from_json

WINDOW_S = 2.0  #: the window of ``peak_unanswered`` (module docstring)


def question(packet: bytes) -> tuple[str, int, int]:
    """The first question's name, type, and the offset just past it."""
    labels, i = [], 12
    while packet[i]:
        labels.append(packet[i + 1 : i + 1 + packet[i]].decode("ascii", "replace"))
        i += 1 + packet[i]
    qtype = struct.unpack_from("!H", packet, i + 1)[0]
    return ".".join(labels).lower(), qtype, i + 5


def reply(query: bytes, end: int, rcode: int, address: str | None) -> bytes:
    answers = b""
    if address is not None:
        answers = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 3600, 4) + socket.inet_aton(address)
    rd = query[2] & 1
    flags = 0x8080 | (rd << 8) | rcode  # response, recursion available, RD echoed
    header = query[:2] + struct.pack("!HHHHH", flags, 1, 1 if answers else 0, 0, 0)
    return header + query[12:end] + answers


def serve(web: Any, sock: socket.socket, stats_path: Path | None) -> None:
    counts = {"queries": 0, "a": 0, "answered": 0, "nxdomain": 0, "dropped": 0, "foreign": 0,
              "peak_unanswered": 0}
    recent: deque[tuple[float, str]] = deque()  # never-answered queries of the last WINDOW_S
    in_window: dict[str, int] = {}  # their names, and how many of those queries each
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sock.settimeout(0.5)
    next_write = 0.0
    while not stopping:
        now = time.monotonic()
        if stats_path is not None and now >= next_write:
            tmp = stats_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(counts))
            tmp.replace(stats_path)
            next_write = now + 1.0
        try:
            packet, peer = sock.recvfrom(4096)
        except (TimeoutError, InterruptedError):
            continue
        try:
            name, qtype, end = question(packet)
        except (IndexError, struct.error):
            continue
        counts["queries"] += 1
        counts["a"] += qtype == 1
        i = web.index(name)
        if i is None:
            counts["foreign"] += 1
            counts["nxdomain"] += 1
            sock.sendto(reply(packet, end, 3, None), peer)
            continue
        info = web.host_info(i)
        if info.dns == "timeout":
            counts["dropped"] += 1
            now = time.monotonic()
            recent.append((now, name))
            in_window[name] = in_window.get(name, 0) + 1
            while recent[0][0] < now - WINDOW_S:
                old = recent.popleft()[1]
                in_window[old] -= 1
                if not in_window[old]:
                    del in_window[old]
            counts["peak_unanswered"] = max(counts["peak_unanswered"], len(in_window))
            continue
        if info.dns == "nxdomain":
            counts["nxdomain"] += 1
            sock.sendto(reply(packet, end, 3, None), peer)
            continue
        counts["answered"] += 1
        sock.sendto(reply(packet, end, 0, info.address if qtype == 1 else None), peer)
    if stats_path is not None:
        stats_path.write_text(json.dumps(counts))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--web", required=True)
    ap.add_argument("--listen", default="127.0.0.1:53")
    ap.add_argument("--stats", type=Path)
    args = ap.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    sock.bind((host, int(port)))
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    serve(web_from_json(args.web), sock, args.stats)


if __name__ == "__main__":
    main()
