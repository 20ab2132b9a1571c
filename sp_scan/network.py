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
        genesis: its genesis block's hash, display hex (how a server that names no network is placed).
        segwit_hrp: the prefix of its segwit addresses (bc, tb, bcrt).
        base58: the version bytes of its base58 addresses (P2PKH, P2SH).
    """

    name: str
    family: str
    hrp: str
    coin: int
    genesis: str
    segwit_hrp: str
    base58: tuple[int, int]


_TABLE = (
    Network("main", MAIN, "sp", 0, "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f", "bc", (0x00, 0x05)),
    Network("test", TEST, "tsp", 1, "000000000933ea01ad0ee984209779baaec3ced90fa3f408719526f8d77f4943", "tb", (0x6F, 0xC4)),
    Network("testnet4", TEST, "tsp", 1, "00000000da84f2bafbbc53dee25a72ae507ff4914b867c565be350b0da8bf043", "tb", (0x6F, 0xC4)),
    Network("signet", TEST, "tsp", 1, "00000008819873e925422c1ff0f99f7cc9bbb232af63a077a480a3633bee1ef6", "tb", (0x6F, 0xC4)),
    Network("regtest", TEST, "sprt", 1, "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206", "bcrt", (0x6F, 0xC4)),
)
NETWORKS: tuple[str, ...] = tuple(n.name for n in _TABLE)
"""Core's chain names, the networks an index can be built for."""

ALIASES = {"mainnet": "main", "bitcoin": "main", "testnet": "test", "testnet3": "test"}
"""Other names people use for them (accepted by `get`, never stored)."""

HRPS = ("sp", "tsp", "sprt")
"""The address prefixes: mainnet, the public test networks, regtest."""

_BY_NAME = {n.name: n for n in _TABLE}
BY_GENESIS = {n.genesis: n.name for n in _TABLE}
"""Chain names by genesis hash (display hex)."""


def get(name: str) -> Network:
    """The network called `name`: a chain name or an alias (a family name is its first network: main, test).

    Raises:
        KeyError: no such network.
    """
    return _BY_NAME[ALIASES.get(name, name)]

