"""The index file's life: made aside and linked into place, opened with checks, one writer at a time.

Nothing here knows the rows: SQLite connections, the file's length against its header, the writer lock
(an exclusive `flock` of the file itself, which readers probe with a shared one, each through a
descriptor kept open as long as the store), and SQLite's failures said in a user's words.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from ...errors import IndexStoreError

_WRITER_LOCK_TRIES = 100  # a reader's liveness probe holds a shared lock for microseconds: retry 1 ms apart


def file_size(path: Path) -> int:
    """The size of `path` in bytes; 0 when it does not exist."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def wal_of(path: Path) -> Path:
    """The write-ahead log beside an index file."""
    return Path(f"{path}-wal")


def refuse_truncated(path: Path) -> None:
    """Raise IndexStoreError when the SQLite header's page count needs more bytes than the file and its
    WAL hold: read before SQLite parses the schema, which fails as "malformed" when a table's root
    page is cut off."""
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError:
        return  # SQLite's own open says why
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return  # not a header SQLite wrote: its open says "not a database"
    pages = int.from_bytes(header[28:32], "big")
    truncated(path, pages, page_size)


def truncated(path: Path, pages: int, page_size: int) -> None:
    """Raise IndexStoreError when `pages` pages of `page_size` bytes need more than the file and its WAL hold."""
    size = file_size(path)
    if pages * page_size > size + file_size(wal_of(path)):
        raise IndexStoreError(f"{path} is truncated: its {pages:,} pages of {page_size:,} bytes need {pages * page_size:,}, the file has {size:,}")


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


def lock_writer(fd: int, path: Path) -> None:
    """Take the exclusive writer lock of `path` through `fd`, an open descriptor of it kept for the store's life
    (closing a descriptor of the file would drop every POSIX lock the process holds on it, SQLite's included).

    Raises:
        IndexStoreError: another process (a sync) holds it.
    """
    for _ in range(_WRITER_LOCK_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            time.sleep(0.001)
    raise IndexStoreError(f"{path} is being written by another process (a sync is running)")


def writer_active(fd: int) -> bool:
    """True while some process holds the writer lock of the file `fd` (a descriptor that holds none) is open on."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def reason(exc: sqlite3.Error) -> str:
    """What a SQLite failure means for an index file, in a user's words."""
    text = str(exc)
    if "not a database" in text or "malformed" in text or "no such table" in text or "no such column" in text:
        return f"not a readable sp-scan index ({text})"
    if "locked" in text or "busy" in text:
        return f"{text} (another process is writing it)"
    if "readonly" in text or "unable to open" in text:
        return f"{text} (the file or its directory is read-only: the index can be read there, not synced)"
    if "full" in text:
        return f"{text} (free some space: the index is intact up to its last committed block)"
    return text


def damage(path: Path, what: str) -> IndexStoreError:
    """The error for a damaged index file."""
    return IndexStoreError(f"{path} is damaged: {what} (`sp-scan index info --check` checks the whole file)")


def scratch_of(path: Path) -> Path:
    """Where a new file for `path` is built before it takes its name (this process's own)."""
    return path.with_name(f".{path.name}.{os.getpid()}.new")


def place(scratch: Path, path: Path, replace: bool = False) -> None:
    """Give the finished file `scratch` the name `path`: never replacing a file another process put there,
    unless `replace` (an upgrade taking the place of the file it was made from).

    Raises:
        IndexStoreError: `path` exists and not `replace`.
    """
    if replace:
        os.replace(scratch, path)
        return
    try:
        os.link(scratch, path)  # fails if path exists, where a rename would replace it
    except FileExistsError:
        raise IndexStoreError(f"{path} already exists") from None
    except OSError:  # a filesystem without hard links: the check before building is all there is
        if path.exists():
            raise IndexStoreError(f"{path} already exists") from None
        os.rename(scratch, path)


@contextlib.contextmanager
def built_aside(path: Path) -> Iterator[Path]:
    """A scratch path beside `path` to build a file at; it is removed unless the block moved it into place."""
    scratch = scratch_of(path)
    for leftover in (scratch, wal_of(scratch), Path(f"{scratch}-shm")):
        leftover.unlink(missing_ok=True)
    try:
        yield scratch
    finally:
        for leftover in (scratch, wal_of(scratch), Path(f"{scratch}-shm")):
            leftover.unlink(missing_ok=True)
