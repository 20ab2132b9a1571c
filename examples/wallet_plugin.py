"""A silent-payments plugin sketch in the shape Electrum's plugins take: receive, list coins, build a PSBT, sign it
through a callback that holds the spend key.

An Electrum plugin is a package (`electrum/plugins/NAME/`) whose `__init__.py` names it and whose GUI module holds
`class Plugin(BasePlugin)` with methods marked `@hook` that Electrum calls (`load_wallet`, `close_wallet`, …); the
plugin keeps its own state beside the host wallet. Here `BasePlugin` and `hook` are small stand-ins so that the
sketch runs alone; the silent-payments part uses only `sp_scan.wallet` and `sp_scan.psbt`'s public API. The spend key
never reaches the plugin: the host's keystore signs through `sign_psbt`, as Electrum's keystores sign.

    SP_SCAN_KEY=… SP_SCAN_SPEND_KEY=… python examples/wallet_plugin.py DIR --descriptor-file test.desc --network regtest --source sample.db --pay ADDRESS:SATS

runs a host session: the plugin loads (creating DIR/sp.wallet from the descriptor once), syncs from the source,
prints its receiving addresses and coins, builds a PSBT paying ADDRESS, has the host keystore sign it, and prints
the signed transaction's hex (broadcast it with `sp-scan wallet broadcast` or `Wallet.broadcast`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from sp_scan import psbt
from sp_scan.wallet import Wallet, WalletOutput, sources


def hook(method: Callable) -> Callable:
    """Stand-in for Electrum's `electrum.plugin.hook`: marks a method the host calls by name."""
    method.is_hook = True
    return method


class BasePlugin:
    """Stand-in for Electrum's `electrum.plugin.BasePlugin` (the host's plugin manager, config and name)."""

    def __init__(self, parent: object, config: dict, name: str) -> None:
        self.parent, self.config, self.name = parent, config, name


class Plugin(BasePlugin):
    """Silent payments beside the host wallet, kept in a wallet file of its own."""

    wallet: Wallet | None = None

    @hook
    def load_wallet(self, host_wallet: object, window: object) -> None:
        """Open the plugin's wallet file (made from the host's descriptor the first time)."""
        path = Path(self.config["wallet_dir"]) / "sp.wallet"
        if not path.exists():
            Wallet.from_descriptor(path, self.config["descriptor"], network=self.config["network"]).close()
        self.wallet = Wallet.open(path)

    @hook
    def close_wallet(self, host_wallet: object) -> None:
        if self.wallet is not None:
            self.wallet.close()
            self.wallet = None

    def synchronize(self, url: str, scan_key32: bytes) -> None:
        """Bring the wallet up to the source's tip (Electrum's network thread would run `sync_async`)."""
        with sources.open(url) as source:
            self.wallet.sync(source, scan_key32)

    def receive_addresses(self) -> list[str]:
        """The address to show for receiving, then each label's (no scan key needed)."""
        return [self.wallet.address(), *(self.wallet.address(m) for m in self.wallet.labels if m != 0)]

    def coins(self) -> list[WalletOutput]:
        """The coins for the host's coin list: unspent, no pending spend holding them."""
        return [o for o in self.wallet.unspent() if o.pending is None]

    def make_psbt(self, outputs: list[tuple[str, int]], fee_rate: str) -> psbt.Psbt:
        """An unsigned PSBT paying `outputs` (its coins reserved until signed and broadcast, or abandoned)."""
        unsigned, _ = self.wallet.create_psbt(outputs, fee_rate)
        return unsigned

    def sign(self, unsigned: psbt.Psbt, sign_psbt: Callable[[psbt.Psbt], psbt.Psbt]) -> bytes:
        """Have the host's keystore sign (`sign_psbt` holds the spend key), then finalize; the raw transaction."""
        return psbt.extract(psbt.finalize_sp_inputs(sign_psbt(unsigned)))


class Keystore:
    """The host's side: it holds the spend key and signs a PSBT's silent-payment inputs (BIP376)."""

    def __init__(self, spend_key32: bytes) -> None:
        self._key = spend_key32

    def sign_psbt(self, unsigned: psbt.Psbt) -> psbt.Psbt:
        return psbt.sign_sp_inputs(unsigned, self._key)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("wallet_dir")
    parser.add_argument("--descriptor-file", required=True, help="the host wallet's sp() descriptor (it holds the scan key)")
    parser.add_argument("--network", required=True)
    parser.add_argument("--source", required=True, help="a source URL or an index file (sp_scan.wallet.sources.open)")
    parser.add_argument("--pay", required=True, metavar="ADDRESS:SATS")
    parser.add_argument("--fee-rate", default="2")
    args = parser.parse_args(argv)
    address, _, sats = args.pay.rpartition(":")
    plugin = Plugin(None, {"wallet_dir": args.wallet_dir, "descriptor": Path(args.descriptor_file).read_text().strip(), "network": args.network}, "silent_payments")
    keystore = Keystore(bytes.fromhex(os.environ["SP_SCAN_SPEND_KEY"]))
    plugin.load_wallet(None, None)
    try:
        plugin.synchronize(args.source, bytes.fromhex(os.environ["SP_SCAN_KEY"]))
        for a in plugin.receive_addresses():
            print("receive", a)
        for o in plugin.coins():
            print("coin", f"{o.txid32[::-1].hex()}:{o.vout}", o.amount)
        raw = plugin.sign(plugin.make_psbt([(address, int(sats))], args.fee_rate), keystore.sign_psbt)
        print("signed", raw.hex())
    finally:
        plugin.close_wallet(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
