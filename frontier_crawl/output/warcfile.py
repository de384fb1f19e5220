"""WARC record bytes, gzip members and the files they go to: what the WARC writer's child
process runs (``warc.py`` has the writer the engine holds, and the file layout).

Self-contained on purpose: the standard library, isal and zlib-ng, nothing of frontier_crawl.
The writer's child loads this file alone, by path (``child_program``), so it does not pay for
importing the package (about 0.45 s of CPU per child start, the spider, config and report
modules it never uses: with a writer per worker, a twentieth of a millisecond per page on a
10,000-page crawl).

Records are built as bytes here, not through warcio's record builder and writer (whose
per-record Python was about a quarter of a record's CPU): the same WARC headers in warcio's
order, the same digests (SHA-1 over whole buffers, base32 as warcio's ``Digester`` writes
them), the same blocks; tests read them back with warcio (digests checked) and compare them
with what warcio itself writes for the same capture.

Between the engine's process and the child, captures travel as bytes (``encode_capture``:
lengths, then the fields), many to a message, never as pickled objects.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import math
import os
import random
import struct
import sys
import time
import zlib
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO, NamedTuple

_isal: Any
_zng: Any
try:  # Intel ISA-L's igzip: standard gzip at a fraction of zlib's CPU
    from isal import isal_zlib as _isal
except ImportError:  # pragma: no cover - isal has wheels for every platform we run on
    _isal = None
try:  # zlib's maintained fork; the standard library's zlib where it is missing
    from zlib_ng import zlib_ng as _zng
except ImportError:  # pragma: no cover
    _zng = zlib

#: the WARC 1.1 revisit profiles (section 6.7): a 304 that confirmed the last capture, and a
#: 2xx whose payload has the last capture's digest
SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL_PAYLOAD_DIGEST = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
PROFILES = (SERVER_NOT_MODIFIED, IDENTICAL_PAYLOAD_DIGEST)
_CONTROL_ESCAPES = {c: f"%{c:02X}" for c in (*range(0x21), 0x7F)}

#: deflate libraries for the gzip members: name -> (default level, highest level)
COMPRESSORS: dict[str, tuple[int, int]] = {"isal": (1, 3), "zlib-ng": (6, 9)}


class Capture(NamedTuple):
    """One fetch as it went over the wire, in the form the child builds records from (the
    fields of ``warc.ArchiveRecord``, its revisit flattened)."""

    url: str
    ip: str
    fetched_at: float
    request_bytes: bytes
    header_bytes: bytes
    payload: bytes
    truncated: str = ""
    refers_uri: str = ""  #: for a revisit: the capture it repeats ("" otherwise)
    refers_date: float = 0.0
    profile: str = ""  #: a revisit's WARC-Profile (``PROFILES``); "" for a response record
    record_id: str = ""  #: WARC-Record-ID of the response or revisit record ("" : a new one)
    #: SHA-1 of the payload (20 bytes; b"" : computed here). A revisit's is the repeated
    #: capture's, written as its WARC-Payload-Digest (none for a 304 without one)
    payload_digest: bytes = b""
    refers_id: str = ""  #: for a revisit: that capture's WARC-Record-ID ("" : unknown)


# --------------------------------------------------------------------------- the wire

#: per capture: fetched_at, refers_date, then the lengths of url, ip, request, header,
#: payload, truncated, refers_uri, profile, record_id, payload_digest, refers_id; the fields
#: follow in that order
_WIRE = struct.Struct("<dd11I")


def encode_capture(c: Capture, out: list[bytes]) -> int:
    """Append ``c``'s wire form to ``out`` (parts to join); returns its size in bytes."""
    url, ip = c.url.encode("utf-8", "surrogatepass"), c.ip.encode()
    truncated, refers = c.truncated.encode(), c.refers_uri.encode("utf-8", "surrogatepass")
    profile, rid, refers_id = c.profile.encode(), c.record_id.encode(), c.refers_id.encode()
    parts = (url, ip, c.request_bytes, c.header_bytes, c.payload, truncated, refers, profile,
             rid, c.payload_digest, refers_id)  # fmt: skip
    lengths = [len(part) for part in parts]
    out += (_WIRE.pack(c.fetched_at, c.refers_date, *lengths), *parts)
    return _WIRE.size + sum(lengths)


def decode_captures(buf: bytes, start: int = 0) -> Iterator[Capture]:
    """The captures encoded back to back in ``buf[start:]``."""
    size, unpack, end = _WIRE.size, _WIRE.unpack_from, len(buf)
    at = start
    while at < end:
        fetched_at, refers_date, *lengths = unpack(buf, at)
        at += size
        fields = []
        for n in lengths:
            fields.append(buf[at : at + n])
            at += n
        url, ip, request, head, payload, truncated, refers, profile, rid, digest, refers_id = (
            fields
        )
        yield Capture(url.decode("utf-8", "surrogatepass"), ip.decode(), fetched_at, request,
                      head, payload, truncated.decode(), refers.decode("utf-8", "surrogatepass"),
                      refers_date, profile.decode(), rid.decode(), digest,
                      refers_id.decode())  # fmt: skip


