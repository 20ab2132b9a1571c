"""The write-ahead log copied into the index file by a thread of its own, and kept short.

SQLite's default checkpoint runs inside the commit that takes the log past 1,000 pages: that commit
copies every page the log holds into the file and waits for its fsyncs. `Checkpointer` does that work
on a connection of its own in a thread, woken by each commit, so the writer goes on to its next block
meanwhile (SQLite lets a checkpoint run beside a writer; the GIL is released while it copies and
syncs). Once a checkpoint has copied every frame, the next commit writes the log from its start again.

The log can still outgrow that: a checkpoint that never catches up with a fast writer, or a reader whose
snapshot keeps the log from restarting. So after each commit the writer looks at the log file's size
(never opening it: closing a descriptor of a file drops every POSIX lock the process holds on it,
SQLite's included) and, past WAL_LIMIT, checkpoints by itself with TRUNCATE: it waits for readers to
leave the log, copies what is left and empties the file. The log never holds much more than WAL_LIMIT
and one commit. A killed
process leaves the log to be checkpointed by the next open, as SQLite always does.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from ...workers import signals_to_the_main_thread
from .file import file_size, wal_of

WAL_LIMIT = 64 << 20
"""Log bytes past which the writer checkpoints by itself, emptying the log (also its journal_size_limit)."""


class Checkpointer:
    """Checkpoints of the index at `path` in a thread; the writer's connection stops checkpointing while it runs.

    Use: `committed()` after each commit, `close()` at the end (the thread is joined; the writer
    checkpoints by itself again).
    """

    def __init__(self, path: Path, writer: sqlite3.Connection) -> None:
        self.path, self._writer = path, writer
        self._page_size = writer.execute("PRAGMA page_size").fetchone()[0]
        self._lock = threading.Lock()  # held by whoever checkpoints
        self._wake, self._stop = threading.Event(), threading.Event()
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT}")
        self._thread = threading.Thread(target=self._run, name="sp-scan-checkpoint", daemon=True)
        self._thread.start()

    def wal_bytes(self) -> int:
        """The size of the log file: past WAL_LIMIT only while the log holds more than that since its last
        restart (SQLite trims the file to its journal_size_limit, WAL_LIMIT, at the commit after a restart)."""
        return file_size(wal_of(self.path))

    def committed(self) -> None:
        """Wake the thread; empty the log here when it holds more than WAL_LIMIT.

        Raises:
            sqlite3.Error: the writer's own checkpoint failed.
        """
        if self.wal_bytes() > WAL_LIMIT:
            with self._lock:
                self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        else:
            self._wake.set()

    def _run(self) -> None:
        signals_to_the_main_thread()
        conn = sqlite3.connect(self.path, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout = 10000")
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stop.is_set():
                    return
                with self._lock:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            return  # the writer's commits take the checkpoints over (WAL_LIMIT)
        finally:
            conn.close()

    def close(self) -> None:
        """Stop and join the thread; the writer's connection checkpoints by itself again."""
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self._writer.execute("PRAGMA wal_autocheckpoint = 1000")
