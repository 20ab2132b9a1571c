"""The one door to sp-scan's C extensions (`_hash`, `_core`).

Only this module imports the compiled code. It converts arguments, checks
return codes and raises the typed errors of `sp_scan.errors`. Set
SP_SCAN_BACKEND=reference to use the pure-Python reference instead.
"""

# ---- hashing (_hash) --------------------------------------------------------
# The compiled module picks its SHA256 compression when imported (SHA-NI or
# ARMv8 SHA2 if the CPU has it); SP_SCAN_SHA256=portable forces the fallback.
from sp_scan.native import _hash

_TAG_INDEX = {"BIP0352/Inputs": 0, "BIP0352/SharedSecret": 1, "BIP0352/Label": 2}


def sha256(data: bytes) -> bytes:
    """Return SHA256(data), 32 bytes."""
    return _hash.sha256(data)


def tagged_hash(tag: str, msg: bytes) -> bytes:
    """Return the BIP340 tagged hash of msg, 32 bytes, from a precomputed midstate.

    Args:
        tag: one of "BIP0352/Inputs", "BIP0352/SharedSecret", "BIP0352/Label".
        msg: message bytes.

    Raises:
        ValueError: tag is not one of the three BIP352 tags.
    """
    index = _TAG_INDEX.get(tag)
    if index is None:
        raise ValueError(f"tagged_hash: tag must be one of {sorted(_TAG_INDEX)}, got {tag!r}")
    return _hash.tagged_hash(index, msg)


def hash160(data: bytes) -> bytes:
    """Return RIPEMD160(SHA256(data)), 20 bytes."""
    return _hash.hash160(data)


def sha256_impl() -> str:
    """Return the SHA256 compression in use: "shani", "armv8" or "portable"."""
    return _hash.impl()
