"""The wallet's store: one SQLite file of its own, the only SQL of the wallet.

Format version 1 (`PRAGMA user_version`, `PRAGMA application_id` = "SPSW"):

- `meta(key, value)`: `network`, `scan_pubkey` (33 bytes: the scan key's public key; the private
  key is never stored), `spend_pubkey` (33), `labels` (u32 LE each, the change label 0 first),
  `birthday` (the first height scanned), `format`; optionally `change_spend_pubkey` (33 bytes:
  B_0 = B_spend + ℓ_0·G, the change label's spend key, public) and `spend_origin` (where B_spend
  comes from: fingerprint4 ‖ LE32 path steps, as BIP376's PSBT_IN_SP_SPEND_BIP32_DERIVATION).
- `blocks(height, hash)`: the synced chain's last `KEEP_HASHES` block hashes; the highest row is
  the synced tip. Written in the same transaction as the block's outputs and spends.
- `outputs`: every output found, keyed by (txid, vout): its block (height, hash, the tx's position
  in the block), amount, x-only key, label m (NULL unlabelled), the 32-byte spend tweak (t_k plus
  the label tweak: BIP376's PSBT_IN_SP_TWEAK), and its spend (height, txid when known) once seen.
- `unconfirmed`: the outputs paying the wallet among the mempool's txs at the last sync, replaced
  whole each time, dropped as their txs confirm.

Bytes in, bytes out. Every SQLite failure is raised as `WalletStoreError` naming the file.
"""

from __future__ import annotations

import fcntl
import functools
import os
import sqlite3
import struct
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import WalletStoreError
from ..network import NETWORKS

FORMAT_VERSION = 1
APPLICATION_ID = 0x53505357  # "SPSW"
KEEP_HASHES = 1000
"""Block hashes kept below the tip to find a fork; a deeper fork rescans from the birthday."""

_OUTPUT_COLUMNS = "height, txid, vout, amount, output, tweak, label, block_hash, position, spent_height, spent_txid"
_SCHEMA = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value NOT NULL) WITHOUT ROWID",
    "CREATE TABLE blocks(height INTEGER PRIMARY KEY, hash BLOB NOT NULL)",
    "CREATE TABLE outputs(txid BLOB NOT NULL, vout INTEGER NOT NULL, height INTEGER NOT NULL, position INTEGER NOT NULL,"
    " block_hash BLOB NOT NULL, amount INTEGER NOT NULL, output BLOB NOT NULL, label INTEGER, tweak BLOB NOT NULL,"
    " spent_height INTEGER, spent_txid BLOB, PRIMARY KEY(txid, vout)) WITHOUT ROWID",
    "CREATE INDEX outputs_by_height ON outputs(height, position, vout)",
    "CREATE INDEX outputs_by_spend ON outputs(spent_height) WHERE spent_height IS NOT NULL",
    "CREATE TABLE unconfirmed(txid BLOB NOT NULL, vout INTEGER NOT NULL, position INTEGER NOT NULL, amount INTEGER NOT NULL,"
    " output BLOB NOT NULL, label INTEGER, tweak BLOB NOT NULL, PRIMARY KEY(txid, vout)) WITHOUT ROWID",
)


@dataclass(frozen=True, slots=True)
class WalletOutput:
    """An output the wallet holds.

    Attributes:
        height: its block's height; None while its tx is unconfirmed.
        txid32: its tx, internal byte order.
        vout: its index in the tx.
        amount: satoshis.
        output32: its x-only key.
        tweak32: t_k plus the label tweak (mod n): the spend key is b_spend + tweak32 (BIP376's
            PSBT_IN_SP_TWEAK).
        label: the label m it pays, or None for the address itself.
        block_hash32: its block's hash (None while unconfirmed).
        spent_height: the height of the block that spent it, or None.
        spent_txid32: the spending tx when the source told it, else None.
    """

    height: int | None
    txid32: bytes
    vout: int
    amount: int
    output32: bytes
    tweak32: bytes
    label: int | None
    block_hash32: bytes | None = None
    spent_height: int | None = None
    spent_txid32: bytes | None = None

    @property
    def spent(self) -> bool:
        """True once a block spent it."""
        return self.spent_height is not None

    @property
    def outpoint36(self) -> bytes:
        """txid32 ‖ vout LE32."""
        return self.txid32 + struct.pack("<I", self.vout)


