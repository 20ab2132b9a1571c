"""`sp-scan index sync|scan|info`, `sp-scan --version` and table headers: output shapes, exit codes, one-line errors."""

from __future__ import annotations

import io
import json
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from cli_support import NodeServer, RestHandler, closed_port_url, spending_chain
from index_support import SCAN_HEX, SPEND_HEX, WALLET, write_files
from sp_scan import block, descriptor
from sp_scan.cli.index import _show_progress
from sp_scan.cli.run import Progress
from sp_scan.index import Index, SyncStats
from test_cli import assert_fails, invoke, json_lines


CHAIN = spending_chain(6)
MATCH_KEYS = ["height", "txid", "vout", "amount", "output", "tweak", "label", "spent"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("blocks"), CHAIN)


@pytest.fixture(scope="module")
def db(tmp_path_factory, files):
    path = tmp_path_factory.mktemp("db") / "chain.db"
    result = invoke("index", "sync", "--db", str(path), "--network", "regtest", *map(str, reversed(files)))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"index at height {CHAIN.tip} ({CHAIN.blocks[-1].hash_hex}): 6 block(s)")
    return path


@pytest.fixture
def key(tmp_path):
    path = tmp_path / "wallet.scan"
    path.write_text(SCAN_HEX + "\n")
    return str(path)


def expected_matches() -> list[dict]:
    spent = {(i.prevout.hash, i.prevout.n) for tb in CHAIN.blocks for tx in tb.txs[1:] for i in tx.vin}
    return [
        {"height": h, "txid": m.txid32[::-1].hex(), "vout": m.vout, "amount": m.amount, "output": m.found.output32.hex(),
         "tweak": m.found.tweak32.hex(), "label": m.found.label, "spent": (m.txid32, m.vout) in spent}
        for h, tb in enumerate(CHAIN.blocks) for m in block.scan(tb.raw, tb.spent_bytes, WALLET)
    ]  # fmt: skip


def test_index_scan_json_lists_what_a_block_scan_finds_with_spent_status(db, key):
    result = invoke("index", "scan", "--db", str(db), "--scan-key-file", key, "--spend-pubkey", SPEND_HEX, "--json")
    assert result.exit_code == 0, result.output
    records = json_lines(result.stdout)
    assert all(list(r) == MATCH_KEYS for r in records)
    assert records == expected_matches() and any(r["spent"] for r in records)


def test_index_scan_table_has_a_header_then_a_row_per_match(db, key):
    result = invoke("index", "scan", "--db", str(db), "--scan-key-file", key, "--spend-pubkey", SPEND_HEX, "--from", "1", "--to", "2")
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["HEIGHT", "TXID", "VOUT", "AMOUNT", "LABEL", "SPENT", "OUTPUT", "TWEAK"]
    assert [row.split()[1] for row in rows] == [m["txid"] for m in expected_matches() if 1 <= m["height"] <= 2]


def test_index_scan_with_nothing_found_prints_only_the_header(db, tmp_path):
    other = tmp_path / "other.scan"
    other.write_text("11" * 32 + "\n")
    result = invoke("index", "scan", "--db", str(db), "--scan-key-file", str(other), "--spend-pubkey", SPEND_HEX)
    assert result.exit_code == 0 and result.stdout.split() == ["HEIGHT", "TXID", "VOUT", "AMOUNT", "LABEL", "SPENT", "OUTPUT", "TWEAK"]


def test_index_info_as_text_and_json(db):
    record = json.loads(invoke("index", "info", "--db", str(db), "--json").stdout)
    assert list(record) == ["network", "first_height", "tip_height", "tip_hash", "blocks", "transactions", "eligible_transactions", "bytes"]
    assert (record["network"], record["first_height"], record["tip_height"]) == ("regtest", 0, CHAIN.tip)
    assert record["tip_hash"] == CHAIN.blocks[-1].hash_hex and record["transactions"] == sum(len(tb.txs) for tb in CHAIN.blocks)
    text = invoke("index", "info", "--db", str(db)).stdout
    assert f"tip hash      {CHAIN.blocks[-1].hash_hex}" in text and "size on disk" in text and "eligible)" in text


def test_sync_from_rest_then_again_adds_nothing(tmp_path):
    path = str(tmp_path / "rest.db")
    with NodeServer(RestHandler, CHAIN) as rest:
        first = invoke("index", "sync", "--db", path, "--rest", rest.url, "--jobs", "2")
        again = invoke("index", "sync", "--db", path, "--rest", rest.url, "--from", "0")
    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert "6 block(s)" in first.stdout and "0 block(s), 0 transaction(s) added" in again.stdout


