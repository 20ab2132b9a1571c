"""Silent-payment outputs in PSBTs (BIP375 over PSBT version 2, BIP370).

A `Psbt` is always well-formed: parsing (and building one) refuses what
BIP174/BIP370/BIP375 forbid in the encoding itself (truncation, trailing
bytes, duplicate keys, wrong key or value widths, version 0, missing
version-2 fields, an output with neither a script nor silent-payment data).
The BIP375 checks that need the whole transaction follow, in the BIP's
order: `check_ecdh_coverage`, `check_input_eligibility`,
`check_output_scripts`; `verify` runs them all. The roles are functions
that return a new `Psbt`: `add_shares` (a signer's ECDH shares and DLEQ
proofs) and `compute_outputs` (the output scripts once every eligible input
is covered). Every failure is a `PSBTError` whose `rule` names the BIP375
check: "psbt structure", "ecdh coverage", "input eligibility" or
"output scripts".

Input keys come from the final scriptSig/witness when an input is
finalized, else from the prevout (P2TR's output key) or, for the hashed
types, from `PSBT_IN_BIP32_DERIVATION` as BIP375's Updater provides it.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from coincurve import PrivateKey

from . import crypto, dleq, extract, send, summary
from .wire import MAX_MONEY, Reader, compact_size, parse_tx, parse_txout, parse_witness
from .errors import InvalidKeyError, MalformedDataError, PSBTError
from .extract import NUMS_H, ScriptType
from .scan import K_MAX
from .types import OutPoint

STRUCTURE, COVERAGE, ELIGIBILITY, OUTPUT_SCRIPTS = "psbt structure", "ecdh coverage", "input eligibility", "output scripts"
"""The four BIP375 checks, as `PSBTError.rule` names them."""

MAGIC = b"psbt\xff"

# Key types (BIP174, BIP370, BIP371, BIP373, BIP375).
GLOBAL_UNSIGNED_TX, GLOBAL_XPUB, GLOBAL_TX_VERSION, GLOBAL_FALLBACK_LOCKTIME = 0x00, 0x01, 0x02, 0x03
GLOBAL_INPUT_COUNT, GLOBAL_OUTPUT_COUNT, GLOBAL_TX_MODIFIABLE = 0x04, 0x05, 0x06
GLOBAL_SP_ECDH_SHARE, GLOBAL_SP_DLEQ, GLOBAL_VERSION = 0x07, 0x08, 0xFB
IN_NON_WITNESS_UTXO, IN_WITNESS_UTXO, IN_PARTIAL_SIG, IN_SIGHASH_TYPE = 0x00, 0x01, 0x02, 0x03
IN_REDEEM_SCRIPT, IN_BIP32_DERIVATION, IN_FINAL_SCRIPTSIG, IN_FINAL_SCRIPTWITNESS = 0x04, 0x06, 0x07, 0x08
IN_PREVIOUS_TXID, IN_OUTPUT_INDEX, IN_SEQUENCE = 0x0E, 0x0F, 0x10
IN_REQUIRED_TIME_LOCKTIME, IN_REQUIRED_HEIGHT_LOCKTIME = 0x11, 0x12
IN_TAP_KEY_SIG, IN_TAP_SCRIPT_SIG, IN_TAP_BIP32_DERIVATION, IN_TAP_INTERNAL_KEY, IN_TAP_MERKLE_ROOT = 0x13, 0x14, 0x16, 0x17, 0x18
IN_SP_ECDH_SHARE, IN_SP_DLEQ = 0x1D, 0x1E
OUT_BIP32_DERIVATION, OUT_AMOUNT, OUT_SCRIPT, OUT_TAP_INTERNAL_KEY, OUT_TAP_BIP32_DERIVATION = 0x02, 0x03, 0x04, 0x05, 0x07
OUT_SP_V0_INFO, OUT_SP_V0_LABEL = 0x09, 0x0A

SIGHASH_DEFAULT, SIGHASH_ALL = 0x00, 0x01
_MODIFIABLE_INPUTS_OUTPUTS = 0x03
_LOCKTIME_THRESHOLD = 500_000_000

_NAMES = {
    "global": {GLOBAL_UNSIGNED_TX: "PSBT_GLOBAL_UNSIGNED_TX", GLOBAL_XPUB: "PSBT_GLOBAL_XPUB", GLOBAL_TX_VERSION: "PSBT_GLOBAL_TX_VERSION",
               GLOBAL_FALLBACK_LOCKTIME: "PSBT_GLOBAL_FALLBACK_LOCKTIME", GLOBAL_INPUT_COUNT: "PSBT_GLOBAL_INPUT_COUNT",
               GLOBAL_OUTPUT_COUNT: "PSBT_GLOBAL_OUTPUT_COUNT", GLOBAL_TX_MODIFIABLE: "PSBT_GLOBAL_TX_MODIFIABLE",
               GLOBAL_SP_ECDH_SHARE: "PSBT_GLOBAL_SP_ECDH_SHARE", GLOBAL_SP_DLEQ: "PSBT_GLOBAL_SP_DLEQ", GLOBAL_VERSION: "PSBT_GLOBAL_VERSION"},
    "input": {IN_NON_WITNESS_UTXO: "PSBT_IN_NON_WITNESS_UTXO", IN_WITNESS_UTXO: "PSBT_IN_WITNESS_UTXO", IN_PARTIAL_SIG: "PSBT_IN_PARTIAL_SIG",
              IN_SIGHASH_TYPE: "PSBT_IN_SIGHASH_TYPE", IN_REDEEM_SCRIPT: "PSBT_IN_REDEEM_SCRIPT", IN_BIP32_DERIVATION: "PSBT_IN_BIP32_DERIVATION",
              IN_FINAL_SCRIPTSIG: "PSBT_IN_FINAL_SCRIPTSIG", IN_FINAL_SCRIPTWITNESS: "PSBT_IN_FINAL_SCRIPTWITNESS",
              IN_PREVIOUS_TXID: "PSBT_IN_PREVIOUS_TXID", IN_OUTPUT_INDEX: "PSBT_IN_OUTPUT_INDEX", IN_SEQUENCE: "PSBT_IN_SEQUENCE",
              IN_REQUIRED_TIME_LOCKTIME: "PSBT_IN_REQUIRED_TIME_LOCKTIME", IN_REQUIRED_HEIGHT_LOCKTIME: "PSBT_IN_REQUIRED_HEIGHT_LOCKTIME",
              IN_TAP_KEY_SIG: "PSBT_IN_TAP_KEY_SIG", IN_TAP_SCRIPT_SIG: "PSBT_IN_TAP_SCRIPT_SIG",
              IN_TAP_BIP32_DERIVATION: "PSBT_IN_TAP_BIP32_DERIVATION", IN_TAP_INTERNAL_KEY: "PSBT_IN_TAP_INTERNAL_KEY",
              IN_TAP_MERKLE_ROOT: "PSBT_IN_TAP_MERKLE_ROOT", IN_SP_ECDH_SHARE: "PSBT_IN_SP_ECDH_SHARE", IN_SP_DLEQ: "PSBT_IN_SP_DLEQ"},
    "output": {OUT_BIP32_DERIVATION: "PSBT_OUT_BIP32_DERIVATION", OUT_AMOUNT: "PSBT_OUT_AMOUNT", OUT_SCRIPT: "PSBT_OUT_SCRIPT",
               OUT_TAP_INTERNAL_KEY: "PSBT_OUT_TAP_INTERNAL_KEY", OUT_TAP_BIP32_DERIVATION: "PSBT_OUT_TAP_BIP32_DERIVATION",
               OUT_SP_V0_INFO: "PSBT_OUT_SP_V0_INFO", OUT_SP_V0_LABEL: "PSBT_OUT_SP_V0_LABEL"},
}  # fmt: skip

# (map, type) -> (key data widths, value widths); None allows any width.
_WIDTHS: dict[tuple[str, int], tuple[tuple[int, ...] | None, tuple[int, ...] | None]] = {
    ("global", GLOBAL_XPUB): ((78,), None),
    ("global", GLOBAL_TX_VERSION): ((0,), (4,)),
    ("global", GLOBAL_FALLBACK_LOCKTIME): ((0,), (4,)),
    ("global", GLOBAL_INPUT_COUNT): ((0,), None),
    ("global", GLOBAL_OUTPUT_COUNT): ((0,), None),
    ("global", GLOBAL_TX_MODIFIABLE): ((0,), (1,)),
    ("global", GLOBAL_SP_ECDH_SHARE): ((33,), (33,)),
    ("global", GLOBAL_SP_DLEQ): ((33,), (64,)),
    ("global", GLOBAL_VERSION): ((0,), (4,)),
    ("input", IN_NON_WITNESS_UTXO): ((0,), None),
    ("input", IN_WITNESS_UTXO): ((0,), None),
    ("input", IN_PARTIAL_SIG): ((33, 65), None),
    ("input", IN_SIGHASH_TYPE): ((0,), (4,)),
    ("input", IN_REDEEM_SCRIPT): ((0,), None),
    ("input", IN_BIP32_DERIVATION): ((33, 65), None),
    ("input", IN_FINAL_SCRIPTSIG): ((0,), None),
    ("input", IN_FINAL_SCRIPTWITNESS): ((0,), None),
    ("input", IN_PREVIOUS_TXID): ((0,), (32,)),
    ("input", IN_OUTPUT_INDEX): ((0,), (4,)),
    ("input", IN_SEQUENCE): ((0,), (4,)),
    ("input", IN_REQUIRED_TIME_LOCKTIME): ((0,), (4,)),
    ("input", IN_REQUIRED_HEIGHT_LOCKTIME): ((0,), (4,)),
    ("input", IN_TAP_KEY_SIG): ((0,), (64, 65)),
    ("input", IN_TAP_SCRIPT_SIG): ((64,), (64, 65)),
    ("input", IN_TAP_BIP32_DERIVATION): ((32,), None),
    ("input", IN_TAP_INTERNAL_KEY): ((0,), (32,)),
    ("input", IN_TAP_MERKLE_ROOT): ((0,), (32,)),
    ("input", IN_SP_ECDH_SHARE): ((33,), (33,)),
    ("input", IN_SP_DLEQ): ((33,), (64,)),
    ("output", OUT_BIP32_DERIVATION): ((33, 65), None),
    ("output", OUT_AMOUNT): ((0,), (8,)),
    ("output", OUT_SCRIPT): ((0,), None),
    ("output", OUT_TAP_INTERNAL_KEY): ((0,), (32,)),
    ("output", OUT_TAP_BIP32_DERIVATION): ((32,), None),
    ("output", OUT_SP_V0_INFO): ((0,), (66,)),
    ("output", OUT_SP_V0_LABEL): ((0,), (4,)),
}

Map = Mapping[bytes, bytes]
"""One PSBT map: full key (compact-size type ‖ key data) -> value, in serialization order."""


def _key(key_type: int, keydata: bytes = b"") -> bytes:
    return compact_size(key_type) + keydata


def _split(key: bytes) -> tuple[int, bytes]:
    r = Reader(key, error=MalformedDataError, what="key")
    key_type = r.compact_size()
    return key_type, key[r.pos :]


def _entries(m: Map, key_type: int) -> Iterator[tuple[bytes, bytes]]:
    """(key data, value) of every entry of one type."""
    for key, value in m.items():
        t, keydata = _split(key)
        if t == key_type:
            yield keydata, value


def _name(kind: str, key_type: int) -> str:
    return _NAMES[kind].get(key_type, f"{kind} key type {key_type:#x}")


def _fail(message: str) -> PSBTError:
    return PSBTError(STRUCTURE, message)


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
class InputInfo:
    """What BIP352 makes of one PSBT input.

    Attributes:
        index: the input's position.
        outpoint: the output it spends.
        prevout_script: that output's scriptPubKey, or None without a UTXO field.
        eligible: True / False, or None while it cannot be told (no UTXO, P2SH without redeem script).
        pubkey: the key it contributes (33 bytes, or 32 x-only for P2TR) when known.
        reason: why it is not eligible, or why that is unknown ("" otherwise).
    """

    index: int
    outpoint: OutPoint
    prevout_script: bytes | None
    eligible: bool | None
    pubkey: bytes | None
    reason: str = ""

    @property
    def is_taproot(self) -> bool:
        """True when the input spends P2TR (its key counts with even Y)."""
        return self.prevout_script is not None and extract.script_type(self.prevout_script) is ScriptType.P2TR


@dataclass(frozen=True, slots=True)
class Status:
    """How far a PSBT's silent-payment outputs are (all checks passed).

    Attributes:
        sp_outputs: indices of the outputs with PSBT_OUT_SP_V0_INFO.
        computed: those of them that have PSBT_OUT_SCRIPT.
        ready: True when every scan key is covered, so `compute_outputs` can fill the rest.
    """

    sp_outputs: tuple[int, ...]
    computed: tuple[int, ...]
    ready: bool


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
        object.__setattr__(self, "_infos", tuple(_classify(i, m) for i, m in enumerate(self.inputs)))

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
                raise _fail("not a PSBT (bad magic bytes)")
            global_map = _read_map(r, "global map")
            version = global_map.get(_key(GLOBAL_VERSION))
            if version is None:
                raise _fail("PSBT version 0 is not supported: BIP375 needs PSBT version 2 (BIP370)")
            if version != (2).to_bytes(4, "little"):
                raise _fail(f"PSBT version {int.from_bytes(version[:4], 'little')} is not supported (need 2)")
            n_in, n_out = (_count(global_map, t) for t in (GLOBAL_INPUT_COUNT, GLOBAL_OUTPUT_COUNT))
            inputs = tuple(_read_map(r, f"input {i}") for i in range(n_in))
            outputs = tuple(_read_map(r, f"output {i}") for i in range(n_out))
            r.end()
        except PSBTError:
            raise
        except MalformedDataError as exc:
            raise _fail(str(exc)) from None
        return cls(global_map, inputs, outputs)

    @classmethod
    def from_base64(cls, text: str) -> Psbt:
        """Parse the base64 form (whitespace around it ignored).

        Raises:
            PSBTError: not base64, or as `from_bytes`.
        """
        try:
            data = base64.b64decode("".join(text.split()), validate=True)
        except (binascii.Error, ValueError):
            raise _fail("not base64") from None
        return cls.from_bytes(data)

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
            info = m.get(_key(OUT_SP_V0_INFO))
            if info is not None:
                label = m.get(_key(OUT_SP_V0_LABEL))
                out.append(SPOutput(i, info[:33], info[33:], None if label is None else int.from_bytes(label, "little"), m.get(_key(OUT_SCRIPT))))
        return out


def parse(data: bytes) -> Psbt:
    """Parse a PSBT given as binary or as base64 text (as files and `-` hold them).

    Raises:
        PSBTError: as `Psbt.from_bytes` / `Psbt.from_base64`.
    """
    if bytes(data[:5]) == MAGIC:
        return Psbt.from_bytes(data)
    try:
        text = bytes(data).decode("ascii")
    except UnicodeDecodeError:
        raise _fail("neither a binary PSBT nor base64 text") from None
    return Psbt.from_base64(text)


def _read_map(r: Reader, where: str) -> dict[bytes, bytes]:
    m: dict[bytes, bytes] = {}
    r.what = f"PSBT {where}"
    while True:
        key = r.var_bytes()
        if not key:
            return m
        try:
            _split(key)
        except MalformedDataError:
            raise _fail(f"{where}: a key's type is not a canonical compact size") from None
        if key in m:
            raise _fail(f"{where}: duplicate key {key.hex()}")
        m[key] = r.var_bytes()


def _count(global_map: Map, key_type: int) -> int:
    value = global_map.get(_key(key_type))
    if value is None:
        raise _fail(f"PSBT version 2 requires {_name('global', key_type)}")
    r = Reader(value, error=MalformedDataError, what=_name("global", key_type))
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
                key_type, keydata = _split(key)
                _check_widths(kind, key_type, keydata, value, where)
    if _key(GLOBAL_UNSIGNED_TX) in g:
        raise _fail("PSBT_GLOBAL_UNSIGNED_TX is not allowed in PSBT version 2")
    if g.get(_key(GLOBAL_VERSION)) != (2).to_bytes(4, "little"):
        raise _fail("PSBT_GLOBAL_VERSION must be 2: BIP375 needs PSBT version 2 (BIP370)")
    tx_version = g.get(_key(GLOBAL_TX_VERSION))
    if tx_version is None or int.from_bytes(tx_version, "little") < 2:
        raise _fail("PSBT version 2 requires PSBT_GLOBAL_TX_VERSION of at least 2")
    if (_count(g, GLOBAL_INPUT_COUNT), _count(g, GLOBAL_OUTPUT_COUNT)) != (len(p.inputs), len(p.outputs)):
        raise _fail("PSBT_GLOBAL_INPUT_COUNT / OUTPUT_COUNT do not match the maps")
    for keydata, _ in (*_entries(g, GLOBAL_SP_ECDH_SHARE), *_entries(g, GLOBAL_SP_DLEQ)):
        _point(keydata, "global map: a scan key")
    for _, value in _entries(g, GLOBAL_SP_ECDH_SHARE):
        _point(value, "global map: PSBT_GLOBAL_SP_ECDH_SHARE")
    for i, m in enumerate(p.inputs):
        _check_input(i, m)
    computed_sp = False
    for i, m in enumerate(p.outputs):
        if _key(OUT_AMOUNT) not in m:
            raise _fail(f"output {i}: PSBT version 2 requires PSBT_OUT_AMOUNT")
        amount = int.from_bytes(m[_key(OUT_AMOUNT)], "little", signed=True)
        if not 0 <= amount <= MAX_MONEY:
            raise _fail(f"output {i}: PSBT_OUT_AMOUNT {amount} out of range")
        info = m.get(_key(OUT_SP_V0_INFO))
        if info is None and _key(OUT_SP_V0_LABEL) in m:
            raise _fail(f"output {i}: PSBT_OUT_SP_V0_LABEL without PSBT_OUT_SP_V0_INFO")
        if info is None and _key(OUT_SCRIPT) not in m:
            raise _fail(f"output {i} has neither PSBT_OUT_SCRIPT nor PSBT_OUT_SP_V0_INFO")
        if info is not None:
            _point(info[:33], f"output {i}: PSBT_OUT_SP_V0_INFO scan key")
            _point(info[33:], f"output {i}: PSBT_OUT_SP_V0_INFO spend key")
            computed_sp |= _key(OUT_SCRIPT) in m
    modifiable = g.get(_key(GLOBAL_TX_MODIFIABLE), b"\x00")[0]
    if computed_sp and modifiable & _MODIFIABLE_INPUTS_OUTPUTS:
        raise _fail("PSBT_GLOBAL_TX_MODIFIABLE lets inputs or outputs change, but a silent-payment output script is set")


def _check_widths(kind: str, key_type: int, keydata: bytes, value: bytes, where: str) -> None:
    widths = _WIDTHS.get((kind, key_type))
    if widths is None:
        return
    key_widths, value_widths = widths
    name = _name(kind, key_type)
    if key_widths is not None and len(keydata) not in key_widths:
        raise _fail(f"{where}: {name} key data is {len(keydata)} bytes, expected {' or '.join(map(str, key_widths))}")
    if value_widths is not None and len(value) not in value_widths:
        raise _fail(f"{where}: {name} is {len(value)} bytes, expected {' or '.join(map(str, value_widths))}")


def _point(data33: bytes, what: str) -> None:
    if crypto.point(data33) is None:
        raise _fail(f"{what} is not a valid compressed point")


def _check_input(i: int, m: Map) -> None:
    for key_type in (IN_PREVIOUS_TXID, IN_OUTPUT_INDEX):
        if _key(key_type) not in m:
            raise _fail(f"input {i}: PSBT version 2 requires {_name('input', key_type)}")
    time_lock = m.get(_key(IN_REQUIRED_TIME_LOCKTIME))
    if time_lock is not None and int.from_bytes(time_lock, "little") < _LOCKTIME_THRESHOLD:
        raise _fail(f"input {i}: PSBT_IN_REQUIRED_TIME_LOCKTIME is below {_LOCKTIME_THRESHOLD}")
    height_lock = m.get(_key(IN_REQUIRED_HEIGHT_LOCKTIME))
    if height_lock is not None and not 0 < int.from_bytes(height_lock, "little") < _LOCKTIME_THRESHOLD:
        raise _fail(f"input {i}: PSBT_IN_REQUIRED_HEIGHT_LOCKTIME is not in [1, {_LOCKTIME_THRESHOLD})")
    try:
        utxo = m.get(_key(IN_WITNESS_UTXO))
        from_witness = parse_txout(utxo).script if utxo is not None else None
        full = m.get(_key(IN_NON_WITNESS_UTXO))
        if full is not None:
            tx = parse_tx(full)
            vout = int.from_bytes(m[_key(IN_OUTPUT_INDEX)], "little")
            if tx.txid32 != m[_key(IN_PREVIOUS_TXID)]:
                raise _fail(f"input {i}: PSBT_IN_NON_WITNESS_UTXO is not the transaction PSBT_IN_PREVIOUS_TXID names")
            if vout >= len(tx.outputs):
                raise _fail(f"input {i}: PSBT_IN_OUTPUT_INDEX {vout} is past the outputs of PSBT_IN_NON_WITNESS_UTXO")
            if from_witness is not None and tx.outputs[vout].script != from_witness:
                raise _fail(f"input {i}: PSBT_IN_WITNESS_UTXO and PSBT_IN_NON_WITNESS_UTXO disagree")
        witness = m.get(_key(IN_FINAL_SCRIPTWITNESS))
        if witness is not None:
            parse_witness(witness)
    except PSBTError:
        raise
    except MalformedDataError as exc:
        raise _fail(f"input {i}: {exc}") from None
    for keydata, _ in (*_entries(m, IN_SP_ECDH_SHARE), *_entries(m, IN_SP_DLEQ)):
        _point(keydata, f"input {i}: a scan key")
    for _, value in _entries(m, IN_SP_ECDH_SHARE):
        _point(value, f"input {i}: PSBT_IN_SP_ECDH_SHARE")


# ---- inputs: eligibility and keys -------------------------------------------


def _prevout_script(m: Map) -> bytes | None:
    utxo = m.get(_key(IN_WITNESS_UTXO))
    if utxo is not None:
        return parse_txout(utxo).script
    full = m.get(_key(IN_NON_WITNESS_UTXO))
    if full is not None:
        return parse_tx(full).outputs[int.from_bytes(m[_key(IN_OUTPUT_INDEX)], "little")].script
    return None


def _derivation_key(m: Map, key_hash20: bytes) -> tuple[bool, bytes | None, str]:
    """The input's key from PSBT_IN_BIP32_DERIVATION: (eligible, key or None, reason).

    The key hashing to key_hash20 is taken; failing that, the first one, as
    BIP375's reference validator does (its vectors pair keys and scripts
    that do not hash to each other). An uncompressed key is not eligible.
    """
    keys = [keydata for keydata, _ in _entries(m, IN_BIP32_DERIVATION)]
    if not keys:
        return True, None, "no PSBT_IN_BIP32_DERIVATION gives its public key"
    key = next((k for k in keys if crypto.hash160(k) == key_hash20), keys[0])
    if len(key) != 33 or crypto.point(key) is None:
        return False, None, "its key is not compressed"
    return True, key, ""


def _classify(i: int, m: Map) -> InputInfo:
    outpoint = OutPoint(m[_key(IN_PREVIOUS_TXID)], int.from_bytes(m[_key(IN_OUTPUT_INDEX)], "little"))
    script = _prevout_script(m)
    if script is None:
        return InputInfo(i, outpoint, None, None, None, "no PSBT_IN_WITNESS_UTXO or PSBT_IN_NON_WITNESS_UTXO")
    kind = extract.script_type(script)
    final_sig, final_wit = m.get(_key(IN_FINAL_SCRIPTSIG)), m.get(_key(IN_FINAL_SCRIPTWITNESS))
    if kind is ScriptType.WITNESS_UNKNOWN:
        return InputInfo(i, outpoint, script, False, None, "it spends a segwit version 2+ output")
    if final_sig is not None or final_wit is not None:
        key = extract.input_pubkey(script, final_sig or b"", parse_witness(final_wit or b""))
        return InputInfo(i, outpoint, script, key is not None, key, "" if key else "its final scriptSig/witness has no eligible key")
    if kind is ScriptType.P2TR:
        if m.get(_key(IN_TAP_INTERNAL_KEY)) == NUMS_H:
            return InputInfo(i, outpoint, script, False, None, "its taproot internal key is the NUMS point H")
        if crypto.lift_x(script[2:34]) is None:
            return InputInfo(i, outpoint, script, False, None, "its taproot output key is not on the curve")
        return InputInfo(i, outpoint, script, True, script[2:34])
    if kind is ScriptType.P2PKH:
        return InputInfo(i, outpoint, script, *_derivation_key(m, script[3:23]))
    if kind is ScriptType.P2WPKH:
        return InputInfo(i, outpoint, script, *_derivation_key(m, script[2:22]))
    if kind is ScriptType.P2SH:
        redeem = m.get(_key(IN_REDEEM_SCRIPT))
        if redeem is None:
            return InputInfo(i, outpoint, script, None, None, "it spends P2SH and has no PSBT_IN_REDEEM_SCRIPT")
        if crypto.hash160(redeem) != script[2:22]:
            raise _fail(f"input {i}: PSBT_IN_REDEEM_SCRIPT does not hash to the P2SH prevout")
        if extract.script_type(redeem) is not ScriptType.P2WPKH:
            return InputInfo(i, outpoint, script, False, None, "it spends P2SH that is not P2SH-P2WPKH")
        return InputInfo(i, outpoint, script, *_derivation_key(m, redeem[2:22]))
    return InputInfo(i, outpoint, script, False, None, "it spends a script type BIP352 does not use")


# ---- the BIP375 checks ------------------------------------------------------


def _scan_keys(p: Psbt) -> list[bytes]:
    return sorted({o.scan_pubkey33 for o in p.sp_outputs()})


def _share(m: Map, key_type: int, scan33: bytes) -> bytes | None:
    return m.get(_key(key_type, scan33))


def _pubkey_sum(infos: Sequence[InputInfo], what: str) -> bytes:
    """ser_P(A) over the eligible inputs, for verifying a global proof; rule "ecdh coverage"."""
    for info in infos:
        if info.eligible is None:
            raise PSBTError(COVERAGE, f"{what}: cannot tell whether input {info.index} is eligible ({info.reason})")
        if info.eligible and info.pubkey is None:
            raise PSBTError(COVERAGE, f"{what}: input {info.index} has no known public key ({info.reason})")
    keys = [info.pubkey for info in infos if info.eligible]
    total = crypto.add([crypto.point(k) if len(k) == 33 else crypto.lift_x(k) for k in keys]) if keys else None
    if total is None:
        raise PSBTError(COVERAGE, f"{what}: the eligible input keys sum to nothing")
    return total.format()


def _input_point(info: InputInfo) -> bytes:
    key = info.pubkey
    return key if len(key) == 33 else b"\x02" + key


def check_ecdh_coverage(p: Psbt) -> None:
    """BIP375 "ECDH coverage": every share has a proof that verifies, and a set output script is covered.

    Raises:
        PSBTError: (rule "ecdh coverage") a share without a proof or a proof without a share, a
            proof that does not verify, an input whose key is needed but unknown, or an output
            script set while an eligible input (or every input) lacks a share for its scan key.
    """
    infos = p.input_info()
    g = p.global_map
    for scan33 in {k for k, _ in (*_entries(g, GLOBAL_SP_ECDH_SHARE), *_entries(g, GLOBAL_SP_DLEQ))}:
        share, proof = _share(g, GLOBAL_SP_ECDH_SHARE, scan33), _share(g, GLOBAL_SP_DLEQ, scan33)
        what = f"global ECDH share for scan key {scan33.hex()}"
        if share is None or proof is None:
            raise PSBTError(COVERAGE, f"{what}: PSBT_GLOBAL_SP_ECDH_SHARE and PSBT_GLOBAL_SP_DLEQ must come together")
        if not dleq.verify_proof(_pubkey_sum(infos, what), scan33, share, proof):
            raise PSBTError(COVERAGE, f"{what}: PSBT_GLOBAL_SP_DLEQ does not verify")
    for info, m in zip(infos, p.inputs):
        for scan33 in {k for k, _ in (*_entries(m, IN_SP_ECDH_SHARE), *_entries(m, IN_SP_DLEQ))}:
            share, proof = _share(m, IN_SP_ECDH_SHARE, scan33), _share(m, IN_SP_DLEQ, scan33)
            what = f"input {info.index} ECDH share for scan key {scan33.hex()}"
            if share is None or proof is None:
                raise PSBTError(COVERAGE, f"{what}: PSBT_IN_SP_ECDH_SHARE and PSBT_IN_SP_DLEQ must come together")
            if info.eligible is False:
                continue  # not counted
            if info.eligible is None or info.pubkey is None:
                raise PSBTError(COVERAGE, f"{what}: no public key to verify PSBT_IN_SP_DLEQ with ({info.reason})")
            if not dleq.verify_proof(_input_point(info), scan33, share, proof):
                raise PSBTError(COVERAGE, f"{what}: PSBT_IN_SP_DLEQ does not verify")
    for out in p.sp_outputs():
        if out.script is None:
            continue
        scan33 = out.scan_pubkey33
        if _share(g, GLOBAL_SP_ECDH_SHARE, scan33) is not None:
            continue
        if not any(_share(m, IN_SP_ECDH_SHARE, scan33) is not None for m in p.inputs):
            raise PSBTError(COVERAGE, f"output {out.index} has PSBT_OUT_SCRIPT but there is no ECDH share for its scan key")
        missing = _uncovered(p, scan33)
        if missing:
            raise PSBTError(COVERAGE, f"output {out.index} has PSBT_OUT_SCRIPT but {missing}")


def _uncovered(p: Psbt, scan33: bytes) -> str:
    """Why the shares for one scan key do not cover the transaction ("" when they do)."""
    if _share(p.global_map, GLOBAL_SP_ECDH_SHARE, scan33) is not None:
        return ""
    for info, m in zip(p.input_info(), p.inputs):
        if info.eligible is None:
            return f"cannot tell whether input {info.index} is eligible ({info.reason})"
        if info.eligible and _share(m, IN_SP_ECDH_SHARE, scan33) is None:
            return f"eligible input {info.index} has no ECDH share for scan key {scan33.hex()}"
    return ""


def _missing(p: Psbt, scan33: bytes) -> str:
    """Why one scan key's output scripts cannot be derived yet ("" when they can)."""
    unknown = next((i for i in p.input_info() if i.eligible and i.pubkey is None), None)
    return _uncovered(p, scan33) or (f"input {unknown.index} has no known public key ({unknown.reason})" if unknown else "")


