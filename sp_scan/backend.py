"""The implementation every stage uses, chosen once: the C stages of `sp_scan.native` or `sp_scan.reference`.

The C stages are used when the extension loaded (`native.ENABLED`); SP_SCAN_BACKEND=reference (read
when `sp_scan.native` is first imported) or a missing extension selects the pure-Python reference.
The stage modules (`extract`, `summary`, `scan`, `send`, `dleq`, `block`, `filters`) take
their functions from here and nothing rebinds them. Where the C computes only the secret half of a
step (BIP374 proof generation), the composition below finishes it with the one `verify_proof`.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import _checks, native, reference, wire
from .errors import SendError
from .reference.dleq import G, message, point, verify_proof
from .types import InputKey

NAME = "native" if native.ENABLED else "reference"
"""The backend in use: "native" or "reference"."""


def _generate_proof_native(a32: bytes, B33: bytes, r32: bytes, G33: bytes = G, m: bytes | None = None) -> bytes | None:  # noqa: N803
    """`reference.dleq.generate_proof` with a and the nonce in C (constant-time, wiped); same results and errors."""
    a32, r32 = _checks.sized(a32, 32, "a32"), _checks.sized(r32, 32, "r32")
    b, g, msg = point(B33, "B33"), point(G33, "G33"), message(m)
    if b is None or g is None:
        return None
    result = native.dleq_prove(a32, bytes(B33), r32, bytes(G33), None if m is None else msg)
    if result is None:
        return None
    a33, c33, proof = result
    return proof if verify_proof(a33, B33, c33, proof, G33, m) else None


def _ecdh_share_native(input_keys: Sequence[InputKey], scan_pubkey33: bytes, aux_rand32: bytes) -> tuple[bytes, bytes]:
    """`reference.send.ecdh_share` with the key sum, share and proof in C; same results and errors."""
    if not input_keys:
        raise SendError("an ECDH share needs at least one input key")
    result = native.ecdh_share(input_keys, scan_pubkey33, _checks.sized(aux_rand32, 32, "aux_rand32"))
    if result is None or not verify_proof(result[1], scan_pubkey33, result[0], result[2]):
        raise SendError("DLEQ proof generation failed")
    return result[0], result[2]


def _pick(native_function, reference_function):
    return native_function if native.ENABLED else reference_function


input_pubkey = _pick(native.input_pubkey, reference.extract.input_pubkey)
tx_pubkeys = _pick(native.tx_pubkeys, reference.extract.tx_pubkeys)
summarize = _pick(native.summarize, reference.summary.summarize)
shared_secret = _pick(native.shared_secret, reference.scan.shared_secret)
scan_tweak = _pick(native.scan_tweak, reference.scan.scan_tweak)
scan_tweaks = _pick(native.scan_tweaks, reference.scan.scan_tweaks)
scan_tweaks_packed = _pick(native.scan_tweaks_packed, reference.scan.scan_tweaks_packed)
k0_outputs = _pick(native.k0_outputs, reference.scan.k0_outputs)
scan_tx = _pick(native.scan_tx, reference.scan.scan_tx)
create_outputs = _pick(native.create_outputs, reference.send.create_outputs)
send_shared_secret = _pick(native.send_shared_secret, reference.send.shared_secret)
ecdh_share = _pick(_ecdh_share_native, reference.send.ecdh_share)
generate_proof = _pick(_generate_proof_native, reference.dleq.generate_proof)
block_tweaks = _pick(native.block_tweaks, reference.block.tweaks)
block_scan = _pick(native.block_scan, reference.block.scan)
block_index = _pick(native.block_index, reference.block.block_index)
mark_spent = _pick(native.mark_spent, reference.block.mark_spent)
output_map = _pick(native.output_map, reference.block.OutputMap)
spent_from_undo = _pick(native.spent_from_undo, wire.spent_from_undo)
unxor = _pick(native.unxor, wire.unxor)
block_commits = _pick(native.block_commits, wire.block_commits)
golomb_set = _pick(native.golomb_set, reference.filters.golomb_set)
golomb_match = _pick(native.golomb_match, reference.filters.golomb_match)
spent_hashes = _pick(native.spent_hashes, reference.filters.spent_hashes)
