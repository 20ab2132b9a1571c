"""An SQLite file's life, for the index's store and the wallet's: made aside and linked into place, opened
with checks, one writer at a time, SQLite's failures said in a user's words.

Nothing here knows a store's rows; each store passes its error class and the word that names its files
("index", "wallet"). The writer lock (`FileLock`) is portable: `flock` of the whole file on POSIX, a byte
of SQLite's lock page through `msvcrt.locking` on Windows (neither meets SQLite's own locks). Its
descriptor stays open as long as the store: on POSIX, closing any descriptor of a file drops every
`fcntl` lock the process holds on it, SQLite's included.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

TRIES = 100
"""Tries 1 ms apart to take the writer lock: a reader's probe (`FileLock.busy`) holds it for microseconds."""
_WINDOWS_LOCK_BYTE = 0x40000300
"""On Windows: a byte of SQLite's lock page (0x40000000, never read or written in a file of 1 KiB pages or larger),
above the bytes SQLite locks there (up to 0x40000201)."""


class FileLock:
    """The writer lock of a store's file, through one descriptor of it kept open until `close`.

    Attributes:
        path: the file.
        held: True once `acquire` took it.

    Raises:
        OSError: the file cannot be opened.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.held = False
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))

    def _try(self, exclusive: bool) -> bool:
        if fcntl is not None:
            try:
                fcntl.flock(self._fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True
        os.lseek(self._fd, _WINDOWS_LOCK_BYTE, os.SEEK_SET)
        try:
            msvcrt.locking(self._fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _release(self) -> None:
        if fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        else:
            os.lseek(self._fd, _WINDOWS_LOCK_BYTE, os.SEEK_SET)
            msvcrt.locking(self._fd, msvcrt.LK_UNLCK, 1)

    def acquire(self, tries: int = TRIES) -> bool:
        """Take the lock (exclusive, until `close`); False when another process holds it after `tries` tries."""
        for i in range(tries):
            if self.held or self._try(exclusive=True):
                self.held = True
                return True
            if i + 1 < tries:
                time.sleep(0.001)
        return False

    def busy(self) -> bool:
        """True while some process holds the lock (this one holding none: it probes with a shared lock)."""
        if self.held:
            return True
        if not self._try(exclusive=False):
            return True
        self._release()
        return False

    def close(self) -> None:
        """Release the lock and close the descriptor: only once no connection to the file is left."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self.held = False


def file_size(path: Path) -> int:
    """The size of `path` in bytes; 0 when it does not exist."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def wal_of(path: Path) -> Path:
    """The write-ahead log beside an SQLite file."""
    return Path(f"{path}-wal")


def scratch_of(path: Path) -> Path:
    """Where a new file for `path` is built before it takes its name (this process's own)."""
    return path.with_name(f".{path.name}.{os.getpid()}.new")


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


def place(scratch: Path, path: Path, error: type[Exception], replace: bool = False) -> None:
    """Give the finished file `scratch` the name `path`: never replacing a file another process put there,
    unless `replace` (an upgrade taking the place of the file it was made from).

    Raises:
        error: `path` exists and not `replace`.
    """
    if replace:
        os.replace(scratch, path)
        return
    try:
        os.link(scratch, path)  # fails if path exists, where a rename would replace it
    except FileExistsError:
        raise error(f"{path} already exists") from None
    except OSError:  # a filesystem without hard links: the check before building is all there is
        if path.exists():
            raise error(f"{path} already exists") from None
        os.rename(scratch, path)


def truncated(path: Path, pages: int, page_size: int, error: type[Exception]) -> None:
    """Raise `error` when `pages` pages of `page_size` bytes need more than the file and its WAL hold."""
    size = file_size(path)
    if pages * page_size > size + file_size(wal_of(path)):
        raise error(f"{path} is truncated: its {pages:,} pages of {page_size:,} bytes need {pages * page_size:,}, the file has {size:,}")


def refuse_truncated(path: Path, error: type[Exception]) -> None:
    """Raise `error` when the SQLite header's page count needs more bytes than the file and its WAL hold: read
    before SQLite parses the schema, which fails as "malformed" when a table's root page is cut off."""
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
    truncated(path, int.from_bytes(header[28:32], "big"), page_size, error)


def reason(exc: sqlite3.Error, kind: str) -> str:
    """What a SQLite failure means for an sp-scan `kind` file ("index", "wallet"), in a user's words."""
    text = str(exc)
    if "not a database" in text or "malformed" in text or "no such table" in text or "no such column" in text:
        return f"not a readable sp-scan {kind} ({text})"
    if "locked" in text or "busy" in text:
        return f"{text} (another process is writing it)"
    if "readonly" in text or "unable to open" in text:
        return f"{text} (the file or its directory is read-only: the {kind} can be read there, not synced)"
    if "full" in text:
        return f"{text} (free some space: the {kind} is intact up to its last committed block)"
    return text


def guarded(error: type[Exception], kind: str) -> Callable:
    """A decorator for a store's methods: hold the store's `_lock` and raise sqlite3 failures as `error` naming
    the file (`self.path`) and what they mean (`reason`)."""

    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            try:
                with self._lock:
                    return method(self, *args, **kwargs)
            except sqlite3.Error as exc:
                raise error(f"{self.path}: {reason(exc, kind)}") from None

        return wrapper

    return decorate


def open_checked(path: Path, application_id: int, kind: str, error: type[Exception], uri: str | None = None) -> tuple[sqlite3.Connection, int]:
    """Open an sp-scan file: there, as long as its pages, with SQLite's busy timeout, and of `application_id`.

    Args:
        uri: a SQLite URI to open instead of the path (a reader's mode=ro).

    Returns:
        (the connection, autocommit, usable from any thread; the file's format version, PRAGMA user_version).

    Raises:
        error: missing, truncated, not an SQLite file, or another application's.
    """
    if not path.is_file():
        raise error(f"no {kind} at {path}")
    refuse_truncated(path, error)
    try:
        conn = sqlite3.connect(uri or path, uri=uri is not None, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise error(f"{path}: {reason(exc, kind)}") from None
    try:
        conn.execute("PRAGMA busy_timeout = 10000")
        app_id, version = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("application_id", "user_version"))
    except sqlite3.Error as exc:
        conn.close()
        raise error(f"{path}: {reason(exc, kind)}") from None
    if app_id != application_id:
        conn.close()
        raise error(f"{path} is not an sp-scan {kind}")
    return conn, version
