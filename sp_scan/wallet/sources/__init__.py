"""Where a wallet learns about blocks: one interface, one module per source (`--db`, `--rest`/`--rpc`,
`--blindbit`, `--grpc`, `--electrum`, `--cake`).

A source only answers; the sync loop (`sp_scan.wallet.sync`) checks the answers, scans and writes.

`WalletSource` (the chain as one server or node sees it):
- `name`: how messages name it ("BlindBit at http://…"); `received`: bytes read off the wire so far.
- `network()`: Core's chain name (main, test, testnet4, signet, regtest).
- `tip_height()`, `block_hash(height)` -> hash32 (internal order): how the loop finds forks. Before
  each round the loop compares its stored hashes, newest first, with `block_hash` and rolls back
  above the highest one that still agrees.
- `blocks(start, stop)`: one `SourceBlock` per height start..stop, ascending, none skipped (a
  generator). It may fetch far ahead (threads, many requests in flight); the loop closes the
  generator on every exit, and closing must stop that work. A source whose answers arrive as a stream of history entries
  (Frigate's `{height, tx_hash, tweak_key}`, Cake's per-block tweaks) still yields every height:
  the hashes of heights without entries come from its headers.
- `mempool()`: the node's or server's unconfirmed eligible txs as `BlockTxs` (tweaks paired),
  or None when it has no mempool to give.
- `work(lo, hi)`: the chain work of its headers of heights lo..hi, checked (`sp_scan.headers`), or None
  when it gives no headers (the loop compares a fork's work with the wallet's branch before following it).
- `close()`.
- `proves`: True when the source is also a `Prover` (node, index, Electrum servers), False for BlindBit.

`Prover` (a source that proves outputs in their blocks: the sync's own source when it `proves`, or the
one `--verify-with` names for a BlindBit sync):
- `name`, `network()`, `tip_height()`, `close()` as a source's; `complete`: True when it sees whole blocks (a node, an
  index), so that an output it does not show is not in the block; False for an Electrum server, which
  proves the transactions it has but cannot prove that another does not exist.
- `outputs(height, hash32, txids32)`: {txid32: [(vout, output32, amount), …]} of the taproot outputs of
  those txs it proves in its block of that height, which must have that hash (None when its block
  there is another: the two chains differ; HeightError when it holds no block there); a txid it
  cannot prove there is left out.

Every source is built the same way, `Cls(url, *, options)`, and is a context manager (`with` closes it);
`open(url, **options)` builds the one a URL names, `open_prover(url, **options)` the prover:

| URL | source |
|---|---|
| a path (no `://`) | `index.IndexSource`: a tweak index file |
| `rest+http://HOST:PORT`, `rpc+http://HOST:PORT` (or https) | `node.NodeSource`: a Core node's REST or RPC |
| `http://HOST:PORT` (or https, with a path) | `blindbit.BlindBitSource`: BlindBit Oracle v1 |
| `grpc://HOST:PORT`, `grpcs://` (TLS) | `blindbit_v2.BlindBitV2Source`: BlindBit Oracle v2 |
| `tcp://HOST:PORT`, `ssl://` (TLS) | `frigate.FrigateSource`: a Frigate server (given the scan key) |
| `cake+tcp://HOST:PORT`, `cake+ssl://` | `cake.CakeSource`: Cake's electrs |

A source retries what its transport allows (a `Retry`: doubling waits, by default within `DEADLINE`
seconds a request, retries included) before it raises `ServerError` naming the request; the loop does
not retry, and what a source raises ends the sync (naming the height to resume at).

`SourceBlock` (what the source says of one height):
- `height`, `hash32`, `prev32` (None when the source does not say: forks are then found between
  rounds through `block_hash`; a prev32 that is not the previous block's hash ends the round).
- `header80`: the block's header when the source gives it (the Electrum sources, their headers checked
  by `sp_scan.headers`), else None.
- `proven`: True when the outputs `txs` gives are proven in the block (a node's or an index's whole
  block, an Electrum server's transaction and merkle proof); False for a server's word (BlindBit).
- `tweaks33`: the 33-byte tweaks (input_hash·A) of the block's eligible txs the source serves, in
  block order (after its dust and cut-through rules), packed.
- `wants_keys0`: False when `txs` gives the outputs outright (an index, a node, Cake, Frigate's
  reported txs). True when the source must be told what to look for before it fetches outputs
  (BlindBit v1: its new-UTXO filter; v2: 8-byte output prefixes): the loop then computes, for
  every tweak, the k = 0 output key of the address and of each label (`Keys0`) and passes them.
  The keys are public outputs-to-be, never the scan key; a source never sees the scan key, except
  Frigate's, which the user hands it explicitly (--share-scan-key).
- `txs(keys0)`: `BlockTxs`, the taproot outputs (vout, x-only key, amount) of the txs that may pay
  the wallet, in block order: all eligible txs, or only those the source's filter lets through
  for keys0 (fetched only then: a source must not download outputs the filter rules out). Each
  tx carries its tweak when the source pairs them; BlindBit v1's /utxos does not, and the loop
  pairs each tx with the tweak whose k = 0 key it holds.
- `spends(outpoints36, outputs32)`: of the wallet's unspent outpoints (sorted, 36 bytes each) and
  their x-only keys (same order), the `Spend`s this block makes (a node: its inputs; BlindBit v1:
  spent filter, then /spent-index on a hit; v2: the 8-byte key prefixes of the outputs the block
  spends; Electrum servers: the history of each output's script).

What the loop checks before it writes: heights in order, 32-byte hashes (the network's checkpoint at its
height; a header, when given, hashing to the hash and meeting its own nBits; a bare hash from an unproven
source meeting the network's proof-of-work limit), widths and counts within
`MAX_BLOCK_TXS` / `MAX_BLOCK_OUTPUTS`, amounts within the money supply, every tweak a point, every
spend one of the outpoints it asked about. A found output is the loop's own scan of the outputs
against the tweak (P = B_m + t_k·G), never the source's claim. What fails a check raises
`SourceError` in one line, and the block is not written. A source never writes the wallet.
"""

