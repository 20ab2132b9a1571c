"""`sp-scan serve`: the BlindBit Oracle v1 HTTP API (and v2 gRPC) over a tweak index.

Light-client wallets (spdk's `backend-blindbit-v1` and `-v2`, Dana, BlindBit Desktop) point at it
for per-block tweaks, filters, UTXOs and spent indexes. Answers are built once per block and
served from a cache; every listener is held to the per-IP and total limits of `limits`.

```python
import asyncio
from sp_scan.server import Server, serve

asyncio.run(serve(Server("tweaks.db", port=8000)))   # until Ctrl-C / SIGTERM
```
"""

from .answers import AnswerCache, ChainView, Readers
from .app import BlindBitV1
from .limits import Gate, Limits, ip_group
from .service import Server, SyncChild, serve, sync_command

__all__ = ["AnswerCache", "BlindBitV1", "ChainView", "Gate", "Limits", "Readers", "Server", "SyncChild", "ip_group", "serve", "sync_command"]
