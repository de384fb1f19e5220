"""A fetcher wrapper for e2e tests: a real Fetcher that remembers every submitted request."""

from __future__ import annotations

import time

from frontier_crawl.fetch import Fetcher, FetchRequest, FetchResult

__all__ = ["RecordingFetcher"]


class RecordingFetcher:
    """Delegates to ``fetcher``; ``submitted`` lists every URL the engine asked for, and
    ``started`` when (``time.monotonic()``, as it was handed to the fetcher)."""

    def __init__(self, fetcher: Fetcher) -> None:
        self.inner = fetcher
        self.submitted: list[str] = []
        self.started: list[float] = []

    @property
    def free_slots(self) -> int:
        return self.inner.free_slots

    @property
    def in_flight(self) -> int:
        return self.inner.in_flight

    def submit(self, req: FetchRequest) -> None:
        self.submitted.append(req.url)
        self.started.append(time.monotonic())
        self.inner.submit(req)

    def poll(self, timeout_s: float) -> list[FetchResult]:
        return self.inner.poll(timeout_s)

    def close(self) -> None:
        self.inner.close()
