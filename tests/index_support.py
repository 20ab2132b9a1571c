"""Test support for the tweak index: in-memory block files, the test wallet, and an index's whole content."""

from __future__ import annotations

import os
import random
import signal
import itertools
import sqlite3
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from coincurve import PrivateKey, PublicKey

import blockfactory as bf
from cli_support import Chain, NodeServer
from sp_scan import filters
from sp_scan.index import BlockFiles, Index
from sp_scan.index.store import rows
from sp_scan.scan import Receiver

_KEYS = bf.wallet_cases()[0]["given"]["key_material"]
SCAN_HEX = _KEYS["scan_priv_key"]
SPEND_HEX = PrivateKey(bytes.fromhex(_KEYS["spend_priv_key"])).public_key.format().hex()
WALLET = Receiver(bytes.fromhex(SCAN_HEX), bytes.fromhex(SPEND_HEX))
"""The wallet that `cli_support.spending_chain` blocks pay."""


@dataclass(frozen=True)
class MemBlock:
    """A block file held in memory (what BlockFiles needs: a name and load())."""

    name: str
    raw: bytes
    spent: bytes

    def load(self) -> tuple[bytes, bytes]:
        return self.raw, self.spent


def files_of(chain: Chain, stop: int | None = None, start: int = 0) -> BlockFiles:
    """The chain's blocks start..stop as a regtest block-files source."""
    blocks = chain.blocks[start : None if stop is None else stop + 1]
    return BlockFiles([MemBlock(f"block {h}", tb.raw, tb.spent_bytes) for h, tb in enumerate(blocks, start)], "regtest")


def synced(path: Path, chain: Chain, stop: int | None = None) -> Index:
    """A new regtest index at path, synced from the chain's blocks (0..stop)."""
    index = Index.create(path, "regtest")
    index.sync(files_of(chain, stop))
    return index


def write_files(directory: Path, chain: Chain) -> list[Path]:
    """Each block as NNNN.hex with NNNN.spent.hex beside it; returns the block paths."""
    paths = []
    for h, tb in enumerate(chain.blocks):
        path = directory / f"{h:04d}.hex"
        path.write_text(tb.raw.hex() + "\n")
        (directory / f"{h:04d}.spent.hex").write_text(tb.spent_bytes.hex() + "\n")
        paths.append(path)
    return paths


def content(path: Path) -> dict[str, list]:
    """Every row of every table of an index file (of any format), in key order: what two equal indexes share."""
    conn = sqlite3.connect(path)
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
            for table, order in (("meta", "1"), ("blocks", "1"), ("spent", "1"), ("sums", "1"), ("spends", "1, 2"), ("txloc", "1, 2, 3"), ("spent_keys", "1"))
            if table in tables
        }
    finally:
        conn.close()


def flip(blob: bytes, bit: int) -> bytes:
    """blob with one bit flipped (bit 0: the least significant bit of the first byte)."""
    out = bytearray(blob)
    out[bit >> 3] ^= 1 << (bit & 7)
    return bytes(out)


def resum(height: int, table: str, sums: bytes, field: str, value) -> bytes:
    """A `blocks` or `spent` row's sums with `field`'s CRC made for `value` (a change the sums do not show)."""
    fields = rows.BLOCK_FIELDS if table == "blocks" else rows.SPENT_FIELDS
    i = fields.index(field)
    values = list(struct.unpack(f"<{len(fields)}I", sums))
    values[i] = rows.crc(value, rows.seed(height, table, i))
    return struct.pack(f"<{len(fields)}I", *values)


def damage(path: Path, sql: str) -> None:
    """Change an index file's rows by the statements `sql`, as a bad disk or a careless hand would; `flip(blob, bit)`,
    `resum(height, table, sums, field, value)` and the spends bitmaps' checksum `spends_sum(height, bits)` are there."""
    conn = sqlite3.connect(path)
    conn.create_function("flip", 2, flip)
    conn.create_function("resum", 5, resum)
    conn.create_function("spends_sum", 2, rows.bits_sum)
    conn.executescript(sql)
    conn.close()


