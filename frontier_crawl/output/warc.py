"""WARC 1.1 output: one gzip member per record, files rotated by size.

File layout::

    warcinfo                                   (first record of every file)
    response  WARC-Record-ID: <A>              (per fetch)
    request   WARC-Concurrent-To: <A>          (same Target-URI, Date and IP-Address)
    ...

A file is written as ``<name>.open`` and renamed to ``<name>`` (after an fsync) when it passes
``max_bytes`` or the writer closes, so a finished name is always a complete file.

Durability. ``written()`` counts the writes whose records are *durable*: with ``durable=True``
(the default; ``output.durability = "power-loss"``) fdatasynced, so they survive an OS crash or
power cut (the ``.open`` name is fsynced into its directory when the file is created); with
``durable=False`` ("process-crash") only handed to the OS, which survives a kill of the
crawler but not of the OS. The child batches the fdatasyncs: at most one per
``sync_interval_s`` while records keep coming, and one that long after the last record at the
latest, so the cost is a few syscalls a second whatever the page rate. Names are
``{prefix}-{UTC YYYYmmddHHMMSSffffff}-{serial:05d}-{pid}.warc.gz``.

The response record's block is the response header block *as received*, minus its
``Transfer-Encoding`` lines, followed by the payload as received after de-chunking (libcurl
removes chunked framing, so leaving the header would make readers de-chunk again; a
``Content-Encoding`` stays, since the payload is still encoded). warcio normally re-serialises
parsed headers (normalising spacing, folding and percent-encoding non-ASCII values);
:class:`_VerbatimHeaders` keeps the received bytes instead, which is what an archive is for.
When ``header_bytes`` holds several blocks (1xx interim responses, redirects libcurl
followed), the last one is the response the payload belongs to.

Incomplete responses (the transfer failed after the response headers arrived: connection
closed or reset mid-body, timeout, size cap) are archived, never as complete ones: the response
record carries ``WARC-Truncated`` (WARC 1.1 section 5.13: ``length`` for the size cap, ``time``
for a timeout, ``disconnect`` for a broken connection, ``unspecified`` otherwise) and the payload
holds what arrived (nothing past the size cap). Transfers that got no response are not archived.

A ``304 Not Modified`` that confirmed an earlier capture (the HTTP cache of a recrawl) is a
``revisit`` record instead of a response (profile ``server-not-modified``): the 304's header
block, no payload, and ``WARC-Refers-To-Target-URI`` / ``WARC-Refers-To-Date`` naming the
capture that holds the payload.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from io import BytesIO
from multiprocessing.connection import Connection
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO, Self

from isal import isal_zlib
from warcio.recordbuilder import RecordBuilder
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.warcwriter import WARCWriter
from zlib_ng import zlib_ng

from frontier_crawl import __version__
from frontier_crawl.output.fsync import fsync_directory
from frontier_crawl.proctree import child_argv, die_with_parent, ignore_terminal_signals
from frontier_crawl.safefs import make_dir

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from frontier_crawl.config import CrawlSettings

_WARC_1_1_SPEC = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
_CONTROL_ESCAPES = {c: f"%{c:02X}" for c in (*range(0x21), 0x7F)}
_BUILDER = RecordBuilder(warc_version="1.1")  # builds records; a WARCWriter writes them
SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
#: WARC-Truncated value for a crawl-log error kind; other kinds are "unspecified"
#: fdatasyncs per group commit interval, at most (power-loss durability): two, so a page's
#: records wait for their sync half an interval on average, not a whole one (measured: with one,
#: kill -9 refetched about twice as many pages as without syncing; with two, about as many), 40
#: a second at most with the default commit_interval_s, in the writer process
SYNCS_PER_COMMIT = 2
_TRUNCATED_BY = {"too-large": "length", "timeout": "time", "truncated": "disconnect"}


def truncation_reason(error: str) -> str:
    """The ``WARC-Truncated`` value for a response that ended with crawl-log error ``error``."""
    return _TRUNCATED_BY.get(error, "unspecified")


@dataclass(slots=True, frozen=True)
class Revisit:
    """The earlier capture a 304 confirmed: its target URI and WARC-Date (epoch seconds)."""

    uri: str
    date: float


@dataclass(slots=True, frozen=True)
class ArchiveRecord:
    """One fetch as it went over the wire."""

    url: str
    ip: str  #: remote address, "" when unknown (WARC-IP-Address is then omitted)
    fetched_at: float  #: wall clock (time.time()) of the fetch
    request_bytes: bytes  #: request header block as sent
    header_bytes: bytes  #: response status line + headers as received
    payload: bytes  #: body as received after de-chunking; may still be gzip-encoded
    truncated: str | None = None  #: WARC-Truncated reason when the payload is incomplete
    revisit_of: Revisit | None = None  #: set for a 304 confirming that capture (no payload)


class WarcWriter:
    """Writes ArchiveRecords as response/request pairs into rotating ``.warc.gz`` files.

    ``info`` adds fields to each file's warcinfo record (``operator``, ``isPartOf``,
    ``http-header-user-agent``...); ``software``, ``format``, ``conformsTo`` and ``hostname``
    are filled in unless given. Not thread-safe: one writer per process, called from one
    thread.

    The records are built and compressed beside the caller (``background=True``, the
    default): :meth:`write` sends the ``ArchiveRecord`` over a socket pair to a child process,
    which builds the WARC records (warcio: WARC headers, digests), compresses each into its own
    gzip member, appends them and rotates files (``_Files``). That is about 1 ms of CPU for a
    20 KB page at gzip level 6 (0.4 of it deflate), none of it on the crawl loop. A thread
    would not take it off the loop: it needs the GIL back after every record, and a busy loop
    hands the GIL over only every ``sys.getswitchinterval()`` (measured: no faster than
    writing inline).

    Order is kept (one socket, one child). The socket's buffer (a few hundred pages) bounds
    what waits for the child: ``write`` blocks when it is full. :meth:`written` tells, without
    waiting, how many writes the child has handed to the OS (it reports as it goes), and
    :meth:`flush` waits until it has handed everything, so "flushed" means what it means
    inline. An error in the child (a full disk)
    stops all later appends, so no record follows a damaged one, and is raised by the next
    ``flush`` or ``close`` (or ``write``, once known). The child dies with its parent
    (``PR_SET_PDEATHSIG`` on Linux, end of the socket elsewhere), so after a kill no orphan
    writes beside the next run's recovery of the ``.open`` file.
    """

    def __init__(
        self,
        directory: Path,
        prefix: str,
        max_bytes: int,
        info: Mapping[str, str],
        gzip_level: int = 0,
        *,
        compressor: str = "zlib-ng",
        background: bool = True,
        durable: bool = True,
        sync_interval_s: float = 0.05,
        keep_fds: Sequence[int] = (),
    ):
        """``gzip_level`` 0 is ``compressor``'s default level (``COMPRESSORS``); ``durable``
        and ``sync_interval_s``: see the module docstring. ``keep_fds``: descriptors the child
        holds for its life (the state directory's lock: the directory is not free until the
        child, too, has ended)."""
        _check_prefix(prefix)
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        if compressor not in COMPRESSORS:
            raise ValueError(f"compressor must be one of {sorted(COMPRESSORS)}, got {compressor!r}")
        default, top = COMPRESSORS[compressor]
        if not 0 <= gzip_level <= top:
            raise ValueError(f"{compressor} gzip_level must be 0..{top}, got {gzip_level}")
        level = gzip_level or default
        make_dir(directory)
        files = _Files(
            directory, prefix, max_bytes, _warcinfo_fields(info), level, compressor, durable
        )
        self._sink: _Files | _ChildSink = (
            _ChildSink(files, sync_interval_s, keep_fds) if background else files
        )
        self._closed = False
        self._sent = 0

    @classmethod
    def from_settings(
        cls,
        settings: CrawlSettings,
        directory: Path,
        info: Mapping[str, str],
        *,
        keep_fds: Sequence[int] = (),
    ) -> WarcWriter:
        """Build from ``[output] warc_prefix``, ``warc_max_bytes``, ``warc_gzip_level``,
        ``warc_compressor`` and ``durability`` (``power-loss``: fdatasynced, at most
        SYNCS_PER_COMMIT times per ``frontier.commit_interval_s``)."""
        out = settings.output
        return cls(
            directory,
            out.warc_prefix,
            out.warc_max_bytes,
            info,
            out.warc_gzip_level,
            compressor=out.warc_compressor,
            durable=out.durability == "power-loss",
            sync_interval_s=settings.frontier.commit_interval_s / SYNCS_PER_COMMIT,
            keep_fds=keep_fds,
        )

    @property
    def paths(self) -> tuple[Path, ...]:
        """Finished (closed and renamed) files, oldest first (as of the child's last report)."""
        return tuple(self._sink.paths)

    def write(self, rec: ArchiveRecord) -> int:
        """Append a response record and its request record; rotate past ``max_bytes``.

        Returns the write's sequence number (1, 2, ...): :meth:`written` reaching it means the
        records are handed to the OS. Raises ValueError for an empty ``header_bytes`` or a
        closed writer.
        """
        if self._closed:
            raise ValueError("write to a closed WarcWriter")
        if not rec.header_bytes.strip():  # here, not in the child: the caller's mistake
            raise ValueError(f"empty response header block for {rec.url}")
        self._sink.append([rec])
        self._sent += 1
        return self._sent

    def written(self) -> int:
        """How many writes are durable so far (module docstring), without waiting: the child
        reports its progress as it goes (see :meth:`write`). Raises OSError if writing
        failed."""
        return self._sink.written()

    def flush(self) -> None:
        """Make every record written so far durable (handed to the OS, and fdatasynced if
        ``durable``); raises OSError if writing failed."""
        self._sink.flush()

    # the output protocol (protocol.py); no commit point: start-up recovery closes the
    # ``.open`` file at its last complete record, and a record of a page not marked done is
    # written again when the page is fetched again (a duplicate, never a loss)
    name = "warc"

    def prepare_commit(self, upto: int | None = None) -> None:
        """Before a commit: wait for the writes up to ``upto`` (None: all) to be durable; the
        others are reported by :meth:`written` as the child gets to them."""
        if upto is None or self.written() < upto:
            self.flush()

    def durable(self) -> int:
        return self.written()

    def commit_point(self) -> bytes | None:
        return None

    def discard(self) -> None:
        """After a failed write: close (what the child has is in the ``.open`` file, cut
        back at the next start-up to its last complete record)."""
        self.close()

    def close(self) -> None:
        """Finish the current file (and stop the child). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._sink.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Files:
    """The WARC files themselves: gzip members appended, files rotated, fsynced and renamed."""

    def __init__(
        self,
        directory: Path,
        prefix: str,
        max_bytes: int,
        info: dict[str, str],
        level: int,
        compressor: str = "zlib-ng",
        durable: bool = True,
    ) -> None:
        self.directory = directory
        self.durable = durable
        self.prefix = prefix
        self.max_bytes = max_bytes
        self.info = info
        self.level = level
        self.compressor = compressor
        self.paths: list[Path] = []
        self._serial = 0
        self._file: BinaryIO | None = None
        self._name = ""
        self._serializer: _Serializer | None = None  #: made where it is used (in the child)
        self.appended = 0  #: records appended so far
        self.synced = 0  #: records durable so far (fdatasynced, or in a finished file)

    @property
    def path(self) -> Path:
        """The file being written."""
        return self.directory / f"{self._name}.open"

    def written(self) -> int:
        """Records durable (module docstring): all of them, once flushed."""
        self.flush()
        return self.appended

    def durable_count(self) -> int:
        """Records as :meth:`WarcWriter.written` counts them, as of the last flush."""
        return self.synced if self.durable else self.appended

    def append(self, records: list[ArchiveRecord]) -> None:
        """Append each fetch's response (or revisit) and request records, each its own gzip
        member; rotate past ``max_bytes``."""
        if self._serializer is None:
            self._serializer = _Serializer()
        serialize = self._serializer.serialize
        members: list[bytes] = []
        for rec in records:
            response = _response_record(rec)
            members.append(_gzip_member(serialize(response), self.level, self.compressor))
            if rec.request_bytes.strip():
                request = _request_record(rec, response)
                members.append(_gzip_member(serialize(request), self.level, self.compressor))
        if self._file is None:
            self._open()
        assert self._file is not None
        self._file.write(b"".join(members))
        self.appended += len(records)
        if self._file.tell() > self.max_bytes:
            self._finish()

    def hand_over(self) -> None:
        """Hand the records to the OS (no fdatasync)."""
        if self._file is not None:
            self._file.flush()

    def flush(self) -> None:
        """Hand the records to the OS and, if ``durable``, fdatasync them."""
        if self._file is not None:
            self._file.flush()
            if self.durable and self.synced < self.appended:
                os.fdatasync(self._file.fileno())
        self.synced = self.appended

    def close(self) -> None:
        if self._file is not None:
            self._finish()

    def _open(self) -> None:
        """Start the next file with its warcinfo record."""
        self._name = warc_file_name(self.prefix, datetime.now(UTC), self._serial, os.getpid())
        self._serial += 1
        self._file = open(self.directory / f"{self._name}.open", "xb")  # noqa: SIM115
        if self.durable:  # the name must survive a power cut too
            fsync_directory(self.directory)
        serializer = _Serializer()
        info = serializer.create_warcinfo_record(self._name, self.info)
        self._file.write(_gzip_member(serializer.serialize(info), self.level, self.compressor))

    def _finish(self) -> None:
        """fsync, close and rename the current file to its final name."""
        assert self._file is not None
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        self._file = None
        final = self.directory / self._name
        os.replace(self.directory / f"{self._name}.open", final)
        fsync_directory(self.directory)
        self.synced = self.appended
        self.paths.append(final)


_SOCKET_BUFFER = 4 << 20  #: bytes asked for each way of the socket to the child
_CHILD_EXIT_S = 30.0  #: how long close() waits for the child to finish its last file


#: the child's program: it reads its ``_Files`` from the connection, then serves it
_CHILD_CODE = "import sys; from frontier_crawl.output.warc import child_entry; child_entry()"


class _ChildSink:
    """``_Files`` run in a child process, fed through a socket pair (see ``WarcWriter``).

    The child is a fresh interpreter (``python -c``), not a ``multiprocessing`` process: spawn
    re-imports the parent's main module, which fails when there is none to re-import (a
    script read from standard input), and fork would copy a process with libcurl threads.
    """

    def __init__(
        self, files: _Files, sync_interval_s: float = 0.05, keep_fds: Sequence[int] = ()
    ) -> None:
        ours, theirs = socket.socketpair()
        # Room for a few hundred pages between the crawl loop and the child (the default
        # holds about ten): the loop then blocks on a full socket only when the child falls
        # behind for long, not at every burst. The kernel caps it at net.core.wmem_max.
        with contextlib.suppress(OSError):
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER)
            theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root, env.get("PYTHONPATH", "")) if p
        )
        with theirs:
            self._process = subprocess.Popen(
                # the terminal's signals ignored from the first instruction: the crawl stops
                # its writer (proctree.py)
                child_argv(
                    [sys.executable, "-c", _CHILD_CODE, str(theirs.fileno()), str(os.getpid())]
                ),
                pass_fds=(theirs.fileno(), *keep_fds),
                # a process group of its own: a terminal's Ctrl-C and timeout(1) signal the
                # crawl's group, which then does not include the writer even while its sh starts
                process_group=0,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        self._conn = Connection(ours.detach())
        self.paths: list[Path] = []
        self._error = ""
        self._errno: int | None = None
        self._written = 0  #: records the child reported durable
        self._call(("files", (files, sync_interval_s)), reply=False)

    def append(self, records: list[ArchiveRecord]) -> None:
        self._call(("append", records), reply=False)

    def flush(self) -> None:
        self._call(("flush", None), reply=True)

    def written(self) -> int:
        """Read the progress reports that have arrived (never waits for one)."""
        self._read_reports()
        return self._written

    def _failure(self) -> OSError:
        """The child's error as an OSError (with its errno, when it had one)."""
        exc = OSError(f"WARC writing failed: {self._error}")
        exc.errno = self._errno
        return exc

    def _gone(self, exc: BaseException) -> OSError:
        self._error = f"the WARC writer process is gone ({exc!r})"
        return self._failure()

    def _read_reports(self) -> None:
        if self._error:
            raise self._failure()
        try:
            while self._conn.poll(0):
                self._take(self._conn.recv())
        except (OSError, EOFError) as exc:
            raise self._gone(exc) from exc
        if self._error:
            raise self._failure()

    def _take(self, message: tuple[str, int, str, int | None, list[str]]) -> bool:
        """Note a message from the child; True if it is the reply to a command."""
        kind, written, error, code, finished = message
        self._written = max(self._written, written)
        self.paths.extend(Path(p) for p in finished)
        if error:
            self._error, self._errno = error, code
        return kind == "reply"

    def close(self) -> None:
        try:
            self._call(("close", None), reply=True)
        finally:
            self._conn.close()
            try:
                self._process.wait(_CHILD_EXIT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def _call(
        self,
        message: tuple[str, list[ArchiveRecord] | tuple[_Files, float] | None],
        *,
        reply: bool,
    ) -> None:
        if self._error:
            raise self._failure()
        try:
            # Read the child's reports before sending: were they left unread for long (no
            # written() or flush() in a while), the child would block sending one while this
            # side blocks sending to it. Read here, what the child can send while this send
            # waits is a report per record already in the socket, far less than it holds.
            while self._conn.poll(0):
                self._take(self._conn.recv())
            if not self._error:
                self._conn.send(message)
                while reply and not self._take(self._conn.recv()):
                    pass  # a progress report sent before the reply
        except (OSError, EOFError) as exc:
            raise self._gone(exc) from exc
        if self._error:
            raise self._failure()


def child_entry() -> None:
    """The WARC writer process: ``python -c ... <fd> <parent pid>`` (see ``_ChildSink``)."""
    ignore_terminal_signals()  # already ignored by its sh; in case it was started otherwise
    die_with_parent(int(sys.argv[2]) if len(sys.argv) > 2 else None)
    conn = Connection(int(sys.argv[1]))
    try:
        command, arg = conn.recv()
    except EOFError:
        return
    if command == "files" and isinstance(arg, tuple) and isinstance(arg[0], _Files):
        try:
            _child_main(conn, arg[0], float(arg[1]))
        except (BrokenPipeError, ConnectionResetError):
            # the parent closed its end while a report was on its way (it stopped after a
            # failed write): nothing to say, the .open file is left to the next run's recovery
            return


#: the child reports its progress at least every this many records while it has a backlog
_REPORT_EVERY = 32


def _child_main(conn: Connection, files: _Files, sync_interval_s: float) -> None:
    """The child's loop: apply messages to ``files`` until "close" or the pipe's end.

    Every message to the parent is ``(kind, records durable, error, its errno, files finished
    since the last message)``: a "reply" to each flush and close, and a "progress" report
    once records are durable. Without ``files.durable`` that is after an append once the
    backlog is worked off, or every ``_REPORT_EVERY`` records while there is one (the file is
    flushed to the OS first). With it, the records are handed to the OS as before, and
    fdatasynced (then reported) at most once per ``sync_interval_s`` and at the latest that
    long after they were appended; a flush or close syncs at once. That is at most one report
    per append; the parent reads them before each send, so neither side can be left blocked
    sending to the other. After the first error, appends are skipped, every message carries
    the error and reports 0 records written.
    """
    error = ""
    code: int | None = None
    reported = 0  # files.durable_count() as of the last report
    announced = 0  # files.paths already sent
    sync_due: float | None = None  # when the records handed to the OS must be synced
    last_sync = float("-inf")

    def send(kind: str) -> None:
        nonlocal announced, reported
        finished = [str(p) for p in files.paths[announced:]]
        announced = len(files.paths)
        reported = files.durable_count()
        conn.send((kind, 0 if error else reported, error, code, finished))

    def fail(exc: Exception) -> None:
        nonlocal error, code
        where = f": {files.path}" if isinstance(exc, OSError) and exc.filename is None else ""
        error = f"{type(exc).__name__}: {exc}{where}"
        code = exc.errno if isinstance(exc, OSError) else None

    while True:
        if sync_due is not None and not error:
            left = sync_due - time.monotonic()
            if left <= 0 or not conn.poll(left):
                try:
                    files.flush()
                except Exception as exc:
                    fail(exc)
                sync_due, last_sync = None, time.monotonic()
                send("progress")
                continue
        try:
            command, records = conn.recv()
        except EOFError:  # the parent is gone: leave the .open file to its recovery
            return
        if error:  # skip the work; answer commands, report nothing more
            if command != "append":
                send("reply")
            if command == "close":
                return
            continue
        try:
            if command == "append" and records is not None:
                files.append(records)
                due = files.appended - reported >= _REPORT_EVERY or not conn.poll(0)
                if not files.durable:
                    if due and files.appended > reported:
                        files.flush()
                        send("progress")
                elif files.durable_count() > reported:  # a file finished: synced
                    send("progress")
                elif due and sync_due is None and files.appended > reported:
                    files.hand_over()
                    sync_due = max(time.monotonic(), last_sync + sync_interval_s)
            elif command == "flush":
                files.flush()
                sync_due, last_sync = None, time.monotonic()
            elif command == "close":
                files.close()
        except Exception as exc:  # reported to the parent, which raises it
            fail(exc)
            if command == "append":
                send("progress")
        if command != "append":
            send("reply")
        if command == "close":
            return



#: deflate libraries for the gzip members: name -> (default level, highest level)
COMPRESSORS: dict[str, tuple[int, int]] = {"zlib-ng": (6, 9), "isal": (1, 3)}


def _gzip_member(data: bytes, level: int, compressor: str = "zlib-ng") -> bytes:
    """``data`` as one complete gzip member (one record per member, as warcio writes them).

    Standard gzip that every reader takes, from either library:

    * zlib-ng, zlib's maintained fork with SIMD code paths: at the same level about 40% less
      CPU than zlib for the same size on HTML (level 6, 21 KB pages: 0.42 against 0.72 ms per
      page, ratio 0.235 against 0.233);
    * isal (Intel ISA-L's igzip), levels 1 to 3: at level 1 about 5x less CPU than zlib-ng at
      level 6, files about 9% larger (0.053 against 0.367 ms per page, ratio 0.255 against
      0.234 on the benchmark's pages; 0.060 against 0.303, 0.295 against 0.272 on real HTML).
    """
    if compressor == "isal":
        fast = isal_zlib.compressobj(level, isal_zlib.DEFLATED, isal_zlib.MAX_WBITS + 16)
        return fast.compress(data) + fast.flush()
    small = zlib_ng.compressobj(level, zlib_ng.DEFLATED, zlib_ng.MAX_WBITS + 16)
    return small.compress(data) + small.flush()


def _response_record(rec: ArchiveRecord) -> Any:
    """The warcio response record for ``rec``."""
    if not rec.header_bytes.strip():
        raise ValueError(f"empty response header block for {rec.url}")
    head = without_transfer_encoding(last_header_block(rec.header_bytes))
    if rec.revisit_of is not None:
        refers = {
            "WARC-Profile": SERVER_NOT_MODIFIED,
            "WARC-Refers-To-Target-URI": _header_safe(rec.revisit_of.uri),
            "WARC-Refers-To-Date": warc_date(rec.revisit_of.date),
        }
        return _record(rec, "revisit", head, b"", refers)
    extra = {"WARC-Truncated": rec.truncated} if rec.truncated else {}
    return _record(rec, "response", head, rec.payload, extra)


def _request_record(rec: ArchiveRecord, response: Any) -> Any:
    """The warcio request record concurrent to ``response``."""
    concurrent = {"WARC-Concurrent-To": response.rec_headers.get_header("WARC-Record-ID")}
    return _record(rec, "request", last_header_block(rec.request_bytes), b"", concurrent)


def _record(
    rec: ArchiveRecord, kind: str, head: bytes, payload: bytes, extra: dict[str, str]
) -> Any:
    """A warcio record whose block is ``head`` (kept verbatim) followed by ``payload``."""
    fields = {
        "WARC-Type": kind,
        "WARC-Record-ID": StatusAndHeadersParser.make_warc_id(),
        "WARC-Target-URI": _header_safe(rec.url),
        "WARC-Date": warc_date(rec.fetched_at),
    }
    if rec.ip:
        fields["WARC-IP-Address"] = rec.ip
    fields.update(extra)
    # The digests warcio would compute, computed here in one pass over whole buffers: warcio
    # streams the payload through its digesters in 16 KiB reads (with the SHA-1 work the same,
    # its per-chunk Python was a sixth of a record's CPU). Same values, same headers: warcio
    # skips a digest whose header is present.
    block = hashlib.sha1(head)
    block.update(payload)
    fields["WARC-Block-Digest"] = _sha1_label(block.digest())
    if kind not in RecordBuilder.NO_PAYLOAD_DIGEST_TYPES:
        fields["WARC-Payload-Digest"] = _sha1_label(hashlib.sha1(payload).digest())
    return _BUILDER.create_warc_record(
        fields["WARC-Target-URI"],
        kind,
        payload=BytesIO(payload),
        length=len(payload),
        warc_headers_dict=fields,
        http_headers=_VerbatimHeaders(head),
    )


def _sha1_label(digest: bytes) -> str:
    """A SHA-1 digest as WARC writes it (``sha1:`` and base32, as warcio's ``Digester``).

    160 bits are exactly 32 base32 digits, 16 pairs of them: looked up per 10 bits, about 8x
    faster than ``base64.b32encode`` (pure Python before 3.13); a test compares the two.
    """
    n = int.from_bytes(digest, "big")
    pairs = _B32_PAIRS
    return "sha1:" + "".join([pairs[(n >> shift) & 0x3FF] for shift in _B32_SHIFTS])


_B32_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_B32_PAIRS = [a + b for a in _B32_ALPHABET for b in _B32_ALPHABET]
_B32_SHIFTS = range(150, -1, -10)


class _Serializer(WARCWriter):  # type: ignore[misc]  # warcio is untyped
    """warcio's record serialisation (digests, WARC headers, block) into bytes, uncompressed;
    the writer compresses each record into its own gzip member (``_gzip_member``)."""

    def __init__(self) -> None:
        super().__init__(None, gzip=False, warc_version="1.1")

    def serialize(self, record: Any) -> bytes:
        buf = BytesIO()
        self._write_warc_record(buf, record)
        return buf.getvalue()


class _VerbatimHeaders(StatusAndHeaders):  # type: ignore[misc]  # warcio is untyped
    """HTTP headers that serialise back to exactly the bytes received.

    Only the status line is split out: writing a record needs nothing but the bytes
    (``compute_headers_buffer``), and parsing every header line with warcio's parser cost a
    tenth of a record's CPU. Readers parse the block themselves.
    """

    def __init__(self, head: bytes) -> None:
        first = head.split(b"\n", 1)[0].decode("iso-8859-1").strip()
        protocol, _, statusline = first.partition(" ")
        super().__init__(statusline, [], protocol=protocol, total_len=len(head))
        self._raw = head

    def compute_headers_buffer(self, header_filter: object = None) -> None:
        """warcio calls this before writing: hand it the received bytes."""
        self.headers_buff = self._raw


def warc_file_name(prefix: str, now: datetime, serial: int, pid: int) -> str:
    """``{prefix}-{UTC YYYYmmddHHMMSSffffff}-{serial:05d}-{pid}.warc.gz``."""
    return f"{prefix}-{now.astimezone(UTC):%Y%m%d%H%M%S%f}-{serial:05d}-{pid}.warc.gz"


def warc_date(epoch_s: float) -> str:
    """WARC 1.1 date with microseconds, e.g. ``2024-05-01T12:00:00.123456Z``.

    The part up to the seconds is formatted once per second (``_second_text``), not per record.
    """
    frac, whole = math.modf(epoch_s)  # rounded as datetime.fromtimestamp rounds
    second, micro = int(whole), round(frac * 1_000_000)
    if micro >= 1_000_000:
        second, micro = second + 1, micro - 1_000_000
    elif micro < 0:
        second, micro = second - 1, micro + 1_000_000
    return f"{_second_text(second)}.{micro:06d}Z"


@functools.lru_cache(maxsize=4)
def _second_text(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def last_header_block(block: bytes) -> bytes:
    """The last non-empty header block in ``block``, ending with a blank line."""
    current: list[bytes] = []
    last: list[bytes] = []
    for line in _lines(block):
        if line.strip(b"\r\n"):
            current.append(line)
        elif current:
            last, current = current, []
    last = current or last
    newline = b"\r\n" if not last or last[0].endswith(b"\r\n") else b"\n"
    if last and not last[-1].endswith(b"\n"):
        last[-1] += newline
    return b"".join(last) + newline


def without_transfer_encoding(head: bytes) -> bytes:
    """``head`` without ``Transfer-Encoding`` header lines (and their folded continuations)."""
    out: list[bytes] = []
    dropping = False
    for line in _lines(head):
        if dropping and line[:1] in (b" ", b"\t"):
            continue
        name, colon, _ = line.partition(b":")
        dropping = bool(colon) and name.strip().lower() == b"transfer-encoding"
        if not dropping:
            out.append(line)
    return b"".join(out)


def _lines(data: bytes) -> list[bytes]:
    """``data`` split after each LF (a lone CR is not a line break in HTTP/1.1)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _header_safe(url: str) -> str:
    """``url`` with controls and spaces percent-encoded: a CR/LF must not end a WARC header."""
    return url.translate(_CONTROL_ESCAPES) if not url.isprintable() or " " in url else url


def _warcinfo_fields(info: Mapping[str, str]) -> dict[str, str]:
    """Default warcinfo fields overlaid with ``info``; values kept to one line."""
    fields = {
        "software": f"frontier-crawl/{__version__} warcio/{version('warcio')}",
        "format": "WARC File Format 1.1",
        "conformsTo": _WARC_1_1_SPEC,
        "hostname": socket.gethostname(),
    }
    fields.update(info)
    return {k: " ".join(str(v).split()) for k, v in fields.items()}


def _check_prefix(prefix: str) -> None:
    """A prefix is a plain file-name part: files must stay inside the directory."""
    if not prefix or prefix in (".", "..") or any(c in prefix for c in "/\\\x00"):
        raise ValueError(f"warc prefix must be a plain file name part, got {prefix!r}")
