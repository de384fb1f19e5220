"""A crawl's WARC files packaged as one WACZ (Web Archive Collection Zipped, 1.1.1), the file
ReplayWeb.page and pywb open: the WARC files under ``archive/``, a CDXJ index of every record
under ``indexes/``, ``pages/pages.jsonl`` (every HTML page fetched with a 2xx, with its
title), and ``datapackage.json`` with each file's SHA-256 (and its own digest beside it).

The format is written by the Webrecorder project's own ``wacz`` package (its ``create``
command, with the CDXJ indexer it uses); this module only finds the crawl's finished WARC
files and writes the page list, one record at a time. Memory stays bounded whatever the
crawl's size: the index is sorted by cdxj-indexer's external sort (a bounded buffer, then temp
files merged), the page list is streamed to a file the package copies as it is, and the WARC
files are copied into the zip in blocks. The zip stores the WARC files as they are (already
gzip-compressed), so the WACZ takes about as much disk again as the WARC files.

``wacz`` is an optional dependency (``pip install 'frontier-crawl[wacz]'``): :func:`available`
says whether it is installed, and the configuration check refuses ``output.wacz = true``
without it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["WaczResult", "available", "crawl_warc_files", "package_wacz", "wacz_path"]

#: pages.jsonl's first line (WACZ 1.1.1, "pages.jsonl")
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
#: bytes of a page's payload read for its <title>
TITLE_BYTES = 65_536


@dataclass(slots=True, frozen=True)
class WaczResult:
    """What :func:`package_wacz` wrote."""

    path: Path
    warc_files: int
    pages: int
    bytes: int


def available() -> bool:
    """Is the ``wacz`` package installed?"""
    return importlib.util.find_spec("wacz") is not None


def wacz_path(root: Path, prefix: str) -> Path:
    """Where a crawl's WACZ goes: ``<output_dir>/<warc_prefix>.wacz``."""
    return root / f"{prefix}.wacz"


def crawl_warc_files(root: Path) -> list[Path]:
    """Every finished WARC file of the crawl in ``root`` (all runs; every worker's), oldest
    first by name (names start with their UTC time); ``.open`` files are left out: they are
    recovered, and renamed, by the crawl's next start."""
    found = [*root.glob("warc/*.warc.gz"), *root.glob("worker-*/warc/*.warc.gz")]
    return sorted((p for p in found if p.is_file() and not p.is_symlink()),
                  key=lambda p: (p.name, str(p)))  # fmt: skip


def _title(payload: bytes, url: str) -> str:
    from selectolax.lexbor import LexborHTMLParser

    try:
        node = LexborHTMLParser(payload).css_first("title")
    except Exception:  # a page the parser cannot take: its URL stands for its title
        return url
    text = node.text(strip=True) if node is not None else ""
    return " ".join(text.split())[:500] or url


def _pages(warcs: list[Path]) -> Iterator[dict[str, str]]:
    """Each HTML page fetched with a 2xx, as a pages.jsonl entry, read one record at a time."""
    from warcio.archiveiterator import ArchiveIterator

    for path in warcs:
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type != "response" or record.http_headers is None:
                    continue
                status = record.http_headers.get_statuscode() or ""
                ctype = (record.http_headers.get_header("Content-Type") or "").lower()
                if not status.startswith("2") or "html" not in ctype:
                    continue
                url = record.rec_headers.get_header("WARC-Target-URI") or ""
                date = record.rec_headers.get_header("WARC-Date") or ""
                try:
                    head = record.content_stream().read(TITLE_BYTES)
                except Exception:  # a damaged payload (bad gzip): listed with its URL
                    head = b""
                yield {"url": url, "ts": date, "title": _title(head, url)}


def package_wacz(
    root: Path, out: Path, *, title: str = "", description: str = ""
) -> WaczResult:
    """Package the finished WARC files under ``root`` into the WACZ ``out`` (written beside
    it under a temporary name, then renamed: a WACZ at ``out`` is always whole). Raises
    ValueError when there is no WARC file to package, RuntimeError when the package fails."""
    from wacz.main import main as wacz_main

    warcs = crawl_warc_files(root)
    if not warcs:
        raise ValueError(f"no finished WARC file under {root} (warc/ or worker-*/warc/)")
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    pages_file = out.with_name(f".{out.stem}.{os.getpid()}.pages.jsonl")
    pages = 0
    try:
        with pages_file.open("w", encoding="utf-8") as f:
            f.write(json.dumps(PAGES_HEADER) + "\n")
            for page in _pages(warcs):
                f.write(json.dumps(page, ensure_ascii=False) + "\n")
                pages += 1
        args = ["create", "-o", str(tmp), "-p", str(pages_file), "--copy-pages"]
        if title:
            args += ["--title", title]
        if description:
            args += ["--desc", description]
        said = io.StringIO()
        with contextlib.redirect_stdout(said):  # it prints its progress
            status = wacz_main([*args, *map(str, warcs)])
        if status:
            raise RuntimeError(f"wacz create failed: {said.getvalue().strip()[-500:]}")
        os.replace(tmp, out)
    finally:
        for leftover in (tmp, pages_file):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    size = out.stat().st_size
    log.info("WACZ %s: %d WARC file(s), %d page(s), %d bytes", out, len(warcs), pages, size)
    return WaczResult(out, len(warcs), pages, size)
