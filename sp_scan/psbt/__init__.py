"""Silent-payment outputs in PSBTs (BIP375 over PSBT version 2, BIP370).

- `codec`: `Psbt`, always well-formed (parsing and building refuse what BIP174/BIP370/BIP375
  forbid in the encoding itself), `parse`, and serialization;
- `inputs`: what BIP352 makes of each input (`InputInfo`);
- `rules`: the checks that need the whole transaction, in BIP375's order:
  `check_ecdh_coverage`, `check_input_eligibility`, `check_output_scripts`; `verify` runs them all;
- `roles`: functions that return a new `Psbt`: `add_shares` (a signer's ECDH shares and DLEQ
  proofs) and `compute_outputs` (the output scripts once every eligible input is covered);
- `fields`: the key types (`psbt.fields.GLOBAL_VERSION`, …), their widths and names.

Every failure is a `PSBTError` whose `rule` names the BIP375 check: "psbt structure", "ecdh
coverage", "input eligibility" or "output scripts".
"""

from . import fields
from .codec import Psbt, SPOutput, parse
from .fields import COVERAGE, ELIGIBILITY, MAGIC, OUTPUT_SCRIPTS, STRUCTURE
from .inputs import InputInfo
from .roles import add_shares, compute_outputs
from .rules import Status, check_ecdh_coverage, check_input_eligibility, check_output_scripts, verify

__all__ = [
    "COVERAGE", "ELIGIBILITY", "MAGIC", "fields", "OUTPUT_SCRIPTS", "STRUCTURE", "InputInfo", "Psbt", "SPOutput", "Status",
    "add_shares", "check_ecdh_coverage", "check_input_eligibility", "check_output_scripts", "compute_outputs", "parse",
    "verify",
]  # fmt: skip
