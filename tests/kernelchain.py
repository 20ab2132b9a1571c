"""Regtest chains that Bitcoin Core's own validation accepted (libbitcoinkernel through py-bitcoinkernel).

`KernelChain` wraps a kernel ChainstateManager in a directory: `mine` builds a
block (BIP34 coinbase, witness commitment, regtest proof of work), has the
kernel process it and checks the tip moved (process_block also returns True
for a block it rejects; the reason is only in Core's log, which `BlockRejected`
carries). Transactions are really signed with vectors/blocks/generate.py's code
and pay silent-payments outputs made by `sp_scan.send`; every payment, tweak
and spend is recorded from the sender side, so tests compare the scanner with
what was paid, never with itself. Blocks and spent outputs are read back from
the kernel, spent outputs in Core's REST `/rest/spenttxouts/<hash>.bin` form.

`build_sample_chain` is the deterministic chain shipped in vectors/chain (and
the session fixture `kernel_chain`); `replay` copies a prefix of a chain into a
new kernel; `make_reorg` switches a copy to a longer competing branch;
`rest_server` / `rpc_server` serve a chain as Core's REST / JSON-RPC do.
Fixtures (tests/conftest.py): `kernel_chain` (the sample chain, once per
session, read-only), `kernel_rest` (a REST stand-in over it) and `kernel_copy`
(a private copy per test, to mine on, reorganise or stop serving).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pbk
from bitcoin.core import COutPoint, CBlock, CMutableTransaction, CMutableTxIn, CTxInWitness, CTxOut, CTxWitness
from bitcoin.core.script import OP_RETURN, CScript, CScriptWitness
from coincurve import PrivateKey

from cli_support import NodeServer, RestHandler, RpcHandler
from helpers import sample_blocks_generator
from sp_scan import crypto, extract, send
from sp_scan.address import SPAddress, labelled_spend_pubkey
from sp_scan.scan import Receiver, label_tweak
from sp_scan.types import OutPoint, TxTweak
from sp_scan.wire import TxOut, serialize_spent, sha256d

gen = sample_blocks_generator()

GENESIS_TIME = 1_296_688_602  # regtest genesis; block h is stamped GENESIS_TIME + 600·h
BITS = 0x207FFFFF
TARGET = 0x7FFFFF << (8 * (0x20 - 3))
VERSION = 0x20000000
COIN = 100_000_000
HALVING = 150  # regtest
MATURITY = 100
WITNESS_MAGIC = bytes.fromhex("aa21a9ed")
WITNESS_RESERVED = b"\x00" * 32
GENESIS_SPENT = b"\x01\x00"  # Core's spenttxouts for a block whose only tx is the coinbase


class BlockRejected(AssertionError):
    """The kernel did not accept a block; `reasons` are the lines Core logged while processing it."""

    def __init__(self, message: str, reasons: list[str]) -> None:
        super().__init__(message + ("\n" + "\n".join(reasons) if reasons else ""))
        self.reasons = reasons


class _KernelLog:
    """Core's log lines while a block is processed: the only place a rejection reason appears."""

    def __init__(self) -> None:
        self.lines: deque[str] = deque(maxlen=400)
        pbk.logging_set_options(pbk.LoggingOptions(log_timestamps=False))
        self.connection = pbk.LoggingConnection(self._line)

    def _line(self, message: str) -> None:
        self.lines.append(message)

    def reasons(self) -> list[str]:
        words = ("invalid", "failed", "error", "bad-", "mandatory", "rejected")
        return [line.strip() for line in self.lines if any(w in line.lower() for w in words)]


_LOG: _KernelLog | None = None


@dataclass(frozen=True)
class Wallet:
    """A silent-payments receiver whose spend key is known, so the chain can spend what it was paid."""

    name: str
    scan_key32: bytes = field(repr=False)
    spend_key32: bytes = field(repr=False)
    labels: tuple[int, ...] = ()

    @property
    def scan_pubkey33(self) -> bytes:
        return PrivateKey(self.scan_key32).public_key.format()

    @property
    def spend_pubkey33(self) -> bytes:
        return PrivateKey(self.spend_key32).public_key.format()

    def receiver(self) -> Receiver:
        return Receiver(self.scan_key32, self.spend_pubkey33, self.labels)

    def address(self, label: int | None) -> SPAddress:
        spend = self.spend_pubkey33 if label is None else labelled_spend_pubkey(self.scan_key32, self.spend_pubkey33, label)
        return SPAddress("sp", 0, self.scan_pubkey33, spend)


