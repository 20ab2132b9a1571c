"""Silent-payment outputs in PSBTs (BIP375 over PSBT version 2, BIP370).

- `codec`: `Psbt`, always well-formed (parsing and building refuse what BIP174/BIP370/BIP375
  forbid in the encoding itself), `parse`, and serialization;
- `inputs`: what BIP352 makes of each input (`InputInfo`);
- `rules`: the checks that need the whole transaction, in BIP375's order:
  `check_ecdh_coverage`, `check_input_eligibility`, `check_output_scripts`; `verify` runs them all;
- `roles`: functions that return a new `Psbt`: `add_shares` (a signer's ECDH shares and DLEQ
  proofs) and `compute_outputs` (the output scripts once every eligible input is covered);
- `spend`: spending silent-payment outputs (BIP376): `spend_fields` (the Updater's input
  fields), `sign_sp_inputs` (the Signer, with BIP375's duties for silent-payment outputs) and
  `finalize_sp_inputs` (the Input Finalizer);
- `tx`: the transaction a PSBT describes: `unsigned_tx`, BIP341's `taproot_sighash`, and `extract`
  (the Transaction Extractor: the raw transaction of a finalized PSBT);
- `fields`: the key types (`psbt.fields.GLOBAL_VERSION`, …), their widths and names.

Every failure is a `PSBTError` whose `rule` names the BIP375 check: "psbt structure", "ecdh
coverage", "input eligibility" or "output scripts"; or "sp spend" for what BIP376's Signer and
Input Finalizer refuse.
"""

from . import fields
from .codec import Psbt, SPOutput, parse
from .fields import COVERAGE, ELIGIBILITY, MAGIC, OUTPUT_SCRIPTS, SP_SPEND, STRUCTURE
from .inputs import InputInfo
from .roles import add_shares, compute_outputs
from .rules import Status, check_ecdh_coverage, check_input_eligibility, check_output_scripts, verify
from .spend import finalize_sp_inputs, sign_sp_inputs, sp_spend_inputs, spend_fields
from .tx import UnsignedTx, extract, taproot_sighash, unsigned_tx

__all__ = [
    "COVERAGE", "ELIGIBILITY", "MAGIC", "fields", "OUTPUT_SCRIPTS", "SP_SPEND", "STRUCTURE", "InputInfo", "Psbt", "SPOutput",
    "Status", "UnsignedTx", "add_shares", "check_ecdh_coverage", "check_input_eligibility", "check_output_scripts",
    "compute_outputs", "extract", "finalize_sp_inputs", "parse", "sign_sp_inputs", "sp_spend_inputs", "spend_fields",
    "taproot_sighash", "unsigned_tx", "verify",
]  # fmt: skip
