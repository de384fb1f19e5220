"""What the engine's loop needs of its collaborators, as ``Protocol``s (each implemented
elsewhere: ``fetch.Fetcher``, ``workers.Peers``, ``control.commands``), and the crawl's files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from frontier_crawl.control.commands import Command
from frontier_crawl.fetch import FetchRequest, FetchResult


@dataclass(slots=True, frozen=True)
class Layout:
    """Where a crawl keeps its files, all under ``output_dir``."""

    root: Path

    @property
    def warc_dir(self) -> Path:
        return self.root / "warc"

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def crawl_log(self) -> Path:
        return self.root / "crawl.jsonl"

    @property
    def report(self) -> Path:
        return self.root / "report.json"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"


class PeersLike(Protocol):
    """The other worker processes, as one worker sees them (``frontier_crawl.workers.Peers``)."""

    worker: int
    run_id: bytes

    def route(self, origin: str) -> int: ...
    def send(self, dest: int, batch: bytes) -> bool:
        """True once ``dest`` has the batch; False if the transport cannot take it now (a
        full Redis): it stays in the outbox and is sent again later."""
        ...

    def held_up(self, batches: int) -> str:
        """Why ``batches`` wait to be sent, for the status ("" if the transport is fine)."""
        ...

    def publish(self, idle: bool, received: int) -> None: ...
    def should_stop(self) -> bool: ...
    def orders(self) -> tuple[bool, int]:
        """(stop requested, reloads ordered so far): the coordinator's signals, passed on."""
        ...


class PendingLike(Protocol):
    """A posted command waiting for the loop's answer (``control.commands.Pending``)."""

    @property
    def command(self) -> Command: ...
    def answer(self, reply: dict[str, Any]) -> None: ...


class CommandSource(Protocol):
    """Where operator commands come from: the control API's queue (``control/commands.py``),
    or, in a worker process, the coordinator's pipe (``workers/seam.py``)."""

    @property
    def fileno(self) -> int: ...
    def take(self) -> Sequence[PendingLike]: ...


class FetcherLike(Protocol):
    """The fetch seam: what the engine needs of a fetcher (``fetch.Fetcher``, or a null one)."""

    @property
    def free_slots(self) -> int: ...
    @property
    def in_flight(self) -> int: ...
    def submit(self, req: FetchRequest) -> None: ...
    def poll(self, timeout_s: float) -> list[FetchResult]: ...
    def close(self) -> None: ...