# --------------------------------------------------------------------------- records


def record_bytes(c: Capture) -> list[bytes]:
    """The uncompressed WARC records of a capture: its response (or revisit) record, then its
    request record when there is a request header block. Raises ValueError for an empty
    response header block or a revisit of an unknown profile."""
    if not c.header_bytes.strip():
        raise ValueError(f"empty response header block for {c.url}")
    head = without_transfer_encoding(last_header_block(c.header_bytes))
    uri = _header_safe(c.url)
    shared = f"WARC-Target-URI: {uri}\r\nWARC-Date: {warc_date(c.fetched_at)}\r\n"
    if c.ip:
        shared += f"WARC-IP-Address: {c.ip}\r\n"
    block = hashlib.sha1(head)
    if c.profile:
        payload, fields = b"", _revisit_fields(c)
        fields += f"WARC-Block-Digest: {_sha1_label(block.digest())}\r\n"
    else:
        payload = c.payload
        block.update(payload)
        digest = c.payload_digest or hashlib.sha1(payload).digest()
        fields = f"WARC-Truncated: {c.truncated}\r\n" if c.truncated else ""
        fields += (
            f"WARC-Block-Digest: {_sha1_label(block.digest())}\r\n"
            f"WARC-Payload-Digest: {_sha1_label(digest)}\r\n"
        )
    rid = c.record_id or new_record_id()
    kind = "revisit" if c.profile else "response"
    out = [_record(kind, rid, shared + fields, "application/http; msgtype=response", head, payload)]
    if c.request_bytes.strip():
        request = last_header_block(c.request_bytes)
        fields = (
            f"WARC-Concurrent-To: {rid}\r\n"
            f"WARC-Block-Digest: {_sha1_label(hashlib.sha1(request).digest())}\r\n"
            f"WARC-Payload-Digest: {_EMPTY_SHA1}\r\n"
        )
        kind = "application/http; msgtype=request"
        out.append(_record("request", new_record_id(), shared + fields, kind, request, b""))
    return out


def _revisit_fields(c: Capture) -> str:
    """A revisit record's own fields (WARC 1.1 section 6.7), block digest aside.

    Both profiles: WARC-Profile, WARC-Refers-To (the repeated capture's record ID, when known),
    WARC-Refers-To-Target-URI and WARC-Refers-To-Date (its target URI and date: what pywb
    looks the original up by), and WARC-Payload-Digest: the repeated capture's payload digest
    (6.7.2 makes it mandatory for identical-payload-digest; for server-not-modified, 6.7.3
    defines the payload as the original's and the field's own section allows it for a payload
    left off by a revisit profile: it must be the original's, never the digest of the 304's
    empty body, or replay tools looking the original up by digest find nothing). The
    block is the response's header block: a 304's is complete; a 2xx's is the response
    truncated after its headers, so identical-payload-digest also says ``WARC-Truncated:
    length`` (6.7.2: "shall be used for any identical-digest truncation")."""
    if c.profile not in PROFILES:
        raise ValueError(f"unknown revisit profile {c.profile!r} for {c.url}")
    identical = c.profile == IDENTICAL_PAYLOAD_DIGEST
    if identical and len(c.payload_digest) != 20:
        raise ValueError(f"identical-payload-digest revisit of {c.url} without its SHA-1")
    fields = f"WARC-Profile: {c.profile}\r\n"
    if c.refers_id:
        fields += f"WARC-Refers-To: {c.refers_id}\r\n"
    fields += (
        f"WARC-Refers-To-Target-URI: {_header_safe(c.refers_uri)}\r\n"
        f"WARC-Refers-To-Date: {warc_date(c.refers_date)}\r\n"
    )
    if identical:
        fields += "WARC-Truncated: length\r\n"
    if c.payload_digest:
        fields += f"WARC-Payload-Digest: {_sha1_label(c.payload_digest)}\r\n"
    return fields


def warcinfo_bytes(filename: str, info: Mapping[str, str], now: float) -> bytes:
    """The uncompressed warcinfo record that opens file ``filename`` (fields with a value)."""
    block = "".join(f"{k}: {v}\r\n" for k, v in info.items() if v).encode("utf-8")
    fields = (
        f"WARC-Filename: {filename}\r\nWARC-Date: {warc_date(now)}\r\n"
        f"WARC-Block-Digest: {_sha1_label(hashlib.sha1(block).digest())}\r\n"
    )
    return _record("warcinfo", new_record_id(), fields, "application/warc-fields", block, b"")


