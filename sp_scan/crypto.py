"""Primitives both backends share: BIP352 constants, tagged hashes, HASH160, points and scalars over coincurve."""

from __future__ import annotations

import hashlib

from coincurve import PublicKey

from .errors import InvalidKeyError

N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
"""The order of the secp256k1 group."""

TAG_INPUTS = "BIP0352/Inputs"
TAG_SHARED_SECRET = "BIP0352/SharedSecret"
TAG_LABEL = "BIP0352/Label"

K_MAX = 2323
"""The most outputs a receiver finds in one transaction, and a sender may create per scan key (BIP352 v1.1)."""


def tagged_hash(tag: str, msg: bytes) -> bytes:
    """Return SHA256(SHA256(tag) ‖ SHA256(tag) ‖ msg), 32 bytes (BIP340)."""
    tag_hash = hashlib.sha256(tag.encode()).digest()
    return hashlib.sha256(tag_hash + tag_hash + msg).digest()


def hash160(data: bytes) -> bytes:
    """Return RIPEMD160(SHA256(data)), 20 bytes."""
    return hashlib.new("ripemd160", hashlib.sha256(data).digest()).digest()


def ser32(i: int) -> bytes:
    """Serialize i as 4 bytes big-endian (BIP352's ser32)."""
    return i.to_bytes(4, "big")


def point(data33: bytes) -> PublicKey | None:
    """Parse a compressed point; None when it is not one (wrong width, prefix or off the curve)."""
    if len(data33) != 33 or data33[0] not in (2, 3):
        return None
    try:
        return PublicKey(data33)
    except ValueError:
        return None


def point64(data64: bytes) -> PublicKey | None:
    """Parse an uncompressed point given as x ‖ y (64 bytes); None when it is not one (x or y >= p, off the curve)."""
    if len(data64) != 64:
        return None
    try:
        return PublicKey(b"\x04" + data64)
    except ValueError:
        return None


def lift_x(x32: bytes) -> PublicKey | None:
    """The point with x-coordinate x32 and even Y; None when x32 is not on the curve."""
    return point(b"\x02" + x32) if len(x32) == 32 else None


def negate(p: PublicKey) -> PublicKey:
    """Return -p."""
    data = p.format()
    return PublicKey(bytes([data[0] ^ 1]) + data[1:])


def add(points: list[PublicKey]) -> PublicKey | None:
    """Sum points; None when the sum is the point at infinity."""
    try:
        return PublicKey.combine_keys(points)
    except ValueError:
        return None


def scalar(data32: bytes, name: str) -> int:
    """Parse a 32-byte big-endian scalar in [1, n-1].

    Raises:
        InvalidKeyError: wrong width or out of range; the message names `name`.
    """
    if not isinstance(data32, (bytes, bytearray)) or len(data32) != 32:
        raise InvalidKeyError(f"{name} must be 32 bytes")
    value = int.from_bytes(data32, "big")
    if not 0 < value < N:
        raise InvalidKeyError(f"{name} is not a valid secret key (0 or >= n)")
    return value


def pubkey(data33: bytes, name: str) -> PublicKey:
    """Parse a 33-byte compressed public key.

    Raises:
        InvalidKeyError: wrong width, or not a valid compressed point; the message names `name`.
    """
    if not isinstance(data33, (bytes, bytearray)) or len(data33) != 33:
        raise InvalidKeyError(f"{name} must be 33 bytes (compressed)")
    p = point(bytes(data33))
    if p is None:
        raise InvalidKeyError(f"{name} is not a valid compressed point")
    return p


def label_tweak(scan_key32: bytes, m: int) -> bytes:
    """Return ℓ_m = hash_BIP0352/Label(b_scan ‖ ser32(m)), 32 bytes.

    Raises:
        InvalidKeyError: scan_key32 is not a valid 32-byte secret key, or m is not in [0, 2**32).
    """
    scalar(scan_key32, "scan_key32")
    if not isinstance(m, int) or not 0 <= m < 2**32:
        raise InvalidKeyError("label m must be an integer in [0, 2**32)")
    return tagged_hash(TAG_LABEL, bytes(scan_key32) + ser32(m))
