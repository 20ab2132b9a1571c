"""`sp-scan index sync --blocks-dir`: Bitcoin Core's own block files, as libbitcoinkernel wrote them, indexed in place.

Every index built from the files is compared with the index the REST sync builds of the same chain
(tests/kernelchain.py's REST stand-in serves what the kernel read back), row by row.
"""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
from pathlib import Path

import pbk
import pytest
from bitcoin.core import CBlock

import kernelchain as kc
from index_support import SYNC, committed_tip, content, wait_until
from sp_scan import native, wire
from sp_scan.errors import HeightError, MalformedDataError
from sp_scan.index import Index
from sp_scan.index.corefiles import CoreBlocks, unxor
from sp_scan.node import RestNode
from test_cli import assert_fails, invoke


def sync_dir(db: Path, blocks_dir: Path, *args: str):
    return invoke("index", "sync", "--db", str(db), "--blocks-dir", str(blocks_dir), *args)


def rest_index(chain: kc.KernelChain, path: Path) -> Path:
    with kc.rest_server(chain) as rest, Index.create(path, "regtest") as idx:
        idx.sync(RestNode(rest.url))
    return path


def records(path: Path, key8: bytes, trailer: int) -> list[tuple[int, int]]:
    """(offset, size) of each record Core wrote in a blk (trailer 0) or rev (trailer 32) file."""
    data, out, pos = path.read_bytes(), [], 0
    while pos + 8 <= len(data) and any(data[pos : pos + 8]):
        size = int.from_bytes(unxor(data[pos : pos + 8], key8, pos)[4:], "little")
        out.append((pos, size))
        pos += 8 + size + trailer
    return out


@pytest.fixture
def blocks_copy(kernel_chain, tmp_path) -> Path:
    """A copy of the sample chain's blocks folder, to damage."""
    return Path(shutil.copytree(kernel_chain.blocks_dir, tmp_path / "blocks"))


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_files_of_the_sample_chain_index_as_the_rest_sync_does(kernel_chain, kernel_index, tmp_path, jobs):
    result = sync_dir(tmp_path / "files.db", kernel_chain.blocks_dir, "--jobs", jobs)
    assert result.exit_code == 0, result.output
    assert f"index at height {kc.SAMPLE_TIP}" in result.stdout
    assert content(tmp_path / "files.db") == content(kernel_index)


def _witness_item(raw: bytes) -> bytes:
    """The first witness item of the block's first non-coinbase segwit transaction."""
    block = CBlock.deserialize(raw)
    return next(bytes(w.scriptWitness.stack[0]) for tx in block.vtx[1:] for w in tx.wit.vtxinwit if w.scriptWitness.stack)


@pytest.mark.parametrize("where", ["transaction", "witness"])
def test_a_block_whose_header_does_not_commit_to_it_is_refused_in_c_and_python(kernel_chain, where):
    for h in range(kc.SAMPLE_TIP + 1):
        raw = kernel_chain.block(h)
        assert native.block_commits(raw) and wire.block_commits(raw), h
    raw = bytearray(kernel_chain.block(104))
    at = len(raw) // 2 if where == "transaction" else raw.index(_witness_item(bytes(raw))) + 5
    raw[at] ^= 0x01
    assert not native.block_commits(bytes(raw)) and not wire.block_commits(bytes(raw))
    assert not native.block_commits(bytes(raw[:-1])) and not wire.block_commits(bytes(raw[:-1]))


def test_every_undo_record_decodes_as_the_kernel_reads_it_in_c_and_python(kernel_chain):
    source = CoreBlocks(kernel_chain.blocks_dir, "regtest")
    for h in range(1, kc.SAMPLE_TIP + 1):
        hash32 = kernel_chain.hash_at(h)
        file, offset, size = struct.unpack_from("<III", source._undo[hash32])
        undo = source._read(f"rev{file:05d}.dat", offset, size)
        assert native.spent_from_undo(undo) == wire.spent_from_undo(undo) == kernel_chain.spent(h)
        with pytest.raises(MalformedDataError):
            native.spent_from_undo(undo[:-1])
        with pytest.raises(MalformedDataError):
            wire.spent_from_undo(undo + b"\x00")


