"""Operator commands: validated from API requests, posted into a queue, applied by the loop.

The HTTP thread never touches crawl state. It turns a request into a :class:`Command`
(:func:`parse_command`: a bad body is a :class:`BadCommand`, answered 400), posts it into the
:class:`CommandQueue` and waits for the reply. The engine's loop takes every posted command once
per tick (:meth:`CommandQueue.take`), applies it and answers it (:meth:`Pending.answer`). A
write to the queue's socketpair wakes a loop that waits in ``poll`` (the fetcher watches
:attr:`CommandQueue.fileno`), so a command is applied within a tick, not after the wait.

The loop asks every tick, and almost every tick nothing is queued: that answer costs no system
call. Under the queue's lock, a post appends its command and, when the queue was empty, sets
a flag and writes the one wake byte; a take that sees the flag clears it, reads that byte and
empties the queue under the same lock. So the socketpair holds a byte exactly while the flag
is set (never one that no take would read, which would make ``poll`` return at once forever),
and a take that sees no flag (read without the lock: at worst one tick late, and the byte has
woken the loop for that tick) makes no ``recv``.

"applied" in a reply means the loop has applied the command to its in-memory state and to the
open LMDB transaction; crawl-state commands (blocks, host delays, added seeds) are durable with
the next group commit, at most ``frontier.commit_interval_s`` later. A kill -9 inside that
window loses the command (the reply said "applied", not "committed"; run it again).
"""

from __future__ import annotations

import contextlib
import ipaddress
import math
import re
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "COMMANDS",
    "BadCommand",
    "Command",
    "CommandQueue",
    "Pending",
    "normalise_host",
    "parse_command",
]

#: command name -> the API path it is posted to
COMMANDS: dict[str, str] = {
    "pause": "/api/pause",
    "resume": "/api/resume",
    "stop": "/api/stop",
    "seeds": "/api/seeds",
    "block": "/api/block",
    "unblock": "/api/unblock",
    "host-delay": "/api/host-delay",
    "concurrency": "/api/concurrency",
    "reload": "/api/reload",
}
MAX_SEEDS = 100_000  #: URLs in one add-seeds request
MAX_URL_CHARS = 8192
MAX_DELAY_S = 7 * 86_400.0  #: a week, the longest wait the frontier knows
MAX_CONCURRENCY = 10_000  #: as fetch.concurrency
#: how long the HTTP thread waits for the loop's answer (a loop inside a long commit, or
#: finishing, answers late: the reply then says the command is still queued)
REPLY_TIMEOUT_S = 10.0


class BadCommand(ValueError):
    """A request body that is not a valid command (answered 400 with this message)."""


@dataclass(slots=True, frozen=True)
class Command:
    """One operator command, validated: ``name`` from :data:`COMMANDS` and its arguments."""

    name: str
    host: str = ""  #: block, unblock, host-delay: a host name (lower case, ASCII)
    delay_s: float | None = None  #: host-delay: seconds, None to go back to the config
    value: int = 0  #: concurrency
    urls: tuple[str, ...] = ()  #: seeds


#: one label of a host name as the frontier keys it (lower case ASCII, IDNA-encoded): letters,
#: digits, ``-`` (not first or last) and ``_`` (seen in real names), 1 to 63 characters
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


def normalise_host(raw: object) -> str:
    """A host name from an operator: ``example.org``, ``Example.ORG.``, an origin or URL
    (``https://example.org:8443/x``: its host, whatever the port), an IPv4 or IPv6 address
    (with or without brackets); lower case, IDNA-encoded, as the frontier matches it (the host
    of a canonical URL, no port). BadCommand if it is not one: each dot-separated label 1-63
    letters, digits, ``-`` or ``_`` (no ``-`` first or last), 253 characters at most, or an
    IP address; a NUL, a space, markup, an empty label or a bare ``host:port`` is refused."""
    if not isinstance(raw, str) or not raw.strip():
        raise BadCommand('"host": a host name is required (e.g. "example.org")')
    text = raw.strip()
    if "://" in text:
        try:
            host = urlsplit(text).hostname or ""
        except ValueError:
            host = ""
    else:
        host = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    host = host.rstrip(".").lower()
    if not host or len(host) > 253:
        raise BadCommand(f'"host": not a host name: {raw!r}')
    if ":" in host:
        try:
            if "%" not in host:  # a zone index is no part of a URL's host
                return str(ipaddress.IPv6Address(host))
        except ValueError:
            pass
        raise BadCommand(f'"host": not a host name (a port is not part of it): {raw!r}')
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise BadCommand(f'"host": not a valid international host name: {raw!r}') from None
    if len(host) > 253 or not all(_LABEL.fullmatch(label) for label in host.split(".")):
        raise BadCommand(f'"host": not a host name: {raw!r}')
    return host


