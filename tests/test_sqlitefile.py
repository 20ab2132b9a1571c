"""The SQLite file plumbing both stores share (`sp_scan.sqlitefile`): the writer lock on POSIX and, with
`fcntl` hidden, through a stand-in for Windows' `msvcrt`; a file made where hard links fail."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import kernelchain as kc
from sp_scan import sqlitefile
from sp_scan.errors import IndexStoreError, WalletStoreError
from sp_scan.wallet import Wallet

W = kc.TEST_WALLET


def _wallet(path):
    return Wallet.create(path, "regtest", W.scan_pubkey33, W.spend_pubkey33, W.labels, 0)


def test_one_writer_at_a_time_and_the_lock_freed_by_close(tmp_path):
    _wallet(tmp_path / "w").close()
    first, second = Wallet.open(tmp_path / "w"), Wallet.open(tmp_path / "w")
    try:
        first._store.lock_writer()
        with pytest.raises(WalletStoreError, match="being synced by another process"):
            second._store.lock_writer()
        assert second._store._file_lock.busy() and not second._store._file_lock.held
        first.close()
        second._store.lock_writer()
    finally:
        first.close()
        second.close()


def test_a_file_is_placed_where_hard_links_fail(tmp_path, monkeypatch):
    def no_links(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    _wallet(tmp_path / "w").close()
    assert Wallet.open(tmp_path / "w").close() is None
    with pytest.raises(WalletStoreError, match="already exists"):
        sqlitefile.place(tmp_path / "w", tmp_path / "w", WalletStoreError)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no scratch file left


def test_a_truncated_wallet_is_refused_before_sqlite_reads_it(tmp_path):
    _wallet(tmp_path / "w").close()  # its log copied into the file and removed
    assert not (tmp_path / "w-wal").exists()
    size = (tmp_path / "w").stat().st_size
    os.truncate(tmp_path / "w", size // 2)
    with pytest.raises(WalletStoreError, match="is truncated"):
        Wallet.open(tmp_path / "w")
    with pytest.raises(IndexStoreError, match="is truncated"):
        sqlitefile.refuse_truncated(tmp_path / "w", IndexStoreError)


WINDOWS = textwrap.dedent("""
    import os, sys
    import fcntl as real
    import multiprocessing.connection, subprocess  # they tell Windows by `import msvcrt`: imported before the stand-in
    sys.modules["fcntl"] = None  # `import fcntl` raises ImportError, as on Windows
    taken = []

    class msvcrt:  # Windows' byte-range locks, stood in for by flock (per open file, as LockFile is per handle)
        LK_NBLCK, LK_UNLCK = 2, 0

        @staticmethod
        def locking(fd, mode, nbytes):
            taken.append(os.lseek(fd, 0, os.SEEK_CUR))
            real.flock(fd, real.LOCK_UN if mode == msvcrt.LK_UNLCK else real.LOCK_EX | real.LOCK_NB)

    sys.modules["msvcrt"] = msvcrt
    import sp_scan.wallet, sp_scan.index
    from sp_scan import sqlitefile
    from sp_scan.errors import WalletStoreError
    assert sqlitefile.fcntl is None
    store = sp_scan.wallet.Wallet.create(sys.argv[1], "regtest", bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3]))._store
    other = sp_scan.wallet.store.WalletStore.open(sys.argv[1])
    store.lock_writer()
    try:
        other.lock_writer()
    except WalletStoreError as exc:
        assert "being synced by another process" in str(exc)
    else:
        raise SystemExit("a second writer took the lock")
    store.close()
    other.lock_writer()
    other.close()
    assert set(taken) == {sqlitefile._WINDOWS_LOCK_BYTE}, taken
    print("ok")
""")


def test_the_wallet_imports_and_locks_without_fcntl(tmp_path):
    """`import sp_scan.wallet` needs no fcntl; the lock then goes through msvcrt, at a byte SQLite never locks."""
    result = subprocess.run(
        [sys.executable, "-c", WINDOWS, str(tmp_path / "w"), W.scan_pubkey33.hex(), W.spend_pubkey33.hex()], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr
