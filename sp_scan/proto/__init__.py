"""BlindBit Oracle v2's messages (blindbit_oracle.proto) and their generated module (see generate.py): the wire
format `sp-scan serve --grpc-port` answers in (`sp_scan.server.v2`) and the wallet's `--grpc` source reads."""
