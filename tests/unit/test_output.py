"""Output: WARC files readable by warcio, JSONL crawl log, stats and the atomic report."""

from __future__ import annotations

import ast
import base64
import dataclasses
import gzip
import hashlib
import json
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from warcio.archiveiterator import ArchiveIterator
from warcio.recordbuilder import RecordBuilder
from warcio.statusandheaders import StatusAndHeadersParser
from warcio.warcwriter import BufferWARCWriter

import frontier_crawl.output as output
from frontier_crawl.config import CrawlSettings, OutputSection
from frontier_crawl.output import (
    ArchiveRecord,
    CrawlLog,
    CrawlStats,
    LogEntry,
    Outcome,
    WarcWriter,
    iso_time,
    render_report,
    warcfile,
    write_report,
)
from frontier_crawl.output.report import HOLDS_KEPT
from frontier_crawl.output.warc import (
    Revisit,
    last_header_block,
    warc_date,
    warc_file_name,
    without_transfer_encoding,
)
from tests.waiting import wait_until

T0 = 1_714_564_800.123456
NAME_RE = re.compile(r"^crawl-\d{20}-\d{5}-\d+\.warc\.gz$")


def request_block(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: h.test\r\nAccept-Encoding: gzip\r\n\r\n".encode()


def record(
    path: str,
    payload: bytes,
    headers: bytes = b"Content-Type: text/html\r\n",
    ip: str = "192.0.2.7",
    status: bytes = b"HTTP/1.1 200 OK\r\n",
) -> ArchiveRecord:
    return ArchiveRecord(
        url=f"http://h.test{path}",
        ip=ip,
        fetched_at=T0,
        request_bytes=request_block(path),
        header_bytes=status + headers + b"\r\n",
        payload=payload,
    )


def read_warc(path: Path) -> Iterator[tuple[Any, bytes]]:
    """(record, decoded content) for every record, digests verified."""
    with path.open("rb") as f:
        for rec in ArchiveIterator(f, check_digests="raise"):
            yield rec, rec.content_stream().read()


# --- WARC ------------------------------------------------------------------------------------


def test_rotation_pairs_and_readback(tmp_path: Path) -> None:
    directory = tmp_path / "warcs" / "nested"  # created on demand
    rnd = random.Random(7)
    payloads = {f"/p{i}": rnd.randbytes(30_000) for i in range(7)}  # incompressible
    with WarcWriter(directory, "crawl", 64 * 1024, {"operator": "tests"}) as writer:
        for path, payload in payloads.items():
            writer.write(record(path, payload))
    paths = writer.paths

    assert len(paths) == 3  # 3 + 3 + 1 pairs: each file passes 64 KiB on its third pair
    assert sorted(directory.iterdir()) == sorted(paths)
    assert not list(directory.glob("*.open"))
    assert [int(p.name.split("-")[2]) for p in paths] == [0, 1, 2]

    seen: dict[str, bytes] = {}
    for warc in paths:
        assert NAME_RE.match(warc.name)
        records = list(read_warc(warc))
        info, info_body = records[0]
        assert info.rec_type == "warcinfo"
        assert info.rec_headers.get_header("WARC-Filename") == warc.name
        assert b"operator: tests\r\n" in info_body
        assert b"format: WARC File Format 1.1\r\n" in info_body
        assert len(records) % 2 == 1
        for (resp, body), (req, _) in zip(records[1::2], records[2::2], strict=True):
            assert resp.rec_type == "response"
            assert req.rec_type == "request"
            assert resp.rec_headers.protocol == "WARC/1.1"
            rid = resp.rec_headers.get_header("WARC-Record-ID")
            assert req.rec_headers.get_header("WARC-Concurrent-To") == rid
            uri = resp.rec_headers.get_header("WARC-Target-URI")
            assert req.rec_headers.get_header("WARC-Target-URI") == uri
            for r in (resp, req):
                assert r.rec_headers.get_header("WARC-IP-Address") == "192.0.2.7"
                assert r.rec_headers.get_header("WARC-Date") == "2024-05-01T12:00:00.123456Z"
            assert req.http_headers.protocol == "GET"
            seen[uri] = body
    assert seen == {f"http://h.test{p}": body for p, body in payloads.items()}


@given(st.binary(min_size=20, max_size=20))
def test_sha1_label_is_base32(digest: bytes) -> None:
    assert warcfile._sha1_label(digest) == "sha1:" + base64.b32encode(digest).decode()


def warcio_records(rec: ArchiveRecord) -> list[bytes]:
    """What warcio's own record builder and writer make of ``rec`` (digests computed by
    warcio, headers in its order), uncompressed: the reference for ``record_bytes``."""
    builder = RecordBuilder(warc_version="1.1")
    head = without_transfer_encoding(last_header_block(rec.header_bytes))
    parser = StatusAndHeadersParser([], verify=False)
    fields = {"WARC-Target-URI": rec.url, "WARC-Date": warc_date(rec.fetched_at)}
    if rec.ip:
        fields["WARC-IP-Address"] = rec.ip
    shared = dict(fields)  # the request record's
    if rec.revisit_of is not None:
        seen = rec.revisit_of
        kind, payload = "revisit", b""
        fields["WARC-Profile"] = seen.profile
        if seen.record_id:
            fields["WARC-Refers-To"] = seen.record_id
        fields["WARC-Refers-To-Target-URI"] = seen.uri
        fields["WARC-Refers-To-Date"] = warc_date(seen.date)
        if seen.profile == warcfile.IDENTICAL_PAYLOAD_DIGEST:
            fields["WARC-Truncated"] = "length"
        if seen.payload_digest:  # warcio writes what it is given for a revisit
            fields["WARC-Payload-Digest"] = warcfile._sha1_label(seen.payload_digest)
    else:
        kind, payload = "response", rec.payload
        if rec.truncated:
            fields["WARC-Truncated"] = rec.truncated
    import io

    response = builder.create_warc_record(
        rec.url, kind, payload=io.BytesIO(payload), length=len(payload),
        warc_headers_dict={"WARC-Type": kind, "WARC-Record-ID": "<urn:uuid:R>", **fields},
        http_headers=parser.parse(io.BytesIO(head)),
    )  # fmt: skip
    request_head = last_header_block(rec.request_bytes)
    request = builder.create_warc_record(
        rec.url, "request", payload=io.BytesIO(b""), length=0,
        warc_headers_dict={"WARC-Type": "request", "WARC-Record-ID": "<urn:uuid:Q>", **shared,
                           "WARC-Concurrent-To": "<urn:uuid:R>"},
        http_headers=parser.parse(io.BytesIO(request_head)),
    )  # fmt: skip
    out = []
    for r, block in ((response, head), (request, request_head)):
        r.http_headers.headers_buff = block  # verbatim, as the crawler keeps it
        r.http_headers.compute_headers_buffer = lambda *a: None
        writer = BufferWARCWriter(gzip=False, warc_version="1.1")
        writer.write_record(r)
        out.append(writer.get_contents())
    return out


def unordered(records: list[bytes]) -> list[tuple[list[bytes], bytes]]:
    """Each record as (its WARC header lines sorted, the rest): warcio puts the digests it
    computes itself in the other order."""
    out = []
    for r in records:
        head, _, rest = r.partition(b"\r\n\r\n")
        out.append((sorted(head.split(b"\r\n")), rest))
    return out


def same_ids(ours: list[bytes]) -> list[bytes]:
    """``ours`` with the record IDs replaced by the fixed ones of ``warcio_records``."""
    rid = re.search(rb"WARC-Record-ID: (<[^>]+>)", ours[0])
    assert rid is not None
    qid = re.search(rb"WARC-Record-ID: (<[^>]+>)", ours[1])
    assert qid is not None
    return [r.replace(rid[1], b"<urn:uuid:R>").replace(qid[1], b"<urn:uuid:Q>") for r in ours]


@pytest.mark.parametrize(
    "kind", ["response", "revisit", "revisit-known", "identical", "truncated", "no-ip", "chunked"]
)
def test_records_are_the_bytes_warcio_writes(kind: str) -> None:
    """Records built as bytes (no warcio on the write path) equal what warcio's builder and
    writer make of the same capture: its WARC headers (the random record IDs aside), its
    digests (computed by warcio here), its block layout byte for byte."""
    rec = record("/d?q=1", random.Random(3).randbytes(50_000))  # several 16 KiB reads
    digest = hashlib.sha1(rec.payload).digest()
    if kind == "revisit":
        rec = dataclasses.replace(rec, revisit_of=Revisit("http://h.test/d", T0 - 60))
    elif kind == "revisit-known":  # a 304 whose original's record ID and digest are known
        seen = Revisit("http://h.test/d", T0 - 60, output.new_record_id(), payload_digest=digest)
        rec = dataclasses.replace(rec, revisit_of=seen, payload=b"")
    elif kind == "identical":  # a 200 whose payload is the original's: headers only
        seen = Revisit("http://h.test/d", T0 - 60, output.new_record_id(),
                       output.IDENTICAL_PAYLOAD_DIGEST, digest)  # fmt: skip
        rec = dataclasses.replace(rec, revisit_of=seen)
    elif kind == "truncated":
        rec = dataclasses.replace(rec, truncated="length")
    elif kind == "no-ip":
        rec = dataclasses.replace(rec, ip="")
    elif kind == "chunked":
        rec = dataclasses.replace(
            rec, header_bytes=b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
            b"Transfer-Encoding: chunked\r\nContent-Type: text/html\r\n\r\n",
        )  # fmt: skip
    ours = warcfile.record_bytes(rec.capture())
    assert len(ours) == 2
    assert unordered(same_ids(ours)) == unordered(warcio_records(rec))


def test_gzip_payload_is_decoded_by_content_stream(tmp_path: Path) -> None:
    html = b"<html><body>" + b"hello archive " * 500 + b"</body></html>"
    encoded = gzip.compress(html)
    rec = record("/gz", encoded, b"Content-Type: text/html\r\nContent-Encoding: gzip\r\n")
    with WarcWriter(tmp_path, "crawl", 1 << 20, {}) as writer:
        writer.write(rec)
    (resp, body), _req = list(read_warc(writer.paths[0]))[1:]
    assert body == html
    assert resp.http_headers.get_header("Content-Encoding") == "gzip"


def test_transfer_encoding_is_stripped_and_the_rest_kept_verbatim(tmp_path: Path) -> None:
    headers = (
        b"Content-Type: text/plain\r\n"
        b"transfer-encoding: gzip,\r\n"
        b" chunked\r\n"  # an obs-fold continuation of the dropped header
        b"X-Odd:   spaced  value\r\n"
        b"Content-Encoding: gzip\r\n"
    )
    payload = gzip.compress(b"de-chunked by libcurl, still gzip")
    with WarcWriter(tmp_path, "crawl", 1 << 20, {}) as writer:
        writer.write(record("/chunked", payload, headers))
    (resp, body), _req = list(read_warc(writer.paths[0]))[1:]
    assert resp.http_headers.get_header("Transfer-Encoding") is None
    assert body == b"de-chunked by libcurl, still gzip"
    expected_block = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Odd:   spaced  value\r\n"
        b"Content-Encoding: gzip\r\n\r\n" + payload
    )
    assert expected_block in gzip.decompress(writer.paths[0].read_bytes())


