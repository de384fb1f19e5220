"""The crawl's figures as a person reads them agree on every screen (issue 31): the terminal panel
(a real pseudo-terminal), ``ctl status``, ``/metrics``, the dashboard and report.html (headless
Chromium), and report.json, over a crawl stopped (SIGINT to its process group, as Ctrl-C) and
resumed three times, and over a short continuous crawl.

Settings that differ from conftest.crawl_config's (and why):
* ``control.listen = "127.0.0.1:0"``: the API is off by default; port 0 so tests never collide;
* ``politeness.min_delay_s`` 0.25: a steady, politeness-bound rate (about 4 pages/s per host,
  12 in all) that runs through four short runs without finishing the 600-page site;
* ``output.progress_interval_s`` 0.5: the panel redrawn often, so its last frame is fresh;
* ``output.warc_max_bytes`` 200 kB: each run writes WARC files of its own (report.json must
  list every run's).
The continuous crawl: ``[recrawl]`` intervals of 2 to 6 s, not hours (a 20-second crawl must
revisit), and the default politeness delay cut to 0.2 s for the same reason.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selectolax.lexbor import LexborHTMLParser

from frontier_crawl.demo.server import DemoServer
from frontier_crawl.demo.site import Site, SiteSpec
from frontier_crawl.figures import duration_text, rate_text
from tests.conftest import crawl_config, render_toml
from tests.control_client import read_api_files
from tests.e2e.test_dashboard_browser import CHROMIUM, CHROMIUM_ARGS, Api, playwright_sync
from tests.recrawl_site import RecrawlSite
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

PANEL_TOP = "╭─ frontier-crawl"
ANSI = re.compile(r"\x1b\[[\d;?]*[A-Za-z]")


class Terminal:
    """A crawl on a pseudo-terminal of 120 columns, in a session of its own (its process
    group gets the signals a terminal's Ctrl-C sends); its output read by a thread."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        main, sub = pty.openpty()
        import fcntl
        import struct
        import termios

        fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = {k: v for k, v in os.environ.items()
               if k not in ("FORCE_COLOR", "NO_COLOR", "COLUMNS", "LINES", "TTY_COMPATIBLE")}
        env["TERM"] = "xterm-256color"  # fmt: skip
        self.proc = subprocess.Popen(args, cwd=cwd, stdin=sub, stdout=sub, stderr=sub, env=env,
                                     start_new_session=True, close_fds=True)  # fmt: skip
        os.close(sub)
        self._main = main
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self._main], [], [], 0.2)
            if ready:
                try:
                    data = os.read(self._main, 65536)
                except OSError:
                    return
                if not data:
                    return
                self._chunks.append(data)
            elif self.proc.poll() is not None:
                return

    def text(self) -> str:
        return ANSI.sub("", b"".join(self._chunks).decode("utf-8", "replace"))

    def interrupt(self) -> int:
        """Ctrl-C: SIGINT to the whole process group; the exit status."""
        os.killpg(self.proc.pid, signal.SIGINT)
        status = self.proc.wait(timeout=60)
        self._reader.join(timeout=10)
        os.close(self._main)
        return status

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _panels(text: str) -> list[str]:
    return text.split(PANEL_TOP)[1:]


def _panel_figures(panel: str) -> dict[str, float]:
    """pages, pages/s and elapsed (all runs) of one frame of the panel."""
    num = r"([\d,.]+)"
    pages = re.search(num + r"\s+pages\b", panel)
    rate = re.search(num + r"\s+pages/s", panel)
    elapsed = re.search(r"([\d.]+ s|\d+ min \d+ s)\s+elapsed \(all runs\)", panel)
    assert pages and rate and elapsed, panel
    return {"pages": float(pages.group(1).replace(",", "")),
            "rate": float(rate.group(1).replace(",", "")),
            "elapsed": _seconds(elapsed.group(1))}  # fmt: skip


def _seconds(text: str) -> float:
    m = re.fullmatch(r"(\d+) min (\d+) s", text.strip())
    return int(m.group(1)) * 60 + int(m.group(2)) if m else float(text.split()[0])


