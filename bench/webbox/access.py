"""The generator's request logs read back (``requests-<n>.log``, see :mod:`bench.webbox.server`)."""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: statuses after which a crawler asks again: they are not a fetch of the URL
RETRIED = frozenset({"429", "500", "502", "503", "504", "RST", "---"})


@dataclass(frozen=True, slots=True)
class Request:
    t: float  #: when the request was read (Unix seconds)
    host: str
    target: str  #: origin-form path and query
    status: str  #: HTTP status, "RST" (reset) or "---" (never answered)
    size: int


def read_requests(log_dir: Path) -> list[Request]:
    """Every logged request of every child, in time order."""
    out = []
    for path in sorted(log_dir.glob("requests-*.log")):
        with path.open() as f:
            for line in f:
                t, host, target, status, size = line.rstrip("\n").split("\t")
                out.append(Request(float(t), host, target, status, int(size)))
    out.sort(key=lambda r: r.t)
    return out


def fetched(requests: Iterable[Request]) -> Counter[tuple[str, str]]:
    """How many times each URL (host, target) was answered with a final status (robots.txt
    excluded): retried answers (429, 5xx, resets, no answer) are not fetches."""
    return Counter((r.host, r.target) for r in requests if _final(r.status, r.target))


def duplicates(requests: Iterable[Request]) -> dict[tuple[str, str], int]:
    """URLs fetched more than once: their fetch counts."""
    return {url: n for url, n in fetched(requests).items() if n > 1}


def _final(status: str, target: str) -> bool:
    return status not in RETRIED and target != "/robots.txt"


def duplicate_times(log_dir: Path, tmp_dir: Path) -> dict[tuple[str, str], list[float]]:
    """URLs fetched more than once (as :func:`fetched` counts), with the times of their fetches.

    For logs of 10^7 lines: sort(1) finds the repeated URLs on disk, and only those are held
    in memory, with their times from a second pass."""
    logs = sorted(str(p) for p in log_dir.glob("requests-*.log"))
    if not logs:
        return {}
    retried = "|".join(s for s in sorted(RETRIED))
    program = f'$4 !~ /^({retried})$/ && $3 != "/robots.txt" {{print $2 "\\t" $3}}'
    awk = subprocess.Popen(["awk", "-F", "\t", program, *logs], stdout=subprocess.PIPE,
                           env={**os.environ, "LC_ALL": "C"})  # fmt: skip
    out = subprocess.run(["sort", "-S", "256M", "-T", str(tmp_dir)], stdin=awk.stdout,
                         capture_output=True, check=True, env={**os.environ, "LC_ALL": "C"})  # fmt: skip
    awk.wait()
    repeated: dict[tuple[str, str], list[float]] = {}
    previous = None
    for line in out.stdout.split(b"\n"):
        if line and line == previous:
            host, target = line.decode().split("\t")
            repeated[(host, target)] = []
        previous = line
    if not repeated:
        return repeated
    for path in logs:
        with open(path) as f:
            for line in f:
                t, host, target, status, _size = line.rstrip("\n").split("\t")
                times = repeated.get((host, target))
                if times is not None and _final(status, target):
                    times.append(float(t))
    return repeated


def first_request_after(log_dir: Path, t: float) -> float | None:
    """The time of the first request read after ``t`` (robots.txt aside), over all logs."""
    first = None
    for path in log_dir.glob("requests-*.log"):
        with path.open() as f:
            for line in f:
                ts, _host, target, _rest = line.split("\t", 3)
                when = float(ts)
                if when > t and target != "/robots.txt" and (first is None or when < first):
                    first = when
    return first
