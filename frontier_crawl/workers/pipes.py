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
        with self._locks[index]:
            self._rid += 1
            rid: int | None = self._rid
            try:
                self._conns[index].send((rid, command))
            except (EOFError, OSError):
                rid = None
            return self._reply(index, rid, time.monotonic() + timeout_s, timeout_s)

    def ask_all(self, command: Command, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """Send ``command`` to every worker, then wait for their replies, within ``timeout_s``
        in all: a status costs the slowest worker's tick, not the sum of every worker's."""
        for lock in self._locks:  # (in index order: two callers never hold each other's)
            lock.acquire()
        try:
            rids: list[int | None] = []
            for conn in self._conns:
                self._rid += 1
                try:
                    conn.send((self._rid, command))
                    rids.append(self._rid)
                except (EOFError, OSError):
                    rids.append(None)
            deadline = time.monotonic() + timeout_s
            return [self._reply(i, rid, deadline, timeout_s) for i, rid in enumerate(rids)]
        finally:
            for lock in self._locks:
                lock.release()

    def _reply(
        self, index: int, rid: int | None, deadline: float, timeout_s: float
    ) -> dict[str, Any]:
        """Worker ``index``'s reply to request ``rid`` (None: it could not be sent)."""
        conn = self._conns[index]
        try:
            while rid is not None and (left := deadline - time.monotonic()) > 0 and conn.poll(left):
                got, reply = conn.recv()
                if got == rid:
                    return dict(reply)
        except (EOFError, OSError):
            rid = None
        if rid is None:
            return {"error": f"worker {index} has ended"}
        return {"error": f"worker {index} did not answer within {timeout_s:.0f} s"}