@dataclass(frozen=True, slots=True)
class Found:
    """An output to store: where it is and what the scan found (the store's input row)."""

    txid32: bytes
    vout: int
    position: int
    amount: int
    output32: bytes
    tweak32: bytes
    label: int | None


def _checked(method):
    """Raise sqlite3 failures of a store method as WalletStoreError naming the file."""

    @functools.wraps(method)
    def wrapper(self: WalletStore, *args, **kwargs):
        try:
            with self._lock:
                return method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            text = str(exc)
            if "not a database" in text or "malformed" in text:
                text = f"not a readable sp-scan wallet ({text})"
            raise WalletStoreError(f"{self.path}: {text}") from None

    return wrapper


def _labels_blob(labels: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(labels)}I", *labels)


class WalletStore:
    """An open wallet file. Build with `WalletStore.create` or `WalletStore.open`.

    Attributes:
        path: the file.
        network, scan_pubkey33, spend_pubkey33, labels, birthday: as stored at creation.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn
        self._lock = threading.RLock()
        self._writer_fd: int | None = None
        self._open_tx = False
        meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        try:
            self.network = meta["network"]
            self.scan_pubkey33, self.spend_pubkey33 = bytes(meta["scan_pubkey"]), bytes(meta["spend_pubkey"])
            self.labels = tuple(memoryview(meta["labels"]).cast("I"))
            self.birthday = meta["birthday"]
        except (KeyError, TypeError, ValueError):
            raise WalletStoreError(f"{path} is damaged: its meta table lacks a field") from None
        if self.network not in NETWORKS or len(self.scan_pubkey33) != 33 or len(self.spend_pubkey33) != 33 or type(self.birthday) is not int:
            raise WalletStoreError(f"{path} is damaged: a meta field has the wrong type or width")

    @classmethod
    def create(
        cls, path: str | os.PathLike, network: str, scan_pubkey33: bytes, spend_pubkey33: bytes, labels: Sequence[int], birthday: int,
        extra_meta: Mapping[str, bytes] | None = None,
    ) -> WalletStore:  # fmt: skip
        """Create a wallet file, readable and writable by its owner only (built aside, then linked into place:
        never over an existing file; SQLite gives its -wal and -shm files the same mode).

        Args:
            extra_meta: optional meta rows (`change_spend_pubkey`, `spend_origin`), public data only.

        Raises:
            WalletStoreError: the file exists, an unknown network, or SQLite fails.
        """
        path = Path(path)
        if network not in NETWORKS:
            raise WalletStoreError(f"unknown network {network!r} (one of {', '.join(NETWORKS)})")
        if path.exists():
            raise WalletStoreError(f"{path} already exists")
        scratch = path.with_name(f".{path.name}.{os.getpid()}.new")
        try:
            os.close(os.open(scratch, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))  # your payments: readable by you only
            conn = sqlite3.connect(scratch, isolation_level=None)
            try:
                conn.execute("BEGIN")
                for statement in _SCHEMA:
                    conn.execute(statement)
                meta = {"network": network, "scan_pubkey": scan_pubkey33, "spend_pubkey": spend_pubkey33, "labels": _labels_blob(labels), "birthday": birthday, "format": FORMAT_VERSION}
                meta.update(extra_meta or {})
                conn.executemany("INSERT INTO meta VALUES (?, ?)", list(meta.items()))
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
                conn.execute("COMMIT")
                conn.execute("PRAGMA journal_mode = WAL")
            finally:
                conn.close()
            try:
                os.link(scratch, path)
            except FileExistsError:
                raise WalletStoreError(f"{path} already exists") from None
        except sqlite3.Error as exc:
            raise WalletStoreError(f"{path}: cannot create the wallet ({exc})") from None
        except OSError as exc:
            raise WalletStoreError(f"{path}: cannot create the wallet ({exc.strerror or exc})") from None
        finally:
            scratch.unlink(missing_ok=True)
        return cls.open(path)

    @classmethod
    def open(cls, path: str | os.PathLike) -> WalletStore:
        """Open a wallet file.

        Raises:
            WalletStoreError: missing, not an sp-scan wallet, another format version, or damaged.
        """
        path = Path(path)
        if not path.is_file():
            raise WalletStoreError(f"no wallet at {path}")
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 10000")
            app_id, version = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("application_id", "user_version"))
        except sqlite3.Error as exc:
            raise WalletStoreError(f"{path}: not a readable sp-scan wallet ({exc})") from None
        try:
            if app_id != APPLICATION_ID:
                raise WalletStoreError(f"{path} is not an sp-scan wallet")
            if version != FORMAT_VERSION:
                raise WalletStoreError(f"{path} is a wallet of format version {version}; this sp-scan reads version {FORMAT_VERSION}")
            problem = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            if problem != "ok":
                raise WalletStoreError(f"{path} is damaged: SQLite's quick_check says {problem!r}")
            conn.execute("PRAGMA synchronous = NORMAL")  # WAL: a commit survives a killed process
            return cls(path, conn)
        except sqlite3.Error as exc:
            conn.close()
            raise WalletStoreError(f"{path}: not a readable sp-scan wallet ({exc})") from None
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        """Close the file: an open batch is committed first; the writer lock is released."""
        if self._open_tx:
            self.commit()
        if self._writer_fd is not None:
            os.close(self._writer_fd)
            self._writer_fd = None
        self._conn.close()

    def lock_writer(self) -> None:
        """Become the only process syncing this wallet until `close`.

        Raises:
            WalletStoreError: another process is syncing it.
        """
        if self._writer_fd is not None:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WalletStoreError(f"{self.path} is being synced by another process") from None
        self._writer_fd = fd

    # ---- reading ----

    @_checked
    def meta(self, key: str) -> bytes | None:
        """An optional meta row (`change_spend_pubkey`, `spend_origin`), None when absent."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else bytes(row[0])

    @_checked
    def set_meta(self, key: str, value: bytes) -> None:
        """Write an optional meta row in a transaction of its own (public data only)."""
        self.commit()
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    @_checked
    def tip(self) -> tuple[int, bytes] | None:
        """(height, hash32) of the last synced block; None before the first."""
        return self._conn.execute("SELECT height, hash FROM blocks ORDER BY height DESC LIMIT 1").fetchone()

    @_checked
    def hashes(self, below: int, count: int) -> list[tuple[int, bytes]]:
        """Up to `count` stored (height, hash32) below height `below`, highest first."""
        return self._conn.execute("SELECT height, hash FROM blocks WHERE height < ? ORDER BY height DESC LIMIT ?", (below, count)).fetchall()

    @_checked
    def outputs(self, unspent: bool = False) -> list[WalletOutput]:
        """The confirmed outputs in block order (height, tx position, vout), then the unconfirmed ones."""
        where = "WHERE spent_height IS NULL" if unspent else ""
        rows = self._conn.execute(f"SELECT {_OUTPUT_COLUMNS} FROM outputs {where} ORDER BY height, position, vout").fetchall()
        out = [WalletOutput(h, t, v, a, o, tw, lb, bh, sh, st) for h, t, v, a, o, tw, lb, bh, _, sh, st in rows]
        rows = self._conn.execute("SELECT txid, vout, amount, output, tweak, label FROM unconfirmed ORDER BY position, vout").fetchall()
        return out + [WalletOutput(None, *row) for row in rows]

    @_checked
    def unspent_outpoints(self) -> list[bytes]:
        """The 36-byte outpoints of the confirmed unspent outputs, sorted."""
        rows = self._conn.execute("SELECT txid, vout FROM outputs WHERE spent_height IS NULL ORDER BY txid, vout").fetchall()
        return [t + struct.pack("<I", v) for t, v in rows]

    @_checked
    def balance(self) -> tuple[int, int]:
        """(confirmed, unconfirmed) satoshis of the unspent outputs."""
        confirmed = self._conn.execute("SELECT COALESCE(SUM(amount), 0) FROM outputs WHERE spent_height IS NULL").fetchone()[0]
        unconfirmed = self._conn.execute("SELECT COALESCE(SUM(amount), 0) FROM unconfirmed").fetchone()[0]
        return confirmed, unconfirmed

    @_checked
    def counts(self) -> tuple[int, int]:
        """(outputs found, of them spent)."""
        return self._conn.execute("SELECT COUNT(*), COUNT(spent_height) FROM outputs").fetchone()

    # ---- writing ----

    def _begin(self) -> None:
        if not self._open_tx:
            self._conn.execute("BEGIN IMMEDIATE")
            self._open_tx = True

    @_checked
    def append(self, height: int, hash32: bytes, found: Iterable[Found], spends: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Add a synced block to the open batch (opening one): its hash as the new tip, its outputs, its spends.

        Args:
            spends: (outpoint36, spending txid32 or None) of wallet outputs this block spends.
        """
        self._begin()
        try:
            self._conn.execute("INSERT INTO blocks VALUES (?, ?)", (height, hash32))
            self._conn.execute("DELETE FROM blocks WHERE height < ?", (height - KEEP_HASHES,))
            rows = [(f.txid32, f.vout, height, f.position, hash32, f.amount, f.output32, f.label, f.tweak32) for f in found]
            self._conn.executemany(
                "INSERT INTO outputs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL) ON CONFLICT(txid, vout) DO UPDATE SET "
                "height = excluded.height, position = excluded.position, block_hash = excluded.block_hash, spent_height = NULL, spent_txid = NULL",
                rows,
            )
            self._conn.executemany("DELETE FROM unconfirmed WHERE txid = ? AND vout = ?", [r[:2] for r in rows])
            self._conn.executemany(
                "UPDATE outputs SET spent_height = ?, spent_txid = ? WHERE txid = ? AND vout = ? AND spent_height IS NULL",
                [(height, txid32, op[:32], struct.unpack("<I", op[32:])[0]) for op, txid32 in spends],
            )
        except BaseException:
            self._conn.execute("ROLLBACK")
            self._open_tx = False
            raise

    @_checked
    def commit(self) -> None:
        """Commit the open batch (nothing when none is open)."""
        if self._open_tx:
            self._conn.execute("COMMIT")
            self._open_tx = False

    @_checked
    def rollback_to(self, height: int) -> int:
        """Forget every block above `height` (a fork): its hashes, the outputs it found, the spends it saw.

        Returns:
            The number of blocks forgotten.
        """
        self.commit()
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            removed = self._conn.execute("DELETE FROM blocks WHERE height > ?", (height,)).rowcount
            self._conn.execute("DELETE FROM outputs WHERE height > ?", (height,))
            self._conn.execute("UPDATE outputs SET spent_height = NULL, spent_txid = NULL WHERE spent_height > ?", (height,))
            self._conn.execute("DELETE FROM unconfirmed")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        return removed

    @_checked
    def set_unconfirmed(self, found: Iterable[Found]) -> None:
        """Replace the unconfirmed outputs (the mempool's) with `found`, leaving out any already confirmed."""
        self.commit()
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.execute("DELETE FROM unconfirmed")
            self._conn.executemany(
                "INSERT OR IGNORE INTO unconfirmed SELECT ?, ?, ?, ?, ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM outputs WHERE txid = ? AND vout = ?)",
                [(f.txid32, f.vout, f.position, f.amount, f.output32, f.label, f.tweak32, f.txid32, f.vout) for f in found],
            )
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