def test_version_names_the_package_and_the_ec_engine():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout.startswith("sp-scan 0.1.0 (EC engine: ")


def test_a_table_header_is_printed_only_once_a_block_was_read(tmp_path):
    bad = tmp_path / "bad.hex"
    bad.write_text("00" * 81 + "\n")
    (tmp_path / "bad.spent.hex").write_text("00\n")
    result = invoke("tweaks", str(bad))
    assert_fails(result, "bad.hex")
    assert result.stdout == ""


# ---- bad input: one line, exit 2, nothing lost ----


@pytest.mark.parametrize("command", ["scan", "info"])
def test_a_missing_index_file_is_one_line_exit_2(tmp_path, command, key):
    extra = ["--scan-key-file", key, "--spend-pubkey", SPEND_HEX] if command == "scan" else []
    assert_fails(invoke("index", command, "--db", str(tmp_path / "none.db"), *extra), "no index at", "none.db")


def test_a_corrupt_or_other_version_index_is_one_line_exit_2(tmp_path, db):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not an index at all" * 100)
    assert_fails(invoke("index", "info", "--db", str(junk)), "junk.db", "not a")
    old = tmp_path / "v7.db"
    Index.create(old, "regtest").close()
    sqlite3.connect(old).execute("PRAGMA user_version = 7").connection.close()
    assert_fails(invoke("index", "info", "--db", str(old)), "format version 7")


def test_an_index_of_another_network_is_refused_and_left_as_it_was(tmp_path, files):
    path = tmp_path / "main.db"
    Index.create(path, "main").close()
    assert_fails(invoke("index", "sync", "--db", str(path), "--network", "regtest", *map(str, files)), "of network main; the source is on regtest")
    with NodeServer(RestHandler, CHAIN) as rest:
        assert_fails(invoke("index", "sync", "--db", str(path), "--rest", rest.url), "of network main; the source is on regtest")
    assert Index.open(path).tip() is None


def test_a_height_beyond_the_nodes_tip_is_one_line_exit_2(tmp_path):
    with NodeServer(RestHandler, CHAIN) as rest:
        assert_fails(invoke("index", "sync", "--db", str(tmp_path / "t.db"), "--rest", rest.url, "--to", "99"), f"height 99 is beyond the source's tip {CHAIN.tip}")


def test_a_node_that_stops_answering_exits_2_naming_the_height_to_resume_at(tmp_path):
    path = tmp_path / "n.db"
    with NodeServer(RestHandler, CHAIN) as rest:
        rest.stop_answering(after=12)
        result = invoke("index", "sync", "--db", str(path), "--rest", rest.url, "--retries", "1")
        assert result.exit_code == 2
        *retried, line = result.stderr.splitlines()
        assert line.startswith("sp-scan: error: cannot reach the node") and retried and all("retry 1 of 1 in 0.5 s" in r for r in retried)
        tip = Index.open(path, readonly=True).tip()[0]
        assert f"intact up to height {tip}; sync again to resume at {tip + 1}" in line
        rest.resume_answering()
        assert invoke("index", "sync", "--db", str(path), "--rest", rest.url).exit_code == 0
    assert Index.open(path, readonly=True).tip()[0] == CHAIN.tip


def test_an_unreachable_node_on_an_existing_index_names_the_resume_height_and_says_each_retry(tmp_path, files):
    path = tmp_path / "e.db"
    assert invoke("index", "sync", "--db", str(path), "--network", "regtest", *map(str, files[:3])).exit_code == 0
    result = invoke("index", "sync", "--db", str(path), "--rest", closed_port_url(), "--retries", "2")
    assert result.exit_code == 2 and "Traceback" not in result.output
    *retried, line = result.stderr.splitlines()
    assert line.startswith("sp-scan: error: cannot reach the node") and "intact up to height 2; sync again to resume at 3" in line
    assert len(retried) == 2 and "cannot reach the node" in retried[0]
    assert retried[0].endswith("retry 1 of 2 in 0.5 s") and retried[1].endswith("retry 2 of 2 in 1 s")