def test_last_header_block_wins_and_http2_status_lines_read_back(tmp_path: Path) -> None:
    interim = b"HTTP/1.1 100 Continue\r\n\r\n"
    final = b"HTTP/2 404\r\ncontent-type: text/plain\r\n"
    rec = ArchiveRecord(
        "https://h.test/missing", "", T0, b"GET /missing HTTP/2\r\n\r\n", interim + final, b"gone"
    )
    with WarcWriter(tmp_path, "crawl", 1 << 20, {}) as writer:
        writer.write(rec)
    (resp, body), (req, _) = list(read_warc(writer.paths[0]))[1:]
    assert (resp.http_headers.protocol, resp.http_headers.statusline) == ("HTTP/2", "404")
    assert body == b"gone"
    assert resp.rec_headers.get_header("WARC-IP-Address") is None
    assert req.rec_headers.get_header("WARC-IP-Address") is None


def test_control_characters_cannot_break_warc_headers(tmp_path: Path) -> None:
    rec = record("/a\r\nWARC-Type: evil x", b"x")
    with WarcWriter(tmp_path, "crawl", 1 << 20, {}) as writer:
        writer.write(rec)
    resp = next(r for r, _ in read_warc(writer.paths[0]) if r.rec_type == "response")
    assert (
        resp.rec_headers.get_header("WARC-Target-URI")
        == "http://h.test/a%0D%0AWARC-Type:%20evil%20x"
    )
    assert resp.rec_headers.get_header("WARC-Type") == "response"


