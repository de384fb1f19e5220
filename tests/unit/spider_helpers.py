"""Helpers for the spider unit tests: real user modules written to tmp_path, loaded through the
real config loader and SpiderHost.load."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from frontier_crawl.config import CrawlSettings, load
from frontier_crawl.spider import Page, SpiderHost


@pytest.fixture
def isolated_imports() -> Iterator[None]:
    """Undo what loading user files does to sys.path and sys.modules."""
    path, modules = list(sys.path), dict(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - set(modules):
        del sys.modules[name]


def write(directory: Path, name: str, source: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def settings(
    directory: Path, spider: dict[str, Any] | None = None, extra: str = ""
) -> CrawlSettings:
    lines = ["[crawl]", 'seeds = ["http://a.test/"]', ""]
    if spider is not None:
        lines.append("[spider]")
        for key, value in spider.items():
            if isinstance(value, list):
                rendered = "[" + ", ".join(f'"{v}"' for v in value) + "]"
            else:
                rendered = f'"{value}"'
            lines.append(f"{key} = {rendered}")
    directory.mkdir(parents=True, exist_ok=True)
    toml = directory / "crawl.toml"
    toml.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return load(toml)


def host_for(directory: Path, source: str, **spider: Any) -> SpiderHost:
    """A host for a spider module ``source`` written as ``spider.py`` beside crawl.toml."""
    write(directory, "spider.py", source)
    host = SpiderHost.load(settings(directory, {"source": "spider.py", **spider}))
    assert host is not None
    host.open()
    return host


def page(**fields: Any) -> Page:
    values: dict[str, Any] = {
        "url": "http://a.test/dir/index.html",
        "status": 200,
        "headers": (("content-type", "text/html; charset=utf-8"),),
        "body": b"<html><head><title>T</title></head><body><p>hi</p></body></html>",
        "content_type": "text/html",
        "charset": None,
        "links": ["http://a.test/one", "http://a.test/two"],
        "depth": 0,
        "callback": "",
        "meta": b"",
    }
    values.update(fields)
    return Page(**values)