def check_input_eligibility(p: Psbt) -> None:
    """BIP375 "input eligibility": with silent-payment outputs, no segwit v2+ spend and only SIGHASH_ALL.

    Raises:
        PSBTError: (rule "input eligibility") an input spends segwit version 2+, has no UTXO
            to tell, or asks for or carries a signature with a sighash other than ALL
            (DEFAULT is ALL for taproot).
    """
    if not p.sp_outputs():
        return
    for info, m in zip(p.input_info(), p.inputs):
        if info.prevout_script is None:
            raise PSBTError(ELIGIBILITY, f"input {info.index}: {info.reason}")
        if extract.script_type(info.prevout_script) is ScriptType.WITNESS_UNKNOWN:
            raise PSBTError(ELIGIBILITY, f"input {info.index} spends a segwit version 2+ output; silent-payment outputs forbid it")
        allowed = (SIGHASH_ALL, SIGHASH_DEFAULT) if info.is_taproot else (SIGHASH_ALL,)
        sighash = m.get(_key(IN_SIGHASH_TYPE))
        if sighash is not None and int.from_bytes(sighash, "little") not in allowed:
            raise PSBTError(ELIGIBILITY, f"input {info.index} PSBT_IN_SIGHASH_TYPE is {int.from_bytes(sighash, 'little')}; silent-payment outputs need SIGHASH_ALL")
        sigs = [v for _, v in _entries(m, IN_PARTIAL_SIG)] + [v for _, v in _entries(m, IN_TAP_SCRIPT_SIG) if len(v) == 65]
        sigs += [v for v in (m.get(_key(IN_TAP_KEY_SIG)),) if v is not None and len(v) == 65]
        if any(not sig or sig[-1] != SIGHASH_ALL for sig in sigs):
            raise PSBTError(ELIGIBILITY, f"input {info.index} carries a signature that is not SIGHASH_ALL")


