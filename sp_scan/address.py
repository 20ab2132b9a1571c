"""Addresses: silent-payments `sp` / `tsp` / `sprt` (regtest) encoding and decoding (BIP352); the script any
other address pays.

`output_script` reads the addresses a wallet sends to besides silent-payment ones: segwit
(BIP173 bech32 for version 0, BIP350 bech32m for 1 and above) and base58check P2PKH / P2SH.
"""

from __future__ import annotations

from dataclasses import dataclass

from bitcoin import base58
from bitcoin.segwit_addr import CHARSET, bech32_hrp_expand, bech32_polymod, convertbits

from . import crypto
from .errors import InvalidAddressError, SPError
from .network import HRPS, NETWORKS
from .network import get as get_network
from .wire import sha256d

MAX_LENGTH = 1023
SEGWIT_MAX_LENGTH = 90
_BECH32_CONST, _BECH32M_CONST = 1, 0x2BC830A3
_V0_PAYLOAD = 66
_RESERVED_VERSION = 31


@dataclass(frozen=True, slots=True)
class SPAddress:
    """A decoded silent-payments address.

    Attributes:
        hrp: "sp", "tsp" or "sprt".
        version: 0..30.
        scan_pubkey33: B_scan, compressed.
        spend_pubkey33: B_m (B_spend, or labelled), compressed.
    """

    hrp: str
    version: int
    scan_pubkey33: bytes
    spend_pubkey33: bytes


def encode(scan_pubkey33: bytes, spend_pubkey33: bytes, hrp: str = "sp") -> str:
    """Encode a version-0 address.

    Raises:
        InvalidKeyError: a key is not a 33-byte valid compressed point.
        InvalidAddressError: hrp is not "sp", "tsp" or "sprt".
    """
    if hrp not in HRPS:
        raise InvalidAddressError(f"hrp must be one of {HRPS}")
    payload = crypto.pubkey(scan_pubkey33, "scan_pubkey33").format() + crypto.pubkey(spend_pubkey33, "spend_pubkey33").format()
    return bech32m_encode(hrp, 0, payload)


def decode(address: str, hrp: str | None = None) -> SPAddress:
    """Decode an address under BIP352's rules.

    Versions 1..30 are read for their first 66 bytes; version 31 and a bech32
    (non-m) checksum are rejected; version 0 must carry exactly 66 bytes.

    Args:
        address: the address string, at most 1023 characters, one case.
        hrp: the expected hrp, or None to accept "sp", "tsp" and "sprt".

    Raises:
        InvalidAddressError: on any violation, including an invalid key.
    """
    got_hrp, version, payload = bech32m_decode(address, HRPS if hrp is None else (hrp,), "an address")
    if version == _RESERVED_VERSION:
        raise InvalidAddressError("version 31 is reserved")
    if len(payload) < _V0_PAYLOAD or (version == 0 and len(payload) != _V0_PAYLOAD):
        raise InvalidAddressError(f"version {version} payload has {len(payload)} bytes")
    payload = bytes(payload[:_V0_PAYLOAD])
    scan33, spend33 = payload[:33], payload[33:]
    if crypto.point(scan33) is None or crypto.point(spend33) is None:
        raise InvalidAddressError("address key is not a valid compressed point")
    return SPAddress(got_hrp, version, scan33, spend33)


