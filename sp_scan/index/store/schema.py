"""The tables of an index file (format 4; `rows` says what they hold) and the making of an empty one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from . import mempool_rows
from .rows import APPLICATION_ID, BLOCK_FIELDS, FORMAT_VERSION, SPENT_FIELDS, meta_sum

PAGE_SIZE = 4096
"""Small pages: a block's rows end in half a page of slack each, and a commit's few shared pages are small."""
SCHEMA = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value NOT NULL, sum INTEGER NOT NULL) WITHOUT ROWID",
    f"CREATE TABLE blocks(height INTEGER PRIMARY KEY, sums BLOB NOT NULL, {', '.join(f'{c} NOT NULL' for c in BLOCK_FIELDS)})",
    f"CREATE TABLE spent(height INTEGER PRIMARY KEY, sums BLOB NOT NULL, {', '.join(f'{c} BLOB' for c in SPENT_FIELDS)})",
    "CREATE TABLE spends(height INTEGER PRIMARY KEY, bits BLOB NOT NULL, sum INTEGER NOT NULL)",
    mempool_rows.SCHEMA,
)


def new_file(path: Path, network: str) -> sqlite3.Connection:
    """Make an empty index of format FORMAT_VERSION for `network` at `path` (WAL mode); its open connection.

    Raises:
        sqlite3.Error: as SQLite fails.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
        conn.execute("BEGIN")
        for statement in SCHEMA:
            conn.execute(statement)
        meta = [("network", network), ("format", FORMAT_VERSION)]
        conn.executemany("INSERT INTO meta VALUES (?, ?, ?)", [(k, v, meta_sum(k, v)) for k, v in meta])
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode = WAL")
    except BaseException:
        conn.close()
        raise
    return conn
