"""The seam between the coordinator and its workers: the shared status array (``_FIELDS`` words
per worker: idle, batches sent, batches received) and the command pipe (a worker's
``engine.CommandSource``)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from frontier_crawl.control.commands import Command

_FIELDS = 3  # per worker in the shared array: idle, sent, received


class _Remote:
    """A command from the coordinator, answered through the pipe it came by (``send``: the
    lock every sender on that pipe holds, the loop's thread and the reader's)."""

    __slots__ = ("_conn", "_rid", "_send", "command")

    def __init__(
        self, conn: Connection, rid: int, command: Command, send: threading.Lock
    ) -> None:
        self._conn, self._rid, self.command, self._send = conn, rid, command, send

    def answer(self, reply: dict[str, Any]) -> None:
        with self._send, contextlib.suppress(OSError):  # (OSError: the coordinator is gone)
            self._conn.send((self._rid, reply))


class PipeCommands:
    """A worker's command source: the coordinator's end of a pipe (engine.CommandSource).

    The loop takes the commands at its ticks (:meth:`take`), woken by the pipe. Once the engine
    offers its published status (:meth:`serve_status`), a thread of its own reads the pipe
    instead: a status is answered there at once from the latest snapshot the loop published
    (a CPU-bound loop's tick can take a few hundred milliseconds, and the coordinator's status
    waits for every worker), and everything else, or a status without a recent snapshot, is
    queued for the loop, woken through a pipe of its own."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._send = threading.Lock()
        self.closed = False  #: the coordinator's end is gone (the fd would stay readable)
        #: commands the reader thread queued for the loop (None: no reader, the loop reads)
        self._queue: deque[_Remote] | None = None
        self._wake_r = self._wake_w = -1

    @property
    def fileno(self) -> int:
        return self._conn.fileno() if self._queue is None else self._wake_r

    def serve_status(self, published: Callable[[], dict[str, Any] | None]) -> None:
        """Read the pipe in a thread from now on (the class docstring); ``published`` gives
        the reply to a status (any thread), or None when the loop should answer it. Called
        before the loop first waits on :attr:`fileno`."""
        if self._queue is not None:
            return
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._queue = deque()
        threading.Thread(target=self._read, args=(published, self._queue), daemon=True,
                         name="worker-commands").start()  # fmt: skip

    def _read(self, published: Callable[[], dict[str, Any] | None], queue: deque[_Remote]) -> None:
        try:
            while True:
                rid, command = self._conn.recv()
                remote = _Remote(self._conn, rid, command, self._send)
                reply = published() if command.name == "status" else None
                if reply is not None:
                    remote.answer(reply)
                    continue
                queue.append(remote)
                os.write(self._wake_w, b"\0")
        except (EOFError, OSError):
            self.closed = True
            with contextlib.suppress(OSError):
                os.write(self._wake_w, b"\0")  # the loop sees it at its next take

    def take(self) -> Sequence[_Remote]:
        queue = self._queue
        if queue is not None:
            with contextlib.suppress(OSError):  # (BlockingIOError once drained)
                while os.read(self._wake_r, 4096):
                    pass
            return [queue.popleft() for _ in range(len(queue))]
        out: list[_Remote] = []
        try:
            while self._conn.poll(0):
                rid, command = self._conn.recv()
                out.append(_Remote(self._conn, rid, command, self._send))
        except (EOFError, OSError):
            self.closed = True
        return out
