"""Sitemaps end to end (issue 22, point 4): the frontier-crawl command against a loopback site
whose robots.txt names a gzip sitemap index, a second host's sitemap (out of scope), a gzip
bomb; pages reachable only through the sitemaps. Checked from the server's own request log,
the crawl log and the WARC files."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from frontier_crawl.frontier.mailbox import owner_of
from frontier_crawl.frontier.urls import origin
from tests.scripted_server import NOT_FOUND, Answer, ScriptedServer, page

HOST, OTHER = "s.test", "other.test"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
GZIP = (("Content-Type", "application/x-gzip"),)
XML = (("Content-Type", "application/xml"),)
TEXT = (("Content-Type", "text/plain"),)
MIB = 1024 * 1024
PAGES = 24  #: pages per sitemap, linked from nowhere else
FAR_AWAY = 12_000  #: out-of-scope entries per sitemap (they make the two pass 1 MiB)


def urlset(entries: list[str]) -> bytes:
    body = "".join(
        f"<url><loc>{loc}</loc><lastmod>2024-03-0{i % 9 + 1}T10:00:00+00:00</lastmod></url>\n"
        for i, loc in enumerate(entries)
    )
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>\n{body}</urlset>\n'.encode()


class Site:
    """The bodies of the site, built once its port is known."""

    def __init__(self, port: int, canary: int, secret: Path) -> None:
        base = f"http://{HOST}:{port}"
        self.base = base
        self.pages = {f"/one/{i}" for i in range(PAGES)} | {f"/two/{i}" for i in range(PAGES)}
        far = [f"http://far{i % 7}.test/page/{i}" for i in range(FAR_AWAY)]
        one = [f"{base}/one/{i}" for i in range(PAGES)] + [f"{base}/private/hidden"] + far
        two = [f"{base}/two/{i}" for i in range(PAGES)] + [f"{base}/one/0"] + far  # a repeat
        self.one_xml, self.two_xml = urlset(one), urlset(two)
        index = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex {NS}>\n'
            f"<sitemap><loc>{base}/one.xml.gz</loc></sitemap>\n"
            f"<sitemap><loc>{base}/sitemap-two</loc><lastmod>2024-03-01</lastmod></sitemap>\n"
            f"<sitemap><loc>{base}/entities.xml</loc></sitemap>\n"
            f"<sitemap><loc>http://{OTHER}:{port}/more.xml</loc></sitemap>\n"
            "</sitemapindex>\n"
        ).encode()
        self.answers: dict[str, Answer] = {
            "/robots.txt": Answer(
                200,
                (
                    "User-agent: *\nDisallow: /private/\n"
                    f"Sitemap: {base}/index.xml.gz\n"
                    f"Sitemap: http://{OTHER}:{port}/sitemap.xml\n"
                    "Sitemap: /bomb.xml.gz\n"
                ).encode(),
                (("Content-Type", "text/plain"),),
            ),
            "/": page(),  # the seed links nowhere
            "/index.xml.gz": Answer(200, gzip.compress(index), GZIP),
            "/one.xml.gz": Answer(200, gzip.compress(self.one_xml), GZIP),
            # gzip without a .gz name, labelled XML: read by its magic bytes
            "/sitemap-two": Answer(200, gzip.compress(self.two_xml), XML),
            # external entities (a local file, a loopback service) and a billion laughs
            "/entities.xml": Answer(
                200,
                (
                    '<?xml version="1.0"?>\n<!DOCTYPE urlset [\n'
                    f'<!ENTITY secret SYSTEM "file://{secret}">\n'
                    f'<!ENTITY % remote SYSTEM "http://127.0.0.2:{canary}/evil.dtd"> %remote;\n'
                    '<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n'
                    f"]>\n<urlset><url><loc>{base}/leak/&secret;&b;</loc></url></urlset>\n"
                ).encode(),
                XML,
            ),
            # ~200 KiB of gzip that expand to 256 MiB
            "/bomb.xml.gz": Answer(
                200, gzip.compress(b"<urlset " + NS.encode() + b">" + b" " * (256 * MIB), 9), GZIP
            ),
        }

    def answer(self, host: str, path: str, _nth: int) -> Answer:
        if host != HOST:
            return page()  # (never asked: out of scope)
        if path in self.pages:
            return page()
        return self.answers.get(path, NOT_FOUND)


@pytest.mark.timeout(120)
def test_sitemaps_feed_the_crawl_within_scope_and_bounds(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET-do-not-crawl")
    canary = ScriptedServer(lambda h, p, n: Answer(200, b""), address="127.0.0.2")
    holder: dict[str, Site] = {}
    server = ScriptedServer(lambda h, p, n: holder["site"].answer(h, p, n))
    with server as srv, canary:
        site = holder["site"] = Site(srv.port, canary.port, secret)
        assert len(site.one_xml) + len(site.two_xml) > MIB  # decompressed, the two sitemaps
        assert len(site.answers["/bomb.xml.gz"].body) < 400 * 1024
        # the defaults, but for: the site (seed, scope, its loopback address), the feature
        # under test, a 0.01 s delay (50 pages at the default 1 s would take a minute), no
        # progress line
        (tmp_path / "crawl.toml").write_text(f"""
