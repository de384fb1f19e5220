"""The crawler's own log on stderr: text or JSON lines, in UTC, set up once per process.

The main process sets it up twice: before the config is read (so that a config error is
logged at all) and again with ``[logging]`` once it is; each worker process (started by
spawn, so with none of its parent's handlers) sets it up from the settings it is given.

A message that concerns one host or URL passes them as ``extra={"host": ..., "url": ...}``
(and ``"outcome"`` for a per-URL result): the JSON format writes them as fields of their own,
the text format leaves them out (they are in the message).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

__all__ = ["FIELDS", "UtcFormatter", "configure", "utc_stamp"]

#: the crawl's own fields a message may carry (``extra=``); JSON lines write them as keys
FIELDS = ("host", "url", "outcome")

_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}  # fmt: skip


def utc_stamp(record: logging.LogRecord) -> str:
    """``2026-12-04T18:30:02.123Z``: a record's time, ISO 8601 in UTC with its zone, as
    crawl.jsonl writes its times."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{stamp}.{int(record.msecs):03d}Z"


class UtcFormatter(logging.Formatter):
    """``2026-12-04T18:30:02.123Z INFO frontier_crawl.engine: ...``"""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        del datefmt
        return utc_stamp(record)


def _json_formatter() -> logging.Formatter:
    from pythonjsonlogger.json import JsonFormatter

    class _Json(JsonFormatter):
        def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
            del datefmt
            return utc_stamp(record)

        def add_fields(
            self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
        ) -> None:
            super().add_fields(log_data, record, message_dict)
            log_data.pop("taskName", None)  # asyncio's, always null here

    return _Json(
        "%(asctime)s %(levelname)s %(name)s %(message)s",
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        json_ensure_ascii=False,
    )


def configure(fmt: str = "text", level: str = "info", verbose: bool = False) -> None:
    """Replace the root logger's handlers with one on stderr in format ``fmt`` ("text" or
    "json"); the crawler's messages from ``level`` up (debug with ``verbose``), third-party
    libraries' from WARNING."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_json_formatter() if fmt == "json" else UtcFormatter(_TEXT))
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    ours = logging.getLogger("frontier_crawl")
    ours.setLevel(logging.DEBUG if verbose else _LEVELS.get(level, logging.INFO))
