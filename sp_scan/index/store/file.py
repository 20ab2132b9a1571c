"""The index file's life, the index's words for it: the generic part (made aside and linked into place,
opened with checks, the writer lock) is `sp_scan.sqlitefile`, which the wallet's store uses too; here are
what only an index has (a reader's URI in a read-only directory) and the index's errors.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ... import sqlitefile
from ...errors import IndexStoreError
from ...sqlitefile import FileLock, built_aside, file_size, wal_of

__all__ = ["FileLock", "built_aside", "damage", "file_size", "lock_writer", "place", "reader_uri", "reason", "refuse_truncated", "truncated", "wal_of"]


def refuse_truncated(path: Path) -> None:
    """Raise IndexStoreError when the file is shorter than its SQLite header says (`sqlitefile.refuse_truncated`)."""
    sqlitefile.refuse_truncated(path, IndexStoreError)


def truncated(path: Path, pages: int, page_size: int) -> None:
    """Raise IndexStoreError when `pages` pages of `page_size` bytes need more than the file and its WAL hold."""
    sqlitefile.truncated(path, pages, page_size, IndexStoreError)


def reader_uri(path: Path) -> str:
    """The SQLite URI a reader opens: mode=ro, and immutable=1 when the directory is not writable.

    SQLite's WAL needs a -shm file beside the index, which a read-only directory cannot get; a
    file there cannot be written either (a writer would need the -wal too), so it is read as
    immutable. A -wal with content beside it without its -shm holds blocks immutable reading
    would miss: refused.

    Raises:
        IndexStoreError: the directory is not writable and a -wal file is there without its -shm.
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    if os.access(path.parent, os.W_OK):
        return uri
    wal, shm = wal_of(path), Path(f"{path}-shm")
    if file_size(wal) == 0:
        return uri + "&immutable=1"
    if shm.exists():
        return uri  # SQLite reads a WAL index in a read-only directory when both files are there
    raise IndexStoreError(
        f"{path}: the directory is not writable and {wal.name} (blocks not yet in the file) is there without "
        f"{shm.name}: open the index once where its directory is writable, or copy both files"
    )


def lock_writer(lock: FileLock, path: Path) -> None:
    """Take the exclusive writer lock of `path` (its `FileLock`, open for the store's life).

    Raises:
        IndexStoreError: another process (a sync) holds it.
    """
    if not lock.acquire():
        raise IndexStoreError(f"{path} is being written by another process (a sync is running)")


def reason(exc: sqlite3.Error) -> str:
    """What a SQLite failure means for an index file, in a user's words."""
    return sqlitefile.reason(exc, "index")


def damage(path: Path, what: str) -> IndexStoreError:
    """The error for a damaged index file."""
    return IndexStoreError(f"{path} is damaged: {what} (`sp-scan index info --check` checks the whole file)")


def place(scratch: Path, path: Path, replace: bool = False) -> None:
    """Give the finished file `scratch` the name `path` (`sqlitefile.place`).

    Raises:
        IndexStoreError: `path` exists and not `replace`.
    """
    sqlitefile.place(scratch, path, IndexStoreError, replace)