from __future__ import annotations

from pathlib import Path

from sp_scan.errors import SourceURLError

from .base import (
    DEADLINE, MAX_BLOCK_OUTPUTS, MAX_BLOCK_TXS, MAX_MONEY, RETRY, BlockTxs, Closes, Keys0, Prover, WalletSource, SourceBlock, Spend, endpoint,
    taproot_outputs,
)  # fmt: skip

__all__ = [
    "DEADLINE", "MAX_BLOCK_OUTPUTS", "MAX_BLOCK_TXS", "MAX_MONEY", "RETRY", "BlockTxs", "Closes", "Keys0", "Prover", "WalletSource",
    "SourceBlock", "Spend", "endpoint", "open", "open_prover", "taproot_outputs",
]  # fmt: skip

_SCHEMES = ("rest+http", "rest+https", "rpc+http", "rpc+https", "http", "https", "grpc", "grpcs", "tcp", "ssl", "cake+tcp", "cake+ssl")


def open(url: str | Path, **options) -> WalletSource:
    """The source `url` names (see the table in the module docstring), built with `options`.

    Args:
        url: a path or a URL.
        options: keyword options of that source (retry, timeout; dust_limit, cut_through for BlindBit; cookie_file,
            user, password for RPC; scan_key32, spend_pubkey33, labels for Frigate), those it does not take refused.

    Raises:
        SourceURLError: a scheme no source has, or a malformed URL.
        TypeError: an option that source does not take.
        As the source's constructor (IndexStoreError for a missing index, ConfigError without grpcio, …).
    """
    text = str(url)
    scheme = text.partition("://")[0] if "://" in text else ""
    if scheme and scheme not in _SCHEMES:
        raise SourceURLError(f"no source is named by {scheme}:// (one of {', '.join(s + '://' for s in _SCHEMES)} or a path)")
    if not scheme:
        from .index import IndexSource

        return IndexSource(url, **options)
    if scheme.startswith(("rest+", "rpc+")):
        from .node import NodeSource

        return NodeSource(text, **options)
    if scheme in ("http", "https"):
        from .blindbit import BlindBitSource

        return BlindBitSource(text, **options)
    if scheme in ("grpc", "grpcs"):
        from .blindbit_v2 import BlindBitV2Source

        return BlindBitV2Source(text, **options)
    if scheme in ("tcp", "ssl"):
        from .frigate import FrigateSource

        return FrigateSource(text, **options)
    from .cake import CakeSource

    return CakeSource(text, **options)


def open_prover(url: str | Path, **options) -> Prover:
    """The `Prover` `url` names: an index file (a path), a node (`rest+http://`, `rpc+http://`; `http://` is a
    node's REST here) or an Electrum server (`tcp://`, `ssl://`: transactions under merkle proofs).

    Raises:
        SourceURLError: a URL that names no prover (BlindBit proves nothing).
        As `open`.
    """
    text = str(url)
    scheme = text.partition("://")[0] if "://" in text else ""
    if scheme in ("http", "https"):
        return open(f"rest+{text}", **options)
    if scheme in ("tcp", "ssl"):
        from .electrum import ElectrumSource

        return ElectrumSource(text, **options)
    if scheme and not scheme.startswith(("rest+", "rpc+")):
        raise SourceURLError(f"{text[:80]!r} names no prover: a node's REST (http://HOST:PORT), its RPC (rpc+http://), an Electrum server (tcp:// or ssl://) or an index file")
    return open(url, **options)
