"""`sp-scan serve`: the BlindBit Oracle v1 HTTP API over a tweak index.

Light-client wallets (spdk's `backend-blindbit-v1`, Dana) point at it for per-block tweaks,
filters, UTXOs and spent indexes. Routes are adapters: parse the request, ask the index's
read API, serialize; the index stores everything as served, so a request costs a row read.

```python
import asyncio
from sp_scan.server import Server, serve

asyncio.run(serve(Server("tweaks.db", port=8000)))   # until Ctrl-C / SIGTERM
```
"""

from .app import Readers, create_app
from .service import Server, SyncChild, serve, sync_command

__all__ = ["Readers", "Server", "SyncChild", "create_app", "serve", "sync_command"]