def _expected_scripts(p: Psbt, scan33: bytes, outs: Sequence[SPOutput]) -> dict[int, bytes] | None:
    """Output index -> P2TR script for one scan key's outputs; None while the shares are incomplete.

    Raises:
        PSBTError: (rule "output scripts") the inputs give no shared secret, or more than K_max outputs.
    """
    if _missing(p, scan33):
        return None
    infos = p.input_info()
    share = _share(p.global_map, GLOBAL_SP_ECDH_SHARE, scan33)
    if share is None:
        shares = [_share(m, IN_SP_ECDH_SHARE, scan33) for info, m in zip(infos, p.inputs) if info.eligible]
        total = crypto.add([crypto.point(s) for s in shares]) if shares else None
        share = total.format() if total is not None else None
    keys = [info.pubkey for info in infos if info.eligible]
    found = summary.summarize_keys(min(info.outpoint.to_bytes() for info in infos), keys) if infos else None
    if found is None or share is None:
        raise PSBTError(OUTPUT_SCRIPTS, f"the inputs give no shared secret for scan key {scan33.hex()} (no eligible input, or keys summing to nothing)")
    if len(outs) > K_MAX:
        raise PSBTError(OUTPUT_SCRIPTS, f"more than {K_MAX} silent-payment outputs for scan key {scan33.hex()}")
    ecdh33 = send.ecdh_from_share(share, found.input_hash32)
    return {o.index: b"\x51\x20" + send.output_key(ecdh33, o.spend_pubkey33, k) for k, o in enumerate(outs)}


