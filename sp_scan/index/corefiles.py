"""Bitcoin Core's block files as a sync source: a node's `blocks/` folder read in place, read-only.

`blkNNNNN.dat` holds records of network magic (4 bytes), size (u32 LE) and a block; `revNNNNN.dat`
holds, for blocks of the blk file with the same number, records of magic, size, the block's undo data
(a CBlockUndo: each input's spent coin, compressed) and a 32-byte checksum SHA256d(parent hash ‖ undo
data). Core 28+ XORs both with the 8-byte key of `xor.dat` by file offset (absent or zeros before).

Without Core's block index (LevelDB), the best chain is rebuilt from the headers in the files: its
tip is the block of most work that has undo data (Core writes it when it connects a block, in chain
order, so stale blocks never connected, blocks stored ahead of the tip during IBD and a block still
being written are left out; stale blocks once connected have less work). An undo record is matched
to its block by its checksum (the parent's hash) and, between siblings, by the shape of its spends;
a rev file is matched when one of its blocks is first asked for, in whichever process asks. Each
block read is checked against its header (merkle root, witness commitment): damage is an error,
never an index of wrong data.

A running node's files are only ever appended to: each `tip_height()` reads what was added since
(the newest records of a file may be partly written: a block counts once its undo record is whole),
so a following sync picks up new blocks and reorgs. Core preallocates its files with zeros, so data
that ends before a record does is a truncated file, refused like a damaged record or another network's
magic. A pruned node's files start above genesis: heights are then taken from the coinbase (BIP34).
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

from .. import backend, wire
from ..errors import HeightError, MalformedDataError, SPError

MAGIC = {
    "main": bytes.fromhex("f9beb4d9"),
    "test": bytes.fromhex("0b110907"),
    "testnet4": bytes.fromhex("1c163f28"),
    "signet": bytes.fromhex("0a03cf40"),
    "regtest": bytes.fromhex("fabfb5da"),
}
"""Each network's message start, which begins every record (signet: the default signet's)."""

MAX_RECORD = 4_000_000
"""The largest block (MAX_BLOCK_SERIALIZED_SIZE); undo data is smaller still."""

BIP34_HEIGHT = {"main": 227_931, "test": 21_111, "testnet4": 1, "signet": 1, "regtest": 1}
"""Where each network's coinbases start stating their height: above it, blocks far below `start` are
skipped as the files are first read (their coinbase says their height), so they never take memory."""
_COINBASE_PREFIX = 512
"""Bytes of a block after its header read with it: enough for nearly every coinbase (else the block is kept)."""

_NULL32 = bytes(32)
_GENESIS_SPENT = wire.serialize_spent([[]])
_FILE = re.compile(r"(blk|rev)(\d{5})\.dat")


def network_of(blocks_dir: str | os.PathLike) -> str:
    """The network whose magic begins the first record of the lowest blk file in `blocks_dir`.

    Raises:
        MalformedDataError: no blk file, or a first record of no network.
        OSError: the folder or the file cannot be read.
    """
    path = Path(blocks_dir)
    files = sorted(p for p in os.listdir(path) if _FILE.fullmatch(p) and p.startswith("blk"))
    if not files:
        raise MalformedDataError(f"{path} holds no blk*.dat file (give Core's blocks/ folder)")
    xor = path / "xor.dat"
    key8 = xor.read_bytes()[:8] if xor.exists() else bytes(8)
    with open(path / files[0], "rb") as f:
        magic = unxor(f.read(4), key8, 0)
    network = next((n for n, m in MAGIC.items() if m == magic), None)
    if network is None:
        raise MalformedDataError(f"{path / files[0]} does not start with a record of any network (bytes {magic.hex()})")
    return network


def unxor(data: bytes, key8: bytes, offset: int) -> bytes:
    """`data` read at `offset` of a file obfuscated with `key8` (Core's xor.dat), in the clear."""
    return backend.unxor(data, key8, offset) if any(key8) else data


def block_work(bits: int) -> int:
    """The expected number of hashes of a block with compact target `bits` (Core's GetBlockProof)."""
    target = (bits & 0x7FFFFF) << 8 * ((bits >> 24) - 3) if bits >> 24 >= 3 else (bits & 0x7FFFFF) >> 8 * (3 - (bits >> 24))
    return (1 << 256) // (target + 1) if target else 0


class CoreBlocks:
    """A sync source over a Bitcoin Core `blocks/` directory (see the module doc); picklable to workers.

    Memory: the headers of the blocks from REORG_DEPTH below the highest height asked for (or `start`),
    the best chain's hashes (32 bytes a height) and the undo matches of UNDO_FILES rev files; the
    headers below are read once, then let go as the sync goes on.

    Args:
        blocks_dir: Core's blocks folder (holding blk*.dat, rev*.dat and, from Core 28, xor.dat).
        network: the network the node runs (its records' magic must say so).
        start: the first height a sync will fetch.

    Raises:
        MalformedDataError: a truncated or damaged record, another network's magic, a missing rev file,
            undo data that matches no block.
        OSError: the folder or a file cannot be read.
    """

    REORG_DEPTH = 1000
    """Headers kept below the tip (and below `start`): the deepest reorg followed."""
    UNDO_FILES = 4
    """Rev files whose matches are kept (a sync reads the files in height order)."""

    def __init__(self, blocks_dir: str | os.PathLike, network: str, start: int = 0) -> None:
        self.dir = Path(blocks_dir)
        self.network, self.start = network, start
        if not self.dir.is_dir():
            raise MalformedDataError(f"{self.dir} is not a directory")
        xor = self.dir / "xor.dat"
        self.key8 = xor.read_bytes() if xor.exists() else bytes(8)
        if len(self.key8) != 8:
            raise MalformedDataError(f"{xor} holds {len(self.key8)} bytes, not an 8-byte key")
        self._magic = MAGIC[network]
        self._headers: dict[bytes, bytes] = {}  # hash32 -> prev32 ‖ bits, file, offset, size (u32 LE each)
        self._height: dict[bytes, int] = {}
        self._work: dict[bytes, int] = {}
        self._scanned: dict[str, int] = {}  # blk file name -> offset read up to (whole records)
        self._undo: dict[bytes, bytes] = {}  # hash32 -> each candidate undo record's file, offset, size (u32 LE)
        self._matched: dict[int, list[bytes]] = {}  # rev file -> the blocks it gave undo data, oldest match first
        self._best = b""  # the best chain's hash32 of each height from floor
        self.floor = 0  # the lowest height of the best chain this source knows
        self._forgot = 0  # headers below this height are let go (and, above BIP34, never read again)
        if start - self.REORG_DEPTH > BIP34_HEIGHT[network]:
            self._forgot = start - self.REORG_DEPTH
        self.refresh()
        self._forget_below(start - self.REORG_DEPTH)

    # ---- the Source interface ----

    def chain(self) -> str:
        return self.network

    def tip_height(self) -> int:
        """Read what the node appended since, then the best chain's tip height.

        Raises:
            HeightError: the files hold no block with its undo data.
        """
        self.refresh()
        if not self._best:
            raise HeightError(f"{self.dir} holds no block with its undo data")
        return self._tip()

    def _tip(self) -> int:
        return self.floor + len(self._best) // 32 - 1

    def block_hash(self, height: int) -> str:
        """The display hash of the best chain's block at `height` (the files are read again once when it is above the tip).

        Raises:
            HeightError: the height is not in the files (above the tip, or below a pruned node's window).
        """
        if not self.floor <= height <= self._tip():
            self.refresh()
        if not self.floor <= height <= self._tip():
            if self._best and height < self.floor == self._forgot:
                raise HeightError(f"block {height} is below height {self._forgot}, where this source was opened (its start {self.start})")
            if self._best and height < self.floor:
                raise HeightError(f"block {height} is not in {self.dir}: the node pruned it (its files start at height {self.floor})")
            raise HeightError(f"block {height} is not in {self.dir} (the best chain there ends at height {self._tip()})")
        if height - self.REORG_DEPTH > self._forgot + 8 * self.REORG_DEPTH:  # now and then: it walks every header kept
            self._forget_below(height - self.REORG_DEPTH)
        at = 32 * (height - self.floor)
        return self._best[at : at + 32][::-1].hex()

    def block(self, hash_hex: str) -> tuple[bytes, bytes]:
        """(block bytes, spent outputs in the REST form) of the block `hash_hex` (display hex).

        Raises:
            HeightError: no such block in the files.
            MalformedDataError: its record (its transactions do not match its header) or its undo data is
                damaged, or no undo data fits it.
        """
        hash32 = bytes.fromhex(hash_hex)[::-1]
        if hash32 not in self._headers:
            self.refresh()
        if hash32 not in self._headers:
            if hash32 in {self._best[i : i + 32] for i in range(0, 32 * max(0, self._forgot - self.floor), 32)}:
                raise HeightError(f"block {hash_hex} is below height {self._forgot}, where this source was opened (its start {self.start})")
            raise HeightError(f"block {hash_hex} is not in {self.dir}")
        prev32, file, offset, size = self._place(hash32)
        raw = self._read(f"blk{file:05d}.dat", offset, size)
        if not backend.block_commits(raw):
            raise MalformedDataError(
                f"blk{file:05d}.dat is damaged: the record at offset {offset - 8:,} holds block {hash_hex}, "
                "whose transactions its header does not commit to"
            )
        if hash32 not in self._undo:
            self._match_undo(file)
        candidates = list(struct.iter_unpack("<III", self._undo.get(hash32, b"")))
        if prev32 == _NULL32 and not candidates:
            return raw, _GENESIS_SPENT  # Core writes no undo data for the genesis block
        fits = {self._spent(*loc) for loc in candidates}
        if len(fits) > 1:
            fits = {spent for spent in fits if _fits(raw, spent)}
        if len(fits) != 1:
            what = "no undo data" if not candidates else "no undo data that fits it" if not fits else "two different undo records that fit it"
            raise MalformedDataError(f"rev{file:05d}.dat holds {what} for block {hash_hex} of blk{file:05d}.dat")
        return raw, fits.pop()

    # ---- reading ----

    def _place(self, hash32: bytes) -> tuple[bytes, int, int, int]:
        """(prev32, file, offset, size) of a known block."""
        packed = self._headers[hash32]
        return packed[:32], *struct.unpack_from("<III", packed, 36)

    def _read(self, name: str, offset: int, size: int) -> bytes:
        with open(self.dir / name, "rb") as f:
            f.seek(offset)
            data = f.read(size)
        if len(data) != size:
            raise MalformedDataError(f"{name} ends at {offset + len(data):,}, inside the record at {offset - 8:,} ({size:,} bytes)")
        return unxor(data, self.key8, offset)

    def _spent(self, file: int, offset: int, size: int) -> bytes:
        try:
            return backend.spent_from_undo(self._read(f"rev{file:05d}.dat", offset, size))
        except MalformedDataError as exc:
            raise MalformedDataError(f"rev{file:05d}.dat, record at {offset - 8:,}: {exc}") from None

    def _records(self, name: str, trailer: int, head: int | None, pos: int = 0):
        """Yield (offset of the data, size, its first `head` bytes (at most size) in the clear, or the whole
        record's data and trailer when head is None) of each record from `pos`.
        A last record with a `trailer` (rev: the checksum) whose final bytes are still zeros is being
        written: it is left out (a block being written has no undo data yet: it is not on the chain).

        Raises:
            MalformedDataError: another network's magic, a damaged or truncated record.
        """
        path = self.dir / name
        with open(path, "rb") as f:
            length = os.fstat(f.fileno()).st_size
            held = None  # the record before: yielded once the next one starts (it is whole then)
            while pos + 8 <= length:
                f.seek(pos)
                raw = f.read(8 + (head or 0))
                if not any(raw[:8]):
                    break  # Core's preallocated zeros: the end of what was written
                clear = unxor(raw[:8], self.key8, pos)
                magic, size = clear[:4], int.from_bytes(clear[4:], "little")
                if magic != self._magic:
                    other = next((n for n, m in MAGIC.items() if m == magic), None)
                    if other:
                        raise MalformedDataError(f"{path} holds {other} records, not {self.network}'s (the record at offset {pos:,})")
                    raise MalformedDataError(f"{path} is damaged: no record starts at offset {pos:,}")
                end = pos + 8 + size + trailer
                if not 0 < size <= MAX_RECORD:
                    raise MalformedDataError(f"{path} is damaged: the record at offset {pos:,} states {size:,} bytes")
                if end > length:
                    raise MalformedDataError(f"{path} is truncated: the record at offset {pos:,} needs {end - pos:,} bytes, the file has {length - pos:,}")
                if held is not None:
                    yield held
                data = raw[8 : 8 + size] if head is not None else f.read(size + trailer)
                held = (pos + 8, size, unxor(data, self.key8, pos + 8))
                pos = end
            if held is not None:
                f.seek(pos - 4)
                if not trailer or any(f.read(4)):  # a checksum still zeros is not yet written
                    yield held
            f.seek(pos)
            if any(f.read()):
                raise MalformedDataError(f"{path} is truncated: {length - pos} bytes after its last record at offset {pos:,}")

    def _files(self, kind: str) -> list[int]:
        return sorted(int(m[2]) for m in map(_FILE.fullmatch, os.listdir(self.dir)) if m and m[1] == kind)

    def _blk_headers(self, file: int, pos: int = 0, skip: bool = False):
        """Yield (hash32, packed header entry, offset of the record) of the block records of blk `file` from
        `pos`; with `skip`, hash32 and the entry are None for a block whose coinbase states a height below
        the headers kept.

        Raises:
            MalformedDataError: as `_records`, or a record too short for a header.
        """
        head = wire.HEADER_BYTES + (_COINBASE_PREFIX if skip else 0)
        for offset, size, data in self._records(f"blk{file:05d}.dat", 0, head, pos):
            if size < wire.HEADER_BYTES:
                raise MalformedDataError(f"{self.dir}/blk{file:05d}.dat is damaged: the record at offset {offset - 8:,} holds {size} bytes")
            if skip and data[4:36] != _NULL32:
                try:
                    if wire.bip34_height(data) < self._forgot:
                        yield None, None, offset - 8
                        continue
                except SPError:
                    pass  # a coinbase longer than the prefix, or no height: kept
            yield wire.sha256d(data[:80]), data[4:36] + data[72:76] + struct.pack("<III", file, offset, size), offset - 8

    def refresh(self) -> None:
        """Read the block records added since the last call and choose the best chain again.

        Raises:
            MalformedDataError, OSError: as the constructor.
        """
        skip = self._forgot > BIP34_HEIGHT[self.network]
        for file in self._files("blk"):
            name = f"blk{file:05d}.dat"
            for hash32, packed, record in self._blk_headers(file, self._scanned.get(name, 0), skip):
                if hash32 is not None and hash32 not in self._headers:
                    self._headers[hash32] = packed
                    self._matched.pop(file, None)  # its undo data is matched again when asked for
                self._scanned[name] = record  # the last record is read again: its header may have been half written
        self._link()
        self._choose()

    def _forget_below(self, height: int) -> None:
        """Let go of the headers below `height` (the best chain's hashes stay)."""
        if height < self._forgot:
            return
        self._forgot = height
        for hash32 in [h for h, k in self._height.items() if k < height]:
            del self._headers[hash32], self._height[hash32], self._work[hash32]
            self._undo.pop(hash32, None)
        for hash32 in [h for h in self._headers if h not in self._height]:
            del self._headers[hash32]  # no chain can start from it
        for file, hashes in self._matched.items():
            self._matched[file] = [h for h in hashes if h in self._headers]
        self._headers, self._height, self._work, self._undo = map(dict, (self._headers, self._height, self._work, self._undo))  # smaller tables

    def _link(self) -> None:
        """Heights and chain work of blocks not yet placed: from their parent, or from the coinbase (BIP34) for
        a block whose parent is not in the files (a pruned node's first blocks; genesis is height 0)."""
        children: dict[bytes, list[bytes]] = {}
        roots = []
        for hash32, packed in self._headers.items():
            if hash32 not in self._height:
                prev32 = packed[:32]
                if prev32 in self._headers and prev32 not in self._height:
                    children.setdefault(prev32, []).append(hash32)
                else:
                    roots.append(hash32)
        for root in roots:
            prev32, bits = self._headers[root][:32], int.from_bytes(self._headers[root][32:36], "little")
            if prev32 in self._height:
                height, work = self._height[prev32] + 1, self._work[prev32] + block_work(bits)
            else:
                height = 0 if prev32 == _NULL32 else self._coinbase_height(root)
                work = (height + 1) * block_work(bits)  # for the blocks below, as much work each
            stack = [(root, height, work)]
            while stack:
                hash32, height, work = stack.pop()
                if height < 0:
                    continue  # not a block a chain can start from, nor its descendants
                self._height[hash32], self._work[hash32] = height, work
                for child in children.pop(hash32, ()):
                    stack.append((child, height + 1, work + block_work(int.from_bytes(self._headers[child][32:36], "little"))))

    def _coinbase_height(self, hash32: bytes) -> int:
        _, file, offset, size = self._place(hash32)
        try:
            return wire.bip34_height(self._read(f"blk{file:05d}.dat", offset, size))
        except SPError:
            return -1  # damaged, or before BIP34

    def _match_undo(self, file: int) -> None:
        """Match the undo records of rev `file` to the blocks of blk `file` by their checksum (the parent's hash),
        between siblings by the shape of their spends; keeps the matches of UNDO_FILES files.

        Raises:
            MalformedDataError: rev `file` is missing, or a record matches no block of blk `file`.
        """
        name = f"rev{file:05d}.dat"
        if not (self.dir / name).exists():
            raise MalformedDataError(f"{self.dir / name} is missing: the undo data of the blocks in blk{file:05d}.dat")
        for hash32 in self._matched.pop(file, ()):
            self._undo.pop(hash32, None)
        children: dict[bytes, bytes] = {}  # parent32 -> each child's hash32 ‖ packed entry (80 bytes a child)
        for hash32, packed, _ in self._blk_headers(file):
            children[packed[:32]] = children.get(packed[:32], b"") + hash32 + packed
        matched, last = [], None
        for offset, size, body in self._records(name, 32, None):
            undo, checksum = body[:-32], body[-32:]
            if last in children and wire.sha256d(last + undo) == checksum:
                parent = last  # the child of the block matched before: Core connects in chain order
            else:
                parent = next((p for p in children if wire.sha256d(p + undo) == checksum), None)
            if parent is None:
                raise MalformedDataError(f"{self.dir / name} is damaged: the record at offset {offset - 8:,} matches no block of blk{file:05d}.dat")
            kids = [children[parent][i : i + 80] for i in range(0, len(children[parent]), 80)]
            if len(kids) > 1:
                spent = self._spent(file, offset, size)
                kids = [k for k in kids if _fits(self._read(f"blk{file:05d}.dat", *struct.unpack_from("<II", k, 72)), spent)] or kids
            for kid in kids:
                if kid[:32] in self._headers:
                    self._undo[kid[:32]] = self._undo.get(kid[:32], b"") + struct.pack("<III", file, offset, size)
                    matched.append(kid[:32])
            last = kids[0][:32] if len(kids) == 1 else None
        self._matched[file] = matched
        while len(self._matched) > self.UNDO_FILES:
            for hash32 in self._matched.pop(next(iter(self._matched))):
                self._undo.pop(hash32, None)

    def _has_undo(self, hash32: bytes) -> bool:
        file = self._place(hash32)[1]
        if file not in self._matched:
            self._match_undo(file)
        return hash32 in self._undo

    def _choose(self) -> None:
        """The best chain: its tip is the block of most work that has undo data (or is below `start`, where
        only headers count); the blocks below it have theirs, as Core connects blocks in order."""
        def fits(h: bytes) -> bool:
            return self._height[h] < self.start or self._headers[h][:32] == _NULL32 or self._has_undo(h)

        best = max(self._height, key=lambda h: (self._work[h], -self._order(h)), default=None)
        if best is not None and not fits(best):  # blocks stored ahead of the node's tip: look further down
            best = next((h for h in sorted(self._height, key=lambda h: (-self._work[h], self._order(h))) if fits(h)), None)
        chain = []
        while best is not None and best in self._height:
            chain.append(best)
            best = self._headers[best][:32]
        chain.reverse()
        low, below = self._height[chain[0]] if chain else 0, b""
        if chain and low == self._forgot and self.floor < low <= self._tip() + 1:  # the chain below what was let go stays
            below = self._best[: 32 * (low - self.floor)]
        else:
            self.floor = low
        self._best = below + b"".join(chain)

    def _order(self, hash32: bytes) -> int:
        """Where the block is stored (earlier first): between equal work, the block the node had first."""
        _, file, offset, _ = self._place(hash32)
        return file << 32 | offset


def _fits(block_bytes: bytes, spent_bytes: bytes) -> bool:
    """True when the spent outputs give each of the block's transactions one output per input."""
    try:
        block = wire.parse_block(block_bytes)
        spent = wire.parse_spent(spent_bytes)
    except SPError:
        return False
    return len(spent) == len(block.txs) and all(len(s) == len(tx.inputs) for s, tx in zip(spent[1:], block.txs[1:]))
