"""`sp-scan index sync|scan|info`, `sp-scan --version` and table headers: output shapes, exit codes, one-line errors."""

from __future__ import annotations

import io
import json
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request

import pytest

from cli_support import Chain, Misreported, NodeServer, RestHandler, RpcHandler, StaleHeights, closed_port_url, spending_chain
from index_support import AS_A_USER, SCAN_HEX, SPEND_HEX, SYNC, WALLET, committed_tip, content, ended, living_children, wait_until, write_files
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


@pytest.mark.parametrize(("start", "said"), [([], "709632 on mainnet, 0 on other networks"), (["--from", "5"], "5")])
def test_an_unreachable_node_creates_no_index_and_names_the_height_a_new_sync_starts_at(tmp_path, start, said):
    path = tmp_path / "u.db"
    line = assert_fails(invoke("index", "sync", "--db", str(path), "--rest", closed_port_url(), "--retries", "0", *start), "cannot reach the node")
    assert line.endswith(f"(no index was created; sync again to start at height {said})")
    assert not path.exists()


def test_a_missing_rpc_cookie_file_is_one_line_at_once_not_retried(tmp_path):
    cookie = tmp_path / "no-node" / ".cookie"
    result = invoke("index", "sync", "--db", str(tmp_path / "c.db"), "--rpc", closed_port_url(), "--rpc-cookie", str(cookie), "--retries", "3")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"sp-scan: error: cannot read the RPC cookie file {cookie}: No such file or directory"
        " (no index was created; sync again to start at height 709632 on mainnet, 0 on other networks)"
    ]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--rest", "http://x", "BLOCK"], "not both"),
        ([], "give --rest URL, --rpc URL, --blocks-dir DIR or BLOCK files"),
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
    with NodeServer(RestHandler, CHAIN) as rest:
        proc = subprocess.Popen([*SYNC, "--db", str(path), "--rest", rest.url, "--follow", "--interval", "0.1"], stderr=subprocess.PIPE, text=True)
        wait_until(lambda: committed_tip(path) == CHAIN.tip, proc, "the sync reached the node's tip")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
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


# ---- a source behind the index never shrinks it ----


def node_args(kind: str, server: NodeServer) -> list[str]:
    return ["--rest", server.url] if kind == "rest" else ["--rpc", server.url, "--rpc-user", "u:p"]


@pytest.mark.parametrize("kind", ["rest", "rpc"])
@pytest.mark.parametrize(
    "node_chain",
    [Chain(blocks=CHAIN.blocks[:2]), spending_chain(4, CHAIN, fork_height=3, salt=5), Misreported(CHAIN, -5)],
    ids=["a node at height 1 under an index from 2", "a shorter branch", "blocks -5"],
)
def test_sync_from_a_node_behind_the_index_exits_2_and_keeps_every_block(tmp_path, files, kind, node_chain):
    path = tmp_path / "b.db"
    assert invoke("index", "sync", "--db", str(path), "--network", "regtest", "--from", "2", *map(str, files[2:])).exit_code == 0
    before = content(path)
    handler = RestHandler if kind == "rest" else RpcHandler
    with NodeServer(handler, node_chain, credentials="u:p") as server:
        line = assert_fails(invoke("index", "sync", "--db", str(path), *node_args(kind, server), "--retries", "0"), f"intact up to height {CHAIN.tip}")
    assert f"below the index's tip {CHAIN.tip}" in line or "is -5, not a height" in line
    assert content(path) == before


def test_block_files_below_the_index_tip_exit_2_and_keep_every_block(tmp_path, files, db):
    path = tmp_path / "f.db"
    path.write_bytes(db.read_bytes())
    line = assert_fails(invoke("index", "sync", "--db", str(path), "--network", "regtest", *map(str, files[:3])), "never roll it back")
    assert f"the block files end at height 2, below the index's tip {CHAIN.tip}" in line
    assert content(path) == content(db)