def _groups(p: Psbt) -> dict[bytes, list[SPOutput]]:
    groups: dict[bytes, list[SPOutput]] = {}
    for out in p.sp_outputs():
        groups.setdefault(out.scan_pubkey33, []).append(out)
    return groups


def check_output_scripts(p: Psbt) -> None:
    """BIP375 "output scripts": every set PSBT_OUT_SCRIPT of a silent-payment output is the derived one.

    Within a scan key, k counts the outputs in output order. BIP375's text
    says to sort the codes first; its test vectors (a labelled pair whose
    spend keys are out of order is valid) and its reference validator count
    in output order, and so do we. The two agree when a constructor adds
    the outputs of one scan key sorted.

    Raises:
        PSBTError: (rule "output scripts") a script that differs from the derivation, or one set
            while the shares cannot derive it.
    """
    for scan33, outs in _groups(p).items():
        if all(o.script is None for o in outs):
            continue
        expected = _expected_scripts(p, scan33, outs)
        for o in outs:
            if o.script is None:
                continue
            if expected is None:
                raise PSBTError(OUTPUT_SCRIPTS, f"output {o.index} has PSBT_OUT_SCRIPT but the ECDH shares cannot derive it yet")
            if o.script != expected[o.index]:
                raise PSBTError(OUTPUT_SCRIPTS, f"output {o.index} PSBT_OUT_SCRIPT is not the silent-payment output its ECDH shares derive")