def test_record_without_request_bytes_writes_only_the_response(tmp_path: Path) -> None:
    rec = ArchiveRecord("http://h.test/", "", T0, b"", b"HTTP/1.1 204 No Content\r\n\r\n", b"")
    with WarcWriter(tmp_path, "crawl", 1 << 20, {}) as writer:
        writer.write(rec)
    kinds = [r.rec_type for r, _ in read_warc(writer.paths[0])]
    assert kinds == ["warcinfo", "response"]


def test_empty_header_block_is_rejected_before_any_file_exists(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, "crawl", 1 << 20, {})
    with pytest.raises(ValueError, match="empty response header block"):
        writer.write(ArchiveRecord("http://h.test/", "", T0, b"", b"\r\n", b"x"))
    writer.close()
    assert list(tmp_path.iterdir()) == []
    assert writer.paths == ()


@pytest.mark.parametrize("prefix", ["", ".", "..", "../escape", "a/b", "a\\b", "nul\x00"])
def test_prefix_cannot_leave_the_directory(tmp_path: Path, prefix: str) -> None:
    with pytest.raises(ValueError, match="prefix"):
        WarcWriter(tmp_path, prefix, 1 << 20, {})


def test_close_is_idempotent_and_write_after_close_fails(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, "crawl", 1 << 20, {})
    writer.write(record("/a", b"a"))
    writer.close()
    writer.close()
    assert len(writer.paths) == 1
    with pytest.raises(ValueError, match="closed"):
        writer.write(record("/b", b"b"))


def test_open_file_is_named_dot_open_until_closed(tmp_path: Path) -> None:
    writer = WarcWriter(tmp_path, "crawl", 1 << 20, {})
    writer.write(record("/a", b"a"))
    writer.flush()  # the writer thread has appended the record
    (open_file,) = tmp_path.iterdir()
    assert open_file.name.endswith(".warc.gz.open")
    writer.close()
    assert [p.name for p in tmp_path.iterdir()] == [open_file.name.removesuffix(".open")]


