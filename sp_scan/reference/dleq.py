"""BIP374 discrete-log-equality proofs: A = a·G and C = a·B share the secret a.

Points are 33-byte compressed encodings; the point at infinity, which has
none, is written as 33 zero bytes (`INFINITY`, secp256k1lab's convention),
so the BIP's "fail if infinite" cases can be expressed. `generate_proof` here
is the readable Python version, with Python integers that are not
constant-time; the native backend generates in C (the secret a and the nonce
only meet constant-time code and are wiped) and checks its proof with the
`verify_proof` below, which handles public data only and has one
implementation.
"""

from __future__ import annotations

from coincurve import PublicKey

from .. import _checks, crypto

G = bytes.fromhex("0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")
"""The secp256k1 generator, compressed."""

INFINITY = bytes(33)
"""The encoding of the point at infinity accepted by this module."""

TAG_AUX, TAG_NONCE, TAG_CHALLENGE = "BIP0374/aux", "BIP0374/nonce", "BIP0374/challenge"


def point(data33: bytes, name: str) -> PublicKey | None:
    """Parse a compressed point; None for INFINITY.

    Raises:
        InvalidKeyError: not 33 bytes, or neither a valid point nor INFINITY; the message names `name`.
    """
    if _checks.sized(data33, 33, name) == INFINITY:
        return None
    return crypto.pubkey(data33, name)


def message(m: bytes | None) -> bytes:
    """The message bytes hashed into a proof: b"" for None, else m.

    Raises:
        InvalidKeyError: m is not 32 bytes.
    """
    return b"" if m is None else _checks.sized(m, 32, "m")


def _mul(p: PublicKey, k: int) -> PublicKey | None:
    k %= crypto.N
    return p.multiply(k.to_bytes(32, "big")) if k else None


def _sum(*points: PublicKey | None) -> PublicKey | None:
    present = [p for p in points if p is not None]
    return crypto.add(present) if present else None


def _challenge(a33: bytes, b33: bytes, c33: bytes, g33: bytes, r1: PublicKey, r2: PublicKey, msg: bytes) -> int:
    data = a33 + b33 + c33 + g33 + r1.format() + r2.format() + msg
    return int.from_bytes(crypto.tagged_hash(TAG_CHALLENGE, data), "big")


def verify_proof(A33: bytes, B33: bytes, C33: bytes, proof64: bytes, G33: bytes = G, m: bytes | None = None) -> bool:  # noqa: N803
    """BIP374 VerifyProof: True when proof64 shows that A = a·G and C = a·B for one a.

    Args:
        A33, B33, C33, G33: compressed points (INFINITY for the point at infinity).
        proof64: e ‖ s, 32 bytes each.
        m: the optional 32-byte message.

    Returns:
        False for an infinite point, s >= n, an infinite R1 or R2, or a wrong challenge.

    Raises:
        InvalidKeyError: a width is wrong, or a point is neither valid nor INFINITY.
    """
    points = [point(p, name) for p, name in ((A33, "A33"), (B33, "B33"), (C33, "C33"), (G33, "G33"))]
    proof = _checks.sized(proof64, 64, "proof64")
    msg = message(m)
    if any(p is None for p in points):
        return False
    a, b, c, g = points
    e, s = int.from_bytes(proof[:32], "big"), int.from_bytes(proof[32:], "big")
    if s >= crypto.N:
        return False
    r1 = _sum(_mul(g, s), _mul(a, crypto.N - e % crypto.N))
    r2 = _sum(_mul(b, s), _mul(c, crypto.N - e % crypto.N))
    if r1 is None or r2 is None:
        return False
    return e == _challenge(bytes(A33), bytes(B33), bytes(C33), bytes(G33), r1, r2, msg)


def generate_proof(a32: bytes, B33: bytes, r32: bytes, G33: bytes = G, m: bytes | None = None) -> bytes | None:  # noqa: N803
    """BIP374 GenerateProof: a 64-byte proof that a·G and a·B share the secret a.

    Args:
        a32: the secret scalar.
        B33: the other point (INFINITY for the point at infinity).
        r32: fresh auxiliary randomness.
        G33: the generator (default: secp256k1's G).
        m: the optional 32-byte message.

    Returns:
        The proof, or None where the BIP fails: a = 0 or a >= n, B or G infinite,
        k = 0, or a proof that does not verify.

    Raises:
        InvalidKeyError: a width is wrong, or B33 / G33 is neither a valid point nor INFINITY.
    """
    a32, r32 = _checks.sized(a32, 32, "a32"), _checks.sized(r32, 32, "r32")
    b, g, msg = point(B33, "B33"), point(G33, "G33"), message(m)
    if b is None or g is None:
        return None
    a = int.from_bytes(a32, "big")
    if not 0 < a < crypto.N:
        return None
    a33, c33 = g.multiply(a32).format(), b.multiply(a32).format()
    t = bytes(x ^ y for x, y in zip(a32, crypto.tagged_hash(TAG_AUX, r32)))
    k = int.from_bytes(crypto.tagged_hash(TAG_NONCE, t + a33 + c33 + msg), "big") % crypto.N
    if k == 0:
        return None
    e = _challenge(a33, bytes(B33), c33, bytes(G33), _mul(g, k), _mul(b, k), msg)
    proof = e.to_bytes(32, "big") + ((k + e * a) % crypto.N).to_bytes(32, "big")
    return proof if verify_proof(a33, B33, c33, proof, G33, m) else None