TEST_WALLET = Wallet("wallet", gen.WALLET_SCAN_KEY, gen.WALLET_SPEND_KEY, gen.WALLET_LABELS)
"""The documented test wallet of vectors/blocks/README.md (labels 1 and 7); `Pay.sp == "wallet"`."""
OTHER_WALLET = Wallet("other", gen.OTHER_SCAN_KEY, gen.OTHER_SPEND_KEY)
"""The second receiver of generate.py, unlabelled; `Pay.sp == "other"`."""
WALLETS = {w.name: w for w in (TEST_WALLET, OTHER_WALLET)}


def outpoint36(txid32: bytes, vout: int) -> bytes:
    return txid32 + vout.to_bytes(4, "little")


@dataclass(frozen=True)
class Payment:
    """One output the sender paid a wallet: what a scanner must find (tweak32 = t_k + label tweak)."""

    wallet: str
    vout: int
    amount: int
    output32: bytes
    label: int | None
    tweak32: bytes


@dataclass(frozen=True)
class TxRecord:
    """A signed transaction and what its sender knows about it.

    Attributes:
        name: the scenario's name for it.
        tx: the transaction.
        kinds: generate.py's kind of each input ("p2wpkh", "p2tr-script-nums", ...).
        inputs36: the outpoints it spends, in input order.
        fee: inputs minus outputs, in satoshis.
        tweak33: input_hash·A from the private keys, or None when a scanner must skip it.
        payments: the outputs paying TEST_WALLET or OTHER_WALLET that a scanner must find, in the
            order they were paid (not vout order).
    """

    name: str
    tx: CMutableTransaction
    kinds: tuple[str, ...]
    inputs36: tuple[bytes, ...]
    fee: int
    tweak33: bytes | None
    payments: tuple[Payment, ...]

    @property
    def txid32(self) -> bytes:
        return self.tx.GetTxid()

    @property
    def taproot_vouts(self) -> list[int]:
        return [n for n, o in enumerate(self.tx.vout) if extract.script_type(bytes(o.scriptPubKey)) is extract.ScriptType.P2TR]


@dataclass(frozen=True)
class BlockRecord:
    """A block this process built (or genesis): its place and transactions after the coinbase."""

    height: int
    hash32: bytes
    parent32: bytes
    txs: tuple[TxRecord, ...]


@dataclass(frozen=True)
class Found:
    """A payment on the active chain, as an index scan reports it (`spent_height` None while unspent)."""

    height: int
    txid32: bytes
    vout: int
    amount: int
    output32: bytes
    tweak32: bytes
    label: int | None
    spent_height: int | None

    def to_json(self) -> dict:
        """The JSON Lines row of `sp-scan index scan --json`."""
        return {
            "height": self.height,
            "txid": self.txid32[::-1].hex(),
            "vout": self.vout,
            "amount": self.amount,
            "output": self.output32.hex(),
            "tweak": self.tweak32.hex(),
            "label": self.label,
            "spent": self.spent_height is not None,
        }


