"""Write the sample chain of this folder, deterministically: a regtest chain Bitcoin Core's validation accepted.

The chain is tests/kernelchain.py's `build_sample_chain`, run through
libbitcoinkernel (py-bitcoinkernel, the dev extra) in a temporary directory;
every block and its spent outputs are read back from the kernel. The
expected file records what the sender side paid the test wallet.

Usage (from the repository root, with the dev environment):
    python vectors/chain/generate.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import kernelchain  # noqa: E402


def expected(chain: kernelchain.KernelChain) -> dict:
    """The tip, the test wallet, what was paid to it (with the height spending each output) and every tweak."""
    wallet = kernelchain.TEST_WALLET
    active = chain.active()
    return {
        "network": "regtest",
        "tip": {"height": chain.tip_height, "hash": chain.tip_hash[::-1].hex()},
        "wallet": {"scan_key_file": "../blocks/test-wallet.scan", "spend_pubkey": wallet.spend_pubkey33.hex(), "labels": list(wallet.labels)},
        "found": [f.to_json() | {"spent_height": f.spent_height} for f in chain.found(wallet)],
        "tweaks": [{"height": b.height, "txid": t.txid32[::-1].hex(), "tweak": t.tweak33.hex()} for b in active for t in chain.tweaks(b.height)],
        "transactions": [
            {"height": b.height, "txid": t.txid32[::-1].hex(), "name": t.name, "inputs": list(t.kinds), "sp": t.tweak33 is not None}
            for b in active
            for t in b.txs
        ],
    }


def files(chain: kernelchain.KernelChain) -> dict[str, str]:
    """Every generated file of this folder by name: NNNN.hex and NNNN.spent.hex per height, expected.json."""
    out = {}
    for h in range(chain.tip_height + 1):
        out[f"{h:04d}.hex"] = chain.block(h).hex() + "\n"
        out[f"{h:04d}.spent.hex"] = chain.spent(h).hex() + "\n"
    out["expected.json"] = json.dumps(expected(chain), indent=1) + "\n"
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as datadir:
        chain = kernelchain.build_sample_chain(Path(datadir))
        written = files(chain)
        chain.close()
    for stale in HERE.glob("[0-9]*.hex"):
        if stale.name not in written:
            stale.unlink()
    for name, text in written.items():
        (HERE / name).write_text(text)
    size = sum(len(t) for t in written.values())
    exp = json.loads(written["expected.json"])
    print(f"chain: heights 0-{exp['tip']['height']}, {size:,} bytes, {len(exp['tweaks'])} tweaks, {len(exp['found'])} outputs to the wallet")


if __name__ == "__main__":
    main()