def test_an_unreachable_node_creates_no_index(tmp_path):
    path = tmp_path / "u.db"
    assert_fails(invoke("index", "sync", "--db", str(path), "--rest", closed_port_url(), "--retries", "0"), "cannot reach the node")
    assert not path.exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--rest", "http://x", "BLOCK"], "not both"),
        ([], "give --rest URL, --rpc URL or BLOCK files"),
        (["--rest", "http://x", "--network", "main"], "--network goes with BLOCK files"),
        (["--rest", "http://x", "--from", "5", "--to", "4"], "--to is below --from"),
        (["--rpc-user", "u"], "go with --rpc"),
        (["a" * 64], "never taken from arguments"),
    ],
)
def test_sync_usage_errors_are_one_line_exit_2(tmp_path, args, needle):
    assert_fails(invoke("index", "sync", "--db", str(tmp_path / "x.db"), *args), needle)
    assert not (tmp_path / "x.db").exists()


def test_block_files_without_a_network_need_one(tmp_path, files):
    assert_fails(invoke("index", "sync", "--db", str(tmp_path / "x.db"), str(files[0])), "give --network N")


def test_block_files_with_a_gap_are_refused(tmp_path, files):
    assert_fails(invoke("index", "sync", "--db", str(tmp_path / "x.db"), "--network", "regtest", str(files[0]), str(files[2])), "no block file at height 1")


def test_index_scan_outside_the_indexed_heights_is_one_line_exit_2(db, key):
    assert_fails(invoke("index", "scan", "--db", str(db), "--scan-key-file", key, "--spend-pubkey", SPEND_HEX, "--to", "50"), "not all indexed")


def test_index_scan_from_above_the_tip_says_so(db, key):
    line = assert_fails(invoke("index", "scan", "--db", str(db), "--scan-key-file", key, "--spend-pubkey", SPEND_HEX, "--from", "500"))
    assert f"the first height 500 is above the index's tip {CHAIN.tip} (it holds 0..{CHAIN.tip})" in line
    assert_fails(invoke("index", "scan", "--db", str(db), "--scan-key-file", key, "--spend-pubkey", SPEND_HEX, "--from", "3", "--to", "2"), "--to is below --from")


def test_a_descriptor_of_another_network_than_the_index_is_refused(db, tmp_path):
    mainnet = descriptor.from_keys(bytes.fromhex(SCAN_HEX), bytes.fromhex(SPEND_HEX), network="main")
    (tmp_path / "main.desc").write_text(str(mainnet) + "\n")
    line = assert_fails(invoke("index", "scan", "--db", str(db), "--descriptor-file", str(tmp_path / "main.desc")), "the descriptor is for mainnet, the index for regtest")
    assert str(mainnet) not in line
    (tmp_path / "wallets.txt").write_text(f"keys scan-key-file=w.scan spend-pubkey={SPEND_HEX}\nsaver descriptor-file=main.desc\n")
    (tmp_path / "w.scan").write_text(SCAN_HEX)
    assert_fails(invoke("index", "scan", "--db", str(db), "--wallets", str(tmp_path / "wallets.txt")), "wallet saver's descriptor is for mainnet")
    testnet = descriptor.from_keys(bytes.fromhex(SCAN_HEX), bytes.fromhex(SPEND_HEX), network="test")
    (tmp_path / "test.desc").write_text(str(testnet))
    result = invoke("index", "scan", "--db", str(db), "--descriptor-file", str(tmp_path / "test.desc"), "--json")
    assert result.exit_code == 0 and json_lines(result.stdout) == expected_matches()


def test_sigterm_stops_a_following_sync_cleanly(tmp_path):
    path = tmp_path / "follow.db"
    code = "from sp_scan.cli import main; main()"
    with NodeServer(RestHandler, CHAIN) as rest:
        proc = subprocess.Popen([sys.executable, "-c", code, "index", "sync", "--db", str(path), "--rest", rest.url, "--follow", "--interval", "0.1"], stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if path.exists() and (tip := Index.open(path, readonly=True).tip()) and tip[0] == CHAIN.tip:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    assert stderr.strip() == f"sp-scan: stopped; the index is at height {CHAIN.tip} (sync again to resume)"


def test_sync_progress_shows_height_rates_and_eta():
    stream = io.StringIO()
    clock = iter([0.0, 10.0]).__next__
    show = _show_progress(Progress(0, stream, True, clock=clock))
    show(SyncStats(height=104, target=110, start=100, blocks=5, txs=2000, began=time.monotonic() - 10))
    line = stream.getvalue()
    assert "5/11 blocks (45%)" in line and "0.50 blocks/s" in line and "ETA 0:00:12" in line
    assert "height 104" in line and " tx/s" in line
