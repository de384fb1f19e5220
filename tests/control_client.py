"""Helpers for the control API tests: a crawl subprocess with ``[control] listen`` set, and raw
HTTP requests to its API (the tests want to send wrong tokens and Host headers too)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frontier_crawl.demo.server import DemoServer, RequestLogEntry
from tests.waiting import wait_until

#: a crawl subprocess has up to this long to bind its API (2 cores, six parallel sessions)
START_S = 30.0


def read_api_files(out: Path, wait_s: float = START_S) -> tuple[str, str]:
    """``out/control.addr`` and ``out/control.token``, once both hold a whole line (the crawl
    writes each whole and renames it into place; a line ending is the end of the content): the
    address and the token."""

    def whole() -> tuple[str, str] | None:
        try:
            addr = (out / "control.addr").read_text()
            token = (out / "control.token").read_text()
        except FileNotFoundError:
            return None
        if not (addr.endswith("\n") and token.endswith("\n")):
            return None
        return addr.strip(), token.strip()

    found: tuple[str, str] = wait_until(f"the control API's files in {out}", whole, wait_s)
    return found


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


class Api:
    """The control API of the crawl writing into ``out``."""

    def __init__(self, out: Path, wait_s: float = START_S) -> None:
        self.address, self.token = read_api_files(out, wait_s)
        host, _, port = self.address.rpartition(":")
        self.host, self.port = host, int(port)

    def raw(self, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> Reply:  # fmt: skip
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            sent = {"Host": self.address, "Authorization": f"Bearer {self.token}",
                    **(headers or {})}  # fmt: skip
            if body is not None:
                sent.setdefault("Content-Length", str(len(body)))
            for key, value in sent.items():
                if value is not None:
                    conn.putheader(key, value)
            conn.endheaders(body)
            response = conn.getresponse()
            data = response.read()
            ctype = response.getheader("Content-Type") or ""
            parsed: Any = json.loads(data) if "json" in ctype and data else data
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, parsed)
        finally:
            conn.close()

    def get(self, path: str) -> Any:
        reply = self.raw("GET", path)
        assert reply.status == 200, (path, reply.status, reply.body)
        return reply.body

    def post(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.raw("POST", path, json.dumps(body or {}).encode(),
                         {"Content-Type": "application/json"})  # fmt: skip
        assert reply.status == 200, (path, reply.status, reply.body)
        assert isinstance(reply.body, dict)
        return reply.body

    def status(self) -> dict[str, Any]:
        body = self.get("/api/status")
        assert isinstance(body, dict)
        return body


def start_crawl(cfg: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def ctl(cfg: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frontier_crawl.cli", "ctl", "--config", str(cfg), *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def pages_of(server: DemoServer, host: str, since: float = 0.0,
             until: float = float("inf")) -> list[RequestLogEntry]:  # fmt: skip
    """Requests to ``host`` (robots.txt excluded) that started in [since, until]."""
    return [e for e in server.log(wait_s=0.0) if e.host == host and e.path != "/robots.txt"
            and since <= e.started <= until]  # fmt: skip


def finish(proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> str:
    """Wait for the crawl to end by itself (exit 0); its stderr."""
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError("crawl did not finish: " + err.decode()[-3000:]) from None
    assert proc.returncode == 0, err.decode()[-3000:]
    return err.decode()
