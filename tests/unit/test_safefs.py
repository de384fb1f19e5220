"""safefs: data-only diskcache, files never written through a symlink, who may write output_dir.

The tests run as root here: "another user" is made with os.chown to another uid.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from typing import Any

import diskcache
import pytest

from frontier_crawl.config import ConfigError, CrawlSettings, load
from frontier_crawl.frontier.robots import RobotsCache
from frontier_crawl.safefs import (
    check_output_dirs,
    create_fresh,
    make_dir,
    open_append,
    open_cache,
    regular_file,
    replace_file,
)

pytestmark = pytest.mark.timeout(30)


class Planted:
    """A pickle that creates ``marker`` when it is unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (self.marker, "w"))


# ----------------------------------------------------------------------------- diskcache


def test_data_disk_round_trips_bytes_small_and_in_files(tmp_path: Path) -> None:
    cache = open_cache(tmp_path / "c")
    try:
        cache.set("small", b"x" * 10)
        cache.set("big", b"y" * (1 << 16))  # past min_file_size: a value file
        assert cache.get("small") == b"x" * 10
        assert cache.get("big") == b"y" * (1 << 16)
        with pytest.raises(TypeError):
            cache.set("obj", (1, 2))  # would be pickled
        with pytest.raises(TypeError):
            cache.set(("tuple", "key"), b"v")  # would be a pickled key
    finally:
        cache.close()


def test_pickled_values_and_keys_are_misses_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    plain = diskcache.Cache(str(tmp_path / "c"))
    plain.set("value", Planted(marker))  # in SQLite
    plain.set("filed", [Planted(marker), b"z" * (1 << 16)])  # a pickle in a value file
    plain.set((Planted(marker),), b"v")  # a pickled key
    plain.close()
    cache = open_cache(tmp_path / "c")
    try:
        assert cache.get("value") is None and cache.get("filed") is None
        with pytest.raises(OSError, match="pickled cache key"):
            list(cache)  # iterating reads the stored keys
        cache.expire(now=float("inf"))  # maintenance reads rows too
    finally:
        cache.close()
    assert not marker.exists()


def test_rows_naming_files_outside_the_cache_are_neither_read_nor_deleted(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "precious"
    outside.write_bytes(b"keep me")
    cache = open_cache(tmp_path / "c")
    cache.set("k", b"w" * (1 << 16))
    cache.close()
    con = sqlite3.connect(tmp_path / "c" / "cache.db")
    con.execute("UPDATE Cache SET filename = ?", ("../precious",))
    con.commit()
    con.close()
    cache = open_cache(tmp_path / "c")
    try:
        assert cache.get("k") is None  # not the outside file's bytes
        cache.delete("k")  # diskcache removes the row's file: not the outside one
        cache.set("k", b"fresh")
        assert cache.get("k") == b"fresh"
    finally:
        cache.close()
    assert outside.read_bytes() == b"keep me"


def test_a_symlinked_value_file_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.write_bytes(b"s" * (1 << 16))
    cache = open_cache(tmp_path / "c")
    cache.set("k", b"w" * (1 << 16))
    (name,) = [p for p in (tmp_path / "c").rglob("*.val")]
    cache.close()
    name.unlink()
    name.symlink_to(outside)
    cache = open_cache(tmp_path / "c")
    try:
        assert cache.get("k") is None
    finally:
        cache.close()


def test_a_cache_with_settings_diskcache_never_writes_is_refused(tmp_path: Path) -> None:
    cache = open_cache(tmp_path / "c")
    cache.close()
    con = sqlite3.connect(tmp_path / "c" / "cache.db")
    con.execute("INSERT INTO Settings VALUES ('sqlite_query_only', 1)")
    con.commit()
    con.close()
    with pytest.raises(sqlite3.DatabaseError, match="sqlite_query_only"):
        open_cache(tmp_path / "c")


def test_robots_cache_of_an_older_version_reads_as_misses(tmp_path: Path) -> None:
    """Before this change the robots.txt cache held pickled (fetched_at, body) tuples: they
    are misses now (robots.txt is fetched again), and new entries are msgpack bytes."""
    old = diskcache.Cache(str(tmp_path / "robots"))
    old.set("http://a.test", (1.0, b"User-agent: *\nDisallow: /"))
    old.close()
    robots = RobotsCache(tmp_path / "robots", "fc", ttl_s=3600)
    try:
        assert robots.get("http://a.test") is None
        robots.store("http://a.test", 200, b"User-agent: *\nDisallow: /x")
        hit = robots.get("http://a.test")
        assert hit is not None and not hit[0].allowed("http://a.test/x")
    finally:
        robots.close()


# ----------------------------------------------------------------------------- files


def test_create_fresh_removes_a_planted_link_instead_of_following_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    link = tmp_path / "x.tmp"
    link.symlink_to(outside)
    os.close(create_fresh(link))
    assert outside.read_bytes() == b"keep" and not link.is_symlink()
    replace_file(tmp_path / "x", b"data")  # its temporary file is x.tmp again
    assert (tmp_path / "x").read_bytes() == b"data" and outside.read_bytes() == b"keep"


def test_open_append_and_regular_file_refuse_a_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep")
    link = tmp_path / "log"
    link.symlink_to(outside)
    with pytest.raises(OSError, match="symbolic link"):
        open_append(link)
    with pytest.raises(OSError, match="symbolic link"):
        regular_file(link)
    assert outside.read_bytes() == b"keep"


def test_directories_the_crawl_makes_are_not_group_or_other_writable(tmp_path: Path) -> None:
    old = os.umask(0)  # the most permissive umask: make_dir must not rely on it
    try:
        make_dir(tmp_path / "a" / "state", private=True)
        make_dir(tmp_path / "b" / "c")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / "state").stat().st_mode) == 0o700
    for made in ("a", "b", "b/c"):  # parents too
        assert stat.S_IMODE((tmp_path / made).stat().st_mode) == 0o755