def verify(p: Psbt) -> Status:
    """Run BIP375's checks in order: ECDH coverage, input eligibility, output scripts (the structure holds by construction).

    A share on an input that is not eligible is not counted (as BIP375's
    vectors have it); `add_shares` never adds one.

    Returns:
        How far the silent-payment outputs are.

    Raises:
        PSBTError: the first rule broken.
    """
    check_ecdh_coverage(p)
    check_input_eligibility(p)
    check_output_scripts(p)
    outs = p.sp_outputs()
    ready = not any(_missing(p, scan33) for scan33 in _scan_keys(p))
    return Status(tuple(o.index for o in outs), tuple(o.index for o in outs if o.script is not None), ready)


# ---- roles ------------------------------------------------------------------


def _replace(p: Psbt, global_updates: Map | None = None, inputs: Mapping[int, Map] | None = None, outputs: Mapping[int, Map] | None = None) -> Psbt:
    g = {**p.global_map, **(global_updates or {})}
    ins = tuple({**m, **(inputs or {}).get(i, {})} for i, m in enumerate(p.inputs))
    outs = tuple({**m, **(outputs or {}).get(i, {})} for i, m in enumerate(p.outputs))
    return Psbt(g, ins, outs)


def compute_outputs(p: Psbt) -> Psbt:
    """Fill PSBT_OUT_SCRIPT of every silent-payment output and clear the modifiable flags (BIP375 Signer).

    Raises:
        PSBTError: `verify` fails, or (rule "ecdh coverage") an eligible input has no share for a scan key.
    """
    verify(p)
    scripts: dict[int, Map] = {}
    for scan33, outs in _groups(p).items():
        expected = _expected_scripts(p, scan33, outs)
        if expected is None:
            raise PSBTError(COVERAGE, f"cannot compute the outputs for scan key {scan33.hex()}: {_missing(p, scan33)}")
        scripts.update({i: {_key(OUT_SCRIPT): s} for i, s in expected.items()})
    modifiable = p.global_map.get(_key(GLOBAL_TX_MODIFIABLE))
    flags = {} if modifiable is None else {_key(GLOBAL_TX_MODIFIABLE): bytes([modifiable[0] & ~_MODIFIABLE_INPUTS_OUTPUTS])}
    return _replace(p, flags, outputs=scripts)


