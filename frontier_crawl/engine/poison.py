"""A response no parser can read: one URL's outcome (``parse-error``), never the crawl's end.

The parsers of what a server sends (a page's links, a sitemap, a charset, a Location) are
written never to raise on any input, and a fuzz test holds them to it. Should one raise all the
same (on input nobody foresaw), the exception must stay with the response that caused it: a
traceback out of the loop would end the crawl, and every resume would die on the same URL.

:func:`read` calls one parser on one response; any ``Exception`` it raises comes out as
:class:`Unreadable`, which the engine catches where it handles one response (``Engine._handle``):
the URL is finished with outcome ``parse-error``, its crawl-log line names the exception in
``error`` and ``message``, its traceback goes to the log the first time a code location fails,
its WARC records stay written, nothing of it is followed, and the crawl goes on. Only the
parser's call is guarded: an error of the crawl's own state (LMDB, a full disk) is not a
property of one response and still ends the run as the loop's docstring says.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

__all__ = ["Unreadable", "read"]


class Unreadable(Exception):
    """A parser raised on one response: ``message`` names the exception and where it was
    raised (``"ValueError: year 0 is out of range (at sitemap.py:215 in w3c_datetime)"``)."""

    def __init__(self, cause: Exception) -> None:
        self.cause = cause
        self.kind = type(cause).__name__
        frames = traceback.extract_tb(cause.__traceback__)
        last = frames[-1] if frames else None
        self.where = f"{Path(last.filename).name}:{last.lineno} in {last.name}" if last else ""
        text = str(cause)
        head = f"{self.kind}: {text}" if text else self.kind
        self.message = f"{head} (at {self.where})" if self.where else head
        super().__init__(self.message)


#: code locations whose traceback was logged already (each once per process)
_logged: set[str] = set()


def read(parse: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """``parse(*args, **kwargs)``; any ``Exception`` it raises as :class:`Unreadable`."""
    try:
        return parse(*args, **kwargs)
    except Exception as exc:
        raise Unreadable(exc) from exc


def report(url: str, problem: Unreadable) -> None:
    """The problem to the log: with its traceback the first time its location fails."""
    if problem.where in _logged:
        log.warning("parse-error for %s: %s", url, problem.message)
        return
    _logged.add(problem.where)
    text = "".join(traceback.format_exception(problem.cause)).rstrip()
    log.error("parse-error for %s: %s\n%s", url, problem.message, text)