# ----------------------------------------------------------------------------- ownership


def settings_for(tmp_path: Path, **crawl: Any) -> CrawlSettings:
    lines = ["[crawl]", 'seeds = ["http://a.test/"]', 'output_dir = "out"']
    lines += [f"{k} = {str(v).lower()}" for k, v in crawl.items()]
    path = tmp_path / "crawl.toml"
    path.write_text("\n".join(lines) + "\n")
    return load(path)


@pytest.mark.parametrize("where", ["out", "out/state", "out/warc", "out/worker-1/state"])
def test_a_directory_writable_by_others_is_refused(tmp_path: Path, where: str) -> None:
    settings = settings_for(tmp_path)
    check_output_dirs(settings)  # nothing there yet: the crawl creates it
    (tmp_path / where).mkdir(parents=True, mode=0o700)
    (tmp_path / "out").chmod(0o700)
    check_output_dirs(settings)
    (tmp_path / where).chmod(0o777 | stat.S_ISVTX)  # the sticky bit does not make it safe
    with pytest.raises(ConfigError, match=r"crawl\.output_dir: .* writable by group and others"
                       r".*chmod go-w.*allow_shared_output_dir"):  # fmt: skip
        check_output_dirs(settings)
    (tmp_path / where).chmod(0o770)
    with pytest.raises(ConfigError, match="writable by group"):
        check_output_dirs(settings)
    check_output_dirs(settings_for(tmp_path, allow_shared_output_dir=True))


def test_a_directory_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    os.chown(out, os.geteuid() + 4242, -1)
    with pytest.raises(ConfigError, match=f"owned by uid {os.geteuid() + 4242}"):
        check_output_dirs(settings_for(tmp_path))
    check_output_dirs(settings_for(tmp_path, allow_shared_output_dir=True))


def test_a_cluster_nodes_own_directory_is_the_one_checked(tmp_path: Path) -> None:
    """``output_dir = "out-{node}"``: the directory of the node started is examined."""
    lines = ["[crawl]", 'seeds = ["http://a.test/"]', 'output_dir = "out-{node}"']
    (tmp_path / "crawl.toml").write_text("\n".join(lines) + "\n")
    settings = load(tmp_path / "crawl.toml")
    (tmp_path / "out-1").mkdir()
    (tmp_path / "out-1").chmod(0o777)
    check_output_dirs(settings, tmp_path / "out-0")
    with pytest.raises(ConfigError, match="out-1 is writable"):
        check_output_dirs(settings, tmp_path / "out-1")


def test_an_http_cache_written_before_stays_readable(tmp_path: Path) -> None:
    """The HTTP cache always stored msgpack bytes under URL keys: a cache written by a plain
    diskcache.Cache (versions before DataDisk) reads as it was, small and filed values."""
    old = diskcache.Cache(str(tmp_path / "httpcache"))
    old.set("http://a.test/small", b"s" * 100)
    old.set("http://a.test/big", b"b" * (1 << 17))
    old.close()
    cache = open_cache(tmp_path / "httpcache", size_limit=1 << 30)
    try:
        assert cache.get("http://a.test/small") == b"s" * 100
        assert cache.get("http://a.test/big") == b"b" * (1 << 17)
    finally:
        cache.close()
