"""Feeds (output/feeds.py) on real files: appended, cut back to the committed offset at start-up,
damaged or foreign files set aside (never overwritten, never a crash), CSV columns and cells;
the [[output.feeds]] config checks."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from frontier_crawl.config import ConfigError, parse
from frontier_crawl.output.feeds import Feed, decode_offset, open_feed


def jsonl(path: Path, committed: int | None) -> tuple[Feed, list[str]]:
    return open_feed(path, "feed:items.jsonl", "jsonl", (), committed, durable=True)


def csv_feed(
    path: Path, committed: int | None, fields: tuple[str, ...] = ()
) -> tuple[Feed, list[str]]:
    return open_feed(path, "feed:items.csv", "csv", fields, committed, durable=False)


def committed_after(feed: Feed, items: list[dict[str, object]]) -> int:
    feed.append(items)
    feed.prepare_commit()
    offset = decode_offset(feed.commit_point())
    assert offset is not None
    return offset


def test_a_feed_is_cut_back_to_its_committed_offset(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    feed, warnings = jsonl(path, None)
    assert warnings == []
    offset = committed_after(feed, [{"url": "a", "n": 1}, {"url": "b", "n": 2}])
    feed.append([{"url": "c (its page was never committed)"}])
    feed.prepare_commit()  # handed over, but the commit recording it never happened (a kill)
    with path.open("ab") as fh:
        fh.write(b'{"url": "d", "half a li')  # and a line cut by the kill
    feed.discard()
    feed, warnings = jsonl(path, offset)
    assert warnings == []
    committed_after(feed, [{"url": "e"}])
    feed.close()
    assert [json.loads(x)["url"] for x in path.read_text().splitlines()] == ["a", "b", "e"]


def test_line_separators_are_escaped(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    feed, _ = jsonl(path, None)
    committed_after(feed, [{"text": "a\u2028b\u2029c\x85d\ne"}])
    feed.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and json.loads(lines[0]) == {"text": "a\u2028b\u2029c\x85d\ne"}


def test_a_file_the_state_does_not_know_is_set_aside_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.write_text('{"url": "from another crawl"}\n')
    feed, warnings = jsonl(path, None)
    feed.close()
    assert len(warnings) == 1 and "set aside as items.jsonl.damaged-" in warnings[0]
    (aside,) = tmp_path.glob("items.jsonl.damaged-*")
    assert aside.read_text() == '{"url": "from another crawl"}\n'
    assert path.read_text() == ""


@pytest.mark.parametrize(
    ("content", "committed", "problem"),
    [
        (b'{"a": 1}\n', 100, "shorter than the 100"),
        (b'{"a": 1}\n{"b": 2}\n', 5, "is not the end of a line"),
    ],
)
def test_a_damaged_feed_is_set_aside_and_a_new_one_begins(
    tmp_path: Path, content: bytes, committed: int, problem: str
) -> None:
    path = tmp_path / "items.jsonl"
    path.write_bytes(content)
    feed, warnings = jsonl(path, committed)
    committed_after(feed, [{"url": "new"}])
    feed.close()
    assert len(warnings) == 1 and problem in warnings[0], warnings
    (aside,) = tmp_path.glob("items.jsonl.damaged-*")
    assert aside.read_bytes() == content
    assert [json.loads(x) for x in path.read_text().splitlines()] == [{"url": "new"}]


def test_a_directory_or_a_missing_file_is_no_crash(tmp_path: Path) -> None:
    path = tmp_path / "items.jsonl"
    path.mkdir()
    feed, warnings = jsonl(path, 10)
    feed.close()
    assert path.is_file() and "not a regular file" in warnings[0]
    path.unlink()
    feed, warnings = jsonl(path, 10)
    feed.close()
    assert "missing" in warnings[0]


def test_csv_columns_from_the_first_item_kept_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    feed, _ = csv_feed(path, None)
    items: list[dict[str, object]] = [
        {"url": "a", "n": 1, "ok": True, "tags": ["x", "y"], "none": None},
        {"url": "b,\n\"quoted\"", "extra": "left out", "n": 2.5},
    ]
    offset = committed_after(feed, items)
    feed.close()
    feed, warnings = csv_feed(path, offset)  # a restart: the columns come from the header row
    assert warnings == [] and feed.columns == ("url", "n", "ok", "tags", "none")
    committed_after(feed, [{"url": "c", "none": "now"}])
    feed.close()
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert rows == [
        {"url": "a", "n": "1", "ok": "true", "tags": '["x","y"]', "none": ""},
        {"url": 'b,\n"quoted"', "n": "2.5", "ok": "", "tags": "", "none": ""},
        {"url": "c", "n": "", "ok": "", "tags": "", "none": "now"},
    ]


def test_csv_fields_give_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "items.csv"
    feed, _ = csv_feed(path, None, ("title", "url"))
    committed_after(feed, [{"url": "a", "title": "A", "other": 1}])
    feed.close()
    assert path.read_text().splitlines() == ["title,url", "A,a"]


def test_csv_fields_give_the_header_even_without_items(tmp_path: Path) -> None:
    """A crawl whose pages yield nothing still leaves a CSV file with its header row, written
    (and committed) by the first commit; a restart continues it with no second header."""
    path = tmp_path / "items.csv"
    feed, _ = csv_feed(path, None, ("title", "url"))
    offset = committed_after(feed, [])
    feed.close()
    assert path.read_bytes() == b"title,url\r\n"
    assert offset == len("title,url\r\n")
    feed, warnings = csv_feed(path, offset, ("title", "url"))
    assert warnings == []
    committed_after(feed, [{"url": "a", "title": "A"}])
    feed.close()
    assert path.read_text().splitlines() == ["title,url", "A,a"]


@pytest.mark.parametrize(
    ("feeds", "message"),
    [
        ([{"path": "../x.jsonl"}], "without '..'"),
        ([{"path": "/abs.jsonl"}], "relative to output_dir"),
        ([{"path": "crawl.jsonl"}], "the crawl itself writes"),
        ([{"path": "a.jsonl", "fields": ["x"]}], "only for format"),
        ([{"path": "a.csv", "format": "csv", "fields": ["x", "x"]}], "named twice"),
        ([{"path": "a.jsonl"}, {"path": "a.jsonl"}], "share a path"),
        ([{"path": "a.xml", "format": "xml"}], "format"),
    ],
)
def test_bad_feed_config_names_the_key(feeds: list[dict[str, object]], message: str) -> None:
    with pytest.raises(ConfigError, match="output") as err:
        parse({"crawl": {"seeds": ["http://a.test/"]}, "output": {"feeds": feeds}})
    assert message in str(err.value)


def test_feeds_without_anything_that_yields_items_are_warned_about() -> None:
    from frontier_crawl.output import config_warnings

    feeds_only = parse({"crawl": {"seeds": ["http://a.test/"]},
                        "output": {"feeds": [{"path": "items.jsonl"}]}})  # fmt: skip
    (warning,) = config_warnings(feeds_only)
    assert "output.feeds" in warning and "stay empty" in warning
    with_rules = parse({
        "crawl": {"seeds": ["http://a.test/"]},
        "output": {"feeds": [{"path": "items.jsonl"}]},
        "extract": [{"url": "/item/", "fields": {"name": "h1"}}],
    })  # fmt: skip
    assert config_warnings(with_rules) == []
