"""Durable names: what the outputs call after creating or renaming a file, and whole files
replaced atomically (the reports)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from frontier_crawl.safefs import fsync_directory

__all__ = ["fsync_directory", "write_atomic"]


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically: a temporary file beside it, fsync, rename (a
    reader sees the old file or the new one, never a part). The temporary file has a random
    name and is created with ``O_EXCL`` (mkstemp), so no symbolic link planted beside ``path``
    is followed; the rename replaces a link at ``path`` itself, never its target."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
