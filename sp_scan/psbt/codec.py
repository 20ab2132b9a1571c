"""The PSBT version 2 codec: `Psbt` (always well-formed), parsing and serialization.

Parsing (and building a `Psbt`) refuses what BIP174/BIP370/BIP375 forbid in the encoding itself:
truncation, trailing bytes, duplicate keys, wrong key or value widths, version 0, missing
version-2 fields, an output with neither a script nor silent-payment data (rule "psbt structure").

A hostile PSBT costs bounded memory: input and output counts are checked against what a
transaction of MAX_TX_WEIGHT can hold before any map is read, every map and entry is charged
against a budget of 3× the PSBT's size plus MAP_ALLOWANCE as it is read, and a previous
transaction (PSBT_IN_NON_WITNESS_UTXO) is read without being built. Parsing takes at most
4× the PSBT's size plus a constant, the PSBT included.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from .. import crypto
from ..errors import MalformedDataError, PSBTError
from ..wire import MAX_MONEY, MAX_TX_WEIGHT, MAX_WITNESS_ITEMS, Reader, compact_size, parse_txout, parse_witness, tx_output
from .fields import (
    GLOBAL_INPUT_COUNT, GLOBAL_OUTPUT_COUNT, GLOBAL_SP_DLEQ, GLOBAL_SP_ECDH_SHARE, GLOBAL_TX_MODIFIABLE,
    GLOBAL_TX_VERSION, GLOBAL_UNSIGNED_TX, GLOBAL_VERSION, IN_FINAL_SCRIPTWITNESS, IN_NON_WITNESS_UTXO,
    IN_OUTPUT_INDEX, IN_PREVIOUS_TXID, IN_REQUIRED_HEIGHT_LOCKTIME, IN_REQUIRED_TIME_LOCKTIME, IN_SP_DLEQ,
    IN_SP_ECDH_SHARE, IN_SP_SPEND_BIP32_DERIVATION, IN_WITNESS_UTXO, MAGIC, MODIFIABLE_INPUTS_OUTPUTS, Map, OUT_AMOUNT, OUT_SCRIPT, OUT_SP_V0_INFO,
    OUT_SP_V0_LABEL, WIDTHS, entries, field_key, field_name, split_key, structure_error,
)  # fmt: skip
from .inputs import InputInfo, classify

_LOCKTIME_THRESHOLD = 500_000_000
MAX_INPUTS = MAX_TX_WEIGHT // (4 * 41)
"""24,390: the most inputs a transaction holds (each takes at least 41 bytes of non-witness data)."""
MAX_OUTPUTS = MAX_TX_WEIGHT // (4 * 9)
"""111,111: the most outputs a transaction holds (each takes at least 9 bytes)."""
MAP_ALLOWANCE = 8 << 20
"""The bytes of parsed maps every PSBT may take beyond 3× its size (a few hundred thousand entries)."""
_MAP_COST, _ENTRY_COST = 600, 160
"""What a parsed map (a dict, and the Psbt's copy of it) and an entry (two bytes objects, two dict
slots) take in memory beyond their bytes, rounded up from CPython 3.11's sizes."""


@dataclass(frozen=True, slots=True)
class SPOutput:
    """An output paying a silent-payments address (it has PSBT_OUT_SP_V0_INFO).

    Attributes:
        index: the output's position.
        scan_pubkey33, spend_pubkey33: the address's keys (the spend key as given, labelled or not).
        label: PSBT_OUT_SP_V0_LABEL's m, or None.
        script: PSBT_OUT_SCRIPT, or None while it is not computed.
    """

    index: int
    scan_pubkey33: bytes
    spend_pubkey33: bytes
    label: int | None
    script: bytes | None


