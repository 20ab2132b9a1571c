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
        hrp: the silent-payments address prefix: "sp" and "tsp" (BIP352), "sprt" for regtest (as
            rust-silentpayments/spdk and Sparrow's drongo write it).
        coin: the BIP44 coin type of its keys (0 mainnet, 1 the test networks).
    """

    name: str
    family: str
    hrp: str
    coin: int


_TABLE = (
    Network("main", MAIN, "sp", 0),
    Network("test", TEST, "tsp", 1),
    Network("testnet4", TEST, "tsp", 1),
    Network("signet", TEST, "tsp", 1),
    Network("regtest", TEST, "sprt", 1),
)
NETWORKS: tuple[str, ...] = tuple(n.name for n in _TABLE)
"""Core's chain names, the networks an index can be built for."""

ALIASES = {"mainnet": "main", "bitcoin": "main", "testnet": "test", "testnet3": "test"}
"""Other names people use for them (accepted by `get`, never stored)."""

HRPS = ("sp", "tsp", "sprt")
"""The address prefixes: mainnet, the public test networks, regtest."""

_BY_NAME = {n.name: n for n in _TABLE}


def get(name: str) -> Network:
    """The network called `name`: a chain name or an alias (a family name is its first network: main, test).

    Raises:
        KeyError: no such network.
    """
    return _BY_NAME[ALIASES.get(name, name)]

