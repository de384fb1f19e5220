"""nginx on 127.0.0.1 serving a static multi-host site, run as our own child process.

One ``server`` block with ``root <site>/$host`` (name-based virtual hosts from the Host
header), listening on 127.0.0.1 only. Everything nginx writes (pid file, error log, access log,
temp paths) stays in the bench work dir; ``daemon off`` keeps the master process our child, so
it is stopped by its PID. The access log has one line per request, written when the request
ends: ``$msec $request_time $host $status $body_bytes_sent $request_uri``.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

LOG_FORMAT = "$msec $request_time $host $status $body_bytes_sent $request_uri"
WORKER_CONNECTIONS = 4096
OPEN_FILE_CACHE_MAX = 200_000


def open_file_cache_max() -> int:
    """Entries of nginx's open_file_cache: each holds a descriptor, so they must fit under
    the descriptor limit nginx inherits, beside its connections (two descriptors each when
    sendfile's file is open too). Past it, open() fails with EMFILE and nginx answers 500:
    a 10^5-page site under a 20,000 limit did."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return OPEN_FILE_CACHE_MAX
    return max(1_000, min(OPEN_FILE_CACHE_MAX, soft - 2 * WORKER_CONNECTIONS - 256))


def ensure_nginx() -> str:
    """Path of the nginx binary, installed with apt-get (we run as root) when missing."""
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found:
        return found
    if os.geteuid() != 0:
        raise SystemExit("nginx is not installed and we are not root: apt-get install -y nginx")
    print("nginx not found: apt-get install -y nginx ...", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=False, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "nginx"], check=True, env=env, stdout=subprocess.DEVNULL
    )
    found = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(found).exists():
        raise SystemExit("apt-get install nginx did not provide an nginx binary")
    return found


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True, slots=True)
class LogEntry:
    end: float  #: $msec: when nginx finished the request (epoch seconds, ms resolution)
    duration: float  #: $request_time (ms resolution)
    host: str
    status: int
    bytes: int
    uri: str

    @property
    def start(self) -> float:
        return self.end - self.duration

    @classmethod
    def parse(cls, line: str) -> LogEntry | None:
        """One line of LOG_FORMAT, None if it is not one."""
        parts = line.split(" ", 5)
        if len(parts) != 6:
            return None
        return cls(float(parts[0]), float(parts[1]), parts[2], int(parts[3]), int(parts[4]), parts[5])


class Nginx:
    """Start, stop and read the access log of one nginx serving ``site_root``."""

    def __init__(self, workdir: Path, site_root: Path, port: int, workers: int = 1) -> None:
        self.workdir = workdir
        self.site_root = site_root
        self.port = port
        self.workers = workers
        self.access_log = workdir / "access.log"
        self.error_log = workdir / "nginx-error.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def _conf(self) -> str:
        w = self.workdir
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (w / "nginx-tmp" / sub).mkdir(parents=True, exist_ok=True)
        user = "user root root;\n" if os.geteuid() == 0 else ""
        return f"""{user}worker_processes {self.workers};
daemon off;
master_process on;
pid {w}/nginx.pid;
error_log {self.error_log} warn;
events {{ worker_connections {WORKER_CONNECTIONS}; multi_accept on; }}
http {{
    types {{ text/html html; text/plain txt; }}
    default_type application/octet-stream;
    log_format bench '{LOG_FORMAT}';
    access_log {self.access_log} bench;
    log_not_found off;
    server_tokens off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    open_file_cache max={open_file_cache_max()} inactive=120s;
    open_file_cache_errors on;
    client_body_temp_path {w}/nginx-tmp/body;
    proxy_temp_path {w}/nginx-tmp/proxy;
    fastcgi_temp_path {w}/nginx-tmp/fastcgi;
    uwsgi_temp_path {w}/nginx-tmp/uwsgi;
    scgi_temp_path {w}/nginx-tmp/scgi;
    server {{
        listen 127.0.0.1:{self.port} default_server backlog=4096;
        server_name _;
        root {self.site_root}/$host;
        index index.html;
    }}
}}
"""

    def start(self, binary: str) -> None:
        conf = self.workdir / "nginx.conf"
        conf.write_text(self._conf())
        self.access_log.touch()
        cmd = [binary, "-p", str(self.workdir), "-c", str(conf), "-e", str(self.error_log)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"nginx exited with {self.proc.returncode}: see {self.error_log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise SystemExit("nginx did not start listening within 10 s")

    def stop(self) -> None:
        """Fast shutdown of the master we started (it stops its workers), by PID."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def pids(self) -> list[int]:
        """The master and its worker processes."""
        if self.proc is None:
            return []
        master = self.proc.pid
        try:
            children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        except OSError:
            children = []
        return [master, *map(int, children)]

    def cpu_s(self) -> float:
        """User + system CPU seconds used so far by the master and workers."""
        ticks = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / ticks

    def log_offset(self) -> int:
        return self.access_log.stat().st_size

    def read_log(self, offset: int) -> list[LogEntry]:
        """Access log entries written after ``offset`` (a value of ``log_offset()``)."""
        with self.access_log.open("rb") as f:
            f.seek(offset)
            data = f.read().decode("utf-8", "replace")
        return [e for e in map(LogEntry.parse, data.splitlines()) if e is not None]