[crawl]
seeds = ["{site.base}/"]
output_dir = "out"
[scope]
allow_domains = ["{HOST}"]
[sitemaps]
enabled = true
[politeness]
min_delay_s = 0.01
[fetch]
resolve = ["{HOST}:{srv.port}:127.0.0.1", "{OTHER}:{srv.port}:127.0.0.1"]
allow_addresses = ["loopback"]
[output]
progress_interval_s = 0
""")
        proc = subprocess.run(
            [sys.executable, "-m", "frontier_crawl.cli", "--config", str(tmp_path / "crawl.toml")],
            capture_output=True, text=True, timeout=100, cwd=tmp_path,
        )  # fmt: skip
        log = srv.log()
        canary_log = canary.log()
    assert proc.returncode == 0, proc.stderr[-3000:]

    # the server's own log: exactly the in-scope pages and sitemaps, each once
    asked = Counter((e.host, e.path) for e in log)
    sitemaps = {"/index.xml.gz", "/one.xml.gz", "/sitemap-two", "/entities.xml",
                "/bomb.xml.gz", "/sitemap.xml"}  # fmt: skip
    expected = {"/robots.txt", "/"} | sitemaps | site.pages
    assert set(asked) == {(HOST, p) for p in expected}, set(asked) ^ {(HOST, p) for p in expected}
    assert set(asked.values()) == {1}
    assert canary_log == []  # the external parameter entity was never fetched

    # the crawl log: each sitemap's outcome; pages found through them at depth 1
    lines = [json.loads(x) for x in (tmp_path / "out" / "crawl.jsonl").read_text().splitlines()]
    by_path = {x["url"].split(str(srv.port), 1)[1]: x for x in lines if HOST in x["url"]}
    assert {p: by_path[p]["outcome"] for p in sitemaps} == {
        "/index.xml.gz": "sitemap",
        "/one.xml.gz": "sitemap",
        "/sitemap-two": "sitemap",
        "/entities.xml": "sitemap-invalid",  # a DOCTYPE: refused, no entity read
        "/bomb.xml.gz": "sitemap-too-large",  # stopped at max_bytes (50 MiB) decompressed
        "/sitemap.xml": "http-error",  # the default path, 404 here
    }
    for p in site.pages:
        assert by_path[p]["outcome"] == "fetched" and by_path[p]["depth"] == 1
        sitemap = "/one.xml.gz" if p.startswith("/one/") else "/sitemap-two"
        assert by_path[p]["referrer"] == site.base + sitemap
    assert by_path["/private/hidden"]["outcome"] == "robots-denied"
    assert by_path["/index.xml.gz"]["referrer"] == site.base + "/robots.txt"
    text = (tmp_path / "out" / "crawl.jsonl").read_text()
    assert "TOPSECRET" not in text and "/leak/" not in text
    assert OTHER not in text and "far0.test" not in text  # out of scope: never queued

    # the WARC: every sitemap fetch archived like any response (the bomb as sent, gzip)
    archived = {}
    for path in sorted((tmp_path / "out").glob("**/*.warc*")):
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response":
                    url = rec.rec_headers.get_header("WARC-Target-URI")
                    archived[url.split(str(srv.port), 1)[1]] = len(rec.content_stream().read())
    assert sitemaps <= set(archived)
    assert archived["/bomb.xml.gz"] == len(site.answers["/bomb.xml.gz"].body)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["complete"] is True
    assert report["outcomes"]["sitemap"] == 3 and report["outcomes"]["fetched"] == 1 + 2 * PAGES


@pytest.mark.timeout(120)
def test_sitemaps_across_two_workers(tmp_path: Path) -> None:
    """workers.processes = 2, the second host owned by the other worker: a Sitemap: line of
    one host's robots.txt, and sitemap entries, cross to the other worker's frontier with
    their callback (the sitemap is read as a sitemap there) and are fetched once."""

    def answer(host: str, path: str, _nth: int) -> Answer:
        if host == HOST:
            if path == "/robots.txt":
                return Answer(200, f"Sitemap: http://{other}:{port}/b.txt\n".encode(), TEXT)
            if path == "/sitemap.xml":
                pages = [f"http://{HOST}:{port}/s/{i}" for i in range(6)]
                return Answer(200, urlset([*pages, f"http://{other}:{port}/b/x"]), XML)
            return page() if path == "/" or path.startswith("/s/") else NOT_FOUND
        if path == "/b.txt":  # a text sitemap
            lines = [f"http://{other}:{port}/b/{i}" for i in range(6)]
            return Answer(200, "\n".join([*lines, f"http://{HOST}:{port}/s/0"]).encode(), TEXT)
        return page() if path.startswith("/b/") else NOT_FOUND

    with ScriptedServer(answer) as srv:
        port = srv.port
        mine = owner_of(origin(srv.url(HOST, "/")), 2)
        other = next(
            name for name in (f"b{i}.test" for i in range(64))
            if owner_of(origin(srv.url(name, "/")), 2) != mine
        )  # fmt: skip
        (tmp_path / "crawl.toml").write_text(f"""
