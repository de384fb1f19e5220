"""What the loop is doing, as one small record: written by the loop and by steering (each
field has one writer, named beside it), read by observing (``observe.py``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from frontier_crawl.control.status import CrawlState
from frontier_crawl.output.space import LowSpace

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LoopState:
    """The loop's state as status reads it (mutable; the loop's thread writes it)."""

    #: starting, running, finished (the loop); stopping and paused are derived (``observe``)
    state: CrawlState = "starting"
    thread: int = 0  #: the loop's thread (the loop)
    stop_requested: int = 0  #: signals or stop orders received (steering)
    halt: str = ""  #: why the loop stops without a signal, "low-disk-space" (the space guard)
    past_deadline: bool = False  #: the stop's deadline passed (``deadline.py``)
    paused: bool = False  #: by the operator (steering)
    low_space: LowSpace | None = None  #: set while fetching is paused for space (the guard)
    held_up: int = 0  #: outbox batches the transport could not take (the peer exchange)
    last_request: float = field(default=0.0)  #: when the last request was sent (the loop)

    @property
    def stopping(self) -> bool:
        return bool(self.stop_requested or self.halt)


@contextmanager
def quiet() -> Iterator[None]:
    """Suppress (and debug-log) an exception while releasing resources after a failure."""
    try:
        yield
    except Exception:
        log.debug("while releasing resources after a failure", exc_info=True)
