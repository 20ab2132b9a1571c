"""The wallet file detects its own damage: a flipped byte, a row deleted or changed by hand is one line and exit 2
naming the way back (`wallet rescan --from H`, `wallet abandon --all`, creating the wallet again), never a wrong
balance; `wallet check` reads every row; version 1 files are upgraded when opened."""

from __future__ import annotations

import sqlite3
import struct

import pytest

import kernelchain as kc
from sp_scan.errors import WalletStoreError
from sp_scan.wallet import Wallet
from sp_scan.wallet import store as wallet_store
from test_cli import assert_fails, invoke, json_lines
from wallet_support import create, listed, paid, rescan, sync

COMMANDS = [("balance",), ("list",), ("info",), ("send", "--to", "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080:20000", "--fee-rate", "2")]


@pytest.fixture
def synced(kernel_index, tmp_path):
    """A wallet synced from the sample chain's index, its write-ahead log folded into the file."""
    path = create(tmp_path)
    assert sync(path, "--db", str(kernel_index)).exit_code == 0
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def flip_amount_byte(path, output32: bytes) -> None:
    """Flip a bit of the last byte of an output's amount in the file itself (the record's value before its key)."""
    raw = bytearray(path.read_bytes())
    at = raw.index(output32)  # the outputs row: ... block_hash, amount, output, ...
    raw[at - 1] ^= 0x10
    path.write_bytes(bytes(raw))


def every_command_fails(path, *needles: str) -> None:
    for command in COMMANDS:
        assert_fails(invoke("wallet", command[0], str(path), *command[1:]), *needles)
    assert_fails(invoke("wallet", "check", str(path)), *needles)


def test_a_flipped_byte_in_an_amount_is_caught_by_every_read_and_a_rescan_from_its_height_repairs_it(kernel_chain, kernel_index, synced):
    honest = listed(synced)
    row = next(r for r in honest if not r["spent"] and r["height"] > 104)
    with sqlite3.connect(synced) as conn:  # SQLite itself sees nothing wrong
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    flip_amount_byte(synced, bytes.fromhex(row["output"]))
    with sqlite3.connect(synced) as conn:
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT amount FROM outputs WHERE output = ?", (bytes.fromhex(row["output"]),)).fetchone()[0] != row["amount"]
    every_command_fails(synced, f"{row['txid']}:{row['vout']} does not match its checksum", f"wallet rescan {synced} --from {row['height']}")
    result = rescan(synced, row["height"], "--db", str(kernel_index))
    assert result.exit_code == 0, result.output
    assert listed(synced) == honest == paid(kernel_chain)
    assert invoke("wallet", "check", str(synced)).stdout.startswith(f"{synced}: ok (")


@pytest.mark.parametrize("change", ["a deleted output row", "an amount times 1,000", "a spend unmarked", "an added output row"])
def test_rows_changed_by_hand_are_caught_and_a_rescan_from_the_birthday_repairs_them(change, kernel_chain, kernel_index, synced):
    honest = listed(synced)
    with sqlite3.connect(synced) as conn:
        if change == "a deleted output row":
            conn.execute("DELETE FROM outputs WHERE (txid, vout) IN (SELECT txid, vout FROM outputs LIMIT 1)")
        elif change == "an amount times 1,000":
            conn.execute("UPDATE outputs SET amount = amount * 1000 WHERE (txid, vout) IN (SELECT txid, vout FROM outputs LIMIT 1)")
        elif change == "a spend unmarked":
            conn.execute("UPDATE outputs SET spent_height = NULL, spent_txid = NULL WHERE spent_height IS NOT NULL")
        else:
            row = conn.execute("SELECT * FROM outputs LIMIT 1").fetchone()
            conn.execute("INSERT INTO outputs VALUES (" + ", ".join("?" * len(row)) + ")", (b"\x99" * 32, *row[1:]))
    needle = "rows, not the ones it wrote" if change == "a deleted output row" else "does not match its checksum"
    every_command_fails(synced, needle, "wallet rescan")
    result = rescan(synced, 0, "--db", str(kernel_index))
    assert result.exit_code == 0, result.output
    assert listed(synced) == honest == paid(kernel_chain)


def test_a_deleted_block_row_is_caught_by_check_and_repaired_from_its_height(kernel_chain, kernel_index, synced):
    honest = listed(synced)
    with sqlite3.connect(synced) as conn:
        conn.execute("DELETE FROM blocks WHERE height = 60")
    assert invoke("wallet", "balance", str(synced)).exit_code == 0  # the balance reads no block row: nothing wrong with it
    assert_fails(invoke("wallet", "check", str(synced)), "its block row 60 is missing", "--from 60")
    assert rescan(synced, 60, "--db", str(kernel_index)).exit_code == 0
    assert listed(synced) == honest and invoke("wallet", "check", str(synced)).exit_code == 0


def test_damaged_keys_are_refused_at_open_asking_for_the_wallet_to_be_created_again(synced):
    with sqlite3.connect(synced) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'labels'", (struct.pack("<3I", 0, 1, 8),))
    every_command_fails(synced, "its meta row labels does not match its checksum", "create the wallet again")


