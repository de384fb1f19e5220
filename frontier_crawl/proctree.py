"""The crawl's processes: who owns a state directory, who takes the terminal's signals, and
how no child outlives its parent.

One owner per state directory. :class:`StateLock` is an exclusive ``flock`` on
``<dir>/state/lock``, taken before anything of the directory is read or repaired and held for the
life of the run. The kernel drops it when the last process holding the file closes (at its
exit, ``kill -9`` included), so it never needs cleaning up. The holder writes its PID, its
start time and its command into the file: a second instance refuses at once, naming them, while
that process lives; when the process named there has ended (gone, a zombie not yet reaped, or its
PID reused) the lock is held only by its dying children, and the new run waits for them to end
(one log line; bounded by ``LOCK_WAIT_S``), so a restart 100 ms after a ``kill -9`` resumes.

Signals. Only the main process acts on SIGINT, SIGTERM and SIGHUP. A terminal's Ctrl-C,
``timeout(1)`` and systemd's ``KillMode=control-group`` send them to every process of the crawl
at once; the children (worker processes, WARC writers) ignore them from their first instruction
(they start under ``/bin/sh``'s ``trap '' INT TERM HUP``, and an ignored signal stays ignored across
``exec``: Python then installs no KeyboardInterrupt handler) and are stopped by their parent.

Lifetimes. A child asks the kernel to SIGKILL it when its parent dies
(:func:`die_with_parent`: ``PR_SET_PDEATHSIG``, which fires on the exit of the parent *thread*
that started it, so children are started from the main thread), checks that its parent has not
died already, and watches its parent's end of a pipe besides (where there is no ``prctl``).
So after a ``kill -9`` of any process of the crawl, its descendants are gone within
milliseconds and never write another byte.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import logging
import multiprocessing as mp
import multiprocessing.connection
import multiprocessing.spawn
import os
import shlex
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from multiprocessing.context import SpawnContext
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: the signals only the main process acts on; children ignore them
TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: how long a new run waits for the children of an ended holder to release the lock
LOCK_WAIT_S = 30.0
LOCK_NAME = "lock"
#: the interpreter wrapper of the worker processes, in the state directory
SPAWN_SCRIPT = "spawn-python"
_POLL_S = 0.02

#: ``sh -c`` program that ignores the terminal's signals, then becomes ``"$0" "$@"``
_IGNORE_THEN_EXEC = "trap '' INT TERM HUP; exec \"$0\" \"$@\""


class StateLocked(Exception):
    """Another live process owns the state directory (exit status 2)."""


#: how long user code may swallow the stop deadline's interruptions before the crawl winds up
#: around it (``engine/deadline.py``); a coordinator gives a worker this long beyond it too
FORCE_AFTER_S = 2.0
#: the signal a coordinator sends a worker whose stop's deadline passed (here, not in the
#: engine: the coordinator's process imports no engine)
EXPIRE_SIGNAL = signal.SIGUSR1

# -------------------------------------------------------------------------------- processes


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of ``pid`` from /proc; None if it is gone or
    /proc does not show it (none, or hidden: ``hidepid``)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # after "pid (comm) ": state is field 3
    return fields[0].decode(), int(fields[19])  # field 22: starttime


def pid_exists(pid: int) -> bool:
    """kill(pid, 0): True for a running process, a zombie, or another user's."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_time(pid: int) -> int:
    """The start time of ``pid`` (clock ticks since boot; 0 where there is no /proc)."""
    st = proc_stat(pid) if pid > 0 else None
    return st[1] if st else 0


def alive(pid: int, started: int = 0) -> bool:
    """Whether ``pid`` is a live process (not a zombie; with ``started``, the same process that
    had that start time, not a later one given the same PID)."""
    if pid <= 0:
        return False
    if not Path("/proc/self/stat").exists():  # no /proc: what kill(pid, 0) can tell
        return pid_exists(pid)
    st = proc_stat(pid)
    if st is None or st[0] in ("Z", "X", "x"):
        return False
    return not started or st[1] == started


def _holders(path: Path) -> list[int]:
    """The PIDs with ``path`` open (for a message; those /proc lets this user see)."""
    try:
        target = os.stat(path)
    except OSError:
        return []
    pids = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    st = os.stat(fd)
                    if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                        pids.append(int(entry.name))
                        break
    return pids


# ---------------------------------------------------------------------------- the state lock


