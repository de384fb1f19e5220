"""Issue 10, points 11 and 12, from a loopback server's own log: what a raw UTF-8 ``Location``
header makes the crawler request, and that a bad scope sends no request at all.

Settings shortened: ``politeness.min_delay_s`` 1.0 -> 0.05 and ``obey_robots`` off (neither is
what these tests are about; a handful of requests then takes well under a second).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from frontier_crawl.cli import main
from frontier_crawl.config import parse
from frontier_crawl.engine import Engine
from tests.conftest import render_toml
from tests.hostile.server import Exchange, RawHttpServer

HOST = "redirect.test"
#: Location values as raw bytes on the wire (the server writes header text as ISO-8859-1)
LOCATIONS = {
    "/utf8": "/caf\xc3\xa9",  # "/café" in UTF-8
    "/latin1": "/r\xe9sum\xe9",  # not UTF-8: the bytes are percent-encoded as they are
    "/query": "/q?x=\xc3\xa9",
}


def handler(ex: Exchange) -> None:
    path = ex.request.path
    if path == "/":
        links = "".join(f'<a href="{p}">x</a>' for p in LOCATIONS)
        ex.reply(200, links.encode())
    elif path in LOCATIONS:
        ex.reply(302, b"", [("Location", LOCATIONS[path])])
    else:
        ex.reply(200, b"<p>landed</p>")


@pytest.mark.timeout(60)
def test_url_point_11_raw_utf8_location_is_requested_percent_encoded(tmp_path: Path) -> None:
    with RawHttpServer(handler) as srv:
        s = parse(
            {
                "crawl": {"seeds": [srv.url(HOST, "/")], "output_dir": str(tmp_path / "out")},
                "politeness": {"min_delay_s": 0.05, "obey_robots": False},
                "fetch": {"resolve": srv.resolve(HOST)},
                "output": {"progress_interval_s": 0.0},
            }
        )
        report = Engine(s).run()
        requested = sorted(h.path for h in srv.hits())
    assert report["complete"] is True
    # what libcurl and browsers request, never the ISO-8859-1 reading "/caf%C3%83%C2%A9"
    assert requested == sorted(
        ["/", "/utf8", "/latin1", "/query", "/caf%C3%A9", "/r%E9sum%E9", "/q?x=%C3%A9"]
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "scope",
    [
        {"allow_domains": ["https://redirect.test"]},
        {"allow_domains": ["redirect.test:8080"]},
        {"allow_domains": ["other.test"]},  # the seed is outside the scope
        {"exclude": ["^http://"]},  # so is an excluded seed
    ],
)
def test_url_point_12_bad_scope_exits_2_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scope: dict[str, list[str]]
) -> None:
    with RawHttpServer(handler) as srv:
        config = tmp_path / "crawl.toml"
        config.write_text(
            render_toml(
                {
                    "crawl": {"seeds": [srv.url(HOST, "/")], "output_dir": str(tmp_path / "o")},
                    "politeness": {"min_delay_s": 0.05, "obey_robots": False},
                    "fetch": {"resolve": srv.resolve(HOST)},
                    "scope": scope,
                }
            )
        )
        status = main(["--config", str(config)])
        hits = srv.hits()
    err = capsys.readouterr().err
    assert status == 2, err
    assert "config error: scope.allow_domains[0]: " in err or "crawl.seeds[0]: " in err, err
    assert hits == []
