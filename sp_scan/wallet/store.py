"""The wallet's store: one SQLite file of its own, the only SQL of the wallet.

Format version 2 (`PRAGMA user_version`, `PRAGMA application_id` = "SPSW"). Every row carries `sum`,
the CRC-32 of its values seeded with its table's name (`sp_scan.crc`, as the index's rows), checked on
every read; `meta` holds each table's row count and the sum of its rows' sums (`rows.<table>`), written
in the same transaction as the rows, so that a row deleted or added by hand is damage too. Damage is a
`WalletStoreError` on the read that meets it, naming the way back (`check` reads everything):

- `meta(key, value, sum)`: `network`, `scan_pubkey` (33 bytes: the scan key's public key; the private
  key is never stored), `spend_pubkey` (33), `labels` (u32 LE each, the change label 0 first),
  `birthday` (the first height scanned), `format`; optionally `change_spend_pubkey` (33 bytes:
  B_0 = B_spend + ℓ_0·G, the change label's spend key, public) and `spend_origin` (where B_spend
  comes from: fingerprint4 ‖ LE32 path steps, as BIP376's PSBT_IN_SP_SPEND_BIP32_DERIVATION) and
  `label_spend_pubkeys` (m LE32 ‖ B_m 33 bytes per label, ascending m: each label's spend key, public);
  `tip` (height LE64 ‖ hash32 of the synced tip) and the `rows.<table>` counts.
- `blocks(height, hash, bits)`: the synced chain's last `KEEP_HASHES` block hashes, heights in a row up
  to `tip`, with the header's nBits when the source gave headers (the chain work of a fork is
  compared with it). Written in the same transaction as the block's outputs and spends.
- `outputs`: every output found, keyed by (txid, vout): its block (height, hash, the tx's position
  in the block), amount, x-only key, label m (NULL unlabelled), the 32-byte spend tweak (t_k plus
  the label tweak: BIP376's PSBT_IN_SP_TWEAK), `verified` (1 when a source that proves outputs saw it
  in its block, 0 when only a server's word holds it) and its spend (height, txid when known).
- `unconfirmed`: the outputs paying the wallet among the mempool's txs at the last sync, replaced
  whole each time, dropped as their txs confirm.
- `pending(id, created, txid, tx, fee, change_vout, change_amount, pays_sp)`: spends of the wallet's
  coins not mined yet: reserved by a PSBT the wallet wrote (txid NULL) or broadcast (txid, raw tx);
  `reserved(txid, vout, pending, amount)`: the coins each one spends. A block that spends one of them
  ends the pending spend (mined, or a conflicting spend mined) in the block's transaction.

Version 1 files (no sums, no verified flag) are upgraded in place when opened, in one transaction:
their outputs are kept as unverified (version 1 did not say which source proved them) until a sync
from a source that proves outputs sees them again. Bytes in, bytes out. Every SQLite failure is
raised as `WalletStoreError` naming the file.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import struct
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import sqlitefile
from ..crc import crc_row
from ..errors import SpendError, WalletStoreError
from ..network import NETWORKS

FORMAT_VERSION = 2
_UPGRADABLE = 1
APPLICATION_ID = 0x53505357  # "SPSW"
KEEP_HASHES = 1000
"""Block hashes kept below the tip to find a fork; a deeper fork rescans from the birthday."""

_TABLES = {  # name: its columns before `sum`, in the order the sum covers them
    "meta": ("key", "value"),
    "blocks": ("height", "hash", "bits"),
    "outputs": ("txid", "vout", "height", "position", "block_hash", "amount", "output", "label", "tweak", "verified", "spent_height", "spent_txid"),
    "unconfirmed": ("txid", "vout", "position", "amount", "output", "label", "tweak"),
    "pending": ("id", "created", "txid", "tx", "fee", "change_vout", "change_amount", "pays_sp"),
    "reserved": ("txid", "vout", "pending", "amount"),
}
_COUNTED = ("blocks", "outputs", "unconfirmed", "pending", "reserved")
"""The tables whose row count and sum of sums meta holds (`rows.<table>`)."""
_SEEDS = {name: zlib.crc32(name.encode()) for name in _TABLES}
_IDENTITY = ("network", "scan_pubkey", "spend_pubkey", "labels", "birthday", "format")
_OPTIONAL = ("change_spend_pubkey", "spend_origin", "label_spend_pubkeys")
_LAST_PENDING = "last_pending"
_PENDING_META = ("rows.pending", "rows.reserved", _LAST_PENDING)
_SCHEMA = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value NOT NULL, sum INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE blocks(height INTEGER PRIMARY KEY, hash BLOB NOT NULL, bits INTEGER, sum INTEGER NOT NULL)",
    "CREATE TABLE outputs(txid BLOB NOT NULL, vout INTEGER NOT NULL, height INTEGER NOT NULL, position INTEGER NOT NULL,"
    " block_hash BLOB NOT NULL, amount INTEGER NOT NULL, output BLOB NOT NULL, label INTEGER, tweak BLOB NOT NULL,"
    " verified INTEGER NOT NULL, spent_height INTEGER, spent_txid BLOB, sum INTEGER NOT NULL, PRIMARY KEY(txid, vout)) WITHOUT ROWID",
    "CREATE INDEX outputs_by_height ON outputs(height, position, vout)",
    "CREATE TABLE unconfirmed(txid BLOB NOT NULL, vout INTEGER NOT NULL, position INTEGER NOT NULL, amount INTEGER NOT NULL,"
    " output BLOB NOT NULL, label INTEGER, tweak BLOB NOT NULL, sum INTEGER NOT NULL, PRIMARY KEY(txid, vout)) WITHOUT ROWID",
    "CREATE TABLE pending(id INTEGER PRIMARY KEY, created INTEGER NOT NULL, txid BLOB, tx BLOB, fee INTEGER NOT NULL,"
    " change_vout INTEGER, change_amount INTEGER NOT NULL, pays_sp INTEGER NOT NULL, sum INTEGER NOT NULL)",
    "CREATE TABLE reserved(txid BLOB NOT NULL, vout INTEGER NOT NULL, pending INTEGER NOT NULL, amount INTEGER NOT NULL,"
    " sum INTEGER NOT NULL, PRIMARY KEY(txid, vout)) WITHOUT ROWID",
)
_ROWS = struct.Struct("<QQ")
_TIP = struct.Struct("<q32s")
_MASK = 2**64 - 1


def _sum(table: str, values: Sequence) -> int:
    return crc_row(values, _SEEDS[table])


def _op(txid32: bytes, vout: int) -> bytes:
    return txid32 + struct.pack("<I", vout)


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
        verified: False while only a server's word says it exists (BlindBit gives no proof); see
            docs/wallet.md for what each source proves.
        pending: the id of the pending spend that reserves it (`Wallet.pending`), or None.
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
    verified: bool = True
    pending: int | None = None

    @property
    def spent(self) -> bool:
        """True once a block spent it."""
        return self.spent_height is not None

    @property
    def outpoint36(self) -> bytes:
        """txid32 ‖ vout LE32."""
        return _op(self.txid32, self.vout)


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


@dataclass(frozen=True, slots=True)
class PendingSpend:
    """A spend of the wallet's coins that no block has settled yet.

    Attributes:
        id: its number in the wallet.
        created: when it was recorded (unix seconds).
        coins: (outpoint36, amount) of the coins it spends, sorted.
        fee: satoshis (0 when the wallet did not build it and cannot tell).
        change_vout: its output paying the wallet back, when known.
        change_amount: that output's satoshis (0 without one).
        pays_sp: True when it pays a silent-payments address (a replacement with other inputs must
            compute those outputs again).
        txid32: the transaction once broadcast; None while only a PSBT was written.
        tx: the raw transaction once broadcast.
    """

    id: int
    created: int
    coins: tuple[tuple[bytes, int], ...]
    fee: int
    change_vout: int | None
    change_amount: int
    pays_sp: bool
    txid32: bytes | None = None
    tx: bytes | None = None

    @property
    def outgoing(self) -> int:
        """The satoshis of the coins it spends."""
        return sum(amount for _, amount in self.coins)


_checked = sqlitefile.guarded(WalletStoreError, "wallet")
"""Raise sqlite3 failures of a store method as WalletStoreError naming the file (and hold the store's lock)."""


def _snapshot(method):
    """Run a reading method in one read transaction unless the store has one open: its SELECTs then see one
    state of the file, not a sync's commit between two of them (which would read as damage)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if self._conn.in_transaction:
            return method(self, *args, **kwargs)
        self._conn.execute("BEGIN")
        try:
            return method(self, *args, **kwargs)
        finally:
            if self._conn.in_transaction:
                self._conn.execute("COMMIT")

    return wrapper


def _labels_blob(labels: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(labels)}I", *labels)


def _insert(conn: sqlite3.Connection, table: str, rows: Iterable[Sequence]) -> list[int]:
    """Insert rows with their sums; the sums."""
    rows = [(*r, _sum(table, r)) for r in rows]
    if rows:
        conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    return [r[-1] for r in rows]


class WalletStore:
    """An open wallet file. Build with `WalletStore.create` or `WalletStore.open`.

    Attributes:
        path: the file.
        network, scan_pubkey33, spend_pubkey33, labels, birthday: as stored at creation.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        """Take over `conn`, open on `path`, and the writer lock's descriptor (open until `close`: see `sp_scan.sqlitefile`)."""
        self.path = path
        self._conn = conn
        self._lock = threading.RLock()
        self._open_tx = False
        self._file_lock = sqlitefile.FileLock(path)
        try:
            self._read_identity()
        except BaseException:
            self._file_lock.close()
            raise

    def _read_identity(self) -> None:
        conn = self._conn
        meta = {}
        for key, value, stored in conn.execute("SELECT key, value, sum FROM meta"):
            if key in (*_IDENTITY, *_OPTIONAL) and _sum("meta", (key, value)) != stored:
                raise self._unusable(f"its meta row {key} does not match its checksum")
            meta[key] = value
        try:
            self.network = meta["network"]
            self.scan_pubkey33, self.spend_pubkey33 = bytes(meta["scan_pubkey"]), bytes(meta["spend_pubkey"])
            self.labels = tuple(memoryview(meta["labels"]).cast("I"))
            self.birthday = meta["birthday"]
        except (KeyError, TypeError, ValueError):
            raise self._unusable("its meta table lacks a field") from None
        if self.network not in NETWORKS or len(self.scan_pubkey33) != 33 or len(self.spend_pubkey33) != 33 or type(self.birthday) is not int:
            raise self._unusable("a meta field has the wrong type or width")

    # ---- the file ----

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
        try:
            with sqlitefile.built_aside(path) as scratch:
                os.close(os.open(scratch, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))  # your payments: readable by you only
                conn = sqlite3.connect(scratch, isolation_level=None)
                try:
                    conn.execute("BEGIN")
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    meta = {"network": network, "scan_pubkey": scan_pubkey33, "spend_pubkey": spend_pubkey33, "labels": _labels_blob(labels), "birthday": birthday, "format": FORMAT_VERSION}
                    meta.update(extra_meta or {})
                    meta.update({f"rows.{t}": _ROWS.pack(0, 0) for t in _COUNTED})
                    _insert(conn, "meta", meta.items())
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
                    conn.execute("COMMIT")
                    conn.execute("PRAGMA journal_mode = WAL")
                finally:
                    conn.close()
                sqlitefile.place(scratch, path, WalletStoreError)
        except sqlite3.Error as exc:
            raise WalletStoreError(f"{path}: cannot create the wallet ({exc})") from None
        except OSError as exc:
            raise WalletStoreError(f"{path}: cannot create the wallet ({exc.strerror or exc})") from None
        return cls.open(path)

    @classmethod
    def open(cls, path: str | os.PathLike) -> WalletStore:
        """Open a wallet file (a version 1 file is upgraded first, see the module docstring).

        Raises:
            WalletStoreError: missing, not an sp-scan wallet, another format version, or its keys, labels or
                birthday damaged.
        """
        path = Path(path)
        conn, version = sqlitefile.open_checked(path, APPLICATION_ID, "wallet", WalletStoreError)
        try:
            problem = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
            if problem != "ok":
                raise WalletStoreError(f"{path} is damaged: SQLite's quick_check says {problem!r}; {_RECREATE}")
            if version == _UPGRADABLE:
                _upgrade(conn)
            elif version != FORMAT_VERSION:
                raise WalletStoreError(f"{path} is a wallet of format version {version}; this sp-scan reads versions {_UPGRADABLE} and {FORMAT_VERSION} (a newer sp-scan wrote it)")
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
        self._conn.close()
        self._file_lock.close()

    def lock_writer(self) -> None:
        """Become the only process syncing this wallet until `close`.

        Raises:
            WalletStoreError: another process is syncing it.
        """
        if not self._file_lock.acquire():
            raise WalletStoreError(f"{self.path} is being synced by another process")

    # ---- damage ----

    def _unusable(self, what: str) -> WalletStoreError:
        return WalletStoreError(f"{self.path} is damaged: {what}; {_RECREATE}")

    def _damaged(self, what: str, height: int | None = None) -> WalletStoreError:
        """Damage a rescan from `height` (default: the birthday) repairs."""
        start = self.birthday if height is None else max(height, self.birthday)
        return WalletStoreError(f"{self.path} is damaged: {what}; `sp-scan wallet rescan {self.path} --from {start}` (with its sync's source) drops it and syncs again")

    def _rows(self, table: str, where: str = "", params: Sequence = (), order: str = "") -> list[tuple]:
        """Rows of a table, each checked against its sum (the sum left out)."""
        columns = _TABLES[table]
        out = []
        for row in self._conn.execute(f"SELECT {', '.join(columns)}, sum FROM {table} {where} {order}", params):
            if _sum(table, row[:-1]) != row[-1]:
                raise self._row_damage(table, row)
            out.append(row[:-1])
        return out

    def _pending_damage(self, what: str) -> WalletStoreError:
        return WalletStoreError(f"{self.path} is damaged: {what}; `sp-scan wallet abandon {self.path} --all` forgets every pending spend (their coins are free again)")

    def _row_damage(self, table: str, row: Sequence) -> WalletStoreError:
        what = f"a {table} row does not match its checksum"
        if table == "meta":
            what = f"its meta row {row[0]} does not match its checksum"
            if row[0] in (*_IDENTITY, *_OPTIONAL):
                return self._unusable(what)
            return self._pending_damage(what) if row[0] in _PENDING_META else self._damaged(what)
        if table in ("pending", "reserved"):
            return self._pending_damage(what)
        if table == "blocks":
            return self._damaged(f"its block row {row[0]} does not match its checksum", row[0] if type(row[0]) is int else None)
        if table == "unconfirmed":
            tip = self.tip()
            return self._damaged("an unconfirmed output does not match its checksum", tip[0] + 1 if tip else None)
        return self._damaged(f"output {_display(row)} does not match its checksum", self._trusted_height(row))

    def _trusted_height(self, row: Sequence) -> int | None:
        """A damaged output row's height, when its block hash is the stored one at that height (both intact), else None."""
        height, block_hash = row[2], row[4]
        if type(height) is not int:
            return None
        stored = self._conn.execute("SELECT hash FROM blocks WHERE height = ?", (height,)).fetchone()
        return height if stored is not None and stored[0] == block_hash else None

    def _meta_value(self, key: str):
        rows = self._rows("meta", "WHERE key = ?", (key,))
        return rows[0][1] if rows else None

    def _count(self, table: str, rows: int, total: int) -> None:
        """Refuse a table whose rows are not the count and sum meta holds for it."""
        stored = self._meta_value(f"rows.{table}")
        if stored != _ROWS.pack(rows, total & _MASK):
            what = f"its {table} table holds {rows} rows, not the ones it wrote (a row deleted or added)"
            raise self._pending_damage(what) if table in ("pending", "reserved") else self._damaged(what)

    # ---- reading ----

    @_checked
    def meta(self, key: str) -> bytes | None:
        """An optional meta row (`change_spend_pubkey`, `spend_origin`), None when absent."""
        value = self._meta_value(key)
        return None if value is None else bytes(value)

    @_checked
    def set_meta(self, key: str, value: bytes) -> None:
        """Write an optional meta row in a transaction of its own (public data only)."""
        if key not in _OPTIONAL:
            raise ValueError(f"{key} is not an optional meta row")
        self.commit()
        with self._transaction():
            self._conn.execute("DELETE FROM meta WHERE key = ?", (key,))
            _insert(self._conn, "meta", [(key, value)])

    @_checked
    @_snapshot
    def tip(self) -> tuple[int, bytes] | None:
        """(height, hash32) of the last synced block; None before the first.

        Raises:
            WalletStoreError: the tip's row is damaged, missing, or not the one meta names.
        """
        stored = self._meta_value("tip")
        rows = self._rows("blocks", order="ORDER BY height DESC LIMIT 1")
        if stored is None and not rows:
            return None
        if stored is None or not rows or _TIP.pack(*rows[0][:2]) != stored:
            raise self._damaged("its tip is not its highest block row", rows[0][0] if rows else None)
        return rows[0][0], rows[0][1]

    @_checked
    @_snapshot
    def hashes(self, below: int, count: int) -> list[tuple[int, bytes]]:
        """Up to `count` stored (height, hash32) below height `below`, highest first.

        Raises:
            WalletStoreError: a row is damaged, or one is missing among them.
        """
        rows = self._rows("blocks", "WHERE height < ?", (below,), f"ORDER BY height DESC LIMIT {int(count)}")
        for (h, _, _), (lower, _, _) in zip(rows, rows[1:]):
            if lower != h - 1:
                raise self._damaged(f"its block row {h - 1} is missing", lower + 1)
        return [(h, hash32) for h, hash32, _ in rows]

    @_checked
    @_snapshot
    def bits(self, above: int) -> list[int] | None:
        """The nBits of every stored block above height `above` (lowest first); None when one has none
        (a source without headers stored it) or the rows do not reach down to `above` + 1."""
        rows = self._rows("blocks", "WHERE height > ?", (above,), "ORDER BY height")
        if not rows or rows[0][0] != above + 1 or any(b is None for _, _, b in rows):
            return None
        return [b for _, _, b in rows]

    @_checked
    @_snapshot
    def outputs(self, unspent: bool = False) -> list[WalletOutput]:
        """The confirmed outputs in block order (height, tx position, vout), then the unconfirmed ones.

        Raises:
            WalletStoreError: a row is damaged, or the tables do not hold the rows the wallet wrote.
        """
        reserved = self._reserved()
        rows = self._conn.execute(f"SELECT {', '.join(_TABLES['outputs'])}, sum FROM outputs ORDER BY height, position, vout").fetchall()
        total = 0
        out = []
        for row in rows:
            if _sum("outputs", row[:-1]) != row[-1]:
                raise self._row_damage("outputs", row)
            total += row[-1]
            t, v, h, _, bh, a, o, lb, tw, verified, sh, st = row[:-1]
            if not unspent or sh is None:
                out.append(WalletOutput(h, t, v, a, o, tw, lb, bh, sh, st, bool(verified), reserved.get(_op(t, v), (None,))[0]))
        self._count("outputs", len(rows), total)
        mempool = self._conn.execute(f"SELECT {', '.join(_TABLES['unconfirmed'])}, sum FROM unconfirmed ORDER BY position, vout").fetchall()
        total = 0
        for row in mempool:
            if _sum("unconfirmed", row[:-1]) != row[-1]:
                raise self._row_damage("unconfirmed", row)
            total += row[-1]
            t, v, _, a, o, lb, tw = row[:-1]
            out.append(WalletOutput(None, t, v, a, o, tw, lb, pending=reserved.get(_op(t, v), (None,))[0]))
        self._count("unconfirmed", len(mempool), total)
        return out

    def _reserved(self) -> dict[bytes, tuple[int, int]]:
        """{outpoint36: (pending id, amount)} of every reserved coin, checked."""
        rows = self._conn.execute(f"SELECT {', '.join(_TABLES['reserved'])}, sum FROM reserved").fetchall()
        out, total = {}, 0
        for row in rows:
            if _sum("reserved", row[:-1]) != row[-1]:
                raise self._row_damage("reserved", row)
            total += row[-1]
            out[_op(row[0], row[1])] = (row[2], row[3])
        self._count("reserved", len(rows), total)
        return out

    @_checked
    @_snapshot
    def pending(self) -> list[PendingSpend]:
        """The pending spends, oldest first.

        Raises:
            WalletStoreError: a row is damaged, or the tables do not hold the rows the wallet wrote.
        """
        coins: dict[int, list[tuple[bytes, int]]] = {}
        for op, (pid, amount) in sorted(self._reserved().items()):
            coins.setdefault(pid, []).append((op, amount))
        rows = self._conn.execute(f"SELECT {', '.join(_TABLES['pending'])}, sum FROM pending ORDER BY id").fetchall()
        total = 0
        out = []
        for row in rows:
            if _sum("pending", row[:-1]) != row[-1]:
                raise self._row_damage("pending", row)
            total += row[-1]
            pid, created, txid32, tx, fee, change_vout, change_amount, pays_sp = row[:-1]
            out.append(PendingSpend(pid, created, tuple(coins.pop(pid, ())), fee, change_vout, change_amount, bool(pays_sp), txid32, tx))
        self._count("pending", len(rows), total)
        if coins:
            raise self._pending_damage("a coin is reserved by a pending spend it does not hold")
        return out

    @_checked
    @_snapshot
    def counts(self) -> tuple[int, int]:
        """(outputs found, of them spent)."""
        found = [o for o in self.outputs() if o.height is not None]
        return len(found), sum(o.spent for o in found)

    @_checked
    @_snapshot
    def check(self) -> dict[str, int]:
        """Read every row and check it, and that the tables hold the rows the wallet wrote, the block rows in a row
        up to the tip.

        Returns:
            {"blocks", "outputs", "unconfirmed", "pending"}: the rows checked.

        Raises:
            WalletStoreError: the first damage found, naming the way back.
        """
        problem = self._conn.execute("PRAGMA integrity_check(1)").fetchone()[0]
        if problem != "ok":
            raise self._damaged(f"SQLite's integrity_check says {problem!r}")
        self._rows("meta")
        for key in (*_IDENTITY, *(f"rows.{t}" for t in _COUNTED)):
            if self._meta_value(key) is None:
                raise self._damaged(f"its meta row {key} is missing") if key.startswith("rows.") else self._unusable(f"its meta row {key} is missing")
        rows = self._rows("blocks", order="ORDER BY height")
        for (h, _, _), (higher, _, _) in zip(rows, rows[1:]):
            if higher != h + 1:
                raise self._damaged(f"its block row {h + 1} is missing", h + 1)
        self._count("blocks", len(rows), sum(_sum("blocks", r) for r in rows))
        self.tip()
        outputs = self.outputs()
        pending = self.pending()
        confirmed = sum(o.height is not None for o in outputs)
        return {"blocks": len(rows), "outputs": confirmed, "unconfirmed": len(outputs) - confirmed, "pending": len(pending)}

    # ---- writing ----

    def _begin(self) -> None:
        if not self._open_tx:
            self._conn.execute("BEGIN IMMEDIATE")
            self._open_tx = True

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """A transaction of its own (the open batch committed first), rolled back on any failure."""
        self.commit()
        self._begin()
        try:
            yield
        except BaseException:
            self._open_tx = False
            self._conn.execute("ROLLBACK")
            raise
        self._open_tx = False
        self._conn.execute("COMMIT")

    def _bump(self, table: str, added: Sequence[int] = (), removed: Sequence[int] = ()) -> None:
        """Count rows written to and deleted from `table` (their sums) in meta."""
        if not added and not removed:
            return
        count, total = _ROWS.unpack(self._meta_value(f"rows.{table}"))
        value = _ROWS.pack(count + len(added) - len(removed), (total + sum(added) - sum(removed)) & _MASK)
        self._conn.execute("UPDATE meta SET value = ?, sum = ? WHERE key = ?", (value, _sum("meta", (f"rows.{table}", value)), f"rows.{table}"))

    def _set_tip(self, tip: tuple[int, bytes] | None) -> None:
        self._conn.execute("DELETE FROM meta WHERE key = 'tip'")
        if tip is not None:
            _insert(self._conn, "meta", [("tip", _TIP.pack(*tip))])

    def _delete(self, table: str, where: str, params: Sequence = ()) -> list[tuple]:
        """Delete rows (checked first) and count them out; the rows deleted."""
        rows = self._rows(table, where, params)
        self._conn.execute(f"DELETE FROM {table} {where}", params)
        self._bump(table, removed=[_sum(table, r) for r in rows])
        return rows

    def _put_outputs(self, rows: Sequence[Sequence]) -> None:
        """Write output rows (full `_TABLES["outputs"]` values), replacing those of the same outpoints."""
        for row in rows:
            self._delete("outputs", "WHERE txid = ? AND vout = ?", row[:2])
        self._bump("outputs", added=_insert(self._conn, "outputs", rows))

    @_checked
    def append(
        self, height: int, hash32: bytes, found: Iterable[Found], spends: Iterable[tuple[bytes, bytes | None]], *, bits: int | None = None, verified: bool = True
    ) -> list[int]:
        """Add a synced block to the open batch (opening one): its hash as the new tip, its outputs, its spends;
        the pending spends its spends end (mined, or a conflicting spend mined) are removed with it.

        Args:
            spends: (outpoint36, spending txid32 or None) of wallet outputs this block spends.
            bits: the block header's nBits, when the source gave the header.
            verified: whether the source proved `found` in the block.

        Returns:
            The ids of the pending spends the block ended.
        """
        self._begin()
        try:
            self._bump("blocks", added=_insert(self._conn, "blocks", [(height, hash32, bits)]))
            self._delete("blocks", "WHERE height < ?", (height - KEEP_HASHES,))
            self._set_tip((height, hash32))
            rows = []
            for f in found:
                old = self._rows("outputs", "WHERE txid = ? AND vout = ?", (f.txid32, f.vout))
                keep = bool(verified or (old and old[0][9]))
                rows.append((f.txid32, f.vout, height, f.position, hash32, f.amount, f.output32, f.label, f.tweak32, int(keep), None, None))
            self._put_outputs(rows)
            for row in rows:
                self._delete("unconfirmed", "WHERE txid = ? AND vout = ?", row[:2])
            spent = []
            for op, txid32 in spends:
                t, v = op[:32], struct.unpack("<I", op[32:])[0]
                old = self._rows("outputs", "WHERE txid = ? AND vout = ? AND spent_height IS NULL", (t, v))
                if old:
                    spent.append((*old[0][:10], height, txid32))
            self._put_outputs(spent)
            ended = sorted({r[2] for op, _ in spends for r in self._rows("reserved", "WHERE txid = ? AND vout = ?", (op[:32], struct.unpack("<I", op[32:])[0]))})
            for pid in ended:
                self._drop_pending(pid)
            return ended
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
    def rollback_to(self, height: int, anchor32: bytes | None = None) -> int:
        """Forget every block above `height` (a fork, or a rescan): its hashes, the outputs it found, the spends it
        saw, and the unconfirmed outputs; damaged rows above `height` are dropped unread.

        Args:
            anchor32: the hash of block `height`, recorded as the tip when the store no longer holds that block
                (a rescan from below the hashes kept); None: the highest block kept is the tip.

        Returns:
            The number of block rows forgotten.

        Raises:
            WalletStoreError: a row at or below `height` is damaged (a rescan from lower down repairs it).
        """
        with self._transaction():
            removed = self._conn.execute("DELETE FROM blocks WHERE height > ?", (height,)).rowcount
            self._conn.execute("DELETE FROM outputs WHERE height > ?", (height,))
            self._conn.execute("DELETE FROM unconfirmed")
            outputs = self._rows("outputs")
            unspend = [(*r[:10], None, None) for r in outputs if r[10] is not None and r[10] > height]
            self._conn.executemany("DELETE FROM outputs WHERE txid = ? AND vout = ?", [r[:2] for r in unspend])
            _insert(self._conn, "outputs", unspend)
            blocks = self._rows("blocks", order="ORDER BY height")
            if anchor32 is not None and height >= self.birthday and (not blocks or blocks[-1][0] != height):
                self._conn.execute("DELETE FROM blocks")
                _insert(self._conn, "blocks", [(height, anchor32, None)])
                blocks = [(height, anchor32, None)]
            self._recount("blocks", blocks)
            self._recount("outputs", self._rows("outputs"))
            self._recount("unconfirmed", [])
            self._set_tip(blocks[-1][:2] if blocks else None)
        return removed

    def _recount(self, table: str, rows: Sequence[Sequence]) -> None:
        value = _ROWS.pack(len(rows), sum(_sum(table, r) for r in rows) & _MASK)
        self._conn.execute("DELETE FROM meta WHERE key = ?", (f"rows.{table}",))
        _insert(self._conn, "meta", [(f"rows.{table}", value)])

    @_checked
    def set_unconfirmed(self, found: Iterable[Found]) -> None:
        """Replace the unconfirmed outputs (the mempool's) with `found`, leaving out any already confirmed."""
        with self._transaction():
            self._delete("unconfirmed", "")
            confirmed = {r[:2] for r in self._conn.execute("SELECT txid, vout FROM outputs")}
            rows = {(f.txid32, f.vout): (f.txid32, f.vout, f.position, f.amount, f.output32, f.label, f.tweak32) for f in found}
            self._bump("unconfirmed", added=_insert(self._conn, "unconfirmed", [r for k, r in rows.items() if k not in confirmed]))

    @_checked
    def settle_outputs(self, proven: Mapping[bytes, int], refuted: Iterable[bytes]) -> None:
        """Record what a source that proves outputs said of unverified ones, in one transaction.

        Args:
            proven: {outpoint36: its amount in its block}: marked verified, the amount corrected.
            refuted: outpoints36 its block does not hold (with the hash the wallet has): deleted.
        """
        with self._transaction():
            rows = []
            for op, amount in proven.items():
                old = self._rows("outputs", "WHERE txid = ? AND vout = ?", (op[:32], struct.unpack("<I", op[32:])[0]))
                if old:
                    rows.append((*old[0][:5], amount, *old[0][6:9], 1, *old[0][10:]))
            self._put_outputs(rows)
            for op in refuted:
                self._delete("outputs", "WHERE txid = ? AND vout = ?", (op[:32], struct.unpack("<I", op[32:])[0]))

    # ---- pending spends ----

    def _drop_pending(self, pid: int) -> None:
        self._delete("reserved", "WHERE pending = ?", (pid,))
        self._delete("pending", "WHERE id = ?", (pid,))

    @_checked
    def add_pending(
        self, coins: Sequence[tuple[bytes, int]], fee: int, change_vout: int | None, change_amount: int, pays_sp: bool,
        txid32: bytes | None = None, tx: bytes | None = None, replaces: Sequence[int] = (),
    ) -> int:  # fmt: skip
        """Record a pending spend of `coins` ((outpoint36, amount) each), removing the pending spends it `replaces`.

        Returns:
            Its id.

        Raises:
            SpendError: a coin is reserved by another pending spend (one not replaced).
        """
        with self._transaction():
            for pid in replaces:
                self._drop_pending(pid)
            for op, _ in coins:
                held = self._rows("reserved", "WHERE txid = ? AND vout = ?", (op[:32], struct.unpack("<I", op[32:])[0]))
                if held:
                    raise SpendError(f"coin {op[:32][::-1].hex()}:{struct.unpack('<I', op[32:])[0]} is reserved by pending spend {held[0][2]}: `wallet abandon` it first")
            last = self._meta_value(_LAST_PENDING)
            pid = (0 if last is None else last) + 1  # ids are never used twice
            self._conn.execute("DELETE FROM meta WHERE key = ?", (_LAST_PENDING,))
            _insert(self._conn, "meta", [(_LAST_PENDING, pid)])
            row = (pid, int(time.time()), txid32, tx, fee, change_vout, change_amount, int(pays_sp))
            self._bump("pending", added=_insert(self._conn, "pending", [row]))
            self._bump("reserved", added=_insert(self._conn, "reserved", [(op[:32], struct.unpack("<I", op[32:])[0], pid, amount) for op, amount in coins]))
        return pid

    @_checked
    def set_broadcast(self, pid: int, txid32: bytes, tx: bytes) -> None:
        """Record the transaction a pending spend was broadcast as."""
        with self._transaction():
            (old,) = self._delete("pending", "WHERE id = ?", (pid,))
            self._bump("pending", added=_insert(self._conn, "pending", [(*old[:2], txid32, tx, *old[4:])]))

    @_checked
    def abandon(self, pids: Iterable[int] | None) -> list[int]:
        """Forget pending spends (None: all of them, damaged rows included); the ids forgotten.

        Raises:
            WalletStoreError: an id the wallet does not hold.
        """
        with self._transaction():
            if pids is None:
                gone = [r[0] for r in self._conn.execute("SELECT id FROM pending")]
                self._conn.execute("DELETE FROM pending")
                self._conn.execute("DELETE FROM reserved")
                self._recount("pending", [])
                self._recount("reserved", [])
                return sorted(gone)
            gone = []
            for pid in pids:
                if not self._rows("pending", "WHERE id = ?", (pid,)):
                    raise WalletStoreError(f"{self.path} has no pending spend {pid}")
                self._drop_pending(pid)
                gone.append(pid)
        return gone


_RECREATE = "its keys, labels or birthday cannot be trusted: create the wallet again (`sp-scan wallet create` from its descriptor or keys) and sync it"


def _display(row: Sequence) -> str:
    txid, vout = row[0], row[1]
    if type(txid) is bytes and len(txid) == 32 and type(vout) is int:
        return f"{txid[::-1].hex()}:{vout}"
    return "(unreadable outpoint)"


def _upgrade(conn: sqlite3.Connection) -> None:
    """Rewrite a version 1 file as version 2 in one transaction (a killed upgrade leaves it as it was)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] != _UPGRADABLE:  # another process upgraded it meanwhile
            conn.execute("ROLLBACK")
            return
        meta = conn.execute("SELECT key, value FROM meta").fetchall()
        blocks = conn.execute("SELECT height, hash, NULL FROM blocks ORDER BY height").fetchall()
        outputs = conn.execute(
            "SELECT txid, vout, height, position, block_hash, amount, output, label, tweak, 0, spent_height, spent_txid FROM outputs"
        ).fetchall()
        mempool = conn.execute("SELECT txid, vout, position, amount, output, label, tweak FROM unconfirmed").fetchall()
        for table in ("meta", "blocks", "outputs", "unconfirmed"):
            conn.execute(f"DROP TABLE {table}")
        for statement in _SCHEMA:
            conn.execute(statement)
        counts = {}
        for table, rows in (("blocks", blocks), ("outputs", outputs), ("unconfirmed", mempool), ("pending", []), ("reserved", [])):
            sums = _insert(conn, table, rows)
            counts[f"rows.{table}"] = _ROWS.pack(len(sums), sum(sums) & _MASK)
        meta = {k: v for k, v in meta if k != "format"} | {"format": FORMAT_VERSION} | counts
        if blocks:
            meta["tip"] = _TIP.pack(*blocks[-1][:2])
        _insert(conn, "meta", meta.items())
        conn.execute(f"PRAGMA user_version = {FORMAT_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