@pytest.mark.parametrize("kind", ["rest", "rpc"])
def test_sync_follow_waits_for_a_node_behind_saying_so_then_goes_on_when_it_catches_up(tmp_path, db, kind):
    path = tmp_path / "w.db"
    path.write_bytes(db.read_bytes())
    longer = spending_chain(len(CHAIN.blocks) + 2, CHAIN, fork_height=len(CHAIN.blocks))
    handler = RestHandler if kind == "rest" else RpcHandler
    with NodeServer(handler, Chain(blocks=CHAIN.blocks[:3]), credentials="u:p") as server:
        args = [*SYNC, "--db", str(path), *node_args(kind, server), "--follow", "--interval", "0.05"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stderr.readline()  # the event: the sync says it waits
            assert line.strip() == f"sp-scan: the node's chain ends at height 2, below the index's tip {CHAIN.tip}; waiting for it"
            assert committed_tip(path) == CHAIN.tip
            server.httpd.chain = longer
            wait_until(lambda: committed_tip(path) == longer.tip, proc, "the sync reached the node's new tip")
        finally:
            proc.send_signal(signal.SIGTERM)
            _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest
    assert rest.strip() == f"sp-scan: stopped; the index is at height {longer.tip} (sync again to resume)"


@pytest.mark.parametrize("kind", ["rest", "rpc"])
def test_a_node_whose_blocks_do_not_link_exits_2_naming_both_hashes(tmp_path, kind):
    branch = spending_chain(len(CHAIN.blocks), CHAIN, fork_height=3, salt=4)
    handler = RestHandler if kind == "rest" else RpcHandler
    with NodeServer(handler, StaleHeights(CHAIN, branch, {4}), credentials="u:p") as server:
        line = assert_fails(invoke("index", "sync", "--db", str(tmp_path / "l.db"), *node_args(kind, server), "--retries", "1"), "seen 2 times")
    assert f"block 4 ({branch.blocks[4].hash_hex}) names {branch.blocks[3].hash_hex} as its parent, but its block 3 is {CHAIN.blocks[3].hash_hex}" in line
    assert committed_tip(tmp_path / "l.db") == 3


# ---- every stop ends within seconds, whatever the node does ----


def hanging_sync(path, server: NodeServer, kind: str, hold_at: int, *extra: str, jobs: int = 2) -> subprocess.Popen:
    """`index sync --jobs N` running until the node hangs at `hold_at`: the index is then at hold_at - 1."""
    server.hold(hold_at)
    proc = subprocess.Popen([*SYNC, "--db", str(path), *node_args(kind, server), "--jobs", str(jobs), *extra], stderr=subprocess.PIPE, text=True)
    wait_until(lambda: committed_tip(path) == hold_at - 1 and server.held.is_set(), proc, "the sync waiting on the hanging node")
    assert len(living_children(proc.pid)) == (jobs if jobs > 1 else 0)  # the workers, one of them stuck in the node's request
    return proc


@pytest.mark.parametrize("jobs", [1, 2])  # 1: the block ahead is fetched in a thread, stuck in the node's request
@pytest.mark.parametrize("kind", ["rest", "rpc"])
@pytest.mark.parametrize(("signum", "code", "said"), [(signal.SIGTERM, 0, "stopped"), (signal.SIGINT, 130, "interrupted")])
def test_a_signal_stops_a_sync_while_the_node_hangs(tmp_path, kind, signum, code, said, jobs):
    path = tmp_path / "h.db"
    handler = RestHandler if kind == "rest" else RpcHandler
    with NodeServer(handler, CHAIN, credentials="u:p") as server:
        proc = hanging_sync(path, server, kind, 3, jobs=jobs)
        workers = living_children(proc.pid)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)  # a failure bound: the node hangs until the server stops
        assert server.held.is_set() and not server.httpd.released.is_set()  # it ended while the node still hung
    assert proc.returncode == code, stderr
    assert stderr.strip() == f"sp-scan: {said}; the index is at height 2 (sync again to resume)"
    wait_until(lambda: all(ended(w) for w in workers), what="the workers ended")
    assert committed_tip(path) == 2


def test_kill_9_of_a_sync_with_jobs_2_ends_its_workers_while_the_node_still_hangs(tmp_path):
    path = tmp_path / "k.db"
    with NodeServer(RestHandler, CHAIN) as server:
        proc = hanging_sync(path, server, "rest", 3)
        workers = living_children(proc.pid)
        proc.kill()
        proc.wait()
        proc.stderr.close()  # not read to its end: a worker that outlived the sync would hold it
        wait_until(lambda: all(ended(w) for w in workers), what="the workers ended", bound=60)
        assert not server.httpd.released.is_set()  # they ended while one of them still waited on the node
    assert committed_tip(path) == 2


def test_serve_with_its_sync_stuck_on_a_hanging_node_stops_at_sigterm(tmp_path):
    path = tmp_path / "served.db"
    with NodeServer(RestHandler, CHAIN) as server:
        server.hold(3)
        cmd = [sys.executable, "-m", "sp_scan.cli", "serve", "--db", str(path), "--port", "0", "--rest", server.url, "--interval", "0.1"]
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: committed_tip(path) == 2 and server.held.is_set(), proc, "the sync beside the server waiting on the node")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        assert not server.httpd.released.is_set()  # it ended while the node still hung
    assert proc.returncode == 0, stderr
    assert "sp-scan: stopped; the index is at height 2 (sync again to resume)" in stderr and "Traceback" not in stderr


