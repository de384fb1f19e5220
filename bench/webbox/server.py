"""The HTTP generator: serves the web of :mod:`bench.webbox.model` from no files.

    python -m bench.webbox.server --web '{"seed": 1, "hosts": 1000000}' --listen 0.0.0.0:80 \\
        --procs 2 --log-dir LOGS

One listening socket, made by the parent and shared by ``--procs`` forked children (one
accept queue), each running its own event loop (uvloop when installed, else asyncio's) over
a hand-written HTTP/1.1 request reader (GET and HEAD, keep-alive). A request names its host
by its ``Host`` header, or by an absolute-form target (``GET http://h5.test/p/3.html``): so
the generator is also the HTTP proxy of a crawl that should not resolve names
(``fetch.proxy``). As a proxy, it answers 502 for a name that does not resolve and 504 after
5 s for one whose name server never answers.

Every request answered (or reset, or left unanswered) is one line of the child's request log,
``LOGS/requests-<n>.log``: ``time<TAB>host<TAB>target<TAB>status<TAB>body bytes``, where time is
when the request was read (Unix seconds, ms), target the origin-form path and query, status the
HTTP status or ``RST`` (a reset) or ``---`` (never answered). Lines are kept in memory and
appended once a second (and at exit, on SIGTERM/SIGINT). Each child also writes
``LOGS/stats-<n>.json`` once a second: its responses, body bytes and CPU seconds (user, system).

The parent prints one JSON line when every child listens: ``{"port": P, "pids": [...]}``;
SIGTERM to it stops the children (they also die with it: PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

from bench.webbox.model import Answer, Web

_REASONS = {
    200: b"OK", 301: b"Moved Permanently", 302: b"Found", 404: b"Not Found",
    405: b"Method Not Allowed", 429: b"Too Many Requests", 500: b"Internal Server Error",
    502: b"Bad Gateway", 503: b"Service Unavailable", 504: b"Gateway Timeout",
    400: b"Bad Request",
}  # fmt: skip
_MAX_HEAD = 16384
_LINGER_RESET = struct.pack("ii", 1, 0)


def web_from_json(text: str) -> Web:
    spec: dict[str, Any] = json.loads(text)
    return Web(**spec)


class RequestLog:
    """The child's request lines, appended to its file once a second and at exit."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []
        self.responses = 0
        self.bytes = 0

    def add(self, host: str, target: str, status: str, size: int) -> None:
        self.lines.append(f"{time.time():.3f}\t{host}\t{target}\t{status}\t{size}\n")
        self.responses += 1
        self.bytes += size

    def flush(self) -> None:
        if self.lines:
            with self.path.open("a") as f:
                f.write("".join(self.lines))
            self.lines.clear()


