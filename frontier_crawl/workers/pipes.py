"""The coordinator's command pipes to its workers (with the control API only): a command sent
to one worker at a time per pipe, its reply matched by a request id."""

from __future__ import annotations

import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from frontier_crawl.control.commands import Command


class WorkerPipes:
    """The coordinator's ends of the workers' command pipes, in the order of its partitions
    (none without the control API: then it is false)."""

    __slots__ = ("_conns", "_locks", "_rid")

    def __init__(self, conns: list[Connection]) -> None:
        self._conns = conns
        self._locks = [threading.Lock() for _ in conns]
        self._rid = 0

    def __bool__(self) -> bool:
        return bool(self._conns)

    def ask(self, index: int, command: Command, timeout_s: float = 10.0) -> dict[str, Any]:
        """Send ``command`` to worker ``index`` and wait for its reply."""
        conn = self._conns[index]
        with self._locks[index]:
            self._rid += 1
            rid = self._rid
            try:
                conn.send((rid, command))
                deadline = time.monotonic() + timeout_s
                while (left := deadline - time.monotonic()) > 0 and conn.poll(left):
                    got, reply = conn.recv()
                    if got == rid:
                        return dict(reply)
            except (EOFError, OSError):
                return {"error": f"worker {index} has ended"}
        return {"error": f"worker {index} did not answer within {timeout_s:.0f} s"}