def test_a_second_signal_while_the_first_is_handled_exits_at_once_with_143(tmp_path):
    path = tmp_path / "twice.db"
    with NodeServer(RestHandler, CHAIN) as server:
        proc = hanging_sync(path, server, "rest", 4, "--follow")
        workers = living_children(proc.pid)
        before = content(path)
        proc.send_signal(signal.SIGSTOP)  # both signals are pending when it runs again: SIGINT is handled first
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGCONT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1] == "sp-scan: stopped at once; the index is as of its last committed block (sync again to resume)"
    assert "Traceback" not in stderr
    wait_until(lambda: all(ended(w) for w in workers), what="the workers ended")
    assert content(path) == before and committed_tip(path) == 3


def test_ctrl_c_stops_a_block_scan_with_jobs_2_while_the_node_hangs(tmp_path):
    printed = [r["txid"] for r in CHAIN.expected_tweaks(0, 1)]
    assert printed
    with NodeServer(RestHandler, CHAIN) as server:
        server.hold(2)
        cmd = [sys.executable, "-c", "from sp_scan.cli import main; main()", "tweaks", "--rest", server.url, "--from", "0", "--jobs", "2", "--json"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = [json.loads(proc.stdout.readline())["txid"] for _ in printed]  # the event: blocks 0 and 1 are out
        wait_until(server.held.is_set, proc, "a request for the held block")
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        assert not server.httpd.released.is_set()
    assert proc.returncode == 130, stderr
    assert stderr.strip() == "sp-scan: interrupted; resume with --from 2"
    assert first == printed and stdout == ""


# ---- an index in a read-only directory ----


@pytest.fixture
def read_only(tmp_path, db):
    """A copy of the index in a directory nobody may write (mode 0555), restored for cleanup."""
    directory = tmp_path / "ro"
    directory.mkdir()
    (directory / "chain.db").write_bytes(db.read_bytes())
    directory.chmod(0o555)
    yield directory / "chain.db"
    directory.chmod(0o755)


def as_a_user(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*AS_A_USER, *args], capture_output=True, text=True, timeout=120)


def test_index_info_and_scan_read_an_index_in_a_read_only_directory(read_only, db, key):
    probe = as_a_user("index", "sync", "--db", str(read_only.parent / "new.db"), "--network", "regtest", str(read_only))
    assert probe.returncode == 2 and not (read_only.parent / "new.db").exists(), probe.stderr  # the directory is read-only
    info = as_a_user("index", "info", "--db", str(read_only), "--json")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout) == {**json.loads(invoke("index", "info", "--db", str(db), "--json").stdout), "bytes": json.loads(info.stdout)["bytes"]}
    scan = as_a_user("index", "scan", "--db", str(read_only), "--scan-key-file", key, "--spend-pubkey", SPEND_HEX, "--json")
    assert scan.returncode == 0, scan.stderr
    assert json_lines(scan.stdout) == expected_matches()
    assert sorted(p.name for p in read_only.parent.iterdir()) == ["chain.db"]  # no -wal or -shm could be made, none was needed


def test_serve_serves_an_index_in_a_read_only_directory(read_only):
    proc = subprocess.Popen([*AS_A_USER, "serve", "--db", str(read_only), "--port", "0"], stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # the event: serving
        url = line.split()[2] if line.startswith("sp-scan serve: http") else pytest.fail(line + proc.stderr.read())
        with urllib.request.urlopen(f"{url}/block-height", timeout=30) as reply:
            assert json.loads(reply.read()) == {"block_height": CHAIN.tip}
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 0, rest


def test_a_write_ahead_log_without_its_shm_in_a_read_only_directory_is_refused_saying_why(tmp_path, db):
    directory = tmp_path / "ro"
    directory.mkdir()
    (directory / "chain.db").write_bytes(db.read_bytes())
    (directory / "chain.db-wal").write_bytes(b"\x37\x7f\x06\x82" + bytes(28))  # a log a killed sync left
    directory.chmod(0o555)
    try:
        result = as_a_user("index", "info", "--db", str(directory / "chain.db"))
    finally:
        directory.chmod(0o755)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "the directory is not writable and chain.db-wal (blocks not yet in the file) is there without chain.db-shm" in result.stderr


def test_sync_in_a_read_only_directory_says_the_index_can_be_read_there_not_synced(read_only, files):
    result = as_a_user("index", "sync", "--db", str(read_only), "--network", "regtest", *map(str, files))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "read-only: the index can be read there, not synced" in result.stderr