@dataclass(frozen=True, slots=True)
class Psbt:
    """A well-formed PSBT version 2 with BIP375 fields; role functions return new values.

    Attributes:
        global_map: the global map.
        inputs: one map per input.
        outputs: one map per output.

    Raises:
        PSBTError: (rule "psbt structure") a rule of the encoding is broken.
    """

    global_map: Map
    inputs: tuple[Map, ...]
    outputs: tuple[Map, ...]
    _infos: tuple[InputInfo, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "global_map", dict(self.global_map))
        object.__setattr__(self, "inputs", tuple(dict(m) for m in self.inputs))
        object.__setattr__(self, "outputs", tuple(dict(m) for m in self.outputs))
        _check_structure(self)
        object.__setattr__(self, "_infos", tuple(classify(i, m) for i, m in enumerate(self.inputs)))

    @classmethod
    def from_bytes(cls, data: bytes) -> Psbt:
        """Parse the binary form.

        Raises:
            PSBTError: truncated, trailing bytes, a duplicate key, a non-canonical
                compact size, or any rule `Psbt` checks.
        """
        r = Reader(bytes(data), error=MalformedDataError, what="PSBT")
        try:
            if r.read(5) != MAGIC:
                raise structure_error("not a PSBT (bad magic bytes)")
            budget = _Budget(len(r.data))
            global_map = _read_map(r, "global map", budget)
            version = global_map.get(field_key(GLOBAL_VERSION))
            if version is None:
                raise structure_error("PSBT version 0 is not supported: BIP375 needs PSBT version 2 (BIP370)")
            _check_widths("global", GLOBAL_VERSION, b"", version, "global map")
            if version != (2).to_bytes(4, "little"):
                raise structure_error(f"PSBT version {int.from_bytes(version, 'little')} is not supported (need 2)")
            n_in, n_out = (_count(global_map, t) for t in (GLOBAL_INPUT_COUNT, GLOBAL_OUTPUT_COUNT))
            for n, most, what in ((n_in, MAX_INPUTS, "inputs"), (n_out, MAX_OUTPUTS, "outputs")):
                if n > most:
                    raise structure_error(f"{n:,} {what}: more than a transaction can hold ({most:,} in {MAX_TX_WEIGHT:,} weight units)")
            if n_in + n_out > len(r.data) - r.pos:
                raise structure_error(f"{n_in:,} input and {n_out:,} output maps do not fit in the {len(r.data) - r.pos:,} bytes left")
            inputs = tuple(_read_map(r, f"input {i}", budget) for i in range(n_in))
            outputs = tuple(_read_map(r, f"output {i}", budget) for i in range(n_out))
            r.end()
        except PSBTError:
            raise
        except MalformedDataError as exc:
            raise structure_error(str(exc)) from None
        return cls(global_map, inputs, outputs)

    @classmethod
    def from_base64(cls, text: str) -> Psbt:
        """Parse the base64 form (whitespace around it ignored).

        Raises:
            PSBTError: not base64, or as `from_bytes`.
        """
        return cls.from_bytes(_from_base64(text.encode("ascii", "replace")))

    def to_bytes(self) -> bytes:
        """Serialize: the magic, then every map in order, each key in its stored order."""
        out = [MAGIC]
        for m in (self.global_map, *self.inputs, *self.outputs):
            for key, value in m.items():
                out += [compact_size(len(key)), key, compact_size(len(value)), value]
            out.append(b"\x00")
        return b"".join(out)

    def to_base64(self) -> str:
        """Serialize as base64."""
        return base64.b64encode(self.to_bytes()).decode()

    def input_info(self) -> tuple[InputInfo, ...]:
        """What BIP352 makes of each input, in input order."""
        return self._infos

    def sp_outputs(self) -> list[SPOutput]:
        """The outputs paying silent-payments addresses, in output order."""
        out = []
        for i, m in enumerate(self.outputs):
            info = m.get(field_key(OUT_SP_V0_INFO))
            if info is not None:
                label = m.get(field_key(OUT_SP_V0_LABEL))
                out.append(SPOutput(i, info[:33], info[33:], None if label is None else int.from_bytes(label, "little"), m.get(field_key(OUT_SCRIPT))))
        return out


def parse(data: bytes) -> Psbt:
    """Parse a PSBT given as binary or as base64 text (as files and `-` hold them).

    Raises:
        PSBTError: as `Psbt.from_bytes` / `Psbt.from_base64`.
    """
    if bytes(data[:5]) == MAGIC:
        return Psbt.from_bytes(data)
    return Psbt.from_bytes(_from_base64(bytes(data)))


def _from_base64(text: bytes) -> bytes:
    """Decode base64 with whitespace anywhere (one copy without it, no list of pieces)."""
    try:
        return base64.b64decode(text.translate(None, _WHITESPACE), validate=True)
    except (binascii.Error, ValueError):
        raise structure_error("neither a binary PSBT nor base64 text") from None


_WHITESPACE = b" \t\n\r\v\f"


class _Budget:
    """The memory parsed maps may still take: 3× the PSBT's size plus MAP_ALLOWANCE, charged as read."""

    __slots__ = ("left",)

    def __init__(self, size: int) -> None:
        self.left = 3 * size + MAP_ALLOWANCE

    def charge(self, cost: int, where: str) -> None:
        self.left -= cost
        if self.left < 0:
            raise structure_error(f"{where}: too many small maps or entries for the PSBT's size (parsed, they would take more than 3× its size in memory)")