@pytest.mark.parametrize("background", [True, False], ids=["thread", "inline"])
def test_order_kept_and_files_rotated(tmp_path: Path, background: bool) -> None:
    """More writes than the pipe to the child holds, small files: every record once, in write
    order, each finished file valid and starting with its warcinfo record."""
    n = 300
    with WarcWriter(tmp_path, "crawl", 4096, {}, background=background) as writer:
        for i in range(n):
            writer.write(record(f"/{i}", random.randbytes(1000)))
    assert len(writer.paths) > 5  # rotated many times
    uris: list[str] = []
    for path in writer.paths:
        kinds = [rec.rec_type for rec, _ in read_warc(path)]
        assert kinds[0] == "warcinfo" and kinds.count("warcinfo") == 1
        uris += [
            rec.rec_headers.get_header("WARC-Target-URI")
            for rec, _ in read_warc(path)
            if rec.rec_type == "response"
        ]
    assert uris == [f"http://h.test/{i}" for i in range(n)]


@pytest.mark.parametrize(
    ("compressor", "level"), [("zlib-ng", 0), ("zlib-ng", 1), ("isal", 0), ("isal", 3)]
)
def test_each_compressor_writes_standard_gzip_members(
    tmp_path: Path, compressor: str, level: int
) -> None:
    """Every record is its own gzip member, whatever the library: Python's gzip reads the
    file whole and warcio reads it record by record, digests checked."""
    page = b"<html><body>" + b"<p>hello compressible world</p>" * 2000 + b"</body></html>"
    with WarcWriter(tmp_path, "crawl", 1 << 20, {}, level, compressor=compressor) as writer:
        for i in range(5):
            writer.write(record(f"/{i}", page))
    (path,) = writer.paths
    whole = gzip.decompress(path.read_bytes())
    assert whole.count(page) == 5
    records = list(read_warc(path))
    assert [r.rec_type for r, _ in records] == ["warcinfo"] + ["response", "request"] * 5
    assert [body for r, body in records if r.rec_type == "response"] == [page] * 5
    assert path.stat().st_size < len(page)  # compressed: 5 pages in less than one


def test_compressor_and_level_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="compressor must be one of"):
        WarcWriter(tmp_path, "crawl", 1 << 20, {}, compressor="gzip")
    with pytest.raises(ValueError, match=r"isal gzip_level must be 0\.\.3, got 6"):
        WarcWriter(tmp_path, "crawl", 1 << 20, {}, 6, compressor="isal")


def test_writer_process_error_is_raised_and_stops_appends(tmp_path: Path) -> None:
    """A failed append in the child (here: the directory vanished, so the file cannot be
    created) is raised by the next flush, write and close; nothing is appended after it."""
    directory = tmp_path / "warc"
    writer = WarcWriter(directory, "crawl", 1 << 20, {})
    directory.rmdir()
    writer.write(record("/a", b"a"))  # fails in the child
    with pytest.raises(OSError, match="WARC writing failed: FileNotFoundError"):
        writer.flush()
    with pytest.raises(OSError, match="WARC writing failed"):
        writer.write(record("/b", b"b"))
    with pytest.raises(OSError, match="WARC writing failed"):
        writer.close()
    assert not directory.exists()


@pytest.mark.parametrize("background", [True, False], ids=["child", "inline"])
def test_written_reports_progress_without_a_flush(tmp_path: Path, background: bool) -> None:
    """write() numbers the writes; written() says how many are handed to the OS, without
    waiting: the child reports as it goes, so it reaches every write with no flush."""
    n = 100
    writer = WarcWriter(tmp_path, "crawl", 1 << 30, {}, background=background)
    assert writer.written() == 0
    seqs = [writer.write(record(f"/{i}", random.randbytes(3000))) for i in range(n)]
    assert seqs == list(range(1, n + 1))
    wait_until(f"{n} records written", lambda: writer.written() >= n)
    assert writer.written() == n
    (path,) = tmp_path.glob("*.open")  # not closed, yet all of it readable
    with path.open("rb") as f:
        responses = [r for r in ArchiveIterator(f) if r.rec_type == "response"]
    assert len(responses) == n
    writer.close()


@pytest.mark.timeout(120)
def test_unread_progress_reports_cannot_deadlock_the_writer(tmp_path: Path) -> None:
    """Many small writes and no written() or flush() for a long time (a crawl configured with
    a long commit interval): the child's progress reports pile up unread. Neither side may end
    up blocked sending to the other (each write first reads what the child has sent)."""
    n = 20_000
    with WarcWriter(tmp_path, "crawl", 1 << 30, {}) as writer:
        for i in range(n):
            writer.write(record(f"/{i}", b"x" * 100))
    (path,) = writer.paths
    with path.open("rb") as f:
        assert sum(r.rec_type == "response" for r in ArchiveIterator(f)) == n


