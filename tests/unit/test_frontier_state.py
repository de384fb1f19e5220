"""frontier/state.py on its own: the frontier's files opened, checkpointed and closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from frontier_crawl.frontier.damage import DamagedState
from frontier_crawl.frontier.options import FrontierHooks, FrontierOptions
from frontier_crawl.frontier.recrawl import Bounds, RecrawlPolicy
from frontier_crawl.frontier.state import FRESH_FRONTIER, FRONTIER_ENV, RETIRED_FILES, StateFiles

OPTIONS = FrontierOptions(map_size=1 << 24)


def no_host(_origin: str) -> int:
    return -1


def test_open_checkpoint_close(tmp_path: Path) -> None:
    files = StateFiles.open(tmp_path, OPTIONS, FrontierHooks(), no_host)
    assert files.inbox is None and files.recrawl is None  # no routing, no recrawl
    assert (tmp_path / FRONTIER_ENV).is_dir() and (tmp_path / "robots").is_dir()
    with files.env.begin(write=True) as txn:
        txn.put(b"k", b"v", db=files.blobs)
    files.checkpoint()
    files.close()
    again = StateFiles.open(tmp_path, OPTIONS, FrontierHooks(), no_host)
    with again.env.begin(db=again.blobs) as txn:
        assert txn.get(b"k") == b"v"
    again.close()


def test_worker_mode_and_recrawl_open_their_parts(tmp_path: Path) -> None:
    recrawl = RecrawlPolicy(default=Bounds(100.0, 10.0, 1000.0))
    options = FrontierOptions(map_size=1 << 24, recrawl=recrawl)
    files = StateFiles.open(tmp_path, options, FrontierHooks(route=lambda _o: 0), no_host)
    assert files.inbox is not None and files.recrawl is not None
    files.close()


def test_a_damaged_environment_is_refused_with_what_it_means(tmp_path: Path) -> None:
    env = tmp_path / FRONTIER_ENV
    env.mkdir()
    (env / "data.mdb").write_bytes(b"")  # its pages lost
    with pytest.raises(DamagedState) as raised:
        StateFiles.open(tmp_path, OPTIONS, FrontierHooks(), no_host)
    assert raised.value.consequence == FRESH_FRONTIER


def test_an_older_versions_files_are_removed_never_followed(tmp_path: Path) -> None:
    """The Bloom filter snapshot older versions kept: removed at open; a symbolic link there
    is removed itself, its target left; a directory planted there is left (a warning)."""
    files = StateFiles.open(tmp_path, OPTIONS, FrontierHooks(), no_host)
    files.close()
    snapshot, tmp = (tmp_path / name for name in RETIRED_FILES)
    snapshot.write_bytes(b"FCSEEN02" + bytes(100))
    target = tmp_path.parent / f"{tmp_path.name}-target"
    target.write_bytes(b"someone else's")
    tmp.symlink_to(target)
    files = StateFiles.open(tmp_path, OPTIONS, FrontierHooks(), no_host)
    files.close()
    assert not snapshot.exists() and not tmp.is_symlink()
    assert target.read_bytes() == b"someone else's"
    snapshot.mkdir()
    files = StateFiles.open(tmp_path, OPTIONS, FrontierHooks(), no_host)  # opens all the same
    files.close()
    assert snapshot.is_dir()
