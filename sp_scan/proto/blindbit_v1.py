"""BlindBit Oracle v1 (HTTP, JSON): its routes, the /info flags and the answers' keys, as `sp-scan serve`
answers them (`sp_scan.server.app`, `routes`) and the wallet's `--blindbit` source reads them."""

from __future__ import annotations

ROUTES = {
    ("info", 0): "GET", ("block-height", 0): "GET", ("block-hash", 1): "GET", ("tweak-index", 1): "GET",
    ("tweaks", 1): "GET", ("filter", 2): "GET", ("utxos", 1): "GET", ("spent-index", 1): "GET",
    ("forward-tx", 0): "POST",
}  # fmt: skip
"""(first path segment, segments after it) -> the route's method: `/block-hash/:h`, `/filter/<kind>/:h`, ..."""

FILTER_KINDS = ("new-utxos", "spent")
"""`/filter/<kind>/:h`: the new-UTXO filter and the spent filter."""

INFO_FLAGS = {
    (False, False): "tweaks_full_basic",
    (True, False): "tweaks_full_with_dust_filter",
    (False, True): "tweaks_cut_through_with_dust_filter",
    (True, True): "tweaks_cut_through_with_dust_filter",
}
"""(dust limit > 0, cut-through) -> the /info flag saying the server fills that tweak route."""

INFO_KEYS = ("network", "height", "tweaks_only", *dict.fromkeys(INFO_FLAGS.values()))
"""The keys of /info: spdk's network name, the tip height, and which tweak routes are filled."""


def tweaks_path(height: int, dust_limit: int, cut_through: bool) -> str:
    """The tweaks of block `height`: `/tweaks/:h` (cut-through) or `/tweak-index/:h` (every eligible tx)."""
    return f"/{'tweaks' if cut_through else 'tweak-index'}/{height}?dustLimit={dust_limit}"
