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
class Pow:
    """A chain's proof-of-work rules as Bitcoin Core's consensus params name them, and a checkpoint.

    Attributes:
        limit: powLimit, the easiest target a header may have.
        interval: blocks between retargets (nPowTargetTimespan / nPowTargetSpacing).
        spacing: nPowTargetSpacing, seconds.
        min_difficulty: fPowAllowMinDifficultyBlocks: a block more than 2 × spacing after its parent may
            have the limit's nBits (the test networks' 20-minute rule).
        retarget: False for fPowNoRetargeting (regtest).
        bip94: enforce_BIP94 (testnet4): a retarget starts from the period's first block, and the first
            block of a period is at most 600 s older than its parent.
        checkpoint: (height, hash in display hex) of a block of the chain.
    """

    limit: int
    checkpoint: tuple[int, str]
    interval: int = 2016
    spacing: int = 600
    min_difficulty: bool = False
    retarget: bool = True
    bip94: bool = False


TAPROOT_ACTIVATION = 709_632
"""Mainnet's first height with taproot: where an index or wallet starts by default on main (others start at 0)."""

_EASY = (1 << 224) - 1  # 00000000ffff…ff: main's and the testnets' powLimit
# Checkpoints: Core's defaultAssumeValid blocks (hash, and the height its comment names) in bitcoin/bitcoin's
# src/kernel/chainparams.cpp at commit 284c42a3ceb98587895935139984c52e9958005d; regtest's is its genesis block.
_POW = {
    "main": Pow(_EASY, (912_683, "00000000000000000000611fd22f2df7c8fbd0688745c3a6c3bb5109cc2a12cb")),
    "test": Pow(_EASY, (4_550_000, "0000000000000065c6c38258e201971a3fdfcc2ceee0dd6e85a6c022d45dee34"), min_difficulty=True),
    "testnet4": Pow(_EASY, (91_000, "000000000000000180a58e7fa3b0db84b5ea76377524894f53660d93ac839d9b"), min_difficulty=True, bip94=True),
    "signet": Pow(0x377AE << 216, (267_665, "000000128586e26813922680309f04e1de713c7542fee86ed908f56368aefe2e")),
    "regtest": Pow(
        (1 << 255) - 1, (0, "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206"), interval=144, min_difficulty=True, retarget=False
    ),
}


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
        pow: its proof-of-work rules and checkpoint (signet's block signatures are not checked: its
            challenge is out of scope, only its nBits and hashes are).
    """

    name: str
    family: str
    hrp: str
    coin: int
    genesis: str
    segwit_hrp: str
    base58: tuple[int, int]
    pow: Pow


_TABLE = (
    Network("main", MAIN, "sp", 0, "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f", "bc", (0x00, 0x05), _POW["main"]),
    Network("test", TEST, "tsp", 1, "000000000933ea01ad0ee984209779baaec3ced90fa3f408719526f8d77f4943", "tb", (0x6F, 0xC4), _POW["test"]),
    Network("testnet4", TEST, "tsp", 1, "00000000da84f2bafbbc53dee25a72ae507ff4914b867c565be350b0da8bf043", "tb", (0x6F, 0xC4), _POW["testnet4"]),
    Network("signet", TEST, "tsp", 1, "00000008819873e925422c1ff0f99f7cc9bbb232af63a077a480a3633bee1ef6", "tb", (0x6F, 0xC4), _POW["signet"]),
    Network("regtest", TEST, "sprt", 1, "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206", "bcrt", (0x6F, 0xC4), _POW["regtest"]),
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

