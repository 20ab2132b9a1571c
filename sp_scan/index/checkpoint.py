"""The write-ahead log copied into the index file by a thread of its own, beside the writer's commits.

SQLite's default checkpoint runs inside the commit that takes the log past 1,000 pages: that commit
copies every page the log holds into the file and waits for two fsyncs. `Checkpointer` does that work on
a connection of its own in a thread, so the writer goes on to its next block meanwhile (SQLite lets a
checkpoint run beside a writer; the GIL is released while it copies and syncs). A killed process leaves
the log to be checkpointed by the next open, as SQLite always does.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from ..workers import signals_to_the_main_thread

CHECKPOINT_BYTES = 16 << 20
"""Bytes committed between two checkpoints (SQLite's own default: 1,000 pages of 16 KiB)."""
FALLBACK = 4
"""A log FALLBACK × CHECKPOINT_BYTES past the last complete checkpoint (the thread did not catch up
between commits) is checkpointed by the writer's next commit itself, as SQLite would: the log is bounded."""
_ROUNDS = 4
"""Checkpoints in a row while the writer keeps adding to the log, before waiting for the next signal."""


class Checkpointer:
    """Checkpoints of the index at `path` in a thread; the writer's connection stops checkpointing while it runs.

    Use: `committed(n)` after each commit of about n bytes, `close()` at the end (the thread is joined;
    the writer checkpoints by itself again).
    """

    def __init__(self, path: Path, writer: sqlite3.Connection) -> None:
        self.path, self._writer = path, writer
        self._pending = 0  # bytes committed since the last complete checkpoint
        self._lock = threading.Lock()  # held by whoever checkpoints
        self._wake, self._stop = threading.Event(), threading.Event()
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        self._thread = threading.Thread(target=self._run, name="sp-scan-checkpoint", daemon=True)
        self._thread.start()

    def committed(self, nbytes: int) -> None:
        """Count a commit of about `nbytes`; wake the thread at CHECKPOINT_BYTES, checkpoint here past the FALLBACK bound.

        Raises:
            sqlite3.Error: the writer's own checkpoint failed.
        """
        self._pending += nbytes
        if self._pending >= FALLBACK * CHECKPOINT_BYTES:
            with self._lock:
                self._checkpoint(self._writer)
        elif self._pending >= CHECKPOINT_BYTES:
            self._wake.set()

    def _checkpoint(self, conn: sqlite3.Connection) -> bool:
        """One PASSIVE checkpoint on `conn`; True when the whole log is in the file (the next write restarts it)."""
        busy, log, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        complete = not busy and log == done
        if complete:
            self._pending = 0
        return complete

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
                for _ in range(_ROUNDS):  # the frames the writer added meanwhile, until none came
                    with self._lock:
                        if self._checkpoint(conn):
                            break
        except sqlite3.Error:
            return  # the writer's commits take the checkpoints over (FALLBACK)
        finally:
            conn.close()

    def close(self) -> None:
        """Stop and join the thread; the writer's connection checkpoints by itself again."""
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self._writer.execute("PRAGMA wal_autocheckpoint = 1000")