[crawl]
seeds = ["{srv.url(HOST, "/")}"]
output_dir = "out"
[scope]
allow_domains = ["{HOST}", "{other}"]
[sitemaps]
enabled = true
[workers]
processes = 2
[politeness]
min_delay_s = 0.01
[fetch]
resolve = ["{HOST}:{port}:127.0.0.1", "{other}:{port}:127.0.0.1"]
allow_addresses = ["loopback"]
[output]
progress_interval_s = 0
""")
        proc = subprocess.run(
            [sys.executable, "-m", "frontier_crawl.cli", "--config", str(tmp_path / "crawl.toml")],
            capture_output=True, text=True, timeout=100, cwd=tmp_path,
        )  # fmt: skip
        log = srv.log()
    assert proc.returncode == 0, proc.stderr[-3000:]
    asked = Counter((e.host, e.path) for e in log)
    expected = {(HOST, p) for p in ["/robots.txt", "/", "/sitemap.xml"]}
    expected |= {(HOST, f"/s/{i}") for i in range(6)}
    expected |= {(other, p) for p in ["/robots.txt", "/b.txt", "/sitemap.xml", "/b/x"]}
    expected |= {(other, f"/b/{i}") for i in range(6)}
    assert set(asked) == expected, set(asked) ^ expected
    assert set(asked.values()) == {1}
    lines = [
        json.loads(x)
        for path in (tmp_path / "out").glob("**/crawl.jsonl")
        for x in path.read_text().splitlines()
    ]
    outcome = {x["url"].split(str(port), 1)[1] + "@" + x["url"].split("/")[2].split(":")[0]:
               x["outcome"] for x in lines}  # fmt: skip
    assert outcome[f"/b.txt@{other}"] == "sitemap" and outcome[f"/sitemap.xml@{HOST}"] == "sitemap"
    assert outcome[f"/sitemap.xml@{other}"] == "http-error"