G_X = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
G_Y = "483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8"


@pytest.mark.parametrize(
    ("coin", "script"),
    [
        ("00" + "00" + "00" + "11" * 20, "76a914" + "11" * 20 + "88ac"),  # P2PKH
        ("00" + "00" + "01" + "22" * 20, "a914" + "22" * 20 + "87"),  # P2SH
        ("00" + "00" + "03" + G_X, "2103" + G_X + "ac"),
        ("00" + "00" + "04" + G_X, "4104" + G_X + G_Y + "ac"),  # even Y
        ("00" + "00" + "05" + "05" * 32, ""),  # an x off the curve: Core leaves the script empty
        ("00" + "00" + "06", ""),  # an empty script
        ("00" + "00" + "cd2a" + "00" * 10020, "6a"),  # a script over MAX_SCRIPT_SIZE reads as OP_RETURN
    ],
    ids=["p2pkh", "p2sh", "p2pk-compressed", "p2pk-uncompressed", "p2pk-off-curve", "empty", "oversized"],
)
def test_compressed_scripts_decode_as_cores_compressor_writes_them(coin, script):
    undo = bytes.fromhex("0101" + coin)  # one tx, one coin of height 0 and amount 0
    expected = bytes.fromhex("020001") + b"\x00" * 8 + wire.compact_size(len(script) // 2) + bytes.fromhex(script)
    assert native.spent_from_undo(undo) == wire.spent_from_undo(undo) == expected


@pytest.mark.parametrize(
    ("varints", "amount"),
    [("00", 0), ("01", 1), ("09", 100_000_000), ("0a", 1_000_000_000), ("8005", 1_500), ("8980dd40", 21_000_000 * 100_000_000), ("a0c8adb1d183ff01", None)],
)
def test_amounts_and_heights_decode_as_cores_varint_and_decompress_amount(varints, amount):
    undo = bytes.fromhex("0101" + "8101" + "00" + varints + "06")  # code 257: height 128, a coinbase; a dummy version follows
    if amount is None:  # above MAX_MONEY
        for decode in (native.spent_from_undo, wire.spent_from_undo):
            with pytest.raises(MalformedDataError):
                decode(undo)
        return
    assert native.spent_from_undo(undo) == wire.spent_from_undo(undo) == bytes.fromhex("020001") + amount.to_bytes(8, "little") + b"\x00"


def test_a_reorg_leaves_stale_blocks_in_the_files_and_the_index_follows_it(kernel_copy, tmp_path):
    db = tmp_path / "files.db"
    assert sync_dir(db, kernel_copy.blocks_dir).exit_code == 0
    reorg = kc.make_reorg(kernel_copy)
    result = sync_dir(db, kernel_copy.blocks_dir, "--jobs", "2")
    assert result.exit_code == 0, result.output
    assert f"1 reorg(s) rolled back {len(reorg.old_hashes)} block(s)" in result.stdout
    assert sync_dir(tmp_path / "fresh.db", kernel_copy.blocks_dir).exit_code == 0
    rest = rest_index(kernel_copy, tmp_path / "rest.db")
    assert content(db) == content(rest) == content(tmp_path / "fresh.db")
    stale = CoreBlocks(kernel_copy.blocks_dir, "regtest")
    assert all(h in stale._headers and h in stale._undo for h in reorg.old_hashes)  # stored and once connected, then skipped


def test_blocks_stored_out_of_order_as_during_ibd(kernel_chain, kernel_index, tmp_path):
    """Headers first, then the blocks in shuffled order: Core stores each as it comes and connects them
    (writing their undo data) once their parents are there."""
    (tmp_path / "ibd").mkdir()
    chain = kc.KernelChain(tmp_path / "ibd")
    try:
        raws = [kernel_chain.block(h) for h in range(1, kc.SAMPLE_TIP + 1)]
        for raw in raws:
            chain._chainman.process_block_header(pbk.BlockHeader(raw[:80]))
        order = list(range(len(raws)))
        random.Random(31).shuffle(order)
        held = order.index(60 - 1)
        for i in order[:held]:  # everything before block 60 comes first, in shuffled order; 60 is held back
            chain._chainman.process_block(pbk.Block(raws[i]))
        connected = chain.tip_height
        assert connected < 60 <= max(order[:held]) + 1, "the shuffle should leave blocks stored ahead of the tip"
        result = sync_dir(tmp_path / "part.db", chain.blocks_dir)
        assert result.exit_code == 0, result.output
        assert committed_tip(tmp_path / "part.db") == connected  # the blocks ahead have no undo data yet
        for i in order[held:]:
            chain._chainman.process_block(pbk.Block(raws[i]))
        assert chain.tip_height == kc.SAMPLE_TIP
        result = sync_dir(tmp_path / "part.db", chain.blocks_dir, "--jobs", "2")
        assert result.exit_code == 0, result.output
    finally:
        chain.close()
    assert content(tmp_path / "part.db") == content(kernel_index)


def _damage(blocks: Path, how: str, chain: kc.KernelChain) -> str:
    """Damage the copy as `how` says; returns the line the sync must fail with."""
    key8 = (blocks / "xor.dat").read_bytes()
    blk, rev = blocks / "blk00000.dat", blocks / "rev00000.dat"
    if how == "truncated last record":
        offset, size = records(blk, key8, 0)[-1]
        with open(blk, "r+b") as f:
            f.truncate(offset + 8 + size // 2)
        return "blk00000.dat is truncated: the record at offset"
    if how == "damaged undo record":
        offset, size = records(rev, key8, 32)[50]
        data = bytearray(rev.read_bytes())
        data[offset + 8 + size // 2] ^= 0x01
        rev.write_bytes(data)
        return f"rev00000.dat is damaged: the record at offset {offset:,} matches no block of blk00000.dat"
    if how == "damaged record start":
        offset, _ = records(blk, key8, 0)[40]
        data = bytearray(blk.read_bytes())
        data[offset] ^= 0xFF
        blk.write_bytes(data)
        return f"blk00000.dat is damaged: no record starts at offset {offset:,}"
    if how == "damaged block witness":
        raw = chain.block(104)
        data = bytearray(blk.read_bytes())
        offset = next(o for o, n in records(blk, key8, 0) if unxor(bytes(data[o + 8 : o + 8 + n]), key8, o + 8) == raw)
        data[offset + 8 + raw.index(_witness_item(raw)) + 5] ^= 0x01  # a signature byte: the txids stay, the wtxid changes
        blk.write_bytes(data)
        return f"blk00000.dat is damaged: the record at offset {offset:,} holds block {wire.sha256d(raw[:80])[::-1].hex()}, whose transactions its header does not commit to"
    if how == "missing rev file":
        rev.unlink()
        return "rev00000.dat is missing"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated last record", "damaged undo record", "damaged record start", "missing rev file", "wrong network"])
def test_bad_files_are_one_line_exit_2_and_the_index_is_unchanged(kernel_chain, blocks_copy, tmp_path, how):
    db = tmp_path / "s.db"
    assert sync_dir(db, kernel_chain.blocks_dir, "--to", "20").exit_code == 0
    before = content(db)
    if how == "wrong network":
        assert_fails(sync_dir(db, blocks_copy, "--network", "main"), "blk00000.dat holds regtest records, not main's")
    else:
        needle = _damage(blocks_copy, how, kernel_chain)
        assert_fails(sync_dir(db, blocks_copy), needle)
    assert content(db) == before


def test_a_damaged_block_stops_the_sync_below_it_with_one_line(kernel_chain, blocks_copy, tmp_path):
    """Damage inside a block is seen when the block is read (its header no longer commits to it): the
    blocks below it are indexed as from intact files."""
    db, intact = tmp_path / "s.db", tmp_path / "intact.db"
    assert sync_dir(intact, kernel_chain.blocks_dir, "--to", "103").exit_code == 0
    needle = _damage(blocks_copy, "damaged block witness", kernel_chain)
    assert_fails(sync_dir(db, blocks_copy, "--jobs", "2"), needle)
    assert content(db) == content(intact)


def test_the_network_comes_from_the_files_magic(kernel_chain, tmp_path):
    result = sync_dir(tmp_path / "n.db", kernel_chain.blocks_dir, "--to", "3")
    assert result.exit_code == 0, result.output
    with Index.open(tmp_path / "n.db", readonly=True) as idx:
        assert idx.network == "regtest"


def test_a_running_nodes_half_written_block_is_left_for_follow_to_pick_up(kernel_chain, kernel_index, blocks_copy, tmp_path):
    """The newest block's record is still zeros at its end, its undo record not yet there: the sync stops
    below it; a following sync indexes it once the node has written it."""
    key8 = (blocks_copy / "xor.dat").read_bytes()
    blk, rev = blocks_copy / "blk00000.dat", blocks_copy / "rev00000.dat"
    whole_blk, whole_rev = blk.read_bytes(), rev.read_bytes()
    (b_off, b_size), (r_off, _) = records(blk, key8, 0)[-1], records(rev, key8, 32)[-1]
    blk.write_bytes(whole_blk[: b_off + 8 + b_size // 2] + bytes(len(whole_blk) - b_off - 8 - b_size // 2))
    rev.write_bytes(whole_rev[:r_off] + bytes(len(whole_rev) - r_off))
    db = tmp_path / "live.db"
    result = sync_dir(db, blocks_copy)
    assert result.exit_code == 0, result.output
    assert committed_tip(db) == kc.SAMPLE_TIP - 1
    proc = subprocess.Popen([*SYNC, "--db", str(db), "--blocks-dir", str(blocks_copy), "--follow", "--interval", "0.05"], stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: committed_tip(db) == kc.SAMPLE_TIP - 1, proc, "the follower started")
        blk.write_bytes(whole_blk)
        rev.write_bytes(whole_rev)
        wait_until(lambda: committed_tip(db) == kc.SAMPLE_TIP, proc, "the follower indexed the block the node finished writing")
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert content(db) == content(kernel_index)


@pytest.mark.parametrize("offset", [0, 3, 8, 13])
def test_unxor_in_c_and_python_agree_at_any_file_offset(offset):
    rng = random.Random(offset)
    key8 = rng.randbytes(8)
    for n in (0, 1, 7, 8, 9, 1001):
        data = rng.randbytes(n)
        assert native.unxor(data, key8, offset) == wire.unxor(data, key8, offset)
        assert wire.unxor(wire.unxor(data, key8, offset), key8, offset) == data
    with pytest.raises(MalformedDataError):
        native.unxor(b"x", b"short", 0)
    for byte in range(256):  # CPython caches one-byte bytes objects: the result must be a new one
        assert native.unxor(bytes([byte]), key8, offset) == bytes([byte ^ key8[offset % 8]])
        assert bytes([byte])[0] == byte


def test_the_source_lets_go_of_headers_as_the_sync_goes_on(kernel_chain, kernel_index, tmp_path, monkeypatch):
    monkeypatch.setattr(CoreBlocks, "REORG_DEPTH", 5)
    source = CoreBlocks(kernel_chain.blocks_dir, "regtest", start=30)
    assert min(source._height.values()) == source.floor == 25  # blocks below were skipped as the files were read
    with pytest.raises(HeightError, match="below height 25, where this source was opened"):
        source.block_hash(24)
    db = tmp_path / "bounded.db"
    with Index.create(db, "regtest") as idx:
        idx.sync(source, stop=40)  # from the source's start
        idx.sync(source)  # resumes at 41, as a second run would
    assert len(source._headers) <= 10 * 5 + 1 < kc.SAMPLE_TIP - 30  # never the whole chain
    assert [source.block_hash(h) for h in (25, 30, kc.SAMPLE_TIP)] == [kernel_chain.hash_at(h)[::-1].hex() for h in (25, 30, kc.SAMPLE_TIP)]
    rows = content(db)
    expected = content(kernel_index)
    assert rows["blocks"] == [r for r in expected["blocks"] if r[0] >= 30]


def pruned_copy(chain: kc.KernelChain, directory: Path, first: int) -> Path:
    """The chain's folder as a pruned node holds it: Core's records of blocks `first`.. (byte for byte, the
    xor key applied at their new offsets) in blk00001.dat and rev00001.dat; blk00000/rev00000 deleted."""
    src = chain.blocks_dir
    key8 = (src / "xor.dat").read_bytes()
    directory.mkdir()
    (directory / "xor.dat").write_bytes(key8)
    kept = {chain.hash_at(h) for h in range(first, kc.SAMPLE_TIP + 1)}
    parents = {chain.hash_at(h - 1) for h in range(first, kc.SAMPLE_TIP + 1)}
    for kind, trailer in (("blk", 0), ("rev", 32)):
        data = (src / f"{kind}00000.dat").read_bytes()
        out = b""
        for offset, size in records(src / f"{kind}00000.dat", key8, trailer):
            record = unxor(data[offset : offset + 8 + size + trailer], key8, offset)
            body = record[8 : 8 + size]
            if wire.sha256d(body[:80]) in kept if kind == "blk" else any(wire.sha256d(p + body) == record[-32:] for p in parents):
                out += record
        (directory / f"{kind}00001.dat").write_bytes(unxor(out, key8, 0) + bytes(4096))
    return directory


def test_a_pruned_nodes_window_is_indexed_from_its_first_block_and_the_rest_named(kernel_chain, kernel_index, tmp_path):
    blocks = pruned_copy(kernel_chain, tmp_path / "pruned", 60)
    db = tmp_path / "p.db"
    result = sync_dir(db, blocks)
    assert result.exit_code == 0, result.output
    assert f"sp-scan: blocks 0..59 are pruned from {blocks}; indexing from height 60" in result.stderr
    assert content(db)["blocks"] == [r for r in content(kernel_index)["blocks"] if r[0] >= 60]
    behind = tmp_path / "behind.db"
    assert sync_dir(behind, kernel_chain.blocks_dir, "--to", "40").exit_code == 0
    before = content(behind)
    assert_fails(sync_dir(behind, blocks), f"blocks 41..59 are pruned from {blocks} (its files start at height 60)")
    assert content(behind) == before


def test_files_without_xor_dat_as_core_before_28_wrote_them(kernel_chain, kernel_index, tmp_path):
    """No key: the last block's final bytes (its last tx's locktime 0) are zeros on disk, and it is still read."""
    plain = tmp_path / "plain"
    plain.mkdir()
    key8 = (kernel_chain.blocks_dir / "xor.dat").read_bytes()
    for name, trailer in (("blk00000.dat", 0), ("rev00000.dat", 32)):
        data = (kernel_chain.blocks_dir / name).read_bytes()
        offset, size = records(kernel_chain.blocks_dir / name, key8, trailer)[-1]
        end = offset + 8 + size + trailer  # what Core wrote; its preallocated zeros after stay zeros
        (plain / name).write_bytes(unxor(data[:end], key8, 0) + data[end:])
    last = kernel_chain.block(kc.SAMPLE_TIP)
    assert last.endswith(bytes(4)) and any(key8)
    result = sync_dir(tmp_path / "plain.db", plain)
    assert result.exit_code == 0, result.output
    assert content(tmp_path / "plain.db") == content(kernel_index)