class StateLock:
    """An exclusive lock on one state directory (see the module docstring)."""

    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @property
    def fileno(self) -> int:
        """The lock's descriptor: a child given it (``pass_fds``) holds the lock until it ends."""
        assert self._fd is not None
        return self._fd

    @classmethod
    def acquire(cls, state_dir: Path, *, wait_s: float = LOCK_WAIT_S) -> StateLock:
        """Take the lock on ``state_dir`` (created, mode 0700, if need be). Raises
        :class:`StateLocked` if a live process holds it, or if the children of an ended one
        still hold it after ``wait_s``."""
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = state_dir / LOCK_NAME
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StateLocked(
                    f"{path} is a symbolic link: the crawl never writes through one. Remove it "
                    "(and find out who planted it), then run the same command."
                ) from None
            raise
        try:
            cls._lock(fd, path, wait_s)
            info = {
                "pid": os.getpid(),
                "started": start_time(os.getpid()),
                "host": socket.gethostname(),
                "since": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                "command": shlex.join(sys.argv)[:300],
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode() + b"\n", 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, path)

    @staticmethod
    def _lock(fd: int, path: Path, wait_s: float) -> None:
        deadline = None
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            holder = _read_holder(fd)
            pid, started = int(holder.get("pid", 0)), int(holder.get("started", 0))
            if alive(pid, started) and holder.get("host", socket.gethostname()) == (
                socket.gethostname()
            ):
                raise StateLocked(
                    f"{path.parent.parent} is in use by process {pid} "
                    f"({holder.get('command', '?')}, running since {holder.get('since', '?')}): "
                    "one crawl per output directory. Stop that process first (kill -TERM "
                    f"{pid}, then wait for it to exit), or choose another crawl.output_dir."
                )
            if holder.get("host", socket.gethostname()) != socket.gethostname():
                raise StateLocked(
                    f"{path.parent.parent} is in use by process {pid} on "
                    f"{holder.get('host')} (a shared file system): one crawl per output "
                    "directory. Stop it there first, or choose another crawl.output_dir."
                )
            now = time.monotonic()
            if deadline is None:
                deadline = now + wait_s
            if not said and pid:  # the holder ended; what holds the lock now: its dying children
                # (no pid: a holder that has only just taken the lock, about to write it)
                log.warning(
                    "%s: process %s of the previous run has ended; waiting up to %.0f s for "
                    "its remaining processes to exit", path, pid or "?", wait_s,
                )  # fmt: skip
                said = True
            if now >= deadline:
                held = ", ".join(str(p) for p in _holders(path)) or "unknown"
                raise StateLocked(
                    f"{path} is still held by process(es) {held}, left over from process "
                    f"{pid or '?'}, which has ended: end them (kill PID), then run the same "
                    "command again."
                )
            time.sleep(_POLL_S)  # a lock held by processes that are being killed: brief

    def release(self) -> None:
        """Give the lock up (descendants handed its descriptor still hold it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release()


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        holder = json.loads(raw) if raw.strip() else {}
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


# ----------------------------------------------------------------------------- the children


def child_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` run with the terminal's signals ignored from its first instruction."""
    return ["/bin/sh", "-c", _IGNORE_THEN_EXEC, *argv]


@contextlib.contextmanager
def spawning(ctx: SpawnContext, directory: Path) -> Iterator[None]:
    """Processes started by ``ctx`` meanwhile ignore the terminal's signals from their first
    instruction: their interpreter is started through a ``/bin/sh`` script that traps them,
    written afresh (never through a link) into ``directory``, a state directory of this run's."""
    script = directory / SPAWN_SCRIPT
    with contextlib.suppress(FileNotFoundError):
        script.unlink()
    fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700)
    with os.fdopen(fd, "w") as f:
        f.write(f"#!/bin/sh\ntrap '' INT TERM HUP\nexec {shlex.quote(sys.executable)} \"$@\"\n")
    previous = multiprocessing.spawn.get_executable()
    ctx.set_executable(str(script))
    try:
        yield
    finally:
        ctx.set_executable(str(previous))


def ignore_terminal_signals() -> None:
    """Ignore SIGINT, SIGTERM and SIGHUP (a child: its parent stops it)."""
    for sig in TERMINAL_SIGNALS:
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(sig, signal.SIG_IGN)


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no-op elsewhere); if the parent
    (``parent``, its PID) has already died, end now."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:  # it died before the prctl
        os._exit(1)


def watch_parent() -> None:
    """End this process (SIGKILL) as soon as its multiprocessing parent ends: a belt to
    ``PR_SET_PDEATHSIG``'s braces, for systems without it."""
    parent = mp.parent_process()
    sentinel = getattr(parent, "sentinel", None)
    if sentinel is None:
        return

    def wait() -> None:
        mp.connection.wait([sentinel])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=wait, name="watch-parent", daemon=True).start()


def unlink_semaphores(shared: Sequence[Any]) -> int:
    """Remove the names of the POSIX semaphores behind ``shared`` (multiprocessing objects of
    a spawn context: ``Value``, ``Array``, ``Queue``, locks; None is skipped), once every
    process that opens them by name has done so. They live on while a process holds them, as
    an unlinked file does; what is gone is the name, which multiprocessing otherwise removes
    only at a normal exit and its resource tracker after any other, with a warning that it
    found them "leaked". Each name is removed by the object's own finalizer, called now (it
    unlinks the name and tells the tracker), so nothing is left to do at exit. Returns how
    many names were removed."""
    from multiprocessing import synchronize, util

    names: set[str] = set()
    for obj in shared:
        for lock in _semlocks(obj):
            name = getattr(getattr(lock, "_semlock", None), "name", None)
            if isinstance(name, str):
                names.add(name)
    if not names:
        return 0
    cleanup = getattr(synchronize.SemLock, "_cleanup", None)
    done = 0
    for finalizer in list(util._finalizer_registry.values()):  # type: ignore[attr-defined]
        args = getattr(finalizer, "_args", None)
        callback = getattr(finalizer, "_callback", None)
        if callback is cleanup and args and args[0] in names:
            try:
                finalizer()
            except OSError as exc:  # (already gone)
                log.debug("semaphore %s: %s", args[0], exc)
            done += 1
    return done


def _semlocks(obj: Any) -> list[Any]:
    """The SemLocks of a multiprocessing object (a synchronized value's lock, a queue's)."""
    if obj is None:
        return []
    found = []
    get_lock = getattr(obj, "get_lock", None)
    if callable(get_lock):
        found.append(get_lock())
    for attr in ("_rlock", "_wlock", "_sem"):  # multiprocessing.queues.Queue
        lock = getattr(obj, attr, None)
        if lock is not None:
            found.append(lock)
    return found