def _ctl(cfg: Path, *action: str) -> str:
    """``frontier-crawl ctl ACTION --config crawl.toml`` (--config after the action)."""
    proc = subprocess.run([sys.executable, "-m", "frontier_crawl.cli", "ctl", *action,
                           "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _ctl_figures(text: str) -> dict[str, float]:
    m = re.search(r"pages\s+([\d,]+) \(([\d.,]+)/s, last 10 s\), elapsed (.+?) \(all runs\)", text)
    assert m, text
    return {"pages": float(m.group(1).replace(",", "")), "rate": float(m.group(2)),
            "elapsed": _seconds(m.group(3))}  # fmt: skip


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _ending_checks(text: str, out: Path) -> None:
    """The run's last lines: how it ended, and where its outputs are."""
    tail = text.strip().splitlines()[-6:]
    said = "\n".join(tail)
    assert re.search(r"stopped on request .*; [\d,]+ URLs queued; run the same command to resume",
                     said), said  # fmt: skip
    assert f"{out / 'report.html'}" in said and f"{out / 'report.json'}" in said, said
    assert re.search(r"WARC files:\s+\d+ in " + re.escape(str(out / "warc")), said), said
    assert f"crawl log:   {out / 'crawl.jsonl'}" in said, said


@pytest.fixture(scope="module")
def web() -> Iterator[tuple[Site, DemoServer]]:
    site = Site(SiteSpec(hosts=3, pages=600, crawl_delay_s=None, seed=31, page_bytes=20_000))
    with DemoServer(site) as server:
        yield site, server


def test_figures_agree_over_three_stops_and_resumes(
    tmp_path: Path, web: tuple[Site, DemoServer]
) -> None:
    site, server = web
    cfg = crawl_config(
        tmp_path, site, server.port, control={"listen": "127.0.0.1:0"},
        politeness={"min_delay_s": 0.25, "user_agent": "frontier-crawl-test/0.1"},
        output={"progress_interval_s": 0.5, "warc_max_bytes": 200_000},
    )  # fmt: skip
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)]
    reports: list[dict[str, Any]] = []
    warcs_seen: set[str] = set()
    for run in range(3):
        term = Terminal(cmd, tmp_path)
        try:
            goal = (reports[-1]["fetched"] if reports else 0) + 15
            _started_and_crawled(term, out, goal)
            # the files the run writes now: every one must be in the report, whichever run
            warcs_seen.update(p.name for p in (out / "warc").iterdir() if ".open" not in p.name)
            assert term.interrupt() == 0, term.text()[-3000:]
        finally:
            term.kill()
        text = term.text()
        report = json.loads((out / "report.json").read_text())
        reports.append(report)
        assert report["complete"] is False and report["stopped_by_signal"] is True
        _ending_checks(text, out)
        # item 7: the panel's last frame is the report's figures, not an older tick's
        assert _panel_figures(_panels(text)[-1])["pages"] == report["fetched"], text[-2000:]
        # item 2: every run's WARC files are listed, the first run's too
        listed = {Path(p).name for p in report["warc_files"]}
        assert warcs_seen <= listed, (warcs_seen - listed, listed)
        assert report["runs"] == run + 1
        assert report["this_run"]["pages"] == report["fetched"] - (goal - 15)
    assert reports[-1]["elapsed_s"] > reports[-1]["this_run"]["elapsed_s"] + 1

    # the fourth run: every screen read while it crawls, then while it is paused
    term = Terminal(cmd, tmp_path)
    try:
        api = Api(out)
        wait_until("a steady rate this run", lambda: api.status()["this_run"]["elapsed_s"] >= 6,
                   60, alive=term.proc, detail=term.text)  # fmt: skip
        status = api.status()
        panel = _panel_figures(_panels(term.text())[-1])
        ctl = _ctl_figures(_ctl(cfg, "status"))
        # item 1: the panel's pages/s is the status's (last 10 s), not every run's pages over
        # this run's time (what it showed before: several times the true rate here)
        true = status["pages_per_s"]
        for name, shown in (("panel", panel["rate"]), ("ctl status", ctl["rate"])):
            assert abs(shown - true) <= 0.4 * true + 1, (name, shown, status)
        wrong = status["pages"] / status["this_run"]["elapsed_s"]
        assert abs(panel["rate"] - true) < abs(panel["rate"] - wrong), (panel, status)
        assert panel["elapsed"] >= reports[-1]["elapsed_s"], panel  # every run's time
        _ctl(cfg, "pause")
        wait_until("paused, nothing in flight",
                   lambda: (s := api.status())["paused"] and s["in_flight"] == 0, 30)
        # every page fetched so far counted: its WARC records durable, its line in the log
        wait_until("the pages in the crawl log all counted",
                   lambda: api.status()["pages"] == _logged_pages(out), 30,
                   detail=lambda: (api.status()["pages"], _logged_pages(out)))  # fmt: skip
        paused = api.status()
        wait_until("the panel redrawn with the paused figures",
                   lambda: _panel_figures(_panels(term.text())[-1])["pages"] == paused["pages"],
                   15)  # fmt: skip
        panel = _panel_figures(_panels(term.text())[-1])
        ctl = _ctl_figures(_ctl(cfg, "status"))
        metrics = api_metrics(api)
        with playwright_sync.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                         headless=True)  # fmt: skip
            try:
                page = browser.new_page()
                page.goto(f"http://{api.address}/?token={api.token}")
                wait_until("the dashboard drawn",
                           lambda: page.get_attribute("body", "data-pages"), 15)  # fmt: skip
                dom = LexborHTMLParser(page.content())
                board_pages = int(dom.css_first("#pages").text().replace(",", ""))
                board_elapsed = dom.css_first("#elapsed").text()
                after = api.status()  # every screen was read between paused and this
                term_status = term.interrupt()
                html = _report_html(browser, out)
            finally:
                browser.close()
    finally:
        term.kill()
    assert term_status == 0, term.text()[-3000:]
    report = json.loads((out / "report.json").read_text())
    pages = paused["pages"]
    assert panel["pages"] == ctl["pages"] == board_pages == pages, (panel, ctl, board_pages)
    assert _metric(metrics, "frontier_crawl_pages_total", outcome="fetched") == pages
    assert report["fetched"] == pages and html["pages"] == pages, (report["fetched"], html)
    # elapsed, every run's: on every screen, within the time the screens were read (a
    # browser's start may take seconds on a loaded machine), give or take their rounding
    board_s = _seconds(board_elapsed.split(" elapsed")[0].replace(" h ", " min "))
    for name, seconds in (("panel", panel["elapsed"]), ("ctl", ctl["elapsed"]),
                          ("dashboard", board_s)):  # fmt: skip
        assert paused["elapsed_s"] - 2 <= seconds <= after["elapsed_s"] + 2, (
            name, seconds, paused["elapsed_s"], after["elapsed_s"])  # fmt: skip
    assert paused["elapsed_s"] <= report["elapsed_s"] <= paused["elapsed_s"] + 30
    assert "this run: " in board_elapsed and report["runs"] == 4
    assert html["elapsed"] == duration_text(report["elapsed_s"]), html
    assert html["rate"] == rate_text(report["pages_per_s"]), html
    assert report["pages_per_s"] == pytest.approx(pages / report["elapsed_s"], rel=0.01)
    assert report["this_run"]["pages"] == pages - reports[-1]["fetched"]

    # item 8: the report again, from the output directory (--config after the command), in a
    # pipe: one line per figure, never wrapped mid-value at 80 columns
    (out / "report.html").unlink()
    again = subprocess.run([sys.executable, "-m", "frontier_crawl.cli", "report", "--config",
                            str(cfg)], capture_output=True, text=True, timeout=60,
                           check=False)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert (out / "report.html").exists()
    seen = report["seen"]["count"]
    assert re.search(rf"seen URLs\s+{seen:,}\n", again.stdout), again.stdout  # on its line
    assert re.search(rf"fetched\s+{pages:,} pages", again.stdout), again.stdout
    assert "run the same command to resume" in again.stdout.strip().splitlines()[-5]