def test_written_raises_a_child_error_without_a_flush(tmp_path: Path) -> None:
    directory = tmp_path / "warc"
    writer = WarcWriter(directory, "crawl", 1 << 20, {})
    directory.rmdir()
    writer.write(record("/a", b"a"))  # fails in the child, which reports it unasked
    with pytest.raises(OSError, match="WARC writing failed: FileNotFoundError"):
        wait_until("the child's error", lambda: writer.written() != 0)
    with pytest.raises(OSError, match="WARC writing failed"):
        writer.close()


def test_writer_works_from_a_script_read_on_stdin(tmp_path: Path) -> None:
    """The child is a fresh interpreter, not a multiprocessing spawn (which re-imports the
    parent's main module and fails when that is standard input)."""
    script = f"""
import time
from pathlib import Path
from frontier_crawl.output.warc import WarcWriter, ArchiveRecord
with WarcWriter(Path({str(tmp_path)!r}), "stdin", 1 << 20, {{}}) as writer:
    writer.write(ArchiveRecord("http://a.test/", "", time.time(), b"GET / HTTP/1.1\\r\\n\\r\\n",
                               b"HTTP/1.1 200 OK\\r\\n\\r\\n", b"x"))
"""
    done = subprocess.run(
        [sys.executable, "-"], input=script.encode(), capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    (path,) = tmp_path.iterdir()
    assert [r.rec_type for r, _ in read_warc(path)] == ["warcinfo", "response", "request"]


def test_writer_process_gone_is_an_error(tmp_path: Path) -> None:
    """The child killed: the next flush says so instead of hanging or losing records silently."""
    writer = WarcWriter(tmp_path, "crawl", 1 << 20, {})
    writer.write(record("/a", b"a"))
    writer.flush()
    process = writer._sink._process  # type: ignore[union-attr]
    process.kill()
    process.wait(10)
    with pytest.raises(OSError, match="WARC writing failed: the WARC writer process is gone"):
        writer.write(record("/b", b"b"))
        writer.flush()
    with pytest.raises(OSError, match="WARC writing failed"):
        writer.close()
    (open_file,) = tmp_path.iterdir()  # left .open, for recovery; /a is in it
    assert open_file.name.endswith(".open")
    assert [r.rec_type for r, _ in read_warc(open_file)] == ["warcinfo", "response", "request"]


def test_from_settings(tmp_path: Path) -> None:
    out = OutputSection(warc_prefix="site", warc_max_bytes=1 << 16, warc_compressor="isal")
    with WarcWriter.from_settings(CrawlSettings(output=out), tmp_path, {}) as writer:
        writer.write(record("/", b"x"))
    assert writer.paths[0].name.startswith("site-")
    assert writer.paths[0].read_bytes()[:2] == b"\x1f\x8b"


def test_warc_names_and_dates() -> None:
    now = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert warc_file_name("p", now, 7, 42) == "p-20240501120000123456-00007-42.warc.gz"
    assert warc_date(T0) == "2024-05-01T12:00:00.123456Z"


@given(st.floats(min_value=-1e10, max_value=1e11, allow_nan=False))
def test_warc_date_is_datetimes_rounding(epoch_s: float) -> None:
    """The per-second cache formats exactly as datetime.fromtimestamp + strftime would."""
    expected = datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert warc_date(epoch_s) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"HTTP/1.1 200 OK\r\nA: b\r\n\r\n", b"HTTP/1.1 200 OK\r\nA: b\r\n\r\n"),
        (b"HTTP/1.1 200 OK\nA: b\n\n", b"HTTP/1.1 200 OK\nA: b\n\n"),
        (b"HTTP/1.1 200 OK\r\nA: b", b"HTTP/1.1 200 OK\r\nA: b\r\n\r\n"),
        (
            b"HTTP/1.1 301 Moved\r\nLocation: /x\r\n\r\nHTTP/1.1 200 OK\r\nA: b\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA: b\r\n\r\n",
        ),
        (b"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", b"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n"),
    ],
)
def test_last_header_block(raw: bytes, expected: bytes) -> None:
    assert last_header_block(raw) == expected


def test_without_transfer_encoding_keeps_similar_names() -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding : chunked\r\nX-Transfer-Encoding: y\r\n\r\n"
    assert without_transfer_encoding(head) == b"HTTP/1.1 200 OK\r\nX-Transfer-Encoding: y\r\n\r\n"


# --- crawl log -------------------------------------------------------------------------------


def entry(url: str, **kw: Any) -> LogEntry:
    fields: dict[str, Any] = {
        "time": iso_time(T0),
        "url": url,
        "status": 200,
        "outcome": Outcome.FETCHED,
        "error": None,
        "bytes": 1234,
        "duration_s": 0.25,
        "depth": 1,
        "referrer": "http://h.test/",
        "content_type": "text/html",
    }
    fields.update(kw)
    return LogEntry(**fields)