class Connection(asyncio.Protocol):
    """One client connection: reads requests, answers them in order."""

    def __init__(self, web: Web, log: RequestLog, proxy: bool) -> None:
        self.web, self.log, self.proxy = web, log, proxy
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.waiting = False  # an answer is delayed (or never comes): read no further requests

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while not self.waiting and self.transport is not None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > _MAX_HEAD:
                    self._close_with(400, "-", "-")
                return
            head, self.buf = self.buf[:end], self.buf[end + 4 :]
            self._request(head)

    def _request(self, head: bytes) -> None:
        line, _, headers = head.partition(b"\r\n")
        parts = line.split(b" ")
        if len(parts) != 3:
            self._close_with(400, "-", "-")
            return
        method, raw_target, version = parts
        target = raw_target.decode("latin-1")
        lower = headers.lower()
        close = version != b"HTTP/1.1" or b"connection: close" in lower
        named_by_proxy = target.startswith("http://")
        if named_by_proxy:
            authority, slash, path = target[7:].partition("/")
            host, target = authority, slash + path if slash else "/"
        else:
            at = lower.find(b"host:")
            host = ""
            if at >= 0:
                stop = lower.find(b"\r\n", at)
                host = lower[at + 5 : stop if stop >= 0 else len(lower)].strip().decode("latin-1")
        host = host.lower().partition(":")[0]
        if method not in (b"GET", b"HEAD"):
            self._send(Answer(405, b"", "text/plain"), host, target, close, head_only=False)
            return
        answer = self._answer(host, target, named_by_proxy)
        self._send(answer, host, target, close, head_only=method == b"HEAD")

    def _answer(self, host: str, target: str, named_by_proxy: bool) -> Answer:
        if named_by_proxy and self.proxy:
            i = self.web.index(host)
            dns = self.web.host_info(i).dns if i is not None else "nxdomain"
            if dns == "nxdomain":
                return Answer(502, b"proxy: name not resolved\n", "text/plain")
            if dns == "timeout":
                return Answer(504, b"proxy: name server timeout\n", "text/plain", delay_s=5.0)
        return self.web.answer(host, target, time.time())

    def _send(self, answer: Answer, host: str, target: str, close: bool, head_only: bool) -> None:
        transport = self.transport
        assert transport is not None
        if answer.status == 0:
            self.log.add(host, target, "---", 0)
            self.waiting = True  # never answered: the client gives up and closes
            return
        if answer.status < 0:
            self.log.add(host, target, "RST", 0)
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
            transport.abort()
            return
        body = answer.body
        extra = b""
        if answer.location:
            extra += b"Location: %s\r\n" % answer.location.encode()
        if answer.retry_after:
            extra += b"Retry-After: %d\r\n" % answer.retry_after
        if close:
            extra += b"Connection: close\r\n"
        head = b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n" % (
            answer.status, _REASONS.get(answer.status, b"Status"), answer.content_type.encode(),
            len(body), extra,
        )  # fmt: skip
        data = head if head_only else head + body
        self.log.add(host, target, str(answer.status), len(body))
        if answer.delay_s > 0:
            self.waiting = True
            asyncio.get_running_loop().call_later(answer.delay_s, self._late, data, close)
            return
        transport.write(data)
        if close:
            transport.close()

    def _late(self, data: bytes, close: bool) -> None:
        self.waiting = False
        if self.transport is None:
            return
        self.transport.write(data)
        if close:
            self.transport.close()
            return
        self.data_received(b"")

    def _close_with(self, status: int, host: str, target: str) -> None:
        self._send(Answer(status, b"bad request\n", "text/plain"), host, target, True, False)


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _child(sock: socket.socket, web: Web, log_dir: Path, n: int, proxy: bool) -> None:
    _die_with_parent()
    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    log = RequestLog(log_dir / f"requests-{n}.log")
    stats = log_dir / f"stats-{n}.json"

    def write_stats() -> None:
        cpu = os.times()
        tmp = stats.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "responses": log.responses,
                                   "bytes": log.bytes, "user_s": cpu.user, "sys_s": cpu.system}))  # fmt: skip
        tmp.replace(stats)

    def tick() -> None:
        log.flush()
        write_stats()
        loop.call_later(1.0, tick)

    def stop() -> None:
        log.flush()
        write_stats()
        loop.stop()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop)
    server = loop.run_until_complete(
        loop.create_server(lambda: Connection(web, log, proxy), sock=sock, backlog=4096)
    )
    tick()
    try:
        loop.run_forever()
    finally:
        log.flush()
        server.close()
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--web", required=True, help="the web's parameters, JSON (model.Web's)")
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--log-dir", type=Path, required=True)
    ap.add_argument("--proxy", action="store_true", help="answer absolute-form targets as a proxy (DNS failures as 502/504)")
    args = ap.parse_args(argv)
    web = web_from_json(args.web)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    host, _, port = args.listen.rpartition(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(4096)
    sock.setblocking(False)
    bound = sock.getsockname()[1]
    pids = []
    for n in range(args.procs):
        pid = os.fork()
        if pid == 0:
            _child(sock, web, args.log_dir, n, args.proxy)
        pids.append(pid)
    sock.close()
    stopping = False

    def forward(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    sys.stdout.write(json.dumps({"port": bound, "pids": pids}) + "\n")
    sys.stdout.flush()
    for pid in pids:
        while True:
            try:
                os.waitpid(pid, 0)
                break
            except ChildProcessError:
                break
            except InterruptedError:
                continue


if __name__ == "__main__":
    main()
