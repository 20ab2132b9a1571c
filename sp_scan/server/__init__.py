"""`sp-scan serve`: the BlindBit Oracle v1 HTTP API (and v2 gRPC) over a tweak index.

Light-client wallets (spdk's `backend-blindbit-v1` and `-v2`, Dana, BlindBit Desktop) point at it
for per-block tweaks, filters, UTXOs and spent indexes. Answers are built once per block and
served from a cache; every listener is held to the per-IP and total limits of `limits`.

```python
import asyncio
from sp_scan.server import Server, serve

asyncio.run(serve(Server("tweaks.db", port=8000)))   # until Ctrl-C / SIGTERM
```

Names are imported on first use, so `sp_scan.server.limits` alone stays light.
"""

import importlib

_EXPORTS = {
    "AnswerCache": "answers", "ChainView": "answers", "Readers": "answers", "BlindBitV1": "app",
    "Gate": "limits", "Limits": "limits", "ip_group": "limits",
    "Server": "service", "SyncChild": "service", "serve": "service", "sync_command": "service",
}  # fmt: skip
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