def test_crawl_log_lines_are_json(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "crawl.jsonl"
    with CrawlLog(path) as log:
        log.write(entry("http://h.test/a"))
        log.write(entry("http://h.test/\u2028\"q\"", status=0, outcome=Outcome.FAILED,
                        error="timeout", referrer=None, bytes=0))  # fmt: skip
        log.write(entry("http://h.test/\udcff"))  # lone surrogate from undecodable input
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == {
        "time": "2024-05-01T12:00:00.123Z",
        "url": "http://h.test/a",
        "status": 200,
        "outcome": "fetched",
        "error": None,
        "bytes": 1234,
        "duration_s": 0.25,
        "depth": 1,
        "referrer": "http://h.test/",
        "content_type": "text/html",
        "held_s": 0.0,
    }
    assert lines[1]["url"] == 'http://h.test/\u2028"q"'
    assert (lines[1]["outcome"], lines[1]["error"], lines[1]["referrer"]) == (
        "failed",
        "timeout",
        None,
    )
    assert lines[2]["url"] == "http://h.test/\\udcff"


def test_crawl_log_buffers_until_flush_and_appends(tmp_path: Path) -> None:
    path = tmp_path / "crawl.jsonl"
    path.write_text('{"earlier": true}\n')
    log = CrawlLog(path)
    log.write(entry("http://h.test/a"))
    assert path.read_text().count("\n") == 1  # still buffered
    log.flush()
    assert path.read_text().count("\n") == 2
    log.close()
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.write(entry("http://h.test/b"))


def test_crawl_log_writes_once_the_buffer_is_full(tmp_path: Path) -> None:
    path = tmp_path / "crawl.jsonl"
    log = CrawlLog(path, flush_bytes=1)
    log.write(entry("http://h.test/a"))
    assert json.loads(path.read_text())["url"] == "http://h.test/a"
    log.close()


@pytest.mark.parametrize(
    ("epoch", "text"),
    [(0.0, "1970-01-01T00:00:00.000Z"), (T0, "2024-05-01T12:00:00.123Z"),
     (1_714_564_800.9996, "2024-05-01T12:00:00.999Z")],
)  # fmt: skip
def test_iso_time(epoch: float, text: str) -> None:
    assert iso_time(epoch) == text


def test_iso_time_caches_only_the_current_second() -> None:
    """The formatted second is reused within the second and redone when it changes."""
    epochs = [T0, T0 + 0.5, T0 + 1.0, T0, T0 - 86_400.0, T0 + 0.001]
    expected = [datetime.fromtimestamp(e, UTC).strftime("%Y-%m-%dT%H:%M:%S") for e in epochs]
    millis = [int(e * 1000) % 1000 for e in epochs]
    assert [iso_time(e) for e in epochs] == [
        f"{text}.{ms:03d}Z" for text, ms in zip(expected, millis, strict=True)
    ]


# --- stats and report ------------------------------------------------------------------------


SEQUENCE: list[tuple[str, int, str | None, int]] = [
    (Outcome.ROBOTS_TXT, 404, None, 100),
    (Outcome.FETCHED, 200, None, 1000),
    (Outcome.FETCHED, 203, None, 500),
    (Outcome.REDIRECT, 301, None, 0),
    (Outcome.HTTP_ERROR, 404, None, 50),
    (Outcome.HTTP_ERROR, 404, None, 50),
    (Outcome.HTTP_ERROR, 503, None, 10),
    (Outcome.FAILED, 0, "timeout", 0),
    (Outcome.FAILED, 0, "dns-error", 0),
    (Outcome.FAILED, 0, "connect-error", 0),
    (Outcome.FAILED, 200, "truncated", 40),
    (Outcome.TOO_MANY_REDIRECTS, 302, None, 0),
    (Outcome.ROBOTS_DENIED, 0, None, 0),
    (Outcome.ROBOTS_UNAVAILABLE, 0, None, 0),
    (Outcome.ROBOTS_TXT, 0, "timeout", 0),
]
SEEN = {"count": 1234, "recent_hits": 5}


def test_report_for_a_known_sequence() -> None:
    stats = CrawlStats()
    before = time.time()
    for outcome, status, error, nbytes in SEQUENCE:
        stats.record(outcome, status, error, nbytes)
    report = stats.report(4.0, SEEN)
    # the two fetched pages, in the minute they were counted (tested in test_report_html.py)
    [[start, pages, _ran, _revisits]] = report.pop("pages_over_time")  # type: ignore[misc]
    assert pages == 2 and before - 60 < start <= time.time()
    assert report == {
        "fetched": 2,
        "status_classes": {"1xx": 0, "2xx": 3, "3xx": 2, "4xx": 2, "5xx": 1},
        "not_found_404": 2,
        "timeouts": 2,
        "too_many_redirects": 1,
        "robots_denied": 1,
        "robots_unavailable": 1,
        "address_refused": 0,
        "other_errors": 3,
        "errors_by_kind": {"connect-error": 1, "dns-error": 1, "timeout": 2, "truncated": 1},
        "outcomes": {
            "failed": 4,
            "fetched": 2,
            "http-error": 3,
            "redirect": 1,
            "robots-denied": 1,
            "robots-txt": 2,
            "robots-unavailable": 1,
            "too-many-redirects": 1,
        },
        "not_modified": 0,
        "unchanged": 0,
        "redirects": 1,
        "http_errors": 3,
        "robots_txt_fetches": 2,
        "bytes": 1750,
        "elapsed_s": 4.0,
        "pages_per_s": 0.5,
        "revisits": 0,
        "this_run": {"pages": 2, "revisits": 0, "elapsed_s": 4.0, "pages_per_s": 0.5},
        "seen": SEEN,
        "host_held_s": 0.0,
        "held_by": [],
        "rate_bucket_s": 60.0,
        "loop_s": {},
        "runs": 1,
        "slowest_hosts": [],
        "failing_hosts": [],
    }


def test_report_names_the_urls_that_held_their_hosts_longest() -> None:
    stats = CrawlStats()
    for i in range(HOLDS_KEPT + 5):
        stats.record_hold(f"http://h.test/{i}", float(i))
    stats.record_hold("http://h.test/9", 100.0)  # a URL held its host twice
    report = stats.report(1.0, SEEN)
    held = report["held_by"]
    assert isinstance(held, list) and len(held) == HOLDS_KEPT
    assert held[0] == {"url": "http://h.test/9", "held_s": 109.0}
    assert [h["url"] for h in held[1:3]] == [f"http://h.test/{HOLDS_KEPT + 4}",
                                             f"http://h.test/{HOLDS_KEPT + 3}"]  # fmt: skip
    assert report["host_held_s"] == sum(range(HOLDS_KEPT + 5)) + 100.0


def test_report_with_no_elapsed_time() -> None:
    report = CrawlStats().report(0.0, {})
    assert report["pages_per_s"] == 0.0
    assert report["fetched"] == 0


def test_write_report_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    stats = CrawlStats()
    stats.record(Outcome.FETCHED, 200, None, 10)
    write_report(path, stats.report(1.0, SEEN))
    write_report(path, stats.report(2.0, SEEN))  # replaces
    assert json.loads(path.read_text())["elapsed_s"] == 2.0
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]

    with pytest.raises(TypeError):
        write_report(path, {"not json": object()})
    assert json.loads(path.read_text())["elapsed_s"] == 2.0  # old report intact
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_render_report() -> None:
    stats = CrawlStats()
    for outcome, status, error, nbytes in SEQUENCE:
        stats.record(outcome, status, error, nbytes)
    console = Console(record=True, width=100, color_system=None)
    render_report(stats.report(4.0, SEEN), console)
    text = console.export_text()
    assert "crawl report" in text
    assert "2 pages (0.50/s over 4.0 s, all runs)" in text
    assert "2xx 3" in text
    assert "timeout 2" in text
    assert next(line for line in text.splitlines() if "seen URLs" in line).split()[-1] == "1,234"


