"""Scanning: find the outputs of a transaction, or of a batch of tweaks, that pay a `Receiver` (BIP352).

`scan_tx`, `scan_tweak`, `scan_tweaks`, `scan_tweaks_packed`, `k0_outputs` and `shared_secret` come from
`sp_scan.backend`; `scan_shared_secret` (from an ECDH secret already computed) is the reference's.
Results are `FoundOutput`s in k order; no match is [].
"""

from ._checks import TWEAK_WIDTHS, check_batch
from .backend import k0_outputs, scan_tweak, scan_tweaks, scan_tweaks_packed, scan_tx, shared_secret
from .crypto import K_MAX, label_tweak
from .reference.scan import scan_shared_secret
from .types import CHANGE_LABEL, FoundOutput, Receiver

__all__ = [
    "CHANGE_LABEL", "K_MAX", "TWEAK_WIDTHS", "FoundOutput", "Receiver", "check_batch", "k0_outputs", "label_tweak",
    "scan_shared_secret", "scan_tweak", "scan_tweaks", "scan_tweaks_packed", "scan_tx", "shared_secret",
]  # fmt: skip