def _own_key(info: InputInfo, m: Map, private_key32: bytes) -> send.InputKey:
    """The signer's key for an eligible input, checked against what the input shows of its key."""
    crypto.scalar(private_key32, f"the private key for input {info.index}")
    point = PrivateKey(bytes(private_key32)).public_key.format()
    script = info.prevout_script
    if info.is_taproot:
        ok = point[1:] == script[2:34]
    else:
        redeem = m.get(_key(IN_REDEEM_SCRIPT))
        key_hash = {ScriptType.P2PKH: script[3:23], ScriptType.P2WPKH: script[2:22]}.get(extract.script_type(script), redeem[2:22] if redeem else b"")
        ok = crypto.hash160(point) == key_hash
    if not ok or (info.pubkey is not None and info.pubkey not in (point, point[1:])):
        raise InvalidKeyError(f"the private key given for input {info.index} does not belong to the output it spends")
    return send.InputKey(bytes(private_key32), info.is_taproot)


def add_shares(p: Psbt, private_keys: Mapping[int, bytes], *, global_share: bool = False, aux_rand32: bytes | None = None) -> Psbt:
    """BIP375 Signer: add ECDH shares and DLEQ proofs for the inputs whose keys are given.

    Per input by default; with `global_share`, one share per scan key over all
    eligible inputs (the keys must cover every one of them). When the shares
    then cover every scan key, the output scripts are computed too.

    Args:
        private_keys: input index -> its 32-byte private key (for P2TR, the key of the output key).
        global_share: set PSBT_GLOBAL_SP_ECDH_SHARE instead of per-input shares.
        aux_rand32: randomness for the proofs; None draws fresh bytes per proof.

    Returns:
        The new PSBT, verified.

    Raises:
        PSBTError: the PSBT has no silent-payment output or fails `verify`; an input index is out
            of range, or (rule "input eligibility") an input is not eligible or cannot be told;
            with `global_share`, an eligible input has no key.
        InvalidKeyError: a key is not valid or does not belong to its input.
        KeySumZeroError: the keys sum to zero.
    """
    scan_keys = _scan_keys(p)
    if not scan_keys:
        raise PSBTError(COVERAGE, "the PSBT has no silent-payment output (PSBT_OUT_SP_V0_INFO): no ECDH share to add")
    check_input_eligibility(p)
    infos = p.input_info()
    keys: dict[int, send.InputKey] = {}
    for i, private_key32 in sorted(private_keys.items()):
        if not 0 <= i < len(infos):
            raise PSBTError(ELIGIBILITY, f"input {i} does not exist (the PSBT has {len(infos)})")
        if not infos[i].eligible:
            state = "it cannot be told whether input" if infos[i].eligible is None else "input"
            raise PSBTError(ELIGIBILITY, f"{state} {i} is not eligible ({infos[i].reason}): it takes no ECDH share")
        keys[i] = _own_key(infos[i], p.inputs[i], private_key32)

    def aux() -> bytes:
        return os.urandom(32) if aux_rand32 is None else aux_rand32

    if global_share:
        missing = [info.index for info in infos if info.eligible is not False and info.index not in keys]
        if missing:
            raise PSBTError(ELIGIBILITY, f"a global share needs the keys of every eligible input; missing input {missing[0]}")
        entries: dict[bytes, bytes] = {}
        for scan33 in scan_keys:
            share, proof = send.ecdh_share(list(keys.values()), scan33, aux())
            entries[_key(GLOBAL_SP_ECDH_SHARE, scan33)], entries[_key(GLOBAL_SP_DLEQ, scan33)] = share, proof
        result = _replace(p, entries)
    else:
        per_input: dict[int, dict[bytes, bytes]] = {}
        for i, key in keys.items():
            for scan33 in scan_keys:
                share, proof = send.ecdh_share([key], scan33, aux())
                per_input.setdefault(i, {}).update({_key(IN_SP_ECDH_SHARE, scan33): share, _key(IN_SP_DLEQ, scan33): proof})
        result = _replace(p, inputs=per_input)
    status = verify(result)
    return compute_outputs(result) if status.ready and len(status.computed) < len(status.sp_outputs) else result