def bech32m_encode(hrp: str, version: int, payload: bytes) -> str:
    """Encode hrp, a 5-bit version and a payload as a bech32m string (BIP350), without BIP173's length limit."""
    data = [version] + convertbits(payload, 8, 5)
    polymod = bech32_polymod(bech32_hrp_expand(hrp) + data + [0] * 6) ^ _BECH32M_CONST
    checksum = [(polymod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(CHARSET[d] for d in data + checksum)


def bech32m_decode(text: str, hrps: tuple[str, ...], what: str) -> tuple[str, int, bytes]:
    """Decode a bech32m string of at most MAX_LENGTH characters into (hrp, version, payload).

    Args:
        text: the string, one case.
        hrps: the accepted human-readable parts.
        what: names the string in messages, e.g. "an address".

    Raises:
        InvalidAddressError: too long, mixed case, not bech32m, another hrp, a bad checksum or padding.
    """
    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        raise InvalidAddressError(f"{what} is a string of at most {MAX_LENGTH} characters")
    if text.lower() != text and text.upper() != text:
        raise InvalidAddressError(f"mixed-case {what.split()[-1]}")
    text = text.lower()
    sep = text.rfind("1")
    got_hrp, rest = text[:sep], text[sep + 1 :]
    if sep < 1 or len(rest) < 7 or any(c not in CHARSET for c in rest):
        raise InvalidAddressError("not a bech32m string")
    if got_hrp not in hrps:
        raise InvalidAddressError(f"unexpected hrp {got_hrp!r}")
    data = [CHARSET.find(c) for c in rest]
    if bech32_polymod(bech32_hrp_expand(got_hrp) + data) != _BECH32M_CONST:
        raise InvalidAddressError("bad bech32m checksum")
    payload = convertbits(data[1:-6], 5, 8, False)
    if payload is None:
        raise InvalidAddressError("invalid padding")
    return got_hrp, data[0], bytes(payload)


def labelled_spend_pubkey(scan_key32: bytes, spend_pubkey33: bytes, m: int) -> bytes:
    """Return B_m = B_spend + ℓ_m·G, compressed.

    Raises:
        InvalidKeyError: a key of the wrong width or invalid, or m out of [0, 2**32).
    """
    spend = crypto.pubkey(spend_pubkey33, "spend_pubkey33")
    return spend.add(crypto.label_tweak(scan_key32, m)).format()


def base58check(text: str, what: str, error: type[SPError] = InvalidAddressError) -> bytes:
    """The payload of a base58check string (its 4-byte checksum verified and removed).

    Raises:
        error: not base58, or a bad checksum; the message names `what`, never the text.
    """
    try:
        data = base58.decode(text)
    except (base58.Base58Error, ValueError):
        raise error(f"{what}: not base58") from None
    if len(data) < 5 or sha256d(data[:-4])[:4] != data[-4:]:
        raise error(f"{what}: bad base58 checksum")
    return data[:-4]


def output_script(address: str, network: str) -> bytes:
    """The scriptPubKey a segwit or base58 address of `network` pays.

    Args:
        address: bech32 (segwit version 0), bech32m (version 1 and above), or base58check P2PKH / P2SH.
        network: Core's chain name; the address must be one of its own (bc / tb / bcrt, 1… / 3… or m… / 2…).

    Raises:
        InvalidAddressError: malformed, a bad checksum, another network's address, or a silent-payments
            address (those pay scripts that depend on the inputs).
    """
    net = get_network(network)
    if not isinstance(address, str) or not address:
        raise InvalidAddressError("an address is a non-empty string")
    prefix = address.lower().rpartition("1")[0]
    if prefix in HRPS:
        raise InvalidAddressError("a silent-payments address pays no fixed script (its output is computed from the inputs)")
    segwit_hrps = {get_network(n).segwit_hrp: n for n in NETWORKS}
    if prefix in segwit_hrps:
        if prefix != net.segwit_hrp:
            raise InvalidAddressError(f"{address} is a segwit address of {segwit_hrps[prefix]}, not of {network}")
        version, program = _segwit_decode(address, prefix)
        return bytes([version + 0x50 if version else 0, len(program)]) + program
    data = base58check(address, f"address {address}")
    if len(data) != 21 or data[0] not in net.base58:
        raise InvalidAddressError(f"{address} is not a P2PKH or P2SH address of {network}")
    if data[0] == net.base58[0]:
        return b"\x76\xa9\x14" + data[1:] + b"\x88\xac"
    return b"\xa9\x14" + data[1:] + b"\x87"


def _segwit_decode(address: str, hrp: str) -> tuple[int, bytes]:
    """(witness version, program) of a BIP173/BIP350 address with this hrp."""
    if len(address) > SEGWIT_MAX_LENGTH or (address.lower() != address and address.upper() != address):
        raise InvalidAddressError(f"{address} is not a segwit address (too long, or mixed case)")
    rest = address.lower()[len(hrp) + 1 :]
    if len(rest) < 7 or any(c not in CHARSET for c in rest):
        raise InvalidAddressError(f"{address} is not a segwit address (bad characters)")
    data = [CHARSET.find(c) for c in rest]
    version = data[0]
    const = _BECH32_CONST if version == 0 else _BECH32M_CONST
    if version > 16 or bech32_polymod(bech32_hrp_expand(hrp) + data) != const:
        raise InvalidAddressError(f"{address}: bad checksum (version 0 takes bech32, 1 and above bech32m)")
    program = convertbits(data[1:-6], 5, 8, False)
    if program is None or not 2 <= len(program) <= 40 or (version == 0 and len(program) not in (20, 32)):
        raise InvalidAddressError(f"{address}: a witness program of the wrong length")
    return version, bytes(program)