def _record(
    kind: str, rid: str, fields: str, content_type: str, head: bytes, payload: bytes
) -> bytes:
    """One record: WARC/1.1, type and ID first (then ``fields``), Content-Type and
    Content-Length last, as warcio orders them; the block, then the blank lines."""
    header = (
        f"WARC/1.1\r\nWARC-Type: {kind}\r\nWARC-Record-ID: {rid}\r\n{fields}"
        f"Content-Type: {content_type}\r\nContent-Length: {len(head) + len(payload)}\r\n\r\n"
    )
    return b"".join((header.encode("utf-8"), head, payload, b"\r\n\r\n"))


def new_record_id() -> str:
    """A fresh ``<urn:uuid:...>`` (version 4, random), as ``uuid.uuid4()`` makes them at a
    fifth of its cost: 122 random bits from a generator seeded from ``os.urandom`` in each
    process, and again in a forked child (record IDs must be unique, not secret)."""
    n = (_RANDOM.getrandbits(128) & _UUID_CLEAR) | _UUID_SET
    h = f"{n:032x}"
    return f"<urn:uuid:{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}>"


_RANDOM = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _RANDOM.seed(os.urandom(32)))
_UUID_CLEAR = ~((0xF << 76) | (0x3 << 62))  #: the version and variant bits
_UUID_SET = (4 << 76) | (0x2 << 62)  #: version 4, RFC 4122 variant


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
_EMPTY_SHA1 = _sha1_label(hashlib.sha1(b"").digest())


def gzip_member(data: bytes, level: int, compressor: str = "isal") -> bytes:
    """``data`` as one complete gzip member (one record per member, as WARC asks).

    Standard gzip that every reader takes, from either library:

    * isal (Intel ISA-L's igzip), levels 1 to 3: at level 1 about 5x less CPU than zlib-ng at
      level 6, files about 8% larger (bench/warc_writer.py: 0.11 against 0.69 ms per page,
      ratio 0.284 against 0.264 on the benchmark's pages; 0.060 against 0.303, 0.295 against
      0.272 on real HTML);
    * zlib-ng, zlib's maintained fork with SIMD code paths: at the same level about 40% less
      CPU than zlib for the same size on HTML.

    Without the isal package, "isal" falls back to the standard library's zlib at level 1,
    and without zlib-ng, "zlib-ng" is the standard library's zlib.
    """
    lib = _zng
    if compressor == "isal":
        if _isal is not None:
            fast = _isal.compressobj(level, _isal.DEFLATED, _GZIP_WBITS)
            return bytes(fast.compress(data) + fast.flush())
        lib, level = zlib, 1  # pragma: no cover - the fallback
    small = lib.compressobj(level, lib.DEFLATED, _GZIP_WBITS)
    return bytes(small.compress(data) + small.flush())


_GZIP_WBITS = 16 + zlib.MAX_WBITS  #: deflate with a gzip header and trailer


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
    first = block.find(b"\n")
    if (  # the common case, answered without splitting: one CRLF block and its blank line
        first > 0
        and block[first - 1] == 0x0D
        and block.endswith(b"\r\n\r\n")
        and block.find(b"\n\r\n") == len(block) - 3
        and b"\n\n" not in block
        and b"\n\r\r" not in block
        and block[0] not in b"\r\n"
    ):
        return block
    return _last_header_block(block)


def _last_header_block(block: bytes) -> bytes:
    """``last_header_block`` line by line (a blank line: only CRs before its LF)."""
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
    if b"transfer-encoding" not in head.lower():
        return head
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


