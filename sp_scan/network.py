"""The one network table: Core's chain names, the address prefix and the key family of each.

Keys, descriptors and addresses only tell mainnet from the test networks (the family: "main" or
"test"); an index and a node name the chain itself ("main", "test", "testnet4", "signet",
"regtest", as Core's `getblockchaininfo` says it).
"""

from __future__ import annotations

from dataclasses import dataclass

MAIN, TEST = "main", "test"
"""The two families keys, descriptors and addresses tell apart."""


@dataclass(frozen=True, slots=True)
class Network:
    """One chain.

    Attributes:
        name: Core's chain name.
        family: MAIN or TEST.
        hrp: the silent-payments address prefix, "sp" or "tsp".
        coin: the BIP44 coin type of its keys (0 mainnet, 1 the test networks).
        segwit_hrp: the prefix of its segwit addresses (bc, tb, bcrt).
        base58: the version bytes of its base58 addresses (P2PKH, P2SH).
    """

    name: str
    family: str
    hrp: str
    coin: int
    segwit_hrp: str
    base58: tuple[int, int]


_TABLE = (
    Network("main", MAIN, "sp", 0, "bc", (0x00, 0x05)),
    Network("test", TEST, "tsp", 1, "tb", (0x6F, 0xC4)),
    Network("testnet4", TEST, "tsp", 1, "tb", (0x6F, 0xC4)),
    Network("signet", TEST, "tsp", 1, "tb", (0x6F, 0xC4)),
    Network("regtest", TEST, "tsp", 1, "bcrt", (0x6F, 0xC4)),
)
NETWORKS: tuple[str, ...] = tuple(n.name for n in _TABLE)
"""Core's chain names, the networks an index can be built for."""

ALIASES = {"mainnet": "main", "bitcoin": "main", "testnet": "test", "testnet3": "test"}
"""Other names people use for them (accepted by `get`, never stored)."""

HRPS = ("sp", "tsp")
"""The address prefixes: mainnet, then every test network."""

_BY_NAME = {n.name: n for n in _TABLE}


def get(name: str) -> Network:
    """The network called `name`: a chain name or an alias (a family name is its first network: main, test).

    Raises:
        KeyError: no such network.
    """
    return _BY_NAME[ALIASES.get(name, name)]

