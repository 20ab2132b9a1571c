"""A mainnet-shaped bench chain: unique blocks made of the mainnet-sized sample, spending taproot outputs of every age.

Usage:
    python -m bench.chain --out /work/benchchain/main --blocks 20000   # 44 GB, ~30 min; run again to resume or extend
    python -m bench.chain --out /work/benchchain/main --check 1 10000 19999

Height 0 is `vectors/blocks/mainnet.bin` itself (3,001 txs, 1,412 eligible, 1,968 taproot outputs of
eligible txs; it pays the test wallet 84 outputs), its parent zeros. Every later block is the sample
made new: every input's outpoint changed, so every txid is new; the coinbase states the block's height
(BIP34); the witness commitment, the merkle root and the header (parent, time + 600 s a block, the
sample's nBits) made again. Signatures are not (the index does not verify them).

Spends: `--spends` (1,600) of the sample's 2,142 inputs that spend P2TR outputs, chosen at random per
block, spend instead a *tracked output* (a taproot output of an eligible tx) of an earlier block, each
tracked output once, with its value and key as the spent output. The age distribution (`--recent`,
`--window`, `--shares`; the issue's by default): 40% from the last 6 blocks, 30% from the last 1,000,
30% from any earlier height: a category by its share, a height uniform over it, then a random
still-unspent tracked output of that block (a block with none left is drawn again in the category, so
the shares hold while a category has outputs left; a category with none left gives way to every block
that has some). Early blocks take what exists. The oldest blocks are spent out first (at 3,000 blocks
every block below ~1,250, at 20,000 below ~6,000): the histogram `--check` prints is what a chain
realised. Every other input spends its sample outpoint with the txid's first 4 bytes XORed with the
height (an input spending an earlier tx of its block would spend that tx's new txid; the sample has
none). The undo data gives each coin its creation height: the tracked output's block, or for the other
inputs a height drawn from the same distribution. Deterministic from `--seed`.

The chain is written as it is made, as Core's blocks/ folder (regtest magic): blkNNNNN.dat and
revNNNNN.dat records up to 128 MiB a file, XORed with xor.dat's key by offset (Core 28+), undo data as
Core's CBlockUndo with its amount and script compression. Beside it, in DIR:
    blocks/       the blocks folder (`CoreBlocks(DIR / "blocks", "regtest")`, `index sync --blocks-dir`)
    chain.json    the parameters and the last checkpoint (every 100 blocks and at the end)
    blocks.bin    per height 52 bytes: hash32, then file, blk offset, blk size, rev offset, rev size (u32 LE)
    txids.bin     per height the eligible txs' txids (1,412 × 32 bytes): where a spend's outpoint comes from
    spent-N.bin   per height a bit per tracked output, set once spent (as of the checkpoint at N blocks)
A run stopped at any moment (Ctrl-C, kill) resumes at its last checkpoint: what was written after it is
cut off and made again, identically.

`--check` reads the chain back: CoreBlocks sees every block at its height with its hash (and with a
`start`, through the BIP34 heights), the given blocks parse (`block.block_index`), and each taproot spend
of theirs hits a tracked output of the block its undo data names, at most once; it prints the realised
age histogram.
"""

from __future__ import annotations

import argparse
import collections
import functools
import hashlib
import json
import os
import random
import shutil
import struct
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sp_scan import block, wire
from sp_scan.extract import ScriptType, script_type
from sp_scan.index.corefiles import MAGIC, CoreBlocks, unxor

SAMPLE = Path(__file__).resolve().parent.parent / "vectors" / "blocks"
MAX_BLOCKFILE_SIZE = 0x8000000
"""Core's largest blk file (blockstorage.h): a block that would reach it starts the next file."""
KEY8 = bytes.fromhex("5a1e2f3c4d6e7f80")
"""xor.dat's key."""
SPACING = 600
"""Seconds between headers' times."""
CHECKPOINT = 100
"""Blocks between checkpoints (a resumed run starts again at the last one)."""
PLACE = struct.Struct("<32s5I")
"""A blocks.bin entry: hash32, file, blk data offset, blk size, rev data offset, rev size."""
RESERVE = 10 << 30
"""Bytes left free on the disk: a run that would need them is refused before it starts."""
_COMMITMENT = bytes.fromhex("6a24aa21a9ed")


