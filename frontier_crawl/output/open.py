"""``open_outputs``: every output of a crawl built from its settings (``protocol.py``).

Each output reads its own settings, ``output.durability`` included (``power-loss``: appends are
fdatasynced before a commit; ``process-crash``: handed to the OS). Start-up repair happens here:
WARC files and the crawl log a killed run left unfinished are closed (``recover.py``), each feed
is cut back to the offset the last commit recorded for it (``feeds.py``), and what cannot be
used is set aside with a warning for the report (never an exception for damage).
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from frontier_crawl import __version__
from frontier_crawl.config import CrawlSettings
from frontier_crawl.config.settings import FeedSection
from frontier_crawl.output.crawllog import CrawlLog
from frontier_crawl.output.feeds import Feed, decode_offset, open_feed
from frontier_crawl.output.protocol import Output, blob_name
from frontier_crawl.output.recover import recover_lines, recover_warcs
from frontier_crawl.output.warc import WarcWriter

log = logging.getLogger(__name__)


def power_loss_durable(settings: CrawlSettings) -> bool:
    """Whether outputs fdatasync before a commit (``output.durability = "power-loss"``)."""
    return settings.output.durability == "power-loss"


def warc_info(settings: CrawlSettings) -> dict[str, str]:
    """The warcinfo record's fields for this crawl."""
    return {
        "software": f"frontier-crawl/{__version__}",
        "format": "WARC File Format 1.1",
        "hostname": socket.gethostname(),
        "http-header-user-agent": settings.politeness.user_agent,
        "robots": "obey" if settings.politeness.obey_robots else "ignore",
    }


@dataclass(slots=True, frozen=True)
class Outputs:
    """A crawl's open outputs. ``all`` is the commit order: the archive first (the pages it
    settles append their items to the feeds before those are handed over)."""

    archive: WarcWriter | None  #: the output pages wait for (``None``: ``output.warc`` off)
    log: CrawlLog
    feeds: tuple[Feed, ...]
    all: tuple[Output, ...]
    warnings: tuple[str, ...]  #: what start-up repair did (for the report)


def open_outputs(
    settings: CrawlSettings,
    *,
    warc_dir: Path,
    crawl_log: Path,
    feed_root: Path,
    with_feeds: bool,
    load_blob: Callable[[str], bytes | None],
    keep_fds: Sequence[int] = (),
) -> Outputs:
    """Recover what a killed run left, then open the WARC writer (if ``output.warc``), the
    crawl log and, ``with_feeds`` (a spider runs), the feeds (``[[output.feeds]]``, else
    ``items.jsonl``; paths under ``feed_root``), each cut back to the commit point
    ``load_blob`` holds for it. ``keep_fds``: descriptors the WARC writer's child holds for
    its life (the state lock: the directory is not free while the child lives)."""
    warcs = recover_warcs(warc_dir)
    if warcs.recovered:
        log.warning("recovered %d unfinished WARC file(s)", len(warcs.recovered))
    warnings = [*warcs.warnings, *recover_lines(crawl_log)]
    durable = power_loss_durable(settings)
    with contextlib.ExitStack() as undo:  # a later part that fails: the earlier ones closed
        crawl = CrawlLog(crawl_log, durable=durable)
        undo.callback(crawl.discard)
        archive = (
            WarcWriter.from_settings(settings, warc_dir, warc_info(settings), keep_fds=keep_fds)
            if settings.output.warc
            else None
        )
        if archive is not None:
            undo.callback(archive.discard)  # its child process too
        opened: list[Feed] = []
        for spec in (settings.output.feeds or (FeedSection(),)) if with_feeds else ():
            name = f"feed:{spec.path}"
            committed = decode_offset(load_blob(blob_name(name)))
            feed, repaired = open_feed(
                feed_root / spec.path, name, spec.format, spec.fields, committed, durable=durable
            )
            undo.callback(feed.discard)
            warnings += repaired
            opened.append(feed)
        undo.pop_all()
    everything: tuple[Output, ...] = (*((archive,) if archive else ()), crawl, *opened)
    return Outputs(archive, crawl, tuple(opened), everything, tuple(warnings))
