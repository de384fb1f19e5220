"""The seam between the coordinator and its workers: the shared status array (``_FIELDS`` words
per worker: idle, batches sent, batches received) and the command pipe (a worker's
``engine.CommandSource``)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from frontier_crawl.control.commands import Command

_FIELDS = 3  # per worker in the shared array: idle, sent, received


class _Remote:
    """A command from the coordinator, answered through the pipe it came by."""

    __slots__ = ("_conn", "_rid", "command")

    def __init__(self, conn: Connection, rid: int, command: Command) -> None:
        self._conn, self._rid, self.command = conn, rid, command

    def answer(self, reply: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):  # the coordinator is gone
            self._conn.send((self._rid, reply))


class PipeCommands:
    """A worker's command source: the coordinator's end of a pipe (engine.CommandSource)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.closed = False  #: the coordinator's end is gone (the fd would stay readable)

    @property
    def fileno(self) -> int:
        return self._conn.fileno()

    def take(self) -> Sequence[_Remote]:
        out: list[_Remote] = []
        try:
            while self._conn.poll(0):
                rid, command = self._conn.recv()
                out.append(_Remote(self._conn, rid, command))
        except (EOFError, OSError):
            self.closed = True
        return out