def _varint(n: int) -> bytes:
    """Core's VARINT (serialize.h WriteVarInt)."""
    out = [n & 0x7F]
    while n > 0x7F:
        n = (n >> 7) - 1
        out.append(n & 0x7F | 0x80)
    return bytes(reversed(out))


def _read_varint(r: wire.Reader) -> int:
    """Core's VARINT (serialize.h ReadVarInt)."""
    n = 0
    while True:
        byte = r.read(1)[0]
        n = n << 7 | byte & 0x7F
        if not byte & 0x80:
            return n
        n += 1


def _compress_amount(n: int) -> int:
    """Core's CompressAmount (compressor.cpp)."""
    if n == 0:
        return 0
    e = 0
    while n % 10 == 0 and e < 9:
        n, e = n // 10, e + 1
    if e < 9:
        n, d = divmod(n, 10)
        return 1 + (n * 9 + d - 1) * 10 + e
    return 1 + (n - 1) * 10 + 9


def _compress_script(script: bytes) -> bytes:
    """Core's ScriptCompression for P2PKH, P2SH and compressed P2PK; any other script as length + 6, then itself."""
    if len(script) == 25 and script[:3] == b"\x76\xa9\x14" and script[23:] == b"\x88\xac":
        return b"\x00" + script[3:23]
    if len(script) == 23 and script[:2] == b"\xa9\x14" and script[22] == 0x87:
        return b"\x01" + script[2:22]
    if len(script) == 35 and script[0] == 33 and script[1] in (2, 3) and script[34] == 0xAC:
        return script[1:34]
    return _varint(len(script) + 6) + script


def _coin(out: wire.TxOut) -> bytes:
    """A spent output as Core's undo data compresses it (TxOutCompression)."""
    return _varint(_compress_amount(out.amount)) + _compress_script(out.script)


@functools.lru_cache(maxsize=1 << 16)
def _coin_head(height: int) -> bytes:
    """A non-coinbase coin's height code and, above height 0, the dummy version byte (undo.h TxInUndoFormatter)."""
    return _varint(2 * height) + (b"\x00" if height else b"")


def coin_heights(undo: bytes) -> list[list[int]]:
    """Each input's coin height in Core's undo data of a block (a CBlockUndo), per non-coinbase tx.

    Raises:
        MalformedDataError: truncated or trailing bytes.
    """
    r = wire.Reader(undo, what="undo data")
    out = []
    for _ in range(r.compact_size()):
        heights = []
        for _ in range(r.compact_size()):
            code = _read_varint(r)
            if code >> 1:
                _read_varint(r)
            _read_varint(r)
            size = _read_varint(r)
            r.skip(20 if size < 2 else 32 if size < 6 else size - 6)
            heights.append(code >> 1)
        out.append(heights)
    r.end()
    return out


