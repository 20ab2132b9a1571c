"""Side-by-side benchmarks of sp-scan against libsecp256k1 0.8, btclib-wallet and the BIP reference."""
