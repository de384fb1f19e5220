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
``Content-Encoding`` stays, since the payload is still encoded). The received bytes are kept
(warcio's writer would re-serialise parsed headers, normalising spacing and folding), which is
what an archive is for. The records are built as bytes and compressed in ``warcfile.py``,
which the writer's child process runs.
When ``header_bytes`` holds several blocks (1xx interim responses, redirects libcurl
followed), the last one is the response the payload belongs to.

Incomplete responses (the transfer failed after the response headers arrived: connection
closed or reset mid-body, timeout, size cap) are archived, never as complete ones: the response
record carries ``WARC-Truncated`` (WARC 1.1 section 5.13: ``length`` for the size cap, ``time``
for a timeout, ``disconnect`` for a broken connection, ``unspecified`` otherwise) and the payload
holds what arrived (nothing past the size cap). Transfers that got no response are not archived.

Revisits (WARC 1.1 section 6.7; ``ArchiveRecord.revisit_of``) are ``revisit`` records
instead of responses, with no payload, naming the capture that holds it by
``WARC-Refers-To`` (its record ID, when known), ``WARC-Refers-To-Target-URI`` and
``WARC-Refers-To-Date`` (what pywb resolves them by), and carrying its
``WARC-Payload-Digest`` when known (``Revisit.payload_digest``):

* profile ``server-not-modified``: a ``304 Not Modified`` that confirmed an earlier capture
  (a conditional revisit, or the HTTP cache of a recrawl); the block is the 304's header block;
* profile ``identical-payload-digest``: a 2xx whose payload has the earlier capture's SHA-1;
  the block is the 2xx's header block, so the record says ``WARC-Truncated: length`` (6.7.2),
  and ``WARC-Payload-Digest`` is mandatory.

Record IDs: ``ArchiveRecord.record_id`` is the response (or revisit) record's, chosen by the
caller with :func:`new_record_id` when it must know it (to refer to the capture later); ""
lets the writer make one. ``ArchiveRecord.payload_digest`` is the payload's SHA-1 when the
caller already has it (it is then not computed again; it must be ``sha1(payload)``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from frontier_crawl import __version__
from frontier_crawl.output import warcfile
from frontier_crawl.output.warcfile import (
    COMPRESSORS,
    IDENTICAL_PAYLOAD_DIGEST,
    PROFILES,
    SERVER_NOT_MODIFIED,
    Capture,
    Files,
    last_header_block,
    new_record_id,
    warc_date,
    warc_file_name,
    without_transfer_encoding,
)
from frontier_crawl.proctree import child_argv
from frontier_crawl.safefs import make_dir

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from frontier_crawl.config import CrawlSettings

__all__ = [
    "COMPRESSORS",
    "IDENTICAL_PAYLOAD_DIGEST",
    "PROFILES",
    "SERVER_NOT_MODIFIED",
    "ArchiveRecord",
    "Revisit",
    "WarcWriter",
    "last_header_block",
    "new_record_id",
    "truncation_reason",
    "warc_date",
    "warc_file_name",
    "without_transfer_encoding",
]

_WARC_1_1_SPEC = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
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
    """The earlier capture a revisit repeats: its target URI and WARC-Date (epoch seconds),
    its response record's WARC-Record-ID ("" : unknown, no WARC-Refers-To), the revisit's
    profile (``SERVER_NOT_MODIFIED`` for a 304, ``IDENTICAL_PAYLOAD_DIGEST`` for a 2xx with
    the same payload) and that capture's payload SHA-1 (20 bytes; b"" : unknown, which
    identical-payload-digest allows only with the record's own payload or digest)."""

    uri: str
    date: float
    record_id: str = ""
    profile: str = SERVER_NOT_MODIFIED
    payload_digest: bytes = b""

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"unknown revisit profile {self.profile!r}")
        if self.payload_digest and len(self.payload_digest) != 20:
            raise ValueError(f"a payload digest is a SHA-1 (20 bytes), got {self.payload_digest!r}")
        if self.record_id:
            _check_record_id(self.record_id)


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
    #: set for a revisit (a 304, or a 2xx with the same payload): the capture it repeats; its
    #: record then has no payload (``payload`` is not archived, only its digest)
    revisit_of: Revisit | None = None
    record_id: str = ""  #: WARC-Record-ID of the response (or revisit) record; "" : a new one
    payload_digest: bytes = b""  #: ``sha1(payload).digest()`` if already known, else b""
    request_body: bytes = b""  #: the request's body as sent (a form's POST), b"" for a GET

    def capture(self) -> Capture:
        """The form the records are built from (``warcfile.Capture``). An
        identical-payload-digest revisit's digest is ``payload_digest``, else the original's,
        else computed from ``payload``. Raises ValueError for a malformed record ID or digest,
        or an identical-payload-digest revisit whose ``payload_digest`` is not the
        original's."""
        if self.record_id:
            _check_record_id(self.record_id)
        digest = self.payload_digest
        if digest and len(digest) != 20:
            raise ValueError(f"a payload digest is a SHA-1 (20 bytes), got {digest!r}")
        seen = self.revisit_of
        if seen is None:
            return Capture(
                self.url, self.ip, self.fetched_at, self.request_bytes, self.header_bytes,
                self.payload, self.truncated or "", record_id=self.record_id,
                payload_digest=digest, request_body=self.request_body,
            )  # fmt: skip
        if seen.profile == IDENTICAL_PAYLOAD_DIGEST:
            digest = digest or seen.payload_digest or hashlib.sha1(self.payload).digest()
            if seen.payload_digest and digest != seen.payload_digest:
                raise ValueError(
                    f"identical-payload-digest revisit of {self.url}: its payload digest is not "
                    "the original's"
                )
        else:  # a 304: the payload (none) is the original's
            digest = seen.payload_digest
        return Capture(
            self.url, self.ip, self.fetched_at, self.request_bytes, self.header_bytes, b"",
            "", seen.uri, seen.date, seen.profile, self.record_id, digest, seen.record_id,
            self.request_body,
        )  # fmt: skip


def _check_record_id(rid: str) -> None:
    """A WARC-Record-ID is ``<uri>``: one printable line, no spaces (it becomes a header)."""
    if not (len(rid) > 2 and rid[0] == "<" and rid[-1] == ">" and rid.isprintable()
            and " " not in rid and rid.isascii()):  # fmt: skip
        raise ValueError(f"a WARC-Record-ID is <uri> on one line, got {rid!r}")


class WarcWriter:
    """Writes ArchiveRecords as response/request pairs into rotating ``.warc.gz`` files.

    ``info`` adds fields to each file's warcinfo record (``operator``, ``isPartOf``,
    ``http-header-user-agent``...); ``software``, ``format``, ``conformsTo`` and ``hostname``
    are filled in unless given. Not thread-safe: one writer per process, called from one
    thread.

    The records are built and compressed beside the caller (``background=True``, the
    default): :meth:`write` hands the capture, as bytes, to a child process, which builds the
    WARC records (``warcfile.record_bytes``: WARC headers, digests), compresses each into its
    own gzip member, appends them and rotates files (``warcfile.Files``). That is about
    0.25 ms of CPU for a 21 KB page with isal (bench/warc_writer.py), none of it on the crawl
    loop, which spends a few microseconds per page handing it over. A thread would not take
    it off the loop: it needs the GIL back after every record, and a busy loop hands the GIL
    over only every ``sys.getswitchinterval()`` (measured: no faster than writing inline).

    Captures go to the child in batches (``_BATCH_RECORDS``, ``_BATCH_BYTES``), one message
    each: a batch is sent when it is full, when its first capture has waited
    ``_BATCH_WAIT_S``, and by every :meth:`written`, :meth:`flush` and :meth:`close` (the
    engine asks ``written`` at every group commit, so a capture waits at most until the next
    commit). Order is kept (one socket, one child). The socket's buffer (a few hundred
    pages) bounds what waits for the child: a send blocks when it is full. :meth:`written`
    tells, without waiting, how many writes the child has made durable (it reports as it
    goes), and :meth:`flush` waits until it has made everything durable. An error in the
    child (a full disk) stops all later appends, so no record follows a damaged one, and is
    raised by the next ``flush`` or ``close`` (or ``write``, once known). The child dies with
    its parent (``PR_SET_PDEATHSIG`` on Linux, end of the socket elsewhere), so after a kill
    no orphan writes beside the next run's recovery of the ``.open`` file.
    """

    def __init__(
        self,
        directory: Path,
        prefix: str,
        max_bytes: int,
        info: Mapping[str, str],
        gzip_level: int = 0,
        *,
        compressor: str = "isal",
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
        files = Files(
            str(directory), prefix, max_bytes, _warcinfo_fields(info), level, compressor, durable
        )
        self._sink: _InlineSink | _ChildSink = (
            _ChildSink(files, sync_interval_s, keep_fds) if background else _InlineSink(files)
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
        records are durable. Raises ValueError for an empty ``header_bytes``, a malformed
        ``record_id`` or digest (``ArchiveRecord.capture``) or a closed writer.
        """
        if self._closed:
            raise ValueError("write to a closed WarcWriter")
        if not rec.header_bytes.strip():  # here, not in the child: the caller's mistake
            raise ValueError(f"empty response header block for {rec.url}")
        self._sink.append(rec.capture())
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


class _InlineSink:
    """``Files`` written in the caller's process (``background=False``)."""

    def __init__(self, files: Files) -> None:
        self._files = files

    @property
    def paths(self) -> list[Path]:
        return [Path(p) for p in self._files.paths]

    def append(self, capture: Capture) -> None:
        self._files.append([capture])

    def written(self) -> int:
        return self._files.written()

    def flush(self) -> None:
        self._files.flush()

    def close(self) -> None:
        self._files.close()


_SOCKET_BUFFER = 4 << 20  #: bytes asked for each way of the socket to the child
_CHILD_EXIT_S = 30.0  #: how long close() waits for the child to finish its last file
_BATCH_RECORDS = 16  #: captures per message to the child, at most
_BATCH_BYTES = 512 << 10  #: a batch is sent once it holds this many bytes
_BATCH_WAIT_S = 0.005  #: ... or once its first capture has waited this long (checked by write)


class _ChildSink:
    """``Files`` run in a child process, fed through a socket pair (see ``WarcWriter``).

    The child is a fresh interpreter (``python -S -c``) that imports ``warcfile.py`` alone
    (``warcfile.CHILD_CODE``: no ``site``; isal's and zlib-ng's directories are passed on),
    not a ``multiprocessing`` process: spawn re-imports the parent's main module, which fails when
    there is none to re-import (a script read from standard input), and fork would copy a
    process with libcurl threads.
    """

    def __init__(
        self, files: Files, sync_interval_s: float = 0.05, keep_fds: Sequence[int] = ()
    ) -> None:
        ours, theirs = socket.socketpair()
        # Room for a few hundred pages between the crawl loop and the child (the default
        # holds about ten): the loop then blocks on a full socket only when the child falls
        # behind for long, not at every burst. The kernel caps it at net.core.wmem_max.
        with contextlib.suppress(OSError):
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER)
            theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
        program = [sys.executable, "-S", "-c", warcfile.CHILD_CODE, str(theirs.fileno()),
                   str(os.getpid()), warcfile.child_path()]  # fmt: skip
        with theirs:
            self._process = subprocess.Popen(
                # the terminal's signals ignored from the first instruction: the crawl stops
                # its writer (proctree.py)
                child_argv(program),
                pass_fds=(theirs.fileno(), *keep_fds),
                # a process group of its own: a terminal's Ctrl-C and timeout(1) signal the
                # crawl's group, which then does not include the writer even while its sh starts
                process_group=0,
                stdin=subprocess.DEVNULL,
            )
        self._sock = ours
        self._poll = select.poll()
        self._poll.register(ours.fileno(), select.POLLIN)
        self.paths: list[Path] = []
        self._error = ""
        self._errno: int | None = None
        self._written = 0  #: records the child reported durable
        #: the frame's length (filled in by _call), then the captures not yet sent, encoded
        self._batch: list[bytes | memoryview] = [b"", warcfile.APPEND]
        self._batched = 0  #: how many
        self._batch_bytes = 0
        self._batch_since = 0.0  #: monotonic time of the first
        self._call([b"", warcfile.setup_message(files, sync_interval_s)], reply=False)

    def append(self, capture: Capture) -> None:
        if self._error:
            raise self._failure()
        self._batch_bytes += warcfile.encode_capture(capture, self._batch)
        self._batched += 1
        if self._batched == 1:
            self._batch_since = time.monotonic()
        if (
            self._batched >= _BATCH_RECORDS
            or self._batch_bytes >= _BATCH_BYTES
            or time.monotonic() - self._batch_since >= _BATCH_WAIT_S
        ):
            self._send_batch()

    def _send_batch(self) -> None:
        if self._batched:
            parts = self._batch
            self._batch, self._batched, self._batch_bytes = [b"", warcfile.APPEND], 0, 0
            self._call(parts, reply=False)

    def flush(self) -> None:
        self._send_batch()
        self._call([b"", warcfile.FLUSH], reply=True)

    def written(self) -> int:
        """Send the batch, read the progress reports that have arrived (never waits for
        one)."""
        self._send_batch()
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

    def _ready(self) -> bool:
        """A report has (begun to) come in: the child writes each in one call, so the rest
        of it follows at once."""
        return bool(self._poll.poll(0))

    def _recv(self) -> bool:
        """Read one report; True if it is the reply to a command."""
        return self._take(warcfile.parse_report(warcfile.read_frame(self._sock.fileno())))

    def _read_reports(self) -> None:
        if self._error:
            raise self._failure()
        try:
            while self._ready():
                self._recv()
        except (OSError, EOFError) as exc:
            raise self._gone(exc) from exc
        if self._error:
            raise self._failure()

    def _take(self, message: tuple[bool, int, str, int | None, list[str]]) -> bool:
        """Note a report from the child; True if it is the reply to a command."""
        reply, written, error, code, finished = message
        self._written = max(self._written, written)
        self.paths.extend(Path(p) for p in finished)
        if error:
            self._error, self._errno = error, code
        return reply

    def close(self) -> None:
        try:
            if not self._error:
                self._send_batch()
            self._call([b"", warcfile.CLOSE], reply=True)
        finally:
            self._sock.close()
            try:
                self._process.wait(_CHILD_EXIT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def _call(self, parts: list[bytes | memoryview], *, reply: bool) -> None:
        """Send the message whose parts are ``parts`` (the first, b"", stands for its frame
        header), in one ``sendmsg`` where it fits: no copy of the captures into one buffer."""
        if self._error:
            raise self._failure()
        parts[0] = warcfile.FRAME.pack(sum(map(len, parts)) - len(parts[0]))
        try:
            # Read the child's reports before sending: were they left unread for long (no
            # written() or flush() in a while), the child would block sending one while this
            # side blocks sending to it. Read here, what the child can send while this send
            # waits is a report per message already in the socket, far less than it holds.
            while self._ready():
                self._recv()
            if not self._error:
                _send_all(self._sock, parts)
                while reply and not self._recv():
                    pass  # a progress report sent before the reply
        except (OSError, EOFError) as exc:
            raise self._gone(exc) from exc
        if self._error:
            raise self._failure()


def _send_all(sock: socket.socket, parts: list[bytes | memoryview]) -> None:
    """Send ``parts`` in order: ``sendmsg`` (a gather write), then whatever it left."""
    total = sum(map(len, parts))
    sent = sock.sendmsg(parts) if len(parts) <= _IOV_MAX else 0
    if sent < total:  # rare: interrupted, or too many parts
        sock.sendall(b"".join(parts)[sent:])


_IOV_MAX = 1024  #: Linux's limit on the parts of one sendmsg


def _warcinfo_fields(info: Mapping[str, str]) -> dict[str, str]:
    """Default warcinfo fields overlaid with ``info``; values kept to one line."""
    fields = {
        "software": f"frontier-crawl/{__version__}",
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
