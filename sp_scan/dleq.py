"""BIP374 discrete-log-equality proofs: A = a·G and C = a·B share the secret a.

Points are 33-byte compressed encodings, `INFINITY` (33 zero bytes) for the point at infinity.
`generate_proof` comes from `sp_scan.backend` (with the C stages, a and the nonce only meet
constant-time code); `verify_proof` handles public data and has one implementation.
"""

from .backend import generate_proof
from .reference.dleq import INFINITY, G, verify_proof

__all__ = ["G", "INFINITY", "generate_proof", "verify_proof"]
