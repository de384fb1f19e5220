"""The one error a frontier raises at start-up for state it cannot use as it finds it.

The frontier only detects damage (it owns the formats); what to do about it is the engine's
decision: set the file or directory aside, say so, and build the frontier again.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path


class DamagedState(Exception):
    """``path`` (a file or directory of the state directory) is unreadable or inconsistent.

    ``problem`` says what is wrong with it; ``consequence`` what setting it aside and starting
    it afresh means for the crawl (both written for the operator).
    """

    def __init__(self, path: Path, problem: str, consequence: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.consequence = consequence


#: errnos of a disk in trouble (full, failing, read-only), as opposed to a damaged file
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})
#: the same, as SQLite reports them (primary result codes, the low byte of extended ones)
_SQLITE_DISK_CODES = frozenset({sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY})


def disk_trouble(path: Path, exc: BaseException) -> OSError | None:
    """``exc`` as an OSError naming ``path`` if it says the disk is full, failing or read-only
    (then the file is not damaged: setting it aside would be wrong), else None."""
    if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
        return OSError(exc.errno, f"{path}: {exc.strerror or exc}")
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.Error) and code is not None and code & 0xFF in _SQLITE_DISK_CODES:
        number = errno.ENOSPC if code & 0xFF == sqlite3.SQLITE_FULL else errno.EIO
        return OSError(number, f"{path}: {exc}")
    return None