def _bip34(height: int) -> bytes:
    """The coinbase's first push stating `height` as Core writes it (CScript() << height)."""
    if height == 0:
        return b"\x00"
    if height <= 16:
        return bytes([0x50 + height])
    n = height.to_bytes((height.bit_length() + 8) // 8, "little")
    return bytes([len(n)]) + n


def _layout(raw: bytes, start: int) -> tuple[list[int], int, bool]:
    """(offset of each input's outpoint, end of the outputs, segwit) of the transaction at `start`."""
    r = wire.Reader(raw, start)
    r.skip(4)
    segwit = raw[r.pos] == 0
    if segwit:
        r.skip(2)
    outpoints = []
    for _ in range(r.compact_size()):
        outpoints.append(r.pos)
        r.skip(36)
        r.skip(r.compact_size())
        r.skip(4)
    for _ in range(r.compact_size()):
        r.skip(8)
        r.skip(r.compact_size())
    return outpoints, r.pos, segwit


def _txid(tx: memoryview, body_end: int, segwit: bool) -> bytes:
    """The txid of a serialized transaction whose outputs end at `body_end`."""
    if not segwit:
        return wire.sha256d(tx)
    h = hashlib.sha256(tx[:4])
    h.update(tx[6:body_end])
    h.update(tx[-4:])
    return hashlib.sha256(h.digest()).digest()


class Sample:
    """The mainnet-sized sample block parsed once, to make new blocks of it (see the module doc).

    Inputs are numbered by ordinal over every non-coinbase input in block order; tracked outputs (the
    taproot outputs of eligible txs, block then vout order) by ordinal j.

    Attributes:
        raw: the sample block.
        p2tr: the ordinals of the inputs that spend a P2TR output.
        output_tx: per tracked output, its tx's ordinal among the eligible txs (where its txid is in
            a block's eligible txids).
        output_vout4: per tracked output, its vout (u32 LE).
        outputs: per tracked output, its TxOut.
        eligible_txids: the sample's eligible txids, 32 bytes each in block order.
    """

    def __init__(self, raw: bytes, spent_bytes: bytes) -> None:
        self.raw = raw
        parsed = wire.parse_block(raw)
        spent = wire.parse_spent(spent_bytes)
        spans = wire.tx_spans(raw)
        self.coinbase = spans[0]
        self._txs = []  # per tx after the coinbase: (start, end, body end, segwit, first input ordinal)
        self._at: list[int] = []  # per input: the offset of its outpoint
        positions = {tx.txid32: n for n, tx in enumerate(parsed.txs)}
        self._inblock: list[int] = []  # per input: the tx of the block it spends, else -1
        self._first4: list[int] = []
        self._coins: list[bytes] = []  # per input: its spent output as undo data compresses it
        self._spent_out: list[bytes] = []  # per input: its spent output in the REST form
        self.p2tr: list[int] = []
        for n, ((start, end), tx) in enumerate(zip(spans[1:], parsed.txs[1:]), start=1):
            outpoints, body_end, segwit = _layout(raw, start)
            self._txs.append((start, end, body_end - start, segwit, len(self._at)))
            for at, i, out in zip(outpoints, tx.inputs, spent[n]):
                if script_type(out.script) == ScriptType.P2TR:
                    self.p2tr.append(len(self._at))
                self._at.append(at)
                source = positions.get(i.outpoint.txid32, 0)
                self._inblock.append(source if 0 < source < n else -1)
                self._first4.append(int.from_bytes(raw[at : at + 4], "little"))
                self._coins.append(_coin(out))
                self._spent_out.append(out.to_bytes())
        self._ends = [first for *_, first in self._txs[1:]] + [len(self._at)]
        data = block.block_index(raw, spent_bytes)
        self.eligible_txids = data.txids
        self._eligible = [positions[data.txids[i : i + 32]] for i in range(0, len(data.txids), 32)]
        counts = memoryview(data.out_counts).cast("I")
        vouts, values = memoryview(data.out_vouts).cast("I"), memoryview(data.out_values).cast("Q")
        self.output_tx = [k for k, count in enumerate(counts) for _ in range(count)]
        self.output_vout4 = [v.to_bytes(4, "little") for v in vouts]
        self.outputs = [wire.TxOut(values[j], b"\x51\x20" + data.out_keys[32 * j : 32 * j + 32]) for j in range(len(vouts))]
        self._output_coins = [_coin(o) for o in self.outputs]
        self._output_spent = [o.to_bytes() for o in self.outputs]
        cb = raw[slice(*self.coinbase)]  # version, marker and flag, 1 input (the null outpoint), its scriptSig: the height's push first
        sig = cb[44 : 44 + cb[43]]
        self._cb_head, self._cb_sig_rest, self._cb_tail = cb[:43], sig[1 + sig[0] :], cb[44 + len(sig) :]
        self._reserved = parsed.txs[0].inputs[0].witness[0]
        self._time = int.from_bytes(raw[68:72], "little")

    @classmethod
    def load(cls) -> Sample:
        """The sample of vectors/blocks (mainnet.bin and its spent outputs)."""
        return cls((SAMPLE / "mainnet.bin").read_bytes(), (SAMPLE / "mainnet.spent.bin").read_bytes())

    @property
    def inputs(self) -> int:
        """The number of non-coinbase inputs."""
        return len(self._at)

    def block(self, height: int, prev32: bytes, spends: Mapping[int, tuple[bytes, int]]) -> tuple[bytes, bytes]:
        """Block `height` made of the sample: (raw block, its eligible txs' txids, 32 bytes each in block order).

        Args:
            height: the block's height: its coinbase states it, its time is the sample's + 600 s each,
                and it salts the outpoints of the inputs not in `spends`.
            prev32: the parent's hash.
            spends: input ordinal -> (txid32, j): that input spends tracked output j of the tx txid32.

        Height 0 without spends is the sample with `prev32` as its parent (its transactions unchanged).
        """
        if height == 0 and not spends:
            return self.raw[:4] + prev32 + self.raw[36:], self.eligible_txids
        buf = bytearray(self.raw)
        view = memoryview(buf)
        txids, wtxids = [b""], [bytes(32)]
        at, inblock, first4 = self._at, self._inblock, self._first4
        for (start, end, body_end, segwit, first), last in zip(self._txs, self._ends):
            for i in range(first, last):
                spend = spends.get(i)
                if spend is not None:
                    buf[at[i] : at[i] + 36] = spend[0] + self.output_vout4[spend[1]]
                elif inblock[i] >= 0:
                    buf[at[i] : at[i] + 32] = txids[inblock[i]]
                else:
                    buf[at[i] : at[i] + 4] = (first4[i] ^ height).to_bytes(4, "little")
            tx = view[start:end]
            txids.append(_txid(tx, body_end, segwit))
            wtxids.append(hashlib.sha256(hashlib.sha256(tx).digest()).digest())
        commitment = wire.sha256d(wire.merkle_root(wtxids) + self._reserved)
        sig = _bip34(height) + self._cb_sig_rest
        at_commit = self._cb_tail.rindex(_COMMITMENT) + 6
        coinbase = self._cb_head + wire.compact_size(len(sig)) + sig + self._cb_tail[:at_commit] + commitment + self._cb_tail[at_commit + 32 :]
        _, body_end, _ = _layout(coinbase, 0)
        txids[0] = _txid(memoryview(coinbase), body_end, True)
        header = self.raw[:4] + prev32 + wire.merkle_root(txids) + (self._time + SPACING * height).to_bytes(4, "little") + self.raw[72:80]
        raw = header + self.raw[80 : self.coinbase[0]] + coinbase + bytes(view[self.coinbase[1] :])
        view.release()
        return raw, b"".join(txids[n] for n in self._eligible)

    def spent_bytes(self, spends: Mapping[int, tuple[bytes, int]]) -> bytes:
        """The spent outputs of `block(…, spends)` in Core's REST binary form."""
        parts = [wire.compact_size(len(self._txs) + 1), b"\x00"]
        for (*_, first), last in zip(self._txs, self._ends):
            parts.append(wire.compact_size(last - first))
            parts.extend(self._output_spent[spends[i][1]] if i in spends else self._spent_out[i] for i in range(first, last))
        return b"".join(parts)

    def undo(self, spends: Mapping[int, tuple[bytes, int]], heights: Sequence[int]) -> bytes:
        """The undo data of `block(…, spends)` as Core's CBlockUndo: input i's coin created at heights[i]."""
        parts = [wire.compact_size(len(self._txs))]
        coins, spent = self._coins, self._output_coins
        for (*_, first), last in zip(self._txs, self._ends):
            parts.append(wire.compact_size(last - first))
            parts.extend(_coin_head(heights[i]) + (spent[spends[i][1]] if i in spends else coins[i]) for i in range(first, last))
        return b"".join(parts)


class CoreFiles:
    """Blocks and their undo data appended as Core's blocks/ folder holds them (see the module doc).

    Args:
        directory: the folder (made when missing; xor.dat written when missing).
        network: whose magic the records carry.
        at: (file, blk size, rev size) to go on from: the files are cut there, higher-numbered ones removed.
    """

    def __init__(self, directory: Path, network: str, at: tuple[int, int, int] = (0, 0, 0)) -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        xor = directory / "xor.dat"
        if not xor.exists():
            xor.write_bytes(KEY8)
        self.key8 = xor.read_bytes()
        self.magic = MAGIC[network]
        self.file, blk, rev = at
        for path in [*directory.glob("blk?????.dat"), *directory.glob("rev?????.dat")]:
            if int(path.name[3:8]) > self.file:
                path.unlink()
        self._open(blk, rev)

    def _open(self, blk: int, rev: int) -> None:
        self._blk = open(self.dir / f"blk{self.file:05d}.dat", "ab")
        self._rev = open(self.dir / f"rev{self.file:05d}.dat", "ab")
        self._blk.truncate(blk)
        self._rev.truncate(rev)
        self.blk_size, self.rev_size = blk, rev

    @property
    def position(self) -> tuple[int, int, int]:
        """(file, blk size, rev size): where the next block goes."""
        return self.file, self.blk_size, self.rev_size

    def append(self, raw: bytes, undo: bytes, prev32: bytes) -> tuple[int, int, int]:
        """Write a block's record and its undo record (checksum over `prev32`, its parent's hash).

        Returns:
            (file, offset of the block's data in the blk file, offset of the undo data in the rev file).
        """
        if self.blk_size and self.blk_size + 8 + len(raw) >= MAX_BLOCKFILE_SIZE:
            self.close()
            self.file += 1
            self._open(0, 0)
        places = self.file, self.blk_size + 8, self.rev_size + 8
        blk = self.magic + len(raw).to_bytes(4, "little") + raw
        rev = self.magic + len(undo).to_bytes(4, "little") + undo + wire.sha256d(prev32 + undo)
        self._blk.write(unxor(blk, self.key8, self.blk_size))
        self._rev.write(unxor(rev, self.key8, self.rev_size))
        self.blk_size += len(blk)
        self.rev_size += len(rev)
        return places

    def flush(self) -> None:
        self._blk.flush()
        self._rev.flush()

    def close(self) -> None:
        self._blk.close()
        self._rev.close()


@dataclass(frozen=True)
class Ages:
    """Where a spend's output comes from: `shares` of the draws from the last `recent` blocks, the last
    `window` blocks, and any earlier height."""

    recent: int = 6
    window: int = 1000
    shares: tuple[float, float, float] = (0.4, 0.3, 0.3)

    def span(self, rng: random.Random, height: int) -> int:
        """How many blocks below `height` a spend may reach: a category drawn by its share."""
        u = rng.random()
        return self.recent if u < self.shares[0] else self.window if u < self.shares[0] + self.shares[1] else height

    def height(self, rng: random.Random, height: int) -> int:
        """A creation height below `height` (>= 1): a category drawn by its share, then a height uniform over it."""
        return rng.randrange(max(height - self.span(rng, height), 0), height)

    def histogram(self, seen: Mapping[int, int]) -> list[str]:
        """Lines of the share of `seen` (age -> spends) at each age: 1, 2..recent, recent+1..window, above."""
        total = max(sum(seen.values()), 1)
        lines = []
        for lo, hi, name in ((1, 1, "1"), (2, self.recent, f"2..{self.recent:,}"), (self.recent + 1, self.window, f"{self.recent + 1:,}..{self.window:,}"), (self.window + 1, None, f"{self.window + 1:,}+")):
            count = sum(c for age, c in seen.items() if lo <= age and (hi is None or age <= hi))
            lines.append(f"  age {name}: {count:,} ({count / total:.1%})")
        return lines


REJECTIONS = 64
"""Heights drawn in a category before its blocks with outputs left are listed (most of its blocks are spent out)."""


class Generator:
    """Makes the chain in `out` (see the module doc), going on from its last checkpoint.

    Raises:
        SystemExit: `out` holds a chain made with other parameters or of another sample.
    """

    def __init__(self, out: Path, spends: int, ages: Ages, seed: int) -> None:
        self.out, self.spends, self.ages, self.seed = out, spends, ages, seed
        self.sample = Sample.load()
        self.width = (len(self.sample.outputs) + 7) // 8  # bytes of spent bits per block
        self.stride = len(self.sample.eligible_txids)  # bytes of txids.bin per block
        params = {"sample": hashlib.sha256(self.sample.raw).hexdigest(), "seed": seed, "spends": spends,
                  "recent": ages.recent, "window": ages.window, "shares": list(ages.shares)}  # fmt: skip
        out.mkdir(parents=True, exist_ok=True)
        meta = json.loads((out / "chain.json").read_text()) if (out / "chain.json").exists() else {"params": params, "blocks": 0, "files": [0, 0, 0], "spent": None, "seconds": 0.0}
        if meta["params"] != params:
            raise SystemExit(f"{out} holds a chain made with {meta['params']}, not {params}: give another --out")
        self.meta = meta
        self.height = meta["blocks"]
        self.files = CoreFiles(out / "blocks", "regtest", tuple(meta["files"]))
        self._places = os.open(out / "blocks.bin", os.O_RDWR | os.O_CREAT, 0o644)
        self._txids = os.open(out / "txids.bin", os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(self._places, self.height * PLACE.size)
        os.ftruncate(self._txids, self.height * self.stride)
        self.spent = bytearray((out / meta["spent"]).read_bytes()) if meta["spent"] else bytearray()
        for path in out.glob("spent-*.bin"):
            if path.name != meta["spent"]:
                path.unlink()  # written by a run killed before its chain.json
        total = len(self.sample.outputs)
        self.unspent = [total - int.from_bytes(self.spent[i : i + self.width], "little").bit_count() for i in range(0, len(self.spent), self.width)]
        self.unspent_total = sum(self.unspent)
        self.prev32 = PLACE.unpack(os.pread(self._places, PLACE.size, (self.height - 1) * PLACE.size))[0] if self.height else bytes(32)
        self.ages_seen: collections.Counter[int] = collections.Counter()  # realised age -> spends, this run
        self.asked = self.rewired = 0

    def run(self, blocks: int) -> None:
        """Make blocks up to height `blocks` - 1, printing progress; a checkpoint every CHECKPOINT blocks and at the end.

        Raises:
            SystemExit: the disk would keep less than RESERVE free.
        """
        per_block = len(self.sample.raw) + 2 * 8 + 32 + 230_000 + PLACE.size + self.stride + self.width  # the undo record is ~0.2 MB
        need, free = (blocks - self.height) * per_block, shutil.disk_usage(self.out).free
        if need > free - RESERVE:
            raise SystemExit(f"{blocks - self.height:,} more blocks need ~{need / 1e9:.1f} GB; {free / 1e9:.1f} GB are free and {RESERVE >> 30} GiB must stay so")
        began = shown = time.perf_counter()
        shown_height = self.height
        try:
            while self.height < blocks:
                self._append()
                now = time.perf_counter()
                if self.height % CHECKPOINT == 0 or self.height == blocks:
                    self._checkpoint(now - began)
                    began = now
                if now - shown >= 10 or self.height == blocks:
                    rate = (self.height - shown_height) / (now - shown)
                    eta = (blocks - self.height) / rate / 60
                    print(f"height {self.height - 1:,} of {blocks - 1:,}: {rate:.1f} blocks/s, {_size(self.out / 'blocks') / 1e9:.1f} GB, {eta:.0f} min left", flush=True)
                    shown, shown_height = now, self.height
        finally:
            self.files.close()
            os.close(self._places)
            os.close(self._txids)

    def _append(self) -> None:
        h, sample = self.height, self.sample
        rng = random.Random(f"{self.seed}/{h}")
        heights = [self.ages.height(rng, h) if h else 0 for _ in range(sample.inputs)]
        spends = {}
        if h:
            chosen = sorted(rng.sample(sample.p2tr, min(self.spends, len(sample.p2tr))))
            self.asked += len(chosen)
            for i in chosen:
                picked = self._pick(rng, h)
                if picked is None:
                    break
                b, j = picked
                k = sample.output_tx[j]
                spends[i] = (os.pread(self._txids, 32, b * self.stride + 32 * k), j)
                heights[i] = b
                self.ages_seen[h - b] += 1
            self.rewired += len(spends)
        raw, txids = sample.block(h, self.prev32, spends)
        undo = sample.undo(spends, heights)
        hash32 = wire.sha256d(raw[:80])
        file, blk_at, rev_at = self.files.append(raw, undo, self.prev32)
        os.pwrite(self._places, PLACE.pack(hash32, file, blk_at, len(raw), rev_at, len(undo)), h * PLACE.size)
        os.pwrite(self._txids, txids, h * self.stride)
        self.spent += bytes(self.width)
        self.unspent.append(len(sample.outputs))
        self.unspent_total += len(sample.outputs)
        self.prev32, self.height = hash32, h + 1

    def _pick(self, rng: random.Random, h: int) -> tuple[int, int] | None:
        """A still-unspent tracked output (its height, j) drawn as `ages` says, marked spent; None when none is left.

        A category's block with no output left is drawn again in the category; a category with none left gives
        way to every block that has some.
        """
        if not self.unspent_total:
            return None
        low = max(h - self.ages.span(rng, h), 0)
        for _ in range(REJECTIONS):
            b = rng.randrange(low, h)
            if self.unspent[b]:
                break
        else:
            b = rng.choice([b for b in range(low, h) if self.unspent[b]] or [b for b in range(h) if self.unspent[b]])
        row, total = b * self.width, len(self.sample.outputs)
        for _ in range(8):
            j = rng.randrange(total)
            if not self.spent[row + (j >> 3)] >> (j & 7) & 1:
                break
        else:  # most of the block is spent
            j = rng.choice([j for j in range(total) if not self.spent[row + (j >> 3)] >> (j & 7) & 1])
        self.spent[row + (j >> 3)] |= 1 << (j & 7)
        self.unspent[b] -= 1
        self.unspent_total -= 1
        return b, j

    def _checkpoint(self, seconds: float) -> None:
        """Record the files' ends and the spent bits, so a later run resumes here (chain.json replaced last)."""
        self.files.flush()
        name = f"spent-{self.height}.bin"
        (self.out / name).write_bytes(self.spent)
        old = self.meta["spent"]
        self.meta.update(blocks=self.height, files=list(self.files.position), spent=name, seconds=self.meta["seconds"] + seconds)
        (self.out / "chain.json.tmp").write_text(json.dumps(self.meta, indent=1) + "\n")
        os.replace(self.out / "chain.json.tmp", self.out / "chain.json")
        if old and old != name:
            (self.out / old).unlink()


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir())


def load(out: Path) -> dict:
    """A generated chain's chain.json (its parameters, `blocks`, the files' ends).

    Raises:
        SystemExit: `out` holds no chain.
    """
    try:
        return json.loads((out / "chain.json").read_text())
    except FileNotFoundError:
        raise SystemExit(f"{out} holds no chain (make one with python -m bench.chain --out {out} --blocks N)") from None


def places(out: Path, blocks: int) -> list[tuple[bytes, int, int, int, int, int]]:
    """The blocks.bin entries of heights 0..blocks-1: (hash32, file, blk offset, blk size, rev offset, rev size)."""
    with open(out / "blocks.bin", "rb") as f:
        return list(PLACE.iter_unpack(f.read(blocks * PLACE.size)))


def read_undo(out: Path, place: tuple[bytes, int, int, int, int, int]) -> bytes:
    """A block's undo data, read from its rev record."""
    _, file, _, _, rev_at, size = place
    with open(out / "blocks" / f"rev{file:05d}.dat", "rb") as f:
        f.seek(rev_at)
        return unxor(f.read(size), (out / "blocks" / "xor.dat").read_bytes(), rev_at)


def check(out: Path, heights: Sequence[int]) -> collections.Counter[int]:
    """Read the chain back (see the module doc); return the realised ages of the checked blocks' spends.

    Raises:
        AssertionError: what does not hold.
    """
    meta = load(out)
    n, sample = meta["blocks"], Sample.load()
    entries = places(out, n)
    walk = CoreBlocks(out / "blocks", "regtest")  # (it lets go of the headers below the heights it is asked for)
    assert walk.tip_height() == n - 1, f"CoreBlocks sees tip {walk.tip_height()}, the chain has {n} blocks"
    for h, (hash32, *_) in enumerate(entries):
        assert walk.block_hash(h) == hash32[::-1].hex(), f"CoreBlocks' block {h} is not the chain's"
    late = n - 1 - CoreBlocks.REORG_DEPTH  # a source opened high reads the heights of the blocks below from their coinbases
    if late > 0:
        high = CoreBlocks(out / "blocks", "regtest", start=n - 1)
        assert all(high.block_hash(h) == entries[h][0][::-1].hex() for h in range(late, n)), "CoreBlocks opened high misplaces a block"
    stride, outputs = len(sample.eligible_txids), {}
    for j, (k, vout4) in enumerate(zip(sample.output_tx, sample.output_vout4)):
        outputs[(k, vout4)] = j
    source = CoreBlocks(out / "blocks", "regtest")
    ages: collections.Counter[int] = collections.Counter()
    seen = set()
    with open(out / "txids.bin", "rb") as txids_file:

        @functools.lru_cache(maxsize=4096)
        def created(c: int) -> dict[bytes, int]:
            """Block c's eligible txids -> their ordinals."""
            txids_file.seek(c * stride)
            data = txids_file.read(stride)
            return {data[k : k + 32]: k // 32 for k in range(0, stride, 32)}

        for h in heights:
            raw, spent_bytes = source.block(entries[h][0][::-1].hex())
            block.block_index(raw, spent_bytes)
            parsed, spent = wire.parse_block(raw), wire.parse_spent(spent_bytes)
            assert h == 0 or wire.bip34_height(raw) == h, f"block {h}'s coinbase states height {wire.bip34_height(raw)}"
            for tx, outs, coins in zip(parsed.txs[1:], spent[1:], coin_heights(read_undo(out, entries[h]))):
                for i, out_spent, c in zip(tx.inputs, outs, coins):
                    assert c < h or h == 0, f"block {h} spends a coin of height {c}"
                    k = created(c).get(i.outpoint.txid32) if script_type(out_spent.script) == ScriptType.P2TR else None
                    if k is None:
                        continue  # a sample outpoint, salted
                    j = outputs[(k, i.outpoint.vout.to_bytes(4, "little"))]
                    assert sample.outputs[j] == out_spent, f"block {h} spends {i.outpoint} as another output than block {c} made"
                    assert (c, k, j) not in seen, f"{i.outpoint} is spent twice"
                    seen.add((c, k, j))
                    ages[h - c] += 1
    return ages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the chain's folder (outside any repository, e.g. /work/benchchain/main)")
    parser.add_argument("--blocks", type=int, help="make heights 0..N-1 (resuming or extending the chain in --out)")
    parser.add_argument("--spends", type=int, default=1600, help="inputs per block rewired to spend earlier tracked outputs (default 1600)")
    parser.add_argument("--recent", type=int, default=6, help="blocks of the first age category (default 6)")
    parser.add_argument("--window", type=int, default=1000, help="blocks of the second age category (default 1000)")
    parser.add_argument("--shares", default="40,30,30", help="percent of draws from the recent blocks, the window, any height (default 40,30,30)")
    parser.add_argument("--seed", type=int, default=39)
    parser.add_argument("--check", type=int, nargs="*", metavar="H", help="read the chain back and check heights H (default: 1, the middle and the tip)")
    args = parser.parse_args()
    shares = [float(s) for s in args.shares.split(",")]
    ages = Ages(args.recent, args.window, tuple(s / sum(shares) for s in shares))
    if args.check is not None:
        meta = load(args.out)
        n, params = meta["blocks"], meta["params"]
        ages = Ages(params["recent"], params["window"], tuple(params["shares"]))
        heights = args.check or sorted({min(1, n - 1), n // 2, n - 1})
        seen = check(args.out, heights)
        total = sum(seen.values())
        print(f"{args.out}: {n:,} blocks, CoreBlocks sees each at its height; heights {heights} parse, {total:,} of their taproot spends hit tracked outputs of earlier blocks:")
        print("\n".join(ages.histogram(seen)))
        return
    if args.blocks is None:
        parser.error("give --blocks N (or --check)")
    generator = Generator(args.out, args.spends, ages, args.seed)
    began = time.perf_counter()
    try:
        generator.run(args.blocks)
    except KeyboardInterrupt:
        print(f"stopped: run again to resume at height {load(args.out)['blocks']:,}")
        return
    print(f"{args.out}: {args.blocks:,} blocks, {_size(args.out / 'blocks') / 1e9:.1f} GB in blocks/, made in {(time.perf_counter() - began) / 60:.1f} min this run")
    print(f"spends rewired this run: {generator.rewired:,} of {generator.asked:,} asked")
    print("\n".join(ages.histogram(generator.ages_seen)))


if __name__ == "__main__":
    main()
