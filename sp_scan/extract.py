"""Input classification: the public key an input contributes to BIP352, if any.

The type of an input is decided by the scriptPubKey of the output it spends, never by its
scriptSig or witness. `input_pubkey` returns a 33-byte compressed key (P2PKH, P2SH-P2WPKH,
P2WPKH), a 32-byte x-only key (P2TR), or None when the input is not eligible; `tx_pubkeys` the
keys of a whole transaction, or None when it spends segwit v2+. Both come from `sp_scan.backend`;
the script templates are the reference's, which both backends follow.
"""

from .backend import input_pubkey, tx_pubkeys
from .reference.extract import NUMS_H, ScriptType, pushes, script_type, spends_unknown_segwit

__all__ = ["NUMS_H", "ScriptType", "input_pubkey", "pushes", "script_type", "spends_unknown_segwit", "tx_pubkeys"]
