"""State is data, never code: how the crawl creates its files and opens its caches.

A crawl runs for days as some user, in directories other tools touch. Whoever can plant a
file there must not be able to make the crawl run code, or write somewhere else:

* **No pickle.** diskcache, which keeps the robots.txt cache and the HTTP cache, unpickles
  every value (and key) it did not store raw. :func:`open_cache` gives it :class:`DataDisk`,
  which stores and returns only ``str`` keys and ``bytes`` values (the callers encode their
  records with msgpack) and reads any other row as damaged: a miss, never an unpickle. It also
  refuses rows whose file name points outside the cache directory (diskcache reads and deletes
  ``directory / filename`` as the row says), opens value files without following symbolic
  links, and refuses a cache whose Settings table holds keys diskcache never writes (diskcache
  turns ``sqlite_*`` settings into ``PRAGMA`` statements).
* **No writing through a symbolic link.** Every file the crawl creates is opened with
  ``O_NOFOLLOW``, and files created afresh also with ``O_EXCL`` (:func:`create_fresh`,
  :func:`replace_file`, :func:`open_append`): a link planted at a temporary file's name is
  removed, not followed; one planted where the crawl appends or repairs a file is refused
  (``ELOOP``; start-up repair sets it aside as damaged, :func:`regular_file`). A rename onto a
  name (``os.replace``) replaces a link there, never its target.
* **Only the crawl's user may write its directories.** :func:`check_output_dirs` refuses, at
  start-up before anything is read, an ``output_dir`` (or its ``state/``, ``warc/``, worker
  directories, or the HTTP cache directory) owned by another user or writable by its group or
  by others, unless ``crawl.allow_shared_output_dir`` says the operator means it. Directories
  the crawl creates (:func:`make_dir`) are never group- or other-writable, ``state/`` is 0700.

This is a leaf module (the standard library, diskcache and the config's types): every
subsystem may use it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import diskcache
from diskcache.core import DEFAULT_SETTINGS, METADATA, MODE_BINARY, MODE_RAW, UNKNOWN

from frontier_crawl.config import ConfigError, CrawlSettings

__all__ = [
    "DataDisk",
    "UnsafeEntry",
    "check_output_dirs",
    "create_fresh",
    "fsync_directory",
    "make_dir",
    "open_append",
    "open_cache",
    "open_existing",
    "open_regular",
    "regular_file",
    "remove_leftover",
    "replace_file",
]

log = logging.getLogger(__name__)

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
#: the file names diskcache gives value files (Disk.filename): two hex levels, 28 hex digits
_VALUE_FILE = re.compile(r"[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{28}\.val")
#: every key diskcache itself writes in a cache's Settings table
_KNOWN_SETTINGS = frozenset(DEFAULT_SETTINGS) | frozenset(METADATA)


# ----------------------------------------------------------------------------- files


def _symlink_error(path: Path) -> OSError:
    return OSError(
        errno.ELOOP,
        "a symbolic link where the crawl keeps a file of its own (never followed)",
        str(path),
    )


def create_fresh(path: Path, mode: int = 0o600) -> int:
    """A new, empty file at ``path``, open for writing (a file descriptor): whatever was
    there (a leftover temporary file, a planted symbolic link) is removed first, never
    followed; ``O_EXCL`` makes sure the file opened is the one created."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode)


def remove_leftover(path: Path) -> bool:
    """Remove a file of the crawl's own that it no longer uses (an older version's): the name
    only, a symbolic link itself and never its target. True if something was removed; a
    missing file is nothing to do, and what cannot be removed (a directory planted there, no
    permission) is left with a warning: a leftover only takes room."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("%s: left in place, not removed (%s)", path, exc.strerror or exc)
        return False
    return True


def replace_file(path: Path, data: bytes, mode: int = 0o644, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically: a fresh ``<name>.tmp`` beside it
    (:func:`create_fresh`), written, fsynced (``durable``), renamed over ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    fd = create_fresh(tmp, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_directory(path.parent)


def open_append(path: Path, mode: int = 0o644) -> int:
    """``path`` open for appending, created if missing (a file descriptor); an OSError
    (ELOOP) if it is a symbolic link."""
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink_error(path) from None
        raise


def regular_file(path: Path) -> os.stat_result:
    """``path``'s own status if it is a regular file; an OSError if it is a symbolic link
    (ELOOP) or anything else that is not a file. Start-up repairs call it before they cut a
    file, and set aside what it refuses."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise _symlink_error(path)
    if not stat.S_ISREG(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "not a regular file", str(path))
    return st