def _read_map(r: Reader, where: str, budget: _Budget) -> dict[bytes, bytes]:
    """One map, up to its 0x00 separator; each map and entry is charged to `budget` as it is read.

    Raises:
        PSBTError: a key type that is not a canonical compact size, a duplicate key, or the budget spent.
        MalformedDataError: truncated, or a length that is not a canonical compact size.
    """
    m: dict[bytes, bytes] = {}
    r.what = f"PSBT {where}"
    budget.charge(_MAP_COST, where)
    data, size = r.data, len(r.data)
    while True:
        pos = r.pos
        n = data[pos] if pos < size else 0xFF
        if n == 0:
            r.pos = pos + 1
            return m
        at = pos + 1 + n  # the usual entry, read inline (a hostile map is millions of them): one-byte lengths, all there
        value: bytes | None = None
        if n < 0xFD and at < size and data[at] < 0xFD and at + 1 + data[at] <= size:
            key, value = data[pos + 1 : at], data[at + 1 : at + 1 + data[at]]
            r.pos = at + 1 + len(value)
        else:
            key = r.var_bytes()
        if key[0] >= 0xFD:
            try:
                split_key(key)
            except MalformedDataError:
                raise structure_error(f"{where}: a key's type is not a canonical compact size") from None
        if key in m:
            raise structure_error(f"{where}: duplicate key {key.hex()}")
        if value is None:
            value = r.var_bytes()
        m[key] = value
        budget.charge(_ENTRY_COST + len(key) + len(value), where)


def _count(global_map: Map, key_type: int) -> int:
    value = global_map.get(field_key(key_type))
    if value is None:
        raise structure_error(f"PSBT version 2 requires {field_name('global', key_type)}")
    r = Reader(value, error=MalformedDataError, what=field_name("global", key_type))
    n = r.compact_size()
    r.end()
    return n


def _check_structure(p: Psbt) -> None:
    """Every rule of the encoding: widths, required and excluded fields, valid keys (rule "psbt structure")."""
    g = p.global_map
    for kind, maps in (("global", (g,)), ("input", p.inputs), ("output", p.outputs)):
        for i, m in enumerate(maps):
            where = "global map" if kind == "global" else f"{kind} {i}"
            for key, value in m.items():
                key_type, keydata = split_key(key)
                _check_widths(kind, key_type, keydata, value, where)
    if field_key(GLOBAL_UNSIGNED_TX) in g:
        raise structure_error("PSBT_GLOBAL_UNSIGNED_TX is not allowed in PSBT version 2")
    if g.get(field_key(GLOBAL_VERSION)) != (2).to_bytes(4, "little"):
        raise structure_error("PSBT_GLOBAL_VERSION must be 2: BIP375 needs PSBT version 2 (BIP370)")
    tx_version = g.get(field_key(GLOBAL_TX_VERSION))
    if tx_version is None or int.from_bytes(tx_version, "little") < 2:
        raise structure_error("PSBT version 2 requires PSBT_GLOBAL_TX_VERSION of at least 2")
    if (_count(g, GLOBAL_INPUT_COUNT), _count(g, GLOBAL_OUTPUT_COUNT)) != (len(p.inputs), len(p.outputs)):
        raise structure_error("PSBT_GLOBAL_INPUT_COUNT / OUTPUT_COUNT do not match the maps")
    for keydata, _ in (*entries(g, GLOBAL_SP_ECDH_SHARE), *entries(g, GLOBAL_SP_DLEQ)):
        _point(keydata, "global map: a scan key")
    for _, value in entries(g, GLOBAL_SP_ECDH_SHARE):
        _point(value, "global map: PSBT_GLOBAL_SP_ECDH_SHARE")
    for i, m in enumerate(p.inputs):
        _check_input(i, m)
    computed_sp = False
    for i, m in enumerate(p.outputs):
        if field_key(OUT_AMOUNT) not in m:
            raise structure_error(f"output {i}: PSBT version 2 requires PSBT_OUT_AMOUNT")
        amount = int.from_bytes(m[field_key(OUT_AMOUNT)], "little", signed=True)
        if not 0 <= amount <= MAX_MONEY:
            raise structure_error(f"output {i}: PSBT_OUT_AMOUNT {amount} out of range")
        info = m.get(field_key(OUT_SP_V0_INFO))
        if info is None and field_key(OUT_SP_V0_LABEL) in m:
            raise structure_error(f"output {i}: PSBT_OUT_SP_V0_LABEL without PSBT_OUT_SP_V0_INFO")
        if info is None and field_key(OUT_SCRIPT) not in m:
            raise structure_error(f"output {i} has neither PSBT_OUT_SCRIPT nor PSBT_OUT_SP_V0_INFO")
        if info is not None:
            _point(info[:33], f"output {i}: PSBT_OUT_SP_V0_INFO scan key")
            _point(info[33:], f"output {i}: PSBT_OUT_SP_V0_INFO spend key")
            computed_sp |= field_key(OUT_SCRIPT) in m
    modifiable = g.get(field_key(GLOBAL_TX_MODIFIABLE), b"\x00")[0]
    if computed_sp and modifiable & MODIFIABLE_INPUTS_OUTPUTS:
        raise structure_error("PSBT_GLOBAL_TX_MODIFIABLE lets inputs or outputs change, but a silent-payment output script is set")


