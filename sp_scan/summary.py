"""Prevouts summary: smallest outpoint, A, input_hash and the light-client tweak (BIP352).

`summarize(inputs)` (from `sp_scan.backend`) gives a `Summary`, or None when the transaction is
not a silent-payments transaction; `summarize_keys` does the same from keys already extracted.
"""

from .backend import summarize
from .reference.summary import summarize_keys

__all__ = ["summarize", "summarize_keys"]