def test_a_damaged_pending_spend_is_forgotten_by_abandon_all(synced):
    assert invoke("wallet", "send", str(synced), "--to", "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080:20000", "--fee-rate", "2", "-o", str(synced.parent / "p.psbt")).exit_code == 0
    with sqlite3.connect(synced) as conn:
        conn.execute("UPDATE reserved SET amount = amount + 1")
    assert_fails(invoke("wallet", "balance", str(synced)), "abandon", "--all")
    result = invoke("wallet", "abandon", str(synced), "--all")
    assert result.exit_code == 0, result.output
    assert json_lines(invoke("wallet", "balance", str(synced), "--json").stdout)[0]["reserved"] == 0
    assert invoke("wallet", "check", str(synced)).exit_code == 0


def test_the_store_refuses_a_version_it_does_not_know_and_the_message_says_why(synced):
    with sqlite3.connect(synced) as conn:
        conn.execute("PRAGMA user_version = 3")
    with pytest.raises(WalletStoreError, match="format version 3; this sp-scan reads versions 1 and 2"):
        Wallet.open(synced)


def test_a_rescan_from_below_the_hashes_kept_starts_from_the_sources_hash_of_the_block_before(kernel_chain, kernel_index, tmp_path, monkeypatch):
    monkeypatch.setattr(wallet_store, "KEEP_HASHES", 10)
    path = create(tmp_path)
    assert sync(path, "--db", str(kernel_index)).exit_code == 0
    honest = listed(path)
    with Wallet.open(path) as w:
        assert w._store.hashes(kc.SAMPLE_TIP + 1, 1000)[-1][0] > 90  # only the last 10 kept
    result = rescan(path, 60, "--db", str(kernel_index))
    assert result.exit_code == 0, result.output
    assert f"{kc.SAMPLE_TIP - 59} block(s) scanned" in result.stdout
    assert listed(path) == honest == paid(kernel_chain) and invoke("wallet", "check", str(path)).exit_code == 0


# ---- version 1 files ----

FORMAT_1 = (  # sp-scan's wallet schema of format version 1, as it wrote it
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


def as_format_1(path, old):
    """The wallet at `path` written again as a version 1 file at `old`."""
    with sqlite3.connect(path) as src, sqlite3.connect(old) as dst:
        for statement in FORMAT_1:
            dst.execute(statement)
        meta = [(k, v) for k, v in src.execute("SELECT key, value FROM meta") if not k.startswith("rows.") and k != "tip"]
        dst.executemany("INSERT INTO meta VALUES (?, ?)", [(k, 1 if k == "format" else v) for k, v in meta])
        dst.executemany("INSERT INTO blocks VALUES (?, ?)", src.execute("SELECT height, hash FROM blocks"))
        dst.executemany(
            "INSERT INTO outputs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            src.execute("SELECT txid, vout, height, position, block_hash, amount, output, label, tweak, spent_height, spent_txid FROM outputs"),
        )
        dst.execute(f"PRAGMA application_id = {wallet_store.APPLICATION_ID}")
        dst.execute("PRAGMA user_version = 1")
    return old


def test_a_version_1_file_is_upgraded_when_opened_its_outputs_unverified_until_a_proving_source_sees_them(kernel_chain, kernel_index, synced, tmp_path):
    honest = listed(synced)
    old = as_format_1(synced, tmp_path / "old.wallet")
    assert listed(old) == []  # upgraded on open: every output kept, as unverified
    unverified = json_lines(invoke("wallet", "list", str(old), "--unverified", "--json").stdout)
    assert unverified == honest
    balance = json_lines(invoke("wallet", "balance", str(old), "--json").stdout)[0]
    assert balance["confirmed"] == 0 and balance["unverified"] == sum(r["amount"] for r in honest if not r["spent"])
    with sqlite3.connect(old) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    assert invoke("wallet", "check", str(old)).exit_code == 0
    assert sync(old, "--db", str(kernel_index)).exit_code == 0  # nothing new to scan; the index proves what it holds
    assert listed(old) == honest == paid(kernel_chain)
    assert json_lines(invoke("wallet", "list", str(old), "--unverified", "--json").stdout) == []
    with Wallet.open(old) as w:
        assert w.tip()[0] == kc.SAMPLE_TIP




def test_a_reader_sees_each_commit_of_a_sync_whole_never_as_damage(tmp_path):
    """Another process (here another connection) reading while a sync commits block after block reads one
    state of the file per call: the tip and the highest block row agree, and the row counts match."""
    import threading

    from coincurve import PrivateKey

    key = PrivateKey(b"\x01" * 32).public_key.format()
    writer = wallet_store.WalletStore.create(tmp_path / "r.wallet", "regtest", key, key, [], 0)
    reader = wallet_store.WalletStore.open(tmp_path / "r.wallet")
    enough = threading.Event()  # the reader has seen 30 tips: the reads overlapped that many commits

    def sync_blocks():
        height = 0
        while not enough.is_set() and height < 100_000:
            writer.append(height, height.to_bytes(32, "little"), [], [])
            writer.commit()
            height += 1

    thread = threading.Thread(target=sync_blocks)
    thread.start()
    seen = set()
    try:
        while thread.is_alive() and len(seen) < 30:
            tip = reader.tip()
            seen.add(tip[0] if tip else -1)
            reader.check()
    finally:
        enough.set()
        thread.join()
        reader.close()
        writer.close()
    assert len(seen) >= 30