def _number(body: dict[str, Any], key: str) -> float:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise BadCommand(f'"{key}": a number is required, got {value!r}')
    return float(value)


def parse_command(name: str, body: object) -> Command:
    """The command ``name`` (a key of :data:`COMMANDS`) with the request body's arguments."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise BadCommand("the request body must be a JSON object")
    if name in ("pause", "resume", "stop", "reload"):
        return Command(name)
    if name in ("block", "unblock"):
        return Command(name, host=normalise_host(body.get("host")))
    if name == "host-delay":
        host = normalise_host(body.get("host"))
        if body.get("delay_s") is None:
            return Command(name, host=host, delay_s=None)
        delay = _number(body, "delay_s")
        if not 0 <= delay <= MAX_DELAY_S:
            raise BadCommand(f'"delay_s": must be between 0 and {MAX_DELAY_S:.0f}, got {delay}')
        return Command(name, host=host, delay_s=delay)
    if name == "concurrency":
        value = body.get("value")
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadCommand(f'"value": an integer is required, got {value!r}')
        if not 1 <= value <= MAX_CONCURRENCY:
            raise BadCommand(f'"value": must be between 1 and {MAX_CONCURRENCY}, got {value}')
        return Command(name, value=value)
    if name == "seeds":
        urls = body.get("urls")
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise BadCommand('"urls": a list of URL strings is required')
        if len(urls) > MAX_SEEDS:
            raise BadCommand(f'"urls": at most {MAX_SEEDS} per request, got {len(urls)}')
        long = next((u for u in urls if len(u) > MAX_URL_CHARS), None)
        if long is not None:
            raise BadCommand(f'"urls": longer than {MAX_URL_CHARS} characters: {long[:80]!r}...')
        return Command(name, urls=tuple(u.strip() for u in urls if u.strip()))
    raise BadCommand(f"unknown command {name!r}")


@dataclass(slots=True, eq=False)
class Pending:
    """A posted command waiting for the loop's answer."""

    command: Command
    posted_at: float = field(default_factory=time.monotonic)
    reply: dict[str, Any] | None = None
    _done: threading.Event = field(default_factory=threading.Event)

    def answer(self, reply: dict[str, Any]) -> None:
        """The loop's result (``{"result": "applied", ...}`` or ``{"error": ...}``)."""
        self.reply = reply
        self._done.set()

    def wait(self, timeout_s: float) -> dict[str, Any] | None:
        return self.reply if self._done.wait(timeout_s) else None


class CommandQueue:
    """Commands from any thread to the loop, with a wakeup socketpair the loop's wait watches."""

    def __init__(self) -> None:
        self._items: deque[Pending] = deque()
        self._lock = threading.Lock()
        #: set with the wake byte when a post finds the queue empty (module docstring)
        self._posted = False
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._closed = False

    @property
    def fileno(self) -> int:
        """Readable while commands are waiting (until :meth:`take`)."""
        return self._reader.fileno()

    def post(self, command: Command) -> Pending:
        """Queue ``command`` for the loop and wake it; :meth:`Pending.wait` for the answer."""
        pending = Pending(command)
        with self._lock:
            if self._closed:
                pending.answer({"error": "the crawl is finishing: no more commands are taken"})
                return pending
            self._items.append(pending)
            if not self._posted:
                self._posted = True
                with contextlib.suppress(OSError):  # (a one-byte write to an empty pair)
                    self._writer.send(b"\0")
        return pending

    def call(self, command: Command, timeout_s: float = REPLY_TIMEOUT_S) -> dict[str, Any]:
        """Post and wait for the loop's reply."""
        pending = self.post(command)
        reply = pending.wait(timeout_s)
        if reply is None:
            return {"result": "queued", "detail": f"not applied within {timeout_s:.0f} s; the "
                    "crawl's loop applies it when it gets to it"}  # fmt: skip
        return reply

    def take(self) -> list[Pending]:
        """Every command posted so far (the loop's call, once per tick; no system call when
        none is: module docstring)."""
        if not self._posted:
            return []
        with self._lock:
            self._posted = False
            with contextlib.suppress(OSError):  # the one wake byte (BlockingIOError: none)
                self._reader.recv(16)
            out = list(self._items)
            self._items.clear()
        return out

    def close(self, reason: str = "the crawl has finished") -> None:
        """Answer what is still queued with an error and release the socketpair."""
        with self._lock:
            self._closed = True
            left = list(self._items)
            self._items.clear()
            self._posted = False
        for pending in left:
            pending.answer({"error": reason})
        self._reader.close()
        self._writer.close()
