"""Spending the wallet's coins: recipients, coin selection, fees and Core's relay rules, and the PSBT (BIP370/375/376).

Every coin is a silent-payment output spent by its key path, so a spend's final size is known
before it is signed: each input is 41 bytes and a 66-byte witness (one 64-byte SIGHASH_DEFAULT
signature), 57.5 vbytes; a silent-payment output is a 34-byte P2TR script. The fee is the asked
rate (sat/kvB, as Core counts it) times that vsize, rounded up: the paid rate is at least the
asked one and less than 1 sat/vB above it. Change goes to the wallet's change label (m = 0),
or to a given address; a change output below its dust threshold is left out and its satoshis
go to the fee only while that keeps the rate within 1 sat/vB of the asked one: otherwise the
selection takes another coin, and with coins given (`coins=`) the spend is refused.

Core's relay rules applied (src/policy/policy.cpp, validation.cpp): every output at least its
dust threshold at the dust relay fee of 3 sat/vB (GetDustThreshold: the output's size plus 67
bytes to spend a witness program or 148 otherwise, times 3), weight at most MAX_STANDARD_TX_WEIGHT,
a non-witness size of at least 65 bytes, version 2, a fee rate of at least Core 30's
minrelaytxfee (0.1 sat/vB). Coin selection: the largest coins first until the outputs, the fee
and a change output above dust (or a fee within the bound without one) are covered; failing
that, a bounded search for a set of coins that needs no change.
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from .. import address as sp_address
from ..errors import InvalidAddressError, SpendError
from ..network import get as get_network
from ..psbt import Psbt, spend_fields
from ..psbt.fields import (
    GLOBAL_FALLBACK_LOCKTIME, GLOBAL_INPUT_COUNT, GLOBAL_OUTPUT_COUNT, GLOBAL_TX_VERSION, GLOBAL_VERSION, IN_OUTPUT_INDEX,
    IN_PREVIOUS_TXID, IN_SEQUENCE, IN_WITNESS_UTXO, OUT_AMOUNT, OUT_SCRIPT, OUT_SP_V0_INFO, OUT_SP_V0_LABEL, field_key,
)  # fmt: skip
from ..wire import TxOut, compact_size
from .store import WalletOutput

TX_VERSION = 2
RBF_SEQUENCE = 0xFFFFFFFD
"""nSequence of every input: replaceable (BIP125) and lock time enabled."""
DUST_RELAY_FEE = 3000
"""sat/kvB: Core's DUST_RELAY_TX_FEE."""
MIN_RELAY_FEE = 100
"""sat/kvB: Core 30's default minrelaytxfee (0.1 sat/vB)."""
INCREMENTAL_RELAY_FEE = 100
"""sat/kvB: Core 30's default incrementalrelayfee: what a replacement pays beyond the fee it replaces, per vbyte (BIP125)."""
MAX_FEE_RATE = 10_000_000
"""sat/kvB: Core's default maxfeerate (DEFAULT_MAX_RAW_TX_FEE_RATE, 0.10 BTC/kvB = 10,000 sat/vB)."""
MAX_STANDARD_TX_WEIGHT = 400_000
MIN_STANDARD_TX_NONWITNESS_SIZE = 65
INPUT_BYTES, INPUT_WITNESS_BYTES = 41, 66
P2TR_SCRIPT_BYTES = 34
SEARCH_TRIES = 100_000
"""Subsets the no-change search visits at most."""


@dataclass(frozen=True, slots=True)
class Recipient:
    """One output of a spend.

    Attributes:
        amount: satoshis.
        script: the scriptPubKey it pays, or None for a silent-payments address.
        sp: the silent-payments address it pays, or None.
        label: PSBT_OUT_SP_V0_LABEL (the wallet's own change: 0), or None.
        is_change: True for the change output.
    """

    amount: int
    script: bytes | None = None
    sp: sp_address.SPAddress | None = None
    label: int | None = None
    is_change: bool = False

    @property
    def script_bytes(self) -> int:
        """The length of the script it will have (a silent-payment output is P2TR)."""
        return P2TR_SCRIPT_BYTES if self.script is None else len(self.script)

    def as_change(self, amount: int) -> Recipient:
        """This destination as the change output of `amount` sats."""
        return Recipient(amount, self.script, self.sp, self.label, True)