def fsync_directory(directory: Path) -> None:
    """Make a new or renamed name in ``directory`` durable (``safefs.fsync_directory``, which
    this file cannot import: see the module docstring)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- files


class Files:
    """The WARC files themselves: gzip members appended, files rotated, fsynced and renamed."""

    def __init__(
        self,
        directory: Path,
        prefix: str,
        max_bytes: int,
        info: dict[str, str],
        level: int,
        compressor: str = "isal",
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
        self.appended = 0  #: records appended so far
        self.synced = 0  #: records durable so far (fdatasynced, or in a finished file)

    def settings(self) -> dict[str, Any]:
        """What the child needs to make the same ``Files`` (``from_settings``)."""
        return {"directory": str(self.directory), "prefix": self.prefix,
                "max_bytes": self.max_bytes, "info": self.info, "level": self.level,
                "compressor": self.compressor, "durable": self.durable}  # fmt: skip

    @classmethod
    def from_settings(cls, s: dict[str, Any]) -> Files:
        return cls(Path(s["directory"]), str(s["prefix"]), int(s["max_bytes"]),
                   dict(s["info"]), int(s["level"]), str(s["compressor"]),
                   bool(s["durable"]))  # fmt: skip

    @property
    def path(self) -> Path:
        """The file being written."""
        return self.directory / f"{self._name}.open"

    def written(self) -> int:
        """Records durable: all of them, once flushed."""
        self.flush()
        return self.appended

    def durable_count(self) -> int:
        """Records as ``WarcWriter.written`` counts them, as of the last flush."""
        return self.synced if self.durable else self.appended

    def append(self, captures: list[Capture]) -> None:
        """Append each capture's response (or revisit) and request records, each its own gzip
        member; rotate past ``max_bytes``."""
        level, compressor = self.level, self.compressor
        for c in captures:  # checked after each capture: a file passes max_bytes by one at most
            members = [gzip_member(r, level, compressor) for r in record_bytes(c)]
            if self._file is None:
                self._open()
            assert self._file is not None
            self._file.write(b"".join(members))
            self.appended += 1
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
        now = datetime.now(UTC)
        self._name = warc_file_name(self.prefix, now, self._serial, os.getpid())
        self._serial += 1
        self._file = open(self.directory / f"{self._name}.open", "xb")  # noqa: SIM115
        if self.durable:  # the name must survive a power cut too
            fsync_directory(self.directory)
        info = warcinfo_bytes(self._name, self.info, now.timestamp())
        self._file.write(gzip_member(info, self.level, self.compressor))

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


# --------------------------------------------------------------------------- the child

#: what the engine's process sends the child, each message's first byte (the rest: the
#: settings as JSON for SETUP, captures for APPEND, nothing for the others)
SETUP, APPEND, FLUSH, CLOSE = b"S", b"A", b"F", b"C"
#: the child reports its progress at least every this many records while it has a backlog
REPORT_EVERY = 32
#: the interpreter's ``-c`` program of the child: this file, loaded alone (argv: the socket's
#: descriptor, the parent's PID, this file's path)
CHILD_CODE = (
    "import sys, importlib.util as u; s = u.spec_from_file_location('fc_warcfile', sys.argv[3]); "
    "m = u.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m); "
    "m.child_entry()"
)


def _standalone(path: Path, name: str) -> ModuleType:
    """Load the module file ``path`` alone, as ``name`` (no package import)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def child_entry() -> None:
    """The WARC writer process: ``python -c CHILD_CODE <fd> <parent pid> <this file>``."""
    # proctree has only the standard library too: loaded alone, as this file is
    tree = _standalone(Path(__file__).resolve().parents[1] / "proctree.py", "fc_proctree")
    tree.ignore_terminal_signals()  # already ignored by its sh; in case it was started otherwise
    tree.die_with_parent(int(sys.argv[2]) if len(sys.argv) > 2 else None)
    conn = Connection(int(sys.argv[1]))
    try:
        first = conn.recv_bytes()
    except EOFError:
        return
    if first[:1] != SETUP:
        return
    setup = json.loads(first[1:])
    try:
        serve(conn, Files.from_settings(setup["files"]), float(setup["sync_interval_s"]))
    except (BrokenPipeError, ConnectionResetError):
        # the parent closed its end while a report was on its way (it stopped after a failed
        # write): nothing to say, the .open file is left to the next run's recovery
        return


def serve(conn: Connection, files: Files, sync_interval_s: float) -> None:
    """The child's loop: apply messages to ``files`` until CLOSE or the pipe's end.

    Every message to the parent is ``(kind, records durable, error, its errno, files finished
    since the last message)``: a "reply" to each flush and close, and a "progress" report
    once records are durable. Without ``files.durable`` that is after an append once the
    backlog is worked off, or every ``REPORT_EVERY`` records while there is one (the file is
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
            message = conn.recv_bytes()
        except EOFError:  # the parent is gone: leave the .open file to its recovery
            return
        command = message[:1]
        if error:  # skip the work; answer commands, report nothing more
            if command != APPEND:
                send("reply")
            if command == CLOSE:
                return
            continue
        try:
            if command == APPEND:
                files.append(list(decode_captures(message, 1)))
                due = files.appended - reported >= REPORT_EVERY or not conn.poll(0)
                if not files.durable:
                    if due and files.appended > reported:
                        files.flush()
                        send("progress")
                elif files.durable_count() > reported:  # a file finished: synced
                    send("progress")
                elif due and sync_due is None and files.appended > reported:
                    files.hand_over()
                    sync_due = max(time.monotonic(), last_sync + sync_interval_s)
            elif command == FLUSH:
                files.flush()
                sync_due, last_sync = None, time.monotonic()
            elif command == CLOSE:
                files.close()
        except Exception as exc:  # reported to the parent, which raises it
            fail(exc)
            if command == APPEND:
                send("progress")
        if command != APPEND:
            send("reply")
        if command == CLOSE:
            return
