"""Repair of outputs cut by a kill: WARC files end on a complete record, the log on a line."""

from __future__ import annotations

import zlib
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from frontier_crawl.output import ArchiveRecord, WarcWriter
from frontier_crawl.output.recover import complete_gzip_prefix, recover_lines, recover_warcs


def _write_warc(directory: Path, n: int) -> Path:
    writer = WarcWriter(directory, "t", 1 << 30, {})
    for i in range(n):
        writer.write(
            ArchiveRecord(
                url=f"http://a.test/{i}",
                ip="127.0.0.1",
                fetched_at=1_700_000_000.0 + i,
                request_bytes=b"GET /%d HTTP/1.1\r\nHost: a.test\r\n\r\n" % i,
                header_bytes=b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n",
                payload=b"<p>%d</p>" % i * 500,
            )
        )
    writer.close()
    (path,) = writer.paths
    return path


def first_member_length(data: bytes) -> int:
    """Length of the first gzip member of ``data`` (a WARC file's warcinfo record)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    d.decompress(data)
    return len(data) - len(d.unused_data)


def _uris(path: Path) -> list[str]:
    with path.open("rb") as fh:
        return [
            r.rec_headers.get_header("WARC-Target-URI")
            for r in ArchiveIterator(fh)
            if r.rec_type == "response"
        ]


def test_open_warc_cut_mid_record_is_truncated_and_closed(tmp_path: Path) -> None:
    full = _write_warc(tmp_path / "src", 5)
    data = full.read_bytes()
    assert complete_gzip_prefix(full) == len(data)
    out = tmp_path / "warc"
    out.mkdir()
    for cut in (len(data) - 7, len(data) // 2, 200):
        victim = out / f"x-{cut}.warc.gz.open"
        victim.write_bytes(data[:cut])
    recovered = recover_warcs(out).recovered
    assert not list(out.glob("*.open"))
    for path in recovered:
        uris = _uris(path)  # warcio reads every kept record to its end
        assert uris == [f"http://a.test/{i}" for i in range(len(uris))]
    names = {p.name for p in out.iterdir()}
    assert "x-200.warc.gz.open" not in names  # cut inside its warcinfo: removed, or kept if whole
    cut_last = out / f"x-{len(data) - 7}.warc.gz"
    with cut_last.open("rb") as fh:
        types = [r.rec_type for r in ArchiveIterator(fh)]
    assert types == ["warcinfo"] + ["response", "request"] * 4 + ["response"]  # last one cut


def test_open_warc_without_a_complete_record(tmp_path: Path) -> None:
    """Killed while the file's warcinfo was being written (empty, or part of that member):
    nothing of a fetch is in it, so it goes. Bytes too many for a warcinfo record, none of
    them a complete member: not ours to delete, set aside as .damaged."""
    full = _write_warc(tmp_path / "src", 1).read_bytes()
    first_member = first_member_length(full)
    out = tmp_path / "warc"
    out.mkdir()
    (out / "empty.warc.gz.open").write_bytes(b"")
    (out / "half.warc.gz.open").write_bytes(full[: first_member // 2])
    (out / "junk.warc.gz.open").write_bytes(b"\x1f\x8b" + bytes(range(256)) * 100)
    result = recover_warcs(out)
    assert result.recovered == []
    (aside,) = out.iterdir()
    assert aside.name.startswith("junk.warc.gz.open.damaged-")
    assert aside.read_bytes() == b"\x1f\x8b" + bytes(range(256)) * 100  # kept, byte for byte
    (warning,) = result.warnings
    assert str(out / "junk.warc.gz.open") in warning and aside.name in warning


def test_crawl_log_cut_mid_line(tmp_path: Path) -> None:
    log = tmp_path / "crawl.jsonl"
    log.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": ')
    assert recover_lines(log) == []  # a kill's leftover: cut, nothing to warn about
    assert log.read_bytes() == b'{"a": 1}\n{"b": 2}\n'
    assert recover_lines(log) == []
    assert log.read_bytes() == b'{"a": 1}\n{"b": 2}\n'


def _bytes_read() -> int:
    """Bytes this process has read through read(2) and the like so far (Linux's rchar)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def test_recovery_reads_the_tail_of_a_large_file_not_all_of_it(tmp_path: Path) -> None:
    """Issue 29: a restart after a kill spent most of its time inflating a whole unfinished
    WARC file. Recovery reads its last few MiB, whatever its size."""
    import random

    rnd = random.Random(29)
    writer = WarcWriter(tmp_path / "src", "t", 1 << 30, {})
    for i in range(48):  # incompressible payloads: a file of about 24 MiB
        writer.write(
            ArchiveRecord(
                url=f"http://a.test/{i}",
                ip="127.0.0.1",
                fetched_at=1_700_000_000.0 + i,
                request_bytes=b"GET /%d HTTP/1.1\r\nHost: a.test\r\n\r\n" % i,
                header_bytes=b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n",
                payload=rnd.randbytes(512 << 10),
            )
        )
    writer.close()
    (full,) = writer.paths
    size = full.stat().st_size
    assert size > 20 << 20
    out = tmp_path / "warc"
    out.mkdir()
    victim = out / "big.warc.gz.open"
    with full.open("rb") as src, victim.open("wb") as dst:
        dst.write(src.read(size - 20))  # killed inside the last capture's request record
    before = _bytes_read()
    (recovered,) = recover_warcs(out).recovered
    read = _bytes_read() - before
    assert read < 10 << 20, f"recovery read {read / (1 << 20):.1f} MiB of a {size >> 20} MiB file"
    uris = _uris(recovered)
    assert uris == [f"http://a.test/{i}" for i in range(48)]  # the last request record cut
    with recovered.open("rb") as fh:
        assert [r.rec_type for r in ArchiveIterator(fh)][-2:] == ["request", "response"]
