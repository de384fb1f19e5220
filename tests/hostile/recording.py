"""A fetcher wrapper for e2e tests: a real Fetcher that remembers every submitted request."""

from __future__ import annotations

from frontier_crawl.fetch import Fetcher, FetchRequest, FetchResult

__all__ = ["RecordingFetcher"]


class RecordingFetcher:
    """Delegates to ``fetcher``; ``submitted`` lists every URL the engine asked for."""

    def __init__(self, fetcher: Fetcher) -> None:
        self.inner = fetcher
        self.submitted: list[str] = []

    @property
    def free_slots(self) -> int:
        return self.inner.free_slots

    @property
    def in_flight(self) -> int:
        return self.inner.in_flight

    def submit(self, req: FetchRequest) -> None:
        self.submitted.append(req.url)
        self.inner.submit(req)

    def poll(self, timeout_s: float) -> list[FetchResult]:
        return self.inner.poll(timeout_s)

    def close(self) -> None:
        self.inner.close()
