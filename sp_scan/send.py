"""Sending: the taproot outputs that pay a list of silent-payments addresses, and BIP375 ECDH shares.

`create_outputs`, `shared_secret` and `ecdh_share` come from `sp_scan.backend` (with the C stages,
secrets only meet constant-time code); `output_key` and `ecdh_from_share` work on public values and
are the reference's.
"""

from .backend import create_outputs, ecdh_share, send_shared_secret as shared_secret
from .reference.send import ecdh_from_share, output_key
from .types import InputKey

__all__ = ["InputKey", "create_outputs", "ecdh_from_share", "ecdh_share", "output_key", "shared_secret"]
