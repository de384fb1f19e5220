"""The free-space monitor and the translation of LMDB write errors, on real directories."""

from __future__ import annotations

import contextlib
import errno
from pathlib import Path

import lmdb
import pytest

from frontier_crawl.frontier import StorageError
from frontier_crawl.frontier.store import storage_errors
from frontier_crawl.output.space import SpaceMonitor, free_bytes, human_bytes


def test_each_filesystem_is_counted_once(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "warc").mkdir()
    monitor = SpaceMonitor([tmp_path, tmp_path / "state", tmp_path / "warc"], 1)
    assert monitor.paths == [tmp_path]  # one statvfs per look, not three


def test_below_the_floor_names_the_path_and_the_space(tmp_path: Path) -> None:
    free = free_bytes(tmp_path)
    assert SpaceMonitor([tmp_path], max(1, free // 2)).check(0.0) is None
    low = SpaceMonitor([tmp_path], free * 4 + (1 << 30)).check(0.0)
    assert low is not None and low.path == tmp_path
    assert 0 < low.free_bytes < free * 4 + (1 << 30)


def test_looks_at_most_once_per_interval(tmp_path: Path) -> None:
    watched = tmp_path / "out"
    watched.mkdir()
    monitor = SpaceMonitor([watched], 1 << 62, interval_s=1.0)
    first = monitor.check(10.0)
    assert first is not None
    watched.rmdir()  # a look now would fail: the answers below come from the last look
    assert monitor.check(10.5) is first
    assert monitor.check(10.99) is first
    with pytest.raises(FileNotFoundError):
        monitor.check(11.0)


def test_a_zero_floor_never_looks(tmp_path: Path) -> None:
    monitor = SpaceMonitor([tmp_path / "missing", tmp_path], 0)
    tmp_path.rmdir()
    assert monitor.check(0.0) is None and monitor.check(5.0) is None


@pytest.mark.parametrize("new_floor", ["half the free space", "zero"])
def test_a_new_floor_ends_a_pause_at_the_next_check(tmp_path: Path, new_floor: str) -> None:
    """A reload that lowers output.min_free_bytes (or sets it to 0) while the crawl is paused
    for space resumes it at the next tick, not at the old floor's resume level (before the fix
    a pause kept the old resume level, and a floor of 0 kept the last answer for good)."""
    free = free_bytes(tmp_path)
    monitor = SpaceMonitor([tmp_path], free * 4 + (1 << 30), interval_s=60.0)
    assert monitor.check(0.0) is not None  # paused
    monitor.min_free_bytes = max(1, free // 2) if new_floor != "zero" else 0
    assert monitor.check(1.0) is None  # well within the old look's interval


def test_human_bytes() -> None:
    assert human_bytes(640) == "640 B"
    assert human_bytes(3 << 20) == "3.0 MiB"
    assert human_bytes(int(1.5 * (1 << 30))) == "1.5 GiB"


def test_lmdb_errors_become_storage_errors_with_errno(tmp_path: Path) -> None:
    with pytest.raises(StorageError) as info, storage_errors(tmp_path / "frontier.lmdb"):
        raise lmdb.DiskError("mdb_txn_commit: No space left on device")
    assert isinstance(info.value, OSError) and info.value.errno == errno.ENOSPC
    assert str(tmp_path / "frontier.lmdb") in str(info.value)
    with pytest.raises(StorageError) as info, storage_errors(tmp_path):
        raise lmdb.Error("mdb_something: Input/output error")
    assert info.value.errno == errno.EIO


def test_an_lmdb_io_error_on_a_full_disk_is_said_to_be_no_space(tmp_path: Path) -> None:
    """LMDB reports a write that a full disk cut short as EIO ("Input/output error"); on a
    filesystem with (almost) nothing free, the StorageError says no space and has ENOSPC, so
    the operator frees space (tests/e2e/test_disk_full.py met it on a full tmpfs in CI: the
    error line named an I/O error). Elsewhere an I/O error stays one (above)."""
    from tests.e2e.test_disk_full import MIB, Tmpfs

    fs = Tmpfs(tmp_path / "fs", MIB)
    try:
        with (fs.path / "filler").open("wb") as fh, contextlib.suppress(OSError):
            while True:
                fh.write(b"x" * 65536)
                fh.flush()
        with pytest.raises(StorageError) as info, storage_errors(fs.path / "frontier.lmdb"):
            raise lmdb.Error("mdb_txn_commit: Input/output error")
        assert info.value.errno == errno.ENOSPC
        assert "No space left on device" in str(info.value)
        assert "Input/output error" in str(info.value)  # what LMDB said, kept
    finally:
        fs.unmount()
