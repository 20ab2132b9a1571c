"""The wire protocols' shapes, one module each, imported by the server that answers them and the wallet source
that reads them: BlindBit Oracle v1's routes and /info flags (`blindbit_v1`), the Electrum protocol's
silent-payments methods (`electrum_sp`), and BlindBit Oracle v2's messages (blindbit_oracle.proto and their
generated module, see generate.py: what `sp-scan serve --grpc-port` answers in and the `--grpc` source reads)."""