def test_render_report_of_a_version_with_a_bloom_filter() -> None:
    """A report.json written before the seen-set lost its Bloom filter: the count is read
    from its ``bloom`` object (``frontier-crawl report`` prints old reports again)."""
    report = CrawlStats().report(1.0, SEEN)
    report.pop("seen")
    report["bloom"] = {"capacity": 10**7, "count": 99, "estimated_false_positives": 0.0}
    console = Console(record=True, width=100, color_system=None)
    render_report(report, console)
    text = console.export_text()
    assert next(line for line in text.splitlines() if "seen URLs" in line).split()[-1] == "99"


def test_outcome_values() -> None:
    assert [o.value for o in Outcome] == [
        "fetched",
        "http-error",
        "redirect",
        "too-many-redirects",
        "robots-denied",
        "robots-unavailable",
        "address-refused",
        "failed",
        "not-modified",
        "unchanged",
        "robots-txt",
        "callback-error",
        "pipeline-error",
        "bad-yield",
        "bad-meta",
        "unknown-callback",
        "bad-url",
        "sitemap",
        "sitemap-too-large",
        "sitemap-invalid",
        "parse-error",
    ]


def test_exported_members() -> None:
    assert set(output.__all__) == {
        "IDENTICAL_PAYLOAD_DIGEST",
        "SERVER_NOT_MODIFIED",
        "new_record_id",
        "ArchiveRecord",
        "CrawlLog",
        "CrawlStats",
        "LogEntry",
        "LogHistogram",
        "Outcome",
        "ProblemEntry",
        "Revisit",
        "SPIDER_PROBLEMS",
        "WarcWriter",
        "config_warnings",
        "iso_time",
        "merge_rate_buckets",
        "render_report",
        "render_report_html",
        "truncation_reason",
        "write_report",
        "write_report_html",
        "write_status_html",
    }


# --- truncated responses, revisits, warnings (issue 4) -------------------------------------