_V3_COLUMNS = (
    "hash", "prev", "time", "block_txs", "n_tx", "max_values", "out_counts", "out_vouts", "txids",
    "tweaks33", "spent_hashes", "filter_new", "filter_spent", "marks", "out_values", "out_keys", "tweaks64",
)  # fmt: skip
_V3_SCHEMA = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value NOT NULL, sum INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE blocks(height INTEGER PRIMARY KEY, "
    + ", ".join(f"{c} {'BLOB' if c in ('filter_new', 'filter_spent', 'spent_hashes') else 'NOT NULL'}" for c in _V3_COLUMNS)
    + ")",
    "CREATE TABLE sums(height INTEGER PRIMARY KEY, columns BLOB NOT NULL)",
    "CREATE TABLE spends(height INTEGER PRIMARY KEY, bits BLOB NOT NULL, sum INTEGER NOT NULL)",
    "CREATE TABLE txloc(prefix INTEGER NOT NULL, height INTEGER NOT NULL, tx INTEGER NOT NULL, PRIMARY KEY(prefix, height, tx)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS spent_keys(hash BLOB PRIMARY KEY, keys8 BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE mempool(seq INTEGER PRIMARY KEY, txid BLOB NOT NULL UNIQUE, tweak33 BLOB NOT NULL, tweak64 BLOB NOT NULL,"
    " out_vouts BLOB NOT NULL, out_keys BLOB NOT NULL, out_values BLOB NOT NULL, sum INTEGER NOT NULL)",
)


def _v3_seed(height: int, position: int) -> int:
    return zlib.crc32(struct.pack("<qB", height, position))


