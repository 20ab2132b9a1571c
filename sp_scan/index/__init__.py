"""The tweak index: every block's silent-payments data computed once, kept in an embedded store.

```python
from sp_scan.index import Index
from sp_scan.node import RestNode

node = RestNode("http://127.0.0.1:8332")
index = Index.create("tweaks.db", "main")        # or Index.open("tweaks.db")
index.sync(node)                                 # to the node's tip; reorgs are followed
for m in index.scan(receiver, start=900_000):   # IndexMatch: height, txid32, vout, amount, found, spent
    ...
index.tweaks(900_000, dust_limit=1000, cut_through=True)   # what a light-client server serves
```

Three parts: `store` (SQLite; the only SQL), `sync` (sources -> blocks -> store; reorgs), `scan`
(partitions of packed buffers scanned in C, for one wallet or many in one pass); `tweak_index` holds
`Index`, the API over them, and `mempool` the node's mempool beside the blocks. `cluster` scans the
partitions on a Dask cluster; it needs the dist extra and is imported only by whoever uses it. Heights are ints; hashes are 32 bytes in internal
byte order unless a name says hex. A height that is not indexed raises `HeightError`; a missing,
truncated, corrupt, other-version or other-network file raises `IndexStoreError`, as does any
read of a malformed row (never a wrong answer).
"""

from ..retry import Retry
from .scan import Partition, scan_partition, scan_partition_wallets
from .store import NETWORKS
from .sync import BlockFiles, SyncStats
from .tweak_index import Index

__all__ = ["NETWORKS", "BlockFiles", "Index", "Partition", "Retry", "SyncStats", "scan_partition", "scan_partition_wallets"]