def _check_widths(kind: str, key_type: int, keydata: bytes, value: bytes, where: str) -> None:
    widths = WIDTHS.get((kind, key_type))
    if widths is None:
        return
    key_widths, value_widths = widths
    name = field_name(kind, key_type)
    if key_widths is not None and len(keydata) not in key_widths:
        raise structure_error(f"{where}: {name} key data is {len(keydata)} bytes, expected {' or '.join(map(str, key_widths))}")
    if value_widths is not None and len(value) not in value_widths:
        raise structure_error(f"{where}: {name} is {len(value)} bytes, expected {' or '.join(map(str, value_widths))}")


def _point(data33: bytes, what: str) -> None:
    if crypto.point(data33) is None:
        raise structure_error(f"{what} is not a valid compressed point")


def _check_input(i: int, m: Map) -> None:
    for key_type in (IN_PREVIOUS_TXID, IN_OUTPUT_INDEX):
        if field_key(key_type) not in m:
            raise structure_error(f"input {i}: PSBT version 2 requires {field_name('input', key_type)}")
    time_lock = m.get(field_key(IN_REQUIRED_TIME_LOCKTIME))
    if time_lock is not None and int.from_bytes(time_lock, "little") < _LOCKTIME_THRESHOLD:
        raise structure_error(f"input {i}: PSBT_IN_REQUIRED_TIME_LOCKTIME is below {_LOCKTIME_THRESHOLD}")
    height_lock = m.get(field_key(IN_REQUIRED_HEIGHT_LOCKTIME))
    if height_lock is not None and not 0 < int.from_bytes(height_lock, "little") < _LOCKTIME_THRESHOLD:
        raise structure_error(f"input {i}: PSBT_IN_REQUIRED_HEIGHT_LOCKTIME is not in [1, {_LOCKTIME_THRESHOLD})")
    try:
        utxo = m.get(field_key(IN_WITNESS_UTXO))
        from_witness = parse_txout(utxo).script if utxo is not None else None
        full = m.get(field_key(IN_NON_WITNESS_UTXO))
        if full is not None:
            vout = int.from_bytes(m[field_key(IN_OUTPUT_INDEX)], "little")
            txid32, spent = tx_output(full, vout)
            if txid32 != m[field_key(IN_PREVIOUS_TXID)]:
                raise structure_error(f"input {i}: PSBT_IN_NON_WITNESS_UTXO is not the transaction PSBT_IN_PREVIOUS_TXID names")
            if spent is None:
                raise structure_error(f"input {i}: PSBT_IN_OUTPUT_INDEX {vout} is past the outputs of PSBT_IN_NON_WITNESS_UTXO")
            if from_witness is not None and spent.script != from_witness:
                raise structure_error(f"input {i}: PSBT_IN_WITNESS_UTXO and PSBT_IN_NON_WITNESS_UTXO disagree")
        witness = m.get(field_key(IN_FINAL_SCRIPTWITNESS))
        if witness is not None:
            parse_witness(witness, MAX_WITNESS_ITEMS)
    except PSBTError:
        raise
    except MalformedDataError as exc:
        raise structure_error(f"input {i}: {exc}") from None
    for keydata, _ in (*entries(m, IN_SP_ECDH_SHARE), *entries(m, IN_SP_DLEQ)):
        _point(keydata, f"input {i}: a scan key")
    for _, value in entries(m, IN_SP_ECDH_SHARE):
        _point(value, f"input {i}: PSBT_IN_SP_ECDH_SHARE")
    for keydata, value in entries(m, IN_SP_SPEND_BIP32_DERIVATION):
        _point(keydata, f"input {i}: PSBT_IN_SP_SPEND_BIP32_DERIVATION spend key")
        if len(value) < 4 or len(value) % 4:
            raise structure_error(f"input {i}: PSBT_IN_SP_SPEND_BIP32_DERIVATION is {len(value)} bytes, not a 4-byte fingerprint and 4-byte path steps")