def open_regular(path: Path) -> BinaryIO:
    """``path`` open for reading if it is a regular file: an OSError if it is a symbolic link
    (ELOOP), a FIFO (which would block the open), a device or a directory. For state files
    the crawl reads back (the identity, the worker pin)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink_error(path) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(errno.EISDIR, "not a regular file", str(path))
    return os.fdopen(fd, "rb")


def open_existing(path: Path, writable: bool = False) -> int:
    """An existing regular file, opened without following a symbolic link (a descriptor)."""
    try:
        return os.open(path, (os.O_RDWR if writable else os.O_RDONLY) | _NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink_error(path) from None
        raise


def make_dir(path: Path, private: bool = False) -> None:
    """Create directory ``path`` if it does not exist, mode 0700 if ``private``, else 0755
    (the umask may take more away, never add), and its missing parents 0755: a directory this
    call creates is never group- or other-writable, whatever the umask. An existing one is
    left as it is (:func:`check_output_dirs` judges it)."""
    if path.is_dir():
        return
    if not path.parent.is_dir():
        make_dir(path.parent)
    with contextlib.suppress(FileExistsError):  # made meanwhile, or a file: the open says so
        path.mkdir(0o700 if private else 0o755)


def fsync_directory(directory: Path) -> None:
    """Make a new or renamed name in ``directory`` durable (no-op where directories cannot be
    opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- ownership


def _crawl_dirs(settings: CrawlSettings, root: Path) -> Iterator[Path]:
    """The directories the crawl reads state from and writes into, those that exist."""
    yield root
    subdirs = [root]
    if root.is_dir():
        subdirs += sorted(p for p in root.glob("worker-*") if p.is_dir())
    for base in subdirs:
        if base is not root:
            yield base
        for name in ("state", "warc"):
            if (base / name).is_dir():
                yield base / name
    if settings.fetch.cache:
        yield Path(settings.fetch.cache_dir)


def check_output_dirs(settings: CrawlSettings, root: Path | None = None) -> None:
    """Refuse (ConfigError, exit 2) to run in an ``output_dir`` someone else may write into:
    it, or a state, WARC, worker or HTTP cache directory in it, owned by another user or
    writable by its group or by others (the sticky bit does not help: a file planted there
    before the crawl made its own is as bad). ``crawl.allow_shared_output_dir = true``: the
    operator means it, nothing is checked. Called at start-up before anything is read.
    ``root``: the output directory itself if not ``crawl.output_dir`` as it is written (a
    cluster node's, with ``{node}`` replaced)."""
    if settings.crawl.allow_shared_output_dir:
        return
    me = os.geteuid()
    for path in _crawl_dirs(settings, root or Path(settings.crawl.output_dir)):
        try:
            st = os.stat(path)  # the directory a symlink names: that is where files go
        except FileNotFoundError:
            continue  # created by the crawl, with a safe mode
        except OSError as exc:
            raise ConfigError(f"crawl.output_dir: {path} cannot be examined ({exc})") from None
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid != me:
            problem = f"is owned by uid {st.st_uid}, not by the user the crawl runs as ({me})"
            fix = f"chown {me} {path}"
        elif mode & 0o022:
            who = " and ".join(w for w, bit in (("group", 0o020), ("others", 0o002)) if mode & bit)
            problem = f"is writable by {who} (mode {mode:04o})"
            fix = f"chmod go-w {path}"
        else:
            continue
        raise ConfigError(
            f"crawl.output_dir: {path} {problem}: whoever else can write there can plant files "
            f"the crawl reads as its state or writes through. Fix it ({fix}), or set "
            "crawl.allow_shared_output_dir = true if that is meant."
        )


def probe_output_dir(root: Path, keep: bool = True) -> None:
    """Create ``root`` (and its parents) if missing, and create and remove a file in it: a
    directory the crawl cannot make or write into is a ConfigError naming
    ``crawl.output_dir`` (exit 2, before any request), not a failed write mid-run. ``keep``
    false (``--check``): the directories this made are removed again."""
    made: list[Path] = []
    for parent in (root, *root.parents):
        if parent.exists():
            break
        made.append(parent)
    try:
        for path in reversed(made):
            path.mkdir(mode=0o755)
        fd, name = _probe_file(root)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise ConfigError(
            f"crawl.output_dir: {root} cannot be {'written' if not made else 'created'} "
            f"({exc.strerror or exc}): choose a directory this user can create and write"
        ) from None
    finally:
        if not keep:
            for path in made:
                with contextlib.suppress(OSError):
                    path.rmdir()


def _probe_file(root: Path) -> tuple[int, str]:
    import tempfile

    return tempfile.mkstemp(prefix=".probe-", dir=root)


# ----------------------------------------------------------------------------- diskcache


class UnsafeEntry(OSError):
    """A cache row the crawl did not write as data (a pickle, a file outside the cache):
    an OSError, so diskcache treats it as a missing entry."""


class DataDisk(diskcache.Disk):  # type: ignore[misc]
    """A diskcache serialiser that never unpickles: ``str`` keys, ``bytes`` values only.

    Values diskcache keeps raw in SQLite (small) or in a file beside it (``min_file_size``
    and more) are returned as bytes; any other row (pickled, text mode, a pickled key) raises
    :class:`UnsafeEntry`, which diskcache's ``get`` answers as a miss. Value files are read
    and written below the cache directory only, without following a symbolic link.
    """

    def __init__(self, directory: str, min_file_size: int = 0, **_settings: Any) -> None:
        # pickle_protocol and any other disk_* setting of the Settings table: unused
        super().__init__(directory, min_file_size=min_file_size)

    def put(self, key: Any) -> tuple[Any, bool]:
        if type(key) is not str:
            raise TypeError(f"cache keys are str, not {type(key).__name__}")
        return super().put(key)  # type: ignore[no-any-return]

    def get(self, key: Any, raw: bool) -> Any:
        if not raw:
            raise UnsafeEntry("a pickled cache key: not read")
        return super().get(key, raw)

    def store(self, value: Any, read: bool, key: Any = UNKNOWN) -> tuple[Any, ...]:
        if type(value) is not bytes:
            raise TypeError(f"cache values are bytes, not {type(value).__name__}")
        return super().store(value, read, key)  # type: ignore[no-any-return]

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> bytes:
        if mode == MODE_RAW and isinstance(value, bytes | memoryview):
            return bytes(value)
        if mode == MODE_BINARY and not read and filename is not None:
            fd = self._open_value(filename, os.O_RDONLY)
            with os.fdopen(fd, "rb") as f:
                return f.read()
        raise UnsafeEntry(f"a cache row of mode {mode} ({type(value).__name__}): not read")

    def remove(self, file_path: str) -> None:
        if _VALUE_FILE.fullmatch(file_path):  # never a file the row names outside the cache
            super().remove(file_path)

    def _write(
        self, full_path: str, iterator: Any, mode: str, encoding: str | None = None
    ) -> int:
        relative = os.path.relpath(full_path, self._directory)
        if "b" not in mode or not _VALUE_FILE.fullmatch(relative):
            raise UnsafeEntry(f"not a value file of this cache: {full_path}")
        fd = self._open_value(relative, os.O_WRONLY | os.O_CREAT | os.O_EXCL, create=True)
        size = 0
        with os.fdopen(fd, "wb") as writer:
            for chunk in iterator:
                size += len(chunk)
                writer.write(chunk)
        return size

    def _open_value(self, filename: str, flags: int, create: bool = False) -> int:
        """Open ``filename`` (``xx/yy/name.val``) below the cache directory, following no
        symbolic link on the way (each level opened with O_NOFOLLOW relative to the last)."""
        if not _VALUE_FILE.fullmatch(filename):
            raise UnsafeEntry(f"a cache row names a file outside the cache: {filename!r}")
        *levels, name = filename.split("/")
        fd = os.open(self._directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for level in levels:
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(level, 0o700, dir_fd=fd)
                try:
                    nxt = os.open(level, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise UnsafeEntry(f"{level}: not a directory of the cache") from None
                    raise
                os.close(fd)
                fd = nxt
            try:
                return os.open(name, flags | _NOFOLLOW, 0o600, dir_fd=fd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UnsafeEntry(f"{filename}: a symbolic link in the cache") from None
                raise
        finally:
            os.close(fd)


def _vet(directory: Path) -> None:
    """An OSError (ELOOP) if the cache's SQLite files are symbolic links (SQLite follows
    them); sqlite3.DatabaseError if its Settings table holds a key diskcache never writes
    (diskcache applies ``sqlite_*`` ones as PRAGMA statements as it opens)."""
    db = directory / diskcache.core.DBNAME
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            regular_file(path)
    if not db.exists():
        return
    try:
        keys = _settings_keys(db, "ro")
    except sqlite3.OperationalError as exc:
        # a kill -9 can leave the write-ahead log needing a recovery that a read-only
        # connection may not run ("attempt to write a readonly database", seen once in CI on
        # a restart after kill -9 of every process): read it with a connection allowed to
        # recover it (nothing of the Settings table is applied by this read)
        if "readonly" not in str(exc):
            raise
        keys = _settings_keys(db, "rw")
    if keys is None:
        return
    strange = sorted(str(k) for k in keys if k not in _KNOWN_SETTINGS)
    if strange:
        raise sqlite3.DatabaseError(
            f"settings diskcache never writes in its Settings table: {', '.join(strange)[:200]}"
        )


def _settings_keys(db: Path, mode: str) -> list[object] | None:
    """The keys of the cache's Settings table (None: it has none yet), read in ``mode``."""
    con = sqlite3.connect(f"file:{db}?mode={mode}", uri=True)
    try:
        return [row[0] for row in con.execute("SELECT key FROM Settings")]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    finally:
        con.close()


def open_cache(directory: Path, **settings: Any) -> diskcache.Cache:
    """A diskcache ``Cache`` on ``directory`` that stores data only (:class:`DataDisk`). Every
    setting is given (``settings`` over diskcache's defaults), so none is taken from the
    file. Raises what diskcache raises for a cache it cannot open (OSError, sqlite3.Error)."""
    make_dir(directory, private=True)
    _vet(directory)
    chosen = dict(DEFAULT_SETTINGS)
    chosen.update(settings)
    return diskcache.Cache(str(directory), disk=DataDisk, **chosen)