def recipient(address: str, amount: int, network: str) -> Recipient:
    """The output paying `amount` to an address of `network`: silent-payments, segwit or base58.

    Raises:
        InvalidAddressError: the address does not decode, or is another network's.
        SpendError: a negative amount or one above 21 million bitcoin.
    """
    if not 0 <= amount <= 21_000_000 * 100_000_000:
        raise SpendError(f"{amount} sats is not an amount")
    hrp = get_network(network).hrp
    if address.lower().rpartition("1")[0] in sp_address.HRPS:
        sp = sp_address.decode(address)
        if sp.hrp != hrp:
            raise InvalidAddressError(f"{address[:12]}… is a silent-payments address of another network (not {network}'s {hrp})")
        return Recipient(amount, sp=sp)
    return Recipient(amount, script=sp_address.output_script(address, network))


def fee_rate_kvb(sat_per_vb: str | float | Decimal) -> int:
    """A fee rate in sat/vB (at most 3 decimals) as Core's sat/kvB.

    Raises:
        SpendError: not a number, more than 3 decimals, or below MIN_RELAY_FEE.
    """
    try:
        kvb = Decimal(str(sat_per_vb)) * 1000
    except InvalidOperation:
        raise SpendError(f"fee rate {sat_per_vb!r} is not a number of sat/vB") from None
    if not kvb.is_finite() or kvb != kvb.to_integral_value():
        raise SpendError(f"fee rate {sat_per_vb} sat/vB: at most 3 decimals (Core counts sat/kvB)")
    if kvb < MIN_RELAY_FEE:
        raise SpendError(f"fee rate {sat_per_vb} sat/vB is below Core's minimum relay fee ({MIN_RELAY_FEE / 1000} sat/vB)")
    return int(kvb)


def check_fee_rate(rate_kvb: int, max_fee_rate_kvb: int | None) -> None:
    """Refuse a fee rate above the ceiling: `max_fee_rate_kvb` when the caller gives one, else Core's maxfeerate.

    Raises:
        SpendError: the rate is above it.
    """
    ceiling = MAX_FEE_RATE if max_fee_rate_kvb is None else max_fee_rate_kvb
    if rate_kvb > ceiling:
        whose = "the --max-fee-rate given" if max_fee_rate_kvb is not None else "Core's default maxfeerate (0.10 BTC/kvB); a higher --max-fee-rate allows it"
        raise SpendError(f"fee rate {_sat_vb(rate_kvb)} sat/vB is above {_sat_vb(ceiling)} sat/vB, {whose}")


def _sat_vb(rate_kvb: int) -> str:
    return f"{Decimal(rate_kvb).scaleb(-3).normalize():f}"


def check_fee(planned: SpendPlan, max_fee_rate_kvb: int | None) -> None:
    """Refuse a spend whose fee is more than the amount it sends (its outputs but the change), unless the caller
    gave its own fee-rate ceiling.

    Raises:
        SpendError: the fee is above the amount sent.
    """
    sent = sum(r.amount for r in planned.outputs if not r.is_change)
    if max_fee_rate_kvb is None and planned.fee > sent:
        raise SpendError(f"the fee of {planned.fee:,} sats is more than the {sent:,} sats sent; --max-fee-rate allows it")


def check_replacement(planned: SpendPlan, replaced_fee: int) -> None:
    """Refuse a replacement that does not pay the fee it replaces plus Core's incremental relay fee for its own size
    (BIP125's rules 3 and 4, which Core's mempool applies).

    Raises:
        SpendError: it pays less.
    """
    least = replaced_fee + fee(INCREMENTAL_RELAY_FEE, planned.vsize)
    if planned.fee < least:
        raise SpendError(f"a replacement must pay at least {least:,} sats of fee (the {replaced_fee:,} it replaces and {INCREMENTAL_RELAY_FEE / 1000:g} sat/vB more), not {planned.fee:,}: raise --fee-rate")


