"""The silent-payments methods of the Electrum protocol, as `sp-scan serve --electrum-port` answers them
(`sp_scan.server.electrum`) and the wallet's `--electrum` and `--cake` sources call them."""

FRIGATE_SUBSCRIBE = "blockchain.silentpayments.subscribe"
"""Frigate's: the scan private key and spend public key handed over; the server scans, history notified."""
FRIGATE_UNSUBSCRIBE = "blockchain.silentpayments.unsubscribe"
CAKE_TWEAKS_SUBSCRIBE = "blockchain.tweaks.subscribe"
"""Cake's electrs: tweaks and output keys per block streamed, the client scans."""
CAKE_BLOCK_TWEAKS = "blockchain.block.tweaks"
CAKE_TWEAKS_GET = "blockchain.tweaks.get"
