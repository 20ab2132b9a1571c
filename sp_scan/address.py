"""Silent-payments addresses: bech32m `sp` / `tsp` / `sprt` (regtest) encoding and decoding (BIP352)."""

from __future__ import annotations

from dataclasses import dataclass

from bitcoin.segwit_addr import CHARSET, bech32_hrp_expand, bech32_polymod, convertbits

from . import crypto
from .errors import InvalidAddressError
from .network import HRPS

MAX_LENGTH = 1023
_BECH32M_CONST = 0x2BC830A3
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
