"""sp-scan: Silent Payments (BIP352) scanning, sending and addresses."""