def fee(rate_kvb: int, vsize: int) -> int:
    """The fee at `rate_kvb` for `vsize` vbytes, rounded up (Core's CFeeRate::GetFee)."""
    return -(-rate_kvb * vsize // 1000)


def _is_witness_program(script: bytes) -> bool:
    return 4 <= len(script) <= 42 and (script[0] == 0 or 0x51 <= script[0] <= 0x60) and script[1] == len(script) - 2


def dust_threshold(script_bytes: int, witness_program: bool = True, unspendable: bool = False) -> int:
    """Core's GetDustThreshold at the dust relay fee: the least amount an output of this script may hold.

    Args:
        script_bytes: the script's length.
        witness_program: a segwit script (spending it costs 67 bytes, else 148).
        unspendable: an OP_RETURN script (any amount, 0 included).
    """
    if unspendable:
        return 0
    size = 8 + len(compact_size(script_bytes)) + script_bytes + (67 if witness_program else 148)
    return fee(DUST_RELAY_FEE, size)


def output_dust(r: Recipient) -> int:
    """The dust threshold of a recipient's output."""
    if r.script is None:
        return dust_threshold(P2TR_SCRIPT_BYTES)
    unspendable = r.script[:1] == b"\x6a" or len(r.script) > 10_000
    return dust_threshold(len(r.script), _is_witness_program(r.script), unspendable)


def base_size(n_inputs: int, outputs: Sequence[Recipient]) -> int:
    """The non-witness size of a spend: version, inputs, outputs, lock time."""
    out = sum(8 + len(compact_size(r.script_bytes)) + r.script_bytes for r in outputs)
    return 4 + len(compact_size(n_inputs)) + INPUT_BYTES * n_inputs + len(compact_size(len(outputs))) + out + 4


def vsize(n_inputs: int, outputs: Sequence[Recipient]) -> int:
    """The final vsize of a spend of n key-path inputs: (4 × base + marker and flag + witnesses) / 4, rounded up."""
    return (4 * base_size(n_inputs, outputs) + 2 + INPUT_WITNESS_BYTES * n_inputs + 3) // 4


@dataclass(frozen=True, slots=True)
class SpendPlan:
    """A planned spend.

    Attributes:
        coins: the wallet outputs it spends, in input order.
        outputs: its outputs in order, change included.
        change: the change output's index, or None.
        fee: satoshis.
        vsize: the signed transaction's vsize.
        locktime: nLockTime (the wallet's synced height: discourages fee sniping).
        pending: the pending spend that holds its coins (`Wallet.create_psbt` reserves them), None for a plan.
    """

    coins: tuple[WalletOutput, ...]
    outputs: tuple[Recipient, ...]
    change: int | None
    fee: int
    vsize: int
    locktime: int
    pending: int | None = None

    @property
    def fee_rate(self) -> float:
        """sat/vB paid."""
        return self.fee / self.vsize


def _fits(coins: Sequence[WalletOutput], outputs: Sequence[Recipient], change: Recipient, rate_kvb: int) -> tuple[int, int | None] | None:
    """(fee, change amount or None) when these coins pay the outputs within the fee bound, else None."""
    total, paid = sum(c.amount for c in coins), sum(r.amount for r in outputs)
    size = vsize(len(coins), outputs)
    if fee(rate_kvb, size) <= total - paid <= (rate_kvb + 1000) * size // 1000:
        return total - paid, None
    size = vsize(len(coins), [*outputs, change])
    left = total - paid - fee(rate_kvb, size)
    if left >= output_dust(change):
        return fee(rate_kvb, size), left
    return None


def _search(coins: Sequence[WalletOutput], outputs: Sequence[Recipient], rate_kvb: int) -> list[WalletOutput] | None:
    """A set of coins that pays the outputs without change within the fee bound (depth first, largest first, bounded)."""
    paid, tries = sum(r.amount for r in outputs), 0
    suffix = [0] * (len(coins) + 1)
    for i in range(len(coins) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + coins[i].amount
    picked: list[WalletOutput] = []

    def visit(i: int, total: int) -> bool:
        nonlocal tries
        tries += 1
        size = vsize(len(picked), outputs)
        if picked and fee(rate_kvb, size) <= total - paid <= (rate_kvb + 1000) * size // 1000:
            return True
        if i == len(coins) or tries > SEARCH_TRIES or total + suffix[i] < paid + fee(rate_kvb, vsize(len(picked) + 1, outputs)):
            return False
        picked.append(coins[i])
        if visit(i + 1, total + coins[i].amount):
            return True
        picked.pop()
        return visit(i + 1, total)

    return picked if visit(0, 0) else None


def plan_spend(
    candidates: Sequence[WalletOutput], outputs: Sequence[Recipient], rate_kvb: int, change: Recipient, *, select: bool = True, locktime: int = 0
) -> SpendPlan:
    """Choose coins (or take them all, `select=False`), the change and the fee of a spend.

    Args:
        candidates: the coins it may spend (with `select=False`, the coins it spends).
        outputs: what it pays, in order.
        rate_kvb: the fee rate in sat/kvB (`fee_rate_kvb`).
        change: where change goes (its amount is ignored).
        locktime: nLockTime.

    Returns:
        The spend: the change, if any, at a random position among the outputs.

    Raises:
        SpendError: no output, an output below its dust threshold, not enough funds, coins that leave
            too much for the fee and too little for change, or a transaction over Core's size limits.
    """
    if not outputs:
        raise SpendError("a spend needs at least one output")
    for n, r in enumerate(outputs):
        if r.amount < output_dust(r):
            raise SpendError(f"output {n} pays {r.amount} sats, below its dust threshold of {output_dust(r)} sats (Core would not relay it)")
    if rate_kvb < MIN_RELAY_FEE:
        raise SpendError(f"fee rate {rate_kvb / 1000} sat/vB is below Core's minimum relay fee")
    coins = sorted(candidates, key=lambda c: (-c.amount, c.outpoint36)) if select else list(candidates)
    if not coins:
        raise SpendError("the wallet has no coin to spend" if select else "no coin given")
    chosen, fitted = None, None
    if select:
        for k in range(1, len(coins) + 1):
            fitted = _fits(coins[:k], outputs, change, rate_kvb)
            if fitted is not None:
                chosen = coins[:k]
                break
        if chosen is None:
            found = _search(coins, outputs, rate_kvb)
            if found is not None:
                chosen, fitted = found, _fits(found, outputs, change, rate_kvb)
    else:
        chosen, fitted = coins, _fits(coins, outputs, change, rate_kvb)
    if chosen is None or fitted is None:
        raise SpendError(_shortfall(coins, outputs, change, rate_kvb, select))
    fee_paid, change_amount = fitted
    final = list(outputs)
    if change_amount is not None:
        final.insert(secrets.randbelow(len(final) + 1), change.as_change(change_amount))
    final = _sp_order(final)
    change_index = next((i for i, r in enumerate(final) if r.is_change), None)
    size = vsize(len(chosen), final)
    weight = 4 * base_size(len(chosen), final) + 2 + INPUT_WITNESS_BYTES * len(chosen)
    if weight > MAX_STANDARD_TX_WEIGHT:
        raise SpendError(f"{len(chosen)} inputs make a transaction of {weight:,} weight units, above Core's standard limit of {MAX_STANDARD_TX_WEIGHT:,}")
    if base_size(len(chosen), final) < MIN_STANDARD_TX_NONWITNESS_SIZE:
        raise SpendError(f"the transaction would be {base_size(len(chosen), final)} bytes without witness, below Core's minimum of {MIN_STANDARD_TX_NONWITNESS_SIZE}")
    return SpendPlan(tuple(chosen), tuple(final), change_index, fee_paid, size, locktime)


def _shortfall(coins: Sequence[WalletOutput], outputs: Sequence[Recipient], change: Recipient, rate_kvb: int, select: bool) -> str:
    total, paid = sum(c.amount for c in coins), sum(r.amount for r in outputs)
    what = f"the wallet's {len(coins)} coin(s)" if select else f"the {len(coins)} coin(s) given"
    need = paid + fee(rate_kvb, vsize(len(coins), outputs))
    if total < need:
        return f"{what} hold {total:,} sats; the outputs and the fee at {rate_kvb / 1000} sat/vB need {need:,}"
    return (
        f"{what} leave {total - paid:,} sats beyond the outputs: too little for a change output above dust with its fee, and more "
        f"than 1 sat/vB above the asked fee rate without one; add a coin or change an amount"
    )


def _sp_order(outputs: list[Recipient]) -> list[Recipient]:
    """Put the silent-payment outputs of each scan key in the order of their spend keys, in the places they hold:
    k then counts alike in output order (sp-scan's PSBT rules) and in BIP375's sorted order."""
    out = list(outputs)
    groups: dict[bytes, list[int]] = {}
    for i, r in enumerate(out):
        if r.sp is not None:
            groups.setdefault(r.sp.scan_pubkey33, []).append(i)
    for places in groups.values():
        ordered = sorted((out[i] for i in places), key=lambda r: r.sp.spend_pubkey33)
        for i, r in zip(places, ordered):
            out[i] = r
    return out


def build_psbt(spend: SpendPlan, spend_pubkey33: bytes, origin: tuple[bytes, Sequence[int]] | None = None) -> Psbt:
    """The PSBT version 2 of a planned spend (BIP370 Constructor, BIP376 and BIP375 Updater).

    Each input: PSBT_IN_PREVIOUS_TXID, OUTPUT_INDEX, SEQUENCE, WITNESS_UTXO, PSBT_IN_SP_TWEAK and, with
    `origin`, PSBT_IN_SP_SPEND_BIP32_DERIVATION; each output: PSBT_OUT_AMOUNT and PSBT_OUT_SCRIPT, or
    PSBT_OUT_SP_V0_INFO (and PSBT_OUT_SP_V0_LABEL for the wallet's change), whose script the signer computes.

    Raises:
        InvalidKeyError: a bad spend key or origin.
    """
    g = {
        field_key(GLOBAL_VERSION): struct.pack("<I", 2),
        field_key(GLOBAL_TX_VERSION): struct.pack("<i", TX_VERSION),
        field_key(GLOBAL_FALLBACK_LOCKTIME): struct.pack("<I", spend.locktime),
        field_key(GLOBAL_INPUT_COUNT): compact_size(len(spend.coins)),
        field_key(GLOBAL_OUTPUT_COUNT): compact_size(len(spend.outputs)),
    }
    inputs = []
    for c in spend.coins:
        m = {
            field_key(IN_PREVIOUS_TXID): c.txid32,
            field_key(IN_OUTPUT_INDEX): struct.pack("<I", c.vout),
            field_key(IN_SEQUENCE): struct.pack("<I", RBF_SEQUENCE),
            field_key(IN_WITNESS_UTXO): TxOut(c.amount, b"\x51\x20" + c.output32).to_bytes(),
        }
        m.update(spend_fields(c.tweak32, spend_pubkey33, origin))
        inputs.append(m)
    outputs = []
    for r in spend.outputs:
        m = {field_key(OUT_AMOUNT): struct.pack("<q", r.amount)}
        if r.sp is None:
            m[field_key(OUT_SCRIPT)] = r.script
        else:
            m[field_key(OUT_SP_V0_INFO)] = r.sp.scan_pubkey33 + r.sp.spend_pubkey33
            if r.label is not None:
                m[field_key(OUT_SP_V0_LABEL)] = struct.pack("<I", r.label)
        outputs.append(m)
    return Psbt(g, inputs, outputs)