def test_truncated_response_is_marked(tmp_path: Path) -> None:
    headers = b"Content-Type: text/html\r\nContent-Length: 1000\r\n"
    rec = dataclasses.replace(
        record("/cut", b"x" * 100, headers), truncated=output.truncation_reason("truncated")
    )
    with WarcWriter(tmp_path, "crawl", 1 << 20, {}) as writer:
        writer.write(rec)
        writer.write(record("/whole", b"complete"))
    (path,) = tmp_path.iterdir()
    found = {r.rec_headers.get_header("WARC-Target-URI"): (r, body) for r, body in read_warc(path)
             if r.rec_type == "response"}  # fmt: skip
    cut, body = found["http://h.test/cut"]
    assert cut.rec_headers.get_header("WARC-Truncated") == "disconnect"
    assert body == b"x" * 100
    assert found["http://h.test/whole"][0].rec_headers.get_header("WARC-Truncated") is None


@pytest.mark.parametrize(
    ("error", "reason"),
    [("too-large", "length"), ("timeout", "time"), ("truncated", "disconnect"),
     ("protocol-error", "unspecified")],
)  # fmt: skip
def test_truncation_reasons(error: str, reason: str) -> None:
    assert output.truncation_reason(error) == reason


def test_revisit_record_for_not_modified(tmp_path: Path) -> None:
    original = T0 - 86_400
    rec = dataclasses.replace(
        record("/same", b"ignored", b'ETag: "v1"\r\n', status=b"HTTP/1.1 304 Not Modified\r\n"),
        revisit_of=output.Revisit("http://h.test/same", original),
    )
    with WarcWriter(tmp_path, "crawl", 1 << 20, {}) as writer:
        writer.write(rec)
    (path,) = tmp_path.iterdir()
    records = [(r.rec_type, r, body) for r, body in read_warc(path) if r.rec_type != "warcinfo"]
    assert [kind for kind, _, _ in records] == ["revisit", "request"]
    _, revisit, body = records[0]
    h = revisit.rec_headers
    assert h.get_header("WARC-Profile") == (
        "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
    )
    assert h.get_header("WARC-Refers-To-Target-URI") == "http://h.test/same"
    assert h.get_header("WARC-Refers-To-Date") == warc_date(original)
    assert revisit.http_headers.get_statuscode() == "304"
    assert body == b""
    concurrent = records[1][1].rec_headers.get_header("WARC-Concurrent-To")
    assert concurrent == h.get_header("WARC-Record-ID")


def test_not_modified_is_counted_and_warnings_reported() -> None:
    stats = CrawlStats()
    stats.record(Outcome.NOT_MODIFIED, 304, None, 0)
    report = stats.report(1.0, SEEN)
    assert report["not_modified"] == 1 and report["fetched"] == 0
    assert report["unchanged"] == 0
    assert output.config_warnings(CrawlSettings()) == []
    insecure = msgspec.convert({"fetch": {"verify_tls": False}}, CrawlSettings)
    (warning,) = output.config_warnings(insecure)
    assert "verify_tls" in warning
    console = Console(record=True, width=120, color_system=None)
    render_report({**report, "warnings": [warning]}, console)
    assert "verify_tls" in console.export_text()


@given(st.lists(st.sampled_from([b"HTTP/1.1 200 OK", b"A: b", b" folded", b"", b"\r", b"\r\r"]),
                max_size=8), st.sampled_from([b"\r\n", b"\n"]), st.booleans())  # fmt: skip
def test_last_header_block_fast_path_agrees(lines: list[bytes], eol: bytes, end: bool) -> None:
    """The common case answered without splitting gives what the line-by-line scan gives."""
    block = eol.join(lines) + (eol + eol if end else b"")
    assert last_header_block(block) == warcfile._last_header_block(block)


def test_writer_process_loads_no_frontier_crawl_module(tmp_path: Path) -> None:
    """The child runs warcfile.py alone, without ``site`` (its start-up is what a worker's
    writer costs): not the frontier_crawl package, not warcio, nor the heavier standard
    modules its start-up used to pay for (multiprocessing, typing, pathlib, json, re)."""
    code = warcfile.CHILD_CODE.replace(
        "fc_warcfile.child_entry()", "print(sorted(sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code, "-1", "1", warcfile.child_path()],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    loaded = set(ast.literal_eval(out.stdout))
    assert "warcfile" in loaded
    heavy = {"multiprocessing", "typing", "pathlib", "json", "re", "site", "socket", "pickle"}
    assert not {n for n in loaded if n.startswith(("frontier_crawl", "warcio"))} | (heavy & loaded)


def test_record_ids_are_random_uuid4() -> None:
    import uuid

    ids = [warcfile.new_record_id() for _ in range(1000)]
    assert len(set(ids)) == len(ids)
    for rid in ids[:50]:
        assert rid.startswith("<urn:uuid:") and rid.endswith(">")
        u = uuid.UUID(rid[10:-1])
        assert u.version == 4 and u.variant == uuid.RFC_4122 and str(u) == rid[10:-1]