def _started_and_crawled(term: Terminal, out: Path, goal: int) -> None:
    """The run said where its dashboard is, then crawled up to ``goal`` pages (all runs)."""
    wait_until("the dashboard's address at the start",
               lambda: re.search(r"dashboard: http://127\.0\.0\.1:\d+/", term.text()),
               30, alive=term.proc, detail=term.text)  # fmt: skip
    status = Api(out).status
    wait_until("pages this run", lambda: status()["pages"] >= goal, 60, alive=term.proc,
               detail=term.text)  # fmt: skip


def _logged_pages(out: Path) -> int:
    """Lines of outcome ``fetched`` in the crawl log (every run's)."""
    lines = (out / "crawl.jsonl").read_text().splitlines()
    return sum(1 for line in lines if line.strip() and json.loads(line)["outcome"] == "fetched")


def api_metrics(api: Api) -> str:
    import http.client

    host, _, port = api.address.rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {api.token}"})
        reply = conn.getresponse()
        assert reply.status == 200
        return reply.read().decode()
    finally:
        conn.close()


def _report_html(browser: Any, out: Path) -> dict[str, Any]:
    """report.html as a browser shows it: the cards' values by their labels."""
    page = browser.new_page()
    page.goto((out / "report.html").as_uri())
    dom = LexborHTMLParser(page.content())
    cards = {c.css_first(".k").text(): c.css_first(".v").text() for c in dom.css(".card")
             if c.css_first(".k") is not None and c.css_first(".v") is not None}  # fmt: skip
    page.close()
    return {
        "pages": int(cards["pages fetched (all runs)"].replace(",", "")),
        "rate": cards["pages / s (whole crawl)"],
        "elapsed": cards["crawl time (all runs)"],
        "this_run": cards.get("this run"),
        "revisits": cards.get("revisits (all runs)"),
        "badge": dom.css_first(".badge").text(),
        "svg": page_svg(dom),
    }