def subsidy(height: int) -> int:
    return 50 * COIN >> (height // HALVING)


class KernelChain:
    """A regtest chain in `datadir`, every block validated by libbitcoinkernel.

    Thread-safe: the REST/RPC stand-ins read it while tests mine or reorg.

    Args:
        datadir: an empty directory for the kernel's block files.
        seed: seeds the coinbase extra nonces and the keys of invented outputs.
    """

    def __init__(self, datadir: Path, seed: str = "sp-scan kernel chain") -> None:
        global _LOG
        if _LOG is None:
            _LOG = _KernelLog()
        self._log = _LOG
        self._lock = threading.RLock()
        self.blocks_dir = Path(datadir) / "blocks"
        """Where Core's storage code writes blk*.dat, rev*.dat and xor.dat."""
        context = pbk.make_context(pbk.ChainType.REGTEST)
        options = pbk.ChainstateManagerOptions(context, str(datadir), str(self.blocks_dir))
        options.update_block_tree_db_in_memory(True)
        options.update_chainstate_db_in_memory(True)
        self._chainman = pbk.ChainstateManager(options)
        self.rng = gen.Drbg(seed)
        self.miner_script = gen.p2wpkh_script(self.rng.key().public_key.format())
        genesis = self.hash_at(0)
        self.records: dict[bytes, BlockRecord] = {genesis: BlockRecord(0, genesis, b"\x00" * 32, ())}
        self.coins: dict[bytes, object] = {}  # outpoint36 -> generate.Spend: outputs this chain can sign for
        self.reserve: list = []  # funded, matured Spends the scenario left unspent, for tests to use
        self.read_only = False  # set on the session's shared chain: building on it raises

    def close(self) -> None:
        """Destroy the kernel objects (flushes the chainstate)."""
        with self._lock:
            if self._chainman is not None:
                self._chainman.__exit__(None, None, None)
                self._chainman = None

    # --- reading the kernel (also the interface of cli_support's servers) ---

    def _chain(self) -> pbk.Chain:
        return self._chainman.get_active_chain()

    def best(self) -> tuple[int, bytes]:
        """(height, hash32) of the active tip."""
        with self._lock:
            chain = self._chain()
            height = chain.height
            return height, bytes(chain.block_tree_entries[height].block_hash)

    @property
    def tip_height(self) -> int:
        return self.best()[0]

    @property
    def tip_hash(self) -> bytes:
        return self.best()[1]

    def hash_at(self, height: int) -> bytes | None:
        """The hash32 (internal byte order) of the active chain's block at `height`, None above the tip."""
        with self._lock:
            chain = self._chain()
            if not 0 <= height <= chain.height:
                return None
            return bytes(chain.block_tree_entries[height].block_hash)

    def lookup(self, hash32: bytes) -> tuple[int, bytes, bytes | None] | None:
        """(height, raw block, spent outputs) of any block the kernel stored, active or not.

        The spent outputs are None for a block never connected (Core: "undo not
        available"); None altogether for an unknown hash.
        """
        with self._lock:
            try:
                entry = self._chainman.block_tree_entries[pbk.BlockHash(hash32)]
                raw = bytes(self._chainman.blocks[entry])  # never `in`: the map's __contains__ leaks a block
            except (KeyError, RuntimeError):
                return None
            if entry.height == 0:
                return 0, raw, GENESIS_SPENT
            try:
                undo = self._chainman.block_spent_outputs[entry]
            except RuntimeError:
                return entry.height, raw, None
            spent = [[]] + [[TxOut(c.output.amount, bytes(c.output.script_pubkey)) for c in tx.coins] for tx in undo.transactions]
            return entry.height, raw, serialize_spent(spent)

    def block(self, height: int) -> bytes:
        """The raw block at `height` of the active chain, as the kernel stored it."""
        return self._at(height)[1]

    def spent(self, height: int) -> bytes:
        """The spent outputs of the active chain's block at `height`, Core's REST .bin form."""
        return self._at(height)[2]

    def _at(self, height: int) -> tuple[int, bytes, bytes]:
        with self._lock:
            hash32 = self.hash_at(height)
            if hash32 is None:
                raise IndexError(f"height {height} is above the tip")
            return self.lookup(hash32)

    # --- building ---

    def transaction(self, name: str, spends: Sequence, outs: Sequence[tuple], decoy: bool = False) -> TxRecord:
        """Sign a transaction spending `spends` and paying `outs` as generate.make_pays reads them.

        Its payments to TEST_WALLET / OTHER_WALLET become coins this chain can spend.
        """
        self._writable()
        pays = gen.make_pays(self.rng, sum(s.prevout.nValue for s in spends), list(outs))
        built = gen.build_tx(self.rng, name, list(spends), pays, decoy)
        txid32 = built.tx.GetTxid()
        payments = () if built.tweak is None or decoy else _payments(built, pays)
        for p in payments:
            self.coins[outpoint36(txid32, p.vout)] = _sp_coin(txid32, p)
        inputs36 = tuple(outpoint36(s.outpoint.hash, s.outpoint.n) for s in spends)
        fee = sum(s.prevout.nValue for s in spends) - sum(o.nValue for o in built.tx.vout)
        return TxRecord(name, built.tx, tuple(s.kind for s in spends), inputs36, fee, built.tweak, payments)

    def coin(self, txid32: bytes, vout: int):
        """The generate.Spend that signs for output `vout` of `txid32` (a funding output or a payment)."""
        return self.coins[outpoint36(txid32, vout)]

    def fund(self, kinds: Sequence[str]) -> list:
        """Mine a block whose coinbase pays one new output of each generate.py input kind.

        Returns:
            The generate.Spend of each output, spendable MATURITY blocks later.
        """
        spends = [gen.make_spend(self.rng, kind, self.rng.between(100_000, 5_000_000), inscription_size=600) for kind in kinds]
        record = self.mine(pay=[s.prevout for s in spends])
        cb_txid = CBlock.deserialize(self.block(record.height)).vtx[0].GetTxid()
        for n, s in enumerate(spends):
            s.outpoint = COutPoint(cb_txid, n)
            self.coins[outpoint36(cb_txid, n)] = s
        return spends

    def mine(self, txs: Sequence[TxRecord] = (), *, pay: Sequence[CTxOut] = (), parent32: bytes | None = None) -> BlockRecord:
        """Build a block of `txs` on `parent32` (default: the tip) and have the kernel accept it.

        The coinbase pays `pay` first, then the rest of subsidy plus fees to the miner.
        A block on a shorter branch is only stored; the kernel validates the branch
        when it becomes the longest, and the tip must then be its last block.

        Raises:
            BlockRejected: the kernel did not take it, with Core's log lines.
        """
        with self._lock:
            parent32 = parent32 or self.tip_hash
            height = self.records[parent32].height + 1
            reward = subsidy(height) + sum(t.fee for t in txs)
            outputs = [*pay, CTxOut(reward - sum(o.nValue for o in pay), self.miner_script)]
            raw = _assemble(height, parent32, self.rng.bytes(4), outputs, [t.tx for t in txs])
            record = BlockRecord(height, sha256d(raw[:80]), parent32, tuple(txs))
            self.submit(raw)
            self.records[record.hash32] = record
            return record

    def submit(self, raw: bytes) -> None:
        """Have the kernel process a block; raise BlockRejected unless it took it.

        A block higher than the old tip must become the tip; a lower one (a
        shorter branch) must be stored with the tip unchanged.
        """
        self._writable()
        with self._lock:
            old_height, old_tip = self.best()
            hash32 = sha256d(raw[:80])
            self._log.lines.clear()
            try:
                self._chainman.process_block(pbk.Block(raw))
                height = self._chainman.block_tree_entries[pbk.BlockHash(hash32)].height
            except (pbk.ProcessBlockException, RuntimeError, KeyError) as exc:
                raise BlockRejected(f"block {hash32[::-1].hex()} refused: {exc}", self._log.reasons()) from None
            tip_height, tip = self.best()
            if tip != (hash32 if height > old_height else old_tip):
                message = f"block {hash32[::-1].hex()} at height {height} not accepted: the tip is {tip[::-1].hex()} at {tip_height}"
                raise BlockRejected(message, self._log.reasons())

    def _writable(self) -> None:
        if self.read_only:
            raise RuntimeError("this chain is shared by the session: build on a copy (the kernel_copy fixture, or replay)")

    # --- what the sender side says about the active chain ---

    def active(self) -> list[BlockRecord]:
        """The records of the active chain, height 0 to the tip."""
        with self._lock:
            height, _ = self.best()
            return [self.records[self.hash_at(h)] for h in range(height + 1)]

    def spends(self) -> dict[bytes, int]:
        """outpoint36 -> height of the active block that spends it, for every input on the active chain."""
        return {op: b.height for b in self.active() for t in b.txs for op in t.inputs36}

    def tweaks(self, height: int, dust_limit: int = 0, cut_through: bool = False) -> list[TxTweak]:
        """The tweaks of the active block at `height` computed from the private keys, in block order.

        Args:
            dust_limit: leave out txs whose largest taproot output is below it (with cut_through,
                whose largest unspent taproot output is).
            cut_through: leave out txs all of whose taproot outputs are spent on the active chain.
        """
        spends = self.spends() if cut_through else {}
        out = []
        for t in self.active()[height].txs:
            if t.tweak33 is None:
                continue
            left = [t.tx.vout[n].nValue for n in t.taproot_vouts if outpoint36(t.txid32, n) not in spends]
            if left and max(left) >= dust_limit:
                out.append(TxTweak(t.txid32, t.tweak33))
        return out

    def found(self, wallet: Wallet = TEST_WALLET, start: int = 0, end: int | None = None) -> list[Found]:
        """What the sender paid `wallet` on the active chain between heights start and end, with spent status."""
        spends = self.spends()
        out = []
        for b in self.active()[start : None if end is None else end + 1]:
            for t in b.txs:
                for p in sorted(t.payments, key=lambda p: p.vout):
                    if p.wallet == wallet.name:
                        spent = spends.get(outpoint36(t.txid32, p.vout))
                        out.append(Found(b.height, t.txid32, p.vout, p.amount, p.output32, p.tweak32, p.label, spent))
        return out


def _payments(built, pays: list) -> tuple[Payment, ...]:
    """Each SP output of a built tx with its t_k, derived on the sender side (create_outputs' order of k)."""
    outpoints = [OutPoint(s.outpoint.hash, s.outpoint.n) for s in built.spends]
    input_keys = [s.sp_key for s in built.spends if s.sp_key is not None]
    scripts = [bytes(o.scriptPubKey) for o in built.tx.vout]
    k: dict[str, int] = {}
    out = []
    for p in (p for p in pays if p.sp):
        wallet = WALLETS[p.sp]
        ecdh33 = send.shared_secret(outpoints, input_keys, wallet.scan_pubkey33)
        t_k = crypto.tagged_hash(crypto.TAG_SHARED_SECRET, ecdh33 + crypto.ser32(k.setdefault(p.sp, 0)))
        k[p.sp] += 1
        tweak = int.from_bytes(t_k, "big")
        if p.label is not None:
            tweak += int.from_bytes(label_tweak(wallet.scan_key32, p.label), "big")
        tweak32 = (tweak % crypto.N).to_bytes(32, "big")
        output32 = bytes(p.script[2:])
        assert _spend_key(wallet, tweak32).public_key.format()[1:] == output32, "sender-side t_k disagrees with create_outputs"
        out.append(Payment(p.sp, scripts.index(bytes(p.script)), p.value, output32, p.label, tweak32))
    return tuple(out)


def _spend_key(wallet: Wallet, tweak32: bytes) -> PrivateKey:
    return PrivateKey.from_int((int.from_bytes(wallet.spend_key32, "big") + int.from_bytes(tweak32, "big")) % crypto.N)


def _sp_coin(txid32: bytes, p: Payment):
    """A generate.Spend for a paid SP output: a P2TR key-path spend with b_spend + tweak."""
    key = _spend_key(WALLETS[p.wallet], p.tweak32)
    return gen.Spend(
        "p2tr-key",
        COutPoint(txid32, p.vout),
        CTxOut(p.amount, gen.p2tr_script(p.output32)),
        send.InputKey(key.secret, True),
        [key],
        {"tweaked": key},
    )


def _assemble(height: int, parent32: bytes, extra: bytes, outputs: list[CTxOut], txs: list) -> bytes:
    """A block at `height` on `parent32` with proof of work: coinbase (BIP34 height, witness commitment) then txs."""
    coinbase = CMutableTransaction(
        [CMutableTxIn(COutPoint(), CScript([height, extra]), 0xFFFFFFFF)],  # heights 1-16 push OP_1..OP_16
        list(outputs),
        nVersion=2,
    )
    coinbase.wit = CTxWitness([CTxInWitness(CScriptWitness([WITNESS_RESERVED]))])
    vtx = [coinbase, *txs]
    witness_root = CBlock.build_witness_merkle_tree_from_txs(vtx)[-1]
    coinbase.vout.append(CTxOut(0, CScript([OP_RETURN, WITNESS_MAGIC + sha256d(witness_root + WITNESS_RESERVED)])))
    time = GENESIS_TIME + 600 * height
    unsolved = CBlock(nVersion=VERSION, hashPrevBlock=parent32, nTime=time, nBits=BITS, vtx=vtx)
    header = bytearray(CBlock(nVersion=VERSION, hashPrevBlock=parent32, hashMerkleRoot=unsolved.calc_merkle_root(), nTime=time, nBits=BITS).get_header().serialize())
    nonce = 0
    while int.from_bytes(sha256d(bytes(header)), "little") > TARGET:
        nonce += 1
        header[76:80] = nonce.to_bytes(4, "little")
    body = unsolved.serialize()[80:]
    return bytes(header) + body


# --- the sample chain (vectors/chain, the session fixture) ---

SAMPLE_SEED = "sp-scan sample chain"
# Spent at height 100 + n by the transactions listed under n; funded by the coinbase at height n.
SAMPLE_TXS: dict[int, list[tuple]] = {
    1: [
        ("p2pkh", ["p2pkh"], [("wallet", None), ("p2wpkh",)]),
        ("malleated-p2pkh", ["p2pkh-malleated-if", "p2pkh-malleated-drop"], [("wallet", 1), ("p2tr",)]),
        ("p2sh-p2wpkh", ["p2sh-p2wpkh", "p2wpkh"], [("wallet", 7), ("op_return",), ("p2wpkh",)]),
        ("p2tr-key-path", ["p2tr-key", "p2tr-key"], [("wallet", None), ("wallet", None), ("wallet", 0), ("other",)]),
    ],
    2: [
        ("p2tr-script-path", ["p2tr-script"], [("wallet", 1), ("wallet", 7)]),
        ("nums-script-path", ["p2tr-script-nums", "p2wpkh"], [("wallet", None), ("p2wpkh",)]),
        ("annex", ["p2tr-key-annex", "p2tr-script-nums-annex"], [("wallet", 0)]),
        ("ineligible-mixed", ["p2pk", "p2wsh", "p2sh-multisig", "bare-multisig", "p2wpkh"], [("wallet", None), ("other",), ("p2pkh",)]),
    ],
    3: [
        ("ineligible-only", ["p2wsh", "p2pk", "bare-multisig", "p2pkh-uncompressed"], [("p2tr",), ("p2wpkh",)]),
        ("segwit-v2-spend", ["p2wpkh", "segwit-v2"], [("wallet", None), ("p2wpkh",)], True),
        ("no-taproot-output", ["p2wpkh"], [("p2wpkh",), ("op_return",)]),
        ("unrelated", ["p2tr-key", "p2pkh"], [("p2tr",), ("p2wpkh",)]),
        ("other-wallet", ["p2wpkh"], [("other",), ("p2tr",)]),
        ("inscription", ["p2tr-script-inscription"], [("wallet", None)]),
        ("worst-case-p2pkh", ["p2pkh-worst-case"], [("wallet", 7)]),
    ],
    4: [
        ("many-outputs", ["p2wpkh", "p2tr-key", "p2pkh"], [("wallet", None), ("wallet", 1), ("wallet", 7), ("wallet", 0), ("other",), ("other",), ("p2wpkh",)]),
        ("both-wallets", ["p2sh-p2wpkh"], [("wallet", 1), ("other",)]),
    ],
}
RESERVE_KINDS = ["p2wpkh", "p2tr-key", "p2pkh", "p2sh-p2wpkh", "p2wpkh", "p2tr-key", "p2wpkh", "p2tr-key"]
SAMPLE_TIP = 110
REORG_FORK = 108  # make_reorg's branch starts on this block


def build_sample_chain(datadir: Path) -> KernelChain:
    """The deterministic sample chain, genesis to height 110 (vectors/chain holds its blocks).

    Heights 1-4: coinbases funding every input kind; 5: reserve coins; 6-100
    empty; 101-104: SAMPLE_TXS, paying TEST_WALLET (labels 1, 7 and change 0)
    and OTHER_WALLET; 105-108: spends of those payments (some txs fully spent,
    some partly); 109-110: the transactions `make_reorg` keeps, replaces and drops.
    """
    chain = KernelChain(datadir, SAMPLE_SEED)
    funding = {n: chain.fund([k for case in cases for k in case[1]]) for n, cases in SAMPLE_TXS.items()}
    chain.reserve = chain.fund(RESERVE_KINDS)
    while chain.tip_height < MATURITY:
        chain.mine()
    txs: dict[str, TxRecord] = {}
    for n, cases in SAMPLE_TXS.items():
        coins = iter(funding[n])
        block = []
        for name, kinds, outs, *decoy in cases:
            block.append(chain.transaction(name, [next(coins) for _ in kinds], outs, decoy=bool(decoy)))
            txs[name] = block[-1]
        chain.mine(block)

    def paid(name: str, *which: int) -> list:
        return [chain.coin(txs[name].txid32, txs[name].payments[i].vout) for i in which]

    def spend(name: str, coins: list, outs: list[tuple]) -> TxRecord:
        txs[name] = chain.transaction(name, coins, outs)
        return txs[name]

    chain.mine(
        [
            spend("spend-all-outputs", paid("p2tr-key-path", 0, 1, 2, 3), [("wallet", 0), ("p2wpkh",)]),
            spend("spend-one-of-two", paid("p2tr-script-path", 0), [("other",), ("p2wpkh",)]),
        ]
    )
    chain.mine()
    chain.mine([spend("spend-the-second", paid("p2tr-script-path", 1) + paid("p2pkh", 0), [("wallet", 1), ("other",)])])
    chain.mine([spend("spend-with-funding", paid("many-outputs", 2) + [chain.reserve.pop()], [("wallet", None), ("p2tr",)])])
    chain.mine(
        [
            spend("reorg-kept", [chain.reserve.pop()], [("wallet", 7), ("p2wpkh",)]),
            spend("reorg-conflicted", paid("spend-all-outputs", 0), [("other",)]),
        ]
    )
    chain.mine([spend("reorg-dropped", paid("both-wallets", 0), [("wallet", 0), ("p2wpkh",)])])
    assert chain.tip_height == SAMPLE_TIP
    return chain


def replay(source: KernelChain, datadir: Path, height: int | None = None) -> KernelChain:
    """A new kernel in `datadir` that processed `source`'s active blocks 1..height (default: all).

    The copy shares the source's records, coins and reserve (copied), so the
    sender-side expectations and `make_reorg` work on it.
    """
    chain = KernelChain(datadir, f"replay of {source.tip_hash.hex()}")
    end = source.tip_height if height is None else height
    for h in range(1, end + 1):
        chain.submit(source.block(h))
    chain.records.update(source.records)
    chain.coins.update(source.coins)
    chain.reserve = list(source.reserve)
    return chain


@dataclass(frozen=True)
class Reorg:
    """What `make_reorg` changed: heights, both branches' hashes and the txs that moved."""

    fork_height: int
    old_hashes: tuple[bytes, ...]
    new_hashes: tuple[bytes, ...]
    kept: TxRecord  # on both branches, at another height on the new one
    conflicted: TxRecord  # only on the old branch: its input is spent by `replacement` on the new one
    replacement: TxRecord
    dropped: TxRecord  # only on the old branch, its inputs unspent on the new one
    added: TxRecord  # only on the new branch


def make_reorg(chain: KernelChain) -> Reorg:
    """Switch a copy of the sample chain to a longer branch from height REORG_FORK.

    New blocks: the replacement of "reorg-conflicted" (same input, other
    outputs), then "reorg-kept" again, then a new payment; "reorg-dropped" is
    left out. Checks the kernel's tip is the new branch's last block.
    """
    old = chain.active()
    assert old[-1].height == SAMPLE_TIP, "make_reorg expects the sample chain"
    by_name = {t.name: t for b in old[REORG_FORK + 1 :] for t in b.txs}
    conflicted = by_name["reorg-conflicted"]
    replacement = chain.transaction("reorg-replacement", [chain.coins[conflicted.inputs36[0]]], [("wallet", 1), ("p2tr",)])
    added = chain.transaction("reorg-added", [chain.reserve.pop()], [("wallet", None), ("other",)])
    parent = old[REORG_FORK].hash32
    new = []
    for txs in ([replacement], [by_name["reorg-kept"]], [added]):
        parent = chain.mine(txs, parent32=parent).hash32
        new.append(parent)
    assert chain.tip_hash == new[-1], "the kernel did not switch to the longer branch"
    old_hashes = tuple(b.hash32 for b in old[REORG_FORK + 1 :])
    return Reorg(REORG_FORK, old_hashes, tuple(new), by_name["reorg-kept"], conflicted, replacement, by_name["reorg-dropped"], added)


def rest_server(chain: KernelChain, mempool=None) -> NodeServer:
    """A stand-in for Core's REST interface over `chain` on 127.0.0.1 (use as a context manager; `.url`),
    with `mempool` (a node_mempool.NodeMempool) behind its mempool routes."""
    return NodeServer(RestHandler, chain, mempool=mempool)


def rpc_server(chain: KernelChain, credentials: str = "user:pass", mempool=None) -> NodeServer:
    """A stand-in for Core's JSON-RPC over `chain` (Basic auth with `credentials`), with `mempool`'s calls."""
    return NodeServer(RpcHandler, chain, credentials=credentials, mempool=mempool)
