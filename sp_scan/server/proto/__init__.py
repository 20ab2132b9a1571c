"""BlindBit Oracle v2's messages (blindbit_oracle.proto) and their generated module (see generate.py)."""