def as_format3(path: Path) -> None:
    """Rewrite an index file in the layout sp-scan wrote as format 3 (sp-scan 0.1.0 at 74bf740): one blocks row
    of 17 columns per block (its max values, spent filter and 64-byte tweaks kept beside what they derive
    from, its marks as (height, ordinal) u32 pairs), a sums row of per-column CRCs, spends bitmaps holding
    every mark, a txloc row per eligible tx, spent keys by block hash."""
    rows_v3, bits_v3, keys_v3, txloc = [], [], [], []
    with Index.open(path, readonly=True) as idx:
        meta = {k: idx._store._meta(k) for k in ("network", "first_height", "tip")}
        tip = idx.tip()
        for height in range(idx.first_height, tip[0] + 1) if tip else ():
            ((_, values, _, bits),) = idx._store._rows(rows.FIELDS, height, height, spent=True)
            row = dict(zip(rows.FIELDS, values))
            counts, vals = memoryview(row["out_counts"]).cast("I"), memoryview(row["out_values"]).cast("Q")
            firsts = [0, *itertools.accumulate(counts)]
            row["max_values"] = struct.pack(f"<{len(counts)}Q", *(max(vals[a:b]) for a, b in zip(firsts, firsts[1:])))
            row["tweaks64"] = b"".join(PublicKey(row["tweaks33"][i : i + 33]).format(compressed=False)[1:] for i in range(0, len(row["tweaks33"]), 33))
            row["filter_spent"] = None if row["spent_hashes"] is None else filters.spent_filter(row["hash"], row["spent_hashes"])
            row["marks"] = b"".join(struct.pack("<II", p >> 32, p & 0xFFFFFFFF) for p in rows.unpack_marks(row["marks"]))
            fields = [row[c] for c in _V3_COLUMNS] + [row["spent_keys"]]
            rows_v3.append((height, *fields[:-1], struct.pack(f"<{len(fields)}I", *(rows.crc(v, _v3_seed(height, i)) for i, v in enumerate(fields)))))
            bits_v3.append((height, bits, rows.crc(bits, _v3_seed(height, len(fields)))))
            if row["spent_keys"] is not None:
                keys_v3.append((row["hash"], row["spent_keys"]))
            txloc += [(int.from_bytes(row["txids"][i : i + 8], "little") >> 17, height, i // 32) for i in range(0, len(row["txids"]), 32)]
    meta["format"] = 3
    path.unlink()
    for stale in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        stale.unlink(missing_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 16384")
    with conn:
        for statement in _V3_SCHEMA:
            conn.execute(statement)
        conn.executemany("INSERT INTO meta VALUES (?, ?, ?)", [(k, v, rows.meta_sum(k, v)) for k, v in meta.items() if v is not None])
        conn.executemany(f"INSERT INTO blocks VALUES ({', '.join('?' * (len(_V3_COLUMNS) + 1))})", [r[:-1] for r in rows_v3])
        conn.executemany("INSERT INTO sums VALUES (?, ?)", [(r[0], r[-1]) for r in rows_v3])
        conn.executemany("INSERT INTO spends VALUES (?, ?, ?)", bits_v3)
        conn.executemany("INSERT INTO spent_keys VALUES (?, ?)", keys_v3)
        conn.executemany("INSERT INTO txloc VALUES (?, ?, ?)", txloc)
    conn.execute(f"PRAGMA application_id = {rows.APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 3")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()


_V2_MEMPOOL = (
    "CREATE TABLE mempool(seq INTEGER PRIMARY KEY, txid BLOB NOT NULL UNIQUE, tweak33 BLOB NOT NULL, tweak64 BLOB NOT NULL,"
    " out_vouts BLOB NOT NULL, out_keys BLOB NOT NULL, out_values BLOB NOT NULL)"
)


def as_old_version(path: Path, version: int = 2) -> None:
    """Rewrite a format-3 index file (`as_format3`) in the layout sp-scan wrote as format `version` (1 or 2), before the checksums:
    meta without sums or tip, one spends row (height, ordinal) per spent output, no sums table, and (version 1)
    no mempool table. The blocks, txloc and spent_keys rows stay as they are: those formats shared them."""
    conn = sqlite3.connect(path)
    spent = [(h, 8 * i + j) for h, bits in conn.execute("SELECT height, bits FROM spends") for i, byte in enumerate(bits) for j in range(8) if byte >> j & 1]
    meta = [(k, version if k == "format" else v) for k, v in conn.execute("SELECT key, value FROM meta") if k != "tip"]
    conn.executescript(
        "DROP TABLE sums; DROP TABLE spends; DROP TABLE meta; DROP TABLE mempool;"
        " CREATE TABLE meta(key TEXT PRIMARY KEY, value NOT NULL) WITHOUT ROWID;"
        " CREATE TABLE spends(height INTEGER NOT NULL, ordinal INTEGER NOT NULL, PRIMARY KEY(height, ordinal)) WITHOUT ROWID;"
        + (_V2_MEMPOOL if version == 2 else "")
    )
    with conn:
        conn.executemany("INSERT INTO meta VALUES (?, ?)", meta)
        conn.executemany("INSERT INTO spends VALUES (?, ?)", spent)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.close()


def living_children(pid: int) -> list[int]:
    """The pids of the process's children that have not ended (zombies count as ended), from Linux's /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid = stat.read_text().rsplit(")", 1)[1].split()[:2]
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
        if int(ppid) == pid and state != "Z":
            found.append(int(stat.parent.name))
    return found


def ended(pid: int) -> bool:
    """True once the process is gone or a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


_AS_A_USER = """
import ctypes, os, sys
if os.geteuid() == 0:  # root ignores file modes: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH for the command
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP: gone from the command exec'd next
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
os.execv(sys.executable, [sys.executable, "-m", "sp_scan.cli", *sys.argv[1:]])
"""
AS_A_USER = [sys.executable, "-c", _AS_A_USER]
"""`sp-scan` in a new process that file modes bind even when the tests run as root (a read-only directory is read-only)."""


SYNC = [sys.executable, "-c", "from sp_scan.cli import main; main()", "index", "sync"]
"""`sp-scan index sync` in a new process."""


def committed_tip(path: Path) -> int:
    """The committed tip height of the index at path; -1 while it is empty or not created yet."""
    if not path.exists():
        return -1
    with Index.open(path, readonly=True) as idx:
        tip = idx.tip()
    return tip[0] if tip else -1


def wait_until(condition, proc: subprocess.Popen | None = None, what: str = "the condition", bound: float = 300.0) -> None:
    """Poll `condition()` until it holds: the wait is for an event, `bound` seconds only turns a hang into a failure.

    Raises:
        AssertionError: `proc` exited first, or `bound` passed.
    """
    deadline = time.monotonic() + bound
    while not condition():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited with status {proc.returncode} before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {bound:g} s")
        time.sleep(0.01)


def kill_9_then_resume(path: Path, server: NodeServer, tip: int, rounds: int, seed: int, delay: float) -> list[int]:
    """SIGKILL a running `sp-scan index sync` (with its workers; --jobs 1 and 2) `rounds` times, each resuming the
    last, then let one run finish. Each kill waits for an event, never for a time: even rounds kill while the
    node holds the block after a random height (the index is then at exactly that height); odd rounds kill as
    soon as the sync has committed a random height, wherever it then is (fetching, computing, committing),
    with `delay` seconds per request slowing the node.

    Returns:
        The index's tip height after each kill (-1 while empty).
    """
    rng, tips = random.Random(seed), []
    slices = [range(tip * r // rounds, max(tip * (r + 1) // rounds, tip * r // rounds + 1)) for r in range(rounds)]
    for round_, heights in enumerate(slices):
        done = tips[-1] if tips else -1
        target = max(rng.choice(heights), done + 1)
        if target >= tip:
            break  # an earlier free-running round got to the end
        held = round_ % 2 == 0
        if held:
            server.hold(target + 1)
        server.httpd.delay = 0 if held else delay
        args = [*SYNC, "--db", str(path), "--rest", server.url, "--jobs", str(1 + round_ // 2 % 2)]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            wait_until(lambda: committed_tip(path) >= target, proc, f"the sync committed height {target}")
            if held:
                wait_until(server.held.is_set, proc, "a request for the held block")
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the sync and its workers, at once
            proc.communicate()
            server.release()
        tips.append(committed_tip(path))
        assert not held or tips[-1] == target, (held, target, tips)
    server.httpd.delay = 0
    done = subprocess.run([*SYNC, "--db", str(path), "--rest", server.url], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return tips