def page_svg(dom: LexborHTMLParser) -> list[str]:
    return [p.attributes.get("class") or "" for p in dom.css("svg polyline")]


def test_a_short_continuous_crawl_counts_its_revisits_everywhere(tmp_path: Path) -> None:
    with RecrawlSite(hosts=2, fast_period_s=2.0) as site:
        cfg = tmp_path / "crawl.toml"
        cfg.write_text(render_toml({
            "crawl": {"seeds": site.seeds(), "output_dir": "out"},
            "fetch": {"resolve": site.resolve_entries()},
            "politeness": {"min_delay_s": 0.2},
            "recrawl": {"enabled": True, "min_interval_s": 2.0, "initial_interval_s": 2.0,
                        "max_interval_s": 6.0},
            "control": {"listen": "127.0.0.1:0"},
            "output": {"progress_interval_s": 0.5},
        }))  # fmt: skip
        out = tmp_path / "out"
        term = Terminal([sys.executable, "-m", "frontier_crawl.cli", "--config", str(cfg)],
                        tmp_path)
        try:
            read_api_files(out)
            # nobody asks for the status: the run's freshness rates count from its start all
            # the same (issue 34 item 10); the revisits are seen in the site's own log
            wait_until("revisits on the wire",
                       lambda: sum(1 for h in site.hits() if h.conditional) >= 20, 60,
                       alive=term.proc, detail=term.text)  # fmt: skip
            status = term.interrupt()
        finally:
            term.kill()
        text = term.text()
    assert status == 0, text[-3000:]
    report = json.loads((out / "report.json").read_text())
    fresh = report["freshness"]
    revisits = sum(n for kind, n in fresh["visits"].items() if kind != "new")
    assert report["revisits"] == revisits > 0, (report["revisits"], fresh)
    assert fresh["per_hour"]["revisits"] > 0, fresh
    # the panel shows them, and names a crawl waiting for its schedule otherwise than "idle"
    last = _panels(text)[-1]
    assert re.search(r"[\d,]+\s+revisits\b", last), last
    assert not re.search(r"bottleneck idle", text), text[-3000:]
    assert "on the revisit schedule (a continuous crawl)" in text.strip().splitlines()[-5]
    # report.html: its chart counts the revisits, over the time the run ran (not a span that
    # ended at the last first visit)
    ran = sum(p[2] for p in report["pages_over_time"])
    assert ran >= report["this_run"]["elapsed_s"] - 2, (report["pages_over_time"], report)
    assert sum(p[3] for p in report["pages_over_time"]) == report["revisits"]
    html = (out / "report.html").read_text()
    assert 'class="line revisits"' in html
