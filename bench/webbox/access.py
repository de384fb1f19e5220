"""The generator's request logs read back (``requests-<n>.log``, see :mod:`bench.webbox.server`)."""

from __future__ import annotations

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
    return Counter(
        (r.host, r.target)
        for r in requests
        if r.status not in RETRIED and r.target != "/robots.txt"
    )


def duplicates(requests: Iterable[Request]) -> dict[tuple[str, str], int]:
    """URLs fetched more than once: their fetch counts."""
    return {url: n for url, n in fetched(requests).items() if n > 1}
