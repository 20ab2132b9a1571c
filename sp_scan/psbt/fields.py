"""PSBT field vocabulary: key types (BIP174, BIP370, BIP371, BIP373, BIP375, BIP376), their widths and names, map helpers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..errors import MalformedDataError, PSBTError
from ..wire import Reader, compact_size

STRUCTURE, COVERAGE, ELIGIBILITY, OUTPUT_SCRIPTS = "psbt structure", "ecdh coverage", "input eligibility", "output scripts"
"""The four BIP375 checks, as `PSBTError.rule` names them."""
SP_SPEND = "sp spend"
"""`PSBTError.rule` of what BIP376's Signer and Input Finalizer refuse (a tweak that does not give the input's key, …)."""

MAGIC = b"psbt\xff"

# Key types (BIP174, BIP370, BIP371, BIP373, BIP375, BIP376).
GLOBAL_UNSIGNED_TX, GLOBAL_XPUB, GLOBAL_TX_VERSION, GLOBAL_FALLBACK_LOCKTIME = 0x00, 0x01, 0x02, 0x03
GLOBAL_INPUT_COUNT, GLOBAL_OUTPUT_COUNT, GLOBAL_TX_MODIFIABLE = 0x04, 0x05, 0x06
GLOBAL_SP_ECDH_SHARE, GLOBAL_SP_DLEQ, GLOBAL_VERSION = 0x07, 0x08, 0xFB
IN_NON_WITNESS_UTXO, IN_WITNESS_UTXO, IN_PARTIAL_SIG, IN_SIGHASH_TYPE = 0x00, 0x01, 0x02, 0x03
IN_REDEEM_SCRIPT, IN_BIP32_DERIVATION, IN_FINAL_SCRIPTSIG, IN_FINAL_SCRIPTWITNESS = 0x04, 0x06, 0x07, 0x08
IN_PREVIOUS_TXID, IN_OUTPUT_INDEX, IN_SEQUENCE = 0x0E, 0x0F, 0x10
IN_REQUIRED_TIME_LOCKTIME, IN_REQUIRED_HEIGHT_LOCKTIME = 0x11, 0x12
IN_TAP_KEY_SIG, IN_TAP_SCRIPT_SIG, IN_TAP_BIP32_DERIVATION, IN_TAP_INTERNAL_KEY, IN_TAP_MERKLE_ROOT = 0x13, 0x14, 0x16, 0x17, 0x18
IN_SP_ECDH_SHARE, IN_SP_DLEQ, IN_SP_SPEND_BIP32_DERIVATION, IN_SP_TWEAK = 0x1D, 0x1E, 0x1F, 0x20
OUT_BIP32_DERIVATION, OUT_AMOUNT, OUT_SCRIPT, OUT_TAP_INTERNAL_KEY, OUT_TAP_BIP32_DERIVATION = 0x02, 0x03, 0x04, 0x05, 0x07
OUT_SP_V0_INFO, OUT_SP_V0_LABEL = 0x09, 0x0A

SIGHASH_DEFAULT, SIGHASH_ALL = 0x00, 0x01
MODIFIABLE_INPUTS_OUTPUTS = 0x03

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
              IN_TAP_MERKLE_ROOT: "PSBT_IN_TAP_MERKLE_ROOT", IN_SP_ECDH_SHARE: "PSBT_IN_SP_ECDH_SHARE", IN_SP_DLEQ: "PSBT_IN_SP_DLEQ",
              IN_SP_SPEND_BIP32_DERIVATION: "PSBT_IN_SP_SPEND_BIP32_DERIVATION", IN_SP_TWEAK: "PSBT_IN_SP_TWEAK"},
    "output": {OUT_BIP32_DERIVATION: "PSBT_OUT_BIP32_DERIVATION", OUT_AMOUNT: "PSBT_OUT_AMOUNT", OUT_SCRIPT: "PSBT_OUT_SCRIPT",
               OUT_TAP_INTERNAL_KEY: "PSBT_OUT_TAP_INTERNAL_KEY", OUT_TAP_BIP32_DERIVATION: "PSBT_OUT_TAP_BIP32_DERIVATION",
               OUT_SP_V0_INFO: "PSBT_OUT_SP_V0_INFO", OUT_SP_V0_LABEL: "PSBT_OUT_SP_V0_LABEL"},
}  # fmt: skip

# (map, type) -> (key data widths, value widths); None allows any width.
WIDTHS: dict[tuple[str, int], tuple[tuple[int, ...] | None, tuple[int, ...] | None]] = {
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
    ("input", IN_SP_SPEND_BIP32_DERIVATION): ((33,), None),
    ("input", IN_SP_TWEAK): ((0,), (32,)),
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


def field_key(key_type: int, keydata: bytes = b"") -> bytes:
    """The full map key: compact-size type ‖ key data."""
    return compact_size(key_type) + keydata


def split_key(key: bytes) -> tuple[int, bytes]:
    """(key type, key data) of a full map key; MalformedDataError when the type is not a canonical compact size."""
    r = Reader(key, error=MalformedDataError, what="key")
    key_type = r.compact_size()
    return key_type, key[r.pos :]


def entries(m: Map, key_type: int) -> Iterator[tuple[bytes, bytes]]:
    """(key data, value) of every entry of one type."""
    for key, value in m.items():
        t, keydata = split_key(key)
        if t == key_type:
            yield keydata, value


def field_name(kind: str, key_type: int) -> str:
    """BIP174's name of a key type of map `kind` ("global", "input", "output"), e.g. PSBT_IN_SP_DLEQ."""
    return _NAMES[kind].get(key_type, f"{kind} key type {key_type:#x}")


def structure_error(message: str) -> PSBTError:
    """A PSBTError of rule "psbt structure"."""
    return PSBTError(STRUCTURE, message)
